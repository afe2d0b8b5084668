"""Randomisation sanity checks across runs: per dataset × model × method, the rank correlation (Spearman ρ, and of
the absolute scores) of the explanation with the trained model's after each cascading stage, and a figure of ρ
against the stage per method (the first seed of each model)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from attn_study.figures.common import panel_rows
from attn_study.report.render import captioned_table, embedded_png, mean_ci
from attn_study.report.runs import Run

from . import keys
from .figures import draw_cascade, stage_labels
from .keys import HEADLINE, LABELS, STAGES, STATISTICS, sn

#: the key parts the report shows: the headline statistics' (|ρ| of the scores and of their absolute values)
HEADLINE_PARTS = tuple(STATISTICS[h][0] for h in HEADLINE)


def sn_runs(runs: list[Run]) -> list[Run]:
    return [r for r in runs if sn("n_instances") in r.summary]


def run_stages(run: Run) -> list[str]:
    return [s for s in STAGES if sn(s, "same_prediction", "mean") in run.summary]


def run_methods(run: Run) -> list[str]:
    """The methods the run measured, in the order of its keys."""
    found = []
    for name in run.summary:
        parts = name.split("/")
        if len(parts) == 5 and parts[0] == keys.NAMESPACE and parts[2] in (*STAGES, LABELS) and parts[1] not in found:
            found.append(parts[1])
    return found


def table(runs: list[Run]) -> pd.DataFrame:
    """One row per run × method: dataset, model, seed, method and ``<stage>/<statistic>/{mean,ci_low,ci_high}``."""
    rows = []
    for run in sn_runs(runs):
        for method in run_methods(run):
            row = {"dataset": run.config["dataset"], "model": run.model_label, "seed": run.config["seed"]}
            row["method"] = method
            labels = [LABELS] if sn(LABELS, "same_prediction", "mean") in run.summary else []
            for stage in [*run_stages(run), *labels]:
                for part in HEADLINE_PARTS:
                    for stat in ("mean", "ci_low", "ci_high"):
                        row[f"{stage}/{part}/{stat}"] = run.summary.get(sn(method, stage, part, stat), np.nan)
            rows.append(row)
    return pd.DataFrame(rows)


def display(frame: pd.DataFrame) -> pd.DataFrame:
    """The printed table: ρ (and ρ of |scores|) per stage as "mean [CI]", one seed each (several: their mean)."""
    stages = [s for s in STAGES if f"{s}/{HEADLINE_PARTS[0]}/mean" in frame]
    rows = []
    for (dataset, model, method), group in frame.groupby(["dataset", "model", "method"], sort=False):
        row = {"dataset": dataset, "model": model, "method": method, "seeds": len(group)}
        labels = [LABELS] if f"{LABELS}/{HEADLINE_PARTS[0]}/mean" in frame else []
        for j, stage in enumerate([*stages, *labels]):
            label = "randomised labels" if stage == LABELS else ("+" if j else "") + stage
            for part, header in zip(HEADLINE_PARTS, ("|ρ|", "|ρ| of |·|")):
                cells = [group[f"{stage}/{part}/{s}"] for s in ("mean", "ci_low", "ci_high")]
                if len(group) == 1:
                    row[f"{header} {label}"] = mean_ci(*(c.iloc[0] for c in cells))
                else:
                    row[f"{header} {label}"] = f"{cells[0].mean():.3f} (mean of {len(group)} seeds)"
        rows.append(row)
    return pd.DataFrame(rows)


def cascade_figure(runs: list[Run], path: Path) -> Path | None:
    chosen: dict[tuple, Run] = {}
    for run in sorted(sn_runs(runs), key=lambda r: (r.config["dataset"], r.model_label, str(r.config["seed"]))):
        chosen.setdefault((run.config["dataset"], run.model_label), run)
    panels = []
    for (dataset, model), run in chosen.items():
        stages = run_stages(run)
        if not stages:
            continue
        row = []
        for part in HEADLINE_PARTS:
            curves = {
                m: np.array(
                    [
                        [run.summary.get(sn(m, s, part, k), np.nan) for k in ("mean", "ci_low", "ci_high")]
                        for s in stages
                    ]
                )
                for m in run_methods(run)
            }
            label = next(h for p, h in STATISTICS.values() if p == part)
            row.append((label, {m: c for m, c in curves.items() if np.isfinite(c[:, 0]).any()}))
        panels.append((f"{dataset}: {model}", stages, row))
    if not panels:
        return None
    title = "Cascading randomisation (mean, 95% bootstrap interval; first seed of each model)"
    return panel_rows(panels, draw_cascade, title, path)


def sections(runs: list[Run], work: Path) -> list[tuple[str, str]]:
    frame = table(runs)
    if frame.empty:
        return []
    stages = " → ".join(stage_labels([s for s in STAGES if f"{s}/{HEADLINE_PARTS[0]}/mean" in frame]))
    caption = (
        "Randomisation sanity checks (Adebayo et al. 2018): |Spearman ρ| per instance between each method's "
        "explanation of the trained model and of the model with its parameters re-initialised cumulatively from the "
        f"top ({stages}), of the signed scores and of their absolute values; mean [95% bootstrap interval over "
        "instances]. The magnitude is the headline: each randomised model is explained for its own prediction, so "
        "where randomisation flips the prediction a signed explanation changes sign and ρ turns negative "
        "(summary.json keeps the signed ρ too). A method whose |ρ| stays near 1 does not depend on the parameters it "
        "claims to explain; unrelated rankings still give |ρ| > 0 (about 0.19 for 19 tokens). Randomised labels: "
        "the same with a model trained on permuted labels (where measured)"
    )
    body = captioned_table(frame, work, "sn_cascade", caption, display=display(frame))
    path = cascade_figure(runs, work / "sn_cascade.png")
    if path is not None:
        body += embedded_png(path)
    return [("Randomisation sanity checks (Adebayo et al. 2018)", body)]
