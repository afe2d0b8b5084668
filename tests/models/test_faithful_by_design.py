"""Mohankumar et al.'s Orthogonal and Diversity LSTMs, conicity, and Tutek & Šnajder's word-level tying: each
against a case whose answer is known."""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attn_study.errors import UserError
from attn_study.models import attention, encoders, projection
from attn_study.models.classifier import AttentionClassifier, PairAttentionClassifier
from attn_study.models.module import AttentionModule
from attn_study.models.word_tying import WordTying
from tests.helpers import token_batch

SEQS = [[5, 6, 7, 8, 9, 10, 11], [12, 13, 14], [15], [16, 17, 18, 19, 20]]


def brute_conicity(states: np.ndarray) -> float:
    mean = states.mean(0)
    return float(np.mean([abs(s @ mean) / (np.linalg.norm(s) * np.linalg.norm(mean)) for s in states]))


def test_conicity_against_closed_forms_and_brute_force():
    h = torch.zeros(5, 3, 2, dtype=torch.float64)
    h[0, :2] = torch.tensor([[1.0, 0.0], [0.0, 1.0]])  # two orthogonal unit states: cos 1/√2 with their mean
    h[0, 2] = torch.tensor([7.0, 1.0])  # padding: must not count
    h[1] = torch.tensor([[2.0, 1.0], [4.0, 2.0], [1.0, 0.5]])  # one direction: conicity 1
    h[2] = torch.randn(3, 2, dtype=torch.float64)
    h[4, :2] = torch.tensor([[10.0, 0.0], [-1.0, 0.0]])  # the second points away from the mean (9/2, 0): |cos| = 1
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 1, 1], [0, 0, 0], [1, 1, 0]], dtype=torch.bool)
    value = encoders.conicity(h, mask)
    assert value[0].item() == pytest.approx(1 / math.sqrt(2), abs=1e-12)
    assert value[1].item() == pytest.approx(1.0, abs=1e-12)
    assert value[2].item() == pytest.approx(brute_conicity(h[2].numpy()), abs=1e-12)
    assert math.isnan(value[3].item())  # no tokens: undefined
    assert value[4].item() == pytest.approx(1.0, abs=1e-12)  # the authors' |cos|, not (1 − 1)/2 = 0


def _states_by_direction(h: torch.Tensor, length: int, size: int):
    """(forward states in reading order, backward states in their reading order: last token first)."""
    return h[:length, :size], h[:length, size:].flip(0)


def test_orthogonal_lstm_states_are_orthogonal_to_the_mean_of_the_earlier_ones():
    torch.manual_seed(0)
    encoder = encoders.OrthogonalLSTMEncoder(input_dim=6, hidden_size=5).double()
    batch = token_batch(SEQS)
    embedded = torch.randn(len(SEQS), batch["ids"].shape[1], 6, dtype=torch.float64)
    h = encoder(embedded, batch["mask"], batch["lengths"])
    checked = 0
    for row, length in enumerate(batch["lengths"].tolist()):
        for states in _states_by_direction(h[row], length, 5):
            for t in range(1, length):
                earlier = states[:t].mean(0)
                cosine = F.cosine_similarity(states[t], earlier, dim=0)
                assert abs(cosine.item()) < 1e-10
                checked += 1
    assert checked == 2 * sum(n - 1 for n in batch["lengths"].tolist())
    assert torch.all(h[~batch["mask"]] == 0)
    # the vanilla LSTM's states are not orthogonal to their running mean (the test above could see it)
    plain = encoders.OrthogonalLSTMEncoder(input_dim=6, hidden_size=5, orthogonal=False).double()
    plain.load_state_dict(encoder.state_dict())
    forward, _ = _states_by_direction(plain(embedded, batch["mask"], batch["lengths"])[0], 7, 5)
    assert abs(F.cosine_similarity(forward[3], forward[:3].mean(0), dim=0).item()) > 1e-3


def test_without_the_projection_it_is_torch_s_bidirectional_lstm():
    """The stepping, masking and per-sequence reversal against nn.LSTM over packed sequences."""
    torch.manual_seed(1)
    stepped = encoders.OrthogonalLSTMEncoder(input_dim=6, hidden_size=5, orthogonal=False).double()
    packed = encoders.RNNEncoder(input_dim=6, hidden_size=5).double()
    with torch.no_grad():
        for direction, suffix in ((0, ""), (1, "_reverse")):
            cell = stepped.cells[direction]
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                getattr(cell, name).copy_(getattr(packed.rnn, f"{name}_l0{suffix}"))
    batch = token_batch(SEQS)
    embedded = torch.randn(len(SEQS), batch["ids"].shape[1], 6, dtype=torch.float64)
    torch.testing.assert_close(
        stepped(embedded, batch["mask"], batch["lengths"]),
        packed(embedded, batch["mask"], batch["lengths"]),
        atol=1e-12,
        rtol=1e-12,
    )


def test_the_authors_orthogonal_lstm_is_one_direction_and_orthogonal():
    """``bidirectional=False`` (their OrthoLSTM): one cell of ``hidden_size`` units, m = hidden_size, every state
    orthogonal to the mean of the earlier ones; without the projection it is torch's one-direction LSTM."""
    torch.manual_seed(2)
    encoder = encoders.OrthogonalLSTMEncoder(input_dim=6, hidden_size=5, bidirectional=False).double()
    assert len(encoder.cells) == 1 and encoder.output_dim == 5
    batch = token_batch(SEQS)
    embedded = torch.randn(len(SEQS), batch["ids"].shape[1], 6, dtype=torch.float64)
    h = encoder(embedded, batch["mask"], batch["lengths"])
    assert h.shape[-1] == 5 and torch.all(h[~batch["mask"]] == 0)
    for row, length in enumerate(batch["lengths"].tolist()):
        for t in range(1, length):
            assert abs(F.cosine_similarity(h[row, t], h[row, :t].mean(0), dim=0).item()) < 1e-10
    plain = encoders.OrthogonalLSTMEncoder(input_dim=6, hidden_size=5, orthogonal=False, bidirectional=False).double()
    fused = encoders.RNNEncoder(input_dim=6, hidden_size=5, bidirectional=False).double()
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(plain.cells[0], name).copy_(getattr(fused.rnn, f"{name}_l0"))
    torch.testing.assert_close(
        plain(embedded, batch["mask"], batch["lengths"]), fused(embedded, batch["mask"], batch["lengths"])
    )
    last = h[torch.arange(len(SEQS)), batch["lengths"] - 1]
    torch.testing.assert_close(encoder.summarize(h, batch["mask"], batch["lengths"]), last)


@pytest.mark.parametrize(
    "make",
    [
        partial(encoders.OrthogonalLSTMEncoder, hidden_size=5, bidirectional=False, random_initial_state=True),
        partial(encoders.RNNEncoder, hidden_size=5, bidirectional=False, random_initial_state=True),
        partial(encoders.RNNEncoder, hidden_size=5, random_initial_state=True),
    ],
)
def test_a_random_initial_state_in_training_and_zeros_in_eval(make):
    """As Mohankumar et al.'s code, each training pass starts from a fresh random state (two passes differ, and
    differ from the zero start); in eval mode the start is zeros, so every test sees one deterministic model."""
    torch.manual_seed(3)
    encoder = make(input_dim=6).double()
    batch = token_batch(SEQS)
    embedded = torch.randn(len(SEQS), batch["ids"].shape[1], 6, dtype=torch.float64)
    args = (embedded, batch["mask"], batch["lengths"])
    first, second = encoder(*args), encoder(*args)
    encoder.eval()
    zero = encoder(*args)
    assert not torch.allclose(first, second) and not torch.allclose(first, zero)
    torch.testing.assert_close(encoder(*args), zero)
    encoder.random_initial_state = False
    encoder.train()
    torch.testing.assert_close(encoder(*args), zero)  # no dropout inside: train mode from zeros is eval's


def test_the_random_initial_state_is_xavier_uniform_of_a_one_by_batch_by_hidden_tensor():
    """Their ``xavier_uniform(torch.empty(1, B, H))``: fan_in = B·H, fan_out = H, so U(−a, a), a = √(6/(B·H + H))."""
    torch.manual_seed(4)
    like = torch.zeros(64, 3, 2)
    state = torch.stack([encoders.xavier_initial_state(like, 32) for _ in range(50)])
    bound = math.sqrt(6 / (64 * 32 + 32))
    assert state.shape == (50, 64, 32)
    assert state.abs().max() <= bound and state.abs().max() > 0.99 * bound
    assert state.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.02)


def test_mohankumar_sweep_runs_the_authors_one_direction_lstms(make_cfg):
    """``sweep=mohankumar`` compares their three LSTMs as their code builds them (one direction of 256 units, a
    random start in training); the bidirectional 2 × 128 ones stay as labelled variants."""
    from omegaconf import OmegaConf

    encoders_swept = str(OmegaConf.load("sweeps/mohankumar.yaml").hydra.sweeper.params.encoder).split(",")
    assert encoders_swept == ["vanilla_lstm", "orthogonal_lstm", "diversity_lstm"]
    for name in encoders_swept:
        cfg = make_cfg(f"encoder={name}").encoder
        assert (cfg.hidden_size, cfg.bidirectional, cfg.random_initial_state) == (256, False, True)
    assert make_cfg("encoder=diversity_lstm").encoder.conicity_weight == 0.5
    for name in ("orthogonal_bilstm", "diversity_bilstm"):
        cfg = make_cfg(f"encoder={name}").encoder
        assert (cfg.hidden_size, cfg.bidirectional) == (128, True) and not cfg.get("random_initial_state", False)


def test_pair_models_orthogonalise_the_passage_only():
    model = PairAttentionClassifier(
        vocab_size=30,
        num_classes=3,
        encoder=partial(encoders.OrthogonalLSTMEncoder, hidden_size=4),
        scorer=attention.AdditiveScorer,
        projection=projection.Softmax(),
        embedding_dim=6,
    )
    assert model.encoder.orthogonal and not model.question_encoder.orthogonal


def _flat(encoder, seed: int = 0) -> AttentionClassifier:
    torch.manual_seed(seed)
    return AttentionClassifier(
        vocab_size=30,
        num_classes=2,
        encoder=encoder,
        scorer=attention.AdditiveScorer,
        projection=projection.Softmax(),
        embedding_dim=6,
    )


def _train(module: AttentionModule, steps: int = 60) -> AttentionModule:
    """A few optimiser steps on one batch, the module's own training loss (logging switched off)."""
    module.log = lambda *args, **kwargs: None
    optimizer = module.configure_optimizers()
    batch = token_batch(SEQS, labels=[0, 1, 0, 1])
    for _ in range(steps):
        optimizer.zero_grad()
        module.training_step(batch, 0).backward()
        optimizer.step()
    return module


def test_the_diversity_penalty_lowers_conicity():
    batch = token_batch(SEQS, labels=[0, 1, 0, 1])
    results = {}
    for weight in (0.0, 0.5):
        model = _flat(partial(encoders.RNNEncoder, hidden_size=4, conicity_weight=weight))
        _train(AttentionModule(model, lr=0.05))
        enc = model.eval().encode(batch)
        results[weight] = encoders.conicity(enc.hidden, enc.mask).nanmean().item()
    assert results[0.5] < results[0.0] - 0.2, results


def test_word_tying_losses_by_hand():
    torch.manual_seed(2)
    tying = WordTying(hidden_dim=4, embedding_dim=3, kind="predict").double()
    embedding = torch.nn.Embedding(10, 3).double()
    hidden = torch.randn(2, 3, 4, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]], dtype=torch.bool)
    ids = torch.tensor([[4, 7, 0], [9, 0, 0]])
    expected = []
    for b, t in ((0, 0), (0, 1), (1, 0)):
        logits = embedding.weight @ (tying.to_embedding.weight @ hidden[b, t] + tying.to_embedding.bias)
        expected.append(-torch.log_softmax(logits, 0)[ids[b, t]])
    assert tying(hidden, mask, ids, embedding).item() == pytest.approx(torch.stack(expected).mean().item(), rel=1e-12)
    tying.kind = "l2"
    squared = [
        ((tying.to_embedding.weight @ hidden[b, t] + tying.to_embedding.bias - embedding.weight[ids[b, t]]) ** 2).sum()
        for b, t in ((0, 0), (0, 1), (1, 0))
    ]
    assert tying(hidden, mask, ids, embedding).item() == pytest.approx(torch.stack(squared).mean().item(), rel=1e-12)


def test_word_tying_makes_states_predict_their_words():
    batch = token_batch(SEQS, labels=[0, 1, 0, 1])
    losses = {}
    for weight in (0.0, 1.0):
        model = _flat(partial(encoders.RNNEncoder, hidden_size=4), seed=3)
        module = _train(AttentionModule(model, lr=0.05, word_tying=weight), steps=80)
        probe = module.word_tying or WordTying(8, 6)
        enc = model.eval().encode(batch)
        losses[weight] = probe(enc.hidden, enc.mask, batch["ids"], model.embedding).item()
        if weight:
            names = {n for n, _ in module.named_parameters()}
            assert "word_tying.to_embedding.weight" in names  # trained and saved with the module
    assert losses[1.0] < 0.5 * losses[0.0], losses


def test_objectives_refuse_models_without_a_state_per_token():
    from attn_study.models.han import HierarchicalAttentionClassifier

    han = HierarchicalAttentionClassifier.__new__(HierarchicalAttentionClassifier)
    torch.nn.Module.__init__(han)
    han.num_classes = 2
    han.encoder = encoders.RNNEncoder(input_dim=4, hidden_size=2, conicity_weight=0.5)
    with pytest.raises(UserError, match="encoder.conicity_weight=0.5 needs a flat or pair model"):
        AttentionModule(han)
    with pytest.raises(UserError, match="training.word_tying.kind=mlm"):
        AttentionModule(_flat(partial(encoders.RNNEncoder, hidden_size=4)), word_tying=1.0, word_tying_kind="mlm")


@pytest.mark.parametrize(
    "options, logged",
    [
        (["encoder=orthogonal_lstm", "encoder.hidden_size=4"], None),
        (["encoder=orthogonal_bilstm", "encoder.hidden_size=4"], None),
        (["encoder=diversity_lstm", "encoder.hidden_size=4"], "train/conicity_penalty"),
        (["encoder=diversity_bilstm", "encoder.hidden_size=4"], "train/conicity_penalty"),
        (["encoder.hidden_size=4", "training.word_tying.weight=0.5"], "train/word_tying_loss"),
    ],
)
def test_each_option_composes_trains_and_reports_conicity_with_its_interval(make_cfg, tmp_path, options, logged):
    from attn_study.job.attempt import train_and_test
    from tests.helpers import TINY

    summary = train_and_test(make_cfg(*TINY, "logger=csv", *options), tmp_path / "run")
    assert summary["test/conicity/n"] == 32
    assert summary["test/conicity/ci_low"] <= summary["test/conicity/mean"] <= summary["test/conicity/ci_high"]
    header = (tmp_path / "run" / "csv" / "metrics.csv").read_text().splitlines()[0]
    assert "val/conicity/mean" in header  # tracked per epoch
    if logged:
        assert logged in header


# -- word tying: its weight λ and what its gradient reaches (issue 41) -------------------------------------------


def test_the_training_loss_is_the_task_loss_plus_lambda_times_the_tying_loss():
    """λ = 0.3 (not 0 or 1, where λ·L = L or 0 hides a missing factor): the loss the optimiser sees equals the
    binary cross-entropy −mean[y log σ(z) + (1 − y) log(1 − σ(z))] plus 0.3 × the word-level loss, each worked
    out here from the model's logits and states (the predict kind: −log softmax(E (W h_t + b))[w_t])."""
    batch = token_batch(SEQS, labels=[0, 1, 0, 1])
    for kind in ("predict", "l2"):
        model = _flat(partial(encoders.RNNEncoder, hidden_size=4), seed=4).double().eval()
        module = AttentionModule(model, word_tying=0.3, word_tying_kind=kind).double()
        module.log = lambda *args, **kwargs: None
        loss = module.training_step(batch, 0)
        with torch.no_grad():
            z = model(batch)[0][:, 0]
            y = batch["labels"].double()
            task = -(y * torch.log(torch.sigmoid(z)) + (1 - y) * torch.log(1 - torch.sigmoid(z))).mean()
            hidden = model.encode(batch).hidden
            tie, embedding = module.word_tying.to_embedding, model.embedding.weight
            terms = []
            for b, t in batch["mask"].nonzero().tolist():
                mapped = tie.weight @ hidden[b, t] + tie.bias
                word = batch["ids"][b, t]
                if kind == "predict":
                    terms.append(-torch.log_softmax(embedding @ mapped, 0)[word])
                else:
                    terms.append(((mapped - embedding[word]) ** 2).sum())
            tying = torch.stack(terms).mean()
        # (the module computes the task loss against float32 targets: equal to 1e-7, not to float64's 1e-15)
        assert loss.item() == pytest.approx((task + 0.3 * tying).item(), rel=1e-6), kind
        assert tying.item() > 0.1  # a term large enough that a missing factor shows


def test_the_l2_tying_target_sends_no_gradient_to_the_embeddings():
    """kind='l2' pulls the states towards their words' embeddings, never the embeddings towards the states: the
    loss's gradient reaches the states (and the map W) but not the embedding matrix. (The predict kind's
    output is tied to E: there the gradient does reach it.)"""
    torch.manual_seed(0)
    embedding = torch.nn.Embedding(10, 3).double()
    hidden = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]], dtype=torch.bool)
    ids = torch.tensor([[4, 7, 0], [9, 0, 0]])
    WordTying(hidden_dim=4, embedding_dim=3, kind="l2").double()(hidden, mask, ids, embedding).backward()
    assert embedding.weight.grad is None or not embedding.weight.grad.any()
    assert hidden.grad[mask].abs().sum() > 0
    predict = WordTying(hidden_dim=4, embedding_dim=3, kind="predict").double()
    predict(hidden, mask, ids, embedding).backward()
    assert embedding.weight.grad is not None and embedding.weight.grad.any()


def test_word_tying_over_no_position_is_zero_and_over_one_position_is_its_loss():
    """No attended position: the loss is exactly 0 (not the NaN of a mean over nothing) and still part of the
    graph; one position: that position's loss, worked out by hand, for both kinds."""
    torch.manual_seed(1)
    embedding = torch.nn.Embedding(10, 3).double()
    hidden = torch.randn(1, 3, 4, dtype=torch.float64, requires_grad=True)
    ids = torch.tensor([[4, 7, 2]])
    for kind in ("predict", "l2"):
        tying = WordTying(hidden_dim=4, embedding_dim=3, kind=kind).double()
        none = tying(hidden, torch.zeros(1, 3, dtype=torch.bool), ids, embedding)
        assert none.item() == 0.0 and none.requires_grad, kind
        mapped = tying.to_embedding.weight @ hidden[0, 1] + tying.to_embedding.bias
        if kind == "predict":
            expected = -torch.log_softmax(embedding.weight @ mapped, 0)[7]
        else:
            expected = ((mapped - embedding.weight[7]) ** 2).sum()
        one = tying(hidden, torch.tensor([[False, True, False]]), ids, embedding)
        assert one.item() == pytest.approx(expected.item(), rel=1e-12) and one.item() > 0, kind
