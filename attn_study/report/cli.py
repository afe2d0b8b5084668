"""``attn-study-report <run, sweep or outputs dir> [--out DIR]``: the papers' tables and figures from
every finished run below a directory, as Markdown, CSV and LaTeX tables, PNG figures and one
self-contained ``index.html``. Failed, unfinished and missing runs are listed, never dropped."""

from __future__ import annotations

import argparse
import errno
import html
import os
import shutil
import sys
from pathlib import Path

from attn_study import layout
from attn_study.errors import UserError
from attn_study.families import REGISTRY
from attn_study.io import make_temporary_dir
from attn_study.report import accuracy, explorer, mohankumar, paper_tables, roar
from attn_study.report.render import embedded_png, html_page, html_table, thumbnail, write_table
from attn_study.report.runs import code_note, collect, latest_per_model, replaced_table, status_table
from attn_study.report.training import training_figures


def build_report(root: Path, out_dir: Path | None = None) -> Path:
    """Write the report for the runs under ``root`` into ``out_dir`` (default ``<root>/report``)."""
    root = Path(root).resolve()
    out_dir = Path(out_dir).resolve() if out_dir else root / "report"
    runs, missing = collect(root)
    if not runs and not missing:
        raise UserError(f"attn-study-report: no runs under {root} (a run directory has .hydra/config.yaml)")
    used, replaced = latest_per_model(runs)
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        work = make_temporary_dir(out_dir.parent, prefix=f".{out_dir.name}.partial-")
    except OSError as err:
        raise UserError(
            f"attn-study-report: cannot write {out_dir} ({err.strerror or err}); give a folder you can "
            "write to with --out"
        ) from None
    try:
        sections = _write_all(root, work, out_dir, runs, missing, used, replaced)
        (work / "index.html").write_text(html_page(f"attn_study report: {root.name}", sections))
        shutil.rmtree(out_dir, ignore_errors=True)
        os.replace(work, out_dir)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return out_dir


def _write_all(root, work, out_dir, runs, missing, used, replaced) -> list[tuple[str, str]]:
    """The report's sections: the runs, the accuracies, the papers' tables (with the coverage), each family's
    (in registry order, with a line when its runs come from several code versions), the statistics tracked
    during training and links to every run's own figures."""
    sections = [("Runs", _runs_section(root, work, runs, missing, replaced))]
    sections += accuracy.sections(used, work)
    sections += paper_tables.sections(used, runs, work)
    for family in REGISTRY.values():
        report = family.module("report")
        if report is not None:
            note = code_note([r for r in used if family.name in r.config.get("analysis", [])])
            sections += [(title, note + body) for title, body in report.sections(used, work)]
    sections += mohankumar.sections(used, work)
    sections += roar.sections(used, work)  # runs built on runs: ROAR (attn_study/roar/)
    sections += explorer.sections(used, work)  # every instance, sortable, with its text coloured per method
    curves = training_figures(used, work)
    if curves:
        body = (
            "<p>Statistics measured on each model's fixed dev subsample while it trained "
            "(<code>analysis.&lt;family&gt;.every_n_epochs</code>), one line per model.</p>"
        )
        sections.append(("During training", body + "".join(embedded_png(path) for path in curves)))
    sections.append(("Per-run figures", _run_links(used, root, out_dir)))
    return sections


def _runs_section(root, work, runs, missing, replaced) -> str:
    """Every run found with its state and code; those not in the tables named, with why."""
    status = status_table(runs, missing, root)
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
            "<p>Not in the tables (failed, unfinished or never started):</p>"
            + html_table(problems[["run", "state", "error"]])
        )
    lines.append(code_note([r for r in runs if r.state == "complete"], "The complete runs"))
    if replaced:
        lines.append(
            "<p>Also not in the tables: complete runs of a config that a later run of the same config replaces "
            "(the later finished is used, whatever code made it; <code>replaced.csv</code>):</p>"
            + html_table(replaced_table(replaced, root))
        )
        write_table(replaced_table(replaced, root), work, "replaced", "Runs replaced by a later run of their config")
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
            "tables, PNG figures and one self-contained index.html. Failed, unfinished and missing runs are "
            "listed, never dropped."
        ),
    )
    parser.add_argument(
        "directory", type=Path, help="a run, a sweep (outputs/sweeps/<name>), a multirun or all of outputs/"
    )
    parser.add_argument(
        "--out", type=Path, default=None, metavar="DIR", help="where the report goes (default: <directory>/report)"
    )
    args = parser.parse_args(argv)
    try:
        out = build_report(args.directory, args.out)
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
    for name in tables:
        if name.startswith("table2_"):
            print("\n" + (out / name).read_text())


if __name__ == "__main__":
    main()
