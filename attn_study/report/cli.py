"""``attn-study-report <run, sweep or outputs dir> [--out DIR] [--include-all]``: the papers' tables and figures from
every finished run below a directory, as Markdown, CSV and LaTeX tables, PNG figures and one
self-contained ``index.html``. Failed, unfinished, unreadable and missing runs are listed, never dropped.

The page leads with the result: under its title one line of what was run (and what was left out), then the
scorecard's line per paper table a run here gives numbers of and those tables, then each family's tables; the
accuracies, the instances, the runs with their states, the per-run figures, how a number is judged and, closed,
the coverage of every paper table (most of which no run here touches) come after. The terminal gets the same
scorecard lines after the report's paths."""

from __future__ import annotations

import argparse
import errno
import html
import os
import shutil
import socket
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from attn_study import layout
from attn_study.errors import UserError
from attn_study.families import REGISTRY
from attn_study.io import make_temporary_dir, read_json, write_json_atomic, write_text_atomic
from attn_study.job import stopping
from attn_study.report import accuracy, explorer, mohankumar, paper_tables, pretrained, roar
from attn_study.report.render import collapsed, embedded_png, html_page, html_table, section_id, thumbnail, write_table
from attn_study.report.runs import (
    UNREADABLE,
    Run,
    code_note,
    collect,
    label_variants,
    latest_per_model,
    real_runs,
    replaced_table,
    status_table,
)
from attn_study.report.training import training_figures

#: the file in every folder this tool wrote: the list of what it wrote there (what may be replaced, and only that)
MARKER = ".attn-study-report.json"


def build_report(root: Path, out_dir: Path | None = None, include_all: bool = False) -> Path:
    """Write the report for the runs under ``root`` into ``out_dir`` (default ``<root>/report``).

    ``out_dir`` is the report's alone (:func:`check_out`): a folder that does not exist yet, an empty one, or one
    an earlier report wrote and nobody added to; anything else is refused before any work. The report is written
    into a hidden folder beside it (``.<name>.partial-<host>-<pid>-…``, removed on any failure or signal; those of
    dead processes are removed by the next report) and swapped into place when complete.

    The tables hold the complete runs, one per config (the latest); beside real runs, trials (debug runs, runs on
    synthetic data: ``runs.real_runs``) are left out unless ``include_all``. A run whose files cannot be read is
    listed with the file and what is wrong, left out, and counted in one warning line on stderr."""
    root = Path(root).resolve()
    out_dir = Path(out_dir).resolve() if out_dir else root / layout.REPORT
    runs, missing = collect(root)
    if not runs and not missing:
        raise UserError(f"attn-study-report: no runs under {root} (a run directory has .hydra/config.yaml)")
    check_out(out_dir, root, runs)
    used, replaced = latest_per_model(runs)
    used, trials = real_runs(used, include_all)
    label_variants(used)  # what tells apart the runs in the tables, among themselves
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_partials(out_dir)
        work = make_temporary_dir(out_dir.parent, prefix=f"{_partial_prefix(out_dir)}{_owner()}-")
    except OSError as err:
        raise UserError(
            f"attn-study-report: cannot write {out_dir} ({err.strerror or err}); give a folder you can "
            "write to with --out"
        ) from None
    with stopping.on_stop(lambda _signal: shutil.rmtree(work, ignore_errors=True)):
        try:
            listing = Listing(root, runs, missing, used, replaced, trials)
            sections = _write_all(work, out_dir, listing)
            page = html_page(f"attn_study report: {root.name}", sections, lead=_what_was_run(listing))
            (work / "index.html").write_text(page)
            written = sorted(str(p.relative_to(work)) for p in work.rglob("*") if p.is_file())
            write_json_atomic(work / MARKER, {"written_by": "attn-study-report", "root": str(root), "files": written})
            _replace(work, out_dir)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
    unreadable = [r for r in runs if r.state == UNREADABLE]
    if unreadable:
        print(
            f"attn-study-report: warning: {_count(len(unreadable), 'run')} left out for a file the report cannot read "
            f"({out_dir / 'runs.md'} names each file and what is wrong)",
            file=sys.stderr,
        )
    return out_dir


@dataclass
class Listing:
    """Every run found and what became of it: ``used`` in the tables; ``replaced``: (older run, the run of its config
    used instead); ``trials``: (run, why) left out beside real runs; ``missing``: sweep jobs with no run."""

    root: Path
    runs: list[Run]
    missing: list[dict]
    used: list[Run]
    replaced: list[tuple[Run, Run]]
    trials: list[tuple[Run, str]]


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' * (n != 1)}"


def check_out(out_dir: Path, root: Path, runs) -> None:
    """Refuse, in one line, an ``--out`` that is not the report's alone: a file; the runs' folder or a folder above
    it; a run; a folder that holds anything an earlier report did not write (no :data:`MARKER`, or files the
    marker does not list). An empty folder, or a report written earlier and left as it was, may be replaced."""
    out_dir = Path(out_dir).resolve()
    advice = "give a new folder (or an earlier report's) with --out"
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"attn-study-report: --out {out_dir} is a file, not a folder; {advice}")
    if out_dir == root or out_dir in root.parents:
        raise UserError(f"attn-study-report: --out {out_dir} holds the runs being reported; {advice}")
    inside = next((r.path for r in runs if out_dir == r.path or r.path in out_dir.parents), None)
    if layout.is_run(out_dir) or (inside is not None and out_dir != inside / layout.REPORT):
        raise UserError(f"attn-study-report: --out {out_dir} is a run directory or inside one; {advice}")
    if not out_dir.is_dir() or not any(out_dir.iterdir()):
        return
    listed = _marker_files(out_dir)
    if listed is None:
        raise UserError(
            f"attn-study-report: --out {out_dir} holds files this tool did not write (no {MARKER}); nothing was "
            f"changed: {advice}"
        )
    foreign = sorted(
        str(p.relative_to(out_dir))
        for p in out_dir.rglob("*")
        if not p.is_dir() and p.relative_to(out_dir) not in listed
    )
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise UserError(
            f"attn-study-report: --out {out_dir} holds files an earlier report did not write ({shown}); nothing was "
            f"changed: move them, or {advice}"
        )


def _marker_files(folder: Path) -> set[Path] | None:
    """The files an earlier report wrote into ``folder`` (its :data:`MARKER` included), or None without a readable
    marker."""
    try:
        marker = read_json(folder / MARKER)
        listed = {Path(f) for f in marker["files"]} if marker.get("written_by") == "attn-study-report" else None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return None if listed is None else listed | {Path(MARKER)}


def _replace(work: Path, out_dir: Path) -> None:
    """``work`` becomes ``out_dir``; an earlier report there (checked by :func:`check_out`) is moved aside first and
    removed once the new one is in place, so a failure in between leaves one of the two whole."""
    if not out_dir.exists():
        os.replace(work, out_dir)
        return
    if out_dir.is_dir() and not any(out_dir.iterdir()):
        out_dir.rmdir()
        os.replace(work, out_dir)
        return
    old = Path(tempfile.mkdtemp(prefix=f"{_partial_prefix(out_dir)}{_owner()}-old-", dir=out_dir.parent))
    os.replace(out_dir, old / out_dir.name)
    os.replace(work, out_dir)
    shutil.rmtree(old, ignore_errors=True)


def _partial_prefix(out_dir: Path) -> str:
    return f".{out_dir.name}.partial-"


def _owner() -> str:
    """``<host>-<pid>``: who is writing a partial folder (so a later report knows a dead one's leftovers)."""
    return f"{socket.gethostname().replace('-', '_')}-{os.getpid()}"


def remove_stale_partials(out_dir: Path) -> list[Path]:
    """Remove the partial folders beside ``out_dir`` that a report on this host left when it was killed (its process
    is gone); another host's, or a live process's (a report being written now), are left alone."""
    removed = []
    host = socket.gethostname().replace("-", "_")
    for path in Path(out_dir).parent.glob(f"{_partial_prefix(out_dir)}*"):
        parts = path.name.removeprefix(_partial_prefix(out_dir)).split("-")
        if len(parts) < 3 or parts[0] != host or not parts[1].isdigit() or _alive(int(parts[1])):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


#: the scorecard's sections
SCORECARD, COVERAGE = "Paper vs this project", "Coverage of the papers' tables"
JUDGING = "How a published number is judged"
#: the report's file of the scorecard's lines (``paper_tables.Scorecard.lines``), which the terminal is shown
SUMMARY = "scorecard_summary.txt"


def _write_all(work: Path, out_dir: Path, listing: Listing) -> list[tuple[str, str]]:
    """The report's sections, the result first: the scorecard's lines and the paper tables the runs touch; each
    family's tables (in registry order, with a line when its runs come from several code versions) and the reports
    across runs (Mohankumar et al., ROAR); the accuracies; the instances; the statistics tracked during training;
    every run with its state; the per-run figures; how a published number is judged; the coverage, closed."""
    used = listing.used
    card = paper_tables.scorecard(used, listing.runs, work)
    write_text_atomic(work / SUMMARY, "".join(f"{line}\n" for line in card.lines))
    sections = [(SCORECARD, _scorecard_front(card))]
    for family in REGISTRY.values():
        report = family.module("report")
        if report is not None:
            note = code_note([r for r in used if family.name in r.config.get("analysis", [])])
            sections += [(title, note + body) for title, body in report.sections(used, work)]
    sections += mohankumar.sections(used, work)
    sections += roar.sections(used, work)  # runs built on runs: ROAR (attn_study/roar/)
    sections += accuracy.sections(used, work)
    sections += pretrained.sections(used, work)  # encoder=pretrained beside the seeds' models (no paper's cells)
    sections += explorer.sections(used, work)  # every instance, sortable, with its text coloured per method
    curves = training_figures(used, work)
    if curves:
        body = (
            "<p>Statistics measured on each model's fixed dev subsample while it trained "
            "(<code>analysis.&lt;family&gt;.every_n_epochs</code>), one line per model.</p>"
        )
        sections.append(("During training", body + "".join(embedded_png(path) for path in curves)))
    sections.append(("Runs", _runs_section(work, listing)))
    sections.append(("Per-run figures", _run_links(used, listing.root, out_dir)))
    sections.append((JUDGING, card.rule))
    opens = f"{html.escape(COVERAGE)}: per paper, table and dataset (most untouched by these runs); click to open"
    sections.append((COVERAGE, collapsed(opens, card.untouched + card.coverage)))
    return sections


def _scorecard_front(card: paper_tables.Scorecard) -> str:
    """The top of the page: the scorecard's lines (one per paper table the runs touch, then how many no run touches)
    and the tables themselves; where the rule and the untouched tables are."""
    where = (
        f"How a number is judged: <a href='#{section_id(JUDGING)}'>below</a>; the paper tables no run here touches: "
        f"<a href='#{section_id(COVERAGE)}'>the coverage</a>, at the end."
    )
    return f"{card.summary_html()}<p class='note'>{where}</p>{card.tables}"


def _what_was_run(listing: Listing) -> str:
    """One line under the page's title: the runs in the tables (their datasets and seeds), then what was left out
    and why, in counts (each run is listed under Runs)."""
    used = listing.used
    datasets = Counter(str(r.config.get("dataset")) for r in used)
    seeds = sorted({str(r.config.get("seed")) for r in used}, key=lambda seed: (len(seed), seed))
    said = f"{_count(len(used), 'run')} in the tables"
    if used:
        said += ": " + ", ".join(f"{html.escape(d)} ({n})" for d, n in sorted(datasets.items()))
        said += f"; {_count(len(seeds), 'seed')} ({html.escape(', '.join(seeds))})"
    said += "."
    states = [r.state for r in listing.runs if r.state != "complete"] + [
        m.get("state", "missing") for m in listing.missing
    ]
    names = {"running": "unfinished", "none": "never started", "missing": "never started"}
    left = Counter(html.escape(names.get(state, state)) for state in states)  # what → how many (HTML)
    if listing.replaced:
        left["replaced by a later run of their config"] = len(listing.replaced)
    if listing.trials:
        left["debug or synthetic beside real runs (<code>--include-all</code> keeps them)"] = len(listing.trials)
    if left:
        listed = ", ".join(f"{n} {what}" for what, n in left.items())
        said += f" Left out: {listed}; each under <a href='#{section_id('Runs')}'>Runs</a>, with why."
    return f"<p class='lead'>{said}</p>"


def _runs_section(work: Path, listing: Listing) -> str:
    """Every run found with its state and code; those not in the tables named, with why."""
    root = listing.root
    left_out = {run.path: f"trial: {why}" for run, why in listing.trials}
    left_out |= {old.path: "replaced by a later run of its config" for old, _new in listing.replaced}
    status = status_table(listing.runs, listing.missing, root, left_out)
    write_table(status, work, "runs", "Every run found, with its state")
    problems = status[status["state"] != "complete"]
    counts = status["state"].value_counts().to_dict()
    lines = [
        f"<p>{len(status)} runs under <code>{html.escape(str(root))}</code>: "
        + ", ".join(f"{v} {html.escape(k)}" for k, v in sorted(counts.items()))
        + ".</p>"
    ]
    if len(problems):
        lines.append(
            "<p>Not in the tables (failed, unfinished, unreadable or never started):</p>"
            + html_table(problems[["run", "state", "error"]])
        )
    if listing.trials:
        trials = status[status["left out"].astype(str).str.startswith("trial: ")]
        lines.append(
            "<p>Not in the tables either: debug runs (cut to a few batches) and runs on synthetic data, beside real "
            "runs (<code>--include-all</code> keeps them):</p>" + html_table(trials[["run", "left out"]])
        )
    lines.append(code_note([r for r in listing.runs if r.state == "complete"], "The complete runs"))
    if listing.replaced:
        lines.append(
            "<p>Also not in the tables: complete runs of a config that a later run of the same config replaces "
            "(the later finished is used, whatever code made it; <code>replaced.csv</code>):</p>"
            + html_table(replaced_table(listing.replaced, root))
        )
        write_table(
            replaced_table(listing.replaced, root), work, "replaced", "Runs replaced by a later run of their config"
        )
    return "".join(lines)


def _run_links(runs, root: Path, out_dir: Path) -> str:
    """Each run's own figures as thumbnails linking to the full PNG (pages such as heatmaps.html as links)."""
    items = []
    for run in sorted(runs, key=lambda r: str(r.path)):
        files = sorted(p for p in (run.path / layout.ANALYSIS).glob("*/*") if p.suffix in (".png", ".html"))
        if not files:
            continue
        pages = " · ".join(
            f"<a href='{html.escape(os.path.relpath(p, out_dir))}'>{html.escape(p.parent.name)}/"
            f"{html.escape(p.name)}</a>"
            for p in files
            if p.suffix == ".html"
        )
        thumbs = "".join(thumbnail(p, os.path.relpath(p, out_dir)) for p in files if p.suffix == ".png")
        where = html.escape(str(run.path.relative_to(root)) if run.path != root else run.name)
        items.append(f"<li><b>{where}</b>{': ' + pages if pages else ''}<div>{thumbs}</div></li>")
    return f"<ul>{''.join(items)}</ul>" if items else "<p>No per-run figures.</p>"


#: why a folder cannot take the report: full, read-only, not the user's
UNWRITABLE = (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM)


def _chain(error: BaseException):
    """``error`` and the exceptions it was raised from or during, innermost last."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="attn-study-report",
        description=(
            "The papers' tables and figures from every finished run below a directory: Markdown, CSV and LaTeX "
            "tables, PNG figures and one self-contained index.html. Failed, unfinished, unreadable and missing runs "
            "are listed, never dropped."
        ),
    )
    parser.add_argument(
        "directory", type=Path, help="a run, a sweep (outputs/sweeps/<name>), a multirun or all of outputs/"
    )
    parser.add_argument(
        "--out", type=Path, default=None, metavar="DIR", help="where the report goes (default: <directory>/report)"
    )
    parser.add_argument(
        "--include-all",
        action="store_true",
        help="keep debug runs (trainer=debug, limit_*_batches) and runs on synthetic data in the tables when real "
        "runs are beside them (by default they are listed and left out)",
    )
    args = parser.parse_args(argv)
    stopping.install("attn-study-report", "no report was written (nothing half-written is left); run it again")
    try:
        out = build_report(args.directory, args.out, include_all=args.include_all)
    except UserError as err:
        print(f"attn-study-report: error: {str(err).removeprefix('attn-study-report: ')}", file=sys.stderr)
        sys.exit(2)
    except Exception as err:  # a full disk, a read-only or foreign folder under --out: one line, not a traceback
        cause = next((e for e in _chain(err) if getattr(e, "errno", None) in UNWRITABLE), None)
        if cause is None:
            raise
        where = args.out or args.directory / layout.REPORT
        print(
            f"attn-study-report: error: cannot write the report to {where} ({cause.strerror or cause}); free some "
            "space, or give a folder you can write to with --out",
            file=sys.stderr,
        )
        sys.exit(2)
    tables = sorted(p.name for p in out.glob("*.md"))
    print(f"report: {out / 'index.html'}\ntables: {', '.join(tables)}")
    lines = (out / SUMMARY).read_text().splitlines()
    print("scorecard (ours against the papers' numbers):\n" + "\n".join(f"  {line}" for line in lines))
    for name in tables:
        if name.startswith("table2_"):
            print("\n" + (out / name).read_text())


if __name__ == "__main__":
    main()
