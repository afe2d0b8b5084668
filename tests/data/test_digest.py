"""Content digests of dataset files, and where they are remembered."""

from __future__ import annotations

import hashlib

from attn_study.data.digest import CHUNK_BYTES, describe_file, memo_dir


def test_a_files_digest_is_its_bytes_blake2b_remembered_under_the_cache_or_the_home_folder(tmp_path, monkeypatch):
    """A file longer than one read chunk has the BLAKE2b (20 bytes) of all its bytes at once; without
    ``$ATTN_STUDY_CACHE`` the digest is remembered under ``~/.cache/attn_study/digests``, with it under
    ``$ATTN_STUDY_CACHE/digests`` (``~`` expanded)."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("ATTN_STUDY_CACHE")
    data = bytes(range(256)) * (CHUNK_BYTES // 256) + b"tail"
    path = tmp_path / "vectors.txt"
    path.write_bytes(data)
    expected = hashlib.blake2b(data, digest_size=20).hexdigest()
    assert describe_file(path) == {"path": str(path.resolve()), "size": CHUNK_BYTES + 4, "blake2b": expected}
    remembered = list((home / ".cache" / "attn_study" / "digests").iterdir())
    assert len(remembered) == 1 and remembered[0].read_text() == expected + "\n"
    assert describe_file(path)["blake2b"] == expected  # served from the memo

    monkeypatch.setenv("ATTN_STUDY_CACHE", "~/elsewhere")
    assert memo_dir() == home / "elsewhere" / "digests"
