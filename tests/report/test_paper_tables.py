"""The scorecard's outcomes and coverage on hand-made runs whose numbers are set against the papers': the pair model's
bAbI rows, Mohankumar et al.'s accuracy and conicity, the self-attention of Meister et al.'s sparse Transformer, a
cross-run measure asked of every family, "explained" only from explanations.csv, data absent vs compute, code
versions; and the report's files (scorecard.csv, coverage.csv) from run directories."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import attn_study
from attn_study.families import REGISTRY
from attn_study.report import paper_tables
from attn_study.report import scorecard as sc
from attn_study.report.cli import build_report
from attn_study.report.coverage import available_data, configured_data, coverage, summary_line
from attn_study.report.runs import CrossRunMeasure, Run, code_label, code_note, numerics_label
from tests.report.paper_runs import CODE_A, CODE_B, paper_sweep
from tests.report.test_scorecard import SETTING


def run(i: int, summary: dict, *, settings: dict | None = None, code: dict | None = None, **setting) -> Run:
    """A complete run at J&W's SST BiLSTM setting (``test_scorecard.SETTING``) but where ``setting`` says."""
    config = {**SETTING, "seed": 13 + i, **setting}
    flat = {k.replace(".", "/"): v for k, v in (settings or {}).items()}
    return Run(Path(f"/r{i}"), "complete", config=config, summary=summary, settings=flat, code=code or CODE_A)


def number(judged: pd.DataFrame, **where) -> pd.Series:
    found = judged
    for column, value in where.items():
        found = found[found[column] == value]
    assert len(found) == 1, (where, len(found))
    return found.iloc[0]


def test_babi_rows_are_judged_from_runs_of_the_pair_model():
    """J&W's bAbI numbers are the question-conditioned (pair) model's on the 10k training questions: dataset=babi1
    runs match, a flat model's would not, and a run on the 1k variant is at other settings."""
    ten_k = {"dataset.source.variant": "en-10k"}  # the paper's 10k training questions
    pair = [
        run(i, {"test/acc": v, "jw/tau_grad/mean": 0.23}, dataset="babi1", model="pair", settings=ten_k)
        for i, v in enumerate((0.99, 1.0, 1.0))
    ]
    judged = sc.judge(pair)
    accuracy = number(judged, source="Table 1", dataset="babi1")
    assert accuracy["outcome"] == sc.REPRODUCED and accuracy["n seeds"] == 3
    tau = judged[
        (judged["source"] == "Table 2") & (judged["dataset"] == "babi1") & (judged["key"] == "jw/tau_grad/mean")
    ]
    assert tau["setting"].str.contains("babi1 pair lstm").any() and (tau["n seeds"] == 3).any()
    flat = [run(i, {"test/acc": 1.0}, dataset="babi1", model="flat", settings=ten_k) for i in range(3)]
    assert number(sc.judge(flat), source="Table 1", dataset="babi1")["outcome"] == sc.NOT_RUN
    one_k = [
        run(i, {"test/acc": 1.0}, dataset="babi1", model="pair", settings={"dataset.source.variant": "en"})
        for i in range(3)
    ]
    judged = number(sc.judge(one_k), source="Table 1", dataset="babi1")
    assert judged["outcome"] == sc.NOT_COMPARABLE and "dataset.source.variant" in judged["verdict"]


def test_mohankumar_accuracy_in_percent_and_conicity_are_scored():
    runs = [
        run(i, {"test/acc": acc, "test/conicity/mean": con}, encoder="diversity_lstm")
        for i, (acc, con) in enumerate(((0.795, 0.19), (0.80, 0.20), (0.805, 0.21)))
    ]
    judged = sc.judge(runs)
    accuracy = number(judged, paper="mohankumar", column="SST / Accuracy", row="Diversity LSTM")
    assert accuracy["ours"] == pytest.approx(80.0) and accuracy["outcome"] == sc.REPRODUCED  # 79.95, in percent
    conicity = number(judged, paper="mohankumar", column="SST / Conicity", row="Diversity LSTM")
    assert conicity["ours"] == pytest.approx(0.20) and conicity["outcome"] == sc.REPRODUCED
    assert "unverified" in accuracy["verdict"]  # a secondary source's number says so


def meister_sparse_transformer(judged: pd.DataFrame) -> pd.Series:
    return number(
        judged, paper="meister", source="Table 1", dataset="sst", row="Transformer (Sparsemax)", statistic="mean"
    )


def transformer(i: int, value: float, self_attention: str | None, overrides=()) -> Run:
    settings = {} if self_attention is None else {"encoder.self_attention": self_attention}
    out = run(
        i,
        {"sp/entropy/g_hidden/mean": value},
        settings=settings,
        encoder="transformer",
        attention="dot",
        projection="sparsemax",
    )
    out.config["overrides"] = list(overrides)
    return out


def test_the_sparse_transformer_is_judged_only_from_runs_with_sparsemax_self_attention():
    """Meister et al.'s Transformer (sparsemax) had sparse self-attention: a run with softmax self-attention (or one
    whose config predates the option: softmax) is at other settings, and every cell names the self-attention."""
    softmax = [transformer(0, 0.80, "softmax"), transformer(1, 0.81, None)]
    cell = meister_sparse_transformer(sc.judge(softmax))
    assert cell["outcome"] == sc.NOT_COMPARABLE
    assert "encoder.self_attention=softmax (paper's: sparsemax)" in cell["reason"]
    assert cell["named settings"] == "encoder.self_attention: softmax (2 runs)"
    override = ["encoder.self_attention=sparsemax"]  # the option on the command line is the setting itself
    sparse = [transformer(2, 0.62, "sparsemax", override), transformer(3, 0.64, "sparsemax", override)]
    cell = meister_sparse_transformer(sc.judge(softmax + sparse))
    assert cell["outcome"] == sc.REPRODUCED and cell["n seeds"] == 2 and cell["ours"] == pytest.approx(0.63)
    assert cell["runs left out"] == 2 and "2 runs at other settings left out" in cell["verdict"]
    assert cell["named settings"] == "encoder.self_attention: sparsemax (2 runs)"


def test_a_cross_run_measure_is_asked_of_every_family(monkeypatch):
    """The scorecard names no family: Meister et al.'s Table 2 comes from whichever family report exports
    ``meister_table2_tau_b``; with none exporting it, the number is "not computed"."""
    lam = [-10.0, -1.0, 0.5]
    runs = [
        run(3 * s + j, {"seed": s}, projection="sparsegen", lam=x, seed=s) for s in range(2) for j, x in enumerate(lam)
    ]
    fake = CrossRunMeasure(
        description="a planted measure",
        points=lambda rs: [r for r in rs if r.config["projection"] == "sparsegen"],
        per_seed=lambda rs: [-0.9, -0.8],
        spans=("projection",),
    )
    family = SimpleNamespace(
        module=lambda part: SimpleNamespace(cross_run_measures=lambda: {"meister_table2_tau_b": fake})
    )
    monkeypatch.setattr(sc, "REGISTRY", {"planted": family})
    where = dict(paper="meister", source="Table 2", row="BiLSTM (tanh)", dataset="sst")
    cell = number(sc.judge(runs), **where)
    assert cell["ours"] == pytest.approx(-0.85) and cell["n seeds"] == 2 and cell["key"] == "a planted measure"
    monkeypatch.setattr(sc, "REGISTRY", {"silent": SimpleNamespace(module=lambda part: SimpleNamespace())})
    cell = number(sc.judge(runs), **where)
    assert cell["outcome"] == sc.NOT_RUN and cell["reason"].startswith("not computed")
    monkeypatch.setattr(sc, "REGISTRY", {"planted": family, "copy": family})  # a copied family keeps the name
    with pytest.raises(RuntimeError, match="families/copy/report.py: .*'meister_table2_tau_b'.* planted's"):
        sc.judge(runs)


def test_the_scorecard_and_the_runs_name_no_family():
    """report/scorecard.py, runs.py and the other shared report modules import no family and hold no family name
    outside their docstrings (each family's own measures come from its report.py)."""
    folder = Path(attn_study.__file__).parent / "report"
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and ast.get_docstring(node, clean=False)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("attn_study.families."), (path.name, node.module)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                named = [name for name in REGISTRY if name in node.value and "outputs/sweeps" not in node.value]
                assert not named, (path.name, node.lineno, named)


def test_explained_only_from_a_recorded_measured_cause(monkeypatch):
    """A number not reproduced is "explained" only when explanations.csv holds a cause for it in the direction we
    differ; otherwise "unexplained", however the docs word it."""
    runs = [run(i, {"test/f1": v}) for i, v in enumerate((0.70, 0.71, 0.72))]  # paper 0.81: ours lower
    where = dict(paper="jain_wallace", source="Table 1", dataset="sst")
    assert number(sc.judge(runs), **where)["outcome"] == sc.UNEXPLAINED
    cause = {
        "paper": "jain_wallace",
        "source": "Table 1",
        "dataset": "sst",
        "row": "SST",
        "column": "Test performance (LSTM)",
        "statistic": "f1",
        "cause": "a planted cause",
        "measured_in": "docs/reproduction.md#x",
    }
    monkeypatch.setattr(sc, "explanations", lambda: pd.DataFrame([{**cause, "when": "ours higher"}]))
    assert number(sc.judge(runs), **where)["outcome"] == sc.UNEXPLAINED  # it explains the other direction
    monkeypatch.setattr(sc, "explanations", lambda: pd.DataFrame([{**cause, "when": "ours lower"}]))
    explained = number(sc.judge(runs), **where)
    assert explained["outcome"] == sc.EXPLAINED
    assert explained["reason"] == "measured: a planted cause (docs/reproduction.md#x)"


def test_not_run_says_data_absent_or_compute_and_one_seed_has_no_verdict():
    runs = [run(0, {"test/f1": 0.81})]
    judged = sc.judge(runs, available={"sst", "imdb"})
    jw = dict(paper="jain_wallace", source="Table 1")
    assert number(judged, **jw, dataset="sst")["outcome"] == sc.NO_VERDICT  # one seed
    assert number(judged, **jw, dataset="snli")["reason"] == "data absent: snli is not here"
    assert number(judged, **jw, dataset="imdb")["reason"] == "compute: no run of the setting"
    tau = number(
        judged,
        source="Table 2",
        dataset="sst",
        key="jw/tau_grad/class_0/mean",
        setting="sst flat lstm additive softmax class 0",
    )
    assert tau["reason"].startswith("compute: 1 run(s) of the setting, none with jw/tau_grad/class_0/mean")
    frame = coverage(judged)
    table1 = frame[(frame["table"] == "Table 1") & (frame["paper"] == "Jain & Wallace (2019)")].set_index("dataset")
    assert table1.loc["sst", ["numbers", "no verdict", "not run"]].tolist() == [1, 1, 0]
    assert table1.loc["snli", "why"] == "not run — data absent: snli is not here"
    assert int(frame["numbers"].sum()) == len(sc.references())  # every published number is counted once


def test_the_coverage_names_a_paper_it_has_no_title_for_by_its_key_and_a_table_without_dataset_a_dash():
    judged = pd.DataFrame(
        [{"paper": "unlisted_paper", "source": "Table 9", "dataset": "", "outcome": sc.REPRODUCED, "reason": ""}]
    )
    (row,) = coverage(judged).to_dict("records")
    assert (row["paper"], row["table"], row["dataset"], row["numbers"], row[sc.REPRODUCED]) == (
        "unlisted_paper",
        "Table 9",
        "—",
        1,
        1,
    )


@pytest.mark.parametrize(("printed", "digits"), [("12", 1), ("0.5", 2), ("0.59", 3), ("-0.123", 3), ("<0.01", 3)])
def test_ours_is_shown_to_one_digit_more_than_the_paper_printed_at_most_three(printed, digits):
    assert paper_tables._digits(printed) == digits


def test_summary_line_names_every_outcome_a_reader_asks_about():
    counts = {sc.REPRODUCED: 18, sc.UNEXPLAINED: 1, sc.EXPLAINED: 1, sc.NOT_RUN: 3}
    assert (
        summary_line(counts) == "23 numbers: 18 reproduced, 2 not reproduced (1 explained), 0 not comparable, 3 not run"
    )


def test_datasets_here_are_those_of_any_run_or_of_this_machines_data_paths(tmp_path):
    conf = tmp_path / "conf"
    (conf / "dataset").mkdir(parents=True)
    (conf / "dataset" / "babi1.yaml").write_text("dataset:\n  path: ${oc.select:paths.data.babi,null}\n")
    (conf / "dataset" / "snli.yaml").write_text("dataset:\n  path: ${oc.select:paths.data.snli,null}\n")
    # babi2 extends babi1 (its files: babi1's paths.data.babi); a config naming no path and extending nothing
    (conf / "dataset" / "babi2.yaml").write_text("defaults:\n  - babi1\n  - _self_\ndataset:\n  name: babi2\n")
    (conf / "dataset" / "synthetic.yaml").write_text("defaults:\n  - _self_\ndataset:\n  name: synthetic\n")
    assert configured_data(conf) == set()  # no conf/local/default.yaml
    (conf / "local").mkdir()
    (tmp_path / "babi").mkdir()
    (conf / "local" / "default.yaml").write_text(
        f"paths:\n  data:\n    babi: {tmp_path / 'babi'}\n    snli: /nowhere\n"
    )
    assert configured_data(conf) == {"babi1", "babi2"}  # snli's path does not exist
    # two steps of extending (babi3 → babi2 → babi1), and two configs that extend each other (no path, no loop)
    (conf / "dataset" / "babi3.yaml").write_text("defaults:\n  - babi2\n  - _self_\ndataset:\n  name: babi3\n")
    (conf / "dataset" / "loop_a.yaml").write_text("defaults:\n  - loop_b\n  - _self_\n")
    (conf / "dataset" / "loop_b.yaml").write_text("defaults:\n  - loop_a\n  - _self_\n")
    assert configured_data(conf) == {"babi1", "babi2", "babi3"}
    failed = Run(Path("/f"), "failed", config={"dataset": "imdb"})
    assert available_data([failed], conf) == {"babi1", "babi2", "babi3", "imdb"}


def test_code_versions_and_numerics_are_named_and_a_mix_is_said():
    assert code_label(CODE_A) == "aaaaaaaa" and code_label(CODE_B) == "bbbbbbbb + changes"
    assert code_label({}) == "not recorded"
    assert code_label({"version": "0.2", "commit": "unknown", "dirty": None}) == "version 0.2"
    assert numerics_label({}) == "not recorded"
    assert numerics_label({"torch": "2.13.0+cpu"}) == "unknown, torch 2.13.0+cpu"
    assert numerics_label({"cpu_capability": "AVX2"}) == "AVX2, torch unknown"
    same = [run(0, {}), run(1, {})]
    assert code_note(same) == ""
    note = code_note([*same, run(2, {}, code=CODE_B)])
    assert "2 code versions" in note and "aaaaaaaa (2 runs)" in note and "bbbbbbbb + changes (1 run)" in note


def test_the_report_writes_the_coverage_and_names_code_versions(tmp_path):
    out = build_report(paper_sweep(tmp_path / "sweep"))
    frame = pd.read_csv(out / "coverage.csv").fillna("")
    sst = frame[
        (frame["table"] == "Table 2") & (frame["dataset"] == "sst") & (frame["paper"] == "Jain & Wallace (2019)")
    ]
    assert sst[["numbers", "not run"]].values.tolist() == [[18, 0]]
    babi = frame[(frame["table"] == "Table 2") & (frame["dataset"] == "babi1")].iloc[0]
    assert babi["not run"] == 9 and "data absent: babi1 is not here" in babi["why"]
    card = pd.read_csv(out / "scorecard.csv")
    sparse = card[(card["source"] == "Table 1") & (card["setting"].str.contains("transformer dot sparsemax"))]
    assert set(sparse["named settings"]) == {"encoder.self_attention: sparsemax (2 runs)"}
    page = (out / "index.html").read_text()
    assert "This table mixes runs of 2 code versions" in page  # J&W's seed 15 was made by other code
    replaced = pd.read_csv(out / "replaced.csv")
    assert replaced[["run left out", "replaced by", "its code", "code used"]].values.tolist() == [
        ["jw-lstm-13-before", "jw-lstm-13", "bbbbbbbb + changes", "aaaaaaaa"]
    ]
    assert replaced["why"].tolist() == ["same config, finished later; made by other code"]
    runs = pd.read_csv(out / "runs.csv").set_index("run")
    assert runs.loc["jw-lstm-15", "code"] == "bbbbbbbb + changes"
    assert runs.loc[["jw-lstm-13", "jw-lstm-14", "jw-lstm-15"], "numerics"].tolist() == [
        "AVX512, torch 2.13.0+cpu",
        "AVX2, torch 2.9.1+cpu",
        "not recorded",  # a run made before runs recorded it
    ]
    accuracy = pd.read_csv(out / "accuracy.csv")
    resumed = accuracy[accuracy["encoder"] == "diversity_lstm"].iloc[0]
    assert resumed["attempts"] == 2 and resumed["last attempt"] == 1200 and resumed["training time"] == 240
    assert np.isfinite(accuracy["training time"]).all()
    assert set(accuracy["code"]) == {"aaaaaaaa", "bbbbbbbb + changes"}  # shown per model: the runs mix versions
    assert "attempts: how many times the job was started" in page and "These models come from 2 code versions" in page


def test_the_scorecards_files_name_a_predicted_class_as_the_runs_do(tmp_path):
    """scorecard.csv's rows read ``SST / negative`` where the runs name class 0 so (the page does too), never
    ``SST / 0``."""
    out = build_report(paper_sweep(tmp_path / "sweep"))
    rows = pd.read_csv(out / "scorecard.csv")["row"].tolist()
    per_class = [r for r in rows if r.startswith("SST / ")]
    assert per_class and all(r.split(" / ")[1] in ("negative", "positive") for r in per_class), per_class


def test_a_paper_table_of_one_published_number_is_drawn():
    """J&W's Figure 3-5 captions each print one number: a table of one row is drawn with its heading, its one cell
    (ours (paper)) and its summary line."""
    runs = [run(i, {"jw/tau_grad/class_0/mean": v}) for i, v in enumerate((0.38, 0.40, 0.42))]
    judged = sc.judge(runs)
    one = judged[(judged["source"] == "Table 2") & (judged["key"] == "jw/tau_grad/class_0/mean")]
    one = one[one["outcome"] != sc.NOT_RUN]
    assert len(one) == 1
    page = paper_tables._table("J&W Table 2, one number", one, paper_tables._class_names(runs))
    assert f"id='{paper_tables._anchor('jain_wallace', 'Table 2')}'" in page
    assert "0.400 (0.40)" in page and "1 number: 1 reproduced, 0 not reproduced" in page
