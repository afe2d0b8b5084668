"""What the loggers get of a family's analysis: its summary as final values, and on W&B its figures, per-instance
table (with coloured text) and histograms."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from lightning.pytorch.loggers import WandbLogger

from attn_study.analysis.token_scores import coloured_cells
from attn_study.tracking import final_values, histogram, logger_name, reported


def log_analysis(
    loggers,
    prefix: str,
    summary: dict,
    frame: pd.DataFrame,
    artefacts: dict,
    data=None,
    split: str = "test",
    step=0,
    tokens: pd.DataFrame | None = None,
    disagreement: tuple[tuple[str, str], ...] = (),
    headline_keys: tuple[str, ...] = (),
) -> None:
    """The summary to every logger as final values (``tracking.final_values``: W&B's run summary, another
    logger's history at ``step``); to W&B also the figures and the per-instance table (:func:`readable`; with
    ``tokens``, the family's ``tokens.parquet`` table, an ``explanations`` column of coloured text for a bounded
    number of instances: ``token_scores.coloured_cells``) in the history's last row (the last epoch's; every
    family's in the same row), and histograms of the table's numeric columns in the run summary. Called once the
    results are on disk: a logger's failure is one error line (``tracking.reported``), never the analysis's."""
    for lg in loggers:
        with reported(logger_name(lg), f"{prefix}/ results"):
            final_values(lg, summary, step, headline_keys)
            if isinstance(lg, WandbLogger):
                import wandb

                payload = {
                    f"{prefix}/figures/{name}": wandb.Image(str(path))
                    for name, path in artefacts.items()
                    if Path(path).suffix == ".png"
                }
                table = readable(frame, data, split)
                if tokens is not None:
                    cells = coloured_cells(frame, tokens, disagreement)
                    table["explanations"] = [None if c is None else wandb.Html(c, inject=False) for c in cells]
                payload[f"{prefix}/instances"] = wandb.Table(dataframe=table)
                for name, path in artefacts.items():
                    if Path(path).suffix == ".html":
                        payload[f"{prefix}/{name}"] = wandb.Html(Path(path).read_text())
                histograms = {}
                for column in frame.select_dtypes("number").columns:
                    values = frame[column].to_numpy(dtype=float)
                    values = values[np.isfinite(values)]
                    if len(values) and column not in ("index", "label", "prediction"):
                        histograms[f"{prefix}/hist/{column}"] = histogram(values)
                lg.experiment.log(payload, commit=False)  # every family's media in the run's last history row
                lg.experiment.summary.update(histograms)


def readable(frame: pd.DataFrame, data=None, split: str = "test") -> pd.DataFrame:
    """The per-instance table as a person reads it: ``label`` and ``prediction`` as class names (where the data
    has them), and each instance's ``text`` (its tokens; a pair task's ``query`` too) after its id."""
    table = frame.copy()
    names = list(getattr(getattr(data, "data", None), "label_names", None) or [])

    def name(value) -> str:
        try:
            k = int(value)
        except (TypeError, ValueError):
            return str(value)
        return names[k] if 0 <= k < len(names) else str(value)

    for column in ("label", "prediction"):
        if names and column in table:
            table[column] = [name(v) for v in table[column]]
    vocab = getattr(data, "vocab", None) if data is not None else None
    if vocab is None or "index" not in table or not len(table):
        return table
    rows = data.split(split)
    at = list(table.columns).index("uid") + 1 if "uid" in table else 1
    indices = table["index"].to_numpy(int)
    table.insert(at, "text", [" ".join(vocab.decode(rows.ids[i])) for i in indices])
    if getattr(rows, "query_ids", None) is not None:
        table.insert(at + 1, "query", [" ".join(vocab.decode(rows.query_ids[i])) for i in indices])
    return table
