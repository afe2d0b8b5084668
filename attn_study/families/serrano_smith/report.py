"""Serrano & Smith (2019) across runs: decision-flip tables and fraction-removed box plots.

Flip table (their Table 2): erasing the top item i* (by attention, gradient or gradient × attention)
vs a random other item r — percent of instances where both / only i* / only r / neither flip the
decision, per model. Multi-weight (Figs 5–6, 10–11): per model and ranking the median fraction of
items removed before the decision flips, the never-flip fraction, and how often the gradient
ranking flips sooner than attention (paper: >= 1.6× as often, for every model with an encoder).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import colormaps

from attn_study.figures.common import new_figure, save_png, wrap_label
from attn_study.report.render import captioned_table, embedded_png, mean_ci
from attn_study.report.runs import Run, without_empty_variant

from . import keys
from .keys import CELL_HEADERS, CELLS, RANKING_LABELS, SINGLE_TABLES

#: how the tables' numbers are printed (render.FORMATS): the flip cells are percent of instances
FLIP_KINDS = {header: "percent" for header in CELL_HEADERS.values()}
MULTI_KINDS = {"never flips": "fraction", "gradient sooner / attention sooner": "ratio"}


def ss_runs(runs: list[Run]) -> list[Run]:
    return sorted(
        (r for r in runs if keys.key(keys.NAMESPACE, "n_instances") in r.summary),
        key=lambda r: (r.config["dataset"], r.config["model"], r.config["encoder"], str(r.config["seed"])),
    )


def _model(run: Run) -> dict:
    c = run.config
    return {
        "dataset": c["dataset"],
        "model": c["model"],
        "encoder": c["encoder"],
        "attention": c["attention"],
        "projection": c["projection"],
        "variant": c.get("variant", ""),
        "seed": c["seed"],
    }


def flip_table(runs: list[Run]) -> pd.DataFrame:
    """Percent of instances per cell, per model and top-item ranking (attention / gradient / grad×attn)."""
    rows = []
    for run in ss_runs(runs):
        for table, ranking in SINGLE_TABLES.items():
            if keys.ss_flip_cell(table, "yes_yes") not in run.summary:
                continue
            rows.append(
                {
                    **_model(run),
                    "i* by": RANKING_LABELS[ranking],
                    "n": run.summary.get(keys.key(keys.NAMESPACE, "single", "n")),
                    **{CELL_HEADERS[c]: run.summary[keys.ss_flip_cell(table, c)] for c in CELLS},
                }
            )
    return without_empty_variant(pd.DataFrame(rows))


def grad_vs_attention_ratio(summary: dict) -> float:
    """How often the gradient ranking flips the decision sooner than attention, over how often attention does:
    the run's ratio, or (when the summary holds none) the ratio of the two shares it records — ∞ when
    attention is never sooner but the gradient sometimes is, NaN when neither ever is."""
    multi = keys.key(keys.NAMESPACE, "multi")
    ratio = summary.get(f"{multi}/grad_vs_attn_ratio", np.nan)
    if ratio is not None and not np.isnan(ratio):
        return float(ratio)
    faster, slower = summary.get(f"{multi}/grad_faster_than_attn"), summary.get(f"{multi}/attn_faster_than_grad")
    if faster is None or slower is None or np.isnan(faster) or np.isnan(slower):
        return np.nan
    return faster / slower if slower else (np.inf if faster else np.nan)


def multi_table(runs: list[Run]) -> pd.DataFrame:
    """Per model and ranking: median / mean [95 % CI] fraction removed, never-flip fraction; gradient vs
    attention (their ratio, ∞ when attention is never sooner, and the sign test's p-value)."""
    rows = []
    for run in ss_runs(runs):
        s = run.summary
        for ranking in keys.ss_rankings(s):
            first = ranking == "attention"
            rows.append(
                {
                    **_model(run),
                    "ranking": RANKING_LABELS.get(ranking, ranking),
                    "n": s.get(keys.key(keys.NAMESPACE, "multi", "n")),
                    "median frac removed": s.get(keys.ss_multi(ranking, "frac_removed", "median"), np.nan),
                    **{
                        f"mean frac removed{'' if k == 'mean' else ' ' + k}": s.get(
                            keys.ss_multi(ranking, "frac_removed", k), np.nan
                        )
                        for k in ("mean", "ci_low", "ci_high")
                    },
                    "never flips": s.get(keys.ss_multi(ranking, "never_flip_frac"), np.nan),
                    "gradient sooner / attention sooner": grad_vs_attention_ratio(s) if first else np.nan,
                    "sign test p": (
                        s.get(keys.key(keys.NAMESPACE, "multi", "grad_vs_attn_sign_p"), np.nan) if first else np.nan
                    ),
                }
            )
    return without_empty_variant(pd.DataFrame(rows))


def multi_display(frame: pd.DataFrame) -> pd.DataFrame:
    """The multi-weight table with "mean [low, high]" in one cell."""
    if frame.empty:
        return frame
    parts = ["mean frac removed", "mean frac removed ci_low", "mean frac removed ci_high"]
    out = frame.drop(columns=parts)
    at = list(out.columns).index("median frac removed") + 1
    out.insert(at, "mean frac removed [95% CI]", [mean_ci(*v) for v in zip(*(frame[c] for c in parts))])
    return out


def fraction_removed_figure(runs: list[Run], dataset: str, path: Path) -> Path | None:
    """Box plots of the fraction of items removed before a decision flip: one group per model of
    ``dataset``, one box per ranking (instances that never flip are left out, and counted in the tables)."""
    chosen = [r for r in ss_runs(runs) if r.config["dataset"] == dataset]
    frames = [(r, r.instances("serrano_smith")) for r in chosen]
    frames = [(r, f) for r, f in frames if f is not None and any(c.endswith("_frac") for c in f)]
    if not frames:
        return None
    rankings = [r for r in RANKING_LABELS if any(f"{r}_frac" in f for _, f in frames)]
    width = 0.8 / len(rankings)
    fig = new_figure((max(6.0, 1.6 * len(frames) + 2), 4))
    ax = fig.add_subplot()
    colours = colormaps["tab10"]
    for j, ranking in enumerate(rankings):
        data, positions = [], []
        for i, (_, frame) in enumerate(frames):
            if f"{ranking}_frac" in frame:
                values = frame.loc[frame["length"] >= 2, f"{ranking}_frac"].to_numpy(float)
                data.append(values[~np.isnan(values)])
                positions.append(i + (j - (len(rankings) - 1) / 2) * width)
        parts = ax.boxplot(data, positions=positions, widths=width * 0.9, showfliers=False, patch_artist=True)
        for box in parts["boxes"]:
            box.set_facecolor(colours(j))
            box.set_alpha(0.6)
        ax.plot([], [], color=colours(j), lw=6, alpha=0.6, label=RANKING_LABELS[ranking])
    ax.set_xticks(range(len(frames)), [_tick(r) for r, _ in frames], fontsize=8)
    ax.set_ylabel("fraction of items removed before a flip")
    ax.set_ylim(0, 1.02)
    ax.set_title(f"{dataset}: items erased (top of each ranking first) until the decision flips", fontsize=10)
    ax.legend(fontsize=8, ncol=len(rankings), loc="upper center", bbox_to_anchor=(0.5, -0.12))
    return save_png(fig, path)


def _tick(run: Run) -> str:
    """A model's short axis label: model-encoder, its label (variant) and seed on lines of their own."""
    c = run.config
    return "\n".join(
        [f"{c['model']}-{c['encoder']}", *([wrap_label(c["variant"], 24)] if c["variant"] else []), f"s{c['seed']}"]
    )


def sections(runs: list[Run], work: Path) -> list[tuple[str, str]]:
    """Table 2 (single-weight flips), the multi-weight fractions removed and their figure per dataset."""
    used = ss_runs(runs)
    if not used:
        return []
    flips, multi = flip_table(used), multi_table(used)
    body = ""
    if not flips.empty:
        caption = (
            "Serrano & Smith Table 2: erasing the top item i* vs a random item r; percent of instances "
            "by which erasures flip the decision"
        )
        body += captioned_table(flips, work, "ss_flip_table", caption, kinds=FLIP_KINDS)
    if not multi.empty:
        caption = (
            "Serrano & Smith multi-weight erasure: fraction of items removed before the decision flips; "
            "gradient sooner / attention sooner: ∞ when attention never flips the decision sooner but the "
            "gradient does; — where neither ever does"
        )
        body += captioned_table(
            multi, work, "ss_fraction_removed", caption, display=multi_display(multi), kinds=MULTI_KINDS
        )
    for dataset in sorted({r.config["dataset"] for r in used}):
        path = fraction_removed_figure(used, dataset, work / f"ss_fraction_removed_{dataset}.png")
        if path is not None:
            body += embedded_png(path)
    return [("Serrano & Smith", body)]
