"""Bai et al. (2021) across runs: per dataset, a table of method × variant → the shortcut measures.

A method is the model and its encoder (``flat lstm``, ``selector_k10 average``, …); a variant is the
training option (``standard``: vanilla; ``random_attention_pretraining``; ``instance_weighting``). With
several seeds a cell is the mean over seeds (± their standard deviation when there are several).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from attn_study.report.render import captioned_table
from attn_study.report.runs import Run

from . import keys

VARIANT_ORDER = ("standard", "random_attention_pretraining", "instance_weighting")
#: what a variant cannot do, printed beside its rows (conf/training/<variant>.yaml says why)
LIMITS = {
    "instance_weighting": "its mask classifier sees positions only: a shortcut carried by which token is "
    "picked is out of its reach"
}


def sc_runs(runs: list[Run]) -> list[Run]:
    return [r for r in runs if keys.sc("n_instances") in r.summary]


def table(runs: list[Run]) -> pd.DataFrame:
    """One row per run: dataset, method, variant, seed and every ``keys.SC_COLUMNS`` value."""
    rows = []
    for run in sc_runs(runs):
        c = run.config
        extra = f" [{c['variant']}]" if c.get("variant") else ""
        rows.append(
            {
                "dataset": c["dataset"],
                "method": f"{c['model']} {c['encoder']}{extra}",
                "variant": c.get("training", "?"),
                "seed": c["seed"],
                **{
                    header: run.summary.get(keys.sc(*name.split("/")), np.nan)
                    for name, header in keys.SC_COLUMNS.items()
                },
            }
        )
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    order = {v: i for i, v in enumerate(VARIANT_ORDER)}
    frame["_v"] = frame["variant"].map(lambda v: order.get(v, len(order)))
    return frame.sort_values(["dataset", "method", "_v", "seed"]).drop(columns="_v").reset_index(drop=True)


def display(frame: pd.DataFrame) -> pd.DataFrame:
    """Method × variant rows with "mean ± std over seeds" cells; columns without any value dropped."""
    headers = [h for h in keys.SC_COLUMNS.values() if h in frame and frame[h].notna().any()]
    rows = []
    for (method, variant), g in frame.groupby(["method", "variant"], sort=False):
        row = {"method": method, "variant": variant, "seeds": len(g)}
        for h in headers:
            values = g[h].dropna()
            row[h] = (
                "—"
                if values.empty
                else (f"{values.mean():.3f}" if len(values) == 1 else f"{values.mean():.3f} ± {values.std(ddof=0):.3f}")
            )
        row["limit"] = LIMITS.get(variant, "")
        rows.append(row)
    out = pd.DataFrame(rows)
    return out if out.empty or out["limit"].any() else out.drop(columns="limit")


def sections(runs: list[Run], work: Path) -> list[tuple[str, str]]:
    """One table per dataset: the shortcut measures per method and training variant."""
    frame = table(runs)
    if frame.empty:
        return []
    body = ""
    for dataset, part in frame.groupby("dataset", sort=True):
        caption = (
            f"Bai et al., {dataset}: combinatorial shortcuts per method and training variant "
            "(mask-only acc.: accuracy from the attention pattern alone, content replaced by <unk>; marker "
            "columns: injected label-independent tokens; mean ± std over seeds)"
        )
        body += captioned_table(part, work, f"sc_{dataset}", caption, display=display(part))
    return [("Bai et al.: combinatorial shortcuts", body)]
