"""Normalisation, vocabulary, pretrained embeddings."""

from __future__ import annotations

import gzip
import logging

import numpy as np
import pytest

from attn_study.data.embeddings import load_embeddings
from attn_study.data.text import (
    PAD_ID,
    UNK_ID,
    Vocab,
    normalise,
    tokenize,
    tokenize_many,
)
from attn_study.errors import DataError


def test_tokenize_lowercases_splits_and_masks_digits():
    assert tokenize("It's  a 2nd-rate film, isn't it?\n\n") == [
        "it",
        "'s",
        "a",
        "qqq",
        "-",
        "rate",
        "film",
        ",",
        "is",
        "n't",
        "it",
        "?",
    ]
    assert normalise("1990s") == "qqq" and normalise("Hello") == "hello" and normalise("B52") == "qqq"
    assert tokenize_many(["Two words", "  ", "A 10/10 film"]) == [["two", "words"], [], ["a", "qqq", "film"]]


def test_vocab_min_count_order_and_reserved_ids():
    vocab = Vocab.build([["b", "a", "b"], ["c", "b", "a"]], min_count=2)
    assert vocab.itos == ["<pad>", "<unk>", "b", "a"]
    assert (PAD_ID, UNK_ID) == (0, 1)
    assert vocab.encode(["a", "c", "b"]) == [3, UNK_ID, 2]
    assert vocab.decode([2, 3]) == ["b", "a"]


@pytest.mark.parametrize("gz,header", [(False, False), (True, True)])
def test_embeddings_found_missing_and_pad(tmp_path, gz, header, caplog):
    """Found rows are the file's, ``<pad>`` is 0, a missing word is a seeded N(0, 1) draw; the log says how many
    vectors were read (3: a fastText header is not one) and the share of the 3 vocabulary words found (2 of 3)."""
    vocab = Vocab(["good", "bad", "meh"])
    lines = (["3 4"] if header else []) + ["good 1 2 3 4", "bad 0.5 0.5 0.5 0.5", "other 9 9 9 9"]
    path = tmp_path / ("vec.txt.gz" if gz else "vec.txt")
    text = "\n".join(lines) + "\n"
    if gz:
        with gzip.open(path, "wt") as handle:
            handle.write(text)
    else:
        path.write_text(text)
    with caplog.at_level(logging.INFO, logger="attn_study.data.embeddings"):
        matrix, coverage = load_embeddings(path, vocab, dim=4, seed=0)
    assert f"embeddings {path}: 3 vectors read, 66.7% of 3 vocabulary words found" in caplog.messages
    assert matrix.shape == (5, 4)
    np.testing.assert_array_equal(matrix[PAD_ID], 0)
    np.testing.assert_array_equal(matrix[vocab.stoi["good"]], [1, 2, 3, 4])
    np.testing.assert_array_equal(matrix[vocab.stoi["bad"]], [0.5] * 4)
    assert coverage == pytest.approx(2 / 3)
    # a missing word is N(0, 1) from the seed: nonzero and reproducible
    again, _ = load_embeddings(path, vocab, dim=4, seed=0)
    np.testing.assert_array_equal(again[vocab.stoi["meh"]], matrix[vocab.stoi["meh"]])
    assert np.abs(matrix[vocab.stoi["meh"]]).sum() > 0


def test_embeddings_errors_name_the_file_and_fix(tmp_path):
    vocab = Vocab(["good"])
    with pytest.raises(DataError, match="file not found"):
        load_embeddings(tmp_path / "nope.txt", vocab, dim=4)
    bad = tmp_path / "bad.txt"
    bad.write_text("good 1 2 3\n")
    with pytest.raises(DataError, match=r"bad.txt:1: vector has 3 values but model.network.embedding_dim=4"):
        load_embeddings(bad, vocab, dim=4)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    with pytest.raises(DataError, match="no vectors"):
        load_embeddings(empty, vocab, dim=4)
    for value in ("nan", "-inf", "NaN"):
        undefined = tmp_path / "undefined.txt"
        undefined.write_text(f"other 1 2 3 4\ngood 1 2 {value} 4\n")
        with pytest.raises(DataError, match=rf"undefined.txt:2: the vector of 'good' holds {value} \(its value 3\)"):
            load_embeddings(undefined, vocab, dim=4)


def test_missing_words_start_at_zero_as_the_authors_code_or_normal(tmp_path):
    """``model.embeddings.missing=zero``: every word the file lacks (``<unk>`` too) starts at exactly 0, as
    torchtext's ``Vectors[word]`` gives Jain & Wallace's code; the found rows are the file's either way; through
    ``build_model`` too (the option reaches the model's embedding, past the config's check); a value not offered
    is one line naming it, from the config's check before any data is read."""
    from attn_study.config import check_config
    from attn_study.errors import UserError
    from attn_study.job.components import build_datamodule, build_model
    from tests.helpers import TINY, compose_config

    vocab = Vocab(["good", "bad", "meh"])
    path = tmp_path / "vec.txt"
    path.write_text("good 1 2 3 4\nbad 0.5 0.5 0.5 0.5\n")
    zero, _ = load_embeddings(path, vocab, dim=4, seed=0, missing="zero")
    normal, _ = load_embeddings(path, vocab, dim=4, seed=0, missing="normal")
    for word in ("meh", "<unk>"):
        np.testing.assert_array_equal(zero[vocab.stoi[word]], 0)
        assert np.abs(normal[vocab.stoi[word]]).min() > 0
    np.testing.assert_array_equal(zero[vocab.stoi["good"]], [1, 2, 3, 4])
    np.testing.assert_array_equal(zero[vocab.stoi["good"]], normal[vocab.stoi["good"]])
    with pytest.raises(UserError, match="model.embeddings.missing=uniform: choose one of normal, zero"):
        load_embeddings(path, vocab, dim=4, missing="uniform")

    cfg = compose_config(*TINY, "logger=none", "model.network.embedding_dim=4")
    data = build_datamodule(cfg)
    data.setup()
    found = data.vocab.itos[2]  # a word of the data's own vocabulary
    path.write_text(f"{found} 1 2 3 4\n")
    for missing in ("zero", "normal"):
        options = [f"model.embeddings.path={path}", f"model.embeddings.missing={missing}"]
        run = compose_config(*TINY, "logger=none", "model.network.embedding_dim=4", *options)
        check_config(run)
        weight = build_model(run, data).model.embedding.weight.detach().numpy()
        np.testing.assert_array_equal(weight[data.vocab.stoi[found]], [1, 2, 3, 4])
        others = np.delete(weight, [PAD_ID, data.vocab.stoi[found]], axis=0)
        assert (np.abs(others).max() == 0) == (missing == "zero"), missing
    with pytest.raises(UserError, match="model.embeddings.missing=uniform: choose one of normal, zero"):
        check_config(compose_config(*TINY, "model.embeddings.missing=uniform"))
