"""A job's directory inside a sweep, a pure function of its command-line overrides.

The same overrides give the same directory on every launch (and whatever the job's position in the
grid), which is what lets a relaunched or narrowed sweep find the results it already has. Overrides
of settings that do not change results (``NOT_RESULTS``: where files go, loggers, threads, resuming,
cluster resources) are left out.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

# top-level config keys that do not change a run's results
NOT_RESULTS = frozenset({"sweep", "force", "resume", "threads", "paths", "logger", "cluster"})
MAX_NAME = 120
_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+\-]")


def override_key(override: str) -> str:
    """``+trainer.max_epochs=3`` → ``trainer.max_epochs``."""
    return override.split("=", 1)[0].lstrip("+~")


def changes_results(override: str) -> bool:
    """``logger=csv`` or ``paths.cache_dir=...`` do not; ``encoder=cnn`` does."""
    return re.split(r"[./]", override_key(override))[0] not in NOT_RESULTS


def job_dir_name(overrides: Iterable[str]) -> str:
    """``['encoder=lstm', 'dataset=sst']`` → ``dataset=sst,encoder=lstm``: config-group choices
    first, then other values, each sorted by key; unsafe characters replaced by ``_``; names longer
    than 120 characters are cut and end in a hash of the whole."""
    kept = sorted((o for o in overrides if changes_results(o)), key=lambda o: ("." in override_key(o), override_key(o)))
    if not kept:
        return "default"
    name = _UNSAFE.sub("_", ",".join(kept))
    if len(name) > MAX_NAME:
        digest = hashlib.sha1(",".join(kept).encode()).hexdigest()[:10]
        name = f"{name[: MAX_NAME - 11]}-{digest}"
    return name
