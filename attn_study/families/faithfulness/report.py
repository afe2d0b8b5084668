"""Faithfulness (ERASER) across runs: a method × dataset × model table and the curves over k.

Per dataset and model (``<encoder> + <attention> (<projection>)``), one row per importance method:
comprehensiveness and sufficiency AOPC; AUPRC, AP, token F1 and IOU F1 against known rationales; where measured,
Zhao & Aletras's Soft-NC and Soft-NS and Atanasova et al.'s AUC-TP; each as
"mean [95 % CI]" for one seed or "mean ± std over seeds" for several, the method's rank per measure
(1 = most faithful: highest comprehensiveness, AUPRC, precision, Soft-NC, Soft-NS; lowest sufficiency and
AUC-TP), and with several
seeds whether its comprehensiveness and AUPRC differ from attention's beyond the seed spread.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from attn_study.figures.common import panel_rows
from attn_study.report.render import captioned_table, embedded_png, mean_ci, seed_spread
from attn_study.report.runs import Run

from . import keys
from .figures import PANELS, draw_curves
from .keys import FF_MEASURES, FF_METHODS, FF_POINT, ff, ff_fraction

LOWER_IS_BETTER = {"sufficiency/aopc", "auc_tp"}


def ff_runs(runs: list[Run]) -> list[Run]:
    return [r for r in runs if ff("n_instances") in r.summary]


def methods(run: Run) -> list[str]:
    return [
        m
        for m in FF_METHODS
        if any(
            k in run.summary
            for k in (
                ff(m, "comprehensiveness", "aopc", "mean"),
                ff(m, "auprc", "mean"),
                ff(m, "soft_comprehensiveness", "mean"),
                ff(m, "auc_tp", "value"),
            )
        )
    ]


def table(runs: list[Run]) -> pd.DataFrame:
    """One row per run × method: dataset, model, seed, method and ``<measure>/{mean,ci_low,ci_high}``."""
    rows = []
    for run in ff_runs(runs):
        for method in methods(run):
            row = {
                "dataset": run.config["dataset"],
                "model": run.model_label,
                "seed": run.config["seed"],
                "method": method,
            }
            for measure in FF_MEASURES:
                for stat in ("mean", "ci_low", "ci_high"):
                    part = FF_POINT.get(measure, stat) if stat == "mean" else stat
                    row[f"{measure}/{stat}"] = run.summary.get(ff(method, *measure.split("/"), part), np.nan)
            rows.append(row)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    order = {m: i for i, m in enumerate(FF_METHODS)}
    frame["_m"] = frame["method"].map(order)
    return frame.sort_values(["dataset", "model", "_m", "seed"]).drop(columns="_m").reset_index(drop=True)


def display(frame: pd.DataFrame) -> pd.DataFrame:
    """The printed table: per dataset × model × method the cells, ranks and seed-spread comparisons."""
    measures = [m for m in FF_MEASURES if frame[f"{m}/mean"].notna().any()]
    rows = []
    for (dataset, model), group in frame.groupby(["dataset", "model"], sort=False):
        means = group.groupby("method", sort=False)[[f"{m}/mean" for m in measures]].mean()
        ranks = {m: means[f"{m}/mean"].rank(ascending=m in LOWER_IS_BETTER, method="min") for m in measures}
        attention = group[group["method"] == "attention"]
        for method, g in group.groupby("method", sort=False):
            row = {"dataset": dataset, "model": model, "method": method, "seeds": len(g)}
            for m in measures:
                values = g[f"{m}/mean"].dropna()
                if len(g) == 1:
                    row[FF_MEASURES[m]] = mean_ci(*(g.iloc[0][f"{m}/{s}"] for s in ("mean", "ci_low", "ci_high")))
                else:
                    row[FF_MEASURES[m]] = "—" if values.empty else f"{values.mean():.3f} ± {values.std(ddof=0):.3f}"
                rank = ranks[m].get(method, np.nan)
                row[f"rank ({FF_MEASURES[m].split(' ')[0]})"] = "—" if np.isnan(rank) else int(rank)
            if len(g) > 1 and method != "attention" and len(attention):
                for m in ("comprehensiveness/aopc", "auprc"):
                    if m in measures:
                        row[f"vs attention: {FF_MEASURES[m].split(' ')[0]}"] = seed_spread(
                            g[f"{m}/mean"], attention[f"{m}/mean"]
                        )
            rows.append(row)
    return pd.DataFrame(rows)


def curves_figure(runs: list[Run], path: Path) -> Path | None:
    """Comprehensiveness and sufficiency against k per method: one row of panels per dataset × model
    (its first seed), from the runs' summaries (mean and 95 % interval at each k)."""
    chosen: dict[tuple, Run] = {}
    for run in sorted(ff_runs(runs), key=lambda r: (r.config["dataset"], r.model_label, str(r.config["seed"]))):
        chosen.setdefault((run.config["dataset"], run.model_label), run)
    panels = []
    for (dataset, model), run in chosen.items():
        fractions = run_fractions(run)
        if not fractions:
            continue
        row = []
        for short, label in PANELS:
            name = "comprehensiveness" if short == "comp" else "sufficiency"
            curves = {
                m: np.array(
                    [
                        [run.summary.get(ff(m, name, ff_fraction(k), s), np.nan) for s in ("mean", "ci_low", "ci_high")]
                        for k in fractions
                    ]
                )
                for m in methods(run)
            }
            row.append((label, {m: c for m, c in curves.items() if np.isfinite(c[:, 0]).any()}))
        panels.append((f"{dataset}: {model}", fractions, row))
    if not panels:
        return None
    title = "Faithfulness curves (mean, 95% bootstrap interval; first seed of each model)"
    return panel_rows(panels, draw_curves, title, path)


def run_fractions(run: Run) -> list[float]:
    """The rationale sizes k a run measured, read back from its ``ff/<method>/comprehensiveness/k…`` keys."""
    stem = ff("attention" if "attention" in methods(run) else (methods(run) or ["random"])[0], "comprehensiveness")
    parts = [p for p in keys.children(run.summary, stem) if p.startswith("k")]
    return sorted(float(p[1:]) / 100 for p in parts)


def sections(runs: list[Run], work: Path) -> list[tuple[str, str]]:
    """The measures per dataset, model and importance method, and the erasure curves."""
    frame = table(runs)
    if frame.empty:
        return []
    caption = (
        "Faithfulness (ERASER): per dataset, model and importance method, comprehensiveness AOPC "
        "(p(ŷ|x) − p(ŷ|x without the top k%), higher is more faithful), sufficiency AOPC (p(ŷ|x) − "
        "p(ŷ|the top k% alone), lower is more faithful), agreement with known rationales; where measured, "
        "Soft-NC and Soft-NS (Zhao & Aletras 2023: embeddings dropped in proportion to importance, higher is more "
        "faithful) and AUC-TP (Atanasova et al. 2020: area under performance vs the fraction of top tokens masked, "
        "lower is more faithful); "
        "mean [95% bootstrap interval over instances] for one seed, mean ± std over seeds for several; "
        "rank 1 = most faithful by that measure"
    )
    body = captioned_table(frame, work, "ff_methods", caption, display=display(frame))
    path = curves_figure(runs, work / "ff_curves.png")
    if path is not None:
        body += embedded_png(path)
    return [("Faithfulness (ERASER metrics)", body)]
