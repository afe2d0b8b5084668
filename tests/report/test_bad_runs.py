"""A report survives a bad run: one run whose file the report reads is broken — a ``tokens.parquet`` or
``instances.parquet`` that is truncated, not Parquet, or without the columns its readers need (or with numbers where
they read text, text where they read classes), a ``.hydra/config.yaml`` that is not YAML, an ``epochs.csv`` that is
not CSV — is listed with the file and what is wrong and left out; the report is written for the others, the exit
status is 0 and stderr holds one warning line. Markdown tables stay whole whatever a run is named."""

from __future__ import annotations

import html

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from attn_study.report.cli import main as report_main
from attn_study.report.runs import collect
from tests.report.paper_runs import jw_instances
from tests.report.test_report import jw_summary, make_run

TOKENS = pd.DataFrame({"uid": ["test-0", "test-1"], "tokens": [["a", "b"], ["c"]], "attention": [[0.4, 0.6], [1.0]]})


def truncated(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def not_parquet(path):
    path.write_text("uid,tokens\ntest-0,a b\n")


def write_tokens(frame):
    return lambda path: frame.to_parquet(path)


def write_instances(change):
    """The run's own instances.parquet, with ``change`` made to it."""
    return lambda path: change(pd.read_parquet(path)).to_parquet(path)


def config_text(text):
    return lambda path: path.write_text(text)


def pyarrow_says(path) -> str:
    """What pyarrow says of a file that is not Parquet (its first line), as the report quotes it."""
    with pytest.raises(pa.ArrowInvalid) as raised:
        pq.read_schema(path)
    return "not a Parquet file: " + str(raised.value).splitlines()[0]


def yaml_says(path) -> str:
    """What the YAML parser says of a file that is not YAML, with the line and column it names (counted from 1)."""
    with pytest.raises(yaml.MarkedYAMLError) as raised:
        yaml.safe_load(path.read_text())
    mark = raised.value.problem_mark
    return f"not YAML: {raised.value.problem} at line {mark.line + 1}, column {mark.column + 1}"


#: (file of the bad run (under its J&W analysis folder, or .hydra/), how it is broken, what the report says is wrong:
#: the words, or a function of the broken file giving them)
BROKEN = {
    "tokens truncated": ("tokens.parquet", truncated, pyarrow_says),
    "tokens not parquet": ("tokens.parquet", not_parquet, pyarrow_says),
    "tokens without uid": ("tokens.parquet", write_tokens(TOKENS.drop(columns="uid")), "no uid column"),
    "tokens of ints": (
        "tokens.parquet",
        write_tokens(TOKENS.assign(tokens=[1, 2])),
        "column tokens holds int64, not lists of text (a token each)",
    ),
    "uids of ints": ("tokens.parquet", write_tokens(TOKENS.assign(uid=[0, 1])), "column uid holds int64, not text"),
    "scores as text": (
        "tokens.parquet",
        write_tokens(TOKENS.assign(attention=["high", "low"])),
        "column attention holds large_string, not lists of numbers (a score per token)",
    ),
    "instances truncated": ("instances.parquet", truncated, pyarrow_says),
    "instances not parquet": ("instances.parquet", not_parquet, pyarrow_says),
    "instance uids of ints": (
        "instances.parquet",
        write_instances(lambda f: f.assign(uid=range(len(f)))),
        "column uid holds int64, not text",
    ),
    "predictions as text": (
        "instances.parquet",
        write_instances(lambda f: f.assign(prediction=["neg", "pos"] * (len(f) // 2))),
        "column prediction holds large_string, not integers",
    ),
    "epochs without epoch": ("epochs.csv", lambda path: path.write_text("step,value\n1,0.5\n"), "no epoch column"),
    "config not yaml": (".hydra/config.yaml", config_text("dataset: {name: imdb\nencoder: [lstm\n"), yaml_says),
    "config a list": (".hydra/config.yaml", config_text("- dataset\n- imdb\n"), "a YAML list, not a config's settings"),
}


@pytest.fixture
def runs(tmp_path):
    """Two J&W runs: ``good`` on SST, ``bad`` on IMDB, each with its instances and a tokens.parquet."""
    root = tmp_path / "runs"
    for name, dataset, base in (("good", "sst", 0.3), ("bad", "imdb", 0.5)):
        run = make_run(root, name, dataset=dataset, encoder="lstm", summary=jw_summary(base, 0.8))
        folder = run / "analysis" / "jain_wallace"
        folder.mkdir(parents=True)
        jw_instances(0).assign(uid=[f"test-{i}" for i in range(20)], label=0).to_parquet(folder / "instances.parquet")
        TOKENS.to_parquet(folder / "tokens.parquet")
    return root


@pytest.mark.parametrize("case", BROKEN)
def test_a_run_with_an_unreadable_file_is_listed_and_left_out(runs, capsys, case):
    name, breaks, wrong = BROKEN[case]
    path = runs / "bad" / (name if name.startswith(".hydra") else f"analysis/jain_wallace/{name}")
    breaks(path)
    wrong = wrong if isinstance(wrong, str) else wrong(path)
    report_main([str(runs)])  # returns: exit status 0
    out = runs / "report"
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"attn-study-report: warning: 1 run left out for a file the report cannot read ({out / 'runs.md'} names each "
        "file and what is wrong)"
    ]
    listed = pd.read_csv(out / "runs.csv").set_index("run")
    assert listed.loc["bad", "state"] == "unreadable" and listed.loc["good", "state"] == "complete"
    said = f"{path} is unreadable ({wrong})"
    assert listed.loc["bad", "error"] == said
    assert said in html.unescape((out / "index.html").read_text().replace("<wbr>", ""))  # the page says it too
    table = pd.read_csv(out / "table2_additive-softmax.csv")
    assert set(table["dataset"]) == {"sst"}  # the good run's numbers, and only its
    assert (out / "explorer.html").is_file()  # the explorer of the good run: the broken file was never read


def test_an_unreadable_run_of_a_sweep_keeps_its_listing(runs):
    """The run left out keeps what identifies it where it can (its directory), and the listing its columns."""
    (runs / "bad" / ".hydra" / "config.yaml").write_text("a: [")
    found, _ = collect(runs)
    bad = next(r for r in found if r.path.name == "bad")
    assert bad.state == "unreadable" and bad.config["dataset"] == "?" and bad.summary == {}


def test_markdown_tables_stay_whole_whatever_a_run_is_named(tmp_path):
    """A run named with a newline and a ``|`` (a failed one too, whose error spans lines): each row of runs.md is
    one line with as many cells as the header, the name's break a ``<br>``, its pipe escaped."""
    root = tmp_path / "runs"
    make_run(root, "two\nlines|piped", dataset="sst", encoder="lstm", summary=jw_summary(0.3, 0.8))
    make_run(root, "failed", dataset="sst", encoder="cnn", state="failed", error="Traceback:\n  x | y\nValueError")
    report_main([str(root)])
    lines = (root / "report" / "runs.md").read_text().splitlines()
    table = [line for line in lines if line.startswith("|")]
    assert len(table) == 2 + 2  # header, rule, a row per run

    def cells(line):
        return len(line.replace("\\|", "").strip("|").split("|"))

    assert {cells(line) for line in table} == {cells(table[0])}
    rows = {line.split(" | ")[0]: line for line in table[2:]}
    assert set(rows) == {"| two<br>lines\\|piped", "| failed"}
    assert rows["| failed"].endswith(" | Traceback:<br>  x \\| y<br>ValueError |")
