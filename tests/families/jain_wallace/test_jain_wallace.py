"""Permutation and adversarial attention; the whole battery end to end, after training and from a checkpoint."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import torch

from attn_study.analysis.importance import predict
from attn_study.errors import UserError
from attn_study.families.jain_wallace.adversarial import adversarial_attention, epsilon_max_jsd
from attn_study.families.jain_wallace.permutation import permutation_tvd, permute_among_real
from attn_study.job.analyze import analyze
from attn_study.job.run import run as run_job
from attn_study.models import encoders
from attn_study.stats import jsd, tvd
from tests.helpers import TINY, tiny_model, token_batch

SEQS = [[5, 6, 7, 8, 9, 10, 11, 12, 13], [12, 13, 14], [16, 17, 18, 19, 20, 2, 3], [4, 9]]


def test_permutations_stay_on_real_tokens_and_keep_the_weights():
    batch = token_batch(SEQS)
    alpha = torch.rand(batch["mask"].shape) * batch["mask"]
    keys = torch.rand((len(SEQS), 50, batch["mask"].shape[1]), generator=torch.Generator().manual_seed(0))
    permuted = permute_among_real(alpha, batch["mask"], keys)
    assert torch.all(permuted[~batch["mask"][:, None, :].expand_as(permuted)] == 0)
    torch.testing.assert_close(permuted.sort(-1).values, alpha[:, None, :].expand_as(permuted).sort(-1).values)
    assert not torch.equal(permuted[0, 0], permuted[0, 1])  # permutations differ


def test_permuting_uniform_attention_changes_nothing():
    model = tiny_model()
    batch = token_batch(SEQS)
    enc, _, _ = predict(model, batch)
    uniform = batch["mask"] / batch["lengths"][:, None]
    probs = model.probabilities(model.decode(enc, uniform))
    keys = torch.rand((4, 30, batch["mask"].shape[1]), generator=torch.Generator().manual_seed(0))
    change = permutation_tvd(model, enc, uniform, probs, keys, chunk=7)
    assert change.shape == (4, 30)
    torch.testing.assert_close(change, torch.zeros_like(change), atol=1e-6, rtol=0)
    _, alpha, probs = predict(model, batch)
    assert permutation_tvd(model, enc, alpha, probs, keys).max() > 0


def test_selected_adversaries_stay_within_epsilon():
    model = tiny_model(num_classes=3)
    batch = token_batch(SEQS)
    enc, alpha, probs = predict(model, batch)
    eps = 0.02
    adv, change, divergence = adversarial_attention(
        model, enc, alpha, probs, k=4, steps=80, lr=0.05, epsilon=eps, generator=torch.Generator().manual_seed(0)
    )
    assert adv.shape == (4, 4, alpha.shape[1])
    assert torch.all(adv[~batch["mask"][:, None, :].expand_as(adv)] == 0)
    torch.testing.assert_close(adv.sum(-1), torch.ones(4, 4))
    # the returned measures are those of the returned attention
    out = model.probabilities(model.decode_many(enc, adv).flatten(0, 1)).view(4, 4, -1)
    torch.testing.assert_close(change, tvd(out, probs[:, None]))
    torch.testing.assert_close(divergence, jsd(adv, alpha[:, None]))
    best, which, n_ok = epsilon_max_jsd(change, divergence, eps)
    for r in range(4):
        if which[r] >= 0:
            assert change[r, which[r]] <= eps and best[r] == divergence[r][change[r] <= eps].max()
        else:
            assert best[r] == 0 and n_ok[r] == 0
    assert torch.all(best <= math.log(2) + 1e-6)


def test_an_adversary_exactly_at_epsilon_is_within_it():
    """ε-max JSD = max_k 1[TVD_k ≤ ε]·JSD_k: the bound is inclusive. Row 0, ε = .5: adversaries 0 (TVD .5) and 1
    (.25) qualify, 2 (.75) does not: JSD .4 of adversary 0, 2 within ε. Row 1: none qualifies: 0, index −1, 0."""
    change = torch.tensor([[0.5, 0.25, 0.75], [0.75, 1.0, 0.625]])
    divergence = torch.tensor([[0.4, 0.2, 0.6], [0.1, 0.2, 0.3]])
    best, which, n_ok = epsilon_max_jsd(change, divergence, 0.5)
    assert best.tolist() == pytest.approx([0.4, 0.0]) and which.tolist() == [0, -1] and n_ok.tolist() == [2, 0]


def test_adversary_reaches_ln2_when_the_decoder_ignores_attention():
    """With the output layer zeroed the output never moves, so nothing stops the adversary: its
    JSD from the (roughly uniform) attention approaches the bound as its mass concentrates."""
    model = tiny_model()
    model.output.weight.zero_()
    batch = token_batch([[5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20] * 4])
    enc, alpha, probs = predict(model, batch)
    _, change, divergence = adversarial_attention(
        model, enc, alpha, probs, k=3, steps=300, lr=0.1, generator=torch.Generator().manual_seed(0)
    )
    assert torch.all(change == 0)
    best, _, _ = epsilon_max_jsd(change, divergence, 0.01)
    assert best.item() > 0.6


def test_battery_after_training_and_again_from_the_checkpoint(make_cfg, tmp_path):
    cfg = make_cfg(
        *TINY,
        "logger=csv",
        "encoder=average",
        "encoder.hidden_size=8",
        "analysis=[jain_wallace]",
        "analysis.jain_wallace.steps=5",
        "analysis.jain_wallace.permutations=6",
        "analysis.jain_wallace.max_instances=20",
        "analysis.jain_wallace.heatmaps=3",
    )
    run = tmp_path / "run"
    summary = run_job(cfg, run)
    folder = run / "analysis" / "jain_wallace"
    for name in (
        "instances.parquet",
        "summary.json",
        "heatmaps.html",
        "fig2_tau_grad_by_class.png",
        "fig6_perm_median_tvd_vs_max_attention.png",
        "fig7_adv_emax_jsd_by_class.png",
        "fig8_adv_emax_jsd_vs_max_attention.png",
    ):
        assert (folder / name).is_file(), name
    frame = pd.read_parquet(folder / "instances.parquet")
    assert len(frame) == 20 and frame["uid"].is_unique
    for column in ("tau_grad", "p_grad", "tau_loo", "tau_grad_loo", "perm_median_tvd", "adv_emax_jsd", "max_attention"):
        assert column in frame
    keys = [
        "jw/tau_grad/mean",
        "jw/tau_grad/std",
        "jw/tau_grad/sig_frac",
        "jw/tau_loo/mean",
        "jw/tau_grad_loo/mean",
        "jw/perm/median_tvd/mean",
        "jw/adv/emax_jsd/mean",
        "jw/adv/emax_jsd/frac_above_0.5",
        "jw/seconds/correlation",
        "jw/seconds/permutation",
        "jw/seconds/adversarial",
    ]
    on_disk = json.loads((run / "summary.json").read_text())
    for key in keys:
        assert key in summary and key in on_disk
    assert any(k.startswith("jw/tau_grad/class_") for k in on_disk)
    # a final statistic: in the run summary, not in the per-epoch history of csv/metrics.csv
    assert "jw/tau_grad/mean" not in (run / "csv" / "metrics.csv").read_text().splitlines()[0]
    # every mean has its bootstrap interval around it
    for mean in [k for k in on_disk if k.endswith("/mean")]:
        low, high = on_disk[mean.removesuffix("mean") + "ci_low"], on_disk[mean.removesuffix("mean") + "ci_high"]
        assert low <= on_disk[mean] <= high, mean
    assert not list((run / "analysis").glob(".*partial"))

    # re-analyse from the checkpoint with other settings: same model → same predictions
    analyze_cfg = make_analyze_cfg(
        f"ckpt_path={run}",
        "analysis.jain_wallace.tests=[permutation]",
        "analysis.jain_wallace.permutations=4",
        "analysis.jain_wallace.max_instances=20",
        "device=cpu",
    )
    merged = analyze(analyze_cfg)
    again = pd.read_parquet(folder / "instances.parquet")
    assert list(again.prediction) == list(frame.prediction) and "tau_grad" not in again
    assert merged["test/acc"] == on_disk["test/acc"] and "jw/perm/median_tvd/mean" in merged


def make_analyze_cfg(*overrides):
    from hydra import compose, initialize_config_dir

    from attn_study.cli import CONFIG_DIR

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        return compose("analyze", overrides=list(overrides))


def test_analyze_rejects_a_path_without_a_run(tmp_path):
    with pytest.raises(UserError, match="ckpt_path="):
        analyze(make_analyze_cfg(f"ckpt_path={tmp_path}"))


def test_battery_runs_unchanged_on_a_pair_task(make_cfg, tmp_path):
    from tests.data.canonical_files import BABI_TASK1, write_babi

    release = write_babi(tmp_path, tasks=(BABI_TASK1,))
    cfg = make_cfg(
        "dataset=babi1",
        f"dataset.path={release}",
        "trainer=debug",
        "logger=none",
        "analysis=[jain_wallace]",
        "analysis.jain_wallace.steps=5",
        "analysis.jain_wallace.permutations=4",
    )
    assert cfg.model.name == "pair" and cfg.model.network.embedding_dim == 50
    summary = run_job(cfg, tmp_path / "run")
    for key in ("jw/tau_grad/mean", "jw/tau_loo/mean", "jw/perm/median_tvd/mean", "jw/adv/emax_jsd/mean"):
        assert key in summary
    assert summary["jw/adv/epsilon"] == 0.05  # QA: the paper's epsilon


# ------------------------------------------------------------------------------------------------
# the adversary's objective and selection: the paper's reading and the authors' code
# ------------------------------------------------------------------------------------------------


def js(p, q) -> float:
    """JSD (natural log) by scipy: jensenshannon is its square root."""
    from scipy.spatial.distance import jensenshannon

    return float(jensenshannon(p, q)) ** 2


def test_adversary_objective_by_hand():
    from attn_study.families.jain_wallace.adversarial import adversary_objective

    alpha = torch.tensor([[0.5, 0.3, 0.2]], dtype=torch.float64)
    adv = torch.tensor([[[0.1, 0.1, 0.8], [0.6, 0.3, 0.1], [0.2, 0.7, 0.1]]], dtype=torch.float64)
    change = torch.tensor([[0.004, 0.03, 0.02]], dtype=torch.float64)
    lam, eps = 500.0, 0.01
    a = [list(map(float, x)) for x in adv[0]]
    to_alpha = sum(js(x, alpha[0].tolist()) for x in a)
    pairs = js(a[0], a[1]) + js(a[0], a[2]) + js(a[1], a[2])
    excess = 0.0 + 0.02 + 0.01  # max(0, change - eps)
    paper = to_alpha + pairs / (3 * 2) - (lam / 3) * excess
    authors = to_alpha + 2 * pairs / 9 - lam * excess  # λ per adversary; Σ over ordered pairs / K²
    got = adversary_objective(adv, alpha, change, lam, eps)
    assert float(got) == pytest.approx(paper, rel=1e-9)
    got = adversary_objective(adv, alpha, change, lam, eps, lam_per_adversary=True, diversity="k_squared")
    assert float(got) == pytest.approx(authors, rel=1e-9)


def test_multiclass_output_change_is_l1_in_the_authors_code():
    from attn_study.families.jain_wallace.adversarial import output_change

    probs = torch.tensor([[0.6, 0.3, 0.1]])
    out = torch.tensor([[[0.5, 0.3, 0.2]]])
    assert float(output_change(out, probs)) == pytest.approx(0.1)  # TVD
    assert float(output_change(out, probs, "l1")) == pytest.approx(0.2)  # Σ|p - q|: 0.01 in the ReLU = TVD 0.005


def test_the_authors_selection_includes_the_original_attention_and_thresholds_the_mean_difference():
    from attn_study.families.jain_wallace.adversarial import authors_emax_jsd

    alpha = torch.tensor([[0.0, 0.5, 0.5, 0.0]])  # with boundary tokens at both ends
    token_mask = torch.tensor([[False, True, True, False]])
    adv = torch.tensor([[[0.1, 0.8, 0.05, 0.05], [0.25, 0.25, 0.25, 0.25]]])
    change = torch.tensor([[0.07, 0.2]])  # 3 classes: mean |Δ| = 2·TVD/3 = 0.047 (in) and 0.133 (out)
    best, which, n_ok = authors_emax_jsd(adv, alpha, change, num_classes=3, token_mask=token_mask, threshold=0.05)
    inner = [0.8 / 0.85, 0.05 / 0.85]
    assert float(best) == pytest.approx(js(inner, [0.5, 0.5]), rel=1e-5) and int(which) == 0 and int(n_ok) == 1
    best, which, n_ok = authors_emax_jsd(adv, alpha, change + 0.5, 3, token_mask, 0.05)
    assert float(best) == 0.0 and int(which) == -1 and int(n_ok) == 0  # only the original: 0, never missing
    paper, _, _ = epsilon_max_jsd(change, jsd(adv, alpha[:, None, :]), 0.05)
    assert float(paper) == 0.0  # the paper's rule: TVD 0.07 > ε = 0.05


def test_the_penalty_keeps_the_output_where_it_was():
    """On a decoder that depends on attention, adversaries optimised with the output penalty change the
    output less than adversaries optimised without it (λ = 0) — for both readings of the objective."""
    model = tiny_model(encoders.NoEncoder, num_classes=3, seed=1)
    with torch.no_grad():
        model.output.weight.mul_(8.0)
    batch = token_batch(SEQS)
    enc, alpha, probs = predict(model, batch)
    for options in ({}, {"lam_per_adversary": True, "diversity": "k_squared", "output_distance": "l1"}):
        kept = adversarial_attention(
            model,
            enc,
            alpha,
            probs,
            k=3,
            steps=150,
            lr=0.05,
            lam=500.0,
            epsilon=0.01,
            generator=torch.Generator().manual_seed(0),
            **options,
        )[1]
        free = adversarial_attention(
            model,
            enc,
            alpha,
            probs,
            k=3,
            steps=150,
            lr=0.05,
            lam=0.0,
            epsilon=0.01,
            generator=torch.Generator().manual_seed(0),
            **options,
        )[1]
        assert kept.mean() < free.mean() and free.mean() > 0.05, options


def test_predicted_class_gradient_equals_per_instance_autograd():
    from attn_study.analysis.importance import gradient_importance

    model = tiny_model(num_classes=3, seed=2)
    batch = token_batch(SEQS)
    got = gradient_importance(model, batch, normalise=False)
    for r, seq in enumerate(SEQS):
        single = token_batch([seq])
        emb = model.embed(single).detach().requires_grad_(True)
        enc = model.encode(single, embedded=emb)
        probs = model.probabilities(model.decode(enc, model.attend(enc).detach()))
        (grad,) = torch.autograd.grad(probs[0].max(), emb)
        top = probs[0].max().detach()  # the log-odds' gradient is ∇ŷ_c / (ŷ_c (1 − ŷ_c))
        torch.testing.assert_close(
            got[r, : len(seq)] * top * (1 - top), (grad[0] * emb[0]).sum(-1).abs(), rtol=1e-5, atol=1e-7
        )
    summed = gradient_importance(model, batch, normalise=False, classes="sum")
    assert not torch.allclose(summed, got)  # three classes: the sum is another importance


@pytest.mark.parametrize("boundary", [False, True])
@pytest.mark.parametrize("num_classes", [2, 3])
def test_correlations_equal_their_definition_instance_by_instance(num_classes, boundary):
    """τ(α, g), τ(α, Δŷ), τ(g, Δŷ) and their p-values in the family's frame — batches of 2 whose rows are not the
    split's order — equal scipy's on the quantities worked out for each instance alone (tests/reference.py);
    the frame's length, prediction and largest weight too."""
    import numpy as np

    from attn_study.analysis.measuring import analysis_mode
    from attn_study.families.jain_wallace.callback import JainWallace
    from tests import reference as ref
    from tests.helpers import StubData

    model = tiny_model(num_classes=num_classes, double=True, seed=11)
    texts = [*SEQS, [7], [8, 8, 8]]
    batch = token_batch(texts, boundary=boundary)
    data = StubData(batch, num_classes, serve_order=[4, 1, 5, 0, 3, 2])
    with analysis_mode(model):
        frame = (
            JainWallace(batch_size=2, tests=["correlation"])
            .measure(model, data, "test", np.arange(len(texts)), ["correlation"])
            .frame.set_index("index")
        )
    for i, text in enumerate(texts):
        row = frame.loc[i]
        alpha = ref.attention(model, text, boundary)
        grad, loo = ref.gradient_jw(model, text, boundary), ref.leave_one_out(model, text, boundary)
        assert row["length"] == len(text) and row["prediction"] == ref.predicted(model, text, boundary)
        assert row["max_attention"] == pytest.approx(alpha.max())
        for name, (a, b) in {"tau_grad": (alpha, grad), "tau_loo": (alpha, loo), "tau_grad_loo": (grad, loo)}.items():
            tau, p = ref.tau(a, b)
            assert row[name] == pytest.approx(tau, abs=1e-7, nan_ok=True), (i, name)
            assert row[name.replace("tau", "p")] == pytest.approx(p, rel=1e-6, abs=1e-12, nan_ok=True), (i, name)
            assert pd.isna(row[f"{name}_dropped"]) == (not math.isnan(tau)), (i, name)


def test_the_summary_of_a_hand_made_frame():
    """Every key of the family's summary from a frame whose numbers are chosen by hand: the per-class means, the
    significant fractions (p ≤ 0.05 among the defined τ), the Figs 3–4 differences, the permutation and
    adversarial statistics and the ε settings."""
    import numpy as np

    from attn_study.analysis.measuring import Measured
    from attn_study.families.jain_wallace.callback import JainWallace

    frame = pd.DataFrame(
        {
            "prediction": [0, 0, 1, 1],
            "tau_grad": [0.2, 0.4, float("nan"), 0.8],
            "p_grad": [0.01, 0.2, float("nan"), 0.05],
            "tau_loo": [0.1, 0.3, 0.5, 0.7],
            "p_loo": [0.5, 0.5, 0.04, 0.5],
            "tau_grad_loo": [0.6, 0.6, 0.9, 0.9],
            "p_grad_loo": [0.0, 0.0, 0.0, 0.0],
            "tau_grad_dropped": [None, None, "too_short", None],
            "tau_loo_dropped": [None] * 4,
            "tau_grad_loo_dropped": [None] * 4,
            "perm_median_tvd": [0.01, 0.03, 0.2, 0.4],
            "adv_emax_jsd": [0.6, 0.2, 0.0, 0.69],
            "adv_feasible": [3, 1, 0, 5],
        }
    )
    family = JainWallace(p_threshold=0.05)
    summary = family.summarise(
        Measured(frame, {"correlation": 1.5}, {"epsilon": 0.01, "select_epsilon": 0.05}),
        ["correlation", "permutation", "adversarial"],
    )
    assert summary["jw/n_instances"] == 4
    assert (summary["jw/adv/epsilon"], summary["jw/adv/select_epsilon"]) == (0.01, 0.05)
    assert summary["jw/tau_grad/mean"] == pytest.approx(np.mean([0.2, 0.4, 0.8]))
    assert summary["jw/tau_grad/n"] == 3 and summary["jw/tau_grad/sig_frac"] == pytest.approx(2 / 3)
    assert summary["jw/tau_grad/class_0/mean"] == pytest.approx(0.3)
    assert summary["jw/tau_grad/class_1/sig_frac"] == 1.0 and summary["jw/tau_grad/class_1/n"] == 1
    assert summary["jw/tau_loo/sig_frac"] == 0.25 and summary["jw/tau_loo/class_1/std"] == pytest.approx(0.1)
    assert summary["jw/dropped/tau_grad/total"] == 1 and summary["jw/dropped/tau_grad/too_short"] == 1
    assert summary["jw/diff/grad_loo_minus_attn_loo/mean"] == pytest.approx(np.mean([0.5, 0.3, 0.4, 0.2]))
    assert summary["jw/diff/grad_loo_minus_attn_grad/class_0/mean"] == pytest.approx(np.mean([0.4, 0.2]))
    assert summary["jw/perm/median_tvd/median"] == pytest.approx(0.115)
    assert summary["jw/perm/median_tvd/class_1/mean"] == pytest.approx(0.3)
    assert summary["jw/adv/emax_jsd/mean"] == pytest.approx(np.mean([0.6, 0.2, 0.0, 0.69]))
    assert summary["jw/adv/emax_jsd/frac_above_0.5"] == 0.5 and summary["jw/adv/emax_jsd/class_0/frac_above_0.5"] == 0.5
    assert summary["jw/adv/none_feasible_frac"] == 0.25 and summary["jw/adv/class_1/none_feasible_frac"] == 0.5
    assert summary["jw/seconds/correlation"] == 1.5


def test_permutations_and_adversaries_are_each_instances_own():
    """The frame's median permutation TVD and ε-max JSD of each instance — batches of 2 whose rows are not the
    split's order — are those of that instance's own draws (seeding.instance_draws) worked out on it alone."""
    import numpy as np

    from attn_study.analysis.measuring import analysis_mode
    from attn_study.analysis.seeding import instance_draws
    from attn_study.families.jain_wallace.callback import JainWallace
    from tests.helpers import StubData

    model = tiny_model(num_classes=2, double=True, seed=3)
    texts = [*SEQS, [7, 8, 9, 10, 11]]
    family = JainWallace(
        batch_size=2, seed=4, permutations=9, adversaries=3, steps=15, tests=["permutation", "adversarial"]
    )
    with analysis_mode(model):
        frame = family.measure(
            model,
            StubData(token_batch(texts), serve_order=[2, 4, 0, 3, 1]),
            "test",
            np.arange(len(texts)),
            ["permutation", "adversarial"],
        ).frame.set_index("index")
        for i, text in enumerate(texts):
            single = token_batch([text])
            enc, alpha, probs = predict(model, single)
            index = torch.tensor([i])
            draws = instance_draws(index, enc.mask, 4, family.STREAMS["permutation"], (9,), dtype=alpha.dtype)
            change = permutation_tvd(model, enc, alpha, probs, draws)
            assert frame.loc[i, "perm_median_tvd"] == pytest.approx(float(change.quantile(0.5)), abs=1e-12)
            stream = family.STREAMS["adversary_init"]
            noise = instance_draws(index, enc.mask, 4, stream, (3,), normal=True, dtype=alpha.dtype)
            _, tvds, jsds = adversarial_attention(
                model, enc, alpha, probs, k=3, steps=15, lr=family.lr, lam=family.lam, epsilon=0.01, noise=noise
            )
            best, _, feasible = epsilon_max_jsd(tvds, jsds, 0.01)
            assert frame.loc[i, "adv_emax_jsd"] == pytest.approx(float(best[0]), abs=1e-9)
            assert frame.loc[i, "adv_feasible"] == int(feasible[0])


def test_the_kept_adversary_is_the_selected_one():
    """tokens.parquet's adversarial column and the heatmaps' adversary of each instance are the adversary the
    paper's selection picks, worked out on the instance alone: among its K adversaries with TVD ≤ ε, the one of
    largest JSD (NaN and None where none is within ε). With seed 5 the picks are adversary 0, 0, none, 2, 2."""
    import numpy as np

    from attn_study.analysis.importance import token_mask
    from attn_study.analysis.measuring import analysis_mode
    from attn_study.analysis.seeding import instance_draws
    from attn_study.families.jain_wallace.callback import JainWallace
    from tests.helpers import StubData

    model = tiny_model(num_classes=2, double=True, seed=3)
    texts = [*SEQS, [7, 8, 9, 10, 11]]
    family = JainWallace(batch_size=2, seed=5, adversaries=3, steps=15, tests=["adversarial"])
    with analysis_mode(model):
        measured = family.measure(
            model, StubData(token_batch(texts), serve_order=[2, 4, 0, 3, 1]), "test", np.arange(5), ["adversarial"]
        )
        picks = []
        for i, text in enumerate(texts):
            single = token_batch([text])
            enc, alpha, probs = predict(model, single)
            noise = instance_draws(
                torch.tensor([i]), enc.mask, 5, family.STREAMS["adversary_init"], (3,), normal=True, dtype=alpha.dtype
            )
            adv, tvds, jsds = adversarial_attention(
                model, enc, alpha, probs, k=3, steps=15, lr=family.lr, lam=family.lam, epsilon=0.01, noise=noise
            )
            within = [k for k in range(3) if tvds[0, k] <= 0.01]
            pick = max(within, key=lambda k: float(jsds[0, k])) if within else None
            picks.append(pick)
            kept, shown = measured.tokens.scores["adversarial"][i], measured.extras["adversaries"][i]
            if pick is None:
                assert np.isnan(kept).all() and shown["adversarial"] is None and shown["adv_tvd"] is None
            else:
                expected = adv[0, pick][token_mask(single)[0]].numpy()
                np.testing.assert_allclose(kept, expected, rtol=1e-6)
                np.testing.assert_allclose(shown["adversarial"], expected, rtol=1e-9)
                assert shown["adv_tvd"] == pytest.approx(float(tvds[0, pick]), abs=1e-12)
    assert picks == [0, 0, None, 2, 2]


def test_epsilons_are_checked_and_kept():
    """ε and the selection's ε are probabilities: one in (0, 1) is kept, 1.5 is refused naming its option."""
    from attn_study.families.jain_wallace.callback import JainWallace

    family = JainWallace(epsilon=0.02, select_epsilon=0.05)
    assert (family.epsilon, family.select_epsilon) == (0.02, 0.05)
    for option in ("epsilon", "select_epsilon"):
        with pytest.raises(UserError, match=rf"analysis\.jain_wallace\.{option}="):
            JainWallace(**{option: 1.5})
