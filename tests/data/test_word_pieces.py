"""Words and their word pieces (data/pieces.py, data/pretrained.py): the tokenizer's pieces of hand-worked words, each
piece's word, a word's score from its pieces by hand (sum, max, first), and the batches α and the tests read — the
text's pieces only, never a special token or a pair's question."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attn_study.data.example import RawExample
from attn_study.data.pieces import NOT_A_WORD, join_pieces, word_scores, words_of
from attn_study.data.pretrained import PretrainedTextData, piece_words
from attn_study.data.synthetic import SyntheticSource
from attn_study.errors import UserError
from tests.hf_checkpoints import PIECES, tokenizer

pytest.importorskip("transformers")


def test_a_word_is_split_into_the_pieces_of_the_vocabulary_and_each_piece_keeps_its_word():
    """Greedy longest-match WordPiece over PIECES: "unbelievable" → un ##believ ##able (no "unbeliev", no
    "##believable"); "film" is whole; [CLS] and [SEP] belong to no word."""
    fast = tokenizer(pieces=True)
    encoded = fast([["unbelievable", "film", "wonderful"]], is_split_into_words=True)
    pieces = fast.convert_ids_to_tokens(encoded["input_ids"][0])
    assert pieces == ["[CLS]", "un", "##believ", "##able", "film", "wonder", "##ful", "[SEP]"]
    assert piece_words(encoded, 0).tolist() == [NOT_A_WORD, 0, 0, 0, 1, 2, 2, NOT_A_WORD]
    assert words_of(pieces, piece_words(encoded, 0)) == [
        ("unbelievable", ["un", "##believ", "##able"]),
        ("film", ["film"]),
        ("wonderful", ["wonder", "##ful"]),
    ]


def test_a_pairs_question_belongs_to_no_word_of_the_text():
    fast = tokenizer(pieces=True)
    encoded = fast([["terrible", "film"]], [["good", "film"]], is_split_into_words=True)
    pieces = fast.convert_ids_to_tokens(encoded["input_ids"][0])
    assert pieces == ["[CLS]", "terr", "##ible", "film", "[SEP]", "good", "film", "[SEP]"]
    assert piece_words(encoded, 0).tolist() == [-1, 0, 0, 1, -1, -1, -1, -1]


def test_a_words_score_from_its_pieces_by_hand():
    """Pieces of words 0 0 0 1 (and two special tokens): sum 0.1 + 0.2 + 0.3 = 0.6; max: the piece of largest
    magnitude, its sign kept; first: the word's first piece."""
    words = [NOT_A_WORD, 0, 0, 0, 1, NOT_A_WORD]
    scores = [9.0, 0.1, 0.2, 0.3, 0.4, 9.0]
    np.testing.assert_allclose(word_scores(scores, words, "sum"), [0.6, 0.4])
    np.testing.assert_allclose(word_scores(scores, words, "max"), [0.3, 0.4])
    np.testing.assert_allclose(word_scores(scores, words, "first"), [0.1, 0.4])
    signed = [0.0, 0.2, -0.5, 0.1, -0.1, 0.0]
    np.testing.assert_allclose(word_scores(signed, words, "max"), [-0.5, -0.1])
    np.testing.assert_allclose(word_scores(signed, words, "sum"), [-0.2, -0.1])
    with_nan = word_scores([0.1, np.nan, 0.3], [0, 0, 1], "sum")
    assert np.isnan(with_nan[0]) and with_nan[1] == pytest.approx(0.3)
    assert word_scores([np.nan, 0.2], [0, 0], "first")[0] != word_scores([np.nan, 0.2], [0, 0], "first")[0]
    assert np.isnan(word_scores([0.1, 0.2], [0, 2], "sum")[1])  # word 1 has no piece (cut, or no piece at all)
    with pytest.raises(ValueError, match="word rule 'mean'"):
        word_scores(scores, words, "mean")


def test_scores_and_pieces_of_different_lengths_are_refused_by_their_counts():
    """3 scores for the 2 pieces of words [0, 1]: the message names both counts."""
    with pytest.raises(ValueError, match="^3 scores for 2 pieces$"):
        word_scores([0.1, 0.2, 0.3], [0, 1])


def test_pieces_join_into_their_word():
    assert join_pieces(["un", "##believ", "##able"]) == "unbelievable"
    assert join_pieces(["Ġunbeliev", "able"]) == "unbelievable"  # byte-level BPE's word start
    assert join_pieces(["▁un", "believable"]) == "unbelievable"  # SentencePiece's
    assert join_pieces(["film"]) == "film" and join_pieces([]) == ""


def data(source, max_length: int = 64) -> PretrainedTextData:
    module = PretrainedTextData(source, tokenizer(pieces=True), max_length=max_length, batch_size=4, eval_batch_size=8)
    module.setup()
    return module


def test_the_synthetic_texts_in_pieces_keep_their_words_and_rationales():
    """Every piece's word: the pieces of word w join into w (or [UNK]); batches weigh the pieces of words only; a
    rationale word of two pieces (wonderful, terrible) covers both."""
    module = data(SyntheticSource(n_train=24, n_dev=8, n_test=8, seed=3))
    vocab = module.data.vocab
    split = module.split("test")
    raw = {e.uid: e for e in SyntheticSource(n_train=24, n_dev=8, n_test=8, seed=3).load()["test"]}
    split_words = 0
    for i, uid in enumerate(split.uids):
        pieces = vocab.decode(split.ids[i])
        words = [w for w, _ in words_of(pieces, split.words[i])]
        assert words == raw[uid].text.split()
        assert pieces[0] == "[CLS]" and pieces[-1] == "[SEP]" and split.words[i][0] == split.words[i][-1] == NOT_A_WORD
        rationale = {int(w) for k, w in enumerate(split.words[i]) if k in set(split.rationales[i])}
        assert {k for k, w in enumerate(split.words[i]) if w in rationale} == set(split.rationales[i])
        split_words += sum(len(p) > 1 for _, p in words_of(pieces, split.words[i]))
    assert split_words > 0  # some text holds a word of several pieces
    batch = next(iter(module.loader("test", batch_size=8)))
    assert torch.equal(batch["token_mask"], batch["mask"] & (batch["word_ids"] >= 0))
    assert not batch["token_mask"][:, 0].any()
    ends = batch["lengths"] - 1
    assert not batch["token_mask"][torch.arange(len(ends)), ends].any()


def test_a_split_of_a_single_text_keeps_its_rationale_in_pieces():
    """A dev split of one text: its rationale is the pieces of the raw text's rationale words, as in a longer split."""
    module = data(SyntheticSource(n_train=24, n_dev=1, n_test=8, seed=3))
    (example,) = SyntheticSource(n_train=24, n_dev=1, n_test=8, seed=3).load()["dev"]
    words = module.split("dev").words[0]
    expected = {k for k, w in enumerate(words) if w in set(example.rationale)}
    assert expected and set(module.split("dev").rationales[0]) == expected


class PairSource:
    """Two passages with questions, as a pair task's source yields them (``texts``: single texts instead)."""

    name, num_classes, label_names = "pairs", 2, ["no", "yes"]

    def __init__(self, texts: list[str] | None = None):
        self.texts = texts

    def load(self):
        make = [
            RawExample("a", "unbelievable film", 1, query="good film"),
            RawExample("b", "terrible plot and boring cast", 0, query="film"),
        ]
        if self.texts:
            make = [RawExample(str(k), text, k % 2) for k, text in enumerate(self.texts)]
        return {split: [RawExample(f"{split}-{e.uid}", e.text, e.label, e.query) for e in make] for split in SPLITS}

    def fingerprint(self):
        return {"name": self.name}


SPLITS = ("train", "dev", "test")


def test_a_pair_is_one_sequence_and_only_its_passage_is_weighed():
    """[CLS] passage [SEP] question [SEP]: the passage's pieces are the text (token_mask), the question's are read
    and never weighed."""
    module = data(PairSource())
    batch = next(iter(module.loader("test", batch_size=2)))
    first = batch["index"].tolist().index(0)
    pieces = module.data.vocab.decode(batch["ids"][first, : batch["lengths"][first]].tolist())
    assert pieces == ["[CLS]", "un", "##believ", "##able", "film", "[SEP]", "good", "film", "[SEP]"]
    assert batch["token_mask"][first, : len(pieces)].tolist() == [0, 1, 1, 1, 1, 0, 0, 0, 0]
    assert batch["word_ids"][first, : len(pieces)].tolist() == [-1, 0, 0, 0, 1, -1, -1, -1, -1]


def test_a_long_text_is_cut_to_max_length_pieces_and_a_pair_keeps_its_question():
    module = data(PairSource(), max_length=7)
    split = module.split("test")
    pieces = module.data.vocab.decode(split.ids[0])
    assert pieces == ["[CLS]", "un", "##believ", "[SEP]", "good", "film", "[SEP]"]  # the passage cut, mid-word
    assert split.words[0].tolist() == [-1, 0, 0, -1, -1, -1, -1]
    with pytest.raises(UserError, match="encoder.path: a train question does not fit in 5 pieces with its passage"):
        data(PairSource(), max_length=5)
    cut = data(PairSource(), max_length=6).split("test")  # "terrible plot and boring cast" + "film": 2 pieces left
    assert cut.words[1].tolist() == [-1, 0, 0, -1, -1, -1]


def test_a_text_its_tokenizer_leaves_without_a_piece_is_refused():
    """BERT's normaliser drops control characters: a text of one such word would have nothing to weigh."""
    from tokenizers import normalizers

    fast = tokenizer(pieces=True)
    fast.backend_tokenizer.normalizer = normalizers.BertNormalizer(clean_text=True, lowercase=False)
    module = PretrainedTextData(PairSource(texts=["film", "\x07"]), fast, max_length=16)
    with pytest.raises(UserError, match="encoder.path: its tokenizer leaves no piece of a train text"):
        module.setup()


def test_the_vocabulary_of_the_checkpoints_tokenizer():
    vocab = data(PairSource()).data.vocab
    assert vocab.itos == PIECES and vocab.stoi["[MASK]"] == 4 and len(vocab) == len(PIECES)
    assert vocab.unk_id == 1 and "[MASK]" in vocab.special_tokens and "film" not in vocab.special_tokens
    assert vocab.decode([2, 3]) == ["[CLS]", "[SEP]"]
