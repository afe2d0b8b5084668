"""Benchmark: the instance explorer (``attn_study/report/explorer.py``) on a run of IMDB's size — its size on disk,
the seconds to build it, and, with Chromium and Playwright at hand, the milliseconds a headless browser takes to
load it (the script's own start-up: parsing the data, the table's first rows) and to sort it by a column.

The run is synthetic, written as the families write theirs: 4,374 test instances (IMDB's test split as the
papers filter it) of about 180 tokens (lengths drawn around ``--length``; words from a Zipf law over a 20,000-word
vocabulary), Jain & Wallace's per-instance columns and its four per-token scores (attention, gradient,
leave-one-out, the adversary's attention) in ``analysis/jain_wallace/``.

    python benchmarks/explorer_page.py [--instances 4374] [--length 180] [--families 1] [--out DIR]

``--families 2`` adds Serrano & Smith's columns and three more scores. Time it alone: other processes on the same
cores distort it.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

from attn_study import layout
from attn_study.io import write_json_atomic
from attn_study.report.explorer import write_page
from attn_study.report.runs import collect

VOCABULARY = 20_000


def synthetic_run(root: Path, instances: int = 4374, length: int = 180, families: int = 1, seed: int = 0) -> Path:
    """A complete run directory under ``root`` with ``instances`` analysed test instances of about ``length``
    tokens: Jain & Wallace's per-instance rows and per-token scores (and, with ``families=2``, Serrano & Smith's)."""
    rng = np.random.default_rng(seed)
    run = Path(root) / "imdb-lstm"
    (run / layout.RECORD).mkdir(parents=True)
    names = {"dataset": "imdb", "model": "flat", "encoder": "lstm", "attention": "additive", "projection": "softmax"}
    config = {k: {"name": v} for k, v in names.items()} | {"seed": 1, "analysis": {"jain_wallace": {}}}
    OmegaConf.save(OmegaConf.create(config), layout.config_file(run))
    write_json_atomic(run / layout.STATUS, {"state": "complete", "finished": 1.0, "labels": ["negative", "positive"]})
    write_json_atomic(run / layout.SUMMARY, {"test/acc": 0.9})
    words = np.array([f"w{k}" for k in range(VOCABULARY)])
    lengths = np.clip(rng.normal(length, length / 3, instances).round().astype(int), 5, 4 * length)
    uids = [f"test-{i}" for i in range(instances)]
    label = rng.integers(0, 2, instances)
    prediction = np.where(rng.random(instances) < 0.9, label, 1 - label)
    texts = [words[np.minimum(rng.zipf(1.3, n), VOCABULARY) - 1].tolist() for n in lengths]

    def scores(signed: bool = False) -> list[np.ndarray]:
        out = []
        for n in lengths:
            v = rng.dirichlet(np.full(n, 0.3)).astype(np.float32)
            out.append(v * rng.choice([-1, 1], n).astype(np.float32) if signed else v)
        return out

    def frame(columns: dict) -> pd.DataFrame:
        head = {"index": np.arange(instances), "uid": uids, "label": label, "length": lengths}
        return pd.DataFrame(head | {"prediction": prediction, "probability": rng.uniform(0.5, 1, instances)} | columns)

    jw = {
        "max_attention": rng.uniform(0, 1, instances),
        "attention_entropy": rng.uniform(0, 5, instances),
        **{f"{s}_{c}": rng.uniform(-1, 1, instances) for c in ("grad", "loo", "grad_loo") for s in ("tau", "p")},
        "perm_median_tvd": rng.uniform(0, 0.1, instances),
        "adv_emax_jsd": rng.uniform(0, 0.7, instances),
        "adv_feasible": rng.integers(0, 6, instances),
        "adv_tvd": rng.uniform(0, 0.01, instances),
    }
    attention = scores()
    per_family = {
        "jain_wallace": (
            jw,
            {"attention": attention, "gradient": scores(), "loo": scores(), "adversarial": scores()},
        ),
        "serrano_smith": (
            {
                f"{r}_{w}": rng.uniform(0, 1, instances)
                for r in ("attention", "gradient", "random")
                for w in ("removed", "frac", "mass")
            }
            | {"delta_js": rng.normal(0, 0.01, instances)},
            {"attention": attention, "gradient": scores(signed=True), "grad_attention": scores(signed=True)},
        ),
    }
    for family in list(per_family)[:families]:
        columns, token_scores = per_family[family]
        folder = layout.family_dir(run, family)
        folder.mkdir(parents=True)
        frame(columns).to_parquet(folder / layout.INSTANCES)
        pd.DataFrame({"uid": uids, "tokens": texts} | token_scores).to_parquet(folder / layout.TOKENS)
    return run


def browser_timings(page_path: Path, column: str = "jain_wallace/tau_grad") -> dict | None:
    """Milliseconds from navigation to the script's end (the table drawn) and of one sort by ``column`` in headless
    Chromium; None without Chromium or Playwright."""
    import shutil

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if executable is None:
        return None
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=flags)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            started = time.perf_counter()
            page.goto(page_path.as_uri())
            page.wait_for_function("window.explorerReadyMs !== undefined")
            wall = (time.perf_counter() - started) * 1000
            ready = page.evaluate("window.explorerReadyMs")
            sort = page.evaluate(
                """(key) => { const th = document.querySelector(`thead tr.names th[data-key="${key}"]`);
                   const t = performance.now(); th.click(); return performance.now() - t; }""",
                column,
            )
            select = page.evaluate(
                """() => { const tr = document.querySelector("tbody tr.row");
                   const t = performance.now(); tr.click(); return performance.now() - t; }"""
            )
        finally:
            browser.close()
    return {"load_ms": ready, "goto_ms": wall, "sort_ms": sort, "select_ms": select}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--instances", type=int, default=4374)
    parser.add_argument("--length", type=int, default=180)
    parser.add_argument("--families", type=int, choices=(1, 2), default=1)
    parser.add_argument("--out", type=Path, default=None, help="where the run and its page go (default: a temp dir)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        root = args.out or Path(scratch)
        run = synthetic_run(root, args.instances, args.length, args.families)
        tokens = sum(pd.read_parquet(layout.family_dir(run, "jain_wallace") / layout.TOKENS)["tokens"].map(len))
        runs, _ = collect(run)
        started = time.perf_counter()
        page = write_page(runs, root / "explorer.html", "benchmark")
        built = time.perf_counter() - started
        size = page.stat().st_size / 2**20
        what = f"{args.instances} instances, {tokens} tokens, {args.families} families"
        print(f"{what}: page {size:.2f} MiB, built in {built:.1f} s")
        timings = browser_timings(page)
        if timings is None:
            print("no Chromium or Playwright: browser timings skipped")
        else:
            print(
                f"headless Chromium: script done {timings['load_ms']:.0f} ms after navigation started "
                f"(goto to ready {timings['goto_ms']:.0f} ms), sort {timings['sort_ms']:.0f} ms, "
                f"select {timings['select_ms']:.0f} ms"
            )


if __name__ == "__main__":
    main()
