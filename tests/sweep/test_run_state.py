"""A run directory's life: skip when complete, force, refuse a different config, record failures,
clean up after a killed attempt, resume training from the last checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from attn_study.errors import UserError
from attn_study.run import run
from attn_study.sweep import state
from tests.helpers import REPO, TINY, cli_env, status, summary

QUICK = [*TINY, "logger=csv", "encoder=average", "encoder.hidden_size=8"]


def test_complete_run_is_skipped_and_force_runs_it_again(make_cfg, tmp_path, capsys):
    first = run(make_cfg(*QUICK), tmp_path)
    done = status(tmp_path)
    assert done["state"] == "complete" and done["labels"] == ["negative", "positive"] and done["attempt"] == 1
    again = run(make_cfg(*QUICK, "logger=none", "threads=1"), tmp_path)  # loggers and threads: same experiment
    assert again == first and status(tmp_path) == done
    assert "complete already, skipped" in capsys.readouterr().out
    run(make_cfg(*QUICK, "force=true"), tmp_path)
    assert status(tmp_path)["finished"] > done["finished"] and status(tmp_path)["attempt"] == 2


def test_complete_results_of_another_config_are_never_overwritten(make_cfg, tmp_path):
    run(make_cfg(*QUICK), tmp_path)
    before = (tmp_path / "summary.json").read_bytes()
    with pytest.raises(UserError, match=r"different configuration \(.*seed: 13 → 14.*force=true"):
        run(make_cfg(*QUICK, "seed=14"), tmp_path)
    assert run(make_cfg(*QUICK, "seed=14"), tmp_path, keep_going=True) is None
    assert (tmp_path / "summary.json").read_bytes() == before
    assert status(tmp_path)["state"] == "complete" and "seed" in status(tmp_path)["conflict"]["message"]


def test_failure_is_recorded_in_the_run_dir(make_cfg, tmp_path):
    cfg = make_cfg(*QUICK, f"model.embeddings.path={tmp_path}/missing.txt")
    with pytest.raises(UserError):
        run(cfg, tmp_path / "a")
    failed = status(tmp_path / "a")
    assert failed["state"] == "failed" and "not found" in failed["error"]
    assert "Traceback" in (tmp_path / "a" / "error.txt").read_text()
    assert run(cfg, tmp_path / "b", keep_going=True) is None  # in a sweep: recorded, not raised
    assert status(tmp_path / "b")["state"] == "failed"


def test_a_killed_attempt_is_cleared_and_run_again(make_cfg, tmp_path):
    cfg = make_cfg(*QUICK)
    run(cfg, tmp_path)
    record = status(tmp_path)
    # what a kill between writing summary.json and the completion marker leaves behind
    state._write(tmp_path, {**record, "state": "running", "pid": 999999999})
    (tmp_path / "summary.json").write_text('{"test/acc": -1}')
    (tmp_path / "analysis" / "stale").mkdir(parents=True)
    assert not state.is_complete(tmp_path)
    result = run(cfg, tmp_path)
    assert result["test/acc"] >= 0 and summary(tmp_path) == result
    assert not (tmp_path / "analysis").exists() and status(tmp_path)["state"] == "complete"


def test_a_live_attempt_on_this_host_is_not_run_twice(make_cfg, tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        state._write(tmp_path, {"state": "running", "host": os.uname().nodename, "pid": sleeper.pid})
        with pytest.raises(UserError, match=f"being run by process {sleeper.pid}"):
            run(make_cfg(*QUICK), tmp_path)
    finally:
        sleeper.kill()


def test_training_killed_mid_way_resumes_from_the_last_checkpoint(tmp_path):
    """A real kill (SIGKILL) after the first epochs; the relaunch continues from checkpoints/last.ckpt
    and ends with the configured number of epochs."""
    args = [sys.executable, "-m", "attn_study.cli", *QUICK, "trainer.max_epochs=40", "trainer.limit_train_batches=3",
            f"hydra.run.dir={tmp_path}"]
    proc = subprocess.Popen(args, cwd=REPO, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    last = tmp_path / "checkpoints" / "last.ckpt"
    deadline = time.time() + 120
    while not last.is_file() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(0.5)  # let a few epochs pass
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if status(tmp_path)["state"] == "complete":
        pytest.skip("the run finished before it could be killed")
    out = subprocess.run(args, cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "resuming training from" in out.stdout
    final = status(tmp_path)
    assert final["state"] == "complete" and final["attempt"] == 2
    assert summary(tmp_path)["train/epochs"] == 40 and not last.exists()
    assert json.loads((tmp_path / "summary.json").read_text())["val/acc_best"] >= 0
