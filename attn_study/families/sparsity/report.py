"""Meister et al. (2021) across runs: Tables 1–2 and Figs 1–3.

- Table 1: mean ± std (over instances) of H̃(g_{h_p}(x)) — how dispersed the inputs' influence on each
  intermediate representation is — per model × projection × dataset.
- Table 2: across the sparsegen-lin runs of a model × dataset (sparsemax counting as λ = 0, the same
  projection), Kendall τ-b between λ and H̃(g_ŷ(x)) over pooled per-instance pairs and over run means (every
  seed a point), with p-values; beside it the attention's support per λ.
- Fig 1: Kendall τ of attention with input FI (g_ŷ(x)) vs with intermediate FI (g_ŷ(h)), per model.
- Fig 2: H̃ of g_ŷ(x) and D_ŷ(x) per projection.
- Fig 3: mean τ of attention with input FI against λ (symmetric-log x axis: λ < 0 spans decades).

A model is ``<encoder> + <attention>``: the paper's are lstm + additive and transformer + dot.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from attn_study.figures.common import new_figure, save_png
from attn_study.report.render import (
    MISSING,
    captioned_table,
    embedded_png,
    format_fraction,
    format_number,
    format_p,
    mean_ci,
)
from attn_study.report.runs import CrossRunMeasure, Run

from . import keys

PROJECTION_ORDER = ("softmax", "entmax15", "entmax_bisect", "sparsemax", "sparsegen")


def sp_runs(runs: list[Run]) -> list[Run]:
    return [r for r in runs if keys.sp("n_instances") in r.summary]


def model_label(run: Run) -> str:
    """``<encoder> + <attention>`` and the run's label less its λ (the projection label shows that)."""
    variant = run.variant_except("lam")
    variant = f" [{variant}]" if variant else ""
    return f"{run.config['encoder']} + {run.config['attention']}{variant}"


def lam(run: Run) -> float | None:
    """sparsegen-lin's λ (sparsemax: 0); None for the other projections."""
    if run.config["projection"] == "sparsemax":
        return 0.0
    value = run.config.get("lam")
    return float(value) if run.config["projection"] == "sparsegen" and value is not None else None


def projection_label(run: Run) -> str:
    p = run.config["projection"]
    return f"sparsegen λ={float(run.config['lam']):g}" if p == "sparsegen" and run.config.get("lam") is not None else p


def _order(run: Run) -> tuple:
    p = run.config["projection"]
    return (PROJECTION_ORDER.index(p) if p in PROJECTION_ORDER else len(PROJECTION_ORDER), lam(run) or 0.0)


def _base(run: Run) -> dict:
    return {
        "dataset": run.config["dataset"],
        "model": model_label(run),
        "projection": projection_label(run),
        "seed": run.config["seed"],
    }


def table1(runs: list[Run]) -> pd.DataFrame:
    """One row per run: dataset, model, projection, seed, mean / std / n of H̃(g_{h_p}(x)) over instances (each
    instance's mean over its p), and its mean / std over every (instance, p) pair ("pairs …")."""
    rows = []
    for run in sorted(
        sp_runs(runs), key=lambda r: (r.config["dataset"], model_label(r), _order(r), str(r.config["seed"]))
    ):
        s = run.summary
        if keys.sp("entropy", "g_hidden", "mean") not in s:
            continue
        rows.append(
            {
                **_base(run),
                **{
                    stat: s.get(keys.sp("entropy", "g_hidden", stat), np.nan)
                    for stat in ("mean", "ci_low", "ci_high", "std", "n")
                },
                **{
                    f"pairs {stat}": s.get(keys.sp("entropy", "g_hidden_pairs", stat), np.nan)
                    for stat in ("mean", "std")
                },
            }
        )
    return pd.DataFrame(rows)


def table1_display(frame: pd.DataFrame) -> pd.DataFrame:
    """Table 1 as the paper prints it: model (projection) × dataset, "mean ± std" with the mean's 95 %
    bootstrap interval, "mean [low, high] ± std"; with several seeds the means and stds are averaged over
    seeds (no interval) and the spread of the means over seeds is added."""
    if frame.empty:
        return frame
    cells = {}
    for (model, projection, dataset), g in frame.groupby(["model", "projection", "dataset"], sort=False):
        if len(g) == 1:
            first = g.iloc[0]
            text = f"{mean_ci(first['mean'], first['ci_low'], first['ci_high'])} ± {format_number(first['std'])}"
        else:
            text = f"{format_number(g['mean'].mean())} ± {format_number(g['std'].mean())}"
            text += f" (seeds: {len(g)}, spread {format_number(g['mean'].std(ddof=0))})"
        if g["pairs mean"].notna().all():  # the same over every (instance, p) pair (runs before 2026-11-28 lack it)
            pairs = f"{format_number(g['pairs mean'].mean())} ± {format_number(g['pairs std'].mean())}"
            text += f"; over (instance, p): {pairs}"
        cells.setdefault((model, projection), {})[dataset] = text
    return pd.DataFrame([{"model (projection)": f"{m} ({p})", **v} for (m, p), v in cells.items()])


def table2(runs: list[Run]) -> pd.DataFrame:
    """Table 2, per model × dataset: Kendall τ-b (the paper's statistic, its footnote 2) between sparsegen-lin's
    λ (sparsemax: λ = 0) and the normalised entropy of input feature importance H̃(g_ŷ(x)), three ways:

    - pooled: over every (λ, instance) pair of every run and seed, with scipy's p-value. The pairs of one
      run share its model, so that p-value takes them as more independent than they are: read it with
      the run-level one;
    - run means: over one point per run (λ, the run's mean H̃), every seed a point of its own, with scipy's
      p-value (exact for small untied samples);
    - per seed (:func:`tau_per_seed`): over each seed's run means, then mean ± std over seeds (what the
      reproduction scorecard compares with the paper's number: one model per λ, as the paper trained them).

    With the runs, seeds and λ values behind each. A negative τ: sparser attention, more concentrated input
    importance (the paper's finding)."""
    pooled: dict[tuple, list[tuple[float, np.ndarray]]] = {}
    means: dict[tuple, list[tuple[float, float, object]]] = {}
    grouped: dict[tuple, list[Run]] = {}
    for run in table2_runs(runs):
        group = (run.config["dataset"], model_label(run))
        grouped.setdefault(group, []).append(run)
        means.setdefault(group, []).append((lam(run), _entropy(run), run.config["seed"]))
        frame = run.instances("sparsity")
        if frame is not None and "entropy_g_input" in frame:
            pooled.setdefault(group, []).append((lam(run), frame["entropy_g_input"].dropna().to_numpy(float)))
    rows = []
    for group in sorted(means):
        x, y, seeds = zip(*means[group])
        tau, p = _tau(np.array(x), np.array(y))
        pairs = pooled.get(group, [])
        px = np.concatenate([np.full(len(v), lam_) for lam_, v in pairs]) if pairs else np.array([])
        py = np.concatenate([v for _, v in pairs]) if pairs else np.array([])
        pooled_tau, pooled_p = _tau(px, py)
        per_seed = tau_per_seed(grouped[group])
        rows.append(
            {
                "dataset": group[0],
                "model": group[1],
                "τ-b pooled (instances)": pooled_tau,
                "p pooled": pooled_p,
                "pairs": len(px),
                "τ-b run means": tau,
                "p run means": p,
                "τ-b per seed, mean": float(np.mean(per_seed)) if per_seed else np.nan,
                "τ-b per seed, std": float(np.std(per_seed, ddof=1)) if len(per_seed) > 1 else np.nan,
                "seeds with τ-b": len(per_seed),
                "runs": len(x),
                "seeds": len(set(seeds)),
                "λ values": len(set(x)),
                "λ range": f"{min(x):g} … {max(x):g}",
            }
        )
    return pd.DataFrame(rows)


def _entropy(run: Run) -> float:
    return float(run.summary[keys.sp("entropy", "g_input", "mean")])


def table2_runs(runs: list[Run]) -> list[Run]:
    """The runs that are Table 2 points: sparsegen (its λ) or sparsemax (λ = 0), with a finite mean H̃(g_ŷ(x))."""
    return [
        r
        for r in sp_runs(runs)
        if lam(r) is not None and np.isfinite(r.summary.get(keys.sp("entropy", "g_input", "mean"), np.nan))
    ]


def tau_per_seed(runs: list[Run]) -> list[float]:
    """Kendall τ-b between λ and the run's mean H̃(g_ŷ(x)) over each seed's runs of one model (:func:`table2_runs`),
    one value per seed that has three or more distinct λ."""
    seeds: dict[object, list[Run]] = {}
    for run in table2_runs(runs):
        seeds.setdefault(run.config["seed"], []).append(run)
    taus = [_tau(np.array([lam(r) for r in rs]), np.array([_entropy(r) for r in rs]))[0] for rs in seeds.values()]
    return [t for t in taus if np.isfinite(t)]


def cross_run_measures() -> dict[str, CrossRunMeasure]:
    """The numbers of Meister et al. taken over runs, for the reproduction scorecard: Table 2's Kendall τ-b between
    λ and H̃(g_ŷ(x)) per seed (:func:`tau_per_seed`), over the sparsegen and sparsemax runs of a model."""
    return {
        "meister_table2_tau_b": CrossRunMeasure(
            description="Kendall τ-b(λ, run mean H̃(g_ŷ(x))) per seed",
            points=table2_runs,
            per_seed=tau_per_seed,
            spans=("projection",),
        )
    }


def _tau(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """scipy's Kendall τ-b and its two-sided p-value; NaN when either side is constant or under 3 points."""
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan"), float("nan")
    result = stats.kendalltau(x, y)
    return float(result.statistic), float(result.pvalue)


def table2_display(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame[["dataset", "model"]].copy()
    for what in ("pooled (instances)", "run means"):
        tau_col, p_col = f"τ-b {what}", "p pooled" if what.startswith("pooled") else "p run means"
        out[f"Kendall τ-b, {what}"] = [
            f"{t:+.3f} (p {format_p(p)})" if np.isfinite(t) else "— (too few points)"
            for t, p in zip(frame[tau_col], frame[p_col])
        ]
    out["Kendall τ-b per seed: mean ± std (seeds)"] = [
        f"{m:+.3f} ± {format_number(sd)} ({n})" if n else "— (too few points)"
        for m, sd, n in zip(frame["τ-b per seed, mean"], frame["τ-b per seed, std"], frame["seeds with τ-b"])
    ]
    out["pairs / runs / seeds / λ values"] = [
        f"{a} / {b} / {c} / {d}" for a, b, c, d in zip(frame["pairs"], frame["runs"], frame["seeds"], frame["λ values"])
    ]
    out["λ range"] = frame["λ range"]
    return out


def support_table(runs: list[Run]) -> pd.DataFrame:
    """The attention's support (share of a text's tokens with α > 0), per projection (λ) and model ×
    dataset: ``mean`` over seeds of each run's mean over instances, ``std`` over seeds (ddof 0) and ``n``
    seeds — whether larger λ really made the models sparser. Rows: softmax, the entmaxes, then sparsemax and
    sparsegen-lin by λ (denser to sparser)."""
    cells: dict[tuple, list[float]] = {}
    order: dict[str, tuple] = {}
    for run in sp_runs(runs):
        value = run.summary.get(keys.sp("support", "frac", "mean"))
        if value is None or not np.isfinite(value):
            continue
        label = projection_label(run)
        order[label] = (
            (2, lam(run)) if lam(run) is not None else (0 if run.config["projection"] == "softmax" else 1, 0.0)
        )
        cells.setdefault((label, run.config["dataset"], model_label(run)), []).append(float(value))
    rows = [
        {
            "projection": label,
            "dataset": dataset,
            "model": model,
            "mean": float(np.mean(v)),
            "std": float(np.std(v)) if len(v) > 1 else np.nan,
            "n": len(v),
        }
        for (label, dataset, model), v in sorted(cells.items(), key=lambda kv: (order[kv[0][0]], kv[0][1:]))
    ]
    return pd.DataFrame(rows)


def support_display(frame: pd.DataFrame) -> pd.DataFrame:
    """Projection rows × ``dataset: model`` columns, "mean ± std (n seeds)" in percent of the tokens (one seed: the
    mean)."""
    columns = sorted({(d, m) for d, m in zip(frame["dataset"], frame["model"])})
    out = []
    for label, g in frame.groupby("projection", sort=False):
        row = {"projection": label}
        for dataset, model in columns:
            cell = g[(g["dataset"] == dataset) & (g["model"] == model)]
            if cell.empty:
                row[f"{dataset}: {model}"] = MISSING
                continue
            mean, std, n = cell[["mean", "std", "n"]].iloc[0]
            text = format_fraction(mean)
            row[f"{dataset}: {model}"] = text if n == 1 else f"{text} ± {format_fraction(std)} ({int(n)})"
        out.append(row)
    return pd.DataFrame(out)


def _datasets(runs: list[Run]) -> list[str]:
    return sorted({r.config["dataset"] for r in runs})


def correlation_figure(runs: list[Run], path: Path) -> Path | None:
    """Fig 1: per dataset, τ(α, g_ŷ(x)) and τ(α, g_ŷ(h)) of every model × projection (boxes over instances)."""
    runs = sorted(sp_runs(runs), key=lambda r: (model_label(r), _order(r), str(r.config["seed"])))
    datasets = _datasets(runs)
    panels = []
    for dataset in datasets:
        groups = []
        for run in (r for r in runs if r.config["dataset"] == dataset):
            frame = run.instances("sparsity")
            if frame is not None and {"tau_attn_g_input", "tau_attn_g_intermediate"} <= set(frame):
                groups.append(
                    (
                        f"{model_label(run)}\n{projection_label(run)} s{run.config['seed']}",
                        frame["tau_attn_g_input"].dropna().to_numpy(),
                        frame["tau_attn_g_intermediate"].dropna().to_numpy(),
                    )
                )
        if groups:
            panels.append((dataset, groups))
    if not panels:
        return None
    width = max(len(g) for _, g in panels)
    fig = new_figure((1.3 * width + 2.5, 4.0 * len(panels)))
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, (dataset, groups) in zip(axes, panels):
        for offset, which, color in ((-0.18, 1, "#1f77b4"), (0.18, 2, "#d95f02")):
            data = [g[which] if len(g[which]) else np.array([np.nan]) for g in groups]
            parts = ax.boxplot(
                data, positions=np.arange(len(groups)) + offset, widths=0.32, showfliers=False, patch_artist=True
            )
            for box in parts["boxes"]:
                box.set_facecolor(color)
                box.set_alpha(0.55)
        ax.plot([], [], color="#1f77b4", lw=6, alpha=0.55, label="τ(α, input FI g_ŷ(x))")
        ax.plot([], [], color="#d95f02", lw=6, alpha=0.55, label="τ(α, intermediate FI g_ŷ(h))")
        ax.set_xticks(range(len(groups)), [g[0] for g in groups], fontsize=7)
        ax.axhline(0, color="grey", lw=0.8, ls="--")
        ax.set_ylim(-1, 1)
        ax.set_ylabel("Kendall τ-b")
        ax.set_title(dataset, fontsize=10)
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle("Fig 1: attention vs feature importance of inputs and of intermediate representations")
    return save_png(fig, path)


def entropy_figure(runs: list[Run], path: Path) -> Path | None:
    """Fig 2: H̃ of g_ŷ(x) and D_ŷ(x) per projection (mean over instances; one point per run)."""
    rows = []
    for run in sp_runs(runs):
        s = run.summary
        for name, label in (("g_input", "g_ŷ(x)"), ("loo_input", "D_ŷ(x)")):
            if keys.sp("entropy", name, "mean") in s:
                rows.append(
                    {
                        "dataset": run.config["dataset"],
                        "model": model_label(run),
                        "measure": label,
                        "projection": projection_label(run),
                        "order": _order(run),
                        "value": s[keys.sp("entropy", name, "mean")],
                    }
                )
    if not rows:
        return None
    frame = pd.DataFrame(rows)
    projections = [p for p, _ in sorted({(p, o) for p, o in zip(frame.projection, frame.order)}, key=lambda t: t[1])]
    series = sorted({(m, d, meas) for m, d, meas in zip(frame.model, frame.dataset, frame.measure)})
    fig = new_figure((max(6.5, 0.9 * len(projections) + 3), 4.4))
    ax = fig.add_subplot()
    x = {p: i for i, p in enumerate(projections)}
    for model, dataset, measure in series:
        g = frame[(frame.model == model) & (frame.dataset == dataset) & (frame.measure == measure)]
        means = g.groupby("projection")["value"].mean()
        order = [p for p in projections if p in means.index]
        ax.plot(
            [x[p] for p in order],
            [means[p] for p in order],
            marker="o" if measure == "g_ŷ(x)" else "s",
            ls="-" if measure == "g_ŷ(x)" else "--",
            label=f"{dataset} {model}: {measure}",
        )
    ax.set_xticks(range(len(projections)), projections, rotation=30, fontsize=8)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("mean normalised entropy H̃")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("Fig 2: entropy of input feature importance per projection", fontsize=10)
    return save_png(fig, path)


def lambda_figure(runs: list[Run], path: Path) -> Path | None:
    """Fig 3: mean τ(α, g_ŷ(x)) and τ(α, D_ŷ(x)) against sparsegen's λ (sparsemax at 0), symlog x axis."""
    rows = []
    for run in sp_runs(runs):
        if lam(run) is None:
            continue
        for name, label in (("attn_g_input", "τ(α, g_ŷ(x))"), ("attn_loo_input", "τ(α, D_ŷ(x))")):
            value = run.summary.get(keys.sp("tau", name, "mean"))
            if value is not None and np.isfinite(value):
                rows.append(
                    {"series": f"{run.config['dataset']} {model_label(run)}: {label}", "lam": lam(run), "value": value}
                )
    if not rows:
        return None
    frame = pd.DataFrame(rows)
    fig = new_figure((7.0, 4.4))
    ax = fig.add_subplot()
    for series, g in frame.groupby("series", sort=True):
        agg = g.groupby("lam")["value"].agg(["mean", "std"]).sort_index()
        ax.errorbar(agg.index, agg["mean"], yerr=agg["std"].fillna(0.0), marker="o", capsize=3, label=series)
    ax.set_xscale("symlog", linthresh=0.5)
    ax.axvline(0, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("sparsegen-lin λ (0 = sparsemax; larger = sparser)")
    ax.set_ylabel("mean Kendall τ-b")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("Fig 3: attention vs input feature importance as λ grows (± std over seeds)", fontsize=10)
    return save_png(fig, path)


def sections(runs: list[Run], work: Path) -> list[tuple[str, str]]:
    """Tables 1 and 2, the support per projection and Figs 1–3 of Meister et al."""
    used = sp_runs(runs)
    if not used:
        return []
    body = ""
    frame = table1(used)
    if not frame.empty:
        caption = (
            "Meister et al. Table 1: mean ± std over instances of the normalised entropy of the gradient-based "
            "importance of the inputs for each intermediate representation, H̃(g_{h_p}(x)) (1: every input "
            "equally influential; 0: one input only), each instance's value the mean over its p; then the "
            "same over every (instance, p) pair (the paper does not say which its ± is)"
        )
        body += captioned_table(frame, work, "sp_table1", caption, display=table1_display(frame))
    frame = table2(used)
    if not frame.empty:
        caption = (
            "Meister et al. Table 2: Kendall τ-b (the paper's statistic) between sparsegen-lin's λ "
            "(sparsemax = 0) and the normalised entropy of input feature importance H̃(g_ŷ(x)), per model "
            "and dataset: over every (λ, instance) pair of every seed (its p-value treats the pairs as "
            "independent, which instances of one model are not), over the run means (one point per "
            "run and seed), and over each seed's run means, then mean ± std over seeds (the reproduction "
            "scorecard's number); negative: sparser attention, more concentrated importance"
        )
        body += captioned_table(frame, work, "sp_table2", caption, display=table2_display(frame))
    support = support_table(used)
    if not support.empty:
        caption = (
            "Meister et al.: the attention's support (share of a text's tokens with α > 0) per projection, "
            "mean over instances, averaged over seeds ± their spread (n) — did larger λ make the models sparser?"
        )
        body += captioned_table(support, work, "sp_support", caption, display=support_display(support))
    for name, make in (
        ("sp_fig1_tau_input_vs_intermediate", correlation_figure),
        ("sp_fig2_entropy_per_projection", entropy_figure),
        ("sp_fig3_tau_vs_lambda", lambda_figure),
    ):
        path = make(used, work / f"{name}.png")
        if path is not None:
            body += embedded_png(path)
    return [("Meister et al.: sparse attention", body)]
