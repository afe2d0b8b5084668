"""Meister et al.'s sparsity measures against known answers, per-instance autograd and brute force;
sparsegen-lin's sparsity; the family end to end."""

from __future__ import annotations

import json
from functools import partial

import numpy as np
import pandas as pd
import pytest
import torch

from attn_study.analysis.erasure import erase_each
from attn_study.analysis.importance import (
    distribution,
    hidden_gradient_importance,
    input_to_hidden_gradients,
    leave_one_out,
    predict,
)
from attn_study.analysis.measuring import analysis_mode
from attn_study.families.sparsity import keys as sparsity_keys
from attn_study.families.sparsity.callback import Sparsity, pooled_over_rows
from attn_study.models import encoders, projection
from attn_study.stats import entropy
from tests import reference as ref
from tests.helpers import TINY, StubData, compose_config, tiny_model, token_batch

SEQS = [[5, 6, 7, 8, 9, 10, 11, 12, 13], [12, 13, 14], [15], [16, 17, 18, 19, 20, 2, 3], [4, 9]]
ENCODERS = {
    "lstm": partial(encoders.RNNEncoder, hidden_size=4),
    "gru": partial(encoders.RNNEncoder, hidden_size=3, cell="gru"),
    "cnn": partial(encoders.CNNEncoder, kernel_sizes=(3, 5), filters=3),
    "transformer": partial(encoders.TransformerEncoder, model_dim=8, num_heads=2, ff_dim=16, num_layers=2),
    "average": partial(encoders.AverageEncoder, hidden_size=5, activation="tanh"),
    "noenc": encoders.NoEncoder,
}


def per_p_loop(model, batch):
    """G[b, p, i] = ‖∂‖h_{b,p}‖/∂e_{b,i}‖ by one backward pass per (instance, p)."""
    b, t = batch["mask"].shape
    out = torch.zeros(b, t, t, dtype=torch.double)
    for r in range(b):
        n = int(batch["lengths"][r])
        single = token_batch([batch["ids"][r, :n].tolist()])
        emb = model.embed(single).detach().requires_grad_(True)
        hidden = model.encode(single, embedded=emb).hidden
        for p in range(n):
            (grad,) = torch.autograd.grad(hidden[0, p].norm(), emb, retain_graph=True)
            out[r, p, :n] = grad[0].norm(dim=-1)
    return out


@pytest.mark.parametrize("name", list(ENCODERS))
@pytest.mark.parametrize("chunk", [1, 7, 1000])
def test_batched_input_to_hidden_gradients_equal_a_per_p_loop(name, chunk):
    model = tiny_model(ENCODERS[name], double=True)
    batch = token_batch(SEQS)
    got = input_to_hidden_gradients(model, batch, chunk_size=chunk)  # chunks cut across instances
    torch.testing.assert_close(got, per_p_loop(model, batch))
    assert torch.all(got[~batch["mask"]] == 0) and torch.all(got.transpose(1, 2)[~batch["mask"]] == 0)


def hidden_entropy(model, batch):
    rows = distribution(input_to_hidden_gradients(model, batch), batch["mask"][:, None, :])
    return rows, entropy(rows, batch["mask"][:, None, :].expand_as(rows), normalised=True)


@pytest.mark.parametrize("name", ["noenc", "average"])
def test_context_free_encoders_tie_each_state_to_its_own_token(name):
    model = tiny_model(ENCODERS[name], double=True)
    batch = token_batch(SEQS)
    rows, ent = hidden_entropy(model, batch)
    mask = batch["mask"]
    eye = torch.eye(mask.shape[1], dtype=torch.double).expand_as(rows)
    torch.testing.assert_close(rows[mask], eye[mask])  # one-hot at p: H̃ = 0, share on x_p = 1
    assert torch.all(ent[mask] == 0)


def test_a_bilstm_spreads_each_state_over_several_tokens():
    model = tiny_model(ENCODERS["lstm"], double=True)
    batch = token_batch(SEQS[:1])
    rows, ent = hidden_entropy(model, batch)
    assert ent[0].min() > 0.05 and rows[0].diagonal().max() < 0.95


def test_normalised_entropy_uniform_one_hot_and_empty():
    mask = torch.tensor([[True, True, True, True, False]])
    uniform = distribution(torch.tensor([[2.0, 2.0, 2.0, 2.0, 9.0]]), mask)
    torch.testing.assert_close(uniform, torch.tensor([[0.25, 0.25, 0.25, 0.25, 0.0]]))
    assert entropy(uniform, mask, normalised=True).item() == pytest.approx(1.0)
    one_hot = distribution(torch.tensor([[0.0, 3.0, 0.0, 0.0, 9.0]]), mask)
    assert entropy(one_hot, mask, normalised=True).item() == 0.0
    nothing = distribution(torch.zeros(1, 5), mask)  # no importance anywhere: no distribution, not "concentrated"
    assert torch.isnan(nothing[0, :4]).all() and torch.isnan(entropy(nothing, mask, normalised=True)).all()


def test_hidden_gradient_importance_matches_per_instance_autograd():
    model = tiny_model(ENCODERS["gru"], num_classes=3, double=True)
    batch = token_batch(SEQS)
    got = hidden_gradient_importance(model, batch)
    for r, seq in enumerate(SEQS):
        single = token_batch([seq])
        enc = model.encode(single)
        leaf = enc.hidden.detach().requires_grad_(True)
        enc.hidden = leaf
        probs = model.probabilities(model.decode(enc, model.attend(enc)))
        (grad,) = torch.autograd.grad(probs[0].max(), leaf)
        top = probs[0].max().detach()  # through the log-odds: ∇ŷ_c / (ŷ_c (1 − ŷ_c))
        torch.testing.assert_close(got[r, : len(seq)] * top * (1 - top), grad[0].norm(dim=-1))
    assert torch.all(got[~batch["mask"]] == 0)


@pytest.mark.parametrize("proj", [projection.Softmax, projection.Sparsemax])
def test_erasing_each_state_equals_erase_and_decode_by_hand(proj):
    model = tiny_model(ENCODERS["lstm"], proj=proj, num_classes=3, double=True)
    batch = token_batch(SEQS)
    enc, alpha, probs = predict(model, batch)
    got = erase_each(model, enc, alpha, probs, items_per_call=2)
    for r, seq in enumerate(SEQS):
        c = int(probs[r].argmax())
        for i in range(len(seq)):
            a = alpha[r, : len(seq)].clone()
            a[i] = 0.0
            if a.sum() > 0:
                context = (a / a.sum()) @ enc.hidden[r, : len(seq)]
            else:  # nothing left: the zero vector
                context = torch.zeros(enc.hidden.shape[-1], dtype=torch.double)
            q = model.probabilities(model.decode_pooled(context[None]))[0]
            assert got[r, i].item() == pytest.approx(abs(q[c] - probs[r, c]).item(), abs=1e-12), (r, i)
    assert torch.all(got[~batch["mask"]] == 0)


def test_predicted_class_leave_one_out_equals_brute_force_deletion():
    model = tiny_model(ENCODERS["cnn"], num_classes=3, double=True)
    batch = token_batch(SEQS)
    _, _, probs = predict(model, batch)
    got = leave_one_out(model, batch, probs=probs, chunk_size=3, predicted=True)
    for r, seq in enumerate(SEQS):
        if len(seq) == 1:
            assert torch.isnan(got[r, 0])
            continue
        c = int(probs[r].argmax())
        for i in range(len(seq)):
            deleted = model.probabilities(model(token_batch([seq[:i] + seq[i + 1 :]]))[0])[0]
            assert got[r, i].item() == pytest.approx(abs(deleted[c] - probs[r, c]).item(), abs=1e-12)


def test_sparsegen_support_never_grows_with_lambda_and_lambda_zero_is_sparsemax():
    torch.manual_seed(0)
    scores = torch.randn(50, 12)
    mask = torch.rand(50, 12) > 0.2
    mask[:, 0] = True
    torch.testing.assert_close(projection.SparsegenLin(lam=0.0)(scores, mask), projection.Sparsemax()(scores, mask))
    supports = [
        (projection.SparsegenLin(lam=lam)(scores, mask) > 0).sum(-1)
        for lam in (-8.0, -2.0, -1.0, -0.5, 0.0, 0.25, 0.5, 0.75, 0.9)
    ]
    for denser, sparser in zip(supports, supports[1:]):
        assert torch.all(sparser <= denser)
    assert supports[0].sum() > supports[-1].sum()  # the grid spans a real change
    for lam in (-2.0, 0.5):
        alpha = projection.SparsegenLin(lam=lam)(scores, mask)
        assert torch.all(alpha[~mask] == 0) and torch.allclose(alpha.sum(-1), torch.ones(50))


def measure(model, seqs, tests=Sparsity.TESTS):
    """The family's per-instance frame for ``seqs`` (trailing padding beyond the longest instance)."""
    batch = token_batch(seqs)
    extra = 3
    for k in ("ids", "mask"):
        batch[k] = torch.cat([batch[k], torch.zeros(len(seqs), extra, dtype=batch[k].dtype)], 1)
    with analysis_mode(model):
        return Sparsity(batch_size=len(seqs)).measure(
            model, StubData(batch, model.num_classes), "test", np.arange(len(seqs)), list(tests)
        )


def test_padding_never_enters_any_statistic():
    model = tiny_model(ENCODERS["lstm"], proj=projection.Sparsemax, double=True)
    padded = measure(model, SEQS).frame
    for r, seq in enumerate(SEQS):
        alone = measure(model, [seq]).frame.iloc[0]
        for column in padded.columns:
            if column in ("index", "uid"):
                continue
            a, b = padded.iloc[r][column], alone[column]
            assert (pd.isna(a) and pd.isna(b)) or a == pytest.approx(b, abs=1e-9), (r, column)
    assert padded["length"].tolist() == [len(s) for s in SEQS]
    # support: the tokens with α > 0, counted on each text alone; a sharper scorer (v × 40) leaves some at 0
    with torch.no_grad():
        model.scorer.v.weight.mul_(40)
    padded = measure(model, SEQS).frame
    support = [int((ref.attention(model, seq) > 0).sum()) for seq in SEQS]
    assert padded["support"].tolist() == support and any(n < len(s) for n, s in zip(support, SEQS))
    assert padded["support_frac"].tolist() == pytest.approx([n / len(s) for n, s in zip(support, SEQS)])
    short = padded["length"] < 2
    assert padded.loc[short, ["entropy_attention", "entropy_g_hidden", "tau_attn_g_input"]].isna().all().all()


@pytest.fixture(scope="module")
def trained(trained_runs):
    """Tiny trained models (trained once for the whole pytest run: read, never changed) and their summaries: noenc
    and BiLSTM with softmax, BiLSTM with sparsemax."""
    out = {}
    for name, choice in {
        "noenc": ["encoder=noenc"],
        "lstm": ["encoder=lstm", "encoder.hidden_size=8"],
        "sparsemax": ["encoder=lstm", "encoder.hidden_size=8", "projection=sparsemax"],
    }.items():
        overrides = [
            *TINY,
            *choice,
            "analysis=[sparsity]",
            "analysis.sparsity.max_instances=20",
            "trainer.max_epochs=2",
            "trainer.limit_train_batches=1.0",
            "logger=csv",
        ]
        out[name] = (trained_runs.get(*overrides), trained_runs.summary(*overrides))
    return out


@pytest.mark.parametrize("boundary", [False, True])
@pytest.mark.parametrize("name", ["lstm", "cnn", "average"])
def test_every_column_equals_its_definition_instance_by_instance(name, boundary):
    """Each entropy and τ of the family's frame — batches of 2 whose rows are not the split's order, boundary
    tokens or not, a sparse attention with zeros — equals the same statistic worked out from its definition on
    the instance alone (tests/reference.py: ŷ's own gradients in float64, deletions re-running the model,
    scipy's τ; the T×T gradients by one backward pass per position), and the summary's significant fractions
    are those of those p-values."""
    model = tiny_model(ENCODERS[name], proj=projection.Sparsemax, num_classes=3, double=True, seed=7)
    model.scorer.v.weight.mul_(6.0)  # sharper scores: sparsemax leaves tokens at exactly 0
    texts = [t for t in SEQS if len(t) > 1] + [[15]]
    batch = token_batch(texts, labels=[0, 1, 2, 0, 1], boundary=boundary)
    data = StubData(batch, 3, serve_order=[3, 0, 4, 2, 1])
    tests = ["input", "intermediate", "input_hidden"]
    analysis = Sparsity(batch_size=2, tests=tests)
    with analysis_mode(model):
        measured = analysis.measure(model, data, "test", np.arange(len(texts)), tests)
    frame, summary = measured.frame.set_index("index"), analysis.summarise(measured, tests)
    pvalues: dict[str, list] = {}
    zeros, pairs = 0, []
    for i, text in enumerate(texts):
        row = frame.loc[i]
        alpha = ref.attention(model, text, boundary)
        zeros += int((alpha == 0).sum())
        importances = {
            "attention": alpha,
            "g_input": ref.gradient_norm(model, text, boundary),
            "loo_input": ref.leave_one_out(model, text, boundary, predicted_class=True),
            "g_intermediate": ref.hidden_gradient(model, text, boundary),
            "loo_intermediate": ref.erase_each(model, text, boundary),
        }
        assert row["length"] == len(text) and row["support"] == int((alpha > 0).sum())
        for stat, values in importances.items():
            expected = ref.normalised_entropy(values)
            assert row[f"entropy_{stat}"] == pytest.approx(expected, abs=1e-7, nan_ok=True), (i, stat)
            if stat != "attention":
                tau, p = ref.tau(alpha, values / values.sum() if len(text) > 1 else values)
                assert row[f"tau_attn_{stat}"] == pytest.approx(tau, abs=1e-7, nan_ok=True), (i, stat)
                assert row[f"p_attn_{stat}"] == pytest.approx(p, rel=1e-6, abs=1e-12, nan_ok=True), (i, stat)
                pvalues.setdefault(stat, []).append(p)
        grid = per_p_loop(model, token_batch([text], boundary=boundary))[0].numpy()
        inner = slice(1, len(text) + 1) if boundary else slice(0, len(text))
        grid = grid[inner, inner]
        per_p = [ref.normalised_entropy(grid[p]) for p in range(len(text))]
        assert row["entropy_g_hidden"] == pytest.approx(
            np.mean(per_p) if len(text) > 1 else np.nan, abs=1e-7, nan_ok=True
        ), i
        if len(text) > 1:
            assert row["entropy_g_hidden_row_std"] == pytest.approx(np.std(per_p), abs=1e-7), i
            pairs.extend(per_p)
    assert zeros > 0  # the case has tokens sparsemax gives no weight
    # Table 1's statistic over every (instance, p) pair rather than over instances
    assert summary["sp/entropy/g_hidden_pairs/n"] == len(pairs) > len(texts)
    assert summary["sp/entropy/g_hidden_pairs/mean"] == pytest.approx(np.mean(pairs), abs=1e-7)
    assert summary["sp/entropy/g_hidden_pairs/std"] == pytest.approx(np.std(pairs), abs=1e-7)
    if name != "average":  # (the Average's states are context-free: H̃ = 0 at every p, so the two means agree)
        pooled, per_instance = summary["sp/entropy/g_hidden_pairs/mean"], summary["sp/entropy/g_hidden/mean"]
        assert pooled != pytest.approx(per_instance, abs=1e-4)  # longer texts weigh more
    for stat, ps in pvalues.items():
        ps = np.array([p for p in ps if not np.isnan(p)])
        assert summary[f"sp/tau/attn_{stat}/n"] == len(ps)
        assert summary[f"sp/tau/attn_{stat}/sig_frac"] == pytest.approx(np.mean(ps <= 0.05)), stat


def test_pooling_instances_rows_gives_the_statistics_of_all_their_rows():
    # rows (0.2, 0.4) and (0.9); an instance too short for any row: μ = 1.5 / 3, σ² = (0.09 + 0.01 + 0.16) / 3
    pooled = pooled_over_rows([0.3, 0.9, np.nan], [0.1, 0.0, np.nan], [2, 1, 0])
    assert pooled == {"mean": pytest.approx(0.5), "std": pytest.approx(np.sqrt(0.26 / 3)), "n": 3}
    nothing = pooled_over_rows([np.nan], [np.nan], [0])
    assert np.isnan(nothing["mean"]) and np.isnan(nothing["std"]) and nothing["n"] == 0


def test_an_importance_that_vanishes_is_dropped_with_its_reason():
    """A decoder that ignores its input (output weights 0): every gradient and deletion changes nothing, so the
    importance distributions are undefined — dropped, counted, and named zero_<importance>, not too_short."""
    model = tiny_model(ENCODERS["lstm"], num_classes=2, double=True)
    model.output.weight.zero_()
    batch = token_batch(SEQS)
    analysis = Sparsity(tests=["input"])
    with analysis_mode(model):
        measured = analysis.measure(model, StubData(batch), "test", np.arange(len(SEQS)), ["input"])
    summary = analysis.summarise(measured, ["input"])
    longer = sum(len(t) > 1 for t in SEQS)
    for stat in ("g_input", "loo_input"):
        assert summary[f"sp/dropped/entropy_{stat}/zero_{stat}"] == longer
        assert summary[f"sp/dropped/entropy_{stat}/too_short"] == len(SEQS) - longer
        assert summary[f"sp/entropy/{stat}/n"] == 0


def test_sparsity_end_to_end_known_answers(trained):
    noenc, lstm, sparse = (trained[k][1] for k in ("noenc", "lstm", "sparsemax"))
    assert noenc["sp/entropy/g_hidden/mean"] <= 1e-6 and noenc["sp/diag_share/mean"] == pytest.approx(1.0)
    assert lstm["sp/entropy/g_hidden/mean"] > 0.2 and lstm["sp/diag_share/mean"] < 0.9
    assert lstm["sp/support/frac/mean"] == 1.0 and sparse["sp/support/frac/mean"] < 1.0
    assert "sp/seconds/input_hidden" in lstm  # a timing: recorded, never asserted on


def test_the_bilstms_means_are_its_models_instance_by_instance(trained):
    """Every entropy and τ mean of the trained BiLSTM run (and the share of τ significant at p ≤ 0.05), recomputed
    from its saved model over the instances it analysed, each run alone in float64 (tests/reference.py)."""
    from attn_study.job.plan import load_run

    run, summary = trained["lstm"]
    loaded = load_run(run)
    model, split = loaded.model.double(), loaded.datamodule.split("test")
    frame = pd.read_parquet(run / "analysis" / "sparsity" / "instances.parquet")
    values: dict[str, list] = {}
    for i in frame["index"]:
        text = split.ids[i].tolist()
        scores = {
            "attention": ref.attention(model, text),
            "g_input": ref.gradient_norm(model, text),
            "loo_input": ref.leave_one_out(model, text, predicted_class=True),
            "g_intermediate": ref.hidden_gradient(model, text),
            "loo_intermediate": ref.erase_each(model, text),
        }
        for name, x in scores.items():
            values.setdefault(f"entropy/{name}", []).append(ref.normalised_entropy(x))
            if name != "attention":
                tau, p = ref.tau(scores["attention"], x) if len(text) > 1 else (np.nan, np.nan)
                values.setdefault(f"tau/attn_{name}", []).append(tau)
                values.setdefault(f"p/attn_{name}", []).append(p)
    assert len(values["entropy/attention"]) == 20
    for key, column in values.items():
        if key.startswith("p/"):
            continue
        assert summary[f"sp/{key}/mean"] == pytest.approx(np.nanmean(column), abs=1e-5), key
    p = np.array(values["p/attn_g_input"])
    assert summary["sp/tau/attn_g_input/sig_frac"] == pytest.approx(np.mean(p[~np.isnan(p)] <= 0.05))
    support = [np.mean(ref.attention(model, split.ids[i].tolist()) > 0) for i in frame["index"]]
    assert summary["sp/support/frac/mean"] == pytest.approx(np.mean(support)) == 1.0  # softmax: every token


def test_the_trained_runs_numbers_are_its_models(trained):
    """The end-to-end run's per-instance entropies and τ, and its summary's means, recomputed from the saved model
    instance by instance (tests/reference.py)."""
    from attn_study.job.plan import load_run

    run, summary = trained["sparsemax"]
    model = load_run(run).model.double()
    split = load_run(run).datamodule.split("test")
    frame = pd.read_parquet(run / "analysis" / "sparsity" / "instances.parquet").set_index("index")
    for i in frame.index[:6]:
        text = split.ids[i].tolist()
        alpha = ref.attention(model, text)
        g = ref.gradient_norm(model, text)
        loo = ref.leave_one_out(model, text, predicted_class=True)
        assert frame.loc[i, "entropy_attention"] == pytest.approx(ref.normalised_entropy(alpha), abs=1e-5, nan_ok=True)
        assert frame.loc[i, "entropy_g_input"] == pytest.approx(ref.normalised_entropy(g), abs=1e-5, nan_ok=True)
        assert frame.loc[i, "tau_attn_loo_input"] == pytest.approx(
            ref.tau(alpha, loo / loo.sum())[0], abs=1e-5, nan_ok=True
        )
    assert summary["sp/entropy/g_input/mean"] == pytest.approx(frame["entropy_g_input"].mean())
    assert summary["sp/support/frac/mean"] == pytest.approx((frame["support"] / frame["length"]).mean())


def test_sparsity_outputs(trained):
    run, summary = trained["lstm"]
    folder = run / "analysis" / "sparsity"
    frame = pd.read_parquet(folder / "instances.parquet")
    assert len(frame) == 20 and frame["uid"].is_unique
    assert frame["entropy_g_hidden"].mean() == pytest.approx(summary["sp/entropy/g_hidden/mean"])
    for name in ("fig2_entropies.png", "fig1_tau_attention_vs_importance.png", "input_hidden_gradients.png"):
        assert (folder / name).is_file(), name
    on_disk = json.loads((run / "summary.json").read_text())
    assert on_disk["sp/n_instances"] == 20
    # a final statistic: in the run summary, not in the per-epoch history of csv/metrics.csv
    assert "sp/entropy/g_hidden/mean" not in (run / "csv" / "metrics.csv").read_text().splitlines()[0]
    # the statistics drawn against the epoch (report, epochs.png) are ones the family computes
    assert set(sparsity_keys.TRACKED) <= summary.keys()


def test_the_meister_sweep_spans_orders_of_magnitude_of_lambda_below_zero():
    """Table 2 needs models that differ in sparsity: between λ = −4 and 0.75 training makes them about equally
    sparse, so the grid reaches far below 0 (the paper's Fig. 3 has a log axis there), holds sparsemax (λ = 0)
    and a λ near 1."""
    from omegaconf import OmegaConf

    params = OmegaConf.load("sweeps/meister.yaml").hydra.sweeper.params
    projections = str(params.projection).split(",")
    lams = sorted(float(compose_config(f"projection={p}").projection.lam) for p in projections if "sparsegen" in p)
    negative = [abs(lam) for lam in lams if lam < 0]
    assert max(negative) / min(negative) >= 100 and max(negative) >= 100
    assert "sparsemax" in projections and "softmax" in projections and max(lams) >= 0.9
    assert len(lams) == len(set(lams)) >= 7


@pytest.mark.parametrize("name", ["lstm", "cnn"])
@pytest.mark.parametrize("chunk", [1, 1000])
def test_input_to_hidden_gradients_give_the_boundary_tokens_no_row_and_no_column(name, chunk):
    """<sos> text <eos>: g_{h_p}(x) is a distribution over the text's tokens and p runs over them, so the <sos>/<eos>
    rows and columns are exactly 0 — although the states do depend on those tokens (the per-p loop's gradient there
    is not 0) — and every other entry is the per-p loop's."""
    model = tiny_model(ENCODERS[name], double=True)
    texts = [t for t in SEQS if len(t) > 1] + [[15]]
    batch = token_batch(texts, boundary=True)
    got = input_to_hidden_gradients(model, batch, chunk_size=chunk)
    full = per_p_loop(model, batch)  # every position of <sos> text <eos>, the boundary tokens as any token
    for r, text in enumerate(texts):
        eos = len(text) + 1
        assert full[r, 1:eos, [0, eos]].abs().sum() > 0  # the text's states depend on <sos>/<eos>
        for edge in (0, eos):
            assert torch.all(got[r, :, edge] == 0) and torch.all(got[r, edge, :] == 0), (r, edge)
        torch.testing.assert_close(got[r, 1:eos, 1:eos], full[r, 1:eos, 1:eos])
        assert torch.all(got[r, eos + 1 :] == 0) and torch.all(got[r, :, eos + 1 :] == 0)  # padding
