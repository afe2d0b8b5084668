"""``attn-study-report`` on a folder that cannot take the report (a full disk, a read-only folder): one line."""

from __future__ import annotations

import errno
import pathlib

import pytest

from attn_study.report import cli
from tests.helpers import TINY


@pytest.mark.parametrize(("code", "says"), [(errno.ENOSPC, "No space left on device"), (errno.EROFS, "Read-only")])
def test_a_folder_that_cannot_take_the_report_is_one_line(trained_runs, tmp_path, monkeypatch, capsys, code, says):
    run_dir = trained_runs.get(*TINY, "logger=none", "encoder=average", "encoder.hidden_size=8")  # read only
    out = tmp_path / "out"
    write_text = pathlib.Path.write_text

    def full(self, *args, **kwargs):  # the disk fills while the report is written (a figure, a table, the page)
        if out.name in str(self.parent) or self.parent.name.startswith(f".{out.name}.partial"):
            raise OSError(code, says)
        return write_text(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "write_text", full)
    with pytest.raises(SystemExit) as exit_:
        cli.main([str(run_dir), "--out", str(out)])
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        f"attn-study-report: error: cannot write the report to {out} ({says}); free some space, or give a folder you "
        "can write to with --out"
    ]
    assert not out.exists() and not list(tmp_path.glob(".out.partial*"))  # nothing half-written left


def test_other_errors_are_not_mistaken_for_a_full_disk(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(cli, "build_report", broken)
    with pytest.raises(OSError, match="Input/output error"):
        cli.main([str(tmp_path)])
