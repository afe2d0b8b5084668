"""Mohankumar et al.'s random initial state (``random_initial_state``, attn_study/models/encoders.py): in training
every pass starts EACH direction of a bidirectional LSTM or GRU from a drawn state — the backward one too —, in eval
mode from zeros. The expected states are torch's own bidirectional ``nn.LSTM``/``nn.GRU`` run on each text alone
from the given (h₀, c₀) of both directions."""

from __future__ import annotations

import sys
from functools import partial

import pytest
import torch
from torch import nn

from attn_study.models import encoders
from tests.helpers import token_batch

SEQS = [[5, 6, 7, 8, 9, 10], [11, 12, 13], [14], [15, 16, 17, 18]]
HIDDEN, DIM = 3, 5


def known_state(like: torch.Tensor, hidden_size: int) -> torch.Tensor:
    """A state (B, hidden_size) that differs from row to row and from zero: what ``xavier_initial_state`` is
    replaced with, so that the expected output can be computed from it."""
    b = like.shape[0]
    return torch.linspace(-0.9, 0.8, b * hidden_size, dtype=like.dtype).reshape(b, hidden_size)


def encoder_module(encoder) -> object:
    """The module whose ``xavier_initial_state`` the encoder's class calls (wherever the class is defined)."""
    return sys.modules[type(encoder).__module__]


def as_torch_rnn(encoder) -> nn.RNNBase:
    """A bidirectional ``nn.LSTM``/``nn.GRU`` with the encoder's weights: the RNNEncoder's own module, or the two
    LSTM cells of an OrthogonalLSTMEncoder (orthogonal=False) copied into one."""
    if isinstance(encoder, encoders.RNNEncoder):
        return encoder.rnn
    rnn = nn.LSTM(DIM, HIDDEN, batch_first=True, bidirectional=True).double()
    with torch.no_grad():
        for suffix, cell in zip(("", "_reverse"), encoder.cells):
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                getattr(rnn, f"{name}_l0{suffix}").copy_(getattr(cell, name))
    return rnn


def expected_states(rnn: nn.RNNBase, embedded, lengths, start) -> torch.Tensor:
    """Each text alone (no padding) through torch's bidirectional RNN from ``start`` (B, H) for h₀ — and c₀ of an
    LSTM — of BOTH directions (None: zeros); 0 on padding."""
    out = torch.zeros(embedded.shape[0], embedded.shape[1], 2 * rnn.hidden_size, dtype=embedded.dtype)
    for b, n in enumerate(lengths.tolist()):
        state = None
        if start is not None:
            h0 = start[b].expand(2, 1, -1).contiguous()  # (directions, batch 1, H): forward, backward
            state = (h0, h0.clone()) if isinstance(rnn, nn.LSTM) else h0
        out[b, :n] = rnn(embedded[b : b + 1, :n], state)[0][0]
    return out


BIDIRECTIONAL = {
    "lstm": partial(encoders.RNNEncoder, hidden_size=HIDDEN),
    "gru": partial(encoders.RNNEncoder, hidden_size=HIDDEN, cell="gru"),
    "orthogonal_cells": partial(encoders.OrthogonalLSTMEncoder, hidden_size=HIDDEN, orthogonal=False),
}


@pytest.mark.parametrize("name", list(BIDIRECTIONAL))
def test_in_training_both_directions_start_from_the_drawn_state_and_in_eval_from_zeros(name, monkeypatch):
    torch.manual_seed(0)
    encoder = BIDIRECTIONAL[name](input_dim=DIM, random_initial_state=True).double()
    batch = token_batch(SEQS)
    embedded = torch.randn(len(SEQS), batch["ids"].shape[1], DIM, dtype=torch.float64)
    drawn = []

    def draw(like, hidden_size):
        drawn.append(hidden_size)
        return known_state(like, hidden_size)

    monkeypatch.setattr(encoder_module(encoder), "xavier_initial_state", draw)
    rnn = as_torch_rnn(encoder)
    args = (embedded, batch["mask"], batch["lengths"])
    with torch.no_grad():
        trained = encoder.train()(*args)
        start = known_state(embedded, HIDDEN)
        torch.testing.assert_close(trained, expected_states(rnn, embedded, batch["lengths"], start))
        # the start matters in both halves: from zeros each direction reads differently
        from_zeros = expected_states(rnn, embedded, batch["lengths"], None)
        last = batch["lengths"] - 1
        rows = torch.arange(len(SEQS))
        assert (trained[:, 0, :HIDDEN] - from_zeros[:, 0, :HIDDEN]).abs().min() > 1e-6  # forward, first token
        assert (trained[rows, last, HIDDEN:] - from_zeros[rows, last, HIDDEN:]).abs().min() > 1e-6  # backward, last
        assert drawn and set(drawn) == {HIDDEN}
        drawn.clear()
        evaluated = encoder.eval()(*args)
        torch.testing.assert_close(evaluated, from_zeros)
        assert drawn == []  # nothing drawn in eval mode


@pytest.mark.parametrize(
    "make",
    [
        partial(encoders.RNNEncoder, hidden_size=HIDDEN),
        partial(encoders.RNNEncoder, hidden_size=HIDDEN, cell="gru"),
        partial(encoders.OrthogonalLSTMEncoder, hidden_size=HIDDEN),
    ],
)
def test_each_training_pass_draws_a_new_start_for_each_direction(make):
    """With the real draws (no patch): every text's forward state at its first token and backward state at its last
    token — the states read straight from the start — differ from the zero start's and between two passes."""
    torch.manual_seed(1)
    encoder = make(input_dim=DIM, random_initial_state=True).double()
    batch = token_batch(SEQS)
    embedded = torch.randn(len(SEQS), batch["ids"].shape[1], DIM, dtype=torch.float64)
    args = (embedded, batch["mask"], batch["lengths"])
    rows, last = torch.arange(len(SEQS)), batch["lengths"] - 1
    with torch.no_grad():
        first_pass, second_pass = encoder.train()(*args), encoder(*args)
        zeros = encoder.eval()(*args)
    for other in (second_pass, zeros):
        assert (first_pass[:, 0, :HIDDEN] - other[:, 0, :HIDDEN]).abs().amax(-1).min() > 1e-6
        assert (first_pass[rows, last, HIDDEN:] - other[rows, last, HIDDEN:]).abs().amax(-1).min() > 1e-6


@pytest.mark.parametrize(("batch", "hidden"), [(1, 2), (3, 1)])
def test_the_drawn_state_is_uniform_within_xavier_bound_of_a_one_by_batch_by_hidden_tensor(batch, hidden):
    """Mohankumar et al. draw ``xavier_uniform_`` of a (1, B, H) tensor: fan_in = B·H, fan_out = 1·H, so U(−a, a) with
    a = √(6 / (B·H + H)) — for B = 1, H = 2: √(6/4); for B = 3, H = 1: √(6/4) too (a (2, B, H) tensor would give
    √(6/6) and √(6/5)). 4000 draws reach within 0.5 % of a."""
    torch.manual_seed(2)
    like = torch.zeros(batch, 7, DIM, dtype=torch.float64)
    draws = torch.stack([encoders.xavier_initial_state(like, hidden) for _ in range(4000)])
    bound = (6 / (batch * hidden + hidden)) ** 0.5
    assert draws.shape == (4000, batch, hidden) and draws.dtype == torch.float64
    assert 0.995 * bound < draws.abs().max() <= bound
