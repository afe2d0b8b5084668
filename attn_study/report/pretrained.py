"""Pretrained encoders across runs (``encoder=pretrained``, ``sweep=pretrained``; docs/pretrained.md): per dataset,
each family's headline statistics of the pretrained models beside those of the models trained from scratch on the
same data (the seeds' models), mean ± std over seeds. No paper reports a pretrained transformer under these tests:
the scorecard has no cell for them (:func:`scorecard_line` says so on its first screen), and the tables say so.
"""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd

from attn_study.families import FAMILIES, HEADLINE_KEYS
from attn_study.report.render import MISSING, captioned_table, format_number
from attn_study.report.runs import Run

TITLE = "Pretrained encoders"
PRETRAINED = "pretrained"
#: the statistics of every row: the test accuracy, then each family's headline keys (in registry order)
STATISTICS = ("test/acc", *HEADLINE_KEYS)


def pretrained_runs(runs: list[Run]) -> list[Run]:
    """The complete runs whose encoder is a Hugging Face checkpoint."""
    return [r for r in runs if r.state == "complete" and r.config.get("encoder") == PRETRAINED]


def scorecard_line(runs: list[Run]) -> str | None:
    """The scorecard's line for the runs no paper has a cell for (``<title>: …``), None when there are none."""
    found = pretrained_runs(runs)
    if not found:
        return None
    n = len(found)
    return (
        f"{TITLE}: {n} run{'s' * (n != 1)} of encoder=pretrained, not comparable: no paper reports a pretrained "
        "transformer under these tests; tabled beside the seeds' models"
    )


def _cell(values: list[float]) -> str:
    """``mean ± std (n)`` over the seeds' values (the std with n − 1; one value: the value and n)."""
    finite = [v for v in values if v is not None and np.isfinite(v)]
    if not finite:
        return MISSING
    if len(finite) == 1:
        return f"{format_number(finite[0])} (1)"
    return f"{format_number(np.mean(finite))} ± {format_number(np.std(finite, ddof=1))} ({len(finite)})"


def dataset_table(runs: list[Run]) -> pd.DataFrame:
    """One row per statistic (:data:`STATISTICS`) that a pretrained run of ``runs`` (one dataset's) holds, one
    column per model (``Run.model_label``, the pretrained models first), each cell :func:`_cell` over its seeds; the
    column ``paper`` says which rows a paper could hold."""
    models: dict[str, list[Run]] = {}
    for run in sorted(runs, key=lambda r: (r.config.get("encoder") != PRETRAINED, r.model_label)):
        models.setdefault(run.model_label, []).append(run)
    held = [s for s in STATISTICS if any(s in r.summary for r in pretrained_runs(runs))]
    rows = []
    for statistic in held:
        row = {"statistic": statistic}
        for label, group in models.items():
            row[label] = _cell([r.summary.get(statistic) for r in group]) + _compared(statistic, group)
        rows.append(row)
    return pd.DataFrame(rows)


def _compared(statistic: str, runs: list[Run]) -> str:
    """`` [attention_scores=rollout]`` after a statistic of a family whose runs scored "attention" by an aggregation of
    the encoder's layers instead of α (the family's ``attention_scores`` option; its keys keep their names);
    nothing otherwise."""
    chosen = set()
    for family, namespace in FAMILIES.items():
        if statistic.startswith(f"{namespace}/"):
            chosen |= {str(r.option(f"analysis.{family}.attention_scores", "pooling")) for r in runs} - {"pooling"}
    return f" [attention_scores={', '.join(sorted(chosen))}]" if chosen else ""


def sections(runs: list[Run], work: Path) -> list[tuple[str, str]]:
    """Per dataset with a pretrained run, :func:`dataset_table` (``pretrained_<dataset>.*``)."""
    found = pretrained_runs(runs)
    if not found:
        return []
    body = [
        "<p>Each family's headline statistics of the pretrained encoders (<code>encoder=pretrained</code>: a "
        "checkpoint fine-tuned, or frozen, under the attention layer; <code>attention=cls</code>: its [CLS] token "
        "read as Devlin et al. classify) beside the models trained from scratch on the same data. <b>Not comparable "
        "with any paper</b>: no paper reports a pretrained transformer under these tests, so the scorecard holds "
        "no cell for these rows; a statistic a model's family did not compute (the [CLS] model has no pooling "
        "attention to perturb) is —.</p>"
    ]
    complete = [r for r in runs if r.state == "complete"]
    for dataset in sorted({str(r.config.get("dataset")) for r in found}):
        frame = dataset_table([r for r in complete if str(r.config.get("dataset")) == dataset])
        if frame.empty:
            continue
        caption = (
            f"{dataset}: every family's headline statistics, mean ± std over seeds (n seeds), the pretrained "
            "encoders' columns first; the pretrained columns are not comparable with any paper's number (no paper "
            "has them), the other models' are judged in the scorecard; a statistic marked [attention_scores=rollout] "
            "(or flow, raw, norms) ranked the pieces by that aggregation of the encoder's layers instead of α"
        )
        body.append(f"<h3>{html.escape(dataset)}</h3>" + captioned_table(frame, work, f"pretrained_{dataset}", caption))
    return [(TITLE, "".join(body))]
