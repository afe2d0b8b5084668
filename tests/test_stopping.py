"""SIGINT / SIGTERM during ``attn-study-analyze`` (attn_study/stopping.py): what a stop leaves behind. The signal
itself, through a real process, is tested with attn-study (tests/sweep/test_run_state.py); the order of the cleanups
and a cleanup that fails (a real process), here."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading

import pytest

from attn_study.families.serrano_smith.callback import SerranoSmith
from attn_study.job import state, stopping
from attn_study.job.analyze import analyze
from tests.helpers import REPO, TINY, cli_env, compose_config, status


class Exited(Exception):
    def __init__(self, code):
        self.code = code


def test_an_analysis_stopped_mid_way_keeps_its_finished_families_and_no_half_written_folder(
    trained_runs, tmp_path, monkeypatch, capsys
):
    """Jain & Wallace finishes, then Ctrl-C arrives while Serrano & Smith writes into its hidden folder: that folder
    is removed, J&W's is kept and ``summary.json`` holds its keys, the run stays complete, the process says so."""
    run_dir = trained_runs.copy(*TINY, "logger=none", "encoder=average", "encoder.hidden_size=8", into=tmp_path)
    before = status(run_dir)

    def stop_while_writing(self, measured, out_dir, data):
        assert out_dir.name == ".serrano_smith.partial" and out_dir.is_dir()
        stopping._stop(signal.SIGINT)

    def exit_(code):
        raise Exited(code)

    monkeypatch.setattr(SerranoSmith, "artefacts", stop_while_writing)
    monkeypatch.setattr(stopping.os, "_exit", exit_)
    monkeypatch.setattr(stopping, "_stopping", threading.RLock())
    monkeypatch.setitem(stopping._said, "app", "attn-study-analyze")
    cfg = compose_config(
        f"ckpt_path={run_dir}",
        "analysis=[jain_wallace,serrano_smith]",
        "analysis.jain_wallace.tests=[permutation]",
        "analysis.jain_wallace.permutations=4",
        "analysis.serrano_smith.max_instances=8",
        "use_loggers=false",
        "device=cpu",
        name="analyze",
    )
    with pytest.raises(Exited) as stopped:
        analyze(cfg)
    assert stopped.value.code == 128 + signal.SIGINT
    assert "attn-study-analyze: stopped by SIGINT;" in capsys.readouterr().err
    analysis = run_dir / "analysis"
    assert sorted(p.name for p in analysis.iterdir()) == ["jain_wallace"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert "jw/perm/median_tvd/mean" in summary and not [k for k in summary if k.startswith("ss/")]
    assert status(run_dir) == before and state.is_complete(run_dir)
    assert stopping._cleanups == []  # the analysis's cleanup is registered for its own duration only


def test_a_stop_runs_the_newest_cleanup_first(tmp_path, monkeypatch, capsys):
    """A run's cleanup (mark it interrupted) is registered before an analysis's (remove its half-written folder),
    which is nested inside: the folder is gone by the time the run is marked, so nothing half-written outlives the
    mark. The line and the exit status follow the cleanups."""
    partial = tmp_path / "analysis" / ".family.partial"
    partial.mkdir(parents=True)
    ran = []

    def mark_interrupted(signal_name):
        ran.append(("mark", signal_name, partial.exists()))

    def remove_partial(signal_name):
        partial.rmdir()
        ran.append(("remove", signal_name, partial.exists()))

    def exit_(code):
        raise Exited(code)

    monkeypatch.setattr(stopping.os, "_exit", exit_)
    monkeypatch.setattr(stopping, "_stopping", threading.RLock())
    monkeypatch.setitem(stopping._said, "app", "attn-study")
    monkeypatch.setitem(stopping._said, "advice", "launch it again")
    with pytest.raises(Exited) as stopped:
        with stopping.on_stop(mark_interrupted), stopping.on_stop(remove_partial):
            stopping._stop(signal.SIGTERM)
    assert ran == [("remove", "SIGTERM", False), ("mark", "SIGTERM", False)]
    assert stopped.value.code == 128 + signal.SIGTERM
    assert capsys.readouterr().err == "attn-study: stopped by SIGTERM; launch it again\n"
    assert stopping._cleanups == []


def with_stopping(script: str) -> str:
    """``script`` run with ``stopping`` imported: the module this file tests, wherever it lives."""
    return f"import importlib\nstopping = importlib.import_module({stopping.__name__!r})\n{script}"


#: a process whose newest cleanup raises, stopped while its main thread waits — in ``time.sleep`` (the main thread's
#: handler runs at once) or inside a torch call that never returns (only the watcher thread can act)
STOPPED_WITH_A_FAILING_CLEANUP = """
import sys, time

stopping.install("attn-study", "launch it again")


def failing(signal_name):
    print("failing cleanup", signal_name, flush=True)
    raise OSError("disk full")


def marking(signal_name):
    print("marking cleanup", signal_name, flush=True)


with stopping.on_stop(marking), stopping.on_stop(failing):
    if sys.argv[1] == "stuck":
        import torch

        print("ready", flush=True)
        torch.futures.Future().wait()
    print("ready", flush=True)
    time.sleep(120)
"""


@pytest.mark.parametrize(
    ("sig", "waiting"), [(signal.SIGTERM, "sleeping"), (signal.SIGINT, "sleeping"), (signal.SIGTERM, "stuck")]
)
def test_a_failing_cleanup_leaves_the_others_the_line_and_the_exit_status(sig, waiting):
    """A real process stopped by a signal whose newest cleanup raises: the older cleanup still runs, the one line is
    said (no traceback) and the status is 128 + the signal's number — also with its main thread stuck in a torch
    call (the watcher thread stops it)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", with_stopping(STOPPED_WITH_A_FAILING_CLEANUP), waiting],
        cwd=REPO,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    name = signal.Signals(sig).name
    assert out.splitlines() == [f"failing cleanup {name}", f"marking cleanup {name}"]
    assert err.splitlines() == [f"attn-study: stopped by {name}; launch it again"]
    assert proc.returncode == 128 + sig


def test_a_process_that_installed_the_handlers_ends_by_itself_when_its_work_is_done():
    """The watcher thread never keeps a finished process alive (installed twice, one watcher)."""
    script = (
        "import threading\n"
        "stopping.install('attn-study', 'again')\n"
        "stopping.install('attn-study', 'again')\n"
        "print(sum(t.name == 'attn-study-signals' for t in threading.enumerate()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", with_stopping(script)],
        cwd=REPO,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "1\n", "")
