"""The reproduction scorecard's rule, on runs whose numbers are set by hand against a published number
(Jain & Wallace Table 1: SST BiLSTM F1 0.81; Table 2: τ_g of class 1)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from attn_study.io import write_json_atomic
from attn_study.report.cli import build_report
from attn_study.report.runs import Run
from attn_study.report.scorecard import departures, references, rounding, scorecard, verdict

SETTING = {
    "dataset": "sst",
    "model": "flat",
    "encoder": "lstm",
    "attention": "additive",
    "projection": "softmax",
    "recipe": "jain_wallace",
    "embeddings": "glove.6B.50d.txt.gz",
    "lam": None,
}


def runs(values, key="test/f1", recipe="jain_wallace", **extra):
    return [
        Run(
            Path(f"/r{i}"),
            "complete",
            config={**SETTING, "recipe": recipe, "seed": 13 + i},
            summary={key: v, **{k: v2[i] for k, v2 in extra.items()}},
        )
        for i, v in enumerate(values)
    ]


def cell(frame, source="Table 1", statistic="f1"):
    row = frame[(frame.source == source) & (frame.statistic == statistic)]
    assert len(row) == 1, frame[["source", "statistic", "setting"]]
    return row.iloc[0]


def test_the_reference_number_is_there():
    table = references()
    row = table[
        (table.paper == "jain_wallace")
        & (table.source == "Table 1")
        & (table.dataset == "sst")
        & (table.key == "test/f1")
    ]
    assert row.value.tolist() == ["0.81"]


def test_rounding_is_half_the_last_printed_digit():
    assert rounding("0.81") == pytest.approx(0.005) and rounding("12") == 0.5 and rounding("0.405") == 0.0005


def test_three_seeds_around_the_paper_reproduce_it_and_three_far_below_do_not():
    near = cell(scorecard(runs([0.80, 0.81, 0.82])))
    assert near["verdict"] == "reproduced" and near["n seeds"] == 3
    assert near["ours"] == pytest.approx(0.81) and near["seed std"] == pytest.approx(0.01)
    assert near["paper value"] == "0.81" and near["embeddings"] == "glove.6B.50d.txt.gz"
    # band 2·0.001 + 0.005 (rounding): 0.79 is outside, 0.807 inside
    assert cell(scorecard(runs([0.789, 0.790, 0.791])))["verdict"] == "not reproduced (ours lower)"
    assert cell(scorecard(runs([0.806, 0.807, 0.808])))["verdict"] == "reproduced"
    assert cell(scorecard(runs([0.90, 0.91, 0.92])))["verdict"] == "not reproduced (ours higher)"


def test_one_seed_is_never_reproduced_and_another_recipe_is_not_comparable():
    assert cell(scorecard(runs([0.81])))["verdict"] == "1 seed: no interval"
    assert cell(scorecard(runs([0.81, 0.81], recipe=None)))["verdict"].startswith("not comparable: no recipe")


def test_random_embeddings_are_not_comparable_with_the_papers_pretrained_ones():
    random_ = runs([0.81, 0.81, 0.81])
    for run in random_:
        run.config["embeddings"] = "random"
    assert cell(scorecard(random_))["verdict"] == "not comparable: random embeddings (paper's: pretrained fastText)"
    assert cell(scorecard(runs([0.81, 0.81, 0.81])))["verdict"] == "reproduced"


def test_runs_at_other_settings_are_left_out_beside_runs_at_the_papers():
    mixed = runs([0.81, 0.50, 0.81, 0.40])
    mixed[1].config["embeddings"] = "random"
    mixed[3].config["overrides"] = ["dataset=sst", "trainer.max_epochs=1"]
    found = cell(scorecard(mixed))
    assert found["n seeds"] == 2 and found["ours"] == pytest.approx(0.81)  # 0.50 and 0.40 are not in it
    assert found["verdict"] == (
        "reproduced; 2 runs at other settings left out "
        "(random embeddings (paper's: pretrained fastText); trainer.max_epochs=1)"
    )


def test_a_family_measured_on_a_sample_is_compared_and_its_verdict_names_the_sample():
    """A seeded uniform sample of the test split estimates the same mean, with a wider interval: the cell is
    judged, and says which sample and in how many runs; a sample another family took is not named."""
    sampled = runs([0.39, 0.40, 0.41], key="jw/tau_grad/class_0/mean")
    sampled[0].config["overrides"] = ["analysis.jain_wallace.max_instances=500"]
    sampled[1].config["overrides"] = ["analysis.jain_wallace.max_instances=1000", "analysis.sparsity.max_instances=9"]
    sampled[2].config["overrides"] = ["analysis.sparsity.max_instances=9"]
    found = cell(scorecard(sampled), source="Table 2", statistic="mean")
    assert found["verdict"] == "reproduced; measured on a seeded sample of 500/1000 instances in 2 of 3 runs"
    assert found["n seeds"] == 3
    whole = runs([0.39, 0.40, 0.41], key="jw/tau_grad/class_0/mean", **{"jw/n_instances": [300, 300, 300]})
    assert cell(scorecard(whole), "Table 2", "mean")["verdict"] == "reproduced"
    # no sample: max_instances=null, or more than the split held (all 300 analysed)
    whole[0].config["overrides"] = ["analysis.jain_wallace.max_instances=null"]
    whole[1].config["overrides"] = ["analysis.jain_wallace.max_instances=500"]
    assert cell(scorecard(whole), "Table 2", "mean")["verdict"] == "reproduced"
    whole[2].config["overrides"] = ["analysis.jain_wallace.max_instances=300"]  # as many as it analysed: a sample
    assert cell(scorecard(whole), "Table 2", "mean")["verdict"].endswith("sample of 300 instances in 1 of 3 runs")


def test_every_familys_sample_counts_unless_the_familys_own_option_says_otherwise():
    """``analysis_max_instances=N`` samples every family (conf/analysis/_common.yaml), as a family's own option does;
    the family's own option wins (null: the whole split)."""
    sampled = runs([0.39, 0.40, 0.41], key="jw/tau_grad/class_0/mean", **{"jw/n_instances": [300, 300, 300]})
    sampled[0].config["overrides"] = ["analysis_max_instances=200"]
    sampled[1].config["overrides"] = ["analysis_max_instances=200", "analysis.jain_wallace.max_instances=null"]
    sampled[2].config["overrides"] = ["analysis_max_instances=100", "analysis.jain_wallace.max_instances=250"]
    found = cell(scorecard(sampled), source="Table 2", statistic="mean")
    assert found["verdict"] == "reproduced; measured on a seeded sample of 200/250 instances in 2 of 3 runs"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({}, []),
        (  # where files go, loggers, threads, devices, batch sizes and the setting's own choices
            {
                "overrides": [
                    "dataset=sst",
                    "encoder=lstm",
                    "seed=14",
                    "dataset.path=/data/sst",
                    "model.embeddings.path=/v/glove.txt.gz",
                    "model.network.embedding_dim=50",
                    "threads=1",
                    "logger=csv",
                    "hydra/launcher=joblib",
                    "hydra.launcher.n_jobs=2",
                    "trainer=gpu",
                    "analysis.jain_wallace.batch_size=64",
                    "analysis.jain_wallace.internal_batch_size=128",
                    "sweep=jain_wallace",
                ]
            },
            [],
        ),
        ({"overrides": ["trainer=debug"]}, ["trainer=debug"]),
        ({"overrides": ["+trainer.max_epochs=2"]}, ["+trainer.max_epochs=2"]),
        ({"overrides": ["analysis.jain_wallace.max_instances=500"]}, []),  # a sample: compared, and named
        ({"overrides": ["analysis_max_instances=500"]}, []),  # every family's sample: the same
        ({"overrides": ["training.select_from_epoch=0"]}, ["training.select_from_epoch=0"]),
        ({"overrides": ["dataset.source.split=default"]}, ["dataset.source.split=default"]),
        ({"sweep": "smoke_meister"}, ["smoke sweep smoke_meister"]),
        ({"sweep": "mohankumar"}, []),  # its BiLSTM is Jain & Wallace's
        ({"overrides": ["experiment=meister_bilstm"]}, []),
        ({"overrides": ["experiment=wiegreffe_pinter/base"]}, ["experiment=wiegreffe_pinter/base"]),
        ({"training": "random_attention_pretraining"}, ["training random_attention_pretraining"]),
        ({"shuffle_labels": True}, ["shuffled labels"]),
        ({"markers": 2}, ["marker tokens injected"]),
        ({"roar": "roar ig k=0.2"}, ["masked data (ROAR)"]),
        ({"recipe": None}, ["no recipe (paper's: jain_wallace)"]),
    ],
)
def test_what_departs_from_the_papers_settings(change, expected):
    (run,) = runs([0.81])
    run.config.update(change)
    assert departures(run, "jain_wallace", "sst") == expected


def test_the_papers_vectors_are_named_per_dataset():
    (run,) = runs([0.8])
    run.config["embeddings"] = "random"
    assert departures(run, "jain_wallace", "snli") == ["random embeddings (paper's: pretrained GloVe 840B)"]
    assert departures(run, "jain_wallace", "imdb") == ["random embeddings (paper's: pretrained fastText)"]
    assert departures(run, "jain_wallace", "babi2") == []  # their bAbI models started from random vectors too


def test_data_that_is_only_the_nearest_to_the_papers_is_not_comparable():
    (run,) = runs([0.5], recipe="serrano_smith")
    run.config.update(dataset="imdb_rating", model="han", encoder="gru")
    assert departures(run, "serrano_smith", "imdb_rating") == [
        "other data: aclImdb's 8 ratings (paper's: Diao et al.'s 10-class IMDB)"
    ]
    assert departures(run, "serrano_smith", "yelp") == []


def test_the_report_reads_each_runs_recorded_overrides(tmp_path):
    """Run directories as the CLI writes them (``.hydra/config.yaml`` and ``overrides.yaml``): the scorecard's
    files and its HTML section, one seed trained for a single epoch left out of the cell."""
    for i, (f1, extra) in enumerate([(0.80, []), (0.82, []), (0.55, ["trainer.max_epochs=1"])]):
        run = tmp_path / f"sweep/run{i}"
        (run / ".hydra").mkdir(parents=True)
        config = {k: {"name": SETTING[k]} for k in ("dataset", "model", "encoder", "attention", "projection")}
        config |= {
            "seed": 13 + i,
            "recipe": {"name": "jain_wallace"},
            "model": {"name": "flat", "embeddings": {"path": "/v/glove.6B.50d.txt.gz"}},
            "analysis": {"jain_wallace": {}},
        }
        OmegaConf.save(OmegaConf.create(config), run / ".hydra" / "config.yaml")
        OmegaConf.save(
            OmegaConf.create(["dataset=sst", f"seed={13 + i}", "logger=csv", *extra]), run / ".hydra/overrides.yaml"
        )
        write_json_atomic(run / "status.json", {"state": "complete", "finished": 1.0e9 + i})
        write_json_atomic(run / "summary.json", {"test/f1": f1, "test/acc": f1})
    out = build_report(tmp_path / "sweep")
    table = pd.read_csv(out / "scorecard.csv")
    row = table[(table["source"] == "Table 1") & (table["key"] == "test/f1")].iloc[0]
    assert row["n seeds"] == 2 and row["ours"] == pytest.approx(0.81) and row["paper value"] == 0.81
    assert row["verdict"] == "reproduced; 1 run at other settings left out (trainer.max_epochs=1)"
    assert "trainer.max_epochs=1" in (out / "scorecard.md").read_text()
    assert "Paper vs this project" in (out / "index.html").read_text()


def test_the_bootstrap_interval_widens_the_band():
    key, row = TAU_G, tau_g_row()
    paper = float(row.value)
    lows, highs = [paper - 0.02] * 3, [paper + 0.08] * 3
    frame = scorecard(runs([paper + 0.03] * 3, key=key, **{key[:-4] + "ci_low": lows, key[:-4] + "ci_high": highs}))
    found = frame[frame.source == row.source]
    assert found["verdict"].tolist() == ["reproduced"]  # |0.03| <= 0 + 0.05 + rounding
    one = scorecard(runs([paper + 0.03], key=key, **{key[:-4] + "ci_low": lows, key[:-4] + "ci_high": highs}))
    assert one[one.source == row.source]["verdict"].tolist() == ["1 seed: the paper's value inside our interval"]
    assert (
        verdict(
            paper,
            row.value,
            {"n seeds": 3, "ours": paper + 0.2, "seed std": 0.0, "ci low": paper + 0.19, "ci high": paper + 0.21},
        )
        == "not reproduced (ours higher)"
    )


def test_a_transformer_whose_heads_take_the_models_projection_is_judged_by_it():
    """``encoder.self_attention=pooling`` (Meister's Transformer) is the run's projection as a setting: a sparsemax
    run's heads are sparsemax; a run made before the option existed had softmax heads."""
    from attn_study.report.scorecard import setting_value

    (run,) = runs([0.8])
    run.config.update(encoder="transformer", projection="sparsemax")
    assert setting_value(run, "encoder.self_attention") == "softmax"
    run.settings["encoder/self_attention"] = "pooling"
    assert setting_value(run, "encoder.self_attention") == "sparsemax"
    run.settings["encoder/self_attention"] = "entmax15"
    assert setting_value(run, "encoder.self_attention") == "entmax15"


# ------------------------------------------------------------------------------------------------
# issue 41 (tests helper): the band's factors, each on a cell that only the right factor classifies right
# ------------------------------------------------------------------------------------------------

TAU_G = "jw/tau_grad/class_1/mean"


def tau_g_row():
    """The reference row of Jain & Wallace's mean τ_g of class 1 for the SST BiLSTM (a key with an interval)."""
    table = references()
    return table[
        (table.paper == "jain_wallace")
        & (table.key == TAU_G)
        & (table.dataset == "sst")
        & (table.encoder == "lstm")
        & (table.statistic == "mean")
    ].iloc[0]


def test_the_band_is_two_seed_stds_a_cell_between_s_plus_r_and_2s_plus_r_is_reproduced():
    """Seeds 0.825, 0.845, 0.865: mean 0.845, s = 0.02 (n − 1 in the denominator), no interval (h = 0); the paper's
    0.81 (r = 0.005) is |Δ| = 0.035 away: beyond s + r = 0.025, within 2s + r = 0.045 — reproduced. At 0.795 and
    0.775 seeds' mean (|Δ| = 0.05 > 0.045) it is not."""
    found = cell(scorecard(runs([0.825, 0.845, 0.865])))
    assert found["seed std"] == pytest.approx(0.02) and found["ours"] == pytest.approx(0.845)
    assert found["verdict"] == "reproduced"
    assert cell(scorecard(runs([0.74, 0.76, 0.78])))["verdict"] == "not reproduced (ours lower)"
    hand = {"n seeds": 3, "ours": 0.845, "seed std": 0.02, "ci low": float("nan"), "ci high": float("nan")}
    assert verdict(0.81, "0.81", hand) == "reproduced"
    assert verdict(0.81, "0.81", {**hand, "ours": 0.86}) == "not reproduced (ours higher)"


def test_the_band_takes_half_the_intervals_width_a_cell_between_h_plus_r_and_2h_plus_r_is_not_reproduced():
    """Seeds that agree (s = 0), the interval [0.825, 0.865]: h = 0.02; the paper's 0.81 (r = 0.005) at |Δ| = 0.035 is
    beyond h + r = 0.025 — not reproduced — though within the full width + r = 0.045; at |Δ| = 0.02 it is. The same
    through the scorecard on Jain & Wallace's τ_g (a key with an interval): ours 0.035 above the paper's value."""
    hand = {"n seeds": 3, "ours": 0.845, "seed std": 0.0, "ci low": 0.825, "ci high": 0.865}
    assert verdict(0.81, "0.81", hand) == "not reproduced (ours higher)"
    assert verdict(0.81, "0.81", {**hand, "ours": 0.83, "ci low": 0.81, "ci high": 0.85}) == "reproduced"
    key, row = TAU_G, tau_g_row()
    paper, r = float(row.value), rounding(row.value)
    assert r <= 0.005
    stem = key[: -len("mean")]
    interval = {stem + "ci_low": [paper + 0.015] * 3, stem + "ci_high": [paper + 0.055] * 3}
    found = scorecard(runs([paper + 0.035] * 3, key=key, **interval))
    assert found[found.source == row.source]["verdict"].tolist() == ["not reproduced (ours higher)"]
    interval = {stem + "ci_low": [paper] * 3, stem + "ci_high": [paper + 0.04] * 3}
    found = scorecard(runs([paper + 0.02] * 3, key=key, **interval))
    assert found[found.source == row.source]["verdict"].tolist() == ["reproduced"]


def test_meisters_table2_cell_is_the_tau_per_seed_of_the_complete_runs_of_its_model():
    """Meister et al.'s Table 2 (SST, BiLSTM): Kendall τ-b between sparsegen's λ (sparsemax: 0) and the run's mean
    H̃(g_ŷ(x)), per seed. Two seeds whose entropies fall as λ grows: τ = −1 each, so ours −1 from 2 seeds, std 0.
    A run still running and a CNN's run, whose entropies would break the order, are not in it."""

    def point(seed, projection, lam, entropy, encoder="lstm", state="complete"):
        config = {**SETTING, "projection": projection, "lam": lam, "seed": seed, "encoder": encoder}
        summary = {"sp/n_instances": 50, "sp/entropy/g_input/mean": entropy}
        return Run(Path(f"/m/{seed}/{projection}{lam}{encoder}{state}"), state, config=config, summary=summary)

    points = [
        point(seed, projection, lam, entropy - 0.01 * (seed - 13))
        for seed in (13, 14)
        for projection, lam, entropy in (("sparsemax", None, 0.9), ("sparsegen", 0.5, 0.7), ("sparsegen", 2.0, 0.4))
    ]
    points += [point(13, "sparsegen", 1.0, 0.95, state="running"), point(14, "sparsegen", 1.0, 0.99, encoder="cnn")]
    frame = scorecard(points)
    found = frame[(frame.paper == "meister") & (frame.source == "Table 2") & frame.setting.str.startswith("sst ")]
    assert len(found) == 1, frame[["paper", "source", "setting"]]
    row = found.iloc[0]
    assert row["ours"] == pytest.approx(-1.0) and row["n seeds"] == 2 and row["seed std"] == pytest.approx(0.0)
    assert row["paper value"] == "-0.866" and row["verdict"] == "not reproduced (ours lower)"


def test_one_seeds_interval_is_widened_by_the_papers_rounding_and_a_key_without_an_interval_has_none():
    """One seed, interval [0.803, 0.827]: the paper's 0.83 (printed to 2 decimals, r = 0.005) is inside it once
    rounding is allowed (0.83 ≤ 0.832), 0.84 is not, 0.80 is (0.798 ≤ 0.80). A /mean key whose runs record no
    interval: NaN, not an error."""
    hand = {"n seeds": 1, "ours": 0.81, "seed std": math.nan, "ci low": 0.803, "ci high": 0.827}
    assert verdict(0.83, "0.83", hand) == "1 seed: the paper's value inside our interval"
    assert verdict(0.84, "0.84", hand) == "1 seed: the paper's value outside our interval"
    assert verdict(0.80, "0.80", hand) == "1 seed: the paper's value inside our interval"
    key = "jw/tau_grad/class_1/mean"
    frame = scorecard(runs([0.5, 0.52], key=key))
    row = frame[frame.key == key].iloc[0]
    assert math.isnan(row["ci low"]) and math.isnan(row["ci high"]) and row["ours"] == pytest.approx(0.51)


def test_the_coverage_says_why_for_every_outcome_but_reproduced_the_explained_included():
    """``coverage.why``: per outcome, each reason's detail with its count — an explained number's measured cause
    too (issue 59: it was left out and no test saw it)."""
    from attn_study.report.coverage import coverage
    from attn_study.report.scorecard import EXPLAINED, NOT_COMPARABLE, NOT_RUN, REPRODUCED, UNEXPLAINED

    rows = [
        (REPRODUCED, ""),
        (EXPLAINED, "measured: the vectors (docs/reproduction.md#sst)"),
        (EXPLAINED, "measured: the vectors (docs/reproduction.md#sst)"),
        (UNEXPLAINED, "no measured cause: ours higher"),
        (NOT_COMPARABLE, "settings: no recipe"),
        (NOT_RUN, "data absent: snli is not here"),
    ]
    judged = pd.DataFrame(
        [{"paper": "jain_wallace", "source": "Table 2", "dataset": "sst", "outcome": o, "reason": r} for o, r in rows]
    )
    (row,) = coverage(judged).to_dict("records")
    assert row["numbers"] == 6 and row[EXPLAINED] == 2 and row[REPRODUCED] == 1
    assert row["why"] == (
        "not reproduced (explained) — measured: the vectors (docs/reproduction.md#sst) (2)"
        " | not reproduced (unexplained) — no measured cause: ours higher"
        " | not comparable — settings: no recipe"
        " | not run — data absent: snli is not here"
    )


def test_a_paper_table_whose_every_number_is_not_comparable_is_drawn_and_summarised(tmp_path):
    """Runs without the paper's recipe: every number of J&W's Table 1 they give is "not comparable". The table is
    still one of those the runs touch — a summary line and its table on the page — never dropped, nor counted among
    the untouched."""
    from attn_study.report import paper_tables

    ours = runs([0.81, 0.82, 0.80], recipe=None)
    card = paper_tables.scorecard(ours, ours, tmp_path)
    line = next(line for line in card.lines if line.startswith("Jain & Wallace (2019), Table 1: "))
    assert " 0 reproduced, 0 not reproduced, 1 not comparable" in line, line
    assert "Wallace (2019), Table 1</h3>" in card.tables and "no recipe" in card.tables
    assert "Wallace (2019), Table 1;" not in card.untouched and "Wallace (2019), Table 2;" in card.untouched
