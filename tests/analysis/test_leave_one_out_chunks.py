"""Leave-one-out of one-layer LSTMs and GRUs (attn_study/analysis/importance/leave_one_out.py) on texts of nearly
equal length: the deletions of one position run as chunks of similar lengths (``GRADIENT_SLACK``: up to 12.5 %
longer than the chunk's shortest), padded to the chunk's longest text — each text's importance must still be that of
deleting the token from that text alone and running the model again, its last tokens included."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from attn_study.analysis.importance.batches import GRADIENT_SLACK, equal_length_chunks
from attn_study.analysis.importance.leave_one_out import (
    deletion_probabilities,
    leave_one_out,
    one_layer_rnn,
    signed_leave_one_out,
)
from attn_study.models import encoders
from tests.helpers import tiny_model, token_batch

RECURRENT = {
    "lstm": partial(encoders.RNNEncoder, hidden_size=6),  # 6 units: 24 gate values split in 5 would show
    "gru": partial(encoders.RNNEncoder, hidden_size=4, cell="gru"),
    "lstm_one_direction": partial(encoders.RNNEncoder, hidden_size=4, bidirectional=False),
}


def texts_of(lengths, seed: int = 0) -> list[list[int]]:
    """Texts of the given lengths, their token ids drawn from 4 … 24 (no padding, <unk> or boundary id)."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(4, 25, (n,), generator=generator).tolist() for n in lengths]


def re_run(model, text: list[int], boundary: bool) -> torch.Tensor:
    """ŷ of the model run on ``text`` alone (wrapped in <sos> … <eos> with ``boundary``)."""
    return model.probabilities(model(token_batch([text], boundary=boundary))[0])[0]


def brute_force(model, texts, boundary: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(TVD, signed): row r, the column of token t of text r: TVD(ŷ(text without t), ŷ(text)), and the drop of the
    predicted class's probability, each deletion a new one-text batch; 0 elsewhere."""
    offset = 1 if boundary else 0
    tvd, signed = (torch.zeros(len(texts), max(map(len, texts)) + 2 * offset, dtype=torch.double) for _ in range(2))
    for r, text in enumerate(texts):
        base = re_run(model, text, boundary)
        c = base.argmax()
        for t in range(len(text)):
            deleted = re_run(model, text[:t] + text[t + 1 :], boundary)
            tvd[r, t + offset] = 0.5 * (deleted - base).abs().sum()
            signed[r, t + offset] = base[c] - deleted[c]
    return tvd, signed


@pytest.mark.parametrize(
    ("name", "lengths", "boundary"),
    [
        ("lstm", (16, 17, 18), False),
        ("gru", (16, 17, 18), False),
        ("lstm_one_direction", (16, 17, 18), False),
        ("lstm", (24, 25, 27, 26), True),
        ("gru", (9, 8), True),
    ],
)
def test_texts_sharing_a_chunk_each_get_their_own_deletions_every_token_included(name, lengths, boundary):
    """Every text, every position: leave-one-out (TVD and signed) equals deleting the token and running the model on
    the shorter text alone — the chunk holding the texts together (512) or cut in two (2)."""
    model = tiny_model(RECURRENT[name], num_classes=3, double=True)
    assert one_layer_rnn(model.encoder)  # the shortcut path, not the general re-run
    texts = texts_of(lengths)
    batch = token_batch(texts, boundary=boundary)
    (together,) = equal_length_chunks(batch["lengths"], slack=GRADIENT_SLACK)  # one chunk: the case under test
    assert len(together) == len(texts)
    with torch.no_grad():
        expected, expected_signed = brute_force(model, texts, boundary)
        probs = model.probabilities(model(batch)[0])
        for chunk_size in (2, 512):
            got = leave_one_out(model, batch, chunk_size=chunk_size)
            torch.testing.assert_close(got, expected, rtol=0, atol=1e-12, msg=f"chunk_size={chunk_size}")
            signed = signed_leave_one_out(model, batch, probs, chunk_size=chunk_size)
            torch.testing.assert_close(signed, expected_signed, rtol=0, atol=1e-12, msg=f"chunk_size={chunk_size}")


def test_each_deletion_of_a_chunk_of_near_equal_texts_is_the_shorter_texts_output():
    """The output distribution of every single deletion (not only its distance): the text one token shorter run
    alone, for texts of 16, 17 and 18 tokens mixed with shorter ones in one batch."""
    model = tiny_model(RECURRENT["lstm"], num_classes=3, double=True, seed=2)
    texts = texts_of((18, 5, 16, 17, 16), seed=1)
    batch = token_batch(texts)
    with torch.no_grad():
        inst, pos, got = deletion_probabilities(model, batch)
        assert len(inst) == sum(map(len, texts))
        for n in range(len(inst)):
            text = texts[int(inst[n])]
            p = int(pos[n])
            expected = re_run(model, text[:p] + text[p + 1 :], boundary=False)
            torch.testing.assert_close(got[n], expected, rtol=0, atol=1e-12, msg=f"text {int(inst[n])}, token {p}")
