"""Real 2-job sweeps with every launcher available without a cluster, failures, resuming."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest

from attn_study.cli import job_threads, train_main
from tests.helpers import (
    CLI,
    REPO,
    TINY,
    TWO_JOBS,
    accuracy_by_hand,
    cli_env,
    entry_point,
    job_dir,
    job_dirs,
    launch_here,
    status,
    summary,
)

JOBLIB = "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"
SLURM = "hydra_plugins.attn_study_launcher.slurm_launcher.SlurmLauncher"
BASIC = "hydra._internal.core_plugins.basic_launcher.BasicLauncher"
LAUNCHERS = {
    "basic": [],  # with the default loggers, W&B offline and CSV
    "joblib": ["logger=csv", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
    "submitit_local": ["logger=csv", "hydra/launcher=submitit_local", "hydra.launcher.timeout_min=10"],
}


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_two_job_sweep(tmp_path, launcher, monkeypatch, capsys):
    code, stdout, stderr = launch_here(
        tmp_path / "sweep", *TWO_JOBS, *LAUNCHERS[launcher], monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 0, stderr[-3000:]
    dirs = [job_dir(tmp_path / "sweep", "encoder=average"), job_dir(tmp_path / "sweep", "encoder=lstm")]
    assert len(job_dirs(tmp_path / "sweep")) == 2
    for d in dirs:
        assert status(d)["state"] == "complete"
        assert summary(d)["test/acc"] == pytest.approx(accuracy_by_hand(d)) and summary(d)["data/train_size"] == 96
    assert "2 jobs: 2 ran" in stdout
    record = json.loads((tmp_path / "sweep" / "sweep.json").read_text())
    assert sorted(record["jobs"]) == sorted(d.name for d in dirs)
    if launcher == "joblib":  # two jobs at once share the cores
        assert [status(d)["torch_threads"] for d in dirs] == [max(1, (os.cpu_count() or 1) // 2)] * 2
    if launcher == "basic":
        jobs_share_one_wandb_group(tmp_path / "sweep", record["group"])


def jobs_share_one_wandb_group(sweep, group: str) -> None:
    assert group.startswith("multirun-")
    names = set()
    for d in job_dirs(sweep):
        runs = list((d / "wandb").glob("offline-run-*/*.wandb"))
        assert len(runs) == 1  # each job its own W&B run (an in-process sweep must finish the last one)
        blob = runs[0].read_bytes()
        assert group.encode() in blob and b"synthetic" in blob
        names.add(runs[0].parent.name)
    assert len(names) == 2


@pytest.mark.parametrize(
    "launcher, cpus, environ, threads",
    [
        ({"_target_": JOBLIB, "n_jobs": -1}, 2, {}, 1),  # as many jobs as cores: one thread each
        ({"_target_": JOBLIB, "n_jobs": -1}, 16, {}, 1),
        ({"_target_": JOBLIB, "n_jobs": 1}, 16, {}, 16),  # one job at a time: every core
        ({"_target_": JOBLIB, "n_jobs": 2}, 16, {}, 8),
        ({"_target_": JOBLIB, "n_jobs": 3}, 16, {}, 5),
        ({"_target_": JOBLIB, "n_jobs": 4}, 2, {}, 1),  # more jobs than cores: still one thread
        ({"_target_": JOBLIB, "n_jobs": None}, 4, {}, 1),
        ({"_target_": SLURM}, 64, {"SLURM_CPUS_PER_TASK": "6"}, 6),  # the job's CPUs, not the node's
        ({"_target_": BASIC}, 64, {}, None),  # torch's default
    ],
)
def test_a_sweep_jobs_threads_are_its_share_of_the_cores(launcher, cpus, environ, threads):
    """The real joblib sweep with n_jobs=2 is test_two_job_sweep; SLURM's is tests/sweep/test_slurm.py."""
    assert job_threads(launcher, cpus, environ) == threads


def test_a_failing_job_is_recorded_and_the_others_finish(tmp_path, monkeypatch, capsys):
    rates = "model.optimizer.lr=0.001,1e30"  # the second diverges: known only once it trains
    code, stdout, stderr = launch_here(
        tmp_path / "sweep", *TWO_JOBS, "logger=csv", rates, monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 1
    by_state = {}
    for d in job_dirs(tmp_path / "sweep"):
        by_state.setdefault(status(d)["state"], []).append(d)
    assert len(by_state["complete"]) == 2 and len(by_state["failed"]) == 2
    for d in by_state["failed"]:
        assert "train/loss" in status(d)["error"] and (d / "error.txt").is_file()
    assert "4 jobs: 2 ran, 2 failed" in stdout and "failed: " in stdout
    assert "Traceback" not in stderr


def test_killed_sweep_relaunch_runs_only_the_unfinished_job(tmp_path, monkeypatch, capsys):
    sweep = tmp_path / "sweep"
    args = [
        *CLI,
        "-m",
        f"hydra.sweep.dir={sweep}",
        *TWO_JOBS,
        "logger=csv",
        "trainer.max_epochs=30",
        "trainer.limit_train_batches=3",
    ]
    proc = subprocess.Popen(
        args, cwd=REPO, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.time() + 240
    first = None  # Hydra runs the grid in order: lstm first, then average
    while time.time() < deadline and proc.poll() is None:
        done = (
            [d for d in job_dirs(sweep) if (d / "status.json").is_file() and status(d)["state"] == "complete"]
            if sweep.is_dir()
            else []
        )
        if done:
            first = done[0]
            break
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert first is not None and "encoder=lstm" in first.name.split(",")
    unfinished = [d for d in job_dirs(sweep) if d != first]
    assert all(status(d)["state"] == "running" for d in unfinished if (d / "status.json").is_file())
    finished_before = status(first)["finished"]
    # the relaunches in this process (the killed launch had one of its own)
    code, out, err = entry_point(train_main, *args[len(CLI) :], monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0, err[-3000:]
    assert "2 jobs: 1 ran, 1 skipped" in out
    assert status(first)["finished"] == finished_before
    assert status(job_dir(sweep, "encoder=average"))["state"] == "complete"
    _, out, _ = entry_point(train_main, *args[len(CLI) :], "force=true", monkeypatch=monkeypatch, capsys=capsys)
    assert "2 jobs: 2 ran" in out and status(first)["finished"] > finished_before


def test_two_launches_of_one_sweep_at_once_each_count_their_own_jobs(tmp_path, monkeypatch, capsys):
    """Results stay correct when a sweep is launched twice at once (a running job is refused to the other
    launch), and each launch's closing line counts what *it* ran, from the jobs' own final states. The first
    launch is a process of its own, the second runs in this one while the first goes on."""
    sweep = tmp_path / "sweep"
    args = [
        *CLI,
        "-m",
        f"hydra.sweep.dir={sweep}",
        "encoder=lstm,average,gru",
        "encoder.hidden_size=8",
        *TINY,
        "logger=csv",
        "trainer.max_epochs=3",
    ]
    first = subprocess.Popen(args, cwd=REPO, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    second = entry_point(train_main, *args[len(CLI) :], monkeypatch=monkeypatch, capsys=capsys)
    stdout, stderr = first.communicate(timeout=300)
    outcomes = [(first.returncode, stdout, stderr), second]
    ran = 0
    for code, stdout, stderr in outcomes:
        line = next(line for line in stdout.splitlines() if "3 jobs:" in line)
        counts = {kind: int(n) for n, kind in re.findall(r"(\d+) (\w+)", line.split("3 jobs:")[1])}
        assert sum(counts.values()) == 3 and not {"failed", "unfinished", "refused"} & set(counts), line
        assert code == 0, stderr[-2000:]
        ran += counts.get("ran", 0)
    assert ran == 3  # every job ran exactly once, by one launch or the other
    assert all(status(d)["state"] == "complete" for d in job_dirs(sweep))
    from attn_study.io import umask

    assert os.stat(sweep / "sweep.json").st_mode & 0o777 == 0o666 & ~umask()  # readable by the team
