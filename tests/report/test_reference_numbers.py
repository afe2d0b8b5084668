"""The published reference numbers of attn_study/report/papers/: the CSV schema, the keys they name, and
spot checks of printed values against the papers."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest
import yaml

import attn_study
from attn_study import keys
from attn_study.families.jain_wallace import keys as jw_keys
from attn_study.families.serrano_smith import keys as ss_keys
from attn_study.families.sparsity import keys as sp_keys

PAPERS = Path(attn_study.__file__).parent / "report" / "papers"
REPO = Path(attn_study.__file__).parents[1]
FILES = {
    "jain_wallace": "jain_wallace.csv",
    "serrano_smith": "serrano_smith.csv",
    "meister": "meister.csv",
    "mohankumar": "mohankumar.csv",
}
COLUMNS = [
    "paper",
    "source",
    "row",
    "column",
    "dataset",
    "model",
    "encoder",
    "attention",
    "projection",
    "lam",
    "settings",
    "cls",
    "statistic",
    "value",
    "key",
    "measure",
    "note",
]
DATASETS = {
    "sst",
    "imdb",
    "adr",
    "twenty_news",
    "ag_news",
    "mimic_diabetes",
    "mimic_anemia",
    "cnn_qa",
    "babi1",
    "babi2",
    "babi3",
    "snli",
    "yahoo",
    "amazon",
    "yelp",
    "imdb_rating",
}
MODELS = {"flat", "han", "pair"}
ENCODERS = {
    "lstm",
    "average",
    "cnn",
    "gru",
    "conv",
    "noenc",
    "transformer",
    "diversity_lstm",
    "orthogonal_lstm",
    "vanilla_lstm",
}
ATTENTIONS = {"additive", "dot"}
PROJECTIONS = {"softmax", "sparsemax", "entmax15", "sparsegen"}
STATISTICS = {
    "mean",
    "std",
    "sig_frac",
    "f1",
    "accuracy",
    "micro_f1",
    "median",
    "percent",
    "fraction",
    "ratio",
    "tau_b",
    "count",
}
#: the columns that identify one number: no two rows of a file may share them
IDENTITY = [c for c in COLUMNS if c not in ("paper", "source", "row", "column", "value", "note")]
MEASURE_PREFIX = {"jain_wallace": "jw_", "serrano_smith": "ss_", "meister": "meister_", "mohankumar": "mohankumar_"}


def load(paper: str) -> pd.DataFrame:
    """The file as text, so that ``value`` keeps its printed form (``0.40``, ``1.00``)."""
    return pd.read_csv(PAPERS / FILES[paper], dtype=str, keep_default_na=False)


@pytest.fixture(scope="module", params=sorted(FILES))
def table(request):
    return request.param, load(request.param)


def test_the_files_are_where_the_package_is():
    for name in [*FILES.values(), "README.md"]:
        assert (PAPERS / name).is_file(), name


def test_columns(table):
    _, frame = table
    assert list(frame.columns) == COLUMNS
    assert len(frame) > 0


def test_allowed_values(table):
    paper, frame = table
    assert set(frame.paper) == {paper}
    assert (frame.source != "").all()
    assert set(frame.dataset) <= DATASETS | {""}
    assert set(frame.model) <= MODELS | {""}
    assert set(frame.encoder) <= ENCODERS | {""}
    assert set(frame.attention) <= ATTENTIONS | {""}
    assert set(frame.projection) <= PROJECTIONS | {""}
    assert set(frame.statistic) <= STATISTICS
    assert all(c == "" or re.fullmatch(r"\d+", c) for c in frame.cls)
    for lam, projection in zip(frame.lam, frame.projection):
        if lam != "":
            assert projection == "sparsegen" and float(lam) < 1
    # every number is comparable with a per-run key or names the cross-run measure the report computes
    assert ((frame.key != "") | (frame.measure != "")).all()
    for measure in frame.measure[frame.measure != ""]:
        assert re.fullmatch(r"[a-z0-9_.]+", measure) and measure.startswith(MEASURE_PREFIX[paper]), measure


def test_values_are_numeric(table):
    _, frame = table
    values = pd.to_numeric(frame.value, errors="raise")
    assert values.map(math.isfinite).all()
    for stat, lo, hi in (
        ("percent", 0, 100),
        ("sig_frac", 0, 1),
        ("accuracy", 0, 1),
        ("f1", 0, 1),
        ("micro_f1", 0, 1),
        ("fraction", 0, 1),
        ("tau_b", -1, 1),
        ("std", 0, math.inf),
        ("count", 0, math.inf),
        ("ratio", 0, math.inf),
    ):
        part = values[frame.statistic == stat]
        assert ((part >= lo) & (part <= hi)).all(), stat
    assert (values[frame.statistic == "count"] % 1 == 0).all()


def test_no_duplicate_setting_and_statistic(table):
    _, frame = table
    duplicated = frame[frame.duplicated(IDENTITY, keep=False)]
    assert duplicated.empty, duplicated[["source", "row", "column", *IDENTITY]].to_string()


def _expected_key(row) -> set[str]:
    """The keys (attn_study.keys) a row's setting and statistic allow."""
    stat = row.statistic
    cls = int(row.cls) if row.cls else None
    out = {jw_keys.jw(stem, stat, cls) for stem in jw_keys.CORRELATIONS}
    out |= {ss_keys.ss_flip_cell(t, c) for t in ss_keys.SINGLE_TABLES for c in ss_keys.CELLS}
    out |= {sp_keys.sp("entropy", name, stat) for name in sp_keys.SP_DISTRIBUTIONS}
    out |= {sp_keys.sp("tau", name, stat) for name in sp_keys.SP_CORRELATIONS}
    out |= {"test/acc", "test/f1", "data/test_size", "test/conicity/mean"}
    return out


def test_keys_are_built_from_keys_py(table):
    _, frame = table
    for row in frame[frame.key != ""].itertuples():
        assert row.key in _expected_key(row), (row.source, row.row, row.column, row.key)
        if keys.namespace(row.key) in ("jw", "ss", "sp", "test"):
            # a per-run key needs the run's setting
            for field in ("dataset", "model", "encoder", "attention", "projection"):
                assert getattr(row, field) != "", (row.key, field)
        if row.key.startswith("test/") and row.key != "test/conicity/mean":
            assert row.statistic in {"accuracy", "f1", "micro_f1", "percent"}
        if row.key.startswith("ss/"):
            assert row.statistic == "percent"


def test_unverified_rows_say_so(table):
    _, frame = table
    second_hand = frame[frame.source.str.startswith("secondary list")]
    assert second_hand.note.str.startswith("UNVERIFIED").all()


def test_every_table_is_complete():
    jw, ss, me = load("jain_wallace"), load("serrano_smith"), load("meister")
    # J&W Table 2: 21 dataset × class rows × 3 column groups × (mean, std, sig. frac.)
    assert (jw.source == "Table 2").sum() == 21 * 3 * 3
    assert (jw.source == "Table 1").sum() == 12
    # S&S: 4 datasets × 6 models; Table 2 and the six panels of Figure 13 are 2x2 tables per dataset
    assert (ss.source == "Table 3").sum() == 24
    assert (ss.source == "Table 2").sum() == 16
    assert ss.source.str.startswith("Figure 13").sum() == 6 * 4 * 4
    assert (ss.source == "Table 1").sum() == 4 * 7
    # Meister: Table 1 is 4 models × 3 datasets × (mean, std); Table 2 is 2 models × 3 datasets
    assert (me.source == "Table 1").sum() == 24
    table2 = me[me.source == "Table 2"]
    assert len(table2) == 6
    assert set(table2.measure) == {"meister_table2_tau_b"} and set(table2.statistic) == {"tau_b"}
    assert (table2.key == "").all()


def test_flip_tables_sum_to_100():
    ss = load("serrano_smith")
    cells = ss[ss.key.str.contains("/flip_table/")]
    for (_, _, _, _, table), group in cells.groupby(
        ["source", "dataset", "model", "encoder", cells.key.str.rsplit("/", n=1).str[0]]
    ):
        assert sorted(k.rsplit("/", 1)[1] for k in group.key) == sorted(ss_keys.CELLS)
        assert abs(sum(Decimal(v) for v in group.value) - 100) <= Decimal("0.15"), (table, group.value.tolist())


# (file, the row's identifying fields, the value exactly as printed, where it is in the paper)
SPOT_CHECKS = [
    # J&W Table 2, row "SST | 0", column "Gradient (BiLSTM) τ_g, Mean ± Std.": "0.40 ± 0.21"
    (
        "jain_wallace",
        dict(source="Table 2", dataset="sst", encoder="lstm", cls="0", key="jw/tau_grad/class_0/mean"),
        "0.40",
    ),
    (
        "jain_wallace",
        dict(source="Table 2", dataset="sst", encoder="lstm", cls="0", key="jw/tau_grad/class_0/std"),
        "0.21",
    ),
    # J&W Table 2, row "20News | 0", column "Leave-One-Out (BiLSTM) τ_loo": "0.05 ± 0.15", Sig. Frac. "0.28"
    (
        "jain_wallace",
        dict(source="Table 2", dataset="twenty_news", encoder="lstm", key="jw/tau_loo/class_0/mean"),
        "0.05",
    ),
    (
        "jain_wallace",
        dict(source="Table 2", dataset="twenty_news", encoder="lstm", key="jw/tau_loo/class_0/sig_frac"),
        "0.28",
    ),
    # J&W Table 2, row "bAbi 2 | Overall", column "Gradient (Average) τ_g": "0.84 ± 0.09", Sig. Frac. "1.00"
    ("jain_wallace", dict(source="Table 2", dataset="babi2", encoder="average", key="jw/tau_grad/mean"), "0.84"),
    ("jain_wallace", dict(source="Table 2", dataset="babi2", encoder="average", key="jw/tau_grad/sig_frac"), "1.00"),
    # J&W Table 2, row "SNLI | 2" (third SNLI line), LOO Sig. Frac.: "0.61"
    ("jain_wallace", dict(source="Table 2", dataset="snli", cls="2", key="jw/tau_loo/class_2/sig_frac"), "0.61"),
    # J&W Table 1, "Test performance (LSTM)": SNLI "0.78" (micro-F1), bAbI "1.0 / 0.48 / 0.62", AG News "0.96"
    ("jain_wallace", dict(source="Table 1", dataset="snli", statistic="micro_f1"), "0.78"),
    ("jain_wallace", dict(source="Table 1", dataset="babi2"), "0.48"),
    ("jain_wallace", dict(source="Table 1", dataset="ag_news", key="test/f1"), "0.96"),
    # J&W Figure 5 caption: "on average ~ 0.375 points higher for the simple feedforward encoder"
    ("jain_wallace", dict(source="Figure 5 caption"), "0.375"),
    # S&S Table 2 (HANrnn), IMDB, row "Yes", column "No": the markdown's "2.212.2" is 2.2 | 12.2
    ("serrano_smith", dict(source="Table 2", dataset="imdb_rating", key="ss/single/flip_table/yes_no"), "12.2"),
    # S&S Table 2, Amazon, row "No", column "Yes": "2.787.1" is 2.7 | 87.1
    ("serrano_smith", dict(source="Table 2", dataset="amazon", key="ss/single/flip_table/no_yes"), "2.7"),
    # S&S Table 3 (appendix A.1): Yelp HANrnn "63.0", IMDB FLANnoenc "45.4"
    ("serrano_smith", dict(source="Table 3", dataset="yelp", model="han", encoder="gru"), "63.0"),
    ("serrano_smith", dict(source="Table 3", dataset="imdb_rating", model="flat", encoder="noenc"), "45.4"),
    # S&S Figure 13 (d) FLANconvs, Amazon, row "Yes", column "No": "32.7"
    (
        "serrano_smith",
        dict(source="Figure 13 (d) FLANconvs", dataset="amazon", key="ss/single_grad_attention/flip_table/yes_no"),
        "32.7",
    ),
    # S&S Figure 13 (b) FLANrnns, Yelp, row "No", column "No": "88.9"
    (
        "serrano_smith",
        dict(source="Figure 13 (b) FLANrnns", dataset="yelp", key="ss/single_grad_attention/flip_table/no_no"),
        "88.9",
    ),
    # S&S Section 5.4: "at least 1.6 times as many test instances where the purely gradient-based ranking ..."
    ("serrano_smith", dict(source="Section 5.4 text", statistic="ratio"), "1.6"),
    # Meister Table 1, row "Transformer (Sparsemax)", column SST: "0.63 ± 0.08"
    (
        "meister",
        dict(source="Table 1", dataset="sst", encoder="transformer", projection="sparsemax", statistic="mean"),
        "0.63",
    ),
    (
        "meister",
        dict(source="Table 1", dataset="sst", encoder="transformer", projection="sparsemax", statistic="std"),
        "0.08",
    ),
    # Meister Table 1, row "BiLSTM (Softmax)", column 20-News: "0.75 ± 0.12"
    (
        "meister",
        dict(source="Table 1", dataset="twenty_news", encoder="lstm", projection="softmax", statistic="mean"),
        "0.75",
    ),
    # Meister Table 2, row "BiLSTM (tanh)", column IMDb: "-0.935"; row "Transformer (dot)", column 20-News: "-0.409"
    ("meister", dict(source="Table 2", dataset="imdb", encoder="lstm"), "-0.935"),
    ("meister", dict(source="Table 2", dataset="twenty_news", encoder="transformer"), "-0.409"),
]


@pytest.mark.parametrize(
    "paper, where, printed",
    SPOT_CHECKS,
    ids=[f"{p}:{w['source']}:{w.get('dataset', '')}:{v}" for p, w, v in SPOT_CHECKS],
)
def test_spot_check(paper, where, printed):
    frame = load(paper)
    mask = pd.Series(True, index=frame.index)
    for column, value in where.items():
        mask &= frame[column] == value
    found = frame[mask]
    assert len(found) == 1, (where, len(found))
    assert found.value.iloc[0] == printed


def test_the_question_conditioned_tasks_are_keyed_to_the_pair_model():
    """Jain & Wallace's QA and NLI models attend over the passage (premise) conditioned on the question
    (hypothesis): their rows are the pair model's, which dataset=babi1..3, cnn_qa and snli run."""
    jw = load("jain_wallace")
    pair = jw[jw.dataset.isin(["babi1", "babi2", "babi3", "cnn_qa", "snli"])]
    assert len(pair) == 5 + 9 * (1 + 3 + 3) and set(pair.model) == {"pair"}  # Table 1; Table 2: CNN, bAbI, SNLI
    assert set(jw[~jw.index.isin(pair.index) & (jw.dataset != "")].model) == {"flat"}
    for dataset in ("babi1", "babi2", "babi3", "cnn_qa", "snli"):
        assert "override /model: pair" in dataset_config(dataset), dataset


def dataset_config(name: str) -> str:
    """``conf/dataset/<name>.yaml`` with the dataset configs it builds on (its defaults list), as text."""
    text = (REPO / "conf" / "dataset" / f"{name}.yaml").read_text()
    bases = re.findall(r"^\s+- (\w+)\s*$", text, flags=re.M)
    return text + "".join(dataset_config(b) for b in bases if (REPO / "conf" / "dataset" / f"{b}.yaml").is_file())


def test_settings_name_real_options_and_the_transformer_self_attention():
    """``settings`` is ``option=value; …`` (``*``: any value, named); Meister's Transformer rows fix the
    self-attention's projection: sparsemax in the sparse row, softmax in the softmax row."""
    for paper in FILES:
        for text in load(paper).settings:
            for part in filter(None, text.split(";")):
                assert re.fullmatch(r"\s*[a-z_]+(\.[a-z_]+)+=([a-z0-9_.\-]+|\*)\s*", part), (paper, part)
    me = load("meister")
    table1 = me[(me.source == "Table 1") & (me.encoder == "transformer")]
    assert set(table1[table1.projection == "sparsemax"].settings) == {"encoder.self_attention=sparsemax"}
    assert set(table1[table1.projection == "softmax"].settings) == {"encoder.self_attention=softmax"}
    assert (me[me.encoder != "transformer"].settings == "").all()


def test_every_paper_file_is_described_in_papers_yaml():
    described = yaml.safe_load((PAPERS / "papers.yaml").read_text())
    assert set(described) == set(FILES)
    recipes = {p.stem for p in (REPO / "conf" / "recipe").glob("*.yaml")}
    experiments = {
        str(p.relative_to(REPO / "conf" / "experiment").with_suffix(""))
        for p in (REPO / "conf" / "experiment").rglob("*.yaml")
    }
    for paper, about in described.items():
        assert about["recipe"] in recipes, paper
        assert set(about["experiments"]) <= experiments, paper
        assert set(about["other_data"]) <= DATASETS and set(about["embeddings_per_dataset"]) <= DATASETS, paper
        assert about["title"] and about["embeddings"], paper


def test_each_explanation_keys_one_number_and_cites_a_section_of_the_docs():
    """A cause in explanations.csv explains exactly one published number, in a direction the verdict can take,
    and cites a heading that exists in docs/ (``docs/<page>.md#<anchor>``)."""
    causes = pd.read_csv(PAPERS / "explanations.csv", dtype=str, keep_default_na=False)
    assert list(causes.columns) == [
        "paper",
        "source",
        "dataset",
        "row",
        "column",
        "statistic",
        "when",
        "cause",
        "measured_in",
    ]
    numbers = pd.concat([load(paper) for paper in FILES])
    for cause in causes.itertuples():
        found = matching(numbers, cause, ("paper", "source", "dataset", "row", "column", "statistic"))
        assert len(found) == 1, cause
        assert cause.when in ("", "ours higher", "ours lower") and cause.cause, cause
        page, _, anchor = cause.measured_in.partition("#")
        assert page.startswith("docs/") and (REPO / page).is_file(), cause.measured_in
        assert anchor in doc_anchors(REPO / page), cause.measured_in


def doc_anchors(page: Path) -> set[str]:
    """GitHub's anchors of a Markdown page's headings (lower case, punctuation dropped, spaces as -)."""
    headings = re.findall(r"^#+\s+(.*)$", page.read_text(), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


MOHANKUMAR = [
    # docs/faithful_by_design.md: "SST accuracy vanilla 81.79 / 80.3, diversity 79.95 / 80.0, orthogonal 80.05 / 77.6;
    # conicity vanilla 0.68 / 0.71, diversity 0.20 / 0.19. IMDB accuracy 89.49 / 89.3, 88.54 / 87.8, 88.71 / 88.3;
    # conicity 0.69 / 0.60, 0.08 / 0.09" (original / rerun): the original column
    ("sst", "vanilla_lstm", "test/acc", "81.79"),
    ("sst", "diversity_lstm", "test/acc", "79.95"),
    ("sst", "orthogonal_lstm", "test/acc", "80.05"),
    ("imdb", "diversity_lstm", "test/acc", "88.54"),
    ("sst", "diversity_lstm", "test/conicity/mean", "0.20"),
    ("imdb", "vanilla_lstm", "test/conicity/mean", "0.69"),
    ("imdb", "diversity_lstm", "test/conicity/mean", "0.08"),
]


def test_mohankumar_rows_name_the_encoders_sweep_mohankumar_runs():
    """The authors' Vanilla LSTM is one direction of 256 units (``encoder=vanilla_lstm``), not our BiLSTM: its rows
    are keyed to the encoders the sweep trains, so a Jain & Wallace BiLSTM run is never judged against them."""
    import yaml

    sweep = yaml.safe_load((REPO / "conf" / "sweep" / "mohankumar.yaml").read_text())
    swept = set(sweep["hydra"]["sweeper"]["params"]["encoder"].split(","))
    assert set(load("mohankumar").encoder) <= swept
    assert "lstm" not in swept


@pytest.mark.parametrize("dataset, encoder, key, printed", MOHANKUMAR)
def test_mohankumar_numbers_are_the_original_column_quoted_in_the_docs(dataset, encoder, key, printed):
    frame = load("mohankumar")
    found = frame[(frame.dataset == dataset) & (frame.encoder == encoder) & (frame.key == key)]
    assert found.value.tolist() == [printed]
    assert printed in (REPO / "docs" / "faithful_by_design.md").read_text()
    # no conicity of the Orthogonal LSTM: the only source here gives none
    assert frame[(frame.encoder == "orthogonal_lstm") & (frame.key == "test/conicity/mean")].empty


# ------------------------------------------------------------------------------------------------
# released_runs.csv: the authors' released runs of a published number
# ------------------------------------------------------------------------------------------------

CELL = ["paper", "source", "dataset", "row", "column", "statistic"]


def released() -> pd.DataFrame:
    return pd.read_csv(PAPERS / "released_runs.csv", dtype=str, keep_default_na=False)


def test_each_released_run_keys_one_number_and_says_where_it_was_read_or_quoted():
    """Every row names exactly one published number; a verified row names the repository, a full commit and the
    file it was read from, an unverified one where it was quoted and no commit; no file gives a cell two values."""
    runs = released()
    assert list(runs.columns) == [
        *CELL,
        "value",
        "repository",
        "commit",
        "date",
        "file",
        "verified",
        "quoted_in",
        "note",
    ]
    numbers = pd.concat([load(paper) for paper in FILES])
    for run in runs.itertuples():
        assert len(matching(numbers, run, CELL)) == 1, run
        assert math.isfinite(float(run.value)) and run.repository == "successar/AttentionExplanation", run
        if run.verified == "yes":
            assert re.fullmatch(r"[0-9a-f]{40}", run.commit) and run.file.endswith(".csv") and not run.quoted_in, run
        else:
            assert run.verified == "no" and run.quoted_in and not run.commit and not run.file, run
    verified = runs[runs.verified == "yes"]
    assert not verified.duplicated([*CELL, "commit", "file"]).any()


def test_each_cell_has_several_released_runs_and_the_papers_value_is_one_of_them():
    """A cell is recorded because several runs of it survive; the paper printed one of them: for every cell, some
    verified run rounds to the printed value at the printed digits (a run filed under the wrong class, statistic
    or column would break this)."""
    printed = pd.concat([load(paper) for paper in FILES]).set_index(CELL)["value"]
    for cell, group in released().groupby(CELL):
        assert len(group) >= 2, cell
        text = printed.loc[cell]
        digits = len(text.split(".", 1)[1]) if "." in text else 0
        verified = group[group.verified == "yes"].value.astype(float)
        assert any(Decimal(f"{v:.{digits}f}") == Decimal(text) for v in verified), (cell, text, verified.tolist())


def test_the_20news_bilstm_runs_are_those_read_from_the_authors_files():
    """τ_g of class 0: −0.053 (42eb487, ``20News_sports+lstm+attention(tanh).csv``), 0.081 (the paper's 0.08;
    607eb50, ``graph_outputs_old/…/20News_sports+lstm+tanh.csv``), 0.175 (825102b, ``GradientPval_20News_sports.csv``),
    and issue 55's 0.07, not verified; τ_loo of class 1: 0.142, 0.182 and issue 55's 0.20."""
    runs = released()
    news = runs[(runs.dataset == "twenty_news") & (runs.statistic == "mean")]
    tau_g = news[(news.row == "20News / 0") & news.column.str.startswith("Gradient (BiLSTM)")]
    assert sorted(zip(tau_g.value.astype(float), tau_g.commit.str[:7])) == [
        (-0.0531844730040265, "42eb487"),
        (0.07, ""),
        (0.08119120297644912, "607eb50"),
        (0.1750782750749095, "825102b"),
    ]
    loo = news[(news.row == "20News / 1") & news.column.str.startswith("Leave-One-Out")]
    assert sorted(loo.value.astype(float)) == [0.14196570834137898, 0.18175537438779737, 0.20]
    assert set(loo[loo.verified == "no"].quoted_in.str[:8]) == {"issue 55"}


def matching(numbers: pd.DataFrame, entry, columns) -> pd.DataFrame:
    """The rows of ``numbers`` equal to ``entry`` (a row of another table) in every one of ``columns``."""
    for column in columns:
        numbers = numbers[numbers[column] == getattr(entry, column)]
    return numbers
