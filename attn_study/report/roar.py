"""ROAR (Hooker et al. 2019) and recursive ROAR (Madsen et al. 2022) from runs built on runs (``conf/roar/``): the
retrained model's test accuracy against the share k of tokens masked, one line per importance method (mean over
seeds, each seed's point beside it), and a table with the area between each method's curve and random's.

Area vs random, per seed s (the method's and random's chains of the same seed): A = ∫ (acc_random(k) − acc(k)) dk
by the trapezoid rule over the k both curves have, 0 included; positive when the method's curve lies below
random's (masking its tokens removes more of what the model needs: the more faithful ranking). Reported as the
mean over seeds ± their std, in accuracy × share of tokens. Macro F1 gives a second area (unbalanced classes).
The unmasked point (k = 0) is the chain's run at ``roar.fraction=0``, else the source run its first step names.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from attn_study import layout
from attn_study.figures.common import new_figure, save_png, wrap_label
from attn_study.io import read_json
from attn_study.report.render import captioned_table, embedded_png, format_number
from attn_study.report.runs import Run

METRICS = {"accuracy": "test/acc", "F1": "test/f1"}
BASELINE = "random"


def _roar(run: Run) -> dict | None:
    """The run's ROAR settings from its config identity (None: not a ROAR run)."""
    ident = run.identity
    if ident.get("roar/method") is None or ident.get("roar/fraction") is None:
        return None
    return {
        "method": str(ident["roar/method"]),
        "fraction": float(ident["roar/fraction"]),
        "recursive": bool(ident.get("roar/recursive")),
    }


def _source_summary(run: Run) -> dict:
    """The summary of the run this one's masks were computed with (its ``status.json``'s ``roar.source``), when
    that run is complete and unmasked; else {}."""
    try:
        source = (read_json(run.path / layout.STATUS).get("roar") or {}).get("source")
        if not source or (read_json(run.path / layout.STATUS)["roar"].get("source_fraction") or 0) > 0:
            return {}
        if read_json(Path(source) / layout.STATUS).get("state") != "complete":
            return {}
        return read_json(Path(source) / layout.SUMMARY)
    except (OSError, ValueError, KeyError):
        return {}


def points(runs: list[Run]) -> pd.DataFrame:
    """One row per (model, variant, method, seed, k): the retrained model's accuracy and F1."""
    rows, sources = [], {}
    for run in runs:
        roar = _roar(run)
        if run.state != "complete" or roar is None:
            continue
        c = run.config
        key = {
            "dataset": c["dataset"],
            "model": f"{c['model']}-{c['encoder']}-{c['attention']}-{c['projection']}",
            "variant": "recursive ROAR" if roar["recursive"] else "ROAR",
            "method": roar["method"],
            "seed": int(c["seed"]) if c.get("model_seed") is None else int(c["model_seed"]),
        }
        rows.append({**key, "k": roar["fraction"], **{m: run.summary.get(k, np.nan) for m, k in METRICS.items()}})
        if roar["fraction"] > 0:
            sources.setdefault(tuple(key.values()), run)
    frame = pd.DataFrame(rows)
    for key, run in sources.items():  # the unmasked point of a chain without a fraction-0 run: its source's
        here = frame[(frame[["dataset", "model", "variant", "method", "seed"]].apply(tuple, axis=1) == key)]
        if (here["k"] == 0).any():
            continue
        summary = _source_summary(run)
        if summary:
            names = ("dataset", "model", "variant", "method", "seed")
            extra = {**dict(zip(names, key)), "k": 0.0}
            extra.update({m: float(summary.get(k) or np.nan) for m, k in METRICS.items()})
            frame = pd.concat([frame, pd.DataFrame([extra])], ignore_index=True)
    return (
        frame.sort_values(["dataset", "model", "variant", "method", "seed", "k"]).reset_index(drop=True)
        if len(frame)
        else frame
    )


def area(ks: np.ndarray, baseline: np.ndarray, values: np.ndarray) -> float:
    """∫ (baseline − values) dk by the trapezoid rule (NaN when fewer than two k)."""
    if len(ks) < 2:
        return math.nan
    gap = baseline - values
    return float(np.sum((gap[1:] + gap[:-1]) / 2 * np.diff(ks)))


def table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per model × variant × method: seeds, the accuracy at each k (mean, seed std), the areas vs random."""
    rows = []
    ks = sorted(frame["k"].unique())
    for (dataset, model, variant, method), sub in frame.groupby(["dataset", "model", "variant", "method"]):
        row = {"dataset": dataset, "model": model, "variant": variant, "method": method, "seeds": sub["seed"].nunique()}
        for k in ks:
            values = sub.loc[sub["k"] == k, "accuracy"].to_numpy(float)
            row[f"acc k={k:g}"] = float(values.mean()) if len(values) else np.nan
            row[f"acc k={k:g} std"] = float(values.std(ddof=1)) if len(values) > 1 else np.nan
        base = frame[
            (frame["dataset"] == dataset)
            & (frame["model"] == model)
            & (frame["variant"] == variant)
            & (frame["method"] == BASELINE)
        ]
        for metric in METRICS:
            areas = []
            for seed, mine in sub.groupby("seed"):
                theirs = base[base["seed"] == seed].set_index("k")[metric]
                mine = mine.set_index("k")[metric]
                common = sorted(set(mine.index) & set(theirs.index))
                if method != BASELINE and len(common) >= 2:
                    areas.append(area(np.array(common), theirs[common].to_numpy(float), mine[common].to_numpy(float)))
            areas = np.array([a for a in areas if np.isfinite(a)])
            row[f"area vs random ({metric})"] = float(areas.mean()) if len(areas) else np.nan
            row[f"area vs random ({metric}) std"] = float(areas.std(ddof=1)) if len(areas) > 1 else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def display(frame: pd.DataFrame) -> pd.DataFrame:
    """Each mean as "mean ± seed std" (the mean alone with one seed)."""
    means = [c for c in frame.columns if f"{c} std" in frame.columns]
    shown = frame[[c for c in frame.columns if not c.endswith(" std")]].copy()
    for column in means:
        shown[column] = [
            format_number(m) + ("" if not np.isfinite(s) else f" ± {format_number(s)}")
            for m, s in zip(frame[column], frame[f"{column} std"])
        ]
    return shown


def figure(frame: pd.DataFrame, path: Path, title: str) -> Path:
    """Accuracy against k, one line per method (mean over seeds), each seed's point beside it."""
    fig = new_figure((6.4, 4.2))
    ax = fig.add_subplot()
    for method, sub in frame.groupby("method"):
        mean = sub.groupby("k")["accuracy"].mean()
        line = ax.plot(mean.index, mean.to_numpy(float), marker="o", markersize=3, label=method)[0]
        if sub["seed"].nunique() > 1:
            ax.scatter(sub["k"], sub["accuracy"], s=8, alpha=0.4, color=line.get_color())
    ax.set_xlabel("k: share of each instance's tokens masked")
    ax.set_ylabel("test accuracy, retrained")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="x-small", loc="best")
    ax.set_title(wrap_label(title, 70), fontsize=10)
    return save_png(fig, path)


def sections(runs: list[Run], work: Path) -> list[tuple[str, str]]:
    frame = points(runs)
    if frame.empty:
        return []
    body = []
    for n, ((dataset, model, variant), sub) in enumerate(frame.groupby(["dataset", "model", "variant"])):
        seeds = sub["seed"].nunique()
        title = f"{variant}: {dataset}, {model} ({seeds} seed{'s' if seeds > 1 else ''})"
        body.append(embedded_png(figure(sub, work / f"roar_{n + 1}.png", title)))
    summary = table(frame)
    caption = (
        "ROAR (Hooker et al. 2019; recursive: Madsen et al. 2022): test accuracy of the model retrained on data whose "
        "top-k share of each instance's tokens (by the method, on the unmasked model or, recursive, on the previous "
        "step's) is masked, mean ± std over seeds; area vs random: the integral over k of random's accuracy (or "
        "macro F1) minus the method's, per seed, mean ± std (positive: the method's tokens matter more than random "
        "ones). — : not run, or no random curve of that seed"
    )
    body.insert(0, captioned_table(summary, work, "roar", caption, display=display(summary)))
    return [("ROAR: remove and retrain (Hooker et al. 2019; Madsen et al. 2022)", "".join(body))]
