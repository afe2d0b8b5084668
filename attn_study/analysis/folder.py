"""A family's results on disk: ``<run>/analysis/<family>/`` (``attn_study.layout``'s names) — its per-instance rows,
per-token scores, summary, figures and what was tracked during training —, filled under a hidden name and renamed
into place when complete."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from attn_study import layout
from attn_study.figures.training import epochs_figure
from attn_study.io import publish_mode, write_csv_atomic, write_json_atomic, write_parquet_atomic
from attn_study.layout import EPOCHS_CSV, EPOCHS_FIGURE, EPOCHS_PARQUET, INSTANCES, SUMMARY, TOKENS


def write_analysis(
    out_dir: Path,
    family: str,
    frame: pd.DataFrame,
    summary: dict,
    tokens: pd.DataFrame | None,
    figures: Callable[[Path], dict],
    history: list[dict],
    history_rows: list[dict],
    tracked: tuple[str, ...],
    title: str,
) -> tuple[Path, dict]:
    """Write ``<out_dir>/analysis/<family>/``: ``frame`` (``instances.parquet``), ``tokens`` (``tokens.parquet``,
    when given), ``summary`` (``summary.json``), the figures ``figures(folder)`` draws there, and the epochs tracked
    during training (``history``: a row per epoch, ``epochs.csv``, drawn against the epoch for the ``tracked`` keys
    under ``title``; ``history_rows``: a row per epoch and instance) — or, analysed again after training with nothing
    tracked, the epochs the folder already held. Returns (the folder, {figure's name: its path there})."""
    root = out_dir / layout.ANALYSIS
    final, partial = root / family, root / f".{family}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    publish_mode(partial)
    write_parquet_atomic(frame, partial / INSTANCES)
    if tokens is not None:
        write_parquet_atomic(tokens, partial / TOKENS)
    write_json_atomic(partial / SUMMARY, summary)
    artefacts = figures(partial)
    if history:
        epochs = pd.DataFrame(history)
        write_csv_atomic(epochs, partial / EPOCHS_CSV)
        write_parquet_atomic(pd.DataFrame(history_rows), partial / EPOCHS_PARQUET)
        figure = epochs_figure(epochs, tracked, partial / EPOCHS_FIGURE, title=title)
        if figure is not None:
            artefacts["epochs"] = figure
    else:  # analysed again after training: keep what was tracked while it trained
        for name in (EPOCHS_CSV, EPOCHS_PARQUET, EPOCHS_FIGURE):
            if (final / name).is_file():
                shutil.copy2(final / name, partial / name)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(partial, final)
    return final, {name: final / Path(path).name for name, path in artefacts.items()}
