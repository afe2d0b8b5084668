"""Content digests of dataset files (what keys the processed-dataset cache) and of processed instances (what two runs
must share to be compared instance by instance: :func:`text_digests`).

A file's or a folder's identity is a BLAKE2b digest of its bytes (a folder: of each file's relative
name and bytes, in name order), so a file corrected in place — even with its size and mtime kept, as
``cp -p``, ``rsync -a`` or ``tar x`` keep them — gets a new cache entry.

Hashing is fast (about 0.5 GB/s per core here), but the larger archives of the field are gigabytes, so
a digest is remembered under ``$ATTN_STUDY_CACHE/digests`` keyed by the files' path, size, mtime,
inode and ctime. The ctime changes whenever a file's bytes are written and cannot be set back by a
user (``touch -d`` sets mtime only), so a remembered digest is never served for changed content.
"""

from __future__ import annotations

import hashlib
import os
import zlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from attn_study.io import write_text_atomic

CHUNK_BYTES = 1 << 20


def memo_dir() -> Path:
    return Path(os.environ.get("ATTN_STUDY_CACHE", Path.home() / ".cache" / "attn_study")).expanduser() / "digests"


def _stat_key(paths: list[Path], root: Path | None) -> str:
    lines = []
    for path in paths:
        st = path.stat()
        name = str(path.relative_to(root)) if root else str(path.resolve())
        lines.append(f"{name}\t{st.st_size}\t{st.st_mtime_ns}\t{st.st_ino}\t{st.st_ctime_ns}\t{st.st_dev}")
    prefix = str(root.resolve()) if root else ""
    return hashlib.sha256((prefix + "\n" + "\n".join(lines)).encode()).hexdigest()


def _hash_files(paths: list[Path], root: Path | None) -> str:
    digest = hashlib.blake2b(digest_size=20)
    for path in paths:
        if root is not None:
            digest.update(str(path.relative_to(root)).encode() + b"\0")
        with open(path, "rb") as handle:
            while chunk := handle.read(CHUNK_BYTES):
                digest.update(chunk)
    return digest.hexdigest()


def content_digest(paths: Iterable[Path], root: Path | None = None) -> str:
    """The digest of the files' bytes (with their names relative to ``root`` when a folder is
    described), remembered by their stats; ``paths`` in a stable order."""
    paths = [Path(p) for p in paths]
    memo = memo_dir() / f"{_stat_key(paths, root)}.txt"
    try:
        return memo.read_text().strip()
    except OSError:
        pass
    value = _hash_files(paths, root)
    try:
        write_text_atomic(memo, value + "\n")
    except OSError:  # a read-only cache still works, only slower
        pass
    return value


def describe_file(path: Path) -> dict[str, str | int]:
    """A file's identity for cache keys: its absolute path, size and content digest."""
    path = Path(path)
    return {"path": str(path.resolve()), "size": path.stat().st_size, "blake2b": content_digest([path])}


def describe_folder(root: Path, paths: Iterable[Path]) -> dict[str, str | int]:
    """A folder's identity for cache keys: its path, the number and total size of ``paths`` (files
    below ``root``, sorted here) and the digest of their names and bytes."""
    root = Path(root)
    paths = sorted(Path(p) for p in paths)
    return {
        "path": str(root.resolve()),
        "files": len(paths),
        "size": sum(p.stat().st_size for p in paths),
        "blake2b": content_digest(paths, root),
    }


def text_digests(split) -> list[str]:
    """Per instance of a processed split, its uid and a digest of its token ids (and query): what two runs
    must share to be compared instance by instance."""
    queries = getattr(split, "query_ids", None) or [None] * len(split.uids)
    return [
        f"{uid}:{zlib.crc32(np.asarray(ids, dtype=np.int64).tobytes()):08x}"
        f"{'' if q is None else f':{zlib.crc32(np.asarray(q, dtype=np.int64).tobytes()):08x}'}"
        for uid, ids, q in zip(split.uids, split.ids, queries)
    ]
