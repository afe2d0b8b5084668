"""A run directory's state: ``status.json``, the completion marker that resume and reports trust.

``status.json`` (written atomically at every transition) holds ``state``: ``running`` while a job
works, ``complete`` once ``summary.json`` and every result are in place (written last), ``failed``
with the error (the traceback is in ``error.txt``). A job killed mid-way leaves ``running`` behind,
so it is never mistaken for a finished one. The status also stores the job's config *identity* (the
resolved config minus settings that do not change results), so a relaunch can tell "same experiment,
already done" from "different experiment in the same directory".
"""

from __future__ import annotations

import os
import shutil
import socket
import time
import traceback
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from attn_study.io import read_json, write_json_atomic
from attn_study.sweep.naming import NOT_RESULTS

STATUS = "status.json"
ERROR = "error.txt"
# outputs of an unfinished attempt, removed before the next attempt starts
ATTEMPT_OUTPUTS = ("summary.json", ERROR, "analysis", "csv", "wandb", "checkpoints")


def flatten(container: dict) -> dict:
    """``{'a': {'b': 1}}`` → ``{'a/b': 1}`` (lists and empty dicts stay leaves)."""
    out: dict = {}

    def walk(node, prefix):
        if isinstance(node, dict) and node:
            for k, v in node.items():
                walk(v, f"{prefix}{k}/")
        else:
            out[prefix.rstrip("/")] = node

    walk(container, "")
    return out


def identity(cfg: DictConfig) -> dict:
    """The resolved config, flat, without ``NOT_RESULTS`` and cache locations (``*/cache_dir``):
    what makes two runs the same experiment."""
    container = OmegaConf.to_container(cfg, resolve=True)
    flat = flatten({k: v for k, v in container.items() if k not in NOT_RESULTS})
    return {k: v for k, v in flat.items() if not k.endswith("cache_dir")}


def identity_differences(stored: dict, current: dict, limit: int = 4) -> list[str]:
    keys = sorted(set(stored) | set(current))
    diffs = [f"{k}: {stored.get(k, '<absent>')!r} → {current.get(k, '<absent>')!r}"
             for k in keys if stored.get(k, "<absent>") != current.get(k, "<absent>")]
    return diffs[:limit] + ([f"… {len(diffs) - limit} more"] if len(diffs) > limit else [])


def read_status(run_dir: Path) -> dict:
    """The run's status, ``{}`` when it has none (never started), ``{'state': 'unreadable'}`` when corrupt."""
    path = Path(run_dir) / STATUS
    if not path.is_file():
        return {}
    try:
        return read_json(path)
    except (OSError, ValueError):
        return {"state": "unreadable"}


def is_complete(run_dir: Path, status: dict | None = None) -> bool:
    status = read_status(run_dir) if status is None else status
    return status.get("state") == "complete" and (Path(run_dir) / "summary.json").is_file()


def _write(run_dir: Path, status: dict) -> dict:
    write_json_atomic(Path(run_dir) / STATUS, status)
    return status


LAUNCH_ENV = "ATTN_STUDY_LAUNCH"  # set by the sweep record for the jobs of one launch


def _job_environment() -> dict:
    env = {"host": socket.gethostname(), "pid": os.getpid()}
    if os.environ.get(LAUNCH_ENV):
        env["launch"] = os.environ[LAUNCH_ENV]
    for var in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID"):
        if var in os.environ:
            env[var.lower()] = os.environ[var]
    return env


def clear_attempt(run_dir: Path, keep_checkpoints: bool) -> None:
    """Remove an unfinished attempt's outputs (``.hydra/`` and logs stay)."""
    for name in ATTEMPT_OUTPUTS:
        if name == "checkpoints" and keep_checkpoints:
            continue
        path = Path(run_dir) / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def mark_running(run_dir: Path, ident: dict, previous: dict) -> dict:
    return _write(run_dir, {"state": "running", "started": time.time(), "attempt": previous.get("attempt", 0) + 1,
                            "identity": ident, **_job_environment()})


def mark_complete(run_dir: Path, running: dict, **extra) -> dict:
    return _write(run_dir, {**running, "state": "complete", "finished": time.time(), **extra})


def mark_failed(run_dir: Path, running: dict, error: BaseException) -> dict:
    """Record ``error``: one line in ``status.json``, the traceback in ``error.txt``."""
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    (Path(run_dir) / ERROR).write_text(text)
    return _write(run_dir, {**running, "state": "failed", "finished": time.time(),
                            "error": f"{type(error).__name__}: {error}".splitlines()[0]})


def record_conflict(run_dir: Path, status: dict, message: str) -> None:
    """Note on a complete run that a launch found a different config for it (results untouched)."""
    _write(run_dir, {**status, "conflict": {"time": time.time(), "message": message,
                                            "launch": os.environ.get(LAUNCH_ENV)}})


def still_running(status: dict) -> bool:
    """Whether the process recorded in a ``running`` status is alive on this host."""
    if status.get("host") != socket.gethostname() or not status.get("pid") or status["pid"] == os.getpid():
        return False
    try:
        os.kill(int(status["pid"]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def record_lost_job(run_dir: Path, message: str) -> None:
    """A job that ended without recording anything itself (cancelled, killed, out of memory)."""
    run_dir = Path(run_dir)
    status = read_status(run_dir)
    if is_complete(run_dir, status):
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / ERROR).write_text(message + "\n")
    _write(run_dir, {**status, "state": "failed", "finished": time.time(), "error": message})
