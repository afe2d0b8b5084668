"""Result files: written atomically (temporary file + rename) with the permissions of an ordinary file.

Every result a run, an analysis, a sweep or a report writes goes through :func:`atomic_open`, so a
reader never sees a half-written file and teammates on a shared filesystem can read it: files get
mode 0666 and folders 0777, less the user's umask (0644 / 0755 under umask 022) — the mode a plain
``open()`` would give, not the 0600 / 0700 of ``tempfile``.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path


def umask() -> int:
    """The process umask, read without changing it (``os.umask`` would, briefly, for every thread)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def publish_mode(path: Path) -> None:
    """Give ``path`` the mode an ordinary file or folder would have (0666 / 0777 less the umask)."""
    base = 0o777 if Path(path).is_dir() else 0o666
    os.chmod(path, base & ~umask())


@contextlib.contextmanager
def atomic_open(path: Path, mode: str = "w", encoding: str | None = "utf-8"):
    """``with atomic_open(path) as handle:`` writes a temporary file beside ``path`` and, when the block
    ends without an error, gives it ordinary permissions and renames it into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as handle:
            yield handle
        publish_mode(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> Path:
    with atomic_open(path) as handle:
        handle.write(text)
    return Path(path)


def _no_nan(value):
    """NaN and ±inf as None (null): JSON has no NaN, and most readers reject a bare ``NaN``."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_no_nan(v) for v in value]
    return value


def write_json_atomic(path: Path, data: dict) -> Path:
    """``data`` as JSON (keys sorted, indented), NaN and ±inf written as null."""
    with atomic_open(path) as handle:
        json.dump(_no_nan(data), handle, indent=2, sort_keys=True, allow_nan=False)
    return Path(path)


def write_parquet_atomic(frame, path: Path) -> Path:
    """A pandas frame as Parquet (without its index)."""
    with atomic_open(path, "wb") as handle:
        frame.to_parquet(handle, index=False)
    return Path(path)


def write_csv_atomic(frame, path: Path) -> Path:
    with atomic_open(path) as handle:
        frame.to_csv(handle, index=False)
    return Path(path)


def make_temporary_dir(parent: Path, prefix: str) -> Path:
    """A new folder under ``parent`` (to fill, then rename into place), with ordinary permissions."""
    Path(parent).mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    publish_mode(path)
    return path


def read_json(path: Path) -> dict:
    with open(path) as handle:
        return json.load(handle)
