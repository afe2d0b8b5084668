"""Gradient and leave-one-out importance against closed forms and brute force."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from attn_study.analysis.importance import (
    gradient_importance,
    gradient_norm_importance,
    leave_one_out,
    predict,
)
from attn_study.models import attention, encoders, projection
from tests.helpers import tiny_model, token_batch

SEQS = [[5, 6, 7, 8, 9, 10, 11, 12, 13], [12, 13, 14], [15], [16, 17, 18, 19, 20, 2, 3], [4, 4]]


def test_gradient_importance_closed_form_noenc_linear_decoder():
    """noenc + dot attention + one sigmoid logit z = w·Σ α_t e_t + b, α held constant:
    ∂ŷ₁/∂e_t = σ'(z) α_t w, so g_t = Σ_c |∇ŷ_c·e_t| = 2 σ'(z) α_t |w·e_t|."""
    model = tiny_model(encoders.NoEncoder, scorer=attention.DotScorer, double=True)
    batch = token_batch(SEQS)
    enc, alpha, probs = predict(model, batch)
    e = model.embed(batch).detach()
    w = model.output.weight[0].detach()
    p1 = probs[:, 1]
    expected = 2 * (p1 * (1 - p1))[:, None] * alpha * (e @ w).abs()
    got = gradient_importance(model, batch, normalise=False, classes="sum")
    torch.testing.assert_close(got, expected * batch["mask"])
    # the predicted class alone, through its log-odds: |∇ŷ_c·e_t| / (ŷ_c(1 − ŷ_c)) = α_t |w·e_t|, the
    # same once normalised
    torch.testing.assert_close(
        gradient_importance(model, batch, normalise=False), alpha * (e @ w).abs() * batch["mask"]
    )
    normalised = gradient_importance(model, batch)
    torch.testing.assert_close(normalised.sum(1), torch.ones(len(SEQS), dtype=torch.double))
    # with the attention not detached the gradient differs (α depends on e through the scores)
    assert not torch.allclose(
        gradient_importance(model, batch, detach_attention=False, normalise=False, classes="sum"), got
    )


def test_gradient_importance_multiclass_sums_over_outputs_when_asked():
    """Σ_c |∇ŷ_c·e_t| of each text, also of two texts of one length computed together (one backward pass of the
    batch's summed outputs: each row its own gradient, not a share of it)."""
    model = tiny_model(partial(encoders.RNNEncoder, hidden_size=4), num_classes=3, double=True)
    batch = token_batch(SEQS[:2] + [[7, 8, 9]])
    got = gradient_importance(model, batch, normalise=False, classes="sum")
    expected = torch.zeros_like(got)
    for c in range(3):
        emb = model.embed(batch).detach().requires_grad_(True)
        enc = model.encode(batch, embedded=emb)
        probs = model.probabilities(model.decode(enc, model.attend(enc).detach()))
        (grad,) = torch.autograd.grad(probs[:, c].sum(), emb)
        expected += (grad * emb).sum(-1).abs()
    torch.testing.assert_close(got, expected * batch["mask"])


def test_gradient_norm_importance_matches_per_instance_autograd():
    model = tiny_model(partial(encoders.CNNEncoder, kernel_sizes=(3,), filters=4), double=True)
    batch = token_batch(SEQS)
    got = gradient_norm_importance(model, batch)
    for row, seq in enumerate(SEQS):
        single = token_batch([seq])
        emb = model.embed(single).detach().requires_grad_(True)
        enc = model.encode(single, embedded=emb)
        probs = model.probabilities(model.decode(enc, model.attend(enc)))
        probs[0, probs[0].argmax()].backward()
        norms = emb.grad[0].norm(dim=-1)
        torch.testing.assert_close(got[row, : len(seq)], norms / norms.sum())


def brute_force_loo(model, seqs):
    out = torch.zeros(len(seqs), max(map(len, seqs)), dtype=torch.double)
    for row, seq in enumerate(seqs):
        base = model.probabilities(model(token_batch([seq]))[0])[0]
        if len(seq) == 1:
            out[row, 0] = float("nan")
            continue
        for t in range(len(seq)):
            deleted = model.probabilities(model(token_batch([seq[:t] + seq[t + 1 :]]))[0])[0]
            out[row, t] = 0.5 * (deleted - base).abs().sum()
    return out


ENCODERS = {
    "average": partial(encoders.AverageEncoder, hidden_size=5),
    "noenc": encoders.NoEncoder,
    "cnn": partial(encoders.CNNEncoder, kernel_sizes=(1, 3, 5, 7), filters=3),
    "conv": partial(encoders.CNNEncoder, kernel_sizes=(3, 5), filters=3),
    "lstm": partial(encoders.RNNEncoder, hidden_size=4),
    "gru": partial(encoders.RNNEncoder, hidden_size=4, cell="gru"),
    "lstm_one_direction": partial(encoders.RNNEncoder, hidden_size=4, bidirectional=False),
    "lstm_two_layers": partial(encoders.RNNEncoder, hidden_size=4, num_layers=2),
    "transformer": partial(encoders.TransformerEncoder, model_dim=4, num_heads=2, num_layers=1, ff_dim=8),
}


@pytest.mark.parametrize("name", list(ENCODERS))
@pytest.mark.parametrize("proj", [projection.Softmax, projection.Sparsemax])
@pytest.mark.parametrize("chunk_size", [4, 512])
def test_leave_one_out_equals_brute_force_deletion(name, proj, chunk_size):
    """Chunks of 4 deletions cut across instances (one instance per call where an instance's deletions are
    batched together, as the context-free encoders' are); 512 puts every instance in one call."""
    model = tiny_model(ENCODERS[name], proj=proj, num_classes=3, double=True)
    with torch.no_grad():
        expected = brute_force_loo(model, SEQS)
        got = leave_one_out(model, token_batch(SEQS), chunk_size=chunk_size)
    torch.testing.assert_close(got, expected, equal_nan=True)
    assert torch.isnan(got[2, 0]) and got[2, 1:].eq(0).all()  # length 1: NaN; padding: 0


@pytest.mark.parametrize("name", ["average", "noenc"])
@pytest.mark.parametrize(
    "proj",
    [projection.Softmax, projection.Sparsemax, projection.Entmax15, partial(projection.SparsegenLin, lam=-1.0)],
)
@pytest.mark.parametrize("chunk_size", [3, 512])
def test_context_free_leave_one_out_with_boundary_tokens_equals_re_running(name, proj, chunk_size):
    """<sos> text <eos>: each text token deleted and the model run again on what is left, the one-token text
    included (deleting its token leaves nothing attended: the model's output for an empty attention), one
    instance per call or all in one."""
    model = tiny_model(ENCODERS[name], proj=proj, num_classes=3, double=True)
    texts = [[15], [5, 6, 7, 8], [9, 9], [10, 11, 12]]
    with torch.no_grad():
        got = leave_one_out(model, token_batch(texts, boundary=True), chunk_size=chunk_size)
        for r, text in enumerate(texts):
            base = model.probabilities(model(token_batch([text], boundary=True))[0])[0]
            for t in range(len(text)):
                rest = token_batch([text[:t] + text[t + 1 :]], boundary=True)
                expected = 0.5 * (model.probabilities(model(rest)[0])[0] - base).abs().sum()
                torch.testing.assert_close(got[r, t + 1], expected, msg=f"text {r}, token {t}")
    assert got[:, 0].eq(0).all()  # <sos> is never deleted


@pytest.mark.parametrize("name", ["lstm", "gru", "lstm_one_direction"])
@pytest.mark.parametrize("boundary", [False, True])
def test_recurrent_leave_one_out_runs_only_past_the_deletion_and_equals_re_running(name, boundary):
    """One-layer LSTMs and GRUs take the shortcut (each direction re-run from the state beside the deletion, an
    LSTM's cells recovered from its outputs); their deletions equal running the model on the shorter text, with
    and without <sos>/<eos>, for the probabilities of every deletion."""
    from attn_study.analysis.importance.leave_one_out import deletion_probabilities, one_layer_rnn

    model = tiny_model(ENCODERS[name], num_classes=3, double=True)
    assert one_layer_rnn(model.encoder) and not one_layer_rnn(tiny_model(ENCODERS["lstm_two_layers"]).encoder)
    batch = token_batch(SEQS, boundary=boundary)
    with torch.no_grad():
        inst, pos, got = deletion_probabilities(model, batch, chunk_size=5)
        for n in range(len(inst)):
            seq = batch["ids"][inst[n], : batch["lengths"][inst[n]]].tolist()
            shorter = token_batch([seq[: pos[n]] + seq[pos[n] + 1 :]])
            if boundary:
                shorter["token_mask"] = shorter["mask"].clone()
                shorter["token_mask"][:, [0, -1]] = False
            expected = model.probabilities(model(shorter)[0])[0]
            torch.testing.assert_close(got[n], expected, rtol=0, atol=1e-12)
    assert len(inst) == sum(len(s) for s in SEQS if len(s) > 1 or boundary)


def test_equal_length_chunks_cover_every_index_once_one_length_each():
    from attn_study.analysis.importance.batches import equal_length_chunks

    lengths = torch.tensor([5, 3, 5, 9, 3, 3, 5, 1])
    chunks = equal_length_chunks(lengths, chunk_size=2)
    assert sorted(torch.cat(chunks).tolist()) == list(range(len(lengths)))
    assert all(len(c) <= 2 and lengths[c].unique().numel() == 1 for c in chunks)
    assert [int(lengths[c[0]]) for c in chunks] == [1, 3, 3, 5, 5, 9]  # shortest first
    # one sequence per call when asked (the tightest memory bound), in the order of their lengths
    assert [c.tolist() for c in equal_length_chunks(lengths, chunk_size=1)] == [[7], [1], [4], [5], [0], [2], [6], [3]]


@pytest.mark.parametrize("boundary", [False, True])
def test_gradient_methods_of_a_mixed_length_batch_are_each_instances_own(boundary):
    """Every gradient method runs a batch's instances by length (no padding): on a batch of mixed lengths each
    row equals the method on that instance alone, in its own rows and nowhere else."""
    from attn_study.analysis.importance import input_to_hidden_gradients, input_x_gradient, integrated_gradients

    seqs = SEQS + [[7, 8, 9], [21, 22, 23, 24, 5, 6, 8]]  # two lengths twice
    model = tiny_model(num_classes=3, double=True)
    batch = token_batch(seqs, boundary=boundary)
    target = predict(model, batch)[2].argmax(-1)
    methods = {
        "gradient": lambda b, t: gradient_importance(model, b, normalise=False),
        "grad_norm": lambda b, t: gradient_norm_importance(model, b, normalise=False),
        "input_x_gradient": lambda b, t: input_x_gradient(model, b, t),
        "integrated_gradients": lambda b, t: torch.cat(
            [x.reshape(len(t), -1) for x in integrated_gradients(model, b, t, steps=7, internal_batch_size=5)], 1
        ),
        "input_hidden": lambda b, t: input_to_hidden_gradients(model, b, chunk_size=3).flatten(1),
    }
    for name, method in methods.items():
        together = method(batch, target)
        for row, seq in enumerate(seqs):
            alone = method(token_batch([seq], boundary=boundary), target[row : row + 1])[0]
            width = batch["lengths"][row]
            if name == "input_hidden":  # (T, T) flattened: the instance's own T' × T' block, 0 elsewhere
                t = batch["mask"].shape[1]
                block = together[row].view(t, t)
                torch.testing.assert_close(block[:width, :width].flatten(), alone, rtol=0, atol=1e-12)
                assert block[width:].eq(0).all() and block[:, width:].eq(0).all()
            elif name == "integrated_gradients":  # scores, then the completeness gap
                t = batch["mask"].shape[1]
                torch.testing.assert_close(together[row, :width], alone[:width], rtol=0, atol=1e-12)
                torch.testing.assert_close(together[row, t], alone[width], rtol=0, atol=1e-12)
                assert together[row, width:t].eq(0).all()
            else:
                torch.testing.assert_close(together[row, :width], alone, rtol=0, atol=1e-12)
                assert together[row, width:].eq(0).all(), name


@pytest.mark.parametrize("name", list(ENCODERS))
def test_deleting_any_token_of_a_run_of_equal_tokens_gives_exactly_one_value(name):
    """Deleting either "the" of "the the" leaves the same text: the two importances are exactly equal (a tie for
    Kendall's τ-b), whichever shortcut computed them."""
    model = tiny_model(ENCODERS[name], num_classes=3, double=True)
    got = leave_one_out(model, token_batch([[5, 6, 6, 6, 7], [4, 4], [8, 9, 9]]), chunk_size=4)
    assert got[0, 1] == got[0, 2] == got[0, 3] and got[1, 0] == got[1, 1] and got[2, 1] == got[2, 2]
    assert got[0, 0] != got[0, 1] and got[2, 0] != got[2, 1]


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        ([[5, 6, 6, 6, 7], [4, 4], [8, 9, 9, 8]], [0, 1, 1, 1, 4, 5, 5, 7, 8, 8, 10]),
        # a run at the batch's very first deletion, and one at the end of a text followed by the next text's equal
        # first token (different texts: never one run)
        ([[4, 4, 5], [6, 7, 7], [7, 8]], [0, 0, 2, 3, 4, 4, 6, 7]),
    ],
)
def test_each_deletion_points_to_the_first_of_its_run_of_equal_tokens(texts, expected):
    from attn_study.analysis.importance.leave_one_out import deletion_index, same_sequence

    batch = token_batch(texts)
    inst, pos, _ = deletion_index(batch)
    assert same_sequence(batch, inst, pos).tolist() == expected


def test_a_chunk_of_similar_lengths_keeps_its_longest_text_whole():
    """``by_length`` puts texts of 8 and 9 tokens in one chunk (within ``GRADIENT_SLACK``), cut to its longest: each
    text's gradient importance is the one it has alone, its last token included."""
    seqs = [[5, 6, 7, 8, 9, 10, 11, 12], [4, 12, 13, 14, 15, 16, 17, 18, 19]]
    model = tiny_model(partial(encoders.RNNEncoder, hidden_size=4), double=True)
    together = gradient_importance(model, token_batch(seqs), detach_attention=True, normalise=False)
    for row, seq in enumerate(seqs):
        alone = gradient_importance(model, token_batch([seq]), detach_attention=True, normalise=False)[0]
        assert together[row, : len(seq)] == pytest.approx(alone[: len(seq)], abs=1e-12)
        assert alone[len(seq) - 1] != 0


def test_each_registry_method_is_the_computation_its_name_says():
    """``importance("gradient")`` is Jain & Wallace's gradient, the attention held fixed; ``grad_norm`` lets the
    gradient flow through the attention (the two differ on a model whose attention depends on the input)."""
    from attn_study.analysis.importance import importance

    model = tiny_model(partial(encoders.RNNEncoder, hidden_size=4), double=True)
    batch = token_batch(SEQS[:2])
    _, alpha, probs = predict(model, batch)
    fixed = gradient_importance(model, batch, detach_attention=True, normalise=False)
    flowing = gradient_importance(model, batch, detach_attention=False, normalise=False)
    assert not torch.allclose(fixed, flowing)
    torch.testing.assert_close(importance("gradient", model, batch, alpha, probs)[0], fixed)
    torch.testing.assert_close(
        importance("grad_norm", model, batch, alpha, probs)[0],
        gradient_norm_importance(model, batch, detach_attention=False, normalise=False),
    )
