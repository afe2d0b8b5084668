"""A ROAR run's source: found, checked (refused in one line before training), its masks computed once, kept
across steps (recursive), reused on a relaunch and read back with the finished run."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from attn_study import assemble
from attn_study.errors import UserError
from attn_study.roar import job
from attn_study.run import run
from tests.helpers import TINY

SMALL = [*TINY, "logger=none", "encoder=average", "encoder.hidden_size=8"]


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """An unmasked run and two recursive steps built on it (k = 0.1 by gradient, then k = 0.2: Madsen et al.'s
    defaults — steps of 0.1, ⌊k n⌋ tokens, the gold label's one-hot gradient norm)."""
    import os

    root = tmp_path_factory.mktemp("roar")
    os.environ["ATTN_STUDY_CACHE"] = str(root / "cache")
    from tests.helpers import compose_config

    run(compose_config(*SMALL), root / "base")
    for name, fraction, source in (("r10", 0.1, "base"), ("r20", 0.2, "r10")):
        cfg = compose_config(
            *SMALL,
            "roar=recursive",
            "roar.method=gradient",
            f"roar.fraction={fraction}",
            f"roar.source={root / source}",
        )
        run(cfg, root / name)
    return root


def masks(run_dir):
    return json.loads(job.masks_file(run_dir).read_text())["splits"]


def test_each_recursive_step_keeps_the_earlier_masks_and_adds_its_own(chain):
    first, second = masks(chain / "r10"), masks(chain / "r20")
    base = assemble.load(chain / "base")
    for split in ("train", "dev", "test"):
        lengths = [len(ids) for ids in base.datamodule.split(split).ids]
        for n, a, b in zip(lengths, first[split]["positions"], second[split]["positions"]):
            assert set(a) <= set(b)
            assert len(a) == int(np.floor(0.1 * n + 1e-9)) and len(b) == int(np.floor(0.2 * n + 1e-9))
    status = json.loads((chain / "r20" / "status.json").read_text())["roar"]
    assert (
        status["recursive"] and status["source"] == str((chain / "r10").resolve()) and status["source_fraction"] == 0.1
    )
    assert (status["label"], status["gradient"], status["rounding"], status["step"]) == (
        "gold",
        "one_hot_norm",
        "floor",
        0.1,
    )


def test_a_finished_roar_run_reads_its_masked_data_back(chain):
    loaded = assemble.load(chain / "r20")
    mask = loaded.datamodule.vocab.stoi["<mask>"]
    for split in ("train", "test"):
        ids = loaded.datamodule.split(split).ids
        assert [np.flatnonzero(x == mask).tolist() for x in ids] == masks(chain / "r20")[split]["positions"]


def test_a_relaunch_reuses_the_masks_of_the_same_source(chain, make_cfg, monkeypatch, tmp_path):
    def never(*args, **kwargs):
        raise AssertionError("masks computed again")

    shutil.copytree(chain / "r10", tmp_path / "r10")
    monkeypatch.setattr(job, "compute", never)
    cfg = make_cfg(
        *SMALL,
        "roar=recursive",
        "roar.method=gradient",
        "roar.fraction=0.1",
        f"roar.source={chain / 'base'}",
        "force=true",
    )
    run(cfg, tmp_path / "r10")  # trained again; the masks file is the same source's: reused
    assert masks(tmp_path / "r10") == masks(chain / "r10")


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
    names = {"MISSING": tmp_path / "nothing", "BASE": chain / "base", "R10": chain / "r10", "R20": chain / "r20"}
    names["EMPTY"] = tmp_path
    overrides = [o.split("=")[0] + "=" + str(names.get(o.split("=")[1], o.split("=")[1])) for o in overrides]
    cfg = make_cfg(*SMALL, "roar=roar", "roar.method=gradient", "roar.fraction=0.3", *overrides)
    with pytest.raises(UserError, match=says) as err:
        run(cfg, tmp_path / "job")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "job" / "checkpoints").exists()  # nothing trained
