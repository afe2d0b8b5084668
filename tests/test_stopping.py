"""SIGINT / SIGTERM during ``attn-study-analyze`` (attn_study/stopping.py): what a stop leaves behind. The signal
itself, through a real process, is tested with attn-study (tests/sweep/test_run_state.py)."""

from __future__ import annotations

import json
import signal
import threading

import pytest

from attn_study import stopping
from attn_study.analyze import analyze
from attn_study.families.serrano_smith.callback import SerranoSmith
from attn_study.run import run
from attn_study.sweep import state
from tests.helpers import TINY, compose_config, status


class Exited(Exception):
    def __init__(self, code):
        self.code = code


def test_an_analysis_stopped_mid_way_keeps_its_finished_families_and_no_half_written_folder(
    tmp_path, monkeypatch, capsys
):
    """Jain & Wallace finishes, then Ctrl-C arrives while Serrano & Smith writes into its hidden folder: that folder
    is removed, J&W's is kept and ``summary.json`` holds its keys, the run stays complete, the process says so."""
    run_dir = tmp_path / "run"
    run(compose_config(*TINY, "logger=none", "encoder=average", "encoder.hidden_size=8"), run_dir)
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
