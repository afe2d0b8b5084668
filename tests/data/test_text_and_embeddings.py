"""Normalisation, vocabulary, pretrained embeddings."""

from __future__ import annotations

import gzip

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
def test_embeddings_found_missing_and_pad(tmp_path, gz, header):
    vocab = Vocab(["good", "bad", "meh"])
    lines = (["3 4"] if header else []) + ["good 1 2 3 4", "bad 0.5 0.5 0.5 0.5", "other 9 9 9 9"]
    path = tmp_path / ("vec.txt.gz" if gz else "vec.txt")
    text = "\n".join(lines) + "\n"
    if gz:
        with gzip.open(path, "wt") as handle:
            handle.write(text)
    else:
        path.write_text(text)
    matrix, coverage = load_embeddings(path, vocab, dim=4, seed=0)
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
