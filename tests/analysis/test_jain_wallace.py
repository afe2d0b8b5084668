"""Permutation and adversarial attention; the whole battery end to end, after training and from a checkpoint."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import torch

from attn_study.analysis.adversarial import adversarial_attention, epsilon_max_jsd
from attn_study.analysis.importance import predict
from attn_study.analysis.measures import jsd, tvd
from attn_study.analysis.permutation import permutation_tvd, permute_among_real
from attn_study.analyze import analyze
from attn_study.errors import UserError
from attn_study.run import train_and_test
from tests.helpers import TINY, tiny_model, token_batch

SEQS = [[5, 6, 7, 8, 9, 10, 11, 12, 13], [12, 13, 14], [16, 17, 18, 19, 20, 2, 3], [4, 9]]


def test_permutations_stay_on_real_tokens_and_keep_the_weights():
    batch = token_batch(SEQS)
    alpha = torch.rand(batch["mask"].shape) * batch["mask"]
    permuted = permute_among_real(alpha, batch["mask"], 50, torch.Generator().manual_seed(0))
    assert torch.all(permuted[~batch["mask"][:, None, :].expand_as(permuted)] == 0)
    torch.testing.assert_close(permuted.sort(-1).values, alpha[:, None, :].expand_as(permuted).sort(-1).values)
    assert not torch.equal(permuted[0, 0], permuted[0, 1])  # permutations differ


def test_permuting_uniform_attention_changes_nothing():
    model = tiny_model()
    batch = token_batch(SEQS)
    enc, _, _ = predict(model, batch)
    uniform = batch["mask"] / batch["lengths"][:, None]
    probs = model.probabilities(model.decode(enc, uniform))
    change = permutation_tvd(model, enc, uniform, probs, 30, torch.Generator().manual_seed(0), chunk=7)
    assert change.shape == (4, 30)
    torch.testing.assert_close(change, torch.zeros_like(change), atol=1e-6, rtol=0)
    _, alpha, probs = predict(model, batch)
    assert permutation_tvd(model, enc, alpha, probs, 30, torch.Generator().manual_seed(0)).max() > 0


def test_selected_adversaries_stay_within_epsilon():
    model = tiny_model(num_classes=3)
    batch = token_batch(SEQS)
    enc, alpha, probs = predict(model, batch)
    eps = 0.02
    adv, change, divergence = adversarial_attention(model, enc, alpha, probs, k=4, steps=80, lr=0.05, epsilon=eps,
                                                    generator=torch.Generator().manual_seed(0))
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


def test_adversary_reaches_ln2_when_the_decoder_ignores_attention():
    """With the output layer zeroed the output never moves, so nothing stops the adversary: its
    JSD from the (roughly uniform) attention approaches the bound as its mass concentrates."""
    model = tiny_model()
    model.output.weight.zero_()
    batch = token_batch([[5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20] * 4])
    enc, alpha, probs = predict(model, batch)
    _, change, divergence = adversarial_attention(model, enc, alpha, probs, k=3, steps=300, lr=0.1,
                                                  generator=torch.Generator().manual_seed(0))
    assert torch.all(change == 0)
    best, _, _ = epsilon_max_jsd(change, divergence, 0.01)
    assert best.item() > 0.6


def test_battery_after_training_and_again_from_the_checkpoint(make_cfg, tmp_path):
    cfg = make_cfg(*TINY, "logger=csv", "encoder=average", "encoder.hidden_size=8", "analysis=[jain_wallace]",
                   "analysis.jain_wallace.steps=5", "analysis.jain_wallace.permutations=6",
                   "analysis.jain_wallace.max_instances=20", "analysis.jain_wallace.heatmaps=3")
    run = tmp_path / "run"
    summary = train_and_test(cfg, run)
    folder = run / "analysis" / "jain_wallace"
    for name in ("instances.parquet", "summary.json", "heatmaps.html", "fig2_tau_grad_by_class.png",
                 "fig6_perm_median_tvd_vs_max_attention.png", "fig7_adv_emax_jsd_by_class.png",
                 "fig8_adv_emax_jsd_vs_max_attention.png"):
        assert (folder / name).is_file(), name
    frame = pd.read_parquet(folder / "instances.parquet")
    assert len(frame) == 20 and frame["uid"].is_unique
    for column in ("tau_grad", "p_grad", "tau_loo", "tau_grad_loo", "perm_median_tvd", "adv_emax_jsd", "max_attention"):
        assert column in frame
    keys = ["jw/tau_grad/mean", "jw/tau_grad/std", "jw/tau_grad/sig_frac", "jw/tau_loo/mean", "jw/tau_grad_loo/mean",
            "jw/perm/median_tvd/mean", "jw/adv/emax_jsd/mean", "jw/adv/emax_jsd/frac_above_0.5",
            "jw/seconds/correlation", "jw/seconds/permutation", "jw/seconds/adversarial"]
    on_disk = json.loads((run / "summary.json").read_text())
    for key in keys:
        assert key in summary and key in on_disk
    assert any(k.startswith("jw/tau_grad/class_") for k in on_disk)
    assert "jw/tau_grad/mean" in (run / "csv" / "metrics.csv").read_text().splitlines()[0]
    assert not list((run / "analysis").glob(".*partial"))

    # re-analyse from the checkpoint with other settings: same model → same predictions
    analyze_cfg = make_analyze_cfg(f"ckpt_path={run}", "analysis.jain_wallace.tests=[permutation]",
                                   "analysis.jain_wallace.permutations=4", "analysis.jain_wallace.max_instances=20",
                                   "device=cpu")
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
    cfg = make_cfg("dataset=babi1", f"dataset.path={release}", "trainer=debug", "logger=none",
                   "analysis=[jain_wallace]", "analysis.jain_wallace.steps=5", "analysis.jain_wallace.permutations=4")
    assert cfg.model.name == "pair" and cfg.model.network.embedding_dim == 50
    summary = train_and_test(cfg, tmp_path / "run")
    for key in ("jw/tau_grad/mean", "jw/tau_loo/mean", "jw/perm/median_tvd/mean", "jw/adv/emax_jsd/mean"):
        assert key in summary
    assert summary["jw/adv/epsilon"] == 0.05  # QA: the paper's epsilon
