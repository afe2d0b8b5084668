"""The benchmark scripts run (tiny settings), so they cannot rot."""

from __future__ import annotations

import csv
import os
import subprocess
import sys

from tests.helpers import REPO, cli_env


def test_the_gpu_grid_benchmark_runs_the_real_cli_and_writes_its_csv(tmp_path):
    out = tmp_path / "grid.csv"
    done = subprocess.run(
        [sys.executable, "benchmarks/gpu_grid.py", "--tiny", "--jobs", "2", "--out", str(out)],
        cwd=REPO,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 2 and {r["state"] for r in rows} == {"complete"}
    assert {"encoder=lstm", "encoder=average"} <= {part for r in rows for part in r["job"].split(",")}
    for row in rows:
        assert float(row["wall_s"]) >= float(row["train_s"]) > 0
        assert all(float(row[f"jw_{t}_s"]) >= 0 for t in ("predict", "correlation", "permutation", "adversarial"))
        assert int(row["torch_threads"]) == max(1, (os.cpu_count() or 1) // 2)  # two jobs share the cores
    assert "2 jobs" in done.stdout
