"""The benchmark scripts run (tiny settings), so they cannot rot."""

from __future__ import annotations

import ast
import csv
import importlib.util
import json
import os
import re

import pandas as pd
import pytest
import torch

from attn_study.analysis.importance import gradient_importance
from attn_study.errors import UserError
from attn_study.families.jain_wallace.callback import JainWallace
from attn_study.models.outputs import log_odds
from tests.helpers import REPO, TINY, run_benchmark, tiny_model, token_batch


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
        # each number is its job's own, read back from the job's status.json and summary.json (the sweep folder
        # beside --out)
        job = tmp_path / "grid_sweep" / row["job"]
        status = json.loads((job / "status.json").read_text())
        summary = json.loads((job / "summary.json").read_text())
        wall, train = status["finished"] - status["started"], summary["train/seconds"]
        assert (float(row["wall_s"]), float(row["train_s"])) == (wall, train)
        assert float(row["outside_training_s"]) == wall - train
        assert float(row["epoch_s"]) == summary["train/seconds_per_epoch"]
        for t in ("predict", "correlation", "permutation", "adversarial"):
            assert float(row[f"jw_{t}_s"]) == summary[f"jw/seconds/{t}"], t
        assert float(row["test_acc"]) == summary["test/acc"]
        assert int(row["torch_threads"]) == status["torch_threads"]
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


def test_the_importance_benchmark_runs_on_a_trained_run_and_agrees_with_captum(trained_runs):
    """The README's ``benchmarks/importance.py --run <dir>`` on a tiny complete run: exit 0, every mode agreeing."""
    run_dir = trained_runs.get(*TINY, "logger=none", "encoder.hidden_size=8")  # read only
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


def test_the_gpu_grid_benchmark_reads_each_jobs_numbers_and_the_gpu_samples_of_its_time_span(tmp_path):
    """``job_row`` on a job folder written by hand: its times from status.json and summary.json (every family's
    sub-tests, J&W's first), and the GPU samples taken between its start and its end only."""
    bench = load_benchmark("gpu_grid")
    job = tmp_path / "sst-flat-lstm-additive-softmax-s0"
    job.mkdir()
    (job / "status.json").write_text(
        json.dumps({"state": "complete", "started": 100.0, "finished": 160.5, "torch_threads": 4})
    )
    summary = {
        "train/seconds": 40.25,
        "train/seconds_per_epoch": 8.05,
        "jw/seconds/predict": 1.5,
        "jw/seconds/correlation": 6.0,
        "jw/seconds/permutation": 2.0,
        "jw/seconds/adversarial": 9.0,
        "ss/seconds/erasure": 3.5,
        "test/acc": 0.875,
        "run/peak_memory_mib": 900.0,
    }
    (job / "summary.json").write_text(json.dumps(summary))
    sampler = bench.GpuSampler()
    # (time, utilisation %, memory MiB): two samples outside the job's span [100, 160.5]
    sampler.samples = [(99.9, 100.0, 9000.0), (100.0, 20.0, 1000.0), (130.0, 60.0, 3000.0), (160.5, 40.0, 2000.0)]
    sampler.samples.append((161.0, 100.0, 9000.0))
    row = bench.job_row(job, sampler)
    assert row == {
        "job": job.name,
        "state": "complete",
        "wall_s": 60.5,
        "train_s": 40.25,
        "outside_training_s": 20.25,
        "epoch_s": 8.05,
        "jw_predict_s": 1.5,
        "jw_correlation_s": 6.0,
        "jw_permutation_s": 2.0,
        "jw_adversarial_s": 9.0,
        "ss_erasure_s": 3.5,
        "peak_memory_mib": 900.0,
        "peak_gpu_memory_mib": None,
        "test_acc": 0.875,
        "torch_threads": 4,
        "gpu_util_mean": 40.0,  # (20 + 60 + 40) / 3
        "gpu_util_max": 60.0,
        "gpu_mem_max_mib": 3000.0,
    }
    assert bench.job_row(job, None) == {k: v for k, v in row.items() if not k.startswith("gpu_")}
    assert sampler.between(200.0, 300.0) == {}  # no sample in the span: no GPU columns
