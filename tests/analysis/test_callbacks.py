"""The test families as Lightning callbacks: several per run, tracked during training, re-analysis
without stale keys, readable result files, and docs/lightning.md's plain-Lightning script."""

from __future__ import annotations

import json
import math
import os
import re
import runpy
import stat

import numpy as np
import pandas as pd
import pytest

from attn_study.errors import UserError
from attn_study.families import REGISTRY
from attn_study.families.jain_wallace.callback import JainWallace
from attn_study.job.analyze import analyze
from attn_study.job.run import run as run_job
from attn_study.report.cli import build_report
from tests.helpers import REPO, TINY, compose_config, wandb_run_history, wandb_run_summary

BOTH = [
    "analysis=[jain_wallace,serrano_smith]",
    "analysis.jain_wallace.steps=5",
    "analysis.jain_wallace.permutations=6",
    "analysis.jain_wallace.max_instances=20",
    "analysis.jain_wallace.heatmaps=2",
    "analysis.serrano_smith.max_instances=20",
]
TRACKED = [
    "analysis.jain_wallace.every_n_epochs=1",
    "analysis.jain_wallace.val_max_instances=12",
    "trainer.max_epochs=3",
]


# dropout: a model left in eval mode, or random numbers drawn by the tracking, would change training
TINY_RUN = [*TINY, "encoder=average", "encoder.hidden_size=8", "model.network.dropout=0.3"]


def tiny(*overrides):
    return compose_config(*TINY_RUN, *overrides)


@pytest.fixture(scope="module")
def tracked_run(trained_runs):
    """One run with both families, J&W tracked every epoch, W&B and CSV loggers (trained once for the whole pytest
    run: read, never changed), and its summary."""
    overrides = [*TINY_RUN, *BOTH, *TRACKED, "logger=[wandb,csv]"]
    return trained_runs.get(*overrides), trained_runs.summary(*overrides)


def test_two_families_in_one_run_reach_summary_json_and_the_wandb_run(tracked_run):
    run, summary = tracked_run
    on_disk = json.loads((run / "summary.json").read_text())
    in_wandb = wandb_run_summary(run)
    for key in (
        "jw/tau_grad/mean",
        "jw/adv/emax_jsd/mean",
        "ss/multi/attention/frac_removed/median",
        "ss/single/flip_table/yes_no",
        "test/acc",
    ):
        assert key in on_disk and key in in_wandb, key
        assert in_wandb[key] == pytest.approx(on_disk[key]), key
    for family in ("jain_wallace", "serrano_smith"):
        assert (run / "analysis" / family / "instances.parquet").is_file()


def test_tracking_logs_one_row_per_epoch_on_a_fixed_dev_subsample(tracked_run):
    run, _ = tracked_run
    metrics = pd.read_csv(run / "csv" / "metrics.csv")
    rows = metrics.dropna(subset=["val/jw/tau_grad/mean"])
    assert rows["epoch"].tolist() == [0, 1, 2]
    for column in ("val/jw/tau_grad/mean", "val/jw/tau_loo/mean", "val/jw/perm/median_tvd/mean"):
        assert np.isfinite(rows[column].to_numpy(float)).all(), column
    assert "val/jw/adv/emax_jsd/mean" not in metrics  # not among the tracked sub-tests
    assert "val/ss/multi/n" not in metrics  # serrano_smith was not tracked
    history = [row for row in wandb_run_history(run) if "val/jw/tau_grad/mean" in row]
    assert [row["val/jw/tau_grad/mean"] for row in history] == pytest.approx(rows["val/jw/tau_grad/mean"].tolist())

    folder = run / "analysis" / "jain_wallace"
    epochs = pd.read_csv(folder / "epochs.csv")
    assert epochs["epoch"].tolist() == [0, 1, 2]
    assert epochs["jw/tau_grad/mean"].tolist() == pytest.approx(rows["val/jw/tau_grad/mean"].tolist())
    per_instance = pd.read_parquet(folder / "epochs.parquet")
    uids = [tuple(g["uid"]) for _, g in per_instance.groupby("epoch")]
    assert len(uids) == 3 and len(uids[0]) == 12 and uids[0] == uids[1] == uids[2]
    dev = set(per_instance["uid"])
    assert all(uid.startswith("dev") for uid in dev), dev
    assert (folder / "epochs.png").is_file()


def test_tracking_does_not_change_the_trained_model(tracked_run, tmp_path):
    _, tracked = tracked_run
    plain = run_job(tiny(*BOTH, "trainer.max_epochs=3", "logger=none"), tmp_path / "plain")
    for key in ("test/loss", "test/acc", "jw/tau_grad/mean", "ss/multi/attention/frac_removed/median"):
        assert plain[key] == tracked[key] or (math.isnan(plain[key]) and math.isnan(tracked[key])), key


def test_analysing_again_replaces_a_familys_keys(make_cfg, tmp_path):
    run = tmp_path / "run"
    run_job(tiny(*BOTH, *TRACKED, "logger=csv"), run)
    first = json.loads((run / "summary.json").read_text())
    assert "jw/adv/emax_jsd/mean" in first and "ss/multi/gradient/frac_removed/median" in first

    # J&W again with one sub-test: its other keys go, Serrano & Smith's stay (its folder is unchanged)
    merged = analyze(
        compose_config(
            f"ckpt_path={run}",
            "analysis=[jain_wallace]",
            "analysis.jain_wallace.tests=[permutation]",
            "analysis.jain_wallace.permutations=4",
            "analysis.jain_wallace.max_instances=20",
            "device=cpu",
            name="analyze",
        )
    )
    assert "jw/perm/median_tvd/mean" in merged
    assert not [k for k in merged if k.startswith(("jw/tau", "jw/adv", "jw/diff", "jw/seconds/adversarial"))]
    assert merged["ss/multi/gradient/frac_removed/median"] == first["ss/multi/gradient/frac_removed/median"]
    assert merged["test/acc"] == first["test/acc"]
    folder = run / "analysis" / "jain_wallace"
    assert "tau_grad" not in pd.read_parquet(folder / "instances.parquet")
    assert (folder / "epochs.csv").is_file()  # what was tracked during training is kept
    on_disk = json.loads((run / "summary.json").read_text())
    assert on_disk == merged
    # the other family alone, fewer tests
    merged = analyze(
        compose_config(
            f"ckpt_path={run}",
            "analysis=[serrano_smith]",
            "analysis.serrano_smith.tests=[single]",
            "analysis.serrano_smith.max_instances=10",
            "device=cpu",
            name="analyze",
        )
    )
    assert not [k for k in merged if k.startswith("ss/multi")]
    assert "ss/single/flip_table/yes_no" in merged and "jw/perm/median_tvd/mean" in merged
    families = {k.split("/")[0] for k in merged} - {"test", "val", "train", "data", "run", "undefined", "warnings"}
    assert families == {"jw", "ss"}
    assert (run / "csv" / "metrics.csv").is_file() and "val/jw/tau_grad/mean" in (
        run / "csv" / "metrics.csv"
    ).read_text()
    with pytest.raises(UserError, match="no analysis chosen; give analysis=") as err:  # names what to choose from
        analyze(compose_config(f"ckpt_path={run}", "analysis=none", "device=cpu", name="analyze"))
    assert all(name in str(err.value) for name in REGISTRY)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_result_files_are_readable_by_the_group_and_others(umask_022, tmp_path):
    run = tmp_path / "run"
    cache = tmp_path / "cache"
    from attn_study.job.run import run as run_job

    run_job(tiny(*BOTH, "logger=csv", f"paths.cache_dir={cache}"), run)
    files = [
        run / "summary.json",
        run / "status.json",
        run / "analysis" / "jain_wallace" / "summary.json",
        run / "analysis" / "jain_wallace" / "instances.parquet",
        run / "analysis" / "serrano_smith" / "summary.json",
        run / "analysis" / "jain_wallace" / "fig2_tau_grad_by_class.png",
        run / "analysis" / "jain_wallace" / "heatmaps.html",
        *cache.glob("*/dataset.pkl"),
    ]
    assert len(files) == 8
    for path in files:
        assert mode(path) == 0o644, (path, oct(mode(path)))
    for folder in (run / "analysis", run / "analysis" / "jain_wallace", run / "analysis" / "serrano_smith"):
        assert mode(folder) == 0o755, (folder, oct(mode(folder)))
    report = build_report(run)
    assert mode(report) == 0o755 and mode(report / "index.html") == 0o644


def test_analysis_options_are_checked_before_training(tmp_path):
    cases = {
        "analysis.jain_wallace.split=validation": "analysis.jain_wallace.split=validation",
        "analysis.jain_wallace.max_instances=0": "analysis.jain_wallace.max_instances=0",
        "analysis.jain_wallace.tests=[correlation,bogus]": "analysis.jain_wallace.tests",
        "analysis.serrano_smith.rankings=[attention,alphabetical]": "analysis.serrano_smith.rankings",
    }
    for override, named in cases.items():
        with pytest.raises(UserError, match=re.escape(named)):
            run_job(tiny(*BOTH, override, "logger=none"), tmp_path / "run")
        assert not (tmp_path / "run" / "checkpoints").exists(), override


def test_a_module_without_the_stages_is_refused_by_name():
    import lightning as L

    from attn_study.analysis.protocol import staged_model

    class NoStages(L.LightningModule):
        def forward(self, batch):
            return batch

    with pytest.raises(UserError, match="lacks embed, encode, attend, decode, decode_many"):
        staged_model(NoStages())


def test_resumed_state_keeps_the_tracked_epochs_and_testing_an_earlier_checkpoint_loses_none():
    callback = JainWallace()
    checkpoint = {
        "history": [{"epoch": 0, "k": 1.0}, {"epoch": 1, "k": 2.0}],
        "history_rows": [{"epoch": 0, "uid": "a"}, {"epoch": 1, "uid": "a"}],
    }
    callback.load_state_dict(checkpoint)  # resumed: the epochs before the interruption come back
    callback.history.append({"epoch": 2, "k": 3.0})
    callback.history_rows.append({"epoch": 2, "uid": "a"})
    callback.load_state_dict({"history": checkpoint["history"][:1], "history_rows": checkpoint["history_rows"][:1]})
    assert [h["epoch"] for h in callback.history] == [0, 1, 2]  # the best checkpoint (epoch 0) loaded for testing
    assert [r["epoch"] for r in callback.history_rows] == [0, 1, 2]


def lightning_example() -> str:
    """The script of docs/lightning.md (the README links it): the families in a LightningModule of one's own."""
    text = (REPO / "docs" / "lightning.md").read_text()
    match = re.search(r"<!-- example: plain-lightning -->\n```python\n(.*?)\n```", text, re.S)
    assert match, "docs/lightning.md's plain-Lightning example is missing"
    return match.group(1)


def test_the_plain_lightning_example_runs_as_written(tmp_path, monkeypatch, capsys):
    """As a script of its own (fresh globals: an import the page leaves out fails), in this process."""
    code = lightning_example()
    assert "hydra" not in code.lower()
    script = tmp_path / "example.py"
    script.write_text(code)
    monkeypatch.chdir(tmp_path)
    runpy.run_path(str(script), run_name="__main__")
    tau = float(re.search(r"tau\(attention, gradient\): (\S+)", capsys.readouterr().out).group(1))
    folder = tmp_path / "tiny_run" / "analysis" / "jain_wallace"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["jw/tau_grad/mean"] == pytest.approx(tau)
    assert len(pd.read_csv(folder / "epochs.csv")) == 4
    assert summary["jw/n_instances"] == 100


def test_every_familys_own_summary_is_strict_json_with_undefined_values_as_null(make_cfg, tmp_path):
    """Uniform attention leaves every τ with attention undefined: each family's analysis/<family>/summary.json
    (not only the run's) must say null, never the bare NaN that strict JSON readers refuse, and hold the same
    values as the run's summary."""
    run = tmp_path / "run"
    run_job(
        tiny(
            "attention=uniform",
            "analysis=[jain_wallace,sparsity]",
            "analysis.jain_wallace.tests=[correlation]",
            "analysis.sparsity.tests=[input]",
            "logger=csv",
        ),
        run,
    )
    whole = json.loads((run / "summary.json").read_text())

    def strict(text):
        return json.loads(text, parse_constant=lambda name: pytest.fail(f"bare {name} in a summary"))

    for family, key in (("jain_wallace", "jw/tau_grad/mean"), ("sparsity", "sp/tau/attn_g_input/mean")):
        own = strict((run / "analysis" / family / "summary.json").read_text())
        assert own[key] is None and whole[key] is None
        assert {k: v for k, v in whole.items() if k in own} == own


def test_tracking_with_nothing_to_track_is_refused_in_one_line():
    """every_n_epochs with empty val_tests, or on a family whose tests cannot run on dev (W&P's comparison reads
    the base run's test split), is a user mistake named before training — not a crash at the first epoch."""
    from attn_study.families.wiegreffe_pinter.callback import WiegreffePinter

    with pytest.raises(UserError, match=r"analysis.jain_wallace.every_n_epochs=1: nothing to track .*val_tests"):
        JainWallace(every_n_epochs=1, val_tests=[])
    with pytest.raises(UserError, match=r"wiegreffe_pinter measures nothing during training; leave it null"):
        WiegreffePinter(every_n_epochs=1)
    with pytest.raises(UserError, match=r"analysis.wiegreffe_pinter.val_tests: unknown \['comparison'\]"):
        WiegreffePinter(val_tests=["comparison"])
    assert JainWallace(every_n_epochs=1).val_tests == ["correlation", "permutation"]


@pytest.mark.parametrize("name", ["jain_wallace", "agreement", "sanity", "wiegreffe_pinter"])
def test_a_family_given_no_test_to_run_is_refused_in_one_line(name):
    """``analysis.<family>.tests=[]`` would measure nothing and summarise nothing (agreement's summary even failed):
    refused, naming the option and the family's tests."""
    from attn_study.families import REGISTRY

    module = REGISTRY[name].module("callback")
    (family,) = [
        c
        for c in vars(module).values()
        if isinstance(c, type) and c.__module__ == module.__name__ and hasattr(c, "TESTS") and c.TESTS
    ]
    with pytest.raises(UserError, match=rf"^analysis.{name}.tests=\[\]: choose one or more of "):
        family(tests=[])
