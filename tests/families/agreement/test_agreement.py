"""The agreement family (families/agreement): per-instance τ of every pair of methods equals scipy's Kendall τ-b of
the registry's scores (near-ties snapped), the methods a model cannot give are left out by default and refused when
named, flow's bound is counted, the report's matrix; one end-to-end run from the command line and its report."""

from __future__ import annotations

import json
from functools import partial

import numpy as np
import pandas as pd
import pytest
import torch

from attn_study.analysis.aggregation import AggregationOptions
from attn_study.analysis.importance import ImportanceOptions, importance, predict
from attn_study.analysis.measuring import analysis_mode
from attn_study.cli import train_main
from attn_study.errors import UserError
from attn_study.families.agreement import report
from attn_study.families.agreement.callback import Agreement, available
from attn_study.families.agreement.figures import tau_matrix
from attn_study.families.agreement.keys import INSTANCE_HEADLINE, ag, pair_column, tau_key
from attn_study.models.encoders import AverageEncoder, TransformerEncoder
from attn_study.report.cli import main as report_main
from tests import reference as ref
from tests.helpers import TINY, Given, StubData, entry_point, tiny_model, token_batch

TEXTS = [[4, 5, 6, 7, 8, 9], [9, 10, 11], [12, 4, 13, 14], [5, 6]]


def transformer_model():
    return tiny_model(partial(TransformerEncoder, model_dim=8, num_heads=2, num_layers=2, ff_dim=16), double=True)


def measured(analysis, model, batch):
    analysis.check_model(model)
    with analysis_mode(model):
        result = analysis.measure(model, StubData(batch), "test", np.arange(len(batch["lengths"])), ["agreement"])
    return result, analysis.summarise(result, ["agreement"])


def test_each_pairs_tau_is_kendalls_tau_of_the_two_methods_scores():
    model = transformer_model()
    batch = token_batch(TEXTS, boundary=True)
    methods = ["rollout", "flow", "attention", "gradient", "loo"]
    result, summary = measured(Agreement(methods=methods, ig_steps=4), model, batch)
    _, alpha, probs = predict(model, batch)
    scores = {m: importance(m, model, batch, alpha, probs, ImportanceOptions())[0] for m in methods}
    text = batch["token_mask"]
    for a, b in [("rollout", "flow"), ("flow", "loo"), ("attention", "gradient"), ("rollout", "loo")]:
        expected = np.array([ref.tau(scores[a][r, text[r]], scores[b][r, text[r]])[0] for r in range(len(text))])
        np.testing.assert_allclose(result.frame[pair_column(a, b)], expected, atol=1e-12, err_msg=f"{a}, {b}")
        assert summary[tau_key(a, b, "mean")] == pytest.approx(np.nanmean(expected))
    # each pair once, its two methods in alphabetical order in the columns and keys
    assert "tau_flow__rollout" in result.frame and "tau_rollout__flow" not in result.frame
    assert ag("attention", "flow", "tau", "mean") in summary and ag("flow", "attention", "tau", "mean") not in summary
    pair_keys = [k.split("/")[1:3] for k in summary if k.endswith("/tau/mean")]
    assert len(pair_keys) == 10 and all(a < b for a, b in pair_keys)
    assert summary[ag("n_instances")] == 4 and summary[ag("flow", "too_long")] == 0


def test_flow_past_its_bound_is_counted_and_left_out_of_its_pairs():
    model = transformer_model()
    batch = token_batch(TEXTS)  # lengths 6, 3, 4, 2
    _, summary = measured(Agreement(methods=["flow", "gradient"], flow_max_length=3), model, batch)
    assert summary[ag("flow", "too_long")] == 2 and summary[ag("flow", "nan_scores")] == 2
    assert summary[ag("flow", "gradient", "tau", "n")] == 2


def test_by_default_the_methods_a_model_gives_and_a_named_one_it_cannot_is_refused():
    average = tiny_model(partial(AverageEncoder, hidden_size=4))
    assert available(average) == ["attention", "gradient", "input_x_gradient", "integrated_gradients", "loo"]
    assert available(transformer_model())[:5] == ["raw", "rollout", "flow", "norms", "attention"]
    with pytest.raises(UserError, match="analysis.agreement.methods: rollout"):
        Agreement(methods=["rollout", "loo"]).check_model(average)
    with pytest.raises(UserError, match="at least two"):
        Agreement(methods=["loo"])
    with pytest.raises(UserError, match="3 layers|2 layers"):
        Agreement(methods=["raw", "loo"], attention_layer=5).check_model(transformer_model())
    aggregation = Agreement(attention_layer=0, attention_head=1).aggregation
    assert aggregation == AggregationOptions(layer=0, head=1)


def test_the_report_matrix_shows_each_pair_above_the_diagonal_with_its_interval_or_seed_spread():
    frame = pd.DataFrame(
        [
            {"a": "loo", "b": "rollout", "seed": 1, "mean": 0.2, "ci_low": 0.1, "ci_high": 0.3, "n": 10},
            {"a": "gradient", "b": "rollout", "seed": 1, "mean": 0.5, "ci_low": 0.4, "ci_high": 0.6, "n": 10},
            {"a": "gradient", "b": "rollout", "seed": 2, "mean": 0.7, "ci_low": 0.6, "ci_high": 0.8, "n": 10},
            {"a": "gradient", "b": "loo", "seed": 1, "mean": -0.1, "ci_low": -0.2, "ci_high": 0.0, "n": 10},
        ]
    )
    table = report.matrix(frame)
    assert list(table.columns) == ["method", "gradient", "LOO"] and list(table["method"]) == ["rollout", "gradient"]
    assert table.loc[0, "LOO"] == "0.200 [0.100, 0.300]"
    assert table.loc[0, "gradient"] == "0.600 ± 0.100 (2 seeds)"
    assert table.loc[1, "gradient"] == "" and table.loc[1, "LOO"] == "-0.100 [-0.200, 0.000]"


def test_agreement_on_a_transformer_from_the_command_line_and_its_report_table(tmp_path, monkeypatch, capsys):
    """The command line's entry points in this process (each is run in a fresh one in tests/test_run.py)."""
    run_dir = tmp_path / "run"
    code, _, err = entry_point(
        train_main,
        *TINY,
        "encoder=transformer",
        "encoder.num_layers=2",
        "encoder.model_dim=16",
        "encoder.ff_dim=32",
        "analysis=[agreement]",
        "analysis.agreement.max_instances=6",
        "analysis.agreement.ig_steps=4",
        "logger=csv",
        f"hydra.run.dir={run_dir}",
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert code == 0, err[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary[ag("integrated_gradients", "rollout", "tau", "n")] == 6
    assert all(k.startswith("ag/") for k in json.loads((run_dir / "analysis/agreement/summary.json").read_text()))
    report_main([str(run_dir)])
    table = (run_dir / "report" / "ag_tau_synthetic_transformer_additive_softmax.md").read_text()
    assert "| raw | " in table and "| flow |" in table and "LOO |" in table.splitlines()[2]
    assert "Neely et al. 2022, SST-2, DistilBERT" in (run_dir / "report" / "ag_references.md").read_text()
    assert torch.isfinite(torch.tensor(summary[ag("raw", "rollout", "tau", "mean")]))
    assert (run_dir / "analysis" / "agreement" / "tau_matrix.png").is_file()


def test_the_figures_matrix_is_each_pairs_mean_tau_over_the_instances_where_it_is_defined():
    """Symmetric, 1 on the diagonal, in the table's order of methods; NaN instances left out and not counted."""
    frame = pd.DataFrame(
        {
            "tau_attention__gradient": [0.5, 0.1, np.nan],
            "tau_attention__loo": [-1.0, -0.5, 0.0],
            "tau_gradient__loo": [np.nan, np.nan, np.nan],
        }
    )
    methods, means, counts = tau_matrix(frame, ["loo", "gradient", "attention"])
    assert methods == ["attention", "gradient", "loo"]
    np.testing.assert_allclose(means, [[1, 0.3, -0.5], [0.3, 1, np.nan], [-0.5, np.nan, 1]])
    assert counts.tolist() == [[0, 2, 3], [2, 0, 0], [3, 0, 0]]


def test_the_heatmap_names_its_methods_and_prints_each_pairs_mean_and_count_or_a_dash(monkeypatch, tmp_path):
    """Off the diagonal, each cell's text is its mean τ and the instances behind it (a dash where none is defined),
    at (column, row); the axes are labelled with the methods' short names in the table's order."""
    from attn_study.families.agreement import figures

    frame = pd.DataFrame(
        {
            "tau_attention__gradient": [0.5, 0.1, np.nan],
            "tau_attention__loo": [-1.0, -0.5, 0.0],
            "tau_gradient__loo": [np.nan, np.nan, np.nan],
        }
    )
    kept = {}

    def keep(fig, path):  # save_png clears the figure: look at it before
        (ax, _colorbar) = fig.axes
        kept["x"] = [t.get_text() for t in ax.get_xticklabels()]
        kept["y"] = [t.get_text() for t in ax.get_yticklabels()]
        kept["cells"] = {tuple(int(c) for c in t.get_position()): t.get_text() for t in ax.texts}
        return path

    monkeypatch.setattr(figures, "save_png", keep)
    figures.tau_matrix_figure(frame, ["loo", "gradient", "attention"], tmp_path / "tau.png", "run")
    assert kept["x"] == kept["y"] == ["attention α", "gradient", "LOO"]
    # means by hand: (0.5 + 0.1) / 2 over 2 instances, (−1 − 0.5 + 0) / 3 over 3, none for gradient–LOO
    assert kept["cells"] == {
        (1, 0): "0.30\nn=2",
        (0, 1): "0.30\nn=2",
        (2, 0): "-0.50\nn=3",
        (0, 2): "-0.50\nn=3",
        (2, 1): "—",
        (1, 2): "—",
    }


def test_each_matrix_is_named_by_its_dataset_and_model():
    taken = set()
    assert report.table_stem("sst", "lstm + additive (softmax)", taken) == "ag_tau_sst_lstm_additive_softmax"
    assert report.table_stem("sst", "lstm + additive (softmax)", taken) == "ag_tau_sst_lstm_additive_softmax_2"


def test_the_explorers_first_columns_are_the_headline_pairs_named_as_the_page_names_their_methods():
    """Each headline τ's per-instance column, headed by its two methods in the pair's (alphabetical) order, each by
    the name the explorer gives its scores (leave-one-out's is ``loo Δp``; attention and rollout, which have no
    other, by their own)."""
    assert INSTANCE_HEADLINE == {
        "tau_attention__gradient": "τ(attention, gradient)",
        "tau_attention__integrated_gradients": "τ(attention, integrated_gradients)",
        "tau_attention__loo": "τ(attention, loo Δp)",
        "tau_loo__rollout": "τ(loo Δp, rollout)",
    }


def test_the_report_reads_pairs_in_either_order_of_their_methods():
    """A run made before the keys' order was alphabetical has ag/rollout/loo/…: its pair is in the table all the
    same, as (loo, rollout)."""
    from pathlib import Path

    from attn_study.report.runs import Run

    config = {"dataset": "sst", "encoder": "lstm", "attention": "additive", "projection": "softmax", "seed": 13}
    stats = {"mean": 0.2, "ci_low": 0.1, "ci_high": 0.3, "n": 10}
    old = {ag("n_instances"): 10, **{ag("rollout", "loo", "tau", k): v for k, v in stats.items()}}
    new = {ag("n_instances"): 10, **{ag("attention", "loo", "tau", k): v for k, v in stats.items()}}
    runs = [Run(Path(name), "complete", config=config, summary=s) for name, s in (("old", old), ("new", new))]
    frame = report.table(runs)
    assert frame[["a", "b", "mean", "n"]].values.tolist() == [
        ["loo", "rollout", 0.2, 10],
        ["attention", "loo", 0.2, 10],
    ]


def test_each_matrix_file_holds_its_own_dataset_and_models_rows_as_the_table_has_them(tmp_path):
    """Two datasets, one run each: ``ag_tau_<dataset>_<model>.csv`` is that run's rows of :func:`report.table`, its
    columns and nothing else (no row number of the whole table)."""
    from pathlib import Path

    from attn_study.report.runs import Run

    def run(dataset, a, b, stats):
        config = {"dataset": dataset, "encoder": "lstm", "attention": "additive", "projection": "softmax", "seed": 13}
        summary = {ag("n_instances"): stats["n"], **{tau_key(a, b, k): v for k, v in stats.items()}}
        return Run(Path(dataset), "complete", config=config, summary=summary)

    imdb = run("imdb", "attention", "loo", {"mean": 0.2, "ci_low": 0.1, "ci_high": 0.3, "n": 10})
    sst = run("sst", "gradient", "attention", {"mean": 0.4, "ci_low": 0.3, "ci_high": 0.5, "n": 8})
    report.sections([imdb, sst], tmp_path)
    model = "lstm + additive (softmax)"
    columns = ["dataset", "model", "seed", "a", "b", "mean", "ci_low", "ci_high", "n"]
    for stem, row in (
        ("ag_tau_imdb_lstm_additive_softmax", ["imdb", model, 13, "attention", "loo", 0.2, 0.1, 0.3, 10]),
        ("ag_tau_sst_lstm_additive_softmax", ["sst", model, 13, "attention", "gradient", 0.4, 0.3, 0.5, 8]),
    ):
        written = pd.read_csv(tmp_path / f"{stem}.csv")
        assert list(written.columns) == columns and written.values.tolist() == [row]


# -- near-ties snapped before τ, and τ against scipy (issue 41) ---------------------------------------------------


def test_a_repeated_words_near_tie_gives_scipys_tau_of_the_exact_tie(monkeypatch):
    """Two methods' scores set by hand, the first with a repeated word whose two scores differ by rounding noise
    (1e-13, 1e-12: far below 1e-9 of the row's largest): τ is scipy's Kendall τ-b of the exactly tied scores —
    not that of the unsnapped ones, which differs (the pair counts as concordant instead of tied)."""
    from scipy import stats

    from attn_study.analysis.importance import METHODS

    near = torch.tensor([[0.25, 1.0, 0.25 + 1e-13, 0.5], [2.0, 2.0 - 1e-12, 1.0, 4.0]], dtype=torch.float64)
    exact = torch.tensor([[0.25, 1.0, 0.25, 0.5], [2.0, 2.0, 1.0, 4.0]], dtype=torch.float64)
    other = torch.tensor([[0.1, 0.4, 0.3, 0.2], [0.7, 0.9, 0.2, 0.1]], dtype=torch.float64)
    monkeypatch.setitem(METHODS, "gradient", Given("gradient", lambda m, batch, *a: (near[batch["index"]], {})))
    monkeypatch.setitem(METHODS, "loo", Given("loo", lambda m, batch, *a: (other[batch["index"]], {})))
    model = tiny_model(partial(AverageEncoder, hidden_size=4), double=True)
    batch = token_batch([[4, 5, 6, 7], [8, 9, 10, 11]])
    result, summary = measured(Agreement(methods=["gradient", "loo"]), model, batch)
    expected = [stats.kendalltau(exact[r], other[r]).statistic for r in range(2)]
    unsnapped = [stats.kendalltau(near[r], other[r]).statistic for r in range(2)]
    assert all(abs(e - u) > 0.05 for e, u in zip(expected, unsnapped))  # the tie matters
    np.testing.assert_allclose(result.frame[pair_column("gradient", "loo")], expected, atol=1e-12)
    assert summary[ag("gradient", "loo", "tau", "mean")] == pytest.approx(np.mean(expected), abs=1e-12)


def test_texts_under_two_tokens_are_counted_as_too_short_and_left_out_of_every_pair():
    """Lengths 1, 2, 4: one text is too short (a single token has no ranking); the two-token text counts. τ of the
    one-token text is undefined (left out: n = 2)."""
    model = tiny_model(partial(AverageEncoder, hidden_size=4), double=True)
    batch = token_batch([[4], [5, 6], [7, 8, 9, 10]])
    _, summary = measured(Agreement(methods=["attention", "loo"]), model, batch)
    assert summary[ag("n_instances")] == 3 and summary[ag("dropped", "too_short")] == 1
    assert summary[ag("attention", "loo", "tau", "n")] == 2


def test_scores_that_vanish_are_counted_as_constant():
    """A decoder that ignores its input (output weights 0): every gradient and deletion is 0 on every token, so
    each text of two tokens or more (here 3 of 4) has constant gradient and loo scores — counted as such, not as
    too short —, and their pairs have no defined τ; the attention (a learnt scorer's) is not constant."""
    model = tiny_model(double=True)
    model.output.weight.zero_()
    batch = token_batch([[4], [5, 6], [7, 8, 9, 10], [11, 12, 13]])
    _, summary = measured(Agreement(methods=["attention", "gradient", "loo"]), model, batch)
    assert summary[ag("gradient", "constant_scores")] == 3 and summary[ag("loo", "constant_scores")] == 3
    assert summary[ag("attention", "constant_scores")] == 0 and summary[ag("dropped", "too_short")] == 1
    assert summary[ag("attention", "gradient", "tau", "n")] == 0
