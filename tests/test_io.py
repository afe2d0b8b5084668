"""Result files written atomically (attn_study/io.py): a write that raises leaves the previous file as it was and
no temporary file beside it; one that succeeds replaces the file whole."""

from __future__ import annotations

import os
import stat

import pandas as pd
import pytest

from attn_study.io import (
    atomic_open,
    make_temporary_dir,
    write_csv_atomic,
    write_json_atomic,
    write_parquet_atomic,
    write_text_atomic,
)


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
    write_json_atomic(path, {"b": float("nan"), "a": 1.5})
    assert path.read_text() == '{\n  "a": 1.5,\n  "b": null\n}'  # keys sorted, NaN as null
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


def test_folders_are_made_as_needed_and_tables_are_written_without_their_index(tmp_path):
    deep = tmp_path / "a" / "b"
    write_text_atomic(deep / "c.txt", "x")
    assert (deep / "c.txt").read_text() == "x"
    assert make_temporary_dir(tmp_path / "d" / "e", ".tmp-").parent == tmp_path / "d" / "e"
    frame = pd.DataFrame({"x": [1, 2]}, index=[5, 6])
    write_csv_atomic(frame, tmp_path / "t.csv")
    assert (tmp_path / "t.csv").read_text() == "x\n1\n2\n"
    write_parquet_atomic(frame, tmp_path / "t.parquet")
    back = pd.read_parquet(tmp_path / "t.parquet")
    assert list(back.columns) == ["x"] and back.index.tolist() == [0, 1]


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield
    os.umask(old)


def test_files_and_folders_get_the_mode_the_umask_gives(umask_027, tmp_path):
    """Under umask 027 a plain open() gives 0640 and mkdir 0750: so do the atomic writes (not tempfile's 0600 /
    0700, nor a umask assumed to be 022)."""
    path = write_text_atomic(tmp_path / "f.txt", "x")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
    folder = make_temporary_dir(tmp_path, ".tmp-")
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o750
