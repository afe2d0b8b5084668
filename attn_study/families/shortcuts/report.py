"""Bai et al. (2021) across runs: per dataset, a table of method × variant → the shortcut measures.

A method is the model and its encoder (``flat lstm``, ``selector_k10 average``, …); a variant is the
training option (``standard``: vanilla; ``random_attention_pretraining``; ``instance_weighting``). With
several seeds a cell is the mean over seeds (± their standard deviation when there are several).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from attn_study.report.render import MISSING, captioned_table, format_number, format_p, is_p_column
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
        other = run.variant_except("training")  # the training variant has a column of its own
        extra = f" [{other}]" if other else ""
        rows.append(
            {
                "dataset": c["dataset"],
                "method": f"{c['model']} {c['encoder']}{extra}",
                "variant": c.get("training", "?"),
                "seed": c["seed"],
                "n": run.summary.get(keys.sc("n_instances"), np.nan),
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
    """Method × variant rows with "mean ± std over seeds" cells and the instances each seed analysed (n);
    columns without any value dropped."""
    headers = [h for h in keys.SC_COLUMNS.values() if h in frame and frame[h].notna().any()]
    rows = []
    for (method, variant), g in frame.groupby(["method", "variant"], sort=False):
        counts = sorted({int(v) for v in g["n"].dropna()})
        row = {"method": method, "variant": variant, "seeds": len(g), "n": "/".join(map(str, counts)) or MISSING}
        for h in headers:
            values = g[h].dropna()
            show = format_p if is_p_column(h) else format_number
            row[h] = (
                MISSING
                if values.empty
                else (show(values.mean()) if len(values) == 1 else f"{show(values.mean())} ± {values.std(ddof=0):.3f}")
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
            "columns: injected label-independent tokens; mean ± std over seeds); n: the test instances each "
            "seed analysed (analysis.shortcuts.max_instances), so accuracy here is over n, not the whole test "
            "split of the accuracy table"
        )
        body += captioned_table(part, work, f"sc_{dataset}", caption, display=display(part))
    return [("Bai et al.: combinatorial shortcuts", body)]
