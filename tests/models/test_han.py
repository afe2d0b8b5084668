"""Hierarchical attention network: sentence splitting, the staged API over sentences, padding,
gradients, training, the data pipeline and an end-to-end run."""

from __future__ import annotations

import itertools
from functools import partial

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from attn_study.data.datamodule import TextDataModule, collate
from attn_study.data.example import RawExample
from attn_study.data.processed import Preprocessing, build, cache_key
from attn_study.data.text import tokenize_many, tokenize_sentences_many
from attn_study.models import attention, encoders, projection
from attn_study.models.han import HierarchicalAttentionClassifier, HierarchicalEncoded
from attn_study.models.module import AttentionModule

ENCODERS = {
    "gru": partial(encoders.RNNEncoder, hidden_size=4, cell="gru"),
    "conv": partial(encoders.CNNEncoder, kernel_sizes=(3, 5), filters=3),
    "noenc": encoders.NoEncoder,
}
PROJECTIONS = {"softmax": projection.Softmax, "sparsemax": projection.Sparsemax}
COMBOS = list(itertools.product(ENCODERS, PROJECTIONS))

# documents as lists of sentences of token ids
DOCS = [
    [[5, 6, 7], [8, 9], [10, 11, 12, 13]],
    [[14, 15]],
    [[16], [17, 18, 19, 20, 21, 22]],
    [[23, 24], [25], [26, 27], [28, 29, 5]],
]

TEXTS = [
    "The film was great. I loved   it!\n\nWould watch again?",
    "One sentence only, with 42 numbers like 3.14",
    "",
    "   ",
    "Dr. Smith arrived at 5 p.m. He left.  Then ... nothing",
    "no punctuation at all here",
    "Wait!!! What?! Okay.",
]


def make_model(enc, proj, num_classes=2, **kwargs):
    torch.manual_seed(0)
    model = HierarchicalAttentionClassifier(
        vocab_size=32,
        num_classes=num_classes,
        encoder=ENCODERS[enc],
        scorer=attention.AdditiveScorer,
        projection=PROJECTIONS[proj](),
        embedding_dim=6,
        **kwargs,
    )
    return model.eval()


def batch_of(docs, labels=None, extra_pad=0):
    items = [
        {
            "index": i,
            "ids": np.asarray([t for s in doc for t in s], dtype=np.int64),
            "label": (labels or [0] * len(docs))[i],
            "sentence_lengths": np.asarray([len(s) for s in doc], dtype=np.int64),
        }
        for i, doc in enumerate(docs)
    ]
    batch = collate(items)
    if extra_pad:
        pad = torch.zeros(len(docs), extra_pad, dtype=torch.long)
        batch["ids"] = torch.cat([batch["ids"], pad], 1)
        batch["mask"] = torch.cat([batch["mask"], pad.bool()], 1)
        batch["sentence_ids"] = torch.cat([batch["sentence_ids"], pad - 1], 1)
    return batch


# ---------------------------------------------------------------------------- sentence tokenisation


def test_sentence_tokens_equal_tokenize_many_and_lengths_sum():
    flat = tokenize_many(TEXTS)
    split = tokenize_sentences_many(TEXTS, batch_size=2)
    assert [tokens for tokens, _ in split] == flat
    for tokens, lengths in split:
        assert sum(lengths) == len(tokens)
        assert all(n > 0 for n in lengths)  # no empty sentences
    assert split[0][0][:5] == ["the", "film", "was", "great", "."]
    assert split[0][1] == [5, 4, 4]  # 3 sentences
    assert split[2] == ([], []) and split[3] == ([], [])
    assert split[5][1] == [5]


def test_processed_sentence_lengths_and_truncation():
    texts = ["Good film. Bad ending. Fine!", "Great. Really great.", "One two three four five six seven. Then this."]
    splits = {
        s: [RawExample(uid=str(i), text=t, label=i % 2) for i, t in enumerate(texts)] for s in ("train", "dev", "test")
    }

    class Source:
        name, num_classes, label_names = "tiny", 2, ["neg", "pos"]

        def fingerprint(self):
            return {"tag": "han"}

        def load(self):
            return splits

    assert build(Source(), Preprocessing()).splits["train"].sentence_lengths is None
    assert cache_key(Source(), Preprocessing(sentences=True)) != cache_key(Source(), Preprocessing())
    data = build(Source(), Preprocessing(sentences=True))
    train = data.splits["train"]
    assert [s.tolist() for s in train.sentence_lengths] == [[3, 3, 2], [2, 3], [8, 3]]
    for ids, lengths in zip(train.ids, train.sentence_lengths):
        assert lengths.dtype == np.int64 and lengths.sum() == len(ids)
    cut = build(Source(), Preprocessing(sentences=True, truncate=4)).splits["train"]
    assert [s.tolist() for s in cut.sentence_lengths] == [[3, 1], [2, 2], [4]]
    assert all(s.sum() == len(ids) for ids, s in zip(cut.ids, cut.sentence_lengths))


# --------------------------------------------------------------------------------------- the model


@pytest.mark.parametrize("enc,proj", COMBOS)
def test_padding_staging_and_gradients(enc, proj):
    model = make_model(enc, proj)
    batch = batch_of(DOCS)
    logits, alpha = model(batch)
    enc_out = model.encode(batch)
    assert isinstance(enc_out, HierarchicalEncoded)

    # the final attention is over real sentences: (B, S), 0 on padded sentences, sums to 1
    n_sent = torch.tensor([len(d) for d in DOCS])
    assert alpha.shape == (len(DOCS), int(n_sent.max()))
    torch.testing.assert_close(enc_out.lengths, n_sent)
    assert torch.equal(enc_out.mask, torch.arange(alpha.shape[1])[None] < n_sent[:, None])
    assert torch.all(alpha[~enc_out.mask] == 0) and torch.all(alpha >= 0)
    torch.testing.assert_close(alpha.sum(-1), torch.ones(len(DOCS)))
    assert enc_out.hidden.shape[:2] == alpha.shape and enc_out.embedded.shape[:2] == batch["ids"].shape

    # word attention: a distribution within each real sentence, 0 on padding tokens
    word = enc_out.word_attention
    assert torch.all(word[~batch["mask"]] == 0)
    assert torch.equal(enc_out.token_sentences, batch["sentence_ids"])  # consecutive ids stay as they are
    per_sentence = torch.zeros(len(DOCS), alpha.shape[1]).scatter_add_(
        1, enc_out.token_sentences.clamp_min(0), word * batch["mask"]
    )
    torch.testing.assert_close(per_sentence, enc_out.mask.float())

    # decode(encode(x), attend(encode(x))) == forward(x); decode_many agrees with decode
    torch.testing.assert_close(model.decode(enc_out, model.attend(enc_out)), logits)
    many = model.decode_many(enc_out, torch.stack([alpha, alpha.flip(0).roll(1, 0)], 1))
    torch.testing.assert_close(many[:, 0], logits)
    assert logits.shape == (len(DOCS), 1)  # binary: one sigmoid logit

    # extra token padding changes nothing
    logits_p, alpha_p = model(batch_of(DOCS, extra_pad=5))
    torch.testing.assert_close(logits_p, logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(alpha_p, alpha, atol=1e-5, rtol=1e-5)
    # nor do other instances' extra sentences (sentence padding) and longer sentences (word padding)
    for i, doc in enumerate(DOCS):
        alone_logits, alone_alpha = model(batch_of([doc]))
        torch.testing.assert_close(alone_logits[0], logits[i], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(alone_alpha[0], alpha[i, : len(doc)], atol=1e-5, rtol=1e-5)

    # gradients w.r.t. a leaf token embedding, attention detached: finite, 0 on padding tokens
    emb = model.embed(batch).detach().requires_grad_(True)
    enc_g = model.encode(batch, embedded=emb)
    out = model.decode(enc_g, model.attend(enc_g).detach())
    model.probabilities(out)[:, 1].sum().backward()
    assert torch.isfinite(emb.grad).all()
    assert torch.all(emb.grad[~batch["mask"]] == 0)
    assert emb.grad[batch["mask"]].abs().sum() > 0


@pytest.mark.parametrize("enc,proj", COMBOS)
def test_one_training_step(enc, proj):
    model = make_model(enc, proj, num_classes=3, dropout=0.1, word_dropout=0.1, sentence_dropout=0.1)
    model.train()
    module = AttentionModule(model, lr=0.01)
    optimizer = module.configure_optimizers()
    batch = batch_of(DOCS, labels=[0, 1, 2, 1])
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    logits, _ = model(batch)
    assert logits.shape == (len(DOCS), 3)
    loss = module.loss(logits, batch["labels"])
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss)
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    assert {"output.weight", "embedding.weight", "scorer.w1.weight", "word_scorer.w1.weight"} <= changed
    if enc != "noenc":
        assert any(n.startswith("word_encoder.") for n in changed)
        assert any(n.startswith("encoder.") for n in changed)
    assert torch.all(model.embedding.weight[0] == 0), "the <pad> row must stay zero"


def test_missing_sentence_ids_is_a_clear_error():
    model = make_model("noenc", "softmax")
    batch = batch_of(DOCS)
    del batch["sentence_ids"]
    with pytest.raises(ValueError, match="dataset.preprocessing.sentences=true"):
        model(batch)
    with pytest.raises(ValueError, match="single-text"):
        model(dict(batch_of(DOCS), query_ids=batch["ids"]))


def test_sentence_ids_with_gaps_are_compacted():
    model = make_model("gru", "softmax")
    batch = batch_of(DOCS)
    logits, alpha = model(batch)
    gappy = dict(batch, sentence_ids=torch.where(batch["sentence_ids"] >= 0, 2 * batch["sentence_ids"] + 1, -1))
    logits_g, alpha_g = model(gappy)
    torch.testing.assert_close(logits_g, logits)
    torch.testing.assert_close(alpha_g, alpha)


# ------------------------------------------------------------------------------ pipeline, end to end


def test_han_runs_on_a_datamodule_batch(tmp_path):
    texts = [
        "A good film. I liked it a lot! Recommended.",
        "Bad. Really bad.",
        "Fine film overall",
        "The plot was thin. The acting was worse. Avoid it. Seriously.",
    ]

    class Source:
        name, num_classes, label_names = "tiny_han", 2, ["neg", "pos"]

        def fingerprint(self):
            return {"tag": "han"}

        def load(self):
            return {
                s: [RawExample(uid=str(i), text=t, label=i % 2) for i, t in enumerate(texts)]
                for s in ("train", "dev", "test")
            }

    dm = TextDataModule(Source(), Preprocessing(sentences=True), batch_size=4, eval_batch_size=4, cache_dir=tmp_path)
    dm.setup()
    batch = next(iter(dm.loader("dev")))
    assert "sentence_ids" in batch
    model = HierarchicalAttentionClassifier(
        len(dm.vocab), dm.num_classes, ENCODERS["gru"], attention.AdditiveScorer, projection.Softmax(), embedding_dim=6
    ).eval()
    logits, alpha = model(batch)
    enc = model.encode(batch)
    counts = {int(i): n for i, n in zip(batch["index"], enc.lengths.tolist())}
    assert counts == {0: 3, 1: 2, 2: 1, 3: 4}
    assert logits.shape == (4, 1) and alpha.shape == (4, 4)
    torch.testing.assert_close(alpha.sum(-1), torch.ones(4))


def test_config_composes(make_cfg):
    cfg = make_cfg("model=han", "encoder=gru")
    assert cfg.model.name == "han" and cfg.dataset.preprocessing.sentences is True
    assert cfg.model.network._target_ == "attn_study.models.han.HierarchicalAttentionClassifier"
    assert cfg.callbacks.early_stopping.patience == 5 and cfg.callbacks.early_stopping.monitor == "val/acc"
    flat = make_cfg("model=flat")
    assert OmegaConf.select(flat, "dataset.preprocessing.sentences", default=False) is False


def test_end_to_end_run(make_cfg, tmp_path):
    from attn_study.job.run import run as run_job
    from tests.helpers import accuracy_by_hand

    cfg = make_cfg(
        "trainer=debug",
        "analysis=none",
        "logger=none",
        "dataset.source.n_train=64",
        "dataset.source.n_dev=16",
        "dataset.source.n_test=16",
        "model=han",
        "encoder=gru",
        "encoder.hidden_size=4",
        "model.network.embedding_dim=8",
    )
    summary = run_job(cfg, tmp_path / "run")
    assert summary["test/acc"] == pytest.approx(accuracy_by_hand(tmp_path / "run"))
    assert (tmp_path / "run" / "summary.json").is_file()
