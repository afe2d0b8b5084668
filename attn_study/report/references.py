"""The papers' published numbers and what is known about them, as data (``attn_study/report/papers/``):

- ``papers.yaml``: each paper the scorecard compares, with the settings its numbers were measured at (recipe,
  embeddings, experiment files, data that is only the nearest here);
- ``<paper>.csv``: its numbers, one per row, as printed (``value`` is text: its precision is the paper's), with
  the table, row and column where each is printed and the setting in this project's config names (the columns:
  ``papers/README.md``);
- ``explanations.csv``: the measured cause of a number we do not reproduce, keyed by paper, table, dataset, row,
  column and statistic, each citing the section of ``docs/`` that measured it. Only these make a "not
  reproduced" *explained*; nothing else does;
- ``released_runs.csv``: the runs the authors' repository released of a number the paper prints, one row per
  run, keyed as ``explanations.csv`` is, with the repository, commit and file each was read from (or, where it
  could not be read, where it was quoted): the paper's number is one draw of these.
"""

from __future__ import annotations

import functools
from importlib import resources

import pandas as pd
import yaml

#: what identifies a published number in a paper's file for a reader (``explanations.csv`` is keyed by it)
CELL = ("paper", "source", "dataset", "row", "column", "statistic")
#: the columns of ``explanations.csv``
EXPLANATION_COLUMNS = (*CELL, "when", "cause", "measured_in")
#: the columns of ``released_runs.csv``
RELEASED_COLUMNS = (*CELL, "value", "repository", "commit", "date", "file", "verified", "quoted_in", "note")


def _folder():
    return resources.files("attn_study.report") / "papers"


@functools.cache
def papers() -> dict[str, dict]:
    """``papers.yaml``: paper key → its title and settings (recipe, embeddings, experiments, other data)."""
    return yaml.safe_load((_folder() / "papers.yaml").read_text())


def references() -> pd.DataFrame:
    """Every published number of every paper, as printed (read as text)."""
    frames = [pd.read_csv(_folder() / f"{paper}.csv", dtype=str, keep_default_na=False) for paper in papers()]
    return pd.concat(frames, ignore_index=True)


def explanations() -> pd.DataFrame:
    """``explanations.csv``: one measured cause per number not reproduced (``when``: ``ours higher`` / ``ours
    lower`` — the direction it explains —, empty for either)."""
    frame = pd.read_csv(_folder() / "explanations.csv", dtype=str, keep_default_na=False)
    return frame[list(EXPLANATION_COLUMNS)]


def released_runs() -> pd.DataFrame:
    """``released_runs.csv``: one row per run the authors released of a published number (``value`` as in their
    file; ``verified``: ``yes`` where it was read from ``file`` at ``commit``, ``no`` where only ``quoted_in``
    a text)."""
    frame = pd.read_csv(_folder() / "released_runs.csv", dtype=str, keep_default_na=False)
    return frame[list(RELEASED_COLUMNS)]


def rounding(printed: str) -> float:
    """Half a unit of the last printed digit: ``0.81`` → 0.005, ``12`` → 0.5."""
    text = printed.strip().lstrip("<>~≈")
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    return 0.5 * 10.0**-decimals


def printed_value(printed: str) -> float:
    """The printed number as a float (``<0.2`` → 0.2); ValueError when it is not a number."""
    return float(printed.strip().lstrip("<>~≈"))


def required_settings(text: str) -> dict[str, str | None]:
    """A row's ``settings`` (``encoder.self_attention=sparsemax; …``): option → the paper's value, or
    None for ``option=*`` (any value, named in the cell)."""
    out = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        key, _, value = part.partition("=")
        out[key.strip()] = None if value.strip() == "*" else value.strip()
    return out
