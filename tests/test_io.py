"""Result files written atomically (attn_study/io.py): a write that raises leaves the previous file as it was and
no temporary file beside it; one that succeeds replaces the file whole."""

from __future__ import annotations

import pytest

from attn_study.io import atomic_open, write_json_atomic


class Interrupted(Exception):
    pass


def test_a_write_that_raises_keeps_the_previous_file_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text('{"test/acc": 0.9}')
    with pytest.raises(Interrupted), atomic_open(path) as handle:
        handle.write('{"test/acc": 0.')  # half a file, then the writer fails
        raise Interrupted
    assert path.read_text() == '{"test/acc": 0.9}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


def test_a_first_write_that_raises_leaves_nothing(tmp_path):
    with pytest.raises(Interrupted), atomic_open(tmp_path / "new.json", "wb") as handle:
        handle.write(b"{")
        raise Interrupted
    assert list(tmp_path.iterdir()) == []


def test_a_write_that_succeeds_replaces_the_file_whole(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text("old " * 100)
    write_json_atomic(path, {"a": 1.5, "b": float("nan")})
    assert path.read_text() == '{\n  "a": 1.5,\n  "b": null\n}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]
