"""A run directory's state: ``status.json``, the completion marker that resume and reports trust.

``status.json`` (written atomically at every transition) holds ``state``: ``running`` while a job
works, ``complete`` once ``summary.json`` and every result are in place (written last), ``failed``
with the error (the traceback is in ``error.txt``). A job killed mid-way leaves ``running`` behind,
so it is never mistaken for a finished one; one stopped by SIGTERM or SIGINT says so too (``interrupted``:
the signal and the time). The status also stores the job's config *identity* (the
resolved config minus settings that do not change results), so a relaunch can tell "same experiment,
already done" from "different experiment in the same directory".

One process at a time runs an attempt: it holds ``.attn-study.lock`` (:func:`claim`) from before it reads the
status until the attempt ends, so two launches of one sweep can never both start a job.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import math
import os
import secrets
import shutil
import socket
import string
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from attn_study import layout
from attn_study.io import read_json, write_json_atomic, write_text_atomic
from attn_study.layout import ATTEMPT_OUTPUTS, ATTENTION, CHECKPOINTS, CLAIM, ERROR, RECORD, STATUS, WANDB
from attn_study.sweep.naming import NOT_RESULTS
from attn_study.tracking import code_version, flatten, numerics

# outputs of an unfinished attempt, removed before the next attempt starts


#: settings derived from others or naming only (a run's name): never part of its identity, in old records ignored
NOT_IDENTITY = frozenset({"run_name"})


def identity(cfg: DictConfig) -> dict:
    """The resolved config, flat, without ``NOT_RESULTS``, ``NOT_IDENTITY`` and cache locations
    (``*/cache_dir``): what makes two runs the same experiment."""
    container = OmegaConf.to_container(cfg, resolve=True)
    flat = flatten({k: v for k, v in container.items() if k not in NOT_RESULTS | NOT_IDENTITY})
    return {k: v for k, v in flat.items() if not k.endswith("cache_dir")}


def identity_differences(stored: dict, current: dict, limit: int | None = 4) -> list[str]:
    """``key: old → new`` for every setting where two identities differ, the model-defining ones first (the
    groups' chosen options, ``encoder/name: 'lstm' → 'cnn'``), constructor paths last; at most ``limit``."""
    absent = object()

    def differs(key) -> bool:
        old, new = stored.get(key, absent), current.get(key, absent)
        if old is absent or new is absent:  # a setting one side lacks: the same when the other's is null
            return (new if old is absent else old) is not None
        return old != new

    keys = sorted(
        (set(stored) | set(current)) - NOT_IDENTITY,
        key=lambda k: (not k.endswith("/name"), k == "run_name", k.endswith("/_target_"), k.count("/"), k),
    )
    diffs = [
        f"{k.replace('/', '.')}: {_shown(stored.get(k, absent))} → {_shown(current.get(k, absent))}"
        for k in keys
        if differs(k)
    ]
    if limit is None:
        return diffs
    return diffs[:limit] + ([f"… {len(diffs) - limit} more"] if len(diffs) > limit else [])


def _shown(value) -> str:
    return "<absent>" if not isinstance(value, (str, int, float, bool, list, dict, type(None))) else repr(value)


def read_status(run_dir: Path) -> dict:
    """The run's status, ``{}`` when it has none (never started), ``{'state': 'unreadable'}`` when corrupt
    (not JSON, or JSON that is not a status: ``[]``, a string, no ``state``)."""
    path = Path(run_dir) / STATUS
    if not path.is_file():
        return {}
    try:
        status = read_json(path)
    except (OSError, ValueError):
        return {"state": "unreadable"}
    return status if isinstance(status, dict) and isinstance(status.get("state"), str) else {"state": "unreadable"}


def holds_results(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a run's outputs (a summary, checkpoints, analyses, logs): with no status
    beside them, what it holds is unknown and must not be deleted."""
    return any((Path(run_dir) / name).exists() for name in (*ATTEMPT_OUTPUTS, ATTENTION))


def same_identity(stored: dict, current: dict) -> bool:
    """Whether two config identities are the same experiment: equal settings, a setting that one of them
    lacks counting as equal when the other's is null (a setting added later, off by default)."""
    return not identity_differences(stored, current, limit=None)


def is_complete(run_dir: Path, status: dict | None = None) -> bool:
    status = read_status(run_dir) if status is None else status
    return status.get("state") == "complete" and (Path(run_dir) / layout.SUMMARY).is_file()


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
    """Remove an unfinished attempt's outputs (``.hydra/`` stays). ``keep_checkpoints`` (the next attempt resumes
    this one): its checkpoints stay, and its offline W&B run, which the next attempt continues under the same id."""
    for name in ATTEMPT_OUTPUTS:
        if name in (CHECKPOINTS, WANDB) and keep_checkpoints:
            continue
        path = Path(run_dir) / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def mark_running(run_dir: Path, ident: dict, previous: dict, resumed: bool = False) -> dict:
    """A new attempt: its number, the config identity, the code version and numerics, where it runs, and the W&B
    run id — the previous attempt's when this one resumes it (its offline W&B run continues), else a new one."""
    return _write(
        run_dir,
        {
            "state": "running",
            "started": time.time(),
            "attempt": previous.get("attempt", 0) + 1,
            "identity": ident,
            "wandb_id": previous.get("wandb_id") if resumed and previous.get("wandb_id") else new_run_id(),
            "code": code_version(),
            "numerics": numerics(),
            **_job_environment(),
        },
    )


def new_run_id() -> str:
    """A W&B run id (8 characters of [a-z0-9]); a run keeps it over every attempt that resumes it."""
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(8))


def mark_complete(run_dir: Path, running: dict, **extra) -> dict:
    return _write(run_dir, {**running, "state": "complete", "finished": time.time(), **extra})


def mark_failed(run_dir: Path, running: dict, error: BaseException) -> dict:
    """Record ``error``: one line in ``status.json``, the traceback in ``error.txt``."""
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    (Path(run_dir) / ERROR).write_text(text)
    return _write(
        run_dir,
        {
            **running,
            "state": "failed",
            "finished": time.time(),
            "error": f"{type(error).__name__}: {error}".splitlines()[0],
        },
    )


def mark_interrupted(run_dir: Path, running: dict, signal_name: str) -> dict:
    """A stop by ``signal_name`` (SIGTERM, SIGINT) noted on the attempt; its state stays ``running``, so the next
    launch resumes it from ``checkpoints/last.ckpt``."""
    return _write(run_dir, {**running, "interrupted": {"signal": signal_name, "time": time.time()}})


def record_conflict(run_dir: Path, status: dict, message: str) -> None:
    """Note on a complete run that a launch found a different config for it (results untouched)."""
    _write(
        run_dir, {**status, "conflict": {"time": time.time(), "message": message, "launch": os.environ.get(LAUNCH_ENV)}}
    )


@contextlib.contextmanager
def claim(run_dir: Path) -> Iterator[bool]:
    """Hold ``run_dir`` for one attempt: an exclusive lock (``flock``) on ``run_dir/.attn-study.lock``, taken
    without waiting. Yields True while this process holds it, False when another process holds it (it is running
    this run now). Reading the status, deciding and marking the attempt ``running`` all happen under it, so of two
    launches that reach a job at the same moment exactly one runs it.

    The OS drops the lock when its holder ends, however it ends (killed, out of memory), so a claim is never
    stale. The file stays: removing it would let a third process lock a new file while a second still holds the
    old one. Linux's NFS client takes the lock on the server, so it also holds between the nodes of a cluster. On a
    file system without locks (``ENOLCK``) it yields True, and :func:`still_running` (this host only) is the guard."""
    fd = os.open(Path(run_dir) / CLAIM, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = True
        except BlockingIOError:
            held = False
        except OSError as err:
            if err.errno not in (errno.ENOLCK, errno.EOPNOTSUPP):
                raise
            held = True
        yield held
    finally:
        os.close(fd)  # releases the lock


def claimed_by(run_dir: Path) -> str:
    """Who holds ``run_dir``'s claim, as far as its status says: the running process, else "another process"."""
    status = read_status(run_dir)
    if status.get("state") == "running" and status.get("pid"):
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(status.get("started", 0)))
        return f"process {status['pid']} on {status.get('host')} (started {started})"
    return "another attn-study process"


def still_running(status: dict) -> bool:
    """Whether the process recorded in a ``running`` status is alive on this host — the same process: a
    process with that PID that started after the status was written (the PID reused after a reboot, or by
    another program) is not it."""
    if status.get("host") != socket.gethostname() or not status.get("pid") or status["pid"] == os.getpid():
        return False
    pid = int(status["pid"])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    started = process_start_time(pid)
    return started is None or started <= float(status.get("started", math.inf)) + 1.0


def process_start_time(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), from Linux's /proc; None where unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # starttime, the 22nd field: clock ticks after boot
        boot = next(
            float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime ")
        )
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def write_record(run_dir: Path, cfg: DictConfig, overrides: list[str] | None = None, hydra=None) -> None:
    """The run's own record of what it is, ``.hydra/{config,overrides,hydra}.yaml``, written when an attempt
    starts — never by a launch that is refused, so a refused relaunch cannot relabel the results (Hydra's
    own copy is off: ``hydra.output_subdir: null``)."""
    folder = Path(run_dir) / RECORD
    folder.mkdir(parents=True, exist_ok=True)
    write_text_atomic(folder / layout.CONFIG, OmegaConf.to_yaml(cfg))
    if overrides is not None:
        write_text_atomic(folder / layout.OVERRIDES, OmegaConf.to_yaml(OmegaConf.create(list(overrides))))
    if hydra is not None:
        write_text_atomic(folder / "hydra.yaml", OmegaConf.to_yaml(OmegaConf.create({"hydra": hydra})))


def record_lost_job(run_dir: Path, message: str) -> None:
    """A job that ended without recording anything itself (cancelled, killed, out of memory)."""
    run_dir = Path(run_dir)
    status = read_status(run_dir)
    if is_complete(run_dir, status):
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / ERROR).write_text(message + "\n")
    _write(run_dir, {**status, "state": "failed", "finished": time.time(), "error": message})
