"""The benchmark scripts run (tiny settings), so they cannot rot."""

from __future__ import annotations

import ast
import csv
import importlib.util
import json
import os
import re
import subprocess
import sys

import pandas as pd
import pytest
import torch

from attn_study.analysis.importance import gradient_importance
from attn_study.errors import UserError
from attn_study.families.jain_wallace.callback import JainWallace
from attn_study.models.outputs import log_odds
from attn_study.run import run
from tests.helpers import REPO, TINY, cli_env, tiny_model, token_batch


def run_benchmark(script: str, *args: str) -> subprocess.CompletedProcess:
    """``python benchmarks/<script> <args>`` from the repository, asserted to succeed (its output tails if not)."""
    done = subprocess.run(
        [sys.executable, f"benchmarks/{script}", *args],
        cwd=REPO,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done


def test_the_gpu_grid_benchmark_runs_the_real_cli_and_writes_its_csv(tmp_path):
    out = tmp_path / "grid.csv"
    done = run_benchmark("gpu_grid.py", "--tiny", "--jobs", "2", "--out", str(out))
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 2 and {r["state"] for r in rows} == {"complete"}
    assert {"encoder=lstm", "encoder=average"} <= {part for r in rows for part in r["job"].split(",")}
    for row in rows:
        assert float(row["wall_s"]) >= float(row["train_s"]) > 0
        assert all(float(row[f"jw_{t}_s"]) >= 0 for t in ("predict", "correlation", "permutation", "adversarial"))
        assert int(row["torch_threads"]) == max(1, (os.cpu_count() or 1) // 2)  # two jobs share the cores
    assert "2 jobs" in done.stdout


def load_benchmark(name: str):
    """A script of ``benchmarks/`` as a module."""
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_importance_benchmark_covers_every_mode_of_gradient_classes():
    """Its list of modes is the J&W option's list of choices (read from the option's own refusal)."""
    bench = load_benchmark("importance")
    with pytest.raises(UserError) as refused:
        JainWallace(gradient_classes="no_such_mode")
    choices = ast.literal_eval(re.search(r"choose from (\[.*?\])", str(refused.value)).group(1))
    assert set(choices) == set(bench.GRADIENT_CLASSES)


@pytest.mark.parametrize("num_classes", [2, 3])
@pytest.mark.parametrize("classes", ["predicted", "sum"])
def test_the_captum_reference_of_each_gradient_mode_is_our_gradient_importance(num_classes, classes):
    bench = load_benchmark("importance")
    model = tiny_model(num_classes=num_classes, seed=3)
    batch = token_batch([[4, 5, 6, 7, 8], [9, 10, 11], [12, 13, 14, 15], [16, 17]])
    ours = gradient_importance(model, batch, normalise=False, classes=classes)
    theirs = bench.captum_gradient(model, batch, num_classes, classes)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-7)
    other = bench.captum_gradient(model, batch, num_classes, "sum" if classes == "predicted" else "predicted")
    assert not torch.allclose(ours, other, rtol=1e-3, atol=1e-5)  # the comparison tells the modes apart


def test_the_reference_log_odds_are_the_projects_for_every_class():
    bench = load_benchmark("importance")
    logits = torch.tensor([[2.0, -1.0, 0.5], [0.0, 30.0, -4.0]])
    for c in range(3):
        target = torch.full((2,), c)
        torch.testing.assert_close(bench.all_log_odds(logits)[:, c], log_odds(logits, target))
    binary = torch.tensor([[1.5], [-20.0]])
    torch.testing.assert_close(bench.all_log_odds(binary)[:, 1], log_odds(binary, torch.ones(2, dtype=torch.long)))
    torch.testing.assert_close(bench.all_log_odds(binary)[:, 0], log_odds(binary, torch.zeros(2, dtype=torch.long)))


def test_the_importance_benchmark_runs_on_a_trained_run_and_agrees_with_captum(make_cfg, tmp_path):
    """The README's ``benchmarks/importance.py --run <dir>`` on a tiny complete run: exit 0, every mode agreeing."""
    run_dir = tmp_path / "run"
    run(make_cfg(*TINY, "logger=none", "encoder.hidden_size=8"), run_dir)
    done = run_benchmark(
        "importance.py",
        "--run",
        str(run_dir),
        "--max-instances",
        "24",
        "--batch-size",
        "8",
        "--perturbations-per-eval",
        "1",
        "4",
    )
    result = json.loads(done.stdout[done.stdout.index("{") :])
    assert result["agree"] is True and result["instances"] == 24
    for classes in ("predicted", "sum"):
        assert result[f"grad_{classes}_max_rel_diff"] <= 1e-5
    assert result["loo_max_abs_diff"] <= 1e-5


def test_the_explorer_benchmark_builds_its_page_and_times_it(tmp_path):
    options = ["--instances", "40", "--length", "20", "--families", "2", "--out", str(tmp_path)]
    done = run_benchmark("explorer_page.py", *options)
    assert re.search(r"40 instances, \d+ tokens, 2 families: page [\d.]+ MiB", done.stdout), done.stdout
    assert (tmp_path / "explorer.html").is_file()


def test_the_explorer_page_holds_texts_and_scores_in_a_byte_or_two_per_token(tmp_path):
    """The page's size for IMDB (docs/explorer.md: 6.9 MiB for 4,374 reviews of ~180 tokens, four methods) from a
    tenth of it: each text is its uint16 ids in base64 (4 characters per 3 bytes) and each method's scores one int8
    shade a token in base64 — not floats written out, ~8 characters each —, and together they are most of the page."""
    from attn_study.report.explorer import write_page
    from attn_study.report.runs import collect

    bench = load_benchmark("explorer_page")
    run_dir = bench.synthetic_run(tmp_path, instances=437, length=180)
    page = write_page(collect(run_dir)[0], tmp_path / "explorer.html", "size")
    data = json.loads(re.search(r'id="explorer-data">(.*?)</script>', page.read_text(), re.S).group(1))
    lengths = [len(t) for t in pd.read_parquet(run_dir / "analysis" / "jain_wallace" / "tokens.parquet")["tokens"]]
    base64 = lambda size: 4 * -(-size // 3)  # characters of ``size`` bytes
    texts = sum(len(t) for t in data["texts"])
    assert texts == sum(base64(2 * n) for n in lengths)
    assert len(data["methods"]) == 4
    shades = [sum(len(c) for c in m["codes"]) for m in data["methods"]]
    assert shades == [sum(base64(n) for n in lengths)] * 4
    assert (texts + sum(shades)) / page.stat().st_size > 0.75
