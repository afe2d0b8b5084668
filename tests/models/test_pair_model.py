"""Pair-task model: query-conditioned attention, candidate answers, staging, importance."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
import torch

from attn_study.analysis.importance import leave_one_out
from attn_study.data.datamodule import collate
from attn_study.models import attention, encoders, projection
from attn_study.models.classifier import PairAttentionClassifier

ENCODERS = {
    "lstm": partial(encoders.RNNEncoder, hidden_size=4),
    "cnn": partial(encoders.CNNEncoder, kernel_sizes=(1, 3), filters=3),
    "average": partial(encoders.AverageEncoder, hidden_size=6),
}
PASSAGES = [[5, 6, 7, 8, 9, 10], [11, 12], [13, 14, 15, 16]]
QUESTIONS = [[20, 21], [22, 23, 24], [20]]
CANDIDATES = [(0, 2), (1, 2, 3), (3,)]


def batch_of(passages=PASSAGES, questions=QUESTIONS, candidates=CANDIDATES):
    items = [
        {"index": i, "ids": np.array(p), "label": c[0], "query_ids": np.array(q), "candidates": c}
        for i, (p, q, c) in enumerate(zip(passages, questions, candidates))
    ]
    return collate(items, num_classes=4)


def make(enc, scorer=attention.AdditiveScorer):
    torch.manual_seed(0)
    model = PairAttentionClassifier(
        vocab_size=30,
        num_classes=4,
        encoder=ENCODERS[enc],
        scorer=scorer,
        projection=projection.Softmax(),
        embedding_dim=5,
        decoder_dim=6,
    )
    return model.double().eval()


@pytest.mark.parametrize("enc", list(ENCODERS))
@pytest.mark.parametrize("scorer", [attention.AdditiveScorer, attention.DotScorer])
def test_query_conditions_attention_and_answers_stay_in_candidates(enc, scorer):
    model = make(enc, scorer)
    batch = batch_of()
    logits, alpha = model(batch)
    probs = model.probabilities(logits)
    assert torch.all(probs[~batch["candidates"]] == 0)
    torch.testing.assert_close(probs.sum(-1), torch.ones(3, dtype=torch.double))
    enc_out = model.encode(batch)
    torch.testing.assert_close(model.decode(enc_out, model.attend(enc_out)), logits)
    torch.testing.assert_close(model.decode_many(enc_out, alpha[:, None, :])[:, 0], logits)
    # another question over the same passage changes the attention
    _, alpha_other = model(batch_of(questions=[[24, 23], [20], [21, 22]]))
    assert not torch.allclose(alpha_other, alpha)


@pytest.mark.parametrize("enc, half", [("lstm", 4), ("cnn", 3), ("average", 3)])
def test_without_a_decoder_size_the_output_layer_is_half_the_encoders_output(enc, half):
    """``decoder_dim=None`` is Jain & Wallace's AttnDecoderQA: W_p, W_q map the m-dimensional context and
    question to m // 2 (BiLSTM 2 × 4 → 4, CNN 2 × 3 → 3, Average 6 → 3)."""
    model = PairAttentionClassifier(
        vocab_size=30,
        num_classes=4,
        encoder=ENCODERS[enc],
        scorer=attention.AdditiveScorer,
        projection=projection.Softmax(),
        embedding_dim=5,
        decoder_dim=None,
    )
    assert (model.w_context.out_features, model.w_query.out_features, model.output.in_features) == (half,) * 3
    assert model.w_context.in_features == 2 * half


@pytest.mark.parametrize("separate", [False, True])
def test_the_question_reads_its_own_embedding_table_only_when_asked(separate):
    """``separate_query_embeddings`` (Jain & Wallace's two encoders, each with its nn.Embedding): a word of the
    question alone trains only the question's table, a word of the passage alone only the passage's; pretrained
    vectors start both. Shared (the default): one table, and no second one in the state dict."""
    pretrained = np.random.default_rng(0).normal(size=(30, 5)).astype(np.float32)
    pretrained[0] = 0
    torch.manual_seed(0)
    model = PairAttentionClassifier(
        vocab_size=30,
        num_classes=4,
        encoder=ENCODERS["lstm"],
        scorer=attention.AdditiveScorer,
        projection=projection.Softmax(),
        embedding_dim=5,
        decoder_dim=6,
        pretrained=pretrained,
        separate_query_embeddings=separate,
    )
    logits, _ = model(batch_of())
    logits[torch.isfinite(logits)].sum().backward()
    question_only, passage_only = 21, 5  # QUESTIONS and PASSAGES share no word
    passage_grad = model.embedding.weight.grad
    assert passage_grad[passage_only].abs().sum() > 0
    if separate:
        query_grad = model.query_embedding.weight.grad
        assert passage_grad[question_only].abs().sum() == 0 and query_grad[question_only].abs().sum() > 0
        assert query_grad[passage_only].abs().sum() == 0
        torch.testing.assert_close(model.query_embedding.weight.detach(), torch.as_tensor(pretrained))
    else:
        assert passage_grad[question_only].abs().sum() > 0
        assert not any(key.startswith("query_embedding") for key in model.state_dict())


@pytest.mark.parametrize("enc", list(ENCODERS))
def test_leave_one_out_on_pair_tasks_equals_brute_force(enc):
    model = make(enc)
    batch = batch_of()
    with torch.no_grad():
        got = leave_one_out(model, batch, chunk_size=3)
        for row, passage in enumerate(PASSAGES):
            single = batch_of([passage], [QUESTIONS[row]], [CANDIDATES[row]])
            base = model.probabilities(model(single)[0])[0]
            for t in range(len(passage)):
                deleted = batch_of([passage[:t] + passage[t + 1 :]], [QUESTIONS[row]], [CANDIDATES[row]])
                expected = 0.5 * (model.probabilities(model(deleted)[0])[0] - base).abs().sum()
                torch.testing.assert_close(got[row, t], expected)
