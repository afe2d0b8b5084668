"""Launching real sweeps from tests: the ``attn-study`` CLI in a subprocess, tiny settings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, TINY, cli_env

CLI = [sys.executable, "-m", "attn_study.cli"]
# two jobs of a few seconds each
TWO_JOBS = ["encoder=lstm,average", "encoder.hidden_size=8", *TINY]


def launch(sweep_dir: Path, *overrides: str, timeout: int = 300, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "-m", f"hydra.sweep.dir={sweep_dir}", *overrides], capture_output=True,
                          text=True, cwd=REPO, env=kwargs.pop("env", cli_env()), timeout=timeout, **kwargs)


def job_dirs(sweep_dir: Path) -> list[Path]:
    return sorted(p for p in Path(sweep_dir).iterdir() if (p / ".hydra").is_dir())


def status(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "status.json").read_text())


def summary(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "summary.json").read_text())


def job_dir(sweep_dir: Path, part: str) -> Path:
    """The one job directory of ``sweep_dir`` whose name contains ``part`` (e.g. ``encoder=lstm``)."""
    found = [d for d in job_dirs(sweep_dir) if part in d.name.split(",")]
    assert len(found) == 1, (part, [d.name for d in job_dirs(sweep_dir)])
    return found[0]
