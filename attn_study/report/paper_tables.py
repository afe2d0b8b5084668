"""The scorecard as the papers print it (:mod:`attn_study.report.scorecard`'s judgement of every published number):

- first, one line per paper table: how many of its numbers are reproduced, not reproduced, not comparable, have
  no verdict or were not run (and why not: data absent, compute);
- then each table that a run here touches, in the paper's own shape — its rows and columns (a column printed
  ``group / sub`` under a two-level header) —, each number "ours (paper) ±band" coloured by its outcome (a std
  after its mean: "std …"), "tentative" beside the band where the verdict rests on fewer than 3 runs, its
  details (n seeds, the spreads the band holds, interval, the authors' released runs, embeddings, settings, code,
  reason) a click away (``<details>``). Rows and columns where no number was run are listed under the table
  instead of drawn empty;
- a section of its own with the coverage per paper × table × dataset (``coverage.*``).

Files: ``scorecard.{csv,md,tex}`` (one row per number a run gives), ``coverage.{csv,md,tex}``. :func:`scorecard`
judges once and gives the pieces (a :class:`Scorecard`); its summary lines are plain text, for the terminal too.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from attn_study.report import pretrained
from attn_study.report import scorecard as sc
from attn_study.report.coverage import available_data, coverage, display, reason_kinds, summary_line
from attn_study.report.references import papers
from attn_study.report.render import format_number, html_label, html_table, section_id, sentence, write_table
from attn_study.report.runs import Run

#: outcome → the CSS class that colours its cells (render.STYLE)
CSS = {
    sc.REPRODUCED: "v-ok",
    sc.EXPLAINED: "v-why",
    sc.UNEXPLAINED: "v-bad",
    sc.NOT_COMPARABLE: "v-nc",
    sc.NO_VERDICT: "v-nv",
    sc.NOT_RUN: "v-nr",
}
#: outcomes that say something about the paper's number (a table with one of them comes first)
JUDGED = (sc.REPRODUCED, sc.EXPLAINED, sc.UNEXPLAINED, sc.NO_VERDICT)

RULE = (
    "Each published number of Jain & Wallace, Serrano & Smith, Meister et al. and Mohankumar et al. "
    "(<code>attn_study/report/papers/</code>) beside ours: <b>ours (paper) ±band</b>, ours the mean over seeds. A "
    "number is <i>reproduced</i> when the paper's value lies within the band, ours ± (2 s + the half-width of our "
    "mean bootstrap interval over instances + half the paper's last printed digit), never on one seed; s is the std "
    "over the cell's runs: over seeds, and over splits too where the runs drew different ones (a split seed; the "
    "details say which). A verdict from fewer than 3 seeds is <i>tentative</i>. <i>Not reproduced</i> otherwise, "
    "<i>explained</i> only where a measured cause is recorded for it (<code>report/papers/explanations.csv</code>, "
    "citing the docs that measured it). Where the authors released several runs of a number "
    "(<code>report/papers/released_runs.csv</code>), the details say whether ours lies within their range: the "
    "paper printed one of them. <i>Not comparable</i> when no run of it was at the paper's settings (recipe, "
    "pretrained embeddings, the paper's data, no smoke sweep, the papers' experiment files, standard training, the "
    "settings the row fixes, no command-line setting that changes what is measured: the cell says what differs; "
    "runs at other settings beside runs at the paper's are left out and counted); <i>not run</i> when no run gives "
    "it: data absent, or compute. Click a number for its details."
)


@dataclass(frozen=True)
class Scorecard:
    """The scorecard, judged once, in the pieces the report places apart: ``lines`` (one per paper table a run
    touches, then how many no run touches: the page's head and the terminal's), with ``anchors`` (each line's table
    on the page, None for the last), ``tables`` (the legend and the tables the runs touch, in the papers' shapes),
    ``rule`` (how a number is judged), ``untouched`` (the note naming the tables no run touches) and ``coverage`` (per
    paper, table and dataset)."""

    lines: list[str]
    anchors: list[str | None]
    tables: str
    rule: str
    untouched: str
    coverage: str

    def summary_html(self) -> str:
        """:attr:`lines` as the page's list, each paper table's name a link to its table."""
        items = []
        for line, anchor in zip(self.lines, self.anchors):
            name, _, rest = line.partition(": ")
            text = f"<a href='#{anchor}'>{html_label(name)}</a>: {html.escape(rest)}" if anchor else html.escape(line)
            items.append(f"<li>{text}</li>")
        return f"<ul class='summary'>{''.join(items)}</ul>"


def scorecard(used: list[Run], runs: list[Run], work: Path) -> Scorecard:
    """The :class:`Scorecard` of ``used`` (the runs in the tables; ``runs``: every run found, which datasets are
    here), with its files ``scorecard.*`` and ``coverage.*`` in ``work``."""
    judged = sc.judge(used, available_data(runs))
    labels = _class_names(used)
    scored = judged[judged["outcome"] != sc.NOT_RUN]
    named = [_row_label(entry, labels) for _, entry in scored.iterrows()]  # SST / negative, not SST / 0
    scored = scored.assign(row=named).reindex(columns=sc.COLUMNS)
    write_table(scored, work, "scorecard", "Paper vs this project: every published number a run here gives")
    titles, tables = _titles(), _tables(judged)
    touched = [(key, group) for key, group in tables if _rank(group) < 2]
    untouched = [f"{titles.get(p, p)}, {s}" for (p, s), g in tables if _rank(g) == 2]
    lines = [f"{titles.get(p, p)}, {s}: {_summary_text(g)}" for (p, s), g in touched]
    anchors: list[str | None] = [_anchor(p, s) for (p, s), _ in touched]
    outside = pretrained.scorecard_line(used)  # encoder=pretrained: no paper has a cell for it
    if outside:
        lines.append(outside)
        anchors.append(section_id(pretrained.TITLE))
    if untouched:
        plural = "s" * (len(untouched) > 1)
        lines.append(f"{len(untouched)} other paper table{plural}: no run here gives a number of them")
        anchors.append(None)
    body = [_legend()] + [_table(f"{titles.get(p, p)}, {s}", g, labels) for (p, s), g in touched]
    note = (
        "<p class='note'>No run here gives a number of: "
        + "; ".join(html_label(name) for name in untouched)
        + " (their reasons: the coverage below).</p>"
        if untouched
        else ""
    )
    caption = (
        "Coverage of the papers' tables: per paper, table and dataset, how many published numbers are reproduced, "
        "not reproduced (explained by a measured cause, or not), not comparable, without a verdict (1 seed) and "
        "not run; why: each reason and how many numbers it holds (data absent: the dataset is not here; compute: "
        "the data is here but no run of the setting computed the number; settings: what the runs here do "
        "otherwise than the paper; not computed: no family's report computes that cross-run number)"
    )
    frame = coverage(judged)
    write_table(frame, work, "coverage", caption)
    shown = [f"<p>{html_label(sentence(caption))}</p>"]
    for paper, part in frame.groupby("paper", sort=False):
        shown.append(f"<h3>{html.escape(paper)}</h3>" + html_table(display(part)))
    return Scorecard(lines, anchors, "".join(body), f"<p>{RULE}</p>", note, "".join(shown))


def _titles() -> dict[str, str]:
    return {key: about["title"] for key, about in papers().items()}


def _tables(judged: pd.DataFrame) -> list[tuple[tuple[str, str], pd.DataFrame]]:
    """The judged numbers per paper table, ((paper, source), its numbers), tables with a judged number first."""
    tables = list(judged.groupby(["paper", "source"], sort=False))
    tables.sort(key=lambda item: _rank(item[1]))
    return tables


def _summary_text(group: pd.DataFrame) -> str:
    """A table's summary line: its numbers' outcomes, its tentative verdicts, why the others were not run."""
    counts = group["outcome"].value_counts().to_dict()
    return summary_line(counts, int(group["tentative"].sum()), reason_kinds(group, sc.NOT_RUN))


def _rank(group: pd.DataFrame) -> int:
    """0: a table with a judged number; 1: only numbers not comparable; 2: nothing run."""
    outcomes = set(group["outcome"])
    return 0 if outcomes & set(JUDGED) else 1 if sc.NOT_COMPARABLE in outcomes else 2


def _anchor(paper: str, source: str) -> str:
    return "t-" + re.sub(r"[^a-z0-9]+", "-", f"{paper} {source}".lower()).strip("-")


def _legend() -> str:
    items = "".join(f"<span class='legend {css}'>{html.escape(outcome)}</span>" for outcome, css in CSS.items())
    return f"<p class='note'>{items}</p>"


def _class_names(runs: list[Run]) -> dict[tuple[str, str], str]:
    """(dataset, class index) → the class's name, as the runs of that dataset recorded it."""
    names = {}
    for run in runs:
        for k, label in enumerate(run.labels):
            names.setdefault((str(run.config.get("dataset")), str(k)), str(label))
    return names


def _row_label(entry, labels) -> str:
    """The paper's row label, a predicted class given by its name where the runs name it (``SST / negative``)."""
    label = str(entry["row"])
    name = labels.get((entry["dataset"], entry["cls"])) if entry["cls"] else None
    if name and label.endswith(f"/ {entry['cls']}"):
        return label[: -len(entry["cls"])] + name
    return label


def _split(column: str) -> tuple[str, str]:
    """A printed column ``group / sub`` as its two header levels (no group: ``(column, '')``)."""
    group, _, sub = column.partition(" / ")
    return (group, sub) if sub else (column, "")


def _table(title: str, group: pd.DataFrame, labels) -> str:
    """One paper table in its shape: the rows and columns where a run gives a number, the others listed below."""
    group = group.assign(label=[_row_label(e, labels) for _, e in group.iterrows()])
    touched = group[group["outcome"] != sc.NOT_RUN]
    rows = [r for r in dict.fromkeys(group["label"]) if r in set(touched["label"])]
    columns = [c for c in dict.fromkeys(group["column"]) if c in set(touched["column"])]
    heads = [_split(c) for c in columns]
    two_levels = any(sub for _, sub in heads)
    top = "<th rowspan='2'></th>" if two_levels else "<th></th>"
    for name, span in _spans([g for g, _ in heads]):
        top += f"<th colspan='{span}'>{html_label(name)}</th>"
    header = f"<tr>{top}</tr>"
    if two_levels:
        header += "<tr>" + "".join(f"<th>{html_label(sub)}</th>" for _, sub in heads) + "</tr>"
    body = []
    for row in rows:
        cells = [group[(group["label"] == row) & (group["column"] == c)] for c in columns]
        body.append(f"<tr><th>{html_label(row)}</th>" + "".join(f"<td>{_cell(cell)}</td>" for cell in cells) + "</tr>")
    paper, source = group["paper"].iloc[0], group["source"].iloc[0]
    counts = group["outcome"].value_counts().to_dict()
    out = [
        f"<h3 id='{_anchor(paper, source)}'>{html_label(title)}</h3>",
        f"<p class='note'>{html.escape(summary_line(counts, int(group['tentative'].sum())))}.</p>",
        f"<table class='paper'><thead>{header}</thead><tbody>{''.join(body)}</tbody></table>",
    ]
    out.append(_code_note(touched))
    hidden_rows = [r for r in dict.fromkeys(group["label"]) if r not in rows]
    hidden_columns = [c for c in dict.fromkeys(group["column"]) if c not in columns]
    if hidden_rows or hidden_columns:
        parts = []
        if hidden_rows:
            parts.append(f"rows {'; '.join(hidden_rows)}")
        if hidden_columns:
            parts.append(f"columns {'; '.join(hidden_columns)}")
        out.append(f"<p class='note'>Not run here, so not drawn: {html_label(' — '.join(parts))}.</p>")
    return "".join(out)


def _spans(names: list[str]) -> list[tuple[str, int]]:
    """Consecutive equal header names merged: ``[(name, how many columns)]``."""
    out: list[tuple[str, int]] = []
    for name in names:
        if out and out[-1][0] == name:
            out[-1] = (name, out[-1][1] + 1)
        else:
            out.append((name, 1))
    return out


def _code_note(touched: pd.DataFrame) -> str:
    versions = sorted({v for codes in touched["code labels"] for v in codes}) if "code labels" in touched else []
    if len(versions) < 2:
        return ""
    listed = ", ".join(html.escape(v) for v in versions)
    return f"<p class='note mixed'>This table mixes runs of {len(versions)} code versions: {listed}.</p>"


def _cell(cell: pd.DataFrame) -> str:
    """A paper cell: each of its numbers "ours (paper) ±band" (a std after its mean: "std …"), coloured, its
    details a click away."""
    parts = []
    for _, entry in cell.iterrows():
        parts.append(_number(entry, "std " if entry["statistic"] == "std" and parts else ""))
    return " ".join(parts)


def _decimals(printed: str) -> int:
    """How many decimals the paper printed (``0.59`` → 2, ``12`` → 0)."""
    text = printed.strip().lstrip("<>~≈-")
    return len(text.split(".", 1)[1]) if "." in text else 0


def _digits(printed: str) -> int:
    """Ours to one digit more than the paper printed (at most 3 decimals)."""
    return min(_decimals(printed) + 1, 3)


def _band(entry) -> str:
    """``±0.22`` (to the paper's own decimals, at least one), ``, tentative`` where the verdict rests on fewer than 3
    runs; empty where there is no band (one seed)."""
    width = entry.get("band", math.nan)
    if pd.isna(width):
        return ""
    tentative = ", tentative" if bool(entry.get("tentative", False)) else ""
    return f" <small>±{format_number(width, max(_decimals(entry['paper value']), 1))}{tentative}</small>"


def _number(entry, label: str = "") -> str:
    """One number "``label``ours (paper) ±band", coloured by its outcome, its details a click away."""
    ours = entry.get("ours", math.nan)
    shown = "—" if pd.isna(ours) else format_number(ours, _digits(entry["paper value"]))
    summary = f"{label}{shown} ({html.escape(entry['paper value'])}){_band(entry)}"
    return (
        f"<details class='{CSS[entry['outcome']]}'><summary>{summary}</summary>"
        f"<div class='more'>{_details(entry)}</div></details>"
    )


def _spread(entry) -> str:
    """How far ours spread: ``over 3 seeds, seed std 0.020``, or over runs on several splits with both spreads."""
    n, splits = int(entry.get("n seeds") or 0), int(entry.get("n splits") or 1)
    stds = [
        f"{name} std {format_number(entry[column])}"
        for name, column in (("seed", "seed std"), ("split", "split std"))
        if not pd.isna(entry.get(column, math.nan))
    ]
    over = f"{n} seed{'s' * (n > 1)}" if splits < 2 else f"{n} runs on {splits} splits (seed, split)"
    return f"over {over}" + (f", {', '.join(stds)}" if stds else "")


def _details(entry) -> str:
    """What lies behind one number: its outcome and why, the authors' released runs, ours over seeds (and splits),
    the band and what it holds, the runs' settings and code."""
    lines = [f"<b>{html.escape(entry['outcome'])}</b>"]
    said = entry.get("verdict")
    if isinstance(said, str) and said and said != entry["outcome"]:
        lines.append(html.escape(said))
    elif entry.get("reason"):
        lines.append(html.escape(str(entry["reason"])))
    if entry["outcome"] in (sc.EXPLAINED, sc.UNEXPLAINED):
        lines.append("why: " + html.escape(str(entry["reason"])))
    if bool(entry.get("tentative", False)):
        lines.append(f"tentative: {int(entry['n seeds'])} seeds (a verdict is firm from {sc.FIRM})")
    authors = entry.get("authors' runs")
    if isinstance(authors, str) and authors:
        lines.append(f"ours {html.escape(authors)}")
    n = int(entry.get("n seeds") or 0)
    if n:
        lines.append(f"ours: {format_number(entry['ours'])} {_spread(entry)}")
        if not pd.isna(entry.get("ci low", math.nan)):
            lines.append(f"mean 95 % interval: [{format_number(entry['ci low'])}, {format_number(entry['ci high'])}]")
        if not pd.isna(entry.get("band", math.nan)):
            lines.append(
                f"band: ± {format_number(entry['band'])} (2 × the std over {entry['spreads']}, "
                f"{format_number(entry['band std'])}, + interval half-width + rounding)"
            )
    for name in ("embeddings", "named settings", "code"):
        if isinstance(entry.get(name), str) and entry[name]:
            lines.append(f"{name}: {html.escape(entry[name])}")
    lines.append(f"setting: {html.escape(entry['setting'])}")
    lines.append(f"compared with: {html_label(entry['key'], breaks=True)}")
    return "<br>".join(lines)
