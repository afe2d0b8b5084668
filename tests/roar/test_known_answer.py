"""ROAR's known answer on the synthetic task, whose label is decided by its rationale tokens alone: masking the
truth (the rationale) at its share leaves a retrained model at chance; masking as many tokens at random does not."""

from __future__ import annotations

import json

from attn_study.job.run import run

# sweep=smoke_roar's task, whose known answer it promises: no negation, so a bag of words reads the label from the
# sign of the 1 or 3 signal words; texts of 20–30 tokens, so the rationale is at most 3 / 20 = 15 % of an instance
# and the sweep's smallest k, 0.2, masks all of it
TASK = ["sweep=smoke_roar", "logger=none"]


def test_masking_the_truth_leaves_chance_and_masking_at_random_does_not(make_cfg, tmp_path):
    base = run(make_cfg(*TASK, "roar.fraction=0"), tmp_path / "base")
    assert base["test/acc"] > 0.9  # the unmasked model reads the task
    assert [base[f"data/masked_share/{split}"] for split in ("train", "dev", "test")] == [0.0, 0.0, 0.0]  # k = 0
    accuracy = {}
    for method in ("truth", "random"):
        cfg = make_cfg(*TASK, f"roar.method={method}", "roar.fraction=0.2", f"roar.source={tmp_path / 'base'}")
        summary = run(cfg, tmp_path / method)
        accuracy[method] = summary["test/acc"]
        assert abs(summary["data/masked_share/test"] - 0.2) < 0.02
        status = json.loads((tmp_path / method / "status.json").read_text())
        assert status["roar"]["method"] == method and status["roar"]["source"] == str((tmp_path / "base").resolve())
    # chance: 300 test instances, a class share near 1/2; the label's evidence is gone
    assert abs(accuracy["truth"] - 0.5) < 0.1, accuracy
    assert accuracy["random"] > 0.75, accuracy  # most instances keep their signal words
