"""The report of pretrained encoders (report/pretrained.py) on runs written by hand: each model's statistics, mean ±
std over its seeds by hand, the pretrained columns first and beside a seeds' model on the same data, the scorecard's
line, nothing for runs without a pretrained encoder."""

from __future__ import annotations

import pandas as pd

from attn_study.report import pretrained
from attn_study.report.cli import build_report
from attn_study.report.runs import collect
from tests.report.test_report import make_run


def runs(root):
    for seed, (bert, lstm) in enumerate(((0.2, 0.5), (0.4, 0.5), (0.6, None))):
        make_run(
            root, f"bert-{seed}", dataset="sst", encoder="pretrained", seed=seed, summary={"jw/tau_grad/mean": bert}
        )
        if lstm is not None:
            make_run(root, f"lstm-{seed}", dataset="sst", encoder="lstm", seed=seed, summary={"jw/tau_grad/mean": lstm})
    make_run(root, "other", dataset="imdb", encoder="lstm", summary={"jw/tau_grad/mean": 0.1})
    return collect(root)[0]


def test_each_model_over_its_seeds_the_pretrained_first(tmp_path):
    """τ of the pretrained model over three seeds: 0.2, 0.4, 0.6 → mean 0.4, std (n − 1) 0.2; the BiLSTM: 0.5, 0.5."""
    found = runs(tmp_path)
    table = pretrained.dataset_table([r for r in found if r.config["dataset"] == "sst"]).set_index("statistic")
    assert list(table.columns) == ["pretrained + additive (softmax)", "lstm + additive (softmax)"]
    assert table.loc["jw/tau_grad/mean"].tolist() == ["0.400 ± 0.200 (3)", "0.500 ± 0.000 (2)"]
    assert list(table.index) == ["jw/tau_grad/mean"]  # what no pretrained run holds (test/acc) is left out
    line = pretrained.scorecard_line(found)
    assert line.startswith("Pretrained encoders: 3 runs of encoder=pretrained, not comparable: no paper reports")
    assert pretrained.scorecard_line([r for r in found if r.config["encoder"] == "lstm"]) is None


def test_the_report_tables_them_per_dataset_and_says_they_are_not_comparable(tmp_path):
    runs(tmp_path / "runs")
    out = build_report(tmp_path / "runs", include_all=True)
    assert (out / "pretrained_sst.csv").is_file() and not (out / "pretrained_imdb.csv").exists()
    frame = pd.read_csv(out / "pretrained_sst.csv")
    assert frame.loc[0, "pretrained + additive (softmax)"] == "0.400 ± 0.200 (3)"
    assert "not comparable with any paper's number" in (out / "pretrained_sst.md").read_text()
    assert "Pretrained encoders: 3 runs of encoder=pretrained" in (out / "scorecard_summary.txt").read_text()
