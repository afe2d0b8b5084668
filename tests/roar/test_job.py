"""A ROAR run's source: found, checked (refused in one line before training), its masks computed once, kept
across steps (recursive), reused on a relaunch and read back with the finished run."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from attn_study.errors import UserError
from attn_study.job.plan import load_run
from attn_study.job.run import run
from attn_study.roar import job
from tests.helpers import TINY

SMALL = [*TINY, "logger=none", "encoder=average", "encoder.hidden_size=8"]


@pytest.fixture(scope="module")
def chain(trained_runs):
    """An unmasked run and two recursive steps built on it (k = 0.1 by gradient, then k = 0.2: Madsen et al.'s
    defaults — steps of 0.1, ⌊k n⌋ tokens, the gold label's one-hot gradient norm), by name: each trained once for
    the whole pytest run, to be read, never changed."""
    runs = {"base": trained_runs.get(*SMALL)}
    for name, fraction, source in (("r10", 0.1, "base"), ("r20", 0.2, "r10")):
        step = [
            *SMALL,
            "roar=recursive",
            "roar.method=gradient",
            f"roar.fraction={fraction}",
            f"roar.source={runs[source]}",
        ]
        runs[name] = trained_runs.get(*step, name=name)
    return runs


def masks(run_dir):
    return json.loads(job.masks_file(run_dir).read_text())["splits"]


def test_each_recursive_step_keeps_the_earlier_masks_and_adds_its_own(chain):
    first, second = masks(chain["r10"]), masks(chain["r20"])
    base = load_run(chain["base"])
    for split in ("train", "dev", "test"):
        lengths = [len(ids) for ids in base.datamodule.split(split).ids]
        for n, a, b in zip(lengths, first[split]["positions"], second[split]["positions"]):
            assert set(a) <= set(b)
            assert len(a) == int(np.floor(0.1 * n + 1e-9)) and len(b) == int(np.floor(0.2 * n + 1e-9))
    status = json.loads((chain["r20"] / "status.json").read_text())["roar"]
    assert status["recursive"] and status["source"] == str(chain["r10"].resolve()) and status["source_fraction"] == 0.1
    assert (status["label"], status["gradient"], status["rounding"], status["step"]) == (
        "gold",
        "one_hot_norm",
        "floor",
        0.1,
    )


def test_a_finished_roar_run_reads_its_masked_data_back(chain):
    loaded = load_run(chain["r20"])
    mask = loaded.datamodule.vocab.stoi["<mask>"]
    for split in ("train", "test"):
        ids = loaded.datamodule.split(split).ids
        assert [np.flatnonzero(x == mask).tolist() for x in ids] == masks(chain["r20"])[split]["positions"]


def test_a_relaunch_reuses_the_masks_of_the_same_source(chain, make_cfg, monkeypatch, tmp_path):
    def never(*args, **kwargs):
        raise AssertionError("masks computed again")

    shutil.copytree(chain["r10"], tmp_path / "r10")
    monkeypatch.setattr(job, "compute", never)
    cfg = make_cfg(
        *SMALL,
        "roar=recursive",
        "roar.method=gradient",
        "roar.fraction=0.1",
        f"roar.source={chain['base']}",
        "force=true",
    )
    run(cfg, tmp_path / "r10")  # trained again; the masks file is the same source's: reused
    assert masks(tmp_path / "r10") == masks(chain["r10"])


def test_the_scoring_time_recorded_is_the_source_models_pass(chain, make_cfg, monkeypatch, tmp_path):
    """``status.json``'s ``roar.scoring_seconds`` (and the masks file's ``seconds``) is the time the source's model
    took to score every split: on a clock that stands still but for 12.5 s during that pass, 12.5."""
    from types import SimpleNamespace

    now = [1000.0]
    monkeypatch.setattr(job, "time", SimpleNamespace(time=lambda: now[0], sleep=job.time.sleep))
    score_and_choose = job.score_and_choose

    def scored_in_12_5_s(*args):
        now[0] += 12.5
        return score_and_choose(*args)

    monkeypatch.setattr(job, "score_and_choose", scored_in_12_5_s)
    step = [*SMALL, "roar=recursive", "roar.method=gradient", "roar.fraction=0.1", f"roar.source={chain['base']}"]
    run(make_cfg(*step), tmp_path / "r10")
    assert json.loads((tmp_path / "r10" / "status.json").read_text())["roar"]["scoring_seconds"] == 12.5
    assert json.loads(job.masks_file(tmp_path / "r10").read_text())["seconds"] == 12.5


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        (["roar.source=MISSING"], "nothing: no such directory"),
        (["roar.source=MISSING", "force=true"], "nothing: no such directory"),  # force=true accepts unfinished runs
        (["roar.source=EMPTY", "force=true"], "not a run directory"),
        (["roar.source=BASE", "seed=14"], "differs from this run"),  # another seed: other synthetic data
        (["roar.source=R10"], "is itself masked"),
        (["roar=recursive", "roar.source=R20", "roar.fraction=0.2"], "not below this step's 0.2"),
        (["roar=recursive", "roar.source=R10", "roar.fraction=0.3"], "this step's source is the run at 0.2"),
        (["roar.fraction=0.3"], "roar.source is not set"),
        (["roar.source=BASE", "roar.method=gradients"], "no such importance method"),
    ],
)
def test_a_source_that_cannot_be_built_on_is_refused_in_one_line_before_training(
    chain, make_cfg, tmp_path, overrides, says
):
    names = {"MISSING": tmp_path / "nothing", "BASE": chain["base"], "R10": chain["r10"], "R20": chain["r20"]}
    names["EMPTY"] = tmp_path
    overrides = [o.split("=")[0] + "=" + str(names.get(o.split("=")[1], o.split("=")[1])) for o in overrides]
    cfg = make_cfg(*SMALL, "roar=roar", "roar.method=gradient", "roar.fraction=0.3", *overrides)
    with pytest.raises(UserError, match=says) as err:
        run(cfg, tmp_path / "job")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "job" / "checkpoints").exists()  # nothing trained


# -- the tie-break keys belong to the instance, not to its row in a batch (issue 41) ------------------------------


def test_truths_masks_are_the_same_for_any_batch_size_and_break_ties_by_each_instances_keys():
    """method=truth ties heavily (1 on the rationale, 0 elsewhere): at k = 0.5 each instance masks its rationale
    and then the other text tokens with the lowest keys of its own stream ``tie_keys(seed, split, index)``,
    worked out here per instance; the masks are the same with batches of 1, 7 and 64 instances (the loader
    buckets by length, so a batch's rows are not the split's order)."""
    from types import SimpleNamespace

    import torch

    from attn_study.job.components import build_datamodule
    from attn_study.roar import masking
    from tests.helpers import compose_config

    cfg = compose_config(*TINY, "dataset.source.n_train=20", "dataset.source.n_dev=12", "dataset.source.n_test=12")
    datamodule = build_datamodule(cfg)
    datamodule.setup()
    loaded = SimpleNamespace(model=torch.nn.Linear(1, 1), datamodule=datamodule)
    settings = {"method": "truth", "fraction": 0.5, "seed": 13, "token": "<mask>", "rounding": "half_up"}
    results = [
        job.score_and_choose(loaded, compose_config("roar=roar", f"roar.batch_size={size}"), settings, datamodule.data)
        for size in (1, 7, 64)
    ]
    as_lists = [{split: [a.tolist() for a in chosen] for split, chosen in r.items()} for r in results]
    assert as_lists[0] == as_lists[1] == as_lists[2]
    ties = 0
    for split, chosen in results[1].items():
        rows = datamodule.split(split)
        for i, positions in enumerate(chosen):
            text = masking.text_positions(rows, i).tolist()
            truth = [p for p in text if p in set(rows.rationales[i])]
            others = [p for p in text if p not in set(rows.rationales[i])]
            keys = masking.tie_keys(13, split, i, len(rows.ids[i]))
            wanted = int(np.floor(0.5 * len(text) + 0.5))
            by_key = sorted(truth, key=lambda p: keys[p]) + sorted(others, key=lambda p: keys[p])
            assert positions.tolist() == sorted(by_key[:wanted]), (split, i)
            ties += wanted > len(truth)
    assert ties > 20  # most instances had to choose among tied tokens


def test_a_lone_runs_missing_source_is_refused_at_once_naming_the_option(make_cfg, tmp_path, monkeypatch):
    """Outside a sweep nothing will finish the source: no wait (``sweep.wait_min`` 0), one line naming
    roar.source."""
    waits, wait_for = [], job.wait_for
    monkeypatch.setattr(job, "wait_for", lambda source, minutes: waits.append(minutes) or wait_for(source, minutes))
    cfg = make_cfg(*SMALL, "roar=roar", "roar.fraction=0.3", f"roar.source={tmp_path / 'nothing'}")
    with pytest.raises(UserError, match=r"^roar.source=.*nothing: no such directory"):
        run(cfg, tmp_path / "job")
    assert waits == [0.0]
