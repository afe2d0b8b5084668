"""Jain & Wallace (2019) across runs: Table 2, Figs 3–5 (the accuracies, their Table 1's last column, are
attn_study.report.accuracy's).

Table 2: for each dataset and predicted class, Kendall tau-b of attention vs gradient importance
(tau_g) for the BiLSTM and the Average encoder, and of attention vs leave-one-out (tau_loo) for the
BiLSTM — mean ± std over instances and the fraction with p <= the run's threshold — read from each
run's ``jw/...`` summary (the numbers the run logged). One table per (attention, projection); the
paper's is additive ("tanh") attention with softmax.
Permutation and adversaries across runs: per run and predicted class, the median output TVD under
permuted attention and the ε-max JSD of adversarial attention (mean [95 % CI]), the share of JSD > 0.5 and
of instances with no adversary within ε (their Figs 6–8 per run; ``jw_permutation_adversarial``).
Figs 3 and 4 (BiLSTM): per-instance tau(grad, loo) − tau(attn, loo) and tau(grad, loo) − tau(attn,
grad), by dataset and predicted class. Fig 5: per-instance tau_loo of the Average vs the BiLSTM
encoder, by dataset, with the difference of the means.
"""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd

from attn_study.figures.common import LABEL_WIDTH, new_figure, save_png, wrap_label
from attn_study.report.render import (
    MISSING,
    captioned_table,
    embedded_png,
    format_fraction,
    format_number,
    mean_ci,
    seed_comparison,
)
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


def constant_attention(run: Run) -> bool:
    """τ undefined for every instance because the attention is constant over each text (``attention=uniform``:
    every token ties, so no ranking)."""
    s = run.summary
    n = s.get(keys.jw("tau_grad", "n"), np.nan)
    constant = s.get(keys.key(keys.NAMESPACE, "dropped", "tau_grad", "constant_attention"), 0) or 0
    return n == 0 and constant > 0


def tau_runs(runs: list[Run]) -> list[Run]:
    """The J&W runs with a τ to report (not those with a constant attention)."""
    return [r for r in jw_runs(runs) if not constant_attention(r)]


def variants(runs: list[Run]) -> list[tuple[str, str]]:
    """(attention, projection) pairs present, the paper's (additive, softmax) first."""
    pairs = {(r.config["attention"], r.config["projection"]) for r in runs}
    return sorted(pairs, key=lambda p: (p != ("additive", "softmax"), p))


def run_classes(run: Run, stem: str) -> list[int]:
    """The classes of a run's per-class rows: every class the model predicted (``<stem>/class_<k>`` keys) and
    every class that is the label of an analysed instance (one never predicted: a row with n = 0). A class the
    dataset names that is neither (bAbI's words that are never an answer) has no row; without the run's
    per-instance table, every class the dataset names has one."""
    predicted = set(keys.classes(run.summary, stem))
    frame = run.instances("jain_wallace")
    if frame is None or "label" not in frame:
        return sorted(set(range(len(run.labels))) | predicted)
    return sorted(predicted | {int(k) for k in frame["label"].unique()})


def table2(runs: list[Run], attention: str, projection: str) -> pd.DataFrame:
    """One row per dataset (× seed when several) × class: "all" first (every analysed instance: the paper's
    "Overall" of bAbI and CNN), then each class of ``run_classes``; numeric columns ``<stem>_mean``, ``<stem>_ci_low``,
    ``<stem>_ci_high``, ``<stem>_std``, ``<stem>_sig_frac``, ``<stem>_n`` for the three stems (n: instances of
    the class with a defined τ; 0 for a class the model never predicted)."""
    chosen = [r for r in tau_runs(runs) if (r.config["attention"], r.config["projection"]) == (attention, projection)]
    seeds = {r.config["seed"] for r in chosen}
    rows: dict[tuple, dict] = {}
    for run in chosen:
        for stem, (encoder, key) in TABLE2_COLUMNS.items():
            if run.config["encoder"] != encoder:
                continue
            for k in [None, *run_classes(run, keys.key(keys.NAMESPACE, key))]:
                variant = run.config["variant"]
                row_key = (run.config["dataset"], variant, run.config["seed"], -1 if k is None else k)
                row = rows.setdefault(
                    row_key,
                    {
                        "dataset": run.config["dataset"],
                        "variant": variant,
                        "seed": run.config["seed"],
                        "class": "all" if k is None else run.label(k),
                    },
                )
                for stat in STATS:
                    row[f"{stem}_{stat}"] = run.summary.get(keys.jw(key, stat, k), 0 if stat == "n" else np.nan)
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
    Average encoder differ beyond the seed spread (``render.seed_comparison``: the difference, beyond or
    within, its exact p-value)."""
    if "seed" not in frame:
        return pd.DataFrame()
    rows = []
    by = [c for c in ("dataset", "variant", "class") if c in frame]
    for values, g in frame.groupby(by, sort=False):  # the table's order: all, then the classes
        row = dict(zip(by, values))
        for stem, header in TABLE2_HEADERS.items():
            means = g[f"{stem}_mean"].dropna()
            row[f"{header} mean over seeds"] = means.mean() if len(means) else np.nan
            row[f"{header} std over seeds"] = means.std(ddof=0) if len(means) else np.nan
            row[f"{header} sig. frac."] = g[f"{stem}_sig_frac"].dropna().mean() if len(means) else np.nan
            row[f"{header} seeds"] = len(means)
        comparison = seed_comparison(g["tau_g_bilstm_mean"], g["tau_g_average_mean"])
        row["τ_g BiLSTM − Average"] = comparison["delta"]
        row["beyond seed spread"] = comparison["beyond"]
        row["beyond seed spread p"] = comparison["p"]
        rows.append(row)
    return pd.DataFrame(rows)


def table2_across_seeds_display(frame: pd.DataFrame) -> pd.DataFrame:
    """The across-seeds table with its comparison in words (``render.seed_spread``)."""
    out = frame.drop(columns=["τ_g BiLSTM − Average", "beyond seed spread", "beyond seed spread p"])
    out["τ_g BiLSTM − Average"] = [
        MISSING
        if beyond is None or (isinstance(beyond, float) and np.isnan(beyond))
        else f"Δ {d:+.3f}, beyond seed spread (p = {p:.2f})"
        if beyond
        else f"Δ {d:+.3f}, within seed spread"
        for d, beyond, p in zip(
            frame["τ_g BiLSTM − Average"], frame["beyond seed spread"], frame["beyond seed spread p"]
        )
    ]
    return out


def table2_display(frame: pd.DataFrame) -> pd.DataFrame:
    """Table 2 as the paper prints it — "mean ± std" over instances and "sig. frac." per column — with
    the mean's 95 % bootstrap interval, "mean [low, high] ± std", and n, the instances behind each cell."""
    out = frame[[c for c in ("dataset", "variant", "seed", "class") if c in frame]].copy()
    for stem, header in TABLE2_HEADERS.items():
        cells = zip(*(frame[f"{stem}_{s}"] for s in ("mean", "ci_low", "ci_high", "std")))
        out[f"{header} mean [95% CI] ± std"] = [
            (MISSING if np.isnan(m) else f"{mean_ci(m, lo, hi)} ± {format_number(s)}") for m, lo, hi, s in cells
        ]
        out[f"{header} sig. frac."] = [format_fraction(v) for v in frame[f"{stem}_sig_frac"]]
        out[f"{header} n"] = frame[f"{stem}_n"]
    return out


PERM_ADV = {  # column stem → (summary statistic, header)
    "perm_tvd": ("perm/median_tvd", "permutation: median output TVD"),
    "adv_jsd": ("adv/emax_jsd", "adversary: ε-max JSD"),
}


def _model(run: Run) -> str:
    c = run.config
    return f"{c['model']}-{c['encoder']} + {c['attention']} ({c['projection']})"


def permutation_adversarial(runs: list[Run]) -> pd.DataFrame:
    """One row per run × predicted class ("all" first): n instances, and per statistic of
    :data:`PERM_ADV` ``<stem>_mean``, ``_ci_low``, ``_ci_high``; ``adv_jsd_above_0.5`` (share of instances
    whose adversary's JSD exceeds 0.5) and ``no_adversary`` (share with no adversary within ε)."""
    rows = []
    for run in sorted(
        jw_runs(runs), key=lambda r: (r.config["dataset"], _model(r), r.config["variant"], str(r.config["seed"]))
    ):
        s = run.summary
        if not any(keys.jw(stat, "mean") in s for stat, _ in PERM_ADV.values()):
            continue
        frame = run.instances("jain_wallace")
        counts = frame["prediction"].value_counts() if frame is not None and "prediction" in frame else None
        for k in [None, *run_classes(run, keys.key(keys.NAMESPACE, "perm/median_tvd"))]:
            row = {
                "dataset": run.config["dataset"],
                "model": _model(run),
                "variant": run.config["variant"],
                "seed": run.config["seed"],
                "class": "all" if k is None else run.label(k),
                "n": s.get(keys.key(keys.NAMESPACE, "n_instances"))
                if k is None
                else (int(counts.get(k, 0)) if counts is not None else np.nan),
            }
            for stem, (stat, _) in PERM_ADV.items():
                for part in ("mean", "ci_low", "ci_high"):
                    row[f"{stem}_{part}"] = s.get(keys.jw(stat, part, k), np.nan)
            row["adv_jsd_above_0.5"] = s.get(keys.jw("adv/emax_jsd", "frac_above_0.5", k), np.nan)
            row["no_adversary"] = s.get(keys.jw("adv", "none_feasible_frac", k), np.nan)
            rows.append(row)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    if frame["seed"].nunique() == 1:
        frame = frame.drop(columns="seed")
    return without_empty_variant(frame)


def permutation_adversarial_display(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame[[c for c in ("dataset", "model", "variant", "seed", "class", "n") if c in frame]].copy()
    for stem, (_, header) in PERM_ADV.items():
        out[f"{header} [95% CI]"] = [
            mean_ci(m, lo, hi) for m, lo, hi in zip(*(frame[f"{stem}_{p}"] for p in ("mean", "ci_low", "ci_high")))
        ]
    out["JSD > 0.5"] = frame["adv_jsd_above_0.5"]
    out["no adversary within ε"] = frame["no_adversary"]
    return out


def _per_instance(runs: list[Run], encoder: str, attention: str, projection: str) -> dict[str, pd.DataFrame]:
    """``dataset [variant]`` → the per-instance J&W frame of the matching run (first seed when several)."""
    out = {}
    for run in sorted(tau_runs(runs), key=lambda r: (r.config["dataset"], r.config["variant"], str(r.config["seed"]))):
        c = run.config
        label = c["dataset"] + (f" [{c['variant']}]" if c["variant"] else "")
        if (c["encoder"], c["attention"], c["projection"]) == (encoder, attention, projection) and label not in out:
            frame = run.instances("jain_wallace")
            if frame is not None and "tau_grad" in frame:
                out[label] = frame.assign(class_name=[run.label(int(k)) for k in frame["prediction"]])
    return out


def _box_figure(groups: list[tuple[str, np.ndarray]], xlabel: str, title: str, path: Path) -> Path | None:
    """Horizontal box plots, one per (label, values) group (NaN left out, a group without a value too;
    diamond = mean); each label whole, wrapped onto lines of :data:`LABEL_WIDTH` characters (the figure as tall as
    its lines need); None when no group has a value."""
    groups = [(wrap_label(label, LABEL_WIDTH), v[~np.isnan(v)]) for label, v in groups]
    groups = [(label, v) for label, v in groups if v.size]
    if not groups:
        return None
    lines = sum(label.count("\n") for label, _ in groups)  # beyond the first line of each
    fig = new_figure((7, 0.45 * len(groups) + 0.2 * lines + 1.4))
    ax = fig.add_subplot()
    ax.boxplot(
        [g[1] for g in groups],
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


def _mean_label(values: np.ndarray) -> str:
    finite = values[np.isfinite(values)]
    return f"mean {finite.mean():+.3f}, n={finite.size}" if finite.size else "n=0"


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
            groups.append((f"{dataset} / {name} ({_mean_label(diff)})", diff))
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
        if np.isfinite(a).any() and np.isfinite(b).any():
            diff = np.nanmean(a) - np.nanmean(b)
            groups += [(f"{dataset} Average (Δ mean {diff:+.3f})", a), (f"{dataset} BiLSTM", b)]
    return _box_figure(
        groups,
        "τ_loo (attention vs leave-one-out)",
        f"Fig 5: Average vs BiLSTM encoder, {attention} ({projection})",
        path,
    )


TABLE2_NOTE = (
    "; n: instances of the predicted class with a defined τ; — where n = 0: the model predicted no "
    "instance of that class"
)


def _constant_note(runs: list[Run]) -> str:
    """One line naming the runs whose τ is undefined (a constant attention), instead of empty rows."""
    constant = [r for r in jw_runs(runs) if constant_attention(r)]
    if not constant:
        return ""
    names = ", ".join(html.escape(r.name) for r in constant)
    return (
        f"<p class='note'>No τ for {names}: Kendall τ is undefined for a constant attention (every token "
        "ties, as with <code>attention=uniform</code>), so these runs have no Table 2 rows or Fig 3–5 boxes; "
        "their permutation and adversary results are in the table below.</p>"
    )


def sections(runs: list[Run], work: Path) -> list[tuple[str, str]]:
    """Table 2 (and across seeds) and Figs 3–5 for every (attention, projection) of the J&W runs, then the
    permutation and adversary results of every run."""
    out = []
    used = jw_runs(runs)
    for attention, projection in variants(tau_runs(used)):
        frame = table2(used, attention, projection)
        if frame.empty:
            continue
        stem = f"table2_{attention}-{projection}"
        caption = (
            f"Jain & Wallace Table 2 ({attention} attention, {projection}): Kendall τ of attention vs "
            "gradient (τ_g) and leave-one-out (τ_loo) importance, over every analysed instance (all: the paper's "
            "Overall) and per predicted class; mean ± std over "
            "instances and the fraction with p ≤ 0.05" + TABLE2_NOTE
        )
        body = captioned_table(frame, work, stem, caption, display=table2_display(frame))
        seeds = table2_across_seeds(frame)
        if not seeds.empty:
            caption = (
                f"Table 2 ({attention}, {projection}) across seeds: mean and standard deviation over seeds "
                "of each seed's mean τ"
            )
            kinds = {f"{header} sig. frac.": "fraction" for header in TABLE2_HEADERS.values()}
            body += captioned_table(
                seeds, work, f"{stem}_seeds", caption, display=table2_across_seeds_display(seeds), kinds=kinds
            )
        name = f"{attention}-{projection}.png"
        figures = (
            difference_figure(used, attention, projection, "loo", work / f"fig3_{name}"),
            difference_figure(used, attention, projection, "grad", work / f"fig4_{name}"),
            average_vs_bilstm_figure(used, attention, projection, work / f"fig5_{name}"),
        )
        body += "".join(embedded_png(path) for path in figures if path is not None)
        out.append((f"Jain & Wallace: {attention} attention, {projection}", body))
    frame = permutation_adversarial(used)
    if not frame.empty:
        caption = (
            "Jain & Wallace, permuted and adversarial attention of every run, per predicted class (all: every "
            "analysed instance): mean over instances [95% bootstrap interval] of the median output TVD over "
            "the permutations, and of the ε-max JSD of the adversarial attention; the share of instances whose "
            "adversary reaches JSD > 0.5 and with no adversary within ε; n instances (0: the model predicted "
            "no instance of that class, whose cells are —)"
        )
        body = _constant_note(used) + captioned_table(
            frame,
            work,
            "jw_permutation_adversarial",
            caption,
            display=permutation_adversarial_display(frame),
            kinds={"JSD > 0.5": "fraction", "no adversary within ε": "fraction"},
        )
        out.append(("Jain & Wallace: permuted and adversarial attention", body))
    elif _constant_note(used):
        out.append(("Jain & Wallace", _constant_note(used)))
    return out
