"""``attn-study-report --out``: the folder is the report's alone. What it did not write is never removed; a signal
leaves nothing half-written; a killed report's leftovers are removed by the next one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from attn_study.errors import UserError
from attn_study.report import cli
from attn_study.report.cli import MARKER, build_report, remove_stale_partials
from tests.helpers import REPO, cli_env
from tests.report.test_report import jw_summary, make_run


@pytest.fixture
def runs(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "a", dataset="sst", encoder="lstm", summary=jw_summary(0.3, 0.8))
    make_run(root, "b", dataset="sst", encoder="cnn", summary=jw_summary(0.2, 0.7))
    return root


def test_a_folder_of_the_users_is_refused_and_left_as_it_was(runs, tmp_path):
    thesis = tmp_path / "thesis"
    thesis.mkdir()
    (thesis / "thesis.tex").write_text("\\chapter{Attention}")
    with pytest.raises(UserError, match=r"--out .*thesis holds files this tool did not write"):
        build_report(runs, thesis)
    assert [p.name for p in thesis.iterdir()] == ["thesis.tex"]
    assert (thesis / "thesis.tex").read_text() == "\\chapter{Attention}"


@pytest.mark.parametrize("where", ["root", "above", "run", "inside_run"])
def test_the_runs_folder_a_folder_above_it_and_a_run_are_refused(runs, where):
    out = {"root": runs, "above": runs.parent, "run": runs / "a", "inside_run": runs / "a" / ".hydra"}[where]
    before = sorted(p.relative_to(runs.parent) for p in runs.parent.rglob("*"))
    with pytest.raises(UserError, match=r"--out .* (holds the runs being reported|is a run directory or inside one)"):
        build_report(runs, out)
    assert sorted(p.relative_to(runs.parent) for p in runs.parent.rglob("*")) == before


def test_a_file_is_refused(runs, tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("mine")
    with pytest.raises(UserError, match="is a file, not a folder"):
        build_report(runs, target)
    assert target.read_text() == "mine"


def test_an_earlier_report_is_replaced_and_an_empty_folder_taken(runs, tmp_path):
    out = tmp_path / "report"
    out.mkdir()  # empty: nothing to lose
    build_report(runs, out)
    marker = json.loads((out / MARKER).read_text())
    assert marker["written_by"] == "attn-study-report" and "index.html" in marker["files"]
    first = (out / "index.html").stat().st_mtime_ns
    time.sleep(0.01)
    build_report(runs, out)  # the earlier report, as it was written: replaced
    assert (out / "index.html").stat().st_mtime_ns != first
    assert not list(tmp_path.glob(".report.partial-*"))


def test_a_file_added_to_an_earlier_report_stops_the_next_one(runs, tmp_path):
    out = tmp_path / "report"
    build_report(runs, out)
    (out / "my_notes.md").write_text("keep me")
    with pytest.raises(UserError, match=r"holds files an earlier report did not write \(my_notes.md\)"):
        build_report(runs, out)
    assert (out / "my_notes.md").read_text() == "keep me" and (out / "index.html").is_file()


def test_a_forged_or_broken_marker_is_not_taken_as_a_report(runs, tmp_path):
    out = tmp_path / "report"
    out.mkdir()
    (out / "data.csv").write_text("x")
    (out / MARKER).write_text("not json")
    with pytest.raises(UserError, match="did not write"):
        build_report(runs, out)
    (out / MARKER).write_text(json.dumps({"written_by": "someone else", "files": ["data.csv"]}))
    with pytest.raises(UserError, match="did not write"):
        build_report(runs, out)
    assert (out / "data.csv").read_text() == "x"


def test_the_default_folder_is_the_runs_report_folder(runs):
    assert build_report(runs) == runs / "report" and (runs / "report" / MARKER).is_file()
    assert build_report(runs) == runs / "report"  # again: its own earlier report


def test_the_cli_refuses_in_one_line_with_status_2(runs, tmp_path, capsys):
    thesis = tmp_path / "thesis"
    thesis.mkdir()
    (thesis / "thesis.tex").write_text("x")
    with pytest.raises(SystemExit) as exit_:
        cli.main([str(runs), "--out", str(thesis)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("attn-study-report: error: --out ")


def test_stale_partial_folders_of_dead_reports_are_removed_live_ones_kept(tmp_path):
    out = tmp_path / "report"
    host = cli._owner().split("-")[0]
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".report.partial-{host}-{dead.pid}-abc123"
    live = tmp_path / f".report.partial-{host}-{os.getpid()}-def456"
    other_host = tmp_path / f".report.partial-elsewhere-{dead.pid}-ghi789"
    for folder in (stale, live, other_host):
        folder.mkdir()
        (folder / "index.html").write_text("half")
    assert remove_stale_partials(out) == [stale]
    assert not stale.exists() and live.exists() and other_host.exists()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_a_report_is_one_line_and_leaves_nothing(runs, tmp_path, signum):
    """A report stopped while it writes (made slow here by a sleep in the first section): status 128 + signal, one
    line, no traceback, and no partial folder beside ``--out``."""
    out = tmp_path / "out"
    script = (
        "import time, sys\n"
        "from attn_study.report import cli, accuracy\n"
        "def slow(*a, **k):\n"
        "    print('writing', flush=True); time.sleep(60)\n"
        "accuracy.sections = slow\n"
        f"cli.main([{str(runs)!r}, '--out', {str(out)!r}])\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "writing"
    assert list(tmp_path.glob(".out.partial-*"))  # the work folder exists while it writes
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signum
    assert err.strip().splitlines() == [
        f"attn-study-report: stopped by {signal.Signals(signum).name}; no report was written (nothing half-written "
        "is left); run it again"
    ]
    assert not list(tmp_path.glob(".out.partial-*")) and not out.exists()
