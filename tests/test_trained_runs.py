"""The suite's cache of trained runs (tests.helpers.TrainedRuns, the ``trained_runs`` fixture): a run is trained
once however many tests — in however many workers — ask for it at once, a failed attempt is trained again, and a
private copy is the same complete run wherever it lies."""

from __future__ import annotations

import json
import threading
import time

import pandas as pd
import pytest
import torch

from attn_study.job.analyze import analyze
from attn_study.job.plan import load_run
from attn_study.job.run import run as run_job
from attn_study.job.state import is_complete
from tests.helpers import TINY, TrainedRuns, compose_config, summary, wandb_run_summary
from tests.wandb_records import offline_runs, read_run

RUN = [*TINY, "encoder=average", "encoder.hidden_size=8", "logger=[wandb,csv]"]
ANALYSED = [*RUN, "analysis=[jain_wallace]", "analysis.jain_wallace.max_instances=8", "analysis.jain_wallace.steps=5"]


class CountingTrainer:
    """A stand-in for training: counts its calls, takes ``seconds``, fails its first ``failures`` calls, and
    otherwise leaves a complete run holding the overrides it was given."""

    def __init__(self, seconds: float = 0.0, failures: int = 0):
        self.calls, self.seconds, self.failures = 0, seconds, failures

    def __call__(self, overrides, run_dir, data_cache):
        self.calls += 1
        time.sleep(self.seconds)
        run_dir.mkdir(parents=True)
        if self.calls <= self.failures:
            raise RuntimeError("killed part way")
        (run_dir / "summary.json").write_text(json.dumps({"overrides": overrides}))
        (run_dir / "status.json").write_text(json.dumps({"state": "complete"}))


def test_a_run_asked_for_at_once_by_two_callers_is_trained_once(tmp_path):
    """Two callers (each with a cache object of its own, as two xdist workers have) ask for the same run while it
    trains: one trains it, the other waits and gets the same directory; another run is trained apart."""
    trainer = CountingTrainer(seconds=0.5)
    got = []
    callers = [
        threading.Thread(target=lambda: got.append(TrainedRuns(tmp_path, trainer).get("a=1", "b=2"))) for _ in range(2)
    ]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert trainer.calls == 1 and len(got) == 2 and got[0] == got[1]
    assert summary(got[0]) == {"overrides": ["a=1", "b=2"]}
    other = TrainedRuns(tmp_path, trainer).get("b=2", "a=1")  # another order: another run
    assert trainer.calls == 2 and other != got[0] and other.name == got[0].name == "run"
    assert TrainedRuns(tmp_path, trainer).get("a=1", "b=2", name="base") not in (got[0], other)
    assert trainer.calls == 3


def test_a_run_whose_training_failed_is_trained_again_from_nothing(tmp_path):
    trainer = CountingTrainer(failures=1)
    runs = TrainedRuns(tmp_path, trainer)
    with pytest.raises(RuntimeError, match="killed part way"):
        runs.get("a=1")
    assert runs.get("a=1").is_dir() and trainer.calls == 2  # the half-made directory removed, not in the way
    assert runs.summary("a=1") == {"overrides": ["a=1"]} and trainer.calls == 2


@pytest.mark.parametrize(
    "change",
    [
        lambda run: (run / "summary.json").write_text("{}"),
        lambda run: (run / "analysis").mkdir() or (run / "analysis" / "more.json").write_text("{}"),
    ],
    ids=["rewritten", "added"],
)
def test_a_cached_run_that_a_test_changed_is_refused_by_name(tmp_path, change):
    """A file of a cached run rewritten or added: the next caller and the end-of-session check both refuse
    it, naming the file; an untouched run passes both."""
    runs = TrainedRuns(tmp_path, CountingTrainer())
    untouched, changed = runs.get("a=1"), runs.get("a=2")
    runs.check_all_unchanged()
    change(changed)
    with pytest.raises(AssertionError, match=r"changed the cached run .*(summary\.json|more\.json)"):
        runs.get("a=2")
    with pytest.raises(AssertionError, match=str(changed)):
        runs.check_all_unchanged()
    assert runs.get("a=1") == untouched


def test_a_copied_run_is_the_same_complete_run_wherever_it_lies(trained_runs, tmp_path):
    """The copy is complete, loads with the same model and data, is skipped by a relaunch of its config (same
    identity), and is analysed again in its own folder only — its W&B analysis joining the group of its name."""
    cached = trained_runs.get(*ANALYSED)
    copy = trained_runs.copy(*ANALYSED, into=tmp_path)
    assert copy == tmp_path / "run" and is_complete(copy)
    original, copied = load_run(cached), load_run(copy)
    assert list(copied.datamodule.split("test").uids) == list(original.datamodule.split("test").uids)
    batch = next(iter(copied.datamodule.loader("test", batch_size=8)))
    with torch.no_grad():
        torch.testing.assert_close(copied.model(batch)[0], original.model(batch)[0], rtol=0, atol=0)
    assert run_job(compose_config(*ANALYSED), copy) == summary(cached)  # complete already: skipped
    before = (cached / "summary.json").read_text()
    merged = analyze(
        compose_config(
            f"ckpt_path={copy}", "analysis=[jain_wallace]", "analysis.jain_wallace.tests=[correlation]", name="analyze"
        )
    )
    assert "jw/tau_grad/mean" in merged and "jw/adv/emax_jsd/mean" not in merged
    assert summary(copy) == merged and (cached / "summary.json").read_text() == before
    assert "tau_grad" in pd.read_parquet(copy / "analysis" / "jain_wallace" / "instances.parquet")
    assert {read_run(path).run.run_group for path in offline_runs(copy)} == {"run"}  # the training's and the analysis'
    assert wandb_run_summary(cached)["test/acc"] == summary(cached)["test/acc"]  # the cached run's one, untouched
