"""How much of each paper's tables the runs here cover: per paper × table × dataset, how many of its published
numbers are reproduced, not reproduced (explained by a measured cause, or not), not comparable, without a
verdict, and not run — each with its reasons (data absent, compute, settings; :mod:`attn_study.report.scorecard`).

A dataset is *here* when some run under the report's folder used it (in any state), or when this machine's
``conf/local/default.yaml`` names its files (``paths.data.<name>``, the default of its ``dataset.path``) and they
exist; a number of any other dataset that no run gives is "data absent", not "compute".
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf

from attn_study.options import CONF
from attn_study.report.references import papers
from attn_study.report.runs import Run
from attn_study.report.scorecard import (
    EXPLAINED,
    FIRM,
    NO_VERDICT,
    NOT_COMPARABLE,
    NOT_RUN,
    OUTCOMES,
    REPRODUCED,
    UNEXPLAINED,
)

#: the default of a dataset config's ``dataset.path``: the machine's ``paths.data.<name>``
_DATA_PATH = re.compile(r"paths\.data\.(\w+)")


def configured_data(conf: Path = CONF) -> set[str]:
    """The datasets (``conf/dataset/<name>.yaml``) whose files this machine's ``conf/local/default.yaml`` names
    (``paths.data.<name>``) and that exist."""
    local = conf / "local" / "default.yaml"
    if not local.is_file():
        return set()
    try:
        paths = OmegaConf.select(OmegaConf.load(local), "paths.data", default=None) or {}
    except Exception:  # an unreadable overlay: no dataset is known from it (the runs still say which are here)
        return set()
    found = set()
    for path in sorted((conf / "dataset").glob("*.yaml")):
        key = _data_key(path)
        where = paths.get(key) if key else None
        if where and Path(str(where)).expanduser().exists():
            found.add(path.stem)
    return found


def _data_key(path: Path, seen: frozenset = frozenset()) -> str | None:
    """The ``paths.data.<key>`` a dataset config defaults its files to — its own, else that of the dataset config
    it extends in its ``defaults`` (``babi2`` is ``babi1`` but the task: both read ``paths.data.babi``)."""
    text = path.read_text()
    match = _DATA_PATH.search(text)
    if match:
        return match.group(1)
    defaults = (OmegaConf.create(text).get("defaults") or []) if text.strip() else []
    for entry in defaults:
        parent = path.with_name(f"{entry}.yaml") if isinstance(entry, str) else None
        if parent is not None and parent.is_file() and parent.stem not in seen:
            return _data_key(parent, seen | {path.stem})
    return None


def available_data(runs: list[Run], conf: Path = CONF) -> set[str]:
    """The datasets that are here: those of any run found (whatever its state), and :func:`configured_data`."""
    return {str(r.config.get("dataset")) for r in runs} | configured_data(conf)


def _kind(reason: str) -> str:
    """A reason's kind: its words before the first colon (``data absent``, ``compute``, ``settings``, …)."""
    return reason.split(":", 1)[0]


def _why(group: pd.DataFrame) -> str:
    """The reasons of a group's numbers that are not reproduced, compact: per outcome, per kind of reason its
    details, each with its count (``not run — data absent: snli is not here (9)``)."""
    parts = []
    for outcome in OUTCOMES[1:]:
        kinds: dict[str, list[str]] = {}
        for reason, n in Counter(group.loc[group["outcome"] == outcome, "reason"]).items():
            detail = reason.split(":", 1)[1].strip()
            kinds.setdefault(_kind(reason), []).append(f"{detail} ({n})" if n > 1 else detail)
        if kinds:
            parts.append(f"{outcome} — " + "; ".join(f"{k}: {', '.join(d)}" for k, d in kinds.items()))
    return " | ".join(parts)


def coverage(judged: pd.DataFrame) -> pd.DataFrame:
    """Per paper × table × dataset (in the papers' order): the number of published numbers, how many have each
    outcome, and why those not reproduced are not (``why``)."""
    titles = {key: about["title"] for key, about in papers().items()}
    rows = []
    frame = judged.assign(dataset=judged["dataset"].replace("", "—"))
    for (paper, source, dataset), group in frame.groupby(["paper", "source", "dataset"], sort=False):
        counts = Counter(group["outcome"])
        rows.append(
            {
                "paper": titles.get(paper, paper),
                "table": source,
                "dataset": dataset,
                "numbers": len(group),
                **{outcome: counts.get(outcome, 0) for outcome in OUTCOMES},
                "why": _why(group),
            }
        )
    return pd.DataFrame(rows)


def summary_line(counts: dict, tentative: int = 0, not_run: str = "") -> str:
    """``20 numbers: 18 reproduced, 2 not reproduced (1 explained), 0 not comparable, 0 not run`` (and ``, 1 no
    verdict`` where there is one): a table's outcomes; ``not_run``: why the numbers not run were not
    (:func:`reason_kinds`: ``3 not run (2 data absent, 1 compute)``); ``tentative``: how many of its verdicts rest
    on fewer than 3 runs (``; 4 verdicts tentative (under 3 seeds)``). Each said only where there is something."""
    explained, unexplained = counts.get(EXPLAINED, 0), counts.get(UNEXPLAINED, 0)
    not_reproduced = f"{explained + unexplained} not reproduced" + (f" ({explained} explained)" if explained else "")
    parts = [f"{counts.get(REPRODUCED, 0)} reproduced", not_reproduced]
    parts.append(f"{counts.get(NOT_COMPARABLE, 0)} not comparable")
    if counts.get(NO_VERDICT, 0):
        parts.append(f"{counts[NO_VERDICT]} no verdict")
    parts.append(f"{counts.get(NOT_RUN, 0)} not run" + (f" ({not_run})" if not_run else ""))
    total = sum(counts.get(o, 0) for o in OUTCOMES)
    line = f"{total} number{'s' * (total != 1)}: " + ", ".join(parts)
    if tentative:
        line += f"; {tentative} verdict{'s' * (tentative > 1)} tentative (under {FIRM} seeds)"
    return line


def display(frame: pd.DataFrame) -> pd.DataFrame:
    """The coverage as printed under one paper's heading: no paper column, a count of 0 left blank."""
    shown = frame.drop(columns="paper").astype(object)
    for outcome in OUTCOMES:
        shown[outcome] = [str(n) if n else "" for n in frame[outcome]]
    return shown


def reason_kinds(judged: pd.DataFrame, outcome: str) -> str:
    """``12 data absent, 3 compute``: the kinds of reason (:func:`_kind`) of the numbers with ``outcome``."""
    kinds = Counter(_kind(r) for r in judged.loc[judged["outcome"] == outcome, "reason"])
    return ", ".join(f"{n} {kind}" for kind, n in kinds.most_common())
