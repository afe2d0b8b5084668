"""Randomisation sanity checks (Adebayo et al. 2018): the rank correlations against scipy, the cascade's
re-initialisation, and the family end to end: a method blind to the model keeps correlation 1, gradient does not."""

from __future__ import annotations

import copy
import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from attn_study.analysis import importance
from attn_study.errors import UserError
from attn_study.families.sanity.callback import (
    Sanity,
    average_ranks,
    cascade,
    correlations,
    reinitialise,
    spearman_rho,
    stage_modules,
)
from attn_study.job.analyze import analyze
from attn_study.job.run import run as run_job
from attn_study.models import attention, encoders
from tests.helpers import TINY, Given, compose_config, tiny_model


def test_average_ranks_and_spearman_are_scipys_with_ties_and_padding():
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.integers(0, 4, size=(30, 9)).astype(float))  # many ties
    y = torch.from_numpy(rng.normal(size=(30, 9)))
    lengths = torch.from_numpy(rng.integers(1, 10, size=30))
    mask = torch.arange(9)[None, :] < lengths[:, None]
    y[3, : lengths[3]] = 2.0  # a constant row: undefined
    ranks, rho = average_ranks(x, mask), spearman_rho(x, y, mask)
    for r in range(30):
        n = int(lengths[r])
        np.testing.assert_allclose(ranks[r, :n].numpy(), stats.rankdata(x[r, :n].numpy()))
        assert (ranks[r, n:] == 0).all()
        expected = stats.spearmanr(x[r, :n].numpy(), y[r, :n].numpy()).statistic if n > 1 else math.nan
        assert rho[r].item() == pytest.approx(expected, abs=1e-12, nan_ok=True), r


def test_rounding_noise_between_equal_scores_is_a_tie_and_absolute_values_have_their_own_variant():
    """1 and 1 + 1e-15 are one importance (a repeated word computed in another order); a sign flip of every score
    is ρ = −1 but |·|-ρ = 1."""
    before = torch.tensor([[1.0, 1.0, 3.0, -2.0]], dtype=torch.float64)
    after = torch.tensor([[1.0 + 1e-15, 1.0, 3.0, -2.0]], dtype=torch.float64)
    mask = torch.ones(1, 4, dtype=torch.bool)
    out = correlations(before, after, mask)
    assert out["rho"].item() == pytest.approx(1.0) and out["tau"].item() == pytest.approx(1.0)
    flipped = correlations(before, -before, mask)
    assert flipped["rho"].item() == pytest.approx(-1.0) and flipped["rho_abs"].item() == pytest.approx(1.0)
    assert flipped["tau_abs"].item() == pytest.approx(1.0)


def test_the_cascade_redraws_each_stage_on_top_of_the_last_and_leaves_the_model_alone():
    model = tiny_model(scorer=attention.DotScorer, double=True)
    original = copy.deepcopy(model.state_dict())
    stages = ["decoder", "attention", "encoder", "embeddings"]
    models = cascade(model, stages, seed=4)
    for name, value in model.state_dict().items():
        assert torch.equal(value, original[name]), name  # untouched

    def changed(m):
        return {n for n, v in m.state_dict().items() if not torch.equal(v, original[n])}

    prefixes = {"decoder": "output.", "attention": "scorer.", "encoder": "encoder.", "embeddings": "embedding."}
    for j, (stage, randomised, count) in enumerate(models):
        expected = {n for n in original if any(n.startswith(prefixes[s]) for s in stages[: j + 1])}
        assert changed(randomised) == expected, stage
        assert count == sum(p.numel() for s in stages[: j + 1] for m in stage_modules(model, s) for p in m.parameters())
        if j:  # cumulative: the stages above keep the draws they had
            previous = models[j - 1][1].state_dict()
            for n in expected - {k for k in original if k.startswith(prefixes[stage])}:
                assert torch.equal(randomised.state_dict()[n], previous[n]), n
    # the same seed, the same models; another seed, others
    again = cascade(model, stages, seed=4)
    other = cascade(model, stages, seed=5)
    for (_, a, _), (_, b, _), (_, c, _) in zip(models, again, other):
        for n, v in a.state_dict().items():
            assert torch.equal(v, b.state_dict()[n]), n
        assert any(not torch.equal(v, c.state_dict()[n]) for n, v in a.state_dict().items())
    # the dot scorer's query has no reset_parameters: redrawn from a normal of its trained spread; padding row stays 0
    query = models[1][1].scorer.query
    assert not torch.equal(query, model.scorer.query) and query.std().item() == pytest.approx(
        model.scorer.query.std().item(), rel=0.8
    )
    assert (models[3][1].embedding.weight[0] == 0).all()


def test_reinitialise_uses_each_modules_own_initialiser():
    """An LSTM's own initialiser draws uniformly from ±1/√H: every redrawn weight lies there."""
    lstm = torch.nn.LSTM(3, 4).double()
    with torch.no_grad():
        for p in lstm.parameters():
            p.fill_(7.0)
    reinitialise([lstm], seed=0)
    bound = 1 / math.sqrt(4)
    assert all(p.abs().max() <= bound and p.abs().max() > 0 for p in lstm.parameters())


def test_options_are_checked():
    with pytest.raises(UserError, match="from the top down"):
        Sanity(stages=["encoder", "decoder"])
    with pytest.raises(UserError, match="unknown"):
        Sanity(methods=["attention", "saliency"])
    with pytest.raises(UserError, match="nothing to track|measures nothing"):
        Sanity(every_n_epochs=1)


def test_a_model_without_token_attention_is_refused():
    model = tiny_model(encoders.NoEncoder)
    model.token_attention = False
    with pytest.raises(UserError, match="model=flat"):
        Sanity().check(model)


def position(model, batch, alpha, probs, options):
    """A fixed score per position (earlier = more important): it never looks at the model."""
    t = batch["mask"].shape[1]
    return (t - torch.arange(t, device=batch["mask"].device, dtype=torch.float64)).expand_as(alpha) * batch["mask"], {}


def test_a_method_blind_to_the_model_keeps_correlation_one_and_gradient_does_not(tmp_path, monkeypatch):
    """End to end on a trained run: a positional score and the seeded random ranking are the same explanation
    before and after every stage of the cascade (ρ = τ = 1 for every instance); gradient and leave-one-out change
    once the model they explain is destroyed."""
    monkeypatch.setitem(importance.METHODS, "position", Given("position", position))
    cfg = compose_config(
        *TINY,
        "encoder=lstm",
        "encoder.hidden_size=8",
        "trainer.max_epochs=3",
        "trainer.limit_train_batches=1.0",
        "model.optimizer.lr=0.01",
        "analysis=[sanity]",
        "analysis.sanity.methods=[attention,gradient,loo,random,position]",
        "logger=csv",
    )
    summary = run_job(cfg, tmp_path / "run")
    assert summary["sn/n_instances"] == 32
    for method in ("position", "random"):
        for stage in ("decoder", "attention", "encoder", "embeddings"):
            for part in ("spearman", "kendall", "spearman_abs", "kendall_abs"):
                stem = f"sn/{method}/{stage}/{part}"
                assert summary[f"{stem}/mean"] == pytest.approx(1.0) and summary[f"{stem}/ci_low"] == pytest.approx(1.0)
    for method in ("gradient", "loo"):
        assert summary[f"sn/{method}/embeddings/spearman/ci_high"] < 0.9, method
    # attention depends on neither the decoder (ρ = 1 after it) ...
    assert summary["sn/attention/decoder/spearman/mean"] == pytest.approx(1.0)
    # ... nor, once its scorer is redrawn, on what it was
    assert summary["sn/attention/embeddings/spearman/ci_high"] < 0.9
    assert summary["sn/embeddings/parameters"] > summary["sn/encoder/parameters"] > summary["sn/decoder/parameters"]
    assert (tmp_path / "run" / "analysis" / "sanity" / "cascade.png").is_file()


def test_shuffled_labels_are_a_seeded_permutation_of_train_and_dev_only():
    from attn_study.job.components import build_datamodule

    def labels(seed):
        data = build_datamodule(compose_config(*TINY, f"seed={seed}"))
        before = {s: data.split(s).labels.copy() for s in ("train", "dev", "test")}
        changed = data.shuffle_labels(seed)
        return before, {s: data.split(s).labels for s in ("train", "dev", "test")}, changed

    before, after, changed = labels(13)
    assert changed == sum(int((before[s] != after[s]).sum()) for s in ("train", "dev")) > 0
    for split in ("train", "dev"):
        assert sorted(after[split]) == sorted(before[split]) and not np.array_equal(after[split], before[split])
    assert np.array_equal(after["test"], before["test"])
    assert all(np.array_equal(after[s], labels(13)[1][s]) for s in ("train", "dev"))


def test_randomised_labels_compare_with_a_model_trained_on_permuted_labels(trained_runs, tmp_path, monkeypatch):
    """A run trained on shuffled labels (dataset.shuffle_labels) is the other model of test labels: a method blind
    to the model stays at ρ = 1; a label run trained on the real labels, or on other data, is refused in one line.
    The two models are the suite's cached runs; the one trained on the real labels is analysed in a copy."""
    monkeypatch.setitem(importance.METHODS, "position", Given("position", position))
    base = [*TINY, "logger=none", "encoder=average", "encoder.hidden_size=8"]
    shuffled = trained_runs.get(*base, "dataset.shuffle_labels=true")
    assert trained_runs.summary(*base, "dataset.shuffle_labels=true")["data/shuffled_labels"] > 0
    real = trained_runs.get(*base)
    run_dir = trained_runs.copy(*base, into=tmp_path)
    sanity = ["analysis=[sanity]", "analysis.sanity.tests=[labels]", "analysis.sanity.methods=[position,gradient]"]
    summary = analyze(
        compose_config(f"ckpt_path={run_dir}", *sanity, f"analysis.sanity.label_run={shuffled}", name="analyze")
    )
    assert summary["sn/position/labels/spearman/mean"] == pytest.approx(1.0)
    assert "sn/gradient/decoder/spearman/mean" not in summary
    # by hand from the two saved models, each instance alone: the share of equal predictions and scipy's ρ
    # between the gradients (|∂ŷ/∂e_t · e_t|, each model explaining its own prediction); a repeated word's
    # importances are one tie (in float64 their last bits can differ by position)
    from attn_study.job.plan import load_run
    from tests import reference as ref

    trained, other = (load_run(path).model.double() for path in (run_dir, shuffled))
    texts = [ids.tolist() for ids in load_run(run_dir).datamodule.split("test").ids]
    same = np.mean([ref.predicted(trained, t) == ref.predicted(other, t) for t in texts])
    assert summary["sn/labels/same_prediction/mean"] == pytest.approx(same)
    rho = [
        stats.spearmanr(*(ref.one_tie_within(ref.gradient_jw(model, t)) for model in (trained, other))).statistic
        for t in texts
    ]
    assert summary["sn/gradient/labels/spearman/mean"] == pytest.approx(np.nanmean(rho), abs=1e-6)
    with pytest.raises(UserError, match="trained on the real labels"):
        run_job(compose_config(*base, *sanity, f"analysis.sanity.label_run={real}"), tmp_path / "refused")
    assert not (tmp_path / "refused" / "checkpoints").exists()  # refused before training
    missing = [*base, *sanity, f"analysis.sanity.label_run={tmp_path / 'missing'}", "force=true"]
    with pytest.raises(UserError, match=r"label_run=.*missing: no such directory"):
        run_job(compose_config(*missing), tmp_path / "refused")
    other = compose_config(*base, *sanity, "dataset.source.n_test=24", f"analysis.sanity.label_run={shuffled}")
    with pytest.raises(UserError, match="instances differ"):
        run_job(other, tmp_path / "other")


def test_the_report_shows_randomised_labels_beside_the_cascade():
    from pathlib import Path

    from attn_study.families.sanity.report import display, table
    from attn_study.report.runs import Run

    summary = {"sn/n_instances": 5, "sn/labels/same_prediction/mean": 0.5, "sn/decoder/same_prediction/mean": 0.9}
    for stage, rho in (("decoder", 0.9), ("labels", 0.3)):
        for part, sign in (("spearman_magnitude", 1), ("spearman", -1)):  # the signed ρ is not the headline
            summary.update(
                {
                    f"sn/gradient/{stage}/{part}/{k}": sign * rho + d
                    for k, d in (("mean", 0), ("ci_low", -0.1), ("ci_high", 0.1))
                }
            )
    config = {"dataset": "sst", "encoder": "lstm", "attention": "additive", "projection": "softmax", "seed": 13}
    shown = display(table([Run(Path("/r"), "complete", config=config, summary=summary)]))
    assert shown.loc[0, "|ρ| decoder"] == "0.900 [0.800, 1.000]"
    assert shown.loc[0, "|ρ| randomised labels"] == "0.300 [0.200, 0.400]"


def test_the_cascade_figure_draws_each_model_from_its_first_seed(monkeypatch, tmp_path):
    """One row of panels per dataset × model, from the run of its lowest seed (here 13, though listed second); a
    panel per headline statistic, titled by it, with the methods whose mean is finite at some stage (an undefined
    interval does not hide a method)."""
    from pathlib import Path

    from attn_study.families.sanity import report
    from attn_study.report.runs import Run

    def run(seed, encoder, rho):
        summary = {"sn/n_instances": 5, "sn/decoder/same_prediction/mean": 0.9}
        values = {"mean": rho, "ci_low": float("nan"), "ci_high": rho}
        summary.update({f"sn/gradient/decoder/spearman_magnitude/{k}": v for k, v in values.items()})
        config = {"dataset": "sst", "encoder": encoder, "attention": "additive", "projection": "softmax"}
        return Run(Path(f"/r{seed}{encoder}"), "complete", config=config | {"seed": seed}, summary=summary)

    drawn = {}

    def panel_rows(panels, draw, *args):
        assert draw is report.draw_cascade
        for title, stages, row in panels:
            drawn[title] = (stages, [(label, {m: c[0, 0] for m, c in curves.items()}) for label, curves in row])

    monkeypatch.setattr(report, "panel_rows", panel_rows)
    report.cascade_figure([run(14, "lstm", 0.4), run(13, "lstm", 0.7), run(13, "average", 0.2)], tmp_path / "f.png")
    assert drawn == {
        "sst: average + additive (softmax)": (
            ["decoder"],
            [("|Spearman ρ|", {"gradient": 0.2}), ("|Spearman ρ of |scores||", {})],
        ),
        "sst: lstm + additive (softmax)": (
            ["decoder"],
            [("|Spearman ρ|", {"gradient": 0.7}), ("|Spearman ρ of |scores||", {})],
        ),
    }


# -- issue 38 §7: the magnitude of each correlation is the headline -------------------------------------------------


def test_each_correlation_has_its_magnitude_per_instance():
    """A sign flip of every score: ρ = τ = −1, their magnitudes 1; a partial agreement keeps its ρ; NaN stays NaN."""
    mask = torch.ones(2, 4, dtype=torch.bool)
    before = torch.tensor([[1.0, 2.0, 3.0, -2.0], [1.0, 2.0, 3.0, 4.0]], dtype=torch.float64)
    after = torch.tensor([[-1.0, -2.0, -3.0, 2.0], [2.0, 1.0, 4.0, 3.0]], dtype=torch.float64)
    out = correlations(before, after, mask)
    assert out["rho"].tolist() == pytest.approx([-1.0, 0.6])  # 1 − 6·4 / (4·15): ranks 2, 1, 4, 3
    assert out["rho_magnitude"].tolist() == pytest.approx([1.0, 0.6])
    assert out["tau"][0].item() == pytest.approx(-1.0) and out["tau_magnitude"][0].item() == pytest.approx(1.0)
    assert out["rho_abs_magnitude"].tolist() == pytest.approx(out["rho_abs"].abs().tolist())
    constant = correlations(before[:1], torch.ones(1, 4, dtype=torch.float64), mask[:1])
    assert math.isnan(constant["rho_magnitude"].item())


def test_a_flipped_prediction_makes_the_signed_rho_negative_and_its_magnitude_one(monkeypatch, tmp_path):
    """The closed-form model (noenc, uniform attention, one logit z = w·ē + b) with only its bias moved far enough
    to flip every prediction — the tokens' effects unchanged: each model explains its own class, so leave-one-out's
    p(c'|x) − p(c'|x₋ₜ) = σ-differences of the other sign, the same ranking reversed: ρ = −1 for every instance,
    |ρ| = 1, the headline key and the figure's panel."""
    from attn_study.families.sanity import callback
    from attn_study.families.sanity.figures import PANELS, sanity_figure
    from tests.helpers import StubData, token_batch

    model = tiny_model(encoders.NoEncoder, scorer=attention.UniformScorer, double=True, seed=4)
    texts = [[4, 5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, 16, 17, 18]]
    batch = token_batch(texts)
    z = model.decode(model.encode(batch), model.attend(model.encode(batch)))[:, 0]
    assert (z > 0).all() or (z < 0).all()  # one predicted class: a shift of the bias flips every prediction
    shift = 2 * float(z.abs().max()) + 1
    flipped = copy.deepcopy(model)
    flipped.output.bias.sub_(shift if z[0] > 0 else -shift)
    monkeypatch.setattr(callback, "cascade", lambda model, stages, seed: [("decoder", flipped, 1)])
    analysis = Sanity(methods=["loo"], stages=["decoder"])
    measured = analysis.measure(model, StubData(batch), "test", np.arange(3), ["cascading"])
    summary = analysis.summarise(measured, ["cascading"])
    assert summary["sn/decoder/same_prediction/mean"] == 0.0
    assert summary["sn/loo/decoder/spearman/mean"] == pytest.approx(-1.0)
    assert summary["sn/loo/decoder/spearman_magnitude/mean"] == pytest.approx(1.0)
    assert summary["sn/loo/decoder/kendall_magnitude/mean"] == pytest.approx(1.0)
    assert PANELS == ("rho_magnitude", "rho_abs_magnitude")
    headline = measured.frame[[c for c in measured.frame if c.endswith("_magnitude")]]
    assert sanity_figure(headline, ["loo"], ["decoder"], tmp_path / "cascade.png", "toy") is not None


def test_the_cascade_is_drawn_from_one_at_the_trained_model_through_each_stages_mean(monkeypatch, tmp_path):
    """One line per method: 1 at the trained model, then each stage's mean (column 0 of mean, CI low, CI high), its
    interval a band; the y axis [−0.05, 1.05] for magnitudes, [−1.05, 1.05] once a curve goes below 0; one panel
    per statistic."""
    from attn_study.families.sanity import figures
    from attn_study.figures.common import new_figure

    ax = new_figure((6.0, 4.0)).add_subplot()
    figures.draw_cascade(ax, {"loo": np.array([[0.5, 0.4, 0.6], [0.2, 0.1, 0.3]])}, ["decoder", "encoder"], "|ρ|")
    (line,) = ax.get_lines()[:1]
    assert line.get_ydata().tolist() == [1.0, 0.5, 0.2] and line.get_label() == "loo"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["trained", "decoder", "+encoder"]
    # its 95 % interval the band around each stage (columns 1 and 2), none at the trained model
    band = {(float(x), float(y)) for x, y in ax.collections[0].get_paths()[0].vertices}
    assert band == {(1.0, 0.4), (1.0, 0.6), (2.0, 0.1), (2.0, 0.3)}
    assert ax.get_ylim() == (-0.05, 1.05)
    signed = new_figure((6.0, 4.0)).add_subplot()
    figures.draw_cascade(signed, {"loo": np.array([[-0.5, -0.7, -0.3]])}, ["decoder"], "ρ")
    assert signed.get_ylim() == (-1.05, 1.05)

    panels = {}
    monkeypatch.setattr(figures, "save_png", lambda fig, path: panels.setdefault("n", len(fig.axes)) and path)
    frame = pd.DataFrame({f"loo_decoder_{suffix}": [0.5, 0.7] for suffix in figures.PANELS})
    figures.sanity_figure(frame, ["loo"], ["decoder"], tmp_path / "cascade.png", "toy")
    assert panels["n"] == len(figures.PANELS) == 2


# -- the cascade's stages on a pair model, their seeds, and the statistics' keys (issue 41) -----------------------


def test_the_decoder_stage_of_a_pair_model_redraws_its_whole_decoder():
    """A pair model decodes with Linear(tanh(W_p c + W_q q)): the decoder stage redraws ``output``, ``w_context``
    and ``w_query`` and nothing else; the encoder stage also the question's encoder."""
    from tests.models.test_pair_model import make

    model = make("lstm")
    original = copy.deepcopy(model.state_dict())
    stages = ["decoder", "attention", "encoder", "embeddings"]
    prefixes = {
        "decoder": ("output.", "w_context.", "w_query."),
        "attention": ("scorer.",),
        "encoder": ("encoder.", "question_encoder."),
        "embeddings": ("embedding.",),
    }
    for j, (stage, randomised, _) in enumerate(cascade(model, stages, seed=2)):
        changed = {n for n, v in randomised.state_dict().items() if not torch.equal(v, original[n])}
        expected = {n for n in original if n.startswith(tuple(p for s in stages[: j + 1] for p in prefixes[s]))}
        assert changed == expected, stage
    assert {n.split(".")[0] for n in expected} == {
        "output",
        "w_context",
        "w_query",
        "scorer",
        "encoder",
        "question_encoder",
        "embedding",
    }


def test_each_stage_draws_from_its_own_seed():
    """Three stages whose modules have the same shape (Linear 3 → 3): each is redrawn from a seed of its own,
    so no two get the same values (one seed for every stage would give all three the same weights)."""

    class ThreeStages(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.output, self.scorer, self.encoder = (torch.nn.Linear(3, 3) for _ in range(3))

    (_, last, _) = cascade(ThreeStages(), ["decoder", "attention", "encoder"], seed=7)[-1]
    weights = [last.output.weight, last.scorer.weight, last.encoder.weight]
    for a, b in ((0, 1), (0, 2), (1, 2)):
        assert not torch.equal(weights[a], weights[b]), (a, b)


def test_spearman_and_kendall_are_stored_under_their_own_keys_worked_by_hand(monkeypatch):
    """A method that explains the trained model by x = (1, 2, 3, 4) and every randomised one by y = (−2, 1, 4, 3):
    signed ranks (1, 2, 3, 4) vs (1, 2, 4, 3): ρ = 1 − 6·2/(4·15) = 0.8, τ = (5 − 1)/6 = 2/3; of |·|, |y| ranks
    (2, 1, 4, 3): ρ = 1 − 6·4/60 = 0.6, τ = (4 − 2)/6 = 1/3 — four different numbers, each under its key, and
    scipy's."""
    from attn_study.analysis.measuring import analysis_mode
    from tests.helpers import StubData, token_batch

    model = tiny_model(double=True)
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    y = torch.tensor([-2.0, 1.0, 4.0, 3.0], dtype=torch.float64)

    def fixed(explained, batch, alpha, probs, options):
        assert isinstance(explained, torch.nn.Module) and probs.shape == (batch["mask"].shape[0], 2)
        return (x if explained is model else y).expand(batch["mask"].shape[0], 4).clone(), {}

    monkeypatch.setitem(importance.METHODS, "fixed", Given("fixed", fixed))
    analysis = Sanity(methods=["fixed"], stages=["decoder", "attention"])
    batch = token_batch([[5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, 16]])
    with analysis_mode(model):
        measured = analysis.measure(model, StubData(batch), "test", np.arange(3), ["cascading"])
    summary = analysis.summarise(measured, ["cascading"])
    expected = {"spearman": 0.8, "kendall": 2 / 3, "spearman_abs": 0.6, "kendall_abs": 1 / 3}
    assert expected["spearman"] == pytest.approx(stats.spearmanr(x, y).statistic)
    assert expected["kendall"] == pytest.approx(stats.kendalltau(x, y).statistic)
    assert expected["spearman_abs"] == pytest.approx(stats.spearmanr(x, y.abs()).statistic)
    assert expected["kendall_abs"] == pytest.approx(stats.kendalltau(x, y.abs()).statistic)
    for stage in ("decoder", "attention"):
        for part, value in expected.items():
            assert summary[f"sn/fixed/{stage}/{part}/mean"] == pytest.approx(value, abs=1e-12), (stage, part)
            assert summary[f"sn/fixed/{stage}/{part}/n"] == 3


def test_too_short_texts_and_constant_explanations_are_counted(monkeypatch):
    """Lengths 1, 2, 3: the one-token text is too short; the two-token text's explanation is constant (1, 1) before
    the randomisation, so its ρ is undefined and counted (it is long enough); the three-token text's ρ is defined."""
    from attn_study.analysis.measuring import analysis_mode
    from tests.helpers import StubData, token_batch

    model = tiny_model(double=True)

    def ties_the_pair(explained, batch, alpha, probs, options):
        scores = torch.arange(1.0, 1 + batch["mask"].shape[1], dtype=torch.float64).expand_as(alpha).clone()
        scores[batch["lengths"] == 2] = 1.0
        return scores * batch["mask"], {}

    monkeypatch.setitem(importance.METHODS, "ties_the_pair", Given("ties_the_pair", ties_the_pair))
    analysis = Sanity(methods=["ties_the_pair"], stages=["decoder"])
    batch = token_batch([[5], [6, 7], [8, 9, 10]])
    with analysis_mode(model):
        measured = analysis.measure(model, StubData(batch), "test", np.arange(3), ["cascading"])
    summary = analysis.summarise(measured, ["cascading"])
    assert summary["sn/dropped/too_short"] == 1 and summary["sn/ties_the_pair/decoder/undefined"] == 1
    assert summary["sn/ties_the_pair/decoder/spearman/n"] == 1 and summary["sn/decoder/parameters"] == sum(
        p.numel() for p in model.output.parameters()
    )


def test_a_model_without_a_stages_modules_is_refused_and_one_with_them_is_not():
    class NoScorer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.output, self.encoder, self.embedding = (
                torch.nn.Linear(2, 1),
                torch.nn.Linear(2, 2),
                torch.nn.Embedding(3, 2),
            )

    with pytest.raises(UserError, match=r"re-initialises \['attention'\]"):
        Sanity(stages=["decoder", "attention"]).check_model(NoScorer())
    Sanity(stages=["decoder", "encoder", "embeddings"]).check_model(NoScorer())
    Sanity().check_model(tiny_model())


def test_a_parameter_without_an_initialiser_is_redrawn_from_a_normal_of_its_own_spread():
    """Bare parameters (no module's ``reset_parameters`` owns them), in order: (1, 3) has σ = √2; (2, 2) is constant
    and (5) a single value, so they get 1/√size. From the seed's generator: N(0, 1) draws times those."""

    class Bare(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.spread = torch.nn.Parameter(torch.tensor([1.0, 3.0], dtype=torch.float64))
            self.constant = torch.nn.Parameter(torch.tensor([2.0, 2.0], dtype=torch.float64))
            self.single = torch.nn.Parameter(torch.tensor([5.0], dtype=torch.float64))

    module = Bare()
    assert reinitialise([module], seed=3) == 5
    generator = torch.Generator().manual_seed(3)
    expected = [
        torch.randn(n, dtype=torch.float64, generator=generator) * c for n, c in ((2, 2**0.5), (2, 0.5**0.5), (1, 1.0))
    ]
    for name, values in zip(("spread", "constant", "single"), expected):
        torch.testing.assert_close(getattr(module, name).detach(), values, rtol=0, atol=1e-15, msg=name)
