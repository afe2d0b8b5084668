"""sweep=smoke_roar end to end through the command line: each job finds its source in the sweep's record, and the
report draws the ROAR figure and table."""

from __future__ import annotations

import json

from attn_study.report.cli import build_report
from tests.helpers import launch_here


def test_smoke_roar_sweep_chains_its_jobs_and_the_report_draws_them(tmp_path, monkeypatch, capsys):
    sweep = tmp_path / "sweep"
    overrides = ["sweep=smoke_roar", "roar.method=truth", "roar.fraction=0,0.5", "seed=13", "logger=csv"]
    code, stdout, stderr = launch_here(sweep, *overrides, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0, stdout[-2000:] + stderr[-3000:]
    assert "2 jobs: 2 ran" in stdout
    for method in ("truth",):
        status = json.loads((sweep / f"seed=13,roar.fraction=0.5,roar.method={method}" / "status.json").read_text())
        assert status["roar"]["source"] == str(sweep / f"seed=13,roar.fraction=0,roar.method={method}")
    # the known answer the sweep shows: the unmasked model reads the task, with its rationale masked it is at chance
    accuracy = {
        k: json.loads((sweep / f"seed=13,roar.fraction={k},roar.method=truth" / "summary.json").read_text())["test/acc"]
        for k in ("0", "0.5")
    }
    assert accuracy["0"] > 0.9 and abs(accuracy["0.5"] - 0.5) < 0.1, accuracy
    out = build_report(sweep)
    table = (out / "roar.md").read_text()
    assert "| truth |" in table and (out / "roar_1.png").is_file()
    assert "| roar truth k=0.5 |" in (out / "accuracy.md").read_text()  # the row names how its data was masked
