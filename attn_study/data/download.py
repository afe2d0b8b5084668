"""Download a dataset archive once into a cache folder, verified and written atomically."""

from __future__ import annotations

import gzip
import hashlib
import http.client
import logging
import os
import re
import sys
import tarfile
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from attn_study.errors import DataError

log = logging.getLogger(__name__)

TIMEOUT_S = 30.0
CHUNK_BYTES = 1 << 20


def fetch(url: str, cache_dir: str | Path, filename: str, sha256: str | None, option: str) -> Path:
    """Return ``cache_dir/filename``, downloading it from ``url`` unless a verified copy is cached.

    A copy counts as complete when its marker ``filename.sha256`` (written only after a verified
    download) records the file's size, and the pinned ``sha256`` if one is given. Failures raise a
    one-line DataError that names ``url`` and tells the user to set ``option`` to a local copy.
    """
    cache = Path(cache_dir).expanduser()
    target = cache / filename
    marker = cache / f"{filename}.sha256"
    part = cache / f"{filename}.part"
    expected = sha256.strip().lower() if sha256 else None
    sha_option = f"{option.rpartition('.')[0]}.source.sha256".lstrip(".")  # dataset.path → dataset.source.sha256
    if _is_complete(target, marker, expected):
        return target
    try:
        target.unlink(missing_ok=True)
        marker.unlink(missing_ok=True)
        cache.mkdir(parents=True, exist_ok=True)
        digest, size = _download(url, part)
        if expected is not None and digest != expected:
            raise DataError(
                f"could not download {url}: sha256 mismatch (got {digest}, expected {expected}); "
                f"the file at that URL changed or the download was corrupted; "
                f"set {sha_option}=null to skip the check or give {option}=<local copy>"
            )
        os.replace(part, target)
        _write_atomic(marker, f"{digest} {size}\n")
        if expected is None:
            log.info("downloaded %s with sha256 %s; set %s=%s to verify it", url, digest, sha_option, digest)
    except (OSError, http.client.HTTPException, ValueError) as error:
        raise DataError(
            f"could not download {url} ({_reason(error)}); set {option}=<local copy> or check your network"
        ) from error
    finally:
        part.unlink(missing_ok=True)
    return target


def _is_complete(target: Path, marker: Path, expected: str | None) -> bool:
    """Whether ``target`` exists with a marker that records its size (and the pinned digest)."""
    try:
        digest, size = marker.read_text(encoding="ascii").split()
        return target.stat().st_size == int(size) and expected in (None, digest)
    except (OSError, ValueError):
        return False


def _download(url: str, part: Path) -> tuple[str, int]:
    """Stream ``url`` into ``part``; return its sha256 and size. Raise OSError on a short body."""
    hasher = hashlib.sha256()
    received = 0
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response, part.open("wb") as out:
        length_header = response.headers.get("Content-Length")
        length = int(length_header) if length_header is not None else None
        with tqdm(
            total=length, unit="B", unit_scale=True, unit_divisor=1024, desc=part.name, file=sys.stderr, leave=False
        ) as progress:
            while chunk := response.read(CHUNK_BYTES):
                out.write(chunk)
                hasher.update(chunk)
                received += len(chunk)
                progress.update(len(chunk))
    if length is not None and received < length:
        raise OSError(f"truncated: got {received} of {length} bytes")
    return hasher.hexdigest(), received


def _write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary sibling and ``os.replace``."""
    tmp = path.with_name(f"{path.name}.tmp")
    tmp.write_text(text, encoding="ascii")
    os.replace(tmp, path)


def _reason(error: BaseException) -> str:
    """A short one-line description of a download failure."""
    if isinstance(error, urllib.error.HTTPError):
        text = f"HTTP {error.code} {error.reason}"
    elif isinstance(error, urllib.error.URLError):
        text = str(error.reason)
    else:
        text = str(error) or type(error).__name__
    return " ".join(text.split())


def local_or_download(
    path: str | None, url: str, cache_dir: str | Path, filename: str, sha256: str | None, hint: str
) -> Path:
    """The user's ``dataset.path`` (file or folder) if given — DataError with ``hint`` when it does not
    exist — else the canonical archive downloaded from ``url`` into ``cache_dir``."""
    if path is None:
        return fetch(url, cache_dir, filename, sha256, "dataset.path")
    given = Path(path).expanduser()
    if not given.exists():
        raise DataError(f"dataset.path={path}: not found; {hint}")
    return given


def stream_tar_gz(archive: Path, member: re.Pattern, keep: Callable[[re.Match], bool], hint: str):
    """(match, bytes) for every regular file of a .tar.gz whose name fully matches ``member`` and
    passes ``keep``, streamed without extracting to disk.

    The gzip stream is read through ``gzip.open`` and drained to the end, because ``tarfile`` alone
    silently stops at a truncated stream, while ``gzip`` raises on a missing end or a CRC mismatch.
    A corrupt or truncated archive raises DataError naming it, followed by ``hint``.
    """
    try:
        with gzip.open(archive, "rb") as unzipped, tarfile.open(fileobj=unzipped, mode="r|") as tar:
            for entry in tar:
                match = member.fullmatch(entry.name)
                if match and entry.isfile() and keep(match):
                    handle = tar.extractfile(entry)
                    if handle is not None:
                        yield match, handle.read()
            while unzipped.read(1 << 20):
                pass
    except (tarfile.TarError, EOFError, zlib.error, OSError) as error:
        raise DataError(f"{archive}: corrupt or truncated archive ({error}); {hint}") from error
