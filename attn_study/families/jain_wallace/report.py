"""Jain & Wallace (2019) across runs: Table 2, Figs 3–5 (the accuracies, their Table 1's last column, are
attn_study.report.accuracy's).

Table 2: for each dataset and predicted class, Kendall tau-b of attention vs gradient importance
(tau_g) for the BiLSTM and the Average encoder, and of attention vs leave-one-out (tau_loo) for the
BiLSTM — mean ± std over instances and the fraction with p <= the run's threshold — read from each
run's ``jw/...`` summary (the numbers the run logged). One table per (attention, projection); the
paper's is additive ("tanh") attention with softmax.
Figs 3 and 4 (BiLSTM): per-instance tau(grad, loo) − tau(attn, loo) and tau(grad, loo) − tau(attn,
grad), by dataset and predicted class. Fig 5: per-instance tau_loo of the Average vs the BiLSTM
encoder, by dataset, with the difference of the means.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from attn_study.figures.common import new_figure, save_png
from attn_study.report.render import captioned_table, embedded_png, mean_ci, seed_spread
from attn_study.report.runs import Run, without_empty_variant

from . import keys

BILSTM, AVERAGE = "lstm", "average"
TABLE2_COLUMNS = {  # column stem → (encoder, summary key)
    "tau_g_bilstm": (BILSTM, "tau_grad"),
    "tau_g_average": (AVERAGE, "tau_grad"),
    "tau_loo_bilstm": (BILSTM, "tau_loo"),
}
TABLE2_HEADERS = {"tau_g_bilstm": "τ_g BiLSTM", "tau_g_average": "τ_g Average", "tau_loo_bilstm": "τ_loo BiLSTM"}
STATS = ("mean", "ci_low", "ci_high", "std", "sig_frac", "n")


def jw_runs(runs: list[Run]) -> list[Run]:
    return [r for r in runs if keys.children(r.summary, keys.key(keys.NAMESPACE, "tau_grad"))]


def variants(runs: list[Run]) -> list[tuple[str, str]]:
    """(attention, projection) pairs present, the paper's (additive, softmax) first."""
    pairs = {(r.config["attention"], r.config["projection"]) for r in runs}
    return sorted(pairs, key=lambda p: (p != ("additive", "softmax"), p))


def table2(runs: list[Run], attention: str, projection: str) -> pd.DataFrame:
    """One row per dataset (× seed when several) × predicted class; numeric columns
    ``<stem>_mean``, ``<stem>_std``, ``<stem>_sig_frac``, ``<stem>_n`` for the three stems."""
    chosen = [r for r in jw_runs(runs) if (r.config["attention"], r.config["projection"]) == (attention, projection)]
    seeds = {r.config["seed"] for r in chosen}
    rows: dict[tuple, dict] = {}
    for run in chosen:
        for stem, (encoder, key) in TABLE2_COLUMNS.items():
            if run.config["encoder"] != encoder:
                continue
            for k in keys.classes(run.summary, keys.key(keys.NAMESPACE, key)):
                variant = run.config.get("variant", "")
                row_key = (run.config["dataset"], variant, run.config["seed"], k)
                row = rows.setdefault(
                    row_key,
                    {
                        "dataset": run.config["dataset"],
                        "variant": variant,
                        "seed": run.config["seed"],
                        "class": run.label(k),
                    },
                )
                for stat in STATS:
                    row[f"{stem}_{stat}"] = run.summary.get(keys.jw(key, stat, k), np.nan)
    frame = pd.DataFrame([rows[k] for k in sorted(rows, key=lambda k: (k[0], k[1], str(k[2]), k[3]))])
    if frame.empty:
        return frame
    for stem in TABLE2_COLUMNS:
        for stat in STATS:
            if f"{stem}_{stat}" not in frame:
                frame[f"{stem}_{stat}"] = np.nan
    if len(seeds) == 1:
        frame = frame.drop(columns="seed")
    return without_empty_variant(frame)


def table2_across_seeds(frame: pd.DataFrame) -> pd.DataFrame:
    """With several seeds: per dataset × class and column, the mean over seeds of the per-seed mean
    τ, its standard deviation over seeds (ddof 0) — how much a single-seed Table 2 can move — the
    mean significant fraction and the number of seeds; and whether τ_g of the BiLSTM and of the
    Average encoder differ beyond the seed spread (``render.seed_spread``)."""
    if "seed" not in frame:
        return pd.DataFrame()
    rows = []
    by = [c for c in ("dataset", "variant", "class") if c in frame]
    for values, g in frame.groupby(by, sort=True):
        row = dict(zip(by, values))
        for stem, header in TABLE2_HEADERS.items():
            means = g[f"{stem}_mean"].dropna()
            row[f"{header} mean over seeds"] = means.mean() if len(means) else np.nan
            row[f"{header} std over seeds"] = means.std(ddof=0) if len(means) else np.nan
            row[f"{header} sig. frac."] = g[f"{stem}_sig_frac"].dropna().mean() if len(means) else np.nan
            row[f"{header} seeds"] = len(means)
        row["τ_g BiLSTM − Average"] = seed_spread(g["tau_g_bilstm_mean"], g["tau_g_average_mean"])
        rows.append(row)
    return pd.DataFrame(rows)


def table2_display(frame: pd.DataFrame) -> pd.DataFrame:
    """Table 2 as the paper prints it — "mean ± std" over instances and "sig. frac." per column — with
    the mean's 95 % bootstrap interval: "mean [low, high] ± std"."""
    out = frame[[c for c in ("dataset", "variant", "seed", "class") if c in frame]].copy()
    for stem, header in TABLE2_HEADERS.items():
        cells = zip(*(frame[f"{stem}_{s}"] for s in ("mean", "ci_low", "ci_high", "std")))
        out[f"{header} mean [95% CI] ± std"] = [
            ("—" if np.isnan(m) else f"{mean_ci(m, lo, hi, 2)} ± {s:.2f}") for m, lo, hi, s in cells
        ]
        out[f"{header} sig. frac."] = ["—" if np.isnan(v) else f"{v:.2f}" for v in frame[f"{stem}_sig_frac"]]
    return out


def _per_instance(runs: list[Run], encoder: str, attention: str, projection: str) -> dict[str, pd.DataFrame]:
    """dataset → the per-instance J&W frame of the matching run (first seed when several)."""
    out = {}
    for run in sorted(jw_runs(runs), key=lambda r: (r.config["dataset"], str(r.config["seed"]))):
        c = run.config
        if (c["encoder"], c["attention"], c["projection"]) == (encoder, attention, projection) and c[
            "dataset"
        ] not in out:
            frame = run.instances("jain_wallace")
            if frame is not None and "tau_grad" in frame:
                out[c["dataset"]] = frame.assign(class_name=[run.label(int(k)) for k in frame["prediction"]])
    return out


def _box_figure(groups: list[tuple[str, np.ndarray]], xlabel: str, title: str, path: Path) -> Path:
    """Horizontal box plots, one per (label, values) group (NaN left out; diamond = mean)."""
    fig = new_figure((7, 0.45 * len(groups) + 1.4))
    ax = fig.add_subplot()
    ax.boxplot(
        [g[1][~np.isnan(g[1])] for g in groups],
        vert=False,
        showmeans=True,
        showfliers=False,
        meanprops={"marker": "D", "markerfacecolor": "black", "markeredgecolor": "black", "markersize": 4},
    )
    ax.set_yticks(range(1, len(groups) + 1), [g[0] for g in groups])
    ax.axvline(0, color="grey", lw=0.8, ls="--")
    ax.set_xlabel(xlabel)
    ax.invert_yaxis()
    ax.set_title(title, fontsize=10)
    return save_png(fig, path)


def difference_figure(runs: list[Run], attention: str, projection: str, which: str, path: Path) -> Path | None:
    """Fig 3 (``which='loo'``): tau(grad, loo) − tau(attn, loo); Fig 4 (``'grad'``): tau(grad, loo) −
    tau(attn, grad); BiLSTM, per dataset and predicted class (boxes; diamond = mean)."""
    frames = _per_instance(runs, BILSTM, attention, projection)
    if not frames:
        return None
    other = "tau_loo" if which == "loo" else "tau_grad"
    groups = []
    for dataset, frame in frames.items():
        for name, g in frame.groupby("class_name", sort=True):
            diff = (g["tau_grad_loo"] - g[other]).to_numpy(float)
            groups.append((f"{dataset} / {name} (mean {np.nanmean(diff):+.2f})", diff))
    what = "τ(grad, loo) − τ(attn, loo)" if which == "loo" else "τ(grad, loo) − τ(attn, grad)"
    number = 3 if which == "loo" else 4
    return _box_figure(groups, what, f"Fig {number}: {what}, BiLSTM + {attention} ({projection})", path)


def average_vs_bilstm_figure(runs: list[Run], attention: str, projection: str, path: Path) -> Path | None:
    """Fig 5: per-instance tau_loo of the Average and the BiLSTM encoder per dataset."""
    lstm = _per_instance(runs, BILSTM, attention, projection)
    avg = _per_instance(runs, AVERAGE, attention, projection)
    datasets = sorted(set(lstm) & set(avg))
    if not datasets:
        return None
    groups = []
    for dataset in datasets:
        a, b = avg[dataset]["tau_loo"].to_numpy(float), lstm[dataset]["tau_loo"].to_numpy(float)
        diff = np.nanmean(a) - np.nanmean(b)
        groups += [(f"{dataset} Average (Δ mean {diff:+.2f})", a), (f"{dataset} BiLSTM", b)]
    return _box_figure(
        groups,
        "τ_loo (attention vs leave-one-out)",
        f"Fig 5: Average vs BiLSTM encoder, {attention} ({projection})",
        path,
    )


def sections(runs: list[Run], work: Path) -> list[tuple[str, str]]:
    """Table 2 (and across seeds) and Figs 3–5 for every (attention, projection) of the J&W runs."""
    out = []
    used = jw_runs(runs)
    for attention, projection in variants(used):
        frame = table2(used, attention, projection)
        if frame.empty:
            continue
        stem = f"table2_{attention}-{projection}"
        caption = (
            f"Jain & Wallace Table 2 ({attention} attention, {projection}): Kendall τ of attention vs "
            "gradient (τ_g) and leave-one-out (τ_loo) importance per predicted class; mean ± std over "
            "instances and the fraction with p ≤ 0.05"
        )
        body = captioned_table(frame, work, stem, caption, display=table2_display(frame))
        seeds = table2_across_seeds(frame)
        if not seeds.empty:
            caption = (
                f"Table 2 ({attention}, {projection}) across seeds: mean and standard deviation over seeds "
                "of each seed's mean τ"
            )
            body += captioned_table(seeds, work, f"{stem}_seeds", caption)
        name = f"{attention}-{projection}.png"
        figures = (
            difference_figure(used, attention, projection, "loo", work / f"fig3_{name}"),
            difference_figure(used, attention, projection, "grad", work / f"fig4_{name}"),
            average_vs_bilstm_figure(used, attention, projection, work / f"fig5_{name}"),
        )
        body += "".join(embedded_png(path) for path in figures if path is not None)
        out.append((f"Jain & Wallace: {attention} attention, {projection}", body))
    return out
