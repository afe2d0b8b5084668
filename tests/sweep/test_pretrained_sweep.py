"""``sweep=pretrained`` end to end on a tiny checkpoint written by the test (tests/hf_checkpoints.py) and the synthetic
data: an attention arm and the [CLS] arm trained and analysed by the families the sweep names, then the report —
their table beside each other, the scorecard's line that no paper has their cells, the explorer at the word level.
The issue's check: the attention arm's summary holds the keys of jain_wallace, serrano_smith, sparsity,
faithfulness, agreement (and sanity)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from attn_study.cli import CONFIG_DIR
from attn_study.report.cli import main as report_main
from attn_study.sweep.record import expand_grid
from tests.helpers import compose_config, launch_here
from tests.hf_checkpoints import save_checkpoint

pytest.importorskip("transformers")

#: the families of each arm and a key each writes
KEYS = {
    "jain_wallace": "jw/tau_grad/mean",
    "serrano_smith": "ss/n_instances",
    "sparsity": "sp/support/frac/mean",
    "faithfulness": "ff/gradient/comprehensiveness/aopc/mean",
    "agreement": "ag/n_instances",
    "sanity": "sn/gradient/embeddings/spearman_magnitude/mean",
}
SMALL = [
    "dataset=synthetic",
    "seed=13",
    "trainer=debug",
    "trainer.max_epochs=1",
    "logger=[csv]",
    "dataset.source.n_train=32",
    "dataset.source.n_dev=8",
    "dataset.source.n_test=8",
    "analysis.jain_wallace.steps=5",
    "analysis.jain_wallace.permutations=5",
    "analysis.jain_wallace.adversaries=2",
    "analysis.faithfulness.ig_steps=2",
    "analysis.agreement.ig_steps=2",
    "analysis.sanity.ig_steps=2",
]


def test_the_sweep_file_names_its_grid():
    """7 J&W classification datasets × 3 projections of additive attention and [CLS] × 3 seeds."""
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("config", overrides=["sweep=pretrained"], return_hydra_config=True)
    params = dict(cfg.hydra.sweeper.params)
    assert len(expand_grid(params, ["sweep=pretrained"])) == 7 * 4 * 3
    assert cfg.encoder.name == "pretrained" and cfg.trainer.max_epochs == 3 and cfg.model.optimizer.amsgrad is False
    from attn_study.job.components import build_analyses

    cls = compose_config("sweep=pretrained", "experiment=pretrained/cls")
    chosen = [family.name for family in build_analyses(cls)]
    assert cls.attention.name == "cls" and chosen == ["jain_wallace", "faithfulness", "agreement", "sanity"]
    arm = compose_config("sweep=pretrained", "experiment=pretrained/attention_entmax15")
    assert (arm.attention.name, arm.projection.name) == ("additive", "entmax15")
    assert [family.name for family in build_analyses(arm)] == list(KEYS)


def test_a_tiny_checkpoint_through_the_sweep_and_the_report(tmp_path, monkeypatch, capsys):
    folder = save_checkpoint(tmp_path / "bert", head=False, pieces=True)
    sweep = tmp_path / "sweep"
    code, stdout, stderr = launch_here(
        sweep,
        "sweep=pretrained",
        f"encoder.path={folder}",
        "experiment=pretrained/attention_softmax,pretrained/cls",
        *SMALL,
        monkeypatch=monkeypatch,
        capsys=capsys,
    )
    assert code == 0, stderr[-3000:]
    assert "2 jobs: 2 ran" in stdout
    summaries = {
        d.name.split("experiment=pretrained_")[1].split(",")[0]: json.loads((d / "summary.json").read_text())
        for d in sweep.iterdir()
        if (d / "summary.json").is_file()
    }
    attention, cls = summaries["attention_softmax"], summaries["cls"]
    assert all(key in attention for key in KEYS.values()), [k for k in KEYS.values() if k not in attention]
    assert "ff/rollout/comprehensiveness/aopc/mean" in cls and "jw/tau_grad/mean" in cls
    assert not any(key.startswith(("ss/", "sp/", "jw/perm", "ff/attention/")) for key in cls)
    report_main([str(sweep)])
    report = sweep / "report"
    table = pd.read_csv(report / "pretrained_synthetic.csv").set_index("statistic")
    assert list(table.columns) == ["pretrained + additive (softmax)", "pretrained + cls (softmax)"]
    assert table.loc["test/acc", "pretrained + cls (softmax)"] == f"{cls['test/acc']:.3f} (1)"
    assert table.loc["jw/tau_grad/mean", "pretrained + cls (softmax)"].endswith("(1) [attention_scores=rollout]")
    lines = (report / "scorecard_summary.txt").read_text()
    assert "Pretrained encoders: 2 runs of encoder=pretrained, not comparable: no paper reports" in lines
    page = (report / "index.html").read_text()
    assert "<b>Not comparable with any paper</b>" in page and "href='#pretrained-encoders'" in page
    explorers = sorted((report / "explorer").glob("*attention_softmax*.html"))
    assert explorers and '"word_rules":["sum","max","first"]' in explorers[0].read_text()
