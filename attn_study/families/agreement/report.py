"""Agreement between explanation methods across runs, in the form of Neely et al. (2022)'s comparison: per dataset
and model a method × method matrix of the mean Kendall τ, and the published numbers beside ours (different models
and data: not to be matched)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from attn_study.report.render import MISSING, captioned_table, format_number, mean_ci
from attn_study.report.runs import Run

from .keys import AG_METHODS, REFERENCES, SHORT, ag, pair, pairs, tau_key


def ag_runs(runs: list[Run]) -> list[Run]:
    return [r for r in runs if ag("n_instances") in r.summary]


def table(runs: list[Run]) -> pd.DataFrame:
    """One row per run × pair of methods (:func:`keys.pair`'s order): dataset, model, seed, a, b, mean, ci_low,
    ci_high, n. A run made before the keys' order was alphabetical has its pairs under the table's order."""
    rows = []
    for run in ag_runs(runs):
        named = {"dataset": run.config["dataset"], "model": run.model_label, "seed": run.config["seed"]}
        for a, b in pairs(AG_METHODS):
            found = next((k for k in (tau_key(a, b, "mean"), ag(b, a, "tau", "mean")) if k in run.summary), None)
            if found is not None:
                stem = found.rsplit("/", 1)[0]
                stats = {s: run.summary.get(f"{stem}/{s}", np.nan) for s in ("mean", "ci_low", "ci_high", "n")}
                rows.append({**named, "a": a, "b": b, **stats})
    return pd.DataFrame(rows)


def cell(group: pd.DataFrame) -> str:
    """One seed: mean [95 % interval over instances]; several: mean ± std over seeds (k seeds)."""
    if len(group) == 1:
        row = group.iloc[0]
        return mean_ci(row["mean"], row["ci_low"], row["ci_high"])
    values = group["mean"].dropna()
    if values.empty:
        return MISSING
    return f"{format_number(values.mean())} ± {values.std(ddof=0):.3f} ({len(values)} seeds)"


def matrix(part: pd.DataFrame) -> pd.DataFrame:
    """The printed matrix of one dataset × model: a row per method, a column per later method, τ in the cells
    above the diagonal."""
    methods = [m for m in AG_METHODS if m in set(part["a"]) | set(part["b"])]
    cells = {(a, b): cell(g) for (a, b), g in part.groupby(["a", "b"], sort=False)}
    rows = []
    for i, a in enumerate(methods[:-1]):
        row = {"method": SHORT[a]}
        for j, b in enumerate(methods[1:], start=1):
            row[SHORT[b]] = cells.get(pair(a, b), MISSING) if j > i else ""
        rows.append(row)
    return pd.DataFrame(rows)


def references(frame: pd.DataFrame) -> pd.DataFrame:
    """Ours beside each published number whose pair we measured."""
    rows = []
    for (dataset, model), part in frame.groupby(["dataset", "model"], sort=False):
        for a, b, value, statistic, source in REFERENCES:
            first, second = pair(a, b)
            group = part[(part["a"] == first) & (part["b"] == second)]
            if group.empty:
                continue
            rows.append(
                {
                    "dataset": dataset,
                    "model": model,
                    "pair": f"{SHORT[a]} – {SHORT[b]}",
                    "ours (Kendall τ)": cell(group),
                    "published": format_number(value, 3),
                    "their statistic": statistic,
                    "their setting (different model/data)": source,
                }
            )
    return pd.DataFrame(rows)


def table_stem(dataset: str, model: str, taken: set) -> str:
    """The matrix's file name: ``ag_tau_<dataset>_<model>`` in lower-case letters, digits and ``_``
    (``ag_tau_sst_lstm_additive_softmax``), ``_2``, ``_3``… after a name ``taken`` already (which it joins)."""
    stem = "ag_tau_" + re.sub(r"[^a-z0-9]+", "_", f"{dataset} {model}".lower()).strip("_")
    name, n = stem, 1
    while name in taken:
        n += 1
        name = f"{stem}_{n}"
    taken.add(name)
    return name


def sections(runs: list[Run], work: Path) -> list[tuple[str, str]]:
    """Per dataset × model the pairwise τ matrix; then the published numbers beside ours."""
    frame = table(runs)
    if frame.empty:
        return []
    body, stems = "", set()
    for (dataset, model), part in frame.groupby(["dataset", "model"], sort=True):
        caption = (
            f"Agreement between explanation methods (Neely et al. 2022), {dataset}, {model}: Kendall τ-b between "
            "the two methods' token scores for the predicted class, per instance; mean [95% bootstrap interval over "
            "instances] for one seed, mean ± std over seeds for several. raw, rollout, flow, norms: the encoder's "
            "layer attention through the pooling attention α (docs/transformer_attention.md)"
        )
        stem = table_stem(dataset, model, stems)
        body += captioned_table(part.reset_index(drop=True), work, stem, caption, display=matrix(part))
    published = references(frame)
    if not published.empty:
        caption = (
            "Published agreement numbers beside ours: different models, data and (for Abnar & Zuidema) statistic, "
            "shown for orientation, not to be matched"
        )
        body += captioned_table(published, work, "ag_references", caption)
    return [("Agreement between explanation methods (Neely et al. 2022)", body)]
