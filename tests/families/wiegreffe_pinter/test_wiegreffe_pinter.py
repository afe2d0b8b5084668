"""Wiegreffe & Pinter's baselines: uniform and pre-loaded attention, the seed-variance comparison, the
model-consistent adversary, the sweep's sibling runs and the report."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from attn_study import layout
from attn_study.analysis.measuring import analysis_mode
from attn_study.errors import UserError
from attn_study.families.wiegreffe_pinter.callback import WiegreffePinter, compare
from attn_study.job import saved
from attn_study.job.plan import load_run
from attn_study.job.run import run as run_job
from attn_study.models import attention, projection
from tests.helpers import TINY, StubData, compose_config, tiny_model, token_batch

SEQS = [[5, 6, 7, 8, 9], [12, 13, 14], [15], [16, 17, 18, 19, 20, 2, 3]]


@pytest.mark.parametrize("proj", [projection.Softmax, projection.Sparsemax])
def test_uniform_attention_is_one_over_t_with_no_parameters(proj):
    model = tiny_model(scorer=attention.UniformScorer, proj=proj)
    batch = token_batch(SEQS)
    alpha = model.attend(model.encode(batch))
    expected = batch["mask"] / batch["lengths"][:, None].float()
    if proj is projection.Softmax:
        assert torch.equal(alpha, expected)
    torch.testing.assert_close(alpha, expected)
    assert model.attention_parameters() == []


def test_preloaded_attention_is_the_given_one_and_renormalised_after_a_deletion():
    model = tiny_model(scorer=attention.PreloadedAttention)
    batch = token_batch(SEQS)
    fixed = torch.rand(batch["mask"].shape) * batch["mask"]
    fixed = fixed / fixed.sum(-1, keepdim=True)
    batch.update(fixed_attention=fixed, fixed_lengths=batch["lengths"].clone())
    assert torch.equal(model.attend(model.encode(batch)), fixed)
    from attn_study.analysis.importance.leave_one_out import sub_batch

    sub = sub_batch(batch, torch.tensor([0]), torch.tensor([1]))  # token 1 of instance 0 deleted
    kept = torch.cat([fixed[0, :1], fixed[0, 2:5]])
    torch.testing.assert_close(model.attend(model.encode(sub))[0, :4], kept / kept.sum())
    with pytest.raises(ValueError, match="fixed_attention"):
        model.attend(model.encode(token_batch(SEQS)))


def test_comparison_equals_the_values_worked_out_by_hand():
    alpha = torch.tensor([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]], dtype=torch.double)
    base = torch.tensor([[1.0, 0.0, 0.0], [0.2, 0.3, 0.5]], dtype=torch.double)
    probs = torch.tensor([[0.8, 0.2], [0.6, 0.4]], dtype=torch.double)
    base_probs = torch.tensor([[0.3, 0.7], [0.6, 0.4]], dtype=torch.double)
    divergence, change = compare(alpha, probs, base, base_probs)
    # JSD = H(m) − ½H(α) − ½H(base), m = (0.75, 0.25): H(m) = −0.75 ln 0.75 − 0.25 ln 0.25, H(α) = ln 2, H(base) = 0
    h_m = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    assert float(divergence[0]) == pytest.approx(h_m - 0.5 * math.log(2), abs=1e-12)
    assert float(divergence[1]) == 0.0
    assert change.tolist() == pytest.approx([0.5, 0.0], abs=1e-12)


def test_the_family_compares_a_run_with_its_base_file_by_instance(tmp_path):
    """Two "runs" with hand-set attentions: this one pre-loaded with ``mine``, the base written as a file."""
    model = tiny_model(scorer=attention.PreloadedAttention, double=True)
    batch = token_batch(SEQS, [0, 1, 0, 1])
    mine = [[0.25, 0.25, 0.25, 0.25, 0.0], [1.0, 0.0, 0.0], [1.0], [0.5, 0.5, 0, 0, 0, 0, 0]]
    theirs = [[0.25, 0.25, 0.25, 0.25, 0.0], [0.0, 1.0, 0.0], [1.0], [0, 0, 0, 0, 0, 0.5, 0.5]]
    fixed = torch.zeros(batch["mask"].shape, dtype=torch.double)
    for r, values in enumerate(mine):
        fixed[r, : len(values)] = torch.tensor(values, dtype=torch.double)
    batch.update(fixed_attention=fixed, fixed_lengths=batch["lengths"].clone())
    probs = model.probabilities(model(batch)[0])
    shifted = torch.stack([probs[:, 1], probs[:, 0]], dim=1)  # the base predicts the other way round
    pd.DataFrame(
        {"uid": [f"t{i}" for i in range(4)], "attention": theirs, "probabilities": shifted.tolist()}
    ).to_parquet(tmp_path / layout.ATTENTION)
    (tmp_path / "summary.json").write_text("{}")  # a finished base run
    (tmp_path / "status.json").write_text('{"state": "complete"}')
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "config.yaml").write_text("{}")
    family = WiegreffePinter(base=str(tmp_path), batch_size=2)  # batches whose rows are not the split's order
    family.base_dir = tmp_path
    with analysis_mode(model):
        frame = family.measure(
            model, StubData(batch, serve_order=[2, 0, 3, 1]), "test", np.arange(4), ["comparison"]
        ).frame
    # identical, disjoint (ln 2), identical (a single token), disjoint
    np.testing.assert_allclose(frame["jsd"], [0.0, math.log(2), 0.0, math.log(2)], atol=1e-12)
    np.testing.assert_allclose(frame["tvd"], (probs[:, 0] - probs[:, 1]).abs().numpy(), atol=1e-12)
    summary = family.summarise(family.measure(model, StubData(batch), "test", np.arange(4), ["comparison"]), [])
    assert summary["wp/jsd/mean"] == pytest.approx(math.log(2) / 2)
    bad = pd.read_parquet(tmp_path / layout.ATTENTION).iloc[:3]
    bad.to_parquet(tmp_path / layout.ATTENTION)
    # the base's 3 instances are this run's first 3: the first difference is the missing fourth (position 3)
    with pytest.raises(UserError, match=str(tmp_path)) as refused:
        family.measure(model, StubData(batch), "test", np.arange(4), ["comparison"])
    assert "(3 vs 4, first difference at position 3:" in str(refused.value)
    bad.assign(uid=["t0", "t9", "t2"]).to_parquet(tmp_path / layout.ATTENTION)  # another instance at position 1
    with pytest.raises(UserError, match=r"\(3 vs 4, first difference at position 1:"):
        family.measure(model, StubData(batch), "test", np.arange(4), ["comparison"])


# -- end to end: runs that build on a base run ---------------------------------------------------

# long enough for the base to learn the synthetic task and the adversary to move (seconds on a CPU)
RUN = [
    *TINY,
    "logger=csv",
    "encoder.hidden_size=8",
    "trainer.max_epochs=6",
    "trainer.limit_train_batches=null",
    "dataset.source.n_train=512",
    "model.optimizer.lr=0.01",
    "dataset.source.negation_prob=0",
    "dataset.source.decoy_negators=0",
]


@pytest.fixture(scope="module")
def base_run(trained_runs):
    """The base run, trained once for the whole pytest run: read (as a source, a base), never changed."""
    return trained_runs.get(*RUN, name="base")


def test_a_preloaded_run_reproduces_its_source_attention_bit_for_bit(base_run, tmp_path):
    run_job(
        compose_config(
            *RUN,
            "attention=preloaded",
            f"attention.source={base_run}",
            "analysis=[wiegreffe_pinter]",
            f"analysis.wiegreffe_pinter.base={base_run}",
        ),
        tmp_path / "preloaded",
    )
    source, preloaded = load_run(base_run), load_run(tmp_path / "preloaded")
    for batch in preloaded.datamodule.loader("test", batch_size=64):
        with torch.no_grad():
            assert torch.equal(
                preloaded.model.attend(preloaded.model.encode(batch)), source.model.attend(source.model.encode(batch))
            )
    summary = saved.run_config(tmp_path / "preloaded")  # the saved config reads back
    assert summary.attention.source == str(base_run)
    assert pd.read_json(tmp_path / "preloaded" / "summary.json", typ="series")["wp/jsd/mean"] == 0.0
    # analysed again later: the run reads its source's attention back
    from attn_study.job.analyze import analyze

    again = analyze(
        compose_config(
            f"ckpt_path={tmp_path / 'preloaded'}",
            "analysis=[wiegreffe_pinter]",
            f"analysis.wiegreffe_pinter.base={base_run}",
            "use_loggers=false",
            name="analyze",
        )
    )
    assert again["wp/jsd/mean"] == 0.0


def test_a_preloaded_run_on_other_instances_names_both_runs(base_run, tmp_path):
    with pytest.raises(UserError) as err:
        run_job(
            compose_config(*RUN, "dataset.source.n_test=40", "attention=preloaded", f"attention.source={base_run}"),
            tmp_path / "other",
        )
    assert str(base_run) in str(err.value) and str(tmp_path / "other") in str(err.value)


def test_the_adversary_distils_at_lambda_zero_and_moves_its_attention_with_lambda(base_run, tmp_path):
    results, last = {}, {}
    for lam in (0.0, 1.0):
        run_dir = tmp_path / f"lam{lam}"
        results[lam] = run_job(
            compose_config(
                *RUN,
                "trainer.max_epochs=14",
                "training=model_consistent_adversary",
                f"training.base={base_run}",
                f"training.lam={lam}",
                "analysis=[wiegreffe_pinter]",
                f"analysis.wiegreffe_pinter.base={base_run}",
            ),
            run_dir,
        )
        epochs = pd.read_csv(run_dir / "csv" / "metrics.csv").groupby("epoch").first()
        last[lam] = epochs[["train/adversary_tvd", "train/adversary_kl"]].dropna().iloc[[0, -1]]
    # λ = 0: distillation — the outputs on the training data converge to the base model's
    first, final = last[0.0]["train/adversary_tvd"]
    assert final < 0.1 and final < first / 3
    # λ > 0: the attention moves away (training KL and test JSD to the base) at a similar output distance
    assert last[1.0]["train/adversary_kl"].iloc[-1] > 1.5 * last[0.0]["train/adversary_kl"].iloc[-1]
    assert results[1.0]["wp/jsd/mean"] > results[0.0]["wp/jsd/mean"] + 0.1
    assert "val/adversary_loss_best" in results[1.0] and "val/acc_best" not in results[1.0]


@pytest.mark.slow  # a paper's smoke sweep beside the Jain & Wallace one of the fast suite (issue 42 §5)
def test_smoke_wiegreffe_pinter_sweep_then_report(tmp_path):
    from attn_study.report.cli import build_report
    from tests.helpers import launch

    sweep = tmp_path / "smoke_wiegreffe_pinter"
    run = launch(sweep, "sweep=smoke_wiegreffe_pinter", "logger=csv", timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "11 jobs: 11 ran" in run.stdout
    out = build_report(sweep)
    baselines = pd.read_csv(out / "wp_baselines.csv").set_index("model")
    mlp, own = "diagnostic MLP (average, tanh)", "lstm (this project's check, not in W&P)"
    assert set(baselines.index) == {"lstm", mlp, own}
    assert baselines.loc["lstm", "learned acc n"] == 3  # base and two more model seeds
    assert baselines.loc["lstm", "uniform acc n"] == 1 and np.isfinite(baselines.loc["lstm", "uniform acc mean"])
    # their central comparison: the MLP with uniform, its own, the base's and an adversary's attention
    for kind in ("uniform", "learned", "pre-loaded: base", "pre-loaded: adversary λ=1"):
        assert np.isfinite(baselines.loc[mlp, f"{kind} F1 mean"]), kind
    assert np.isfinite(baselines.loc[own, "pre-loaded: base acc mean"])
    frontier = pd.read_csv(out / "wp_frontier.csv")
    assert sorted(frontier["role"]) == [
        "adversary λ=0",
        "adversary λ=1",
        "model seed 1001",
        "model seed 1002",
        "pre-loaded: base (this project's check, not in W&P)",
    ]
    assert frontier.loc[frontier["role"].str.startswith("pre-loaded"), "jsd"].item() == 0.0
    assert (out / "wp_jsd_vs_tvd.png").is_file()
    # seed variance varies the model alone: the seed jobs read the base's very texts
    base = load_run(next(sweep.glob("experiment=wiegreffe_pinter?base")))
    other = load_run(next(sweep.glob("experiment=wiegreffe_pinter?seed1")))
    for split in ("train", "test"):
        assert all(
            np.array_equal(a, b) for a, b in zip(base.datamodule.split(split).ids, other.datamodule.split(split).ids)
        )
    assert other.cfg.seed == base.cfg.seed and other.cfg.model_seed == 1001


def test_a_missing_base_is_refused_before_training(tmp_path):
    with pytest.raises(UserError, match=r"^analysis.wiegreffe_pinter.base=.*nowhere: no such directory"):
        run_job(
            compose_config(
                *TINY,
                "logger=csv",
                "analysis=[wiegreffe_pinter]",
                f"analysis.wiegreffe_pinter.base={tmp_path / 'nowhere'}",
            ),
            tmp_path / "run",
        )
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.parametrize("name", ["average", "cnn", "lstm"])
def test_leave_one_out_of_a_preloaded_attention_model_equals_deleting_and_renormalising(name):
    """The deletion shortcuts of context-free and convolutional encoders re-use the scores; a pre-loaded one has
    none: deleting token t leaves the other fixed weights, renormalised, over the re-encoded states."""
    from functools import partial

    from attn_study.analysis.importance import leave_one_out
    from attn_study.models import encoders

    make = {
        "average": partial(encoders.AverageEncoder, hidden_size=5),
        "cnn": partial(encoders.CNNEncoder, kernel_sizes=(3,), filters=3),
        "lstm": partial(encoders.RNNEncoder, hidden_size=4),
    }[name]
    model = tiny_model(make, scorer=attention.PreloadedAttention, double=True)
    batch = token_batch(SEQS)
    fixed = torch.rand(batch["mask"].shape, generator=torch.Generator().manual_seed(0), dtype=torch.double)
    fixed = fixed * batch["mask"]
    fixed = fixed / fixed.sum(-1, keepdim=True)
    batch.update(fixed_attention=fixed, fixed_lengths=batch["lengths"].clone())
    with torch.no_grad():
        probs = model.probabilities(model(batch)[0])
        got = leave_one_out(model, batch, probs=probs, chunk_size=3)
        for row, seq in enumerate(SEQS):
            for t in range(len(seq) if len(seq) > 1 else 0):
                rest = seq[:t] + seq[t + 1 :]
                alpha = torch.cat([fixed[row, :t], fixed[row, t + 1 : len(seq)]])[None]
                out = model.probabilities(model.decode(model.encode(token_batch([rest])), alpha / alpha.sum()))
                assert float(got[row, t]) == pytest.approx(0.5 * float((out[0] - probs[row]).abs().sum()), abs=1e-12)


def test_preloaded_attention_on_a_model_without_token_attention_is_refused_before_training(tmp_path):
    with pytest.raises(UserError, match="model=flat or model=pair"):
        run_job(
            compose_config(
                *TINY, "logger=csv", "model=han", "attention=preloaded", f"attention.source={tmp_path / 'nowhere'}"
            ),
            tmp_path / "run",
        )
    assert not (tmp_path / "run" / "checkpoints").exists()
