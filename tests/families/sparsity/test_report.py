"""The sparsity family's report figures: what each mark of Meister et al.'s Fig 1 stands for."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from attn_study import layout
from attn_study.families.sparsity import report
from attn_study.families.sparsity.keys import sp
from attn_study.report.runs import Run
from tests.helpers import drawn_boxes

INPUT_FI, INTERMEDIATE_FI = "#1f77b4", "#d95f02"  # Fig 1's colours: τ(α, g_ŷ(x)), τ(α, g_ŷ(h))


def sparsity_run(root: Path, seed: int, tau_input: list[float], tau_intermediate: list[float]) -> Run:
    path = root / f"sst-lstm-{seed}"
    folder = path / layout.ANALYSIS / "sparsity"
    folder.mkdir(parents=True)
    instances = pd.DataFrame({"tau_attn_g_input": tau_input, "tau_attn_g_intermediate": tau_intermediate})
    instances.to_parquet(folder / layout.INSTANCES)
    config = {"dataset": "sst", "model": "flat", "encoder": "lstm", "attention": "additive"}
    config.update(projection="softmax", seed=seed, variant="")
    return Run(path=path, state="complete", config=config, summary={sp("n_instances"): len(tau_input)})


def test_fig1_draws_each_runs_two_boxes_side_by_side_each_over_its_own_taus(tmp_path, monkeypatch):
    """Each run is a tick; its input-FI box sits 0.18 left of it, its intermediate-FI box 0.18 right, each box
    0.32 wide (the two do not overlap) and spanning the quartiles of that measure's τ over the instances (linear
    quartiles, worked out by hand)."""
    drawn = drawn_boxes(monkeypatch, report)
    runs = [
        sparsity_run(tmp_path, 2, [0.6, 0.7, 0.8], [0.0, 0.1, 0.2]),
        sparsity_run(tmp_path, 1, [0.1, 0.2, 0.3, 0.4, 0.5], [-0.5, -0.4, -0.3, -0.2, -0.1]),
    ]
    report.correlation_figure(runs, tmp_path / "fig1.png")
    expected = [  # colour, centre, width, first quartile, third quartile: seed 1 at tick 0, seed 2 at tick 1
        (INPUT_FI, -0.18, 0.32, 0.2, 0.4),
        (INPUT_FI, 0.82, 0.32, 0.65, 0.75),
        (INTERMEDIATE_FI, 0.18, 0.32, -0.4, -0.2),
        (INTERMEDIATE_FI, 1.18, 0.32, 0.05, 0.15),
    ]
    assert len(drawn) == len(expected)
    for (colour, *box), want in zip(drawn, expected):
        assert colour == want[0]
        assert box == pytest.approx(want[1:])
