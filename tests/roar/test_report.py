"""The report's ROAR table and figure from runs whose numbers are set by hand: the area between a method's curve
and random's, worked out per seed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from attn_study.report import roar
from attn_study.report.runs import Run

CONFIG = {"dataset": "sst", "model": "flat", "encoder": "lstm", "attention": "additive", "projection": "softmax"}
# accuracy at k = 0, 0.2, 0.5 per (method, seed)
CURVES = {
    ("random", 1): (0.9, 0.85, 0.8),
    ("gradient", 1): (0.9, 0.6, 0.5),
    ("random", 2): (0.9, 0.8, 0.7),
    ("gradient", 2): (0.9, 0.7, 0.5),
}


def _run(method, seed, k, acc, path=Path("/nowhere"), recursive=False) -> Run:
    identity = {"roar/method": method, "roar/fraction": k, "roar/recursive": recursive, "seed": seed}
    summary = {"test/acc": acc, "test/f1": acc - 0.1}
    return Run(path, "complete", config={**CONFIG, "seed": seed}, summary=summary, identity=identity)


def _runs():
    return [
        _run(method, seed, k, acc) for (method, seed), accs in CURVES.items() for k, acc in zip((0, 0.2, 0.5), accs)
    ]


def test_the_area_between_a_methods_curve_and_randoms_is_worked_out_per_seed():
    frame = roar.table(roar.points(_runs())).set_index("method")
    # seed 1: gaps 0, .25, .3 → .2·(0 + .25)/2 + .3·(.25 + .3)/2 = .1075; seed 2: gaps 0, .1, .2 → .055
    assert frame.loc["gradient", "area vs random (accuracy)"] == pytest.approx((0.1075 + 0.055) / 2)
    assert frame.loc["gradient", "area vs random (accuracy) std"] == pytest.approx(abs(0.1075 - 0.055) / math.sqrt(2))
    assert frame.loc["gradient", "area vs random (F1)"] == pytest.approx((0.1075 + 0.055) / 2)  # F1 = acc − .1
    assert math.isnan(frame.loc["random", "area vs random (accuracy)"])
    assert frame.loc["gradient", "acc k=0.2"] == pytest.approx(0.65) and frame.loc["gradient", "seeds"] == 2
    assert frame.loc["gradient", "acc k=0.2 std"] == pytest.approx(0.1 / math.sqrt(2))


def test_a_chain_without_an_unmasked_run_starts_at_its_sources_accuracy(tmp_path):
    source = tmp_path / "base"
    source.mkdir()
    (source / "status.json").write_text(json.dumps({"state": "complete"}))
    (source / "summary.json").write_text(json.dumps({"test/acc": 0.9, "test/f1": 0.8}))
    runs = []
    for method, acc in (("random", 0.8), ("gradient", 0.6)):
        run_dir = tmp_path / method
        run_dir.mkdir()
        status = {"state": "complete", "roar": {"source": str(source), "source_fraction": 0.0}}
        (run_dir / "status.json").write_text(json.dumps(status))
        runs.append(_run(method, 1, 0.5, acc, path=run_dir))
    frame = roar.table(roar.points(runs)).set_index("method")
    assert frame.loc["gradient", "acc k=0"] == pytest.approx(0.9)
    assert frame.loc["gradient", "area vs random (accuracy)"] == pytest.approx(0.5 * (0 + 0.2) / 2)


def test_the_section_has_the_table_and_one_figure_per_model_and_variant(tmp_path):
    runs = _runs() + [_run("gradient", 1, k, 0.9 - k, recursive=True) for k in (0, 0.2)]
    ((title, body),) = roar.sections(runs, tmp_path)
    assert "ROAR" in title and body.count("<img") == 2
    assert sorted(p.name for p in tmp_path.glob("roar*")) == [
        "roar.csv",
        "roar.md",
        "roar.tex",
        "roar_1.png",
        "roar_2.png",
    ]
    assert (tmp_path / "roar.tex").read_text().isascii()
    assert roar.sections([_run("gradient", 1, 0, 0.9)][:0], tmp_path) == []
