"""What the report leaves out and how it names what it keeps: trials (debug runs, runs on synthetic data) beside real
runs are listed and left out of the tables unless ``--include-all``; a row's variant names settings as the user
writes them (``recipe=jain_wallace``), never where the data lies; a figure's long labels are wrapped, never cut."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attn_study.families.jain_wallace import report as jw_report
from attn_study.figures import common
from attn_study.report.cli import build_report
from attn_study.report.cli import main as report_main
from attn_study.report.runs import Run, collect, trial_reason
from tests.report.test_report import jw_summary, make_run

DEBUG = {"trainer.limit_train_batches": 5, "trainer.limit_test_batches": 2}


def run_with(dataset="sst", overrides=(), **settings) -> Run:
    flat = {key.replace(".", "/"): value for key, value in settings.items()}
    return Run(path=None, state="complete", config={"dataset": dataset, "overrides": list(overrides)}, settings=flat)


@pytest.mark.parametrize(
    "run, why",
    [
        (run_with(), ""),
        (run_with(**{"trainer.limit_train_batches": 1.0}), ""),  # Lightning's default: the whole split
        (run_with(**{"trainer.limit_train_batches": None}), ""),
        (run_with(**{"trainer.limit_val_batches": 0.25}), "debug (trainer.limit_val_batches=0.25)"),
        (run_with(**{"trainer.limit_test_batches": 1}), "debug (trainer.limit_test_batches=1)"),  # one batch
        (run_with(**DEBUG), "debug (trainer.limit_train_batches=5, trainer.limit_test_batches=2)"),
        (run_with(overrides=["trainer=debug"]), "debug (trainer=debug)"),
        (run_with("synthetic_markers"), "synthetic data (dataset=synthetic_markers)"),
        (
            run_with("synthetic", **{"trainer.limit_train_batches": 5}),
            "debug (trainer.limit_train_batches=5); synthetic data (dataset=synthetic)",
        ),
    ],
)
def test_a_trial_is_a_debug_run_or_one_on_synthetic_data(run, why):
    assert trial_reason(run) == why


@pytest.fixture
def mixed(tmp_path):
    """A real SST BiLSTM run beside a debug SST Average run and a BiLSTM run on synthetic data."""
    root = tmp_path / "runs"
    make_run(root, "real", dataset="sst", encoder="lstm", summary=jw_summary(0.3, 0.81))
    make_run(root, "debug", dataset="sst", encoder="average", summary=jw_summary(0.6, 0.52), settings=DEBUG)
    make_run(root, "quickstart", dataset="synthetic", encoder="lstm", summary=jw_summary(0.1, 0.95))
    return root


def test_trials_beside_real_runs_are_listed_and_left_out(mixed):
    out = build_report(mixed)
    accuracy = pd.read_csv(out / "accuracy.csv")
    assert list(accuracy["test/acc"]) == [0.81]
    table = pd.read_csv(out / "table2_additive-softmax.csv")
    assert set(table["dataset"]) == {"sst"} and table["tau_g_average_mean"].isna().all()  # no debug Average
    listed = pd.read_csv(out / "runs.csv", keep_default_na=False).set_index("run")["left out"].to_dict()
    assert listed == {
        "real": "",
        "debug": "trial: debug (trainer.limit_train_batches=5, trainer.limit_test_batches=2)",
        "quickstart": "trial: synthetic data (dataset=synthetic)",
    }
    page = (out / "index.html").read_text()
    lead = page[page.index("<p class='lead'>") : page.index("</p>", page.index("<p class='lead'>"))]
    assert "1 run in the tables: sst (1); 1 seed (13)." in lead
    assert "Left out: 2 debug or synthetic beside real runs (<code>--include-all</code> keeps them)" in lead


def test_include_all_keeps_the_trials(mixed, capsys):
    report_main([str(mixed), "--include-all"])
    out = mixed / "report"
    assert sorted(pd.read_csv(out / "accuracy.csv")["test/acc"]) == [0.52, 0.81, 0.95]
    assert set(pd.read_csv(out / "table2_additive-softmax.csv")["dataset"]) == {"sst", "synthetic"}
    assert "Left out" not in (out / "index.html").read_text() and capsys.readouterr().err == ""


def test_trials_alone_are_the_report(tmp_path):
    """A quick start or a smoke sweep: nothing real beside them, so nothing is left out."""
    root = tmp_path / "runs"
    make_run(root, "quickstart", dataset="synthetic", encoder="lstm", summary=jw_summary(0.1, 0.95))
    make_run(root, "debug", dataset="sst", encoder="average", summary=jw_summary(0.6, 0.52), settings=DEBUG)
    assert len(pd.read_csv(build_report(root) / "accuracy.csv")) == 2


def test_variants_are_named_as_written_and_never_by_where_the_data_lies(tmp_path):
    """Three BiLSTM runs on SST: one of a recipe (``recipe=jain_wallace``, not ``name=…``), one with other vectors
    (``embeddings=…``, the file's name), one without a learning rate (``lr=null``, never None); their data in three
    folders (``dataset.path``, ``dataset.source.path``: no label)."""
    root = tmp_path / "runs"
    shared = {"model.optimizer.lr": 0.001, "model.embeddings.path": "/vectors/glove.840B.300d.txt"}
    for seed, extra in (
        (13, {"recipe.name": "jain_wallace"}),
        (14, {"model.embeddings.path": "/vectors/crawl-300d-2M.vec"}),
        (15, {"model.optimizer.lr": None}),
        (16, {}),
        (17, {}),
    ):
        where = {"dataset.path": f"/data/sst-{seed}", "dataset.source.path": f"/data/src-{seed}" if seed % 2 else None}
        summary = jw_summary(0.3, 0.8)
        make_run(
            root, f"s{seed}", dataset="sst", encoder="lstm", seed=seed, summary=summary, settings=shared | extra | where
        )
    variants = {r.path.name: r.config["variant"] for r in collect(root)[0]}
    assert variants == {
        "s13": "recipe=jain_wallace",
        "s14": "embeddings=crawl-300d-2M.vec",
        "s15": "lr=null",
        "s16": "",
        "s17": "",
    }


def test_a_long_label_is_wrapped_whole_inside_its_figure(tmp_path, monkeypatch):
    """Fig 3's boxes labelled by a 160-character variant: each label drawn inside the figure, all of its words."""
    label = "sst [" + ", ".join(f"setting_{k}=value_{k}" for k in range(9)) + "] / negative (mean +0.100, n=10)"
    assert len(label) >= 160
    drawn = {}

    def keep(fig, path):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ticks = fig.axes[0].get_yticklabels()
        drawn["texts"] = [t.get_text() for t in ticks]
        drawn["inside"] = [0 <= t.get_window_extent(renderer).x0 for t in ticks]
        return path

    monkeypatch.setattr(jw_report, "save_png", keep)
    groups = [(label, np.linspace(-1, 1, 10)), ("sst / positive", np.linspace(0, 1, 10))]
    jw_report._box_figure(groups, "τ", "Fig 3", tmp_path / "fig3.png")
    assert [" ".join(text.split()) for text in drawn["texts"]] == [label, "sst / positive"]
    assert all(len(line) <= common.LABEL_WIDTH for text in drawn["texts"] for line in text.splitlines())
    assert all(drawn["inside"])


def test_saved_figures_wrap_long_labels_and_cut_no_text(tmp_path):
    """Any figure: a tick label or legend entry over 40 characters is wrapped, all its words kept (a short one, or
    mathtext, as it was); a text past the figure's edge is taken into the PNG, not cut."""
    fig = common.new_figure((4, 3))
    ax = fig.add_subplot()
    long = "lstm + additive [" + ", ".join(f"option_{k}=value" for k in range(6)) + "]"
    ax.plot([0, 1], [0, 1], label=long)
    ax.plot([0, 1], [1, 0], label="$\\tau_g$ " + "x" * 50)
    ax.set_xticks([0, 1], [long, "short"])
    ax.legend()
    common.wrap_labels(fig)
    fig.canvas.draw()
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert " ".join(ticks[0].split()) == long and "\n" in ticks[0] and ticks[1] == "short"
    assert " ".join(legend[0].split()) == long and "\n" in legend[0] and "\n" not in legend[1]

    past = common.new_figure((4, 3))
    past.add_subplot().plot([0, 1])  # the axes fill the figure
    past.text(-0.5, 0.5, "a note that starts left of the figure")
    common.save_png(past, tmp_path / "past.png")
    from PIL import Image

    assert Image.open(tmp_path / "past.png").width > 4 * common.DPI  # grown to take the text in
