"""A job's directory inside a sweep, a pure function of its command-line overrides.

The same overrides give the same directory on every launch (and whatever the job's position in the
grid), which is what lets a relaunched or narrowed sweep find the results it already has. Overrides
of settings that do not change results (``NOT_RESULTS``: where files go, loggers, threads, resuming,
cluster resources) are left out.

A sweep file's jobs (``sweep=...``, in ``outputs/sweeps/<name>/`` whatever else is on the command line)
are named by all their overrides. A plain multirun's (``-m encoder=lstm,cnn trainer=debug``, in a folder
of its own) by the keys that vary only (``encoder=lstm``): the sweep record sets them for the launch's
jobs (``JOB_KEYS_ENV``) and keeps them in ``sweep.json``, so a relaunch into the same folder, narrowed
or not, names each job as before.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable

# top-level config keys that do not change a run's results
NOT_RESULTS = frozenset({"sweep", "force", "resume", "threads", "paths", "logger", "cluster"})
MAX_NAME = 120
_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+\-]")
#: the keys that name the jobs of the running plain multirun (a JSON list; unset: every override names them)
JOB_KEYS_ENV = "ATTN_STUDY_JOB_KEYS"
SWEEP_RECORD = "sweep.json"  # the sweep's record (sweep/record.py)


def override_key(override: str) -> str:
    """``+trainer.max_epochs=3`` → ``trainer.max_epochs``."""
    return override.split("=", 1)[0].lstrip("+~")


def changes_results(override: str) -> bool:
    """``logger=csv`` or ``paths.cache_dir=...`` do not; ``encoder=cnn`` does."""
    return re.split(r"[./]", override_key(override))[0] not in NOT_RESULTS


def job_dir_name(overrides: Iterable[str], keys: Iterable[str] | None = None) -> str:
    """``['encoder=lstm', 'dataset=sst']`` → ``dataset=sst,encoder=lstm``: config-group choices
    first, then other values, each sorted by key; with ``keys``, only the overrides of those keys; unsafe
    characters replaced by ``_``; names longer than 120 characters are cut and end in a hash of the whole."""
    chosen = None if keys is None else set(keys)
    kept = sorted(
        (o for o in overrides if changes_results(o) and (chosen is None or override_key(o) in chosen)),
        key=lambda o: ("." in override_key(o), override_key(o)),
    )
    if not kept:
        return "default"
    name = _UNSAFE.sub("_", ",".join(kept))
    if len(name) > MAX_NAME:
        digest = hashlib.sha1(",".join(kept).encode()).hexdigest()[:10]
        name = f"{name[: MAX_NAME - 11]}-{digest}"
    return name


def swept_keys(params: dict | None, task_overrides: Iterable[str]) -> set[str]:
    """The keys a multirun varies: those given several values (``encoder=lstm,cnn``, ``range(3)``, ``glob(*)``)
    on the command line or in ``hydra.sweeper.params``."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    arguments = [f"{k}={v}" for k, v in (params or {}).items()] + list(task_overrides)
    parsed = OverridesParser.create().parse_overrides(arguments)
    return {override_key(o.input_line) for o in parsed if o.is_sweep_override()}


def job_keys() -> list[str] | None:
    """The keys naming the running plain multirun's jobs (set by the sweep record); None: all overrides."""
    value = os.environ.get(JOB_KEYS_ENV)
    return None if value is None else list(json.loads(value))


def sweep_job_keys(sweep_dir) -> list[str] | None:
    """The keys naming the jobs of the sweep in ``sweep_dir``, as its record (``sweep.json``) keeps them — what any
    later process (a report, an analysis) must use, whatever its own environment holds; None: all overrides."""
    from pathlib import Path

    record = Path(sweep_dir) / SWEEP_RECORD
    if not record.is_file():
        return job_keys()
    keys = json.loads(record.read_text()).get("job_keys")
    return None if keys is None else list(keys)
