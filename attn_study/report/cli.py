"""``attn-study-report <run, sweep or outputs dir> [--out DIR]``: the papers' tables and figures from
every finished run below a directory, as Markdown, CSV and LaTeX tables, PNG figures and one
self-contained ``index.html``. Failed, unfinished and missing runs are listed, never dropped."""

from __future__ import annotations

import argparse
import html
import os
import shutil
import sys
from pathlib import Path

from attn_study.errors import UserError
from attn_study.io import make_temporary_dir
from attn_study.report import faithfulness as ff
from attn_study.report import jain_wallace as jw
from attn_study.report import serrano_smith as ss
from attn_study.report import shortcuts as sc
from attn_study.report import sparsity as sp
from attn_study.report import wiegreffe_pinter as wp
from attn_study.report.render import embedded_png, html_page, html_table, write_table
from attn_study.report.runs import collect, latest_per_model, status_table
from attn_study.report.training import training_figures


def build_report(root: Path, out_dir: Path | None = None) -> Path:
    """Write the report for the runs under ``root`` into ``out_dir`` (default ``<root>/report``)."""
    root = Path(root).resolve()
    out_dir = Path(out_dir).resolve() if out_dir else root / "report"
    runs, missing = collect(root)
    if not runs and not missing:
        raise UserError(f"attn-study-report: no runs under {root} (a run directory has .hydra/config.yaml)")
    used, older = latest_per_model(runs)
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        work = make_temporary_dir(out_dir.parent, prefix=f".{out_dir.name}.partial-")
    except OSError as err:
        raise UserError(f"attn-study-report: cannot write {out_dir} ({err.strerror or err}); give a folder you can "
                        "write to with --out") from None
    try:
        sections = _write_all(root, work, out_dir, runs, missing, used, older)
        (work / "index.html").write_text(html_page(f"attn_study report: {root.name}", sections))
        shutil.rmtree(out_dir, ignore_errors=True)
        os.replace(work, out_dir)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return out_dir


def _write_all(root, work, out_dir, runs, missing, used, older) -> list[tuple[str, str]]:
    sections = []
    status = status_table(runs, missing, root)
    write_table(status, work, "runs", "Every run found, with its state")
    problems = status[status["state"] != "complete"]
    counts = status["state"].value_counts().to_dict()
    lines = [f"<p>{len(status)} runs under <code>{html.escape(str(root))}</code>: "
             + ", ".join(f"{v} {html.escape(k)}" for k, v in sorted(counts.items())) + ".</p>"]
    if len(problems):
        lines.append("<p>Not in the tables (failed, unfinished or never started):</p>"
                     + html_table(problems[["run", "state", "error"]]))
    if older:
        lines.append("<p class='note'>Also not in the tables: older complete runs of a model that a newer run "
                     "replaces: " + ", ".join(html.escape(str(r.path.relative_to(root))) for r in older) + "</p>")
    sections.append(("Runs", "".join(lines)))

    jw_used = jw.jw_runs(used)
    for attention, projection in jw.variants(jw_used):
        frame = jw.table2(jw_used, attention, projection)
        if frame.empty:
            continue
        stem = f"table2_{attention}-{projection}"
        caption = (f"Jain & Wallace Table 2 ({attention} attention, {projection}): Kendall τ of attention vs "
                   "gradient (τ_g) and leave-one-out (τ_loo) importance per predicted class; mean ± std over "
                   "instances and the fraction with p ≤ 0.05")
        body = captioned_table(frame, work, stem, caption, display=jw.table2_display(frame))
        seeds = jw.table2_across_seeds(frame)
        if not seeds.empty:
            caption = (f"Table 2 ({attention}, {projection}) across seeds: mean and standard deviation over seeds "
                       "of each seed's mean τ")
            body += captioned_table(seeds, work, f"{stem}_seeds", caption)
        for number, make in ((3, lambda p: jw.difference_figure(jw_used, attention, projection, "loo", p)),
                             (4, lambda p: jw.difference_figure(jw_used, attention, projection, "grad", p)),
                             (5, lambda p: jw.average_vs_bilstm_figure(jw_used, attention, projection, p))):
            path = make(work / f"fig{number}_{attention}-{projection}.png")
            if path is not None:
                body += embedded_png(path)
        sections.append((f"Jain & Wallace: {attention} attention, {projection}", body))

    accuracy = jw.accuracy_table(used)
    if not accuracy.empty:
        write_table(accuracy, work, "accuracy", "Test metrics of every model (best-on-dev checkpoint)")
        sections.append(("Accuracy", html_table(accuracy)))

    ss_used = ss.ss_runs(used)
    if ss_used:
        flips, multi = ss.flip_table(ss_used), ss.multi_table(ss_used)
        body = ""
        if not flips.empty:
            caption = ("Serrano & Smith Table 2: erasing the top item i* vs a random item r; percent of instances "
                       "by which erasures flip the decision")
            body += captioned_table(flips, work, "ss_flip_table", caption)
        if not multi.empty:
            caption = "Serrano & Smith multi-weight erasure: fraction of items removed before the decision flips"
            body += captioned_table(multi, work, "ss_fraction_removed", caption)
        for dataset in sorted({r.config["dataset"] for r in ss_used}):
            path = ss.fraction_removed_figure(ss_used, dataset, work / f"ss_fraction_removed_{dataset}.png")
            if path is not None:
                body += embedded_png(path)
        sections.append(("Serrano & Smith", body))

    sp_used = sp.sp_runs(used)
    if sp_used:
        body = ""
        table1 = sp.table1(sp_used)
        if not table1.empty:
            caption = ("Meister et al. Table 1: mean ± std over instances of the normalised entropy of the gradient-based "
                       "importance of the inputs for each intermediate representation, H̃(g_{h_p}(x)) (1: every input "
                       "equally influential; 0: one input only)")
            body += captioned_table(table1, work, "sp_table1", caption, display=sp.table1_display(table1))
        table2 = sp.table2(sp_used)
        if not table2.empty:
            caption = ("Meister et al. Table 2: Kendall τ-b (the paper's statistic) between sparsegen-lin's λ "
                       "(sparsemax = 0) and the normalised entropy of input feature importance H̃(g_ŷ(x)), per model "
                       "and dataset: over every (λ, instance) pair of every seed (its p-value treats the pairs as "
                       "independent, which instances of one model are not) and over the run means (one point per "
                       "run and seed); negative: sparser attention, more concentrated importance")
            body += captioned_table(table2, work, "sp_table2", caption, display=sp.table2_display(table2))
        support = sp.support_table(sp_used)
        if not support.empty:
            caption = ("Meister et al.: the attention's support (share of a text's tokens with α > 0) per projection, "
                       "mean over instances, averaged over seeds ± their spread (n) — did larger λ make the models sparser?")
            body += captioned_table(support, work, "sp_support", caption)
        for name, make in (("sp_fig1_tau_input_vs_intermediate", sp.correlation_figure),
                           ("sp_fig2_entropy_per_projection", sp.entropy_figure),
                           ("sp_fig3_tau_vs_lambda", sp.lambda_figure)):
            path = make(sp_used, work / f"{name}.png")
            if path is not None:
                body += embedded_png(path)
        sections.append(("Meister et al.: sparse attention", body))

    sc_table = sc.table(used)
    if not sc_table.empty:
        body = ""
        for dataset, frame in sc_table.groupby("dataset", sort=True):
            caption = (f"Bai et al., {dataset}: combinatorial shortcuts per method and training variant "
                       "(mask-only acc.: accuracy from the attention pattern alone, content replaced by <unk>; marker "
                       "columns: injected label-independent tokens; mean ± std over seeds)")
            body += captioned_table(frame, work, f"sc_{dataset}", caption, display=sc.display(frame))
        sections.append(("Bai et al.: combinatorial shortcuts", body))

    ff_table = ff.table(used)
    if not ff_table.empty:
        caption = ("Faithfulness (ERASER): per dataset, model and importance method, comprehensiveness AOPC "
                   "(p(ŷ|x) − p(ŷ|x without the top k%), higher is more faithful), sufficiency AOPC (p(ŷ|x) − "
                   "p(ŷ|the top k% alone), lower is more faithful), and agreement with known rationales; "
                   "mean [95% bootstrap interval over instances] for one seed, mean ± std over seeds for several; "
                   "rank 1 = most faithful by that measure")
        body = captioned_table(ff_table, work, "ff_methods", caption, display=ff.display(ff_table))
        path = ff.curves_figure(used, work / "ff_curves.png")
        if path is not None:
            body += embedded_png(path)
        sections.append(("Faithfulness (ERASER metrics)", body))

    wp_baselines, wp_frontier = wp.baselines(used), wp.frontier(used)
    if not wp_baselines.empty or not wp_frontier.empty:
        body = ""
        if not wp_baselines.empty:
            caption = ("Wiegreffe & Pinter: test accuracy and macro-F1 with the model's own (learned), uniform and "
                       "pre-loaded attention (the base model's, or a model-consistent adversary's at λ — ours, twice "
                       "theirs), mean ± std over model seeds (n); the diagnostic MLP's row is their central comparison")
            body += captioned_table(wp_baselines, work, "wp_baselines", caption)
        if not wp_frontier.empty:
            caption = ("Wiegreffe & Pinter: each run compared with its base on the test instances — mean JSD of the "
                       "attentions and TVD of the outputs [95% bootstrap interval]; other seeds give the natural spread, "
                       "model-consistent adversaries the frontier per λ")
            body += captioned_table(wp_frontier, work, "wp_frontier", caption, display=wp.frontier_display(wp_frontier))
            path = wp.frontier_figure(used, work / "wp_jsd_vs_tvd.png")
            if path is not None:
                body += embedded_png(path)
        sections.append(("Wiegreffe & Pinter: baselines", body))

    curves = training_figures(used, work)
    if curves:
        body = ("<p>Statistics measured on each model's fixed dev subsample while it trained "
                "(<code>analysis.&lt;family&gt;.every_n_epochs</code>), one line per model.</p>")
        sections.append(("During training", body + "".join(embedded_png(path) for path in curves)))

    sections.append(("Per-run figures", _run_links(used, root, out_dir)))
    return sections


def captioned_table(frame, work: Path, stem: str, caption: str, display=None) -> str:
    """The table written as files (``render.write_table``) and as HTML under its caption."""
    table = write_table(frame, work, stem, caption, display=display)
    return f"<p>{html.escape(caption)}.</p>" + html_table(table["frame"])


def _run_links(runs, root: Path, out_dir: Path) -> str:
    items = []
    for run in sorted(runs, key=lambda r: str(r.path)):
        files = sorted(p for p in (run.path / "analysis").glob("*/*") if p.suffix in (".png", ".html"))
        if files:
            links = " · ".join(f"<a href='{html.escape(os.path.relpath(p, out_dir))}'>{html.escape(p.parent.name)}/"
                               f"{html.escape(p.name)}</a>" for p in files)
            items.append(f"<li><b>{html.escape(str(run.path.relative_to(root)) if run.path != root else run.name)}"
                         f"</b>: {links}</li>")
    return f"<ul>{''.join(items)}</ul>" if items else "<p>No per-run figures.</p>"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="attn-study-report", description=__doc__)
    parser.add_argument("directory", type=Path, help="a run, sweep (e.g. outputs/sweeps/jain_wallace) or outputs dir")
    parser.add_argument("--out", type=Path, default=None, help="report folder (default: <directory>/report)")
    args = parser.parse_args(argv)
    try:
        out = build_report(args.directory, args.out)
    except UserError as err:
        print(f"attn-study-report: error: {str(err).removeprefix('attn-study-report: ')}", file=sys.stderr)
        sys.exit(2)
    tables = sorted(p.name for p in out.glob("*.md"))
    print(f"report: {out / 'index.html'}\ntables: {', '.join(tables)}")
    for name in tables:
        if name.startswith("table2_"):
            print("\n" + (out / name).read_text())


if __name__ == "__main__":
    main()
