"""``hydra/launcher=slurm`` against a real one-node SLURM cluster on localhost
(``scripts/slurm/cluster.sh``; needs root and the Debian slurm-wlm + munge packages, which
``.ci/run`` installs). Skipped cleanly where SLURM is not installed or we are not root."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from tests.helpers import (
    CLI,
    REPO,
    TINY,
    accuracy_by_hand,
    cli_env,
    job_dirs,
    status,
    summary,
)

pytestmark = [pytest.mark.slurm, pytest.mark.xdist_group("slurm")]  # one cluster: one worker
CLUSTER = REPO / "scripts" / "slurm" / "cluster.sh"
# what fits the test node (its CPUs and memory), one CPU per job
RESOURCES = [
    "hydra/launcher=slurm",
    "cluster.partition=debug",
    "cluster.cpus=1",
    "cluster.mem_gb=2",
    "cluster.time_min=15",
    "logger=csv",
]


@pytest.fixture(scope="module")
def slurm_env(tmp_path_factory):
    if os.geteuid() != 0 or not all(shutil.which(t) for t in ("slurmctld", "slurmd", "munged", "sbatch")):
        pytest.skip("needs root and slurm-wlm + munge (apt-get install -y slurm-wlm munge)")
    state_dir = tmp_path_factory.mktemp("slurm")
    started = subprocess.run(
        ["bash", str(CLUSTER), "start", str(state_dir)], capture_output=True, text=True, timeout=120
    )
    assert started.returncode == 0, started.stdout + started.stderr
    env = cli_env()
    env["SLURM_CONF"] = str(state_dir / "slurm.conf")
    env["PATH"] = f"{CLUSTER.parent / 'bin'}:{env['PATH']}"  # the sacct stand-in (no accounting database)
    try:
        yield env
    finally:
        subprocess.run(["bash", str(CLUSTER), "stop", str(state_dir)], capture_output=True, timeout=120)


def test_a_sweep_on_slurm_and_a_cancelled_job(tmp_path, slurm_env):
    """Two jobs on the cluster, one cancelled with scancel while it trains: the launcher does not wait forever and
    records it as failed in its run dir; the other finishes as any job does (its SLURM job id, one torch thread
    for cluster.cpus=1, its test accuracy that of its predictions, submitit's logs)."""
    sweep = tmp_path / "sweep"
    args = [
        *CLI,
        "-m",
        f"hydra.sweep.dir={sweep}",
        "encoder=average",
        "encoder.hidden_size=8",
        *TINY,
        *RESOURCES,
        "trainer.max_epochs=1,5000",
        "trainer.limit_train_batches=3",
    ]
    proc = subprocess.Popen(args, cwd=REPO, env=slurm_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline, victim = time.time() + 300, None
    while victim is None and time.time() < deadline and proc.poll() is None:
        for d in job_dirs(sweep) if sweep.is_dir() else []:
            record = status(d) if (d / "status.json").is_file() else {}
            overrides = (
                (d / ".hydra" / "overrides.yaml").read_text() if (d / ".hydra" / "overrides.yaml").is_file() else ""
            )
            if "trainer.max_epochs=5000" in overrides and record.get("state") == "running":
                victim = d, f"{record['slurm_array_job_id']}_{record['slurm_array_task_id']}"  # not SLURM_JOB_ID: the
                # last task of an array keeps the array's id, and scancel of that id cancels every task
        time.sleep(0.5)
    assert victim is not None, "the long job never started"
    subprocess.run(["scancel", victim[1]], env=slurm_env, check=True)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, out[-2000:] + err[-2000:]
    lost = status(victim[0])
    assert lost["state"] == "failed" and "CANCELLED" in lost["error"], lost
    assert "CANCELLED" in (victim[0] / "error.txt").read_text()
    (other,) = [d for d in job_dirs(sweep) if d != victim[0]]
    record = status(other)
    assert record["state"] == "complete" and "slurm_job_id" in record, record
    assert record["torch_threads"] == 1  # cluster.cpus=1
    assert summary(other)["test/acc"] == pytest.approx(accuracy_by_hand(other))
    assert "2 jobs: 1 ran, 1 failed" in out and "failed: " in out
    assert list((sweep / ".submitit").glob("*/*_log.out"))
