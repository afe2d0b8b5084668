"""The families on ``encoder=pretrained`` (models/pretrained.py): hand-checkable cases on a tiny BERT written by the
test (tests/hf_checkpoints.py) — rollout through its own layers made uniform, τ(α, rollout) = 1, leave-one-out
deleting one piece, Meister's support over the text's pieces, the permutation test of a decoder that ignores α,
the sanity cascade reaching the encoder's layers and then its word-piece table, W&P's uniform baseline, ROAR's mask
— and the one-line refusals of the families that need a pooling attention on the [CLS] model."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from attn_study.errors import UserError
from attn_study.models.attention import AdditiveScorer, UniformScorer
from attn_study.models.projection import Softmax, Sparsemax
from tests.hf_checkpoints import save_checkpoint, tokenizer

pytest.importorskip("transformers")


@pytest.fixture
def folder(tmp_path):
    return save_checkpoint(tmp_path / "bert", head=False, pieces=True)


def model_of(folder, scorer=None, projection=None):
    from attn_study.models.pretrained import PretrainedAttentionClassifier, PretrainedEncoder

    scorer = scorer or (lambda hidden_dim: AdditiveScorer(hidden_dim))
    return PretrainedAttentionClassifier(PretrainedEncoder(str(folder)), 2, scorer, projection or Softmax()).eval()


def data_of(n: int = 8):
    from attn_study.data.pretrained import PretrainedTextData
    from attn_study.data.synthetic import SyntheticSource

    module = PretrainedTextData(
        SyntheticSource(n_train=8, n_dev=8, n_test=n, seed=5), tokenizer(pieces=True), max_length=64, eval_batch_size=4
    )
    module.setup()
    return module


def uniform_self_attention(model) -> None:
    """Every query and key projection 0: each head's scores are equal, its attention uniform over the real pieces."""
    with torch.no_grad():
        for layer in model.encoder.hf.encoder.layer:
            for part in (layer.attention.self.query, layer.attention.self.key):
                part.weight.zero_()
                part.bias.zero_()


def test_rollout_through_uniform_layers_by_hand_and_tau_of_attention_and_rollout_is_one(folder, tmp_path):
    """Two layers of uniform attention over the n real pieces (special tokens included): Â = 0.5 J/n + 0.5 I, and
    Â² = (0.75/n) J + 0.25 I, so the rollout composed with α gives piece j (of the m text pieces)
    s_j = (0.75/n + 0.25 α_j) / (0.75 m/n + 0.25) — increasing in α_j: agreement's τ(attention, rollout) is 1."""
    from attn_study.analysis.aggregation import AggregationOptions, aggregated_importance
    from attn_study.families.agreement.callback import Agreement

    model = model_of(folder)
    uniform_self_attention(model)
    data = data_of()
    batch = next(iter(data.loader("test")))
    with torch.no_grad():
        alpha = model.attend(model.encode(batch))
        scores, _ = aggregated_importance("rollout", model, batch, alpha, AggregationOptions())
    n = batch["lengths"].double()[:, None]
    m = batch["token_mask"].sum(1).double()[:, None]
    expected = (0.75 / n + 0.25 * alpha.double()) / (0.75 * m / n + 0.25) * batch["token_mask"]
    torch.testing.assert_close(scores.double(), expected, atol=1e-6, rtol=0)
    summary = Agreement(methods=["attention", "rollout"], tests=["agreement"]).analyse(model, data, tmp_path)
    assert summary["ag/attention/rollout/tau/mean"] == pytest.approx(1.0) and summary["ag/n_instances"] == 8


def test_leave_one_out_deletes_one_piece_never_a_special_token(folder):
    """Piece t's score is TVD(ŷ, ŷ of the ids without position t), the sequence one shorter, as built by hand; the
    special tokens and padding score 0."""
    from attn_study.analysis.importance import leave_one_out, predict

    model = model_of(folder)
    batch = next(iter(data_of().loader("test")))
    scores = leave_one_out(model, batch)
    _, _, probs = predict(model, batch)
    row, length = 1, int(batch["lengths"][1])
    ids = batch["ids"][row, :length]
    for t in range(1, length - 1):
        shorter = torch.cat([ids[:t], ids[t + 1 :]])[None]
        single = {
            "ids": shorter,
            "mask": torch.ones_like(shorter, dtype=torch.bool),
            "lengths": torch.tensor([length - 1]),
            "token_mask": torch.ones_like(shorter, dtype=torch.bool),
        }
        single["token_mask"][0, [0, -1]] = False
        with torch.no_grad():
            deleted = model.probabilities(model(single)[0])[0]
        assert scores[row, t].item() == pytest.approx(0.5 * (deleted - probs[row]).abs().sum().item(), abs=1e-6)
    assert scores[row, 0] == 0 and scores[row, length - 1] == 0 and (scores[row, length:] == 0).all()


def test_meisters_support_counts_the_text_pieces_sparsemax_keeps(folder, tmp_path):
    from attn_study.families.sparsity.callback import Sparsity

    model = model_of(folder, projection=Sparsemax())
    data = data_of()
    family = Sparsity(tests=["input"])
    summary = family.analyse(model, data, tmp_path)
    frame = pd.read_parquet(tmp_path / "analysis" / "sparsity" / "instances.parquet")
    by_hand = {}
    for batch in data.loader("test"):
        with torch.no_grad():
            alpha = model.attend(model.encode(batch))
        assert (alpha[~batch["token_mask"]] == 0).all()  # never a special token
        for r, i in enumerate(batch["index"].tolist()):
            by_hand[i] = (int((alpha[r] > 0).sum()), int(batch["token_mask"][r].sum()))
    for _, row in frame.iterrows():
        assert (row["support"], row["length"]) == by_hand[int(row["index"])]
    fractions = [s / n for s, n in by_hand.values()]
    assert summary["sp/support/frac/mean"] == pytest.approx(np.mean(fractions))


def test_a_decoder_that_ignores_attention_is_never_moved_by_a_permutation(folder, tmp_path):
    """The decoder's weights 0: every logit is its bias, whatever α — each permutation's output TVD is 0."""
    from attn_study.families.jain_wallace.callback import JainWallace

    model = model_of(folder)
    with torch.no_grad():
        model.output.weight.zero_()
    summary = JainWallace(tests=["permutation"], permutations=5).analyse(model, data_of(), tmp_path)
    assert summary["jw/perm/median_tvd/mean"] == summary["jw/perm/median_tvd/std"] == 0


def test_the_sanity_cascade_reaches_every_encoder_layer_then_its_word_piece_table(folder):
    """Stage encoder: every weight of the checkpoint's layers redrawn, its word-piece table not; stage embeddings:
    the table too. The parameters redrawn are the decoder's, the scorer's, the encoder's, the table's (by count)."""
    from attn_study.families.sanity.callback import cascade

    model = model_of(folder)
    with torch.no_grad():  # as a trained model's: no weight at the value its initialiser gives (layer norms' 1, 0)
        for parameter in model.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    stages = cascade(model, ["decoder", "attention", "encoder", "embeddings"], seed=3)
    encoder_stage, table_stage = stages[2][1], stages[3][1]
    trained = dict(model.encoder.named_parameters())
    for name, value in encoder_stage.encoder.named_parameters():
        assert not torch.equal(value, trained[name]), name
    assert torch.equal(encoder_stage.embedding.weight, model.embedding.weight)
    assert not torch.equal(table_stage.embedding.weight, model.embedding.weight)
    sizes = {
        "decoder": 8 * 1 + 1,
        "attention": sum(p.numel() for p in model.scorer.parameters()),
        "encoder": sum(p.numel() for p in model.encoder.parameters()),
        "embeddings": len(tokenizer(pieces=True)) * 8,
    }
    assert [count for _, _, count in stages] == np.cumsum(list(sizes.values())).tolist()


def test_wiegreffe_and_pinters_uniform_baseline_weighs_every_text_piece_alike(folder):
    model = model_of(folder, scorer=lambda hidden_dim: UniformScorer(hidden_dim))
    batch = next(iter(data_of().loader("test")))
    with torch.no_grad():
        alpha = model.attend(model.encode(batch))
    pieces = batch["token_mask"].sum(1, keepdim=True).float()
    torch.testing.assert_close(alpha, batch["token_mask"] / pieces)


def test_wiegreffe_and_pinters_preloaded_attention_is_the_one_given_bit_for_bit(folder):
    """Another run's α attached to the pieces (attention=preloaded): α_t ∝ t over each text's pieces, 0 on [CLS] and
    [SEP], returned as it is — and renormalised over what is left when a piece is deleted."""
    from attn_study.analysis.importance.leave_one_out import sub_batch
    from attn_study.models.attention import PreloadedAttention

    data = data_of()
    given = {}
    for split in ("train", "dev", "test"):
        given[split] = []
        for ids in data.split(split).ids:
            weights = np.arange(len(ids), dtype=np.float32)
            weights[[0, -1]] = 0
            given[split].append(weights / weights.sum())
    data.fix_attention(given)
    model = model_of(folder, scorer=lambda hidden_dim: PreloadedAttention(hidden_dim))
    batch = next(iter(data.loader("test")))
    with torch.no_grad():
        alpha = model.attend(model.encode(batch))
        for r, i in enumerate(batch["index"].tolist()):
            assert torch.equal(alpha[r, : len(given["test"][i])], torch.from_numpy(given["test"][i]))
        shorter = sub_batch(batch, torch.tensor([0]), torch.tensor([1]))  # the first piece of instance 0 deleted
        kept = model.attend(model.encode(shorter))[0]
    weights = np.delete(given["test"][int(batch["index"][0])], 1)
    np.testing.assert_allclose(kept[: len(weights)].numpy(), weights / weights.sum(), rtol=1e-6)


def test_roar_masks_pieces_with_the_tokenizers_mask_token():
    from attn_study.errors import DataError
    from attn_study.roar import masking

    data = data_of()
    masking.check_token_unused(data.data, "[MASK]")  # a special token: no piece of a text
    with pytest.raises(DataError, match="roar.token=film: the dataset's vocabulary already holds this word"):
        masking.check_token_unused(data.data, "film")
    before = data.split("test").ids[0].copy()
    token = masking.apply(data.data, {"test": [(1, 2)] + [()] * 7, "train": [()] * 8, "dev": [()] * 8}, "[MASK]")
    after = data.split("test").ids[0]
    assert token == 4 and after[1] == after[2] == 4 and np.array_equal(after[3:], before[3:])
    assert len(data.data.vocab) == len(tokenizer(pieces=True))  # nothing added to the checkpoint's vocabulary


@pytest.mark.parametrize(
    "family, options, says",
    [
        ("serrano_smith", {}, r"analysis=serrano_smith erases weights of a pooling attention, and "),
        ("sparsity", {}, r"analysis=sparsity asks how sparse a pooling attention is, and "),
        ("jain_wallace", {}, r"analysis.jain_wallace.attention_scores=pooling: .* has no pooling attention"),
        ("jain_wallace", {"attention_scores": "rollout"}, r"permutation perturb a pooling attention"),
    ],
)
def test_the_families_that_perturb_alpha_refuse_the_cls_model_in_one_line(folder, family, options, says):
    from attn_study.families import REGISTRY
    from attn_study.models.pretrained import ClassificationToken

    model = model_of(folder, scorer=ClassificationToken)
    module = REGISTRY[family].module("callback")
    callback = next(c for c in vars(module).values() if isinstance(c, type) and getattr(c, "name", "") == family)
    with pytest.raises(UserError, match=says) as refused:
        callback(**options).check(model)
    assert "\n" not in str(refused.value)
    if family != "jain_wallace":
        assert "classification token ([CLS])" in str(refused.value)
