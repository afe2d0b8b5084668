"""A dataset tokenised by a pretrained checkpoint's tokenizer: for ``encoder=pretrained`` (models/pretrained.py) and
for analysing a Hugging Face classifier (``attn-study-analyze hf_model=<dir>``; models/huggingface.py).

The instances are the dataset's own — read, tokenised into words and length-filtered by the project's pipeline
(``processed``: the same instances and uids as a run of the project on the same settings) — and each text's words
are then split into pieces by the checkpoint's tokenizer (``is_split_into_words``), which adds its special tokens
(``[CLS]`` … ``[SEP]``, ``<s>`` … ``</s>``: read by the model, never weighed or scored) and builds a pair task's two
texts into one sequence as it builds pairs (``[CLS] passage [SEP] question [SEP]``; ``token_type_ids`` are BERT's
segments, which the encoder reads off the ids). Sequences longer than ``max_length`` pieces are cut (a pair: its
passage only), each cut counted in the log.

Each instance keeps the word of each of its pieces (``PretrainedSplit.words``: the index of the word in the text,
``pieces.NOT_A_WORD`` for the special tokens and a pair's question), and every batch carries it as ``word_ids``
(B, T): the text's pieces — what α weighs and the tests score — are those of a word (``token_mask``), and
``tokens.parquet`` keeps the map, so that a score per piece is also read per word (``pieces.word_scores``). A known
rationale's words map to all their pieces.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch

from attn_study.data.datamodule import TextDataModule, collate
from attn_study.data.pieces import NOT_A_WORD
from attn_study.data.processed import ProcessedDataset, ProcessedSplit, _clip_rationales, _tokenize_and_filter
from attn_study.errors import UserError

log = logging.getLogger(__name__)


class TokenizerVocab:
    """The ``Vocab`` interface the families, the checks and ROAR read (``decode``, ``len``, ``itos``, ``stoi``,
    ``unk_id``) over a Hugging Face tokenizer; ``special_tokens``: its special tokens (never a word of a text, so
    one may mask: ``roar.token``)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.itos = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        self.stoi = {token: i for i, token in enumerate(self.itos)}
        self.special_tokens = frozenset(tokenizer.all_special_tokens)
        self.unk_id = tokenizer.unk_token_id

    def __len__(self) -> int:
        return len(self.itos)

    def decode(self, ids) -> list[str]:
        return [self.itos[int(i)] for i in ids]


@dataclass
class PretrainedSplit(ProcessedSplit):
    """A split tokenised into pieces: ``words``, per instance the word index of each piece (``NOT_A_WORD`` for the
    special tokens and a pair's question)."""

    words: list[np.ndarray] | None = None


def collate_pieces(items: list[dict], words: list[np.ndarray], num_classes: int | None = None) -> dict:
    """``datamodule.collate``'s batch, with ``word_ids`` (B, T): each piece's word (``NOT_A_WORD`` on the special
    tokens, a pair's question and padding), and ``token_mask`` the pieces of a word."""
    batch = collate(items, num_classes)
    word_ids = torch.full(batch["ids"].shape, NOT_A_WORD, dtype=torch.long)
    for row, item in enumerate(items):
        own = words[item["index"]]
        word_ids[row, : len(own)] = torch.from_numpy(own)
    batch["word_ids"] = word_ids
    batch["token_mask"] = batch["mask"] & (word_ids != NOT_A_WORD)
    return batch


class PretrainedTextData(TextDataModule):
    """A ``TextDataModule`` whose splits are tokenised by ``tokenizer`` (see the module docstring) into at most
    ``max_length`` pieces; ``pairs``: a pair task is built as the tokenizer builds pairs (else refused: a
    pretrained classifier reads one text); ``option``: the option that chose the checkpoint, for the messages."""

    def __init__(self, source, tokenizer, max_length: int, pairs: bool = True, option: str = "encoder.path", **kwargs):
        super().__init__(source, **kwargs)
        self.tokenizer, self.max_length, self.pairs, self.option = tokenizer, int(max_length), pairs, option

    def setup(self, stage: str | None = None) -> None:
        if self.data is not None:
            return
        if self.preprocessing.inject:
            raise UserError(
                f"dataset.inject: {self.option} reads texts through its checkpoint's tokenizer, which has no marker "
                "tokens; set dataset.inject.count=0"
            )
        tokenized, _, stats, _ = _tokenize_and_filter(self.source, self.source.load(), self.preprocessing)
        pair = next(iter(tokenized.values()))[0][2] is not None
        if pair and not self.pairs:
            raise UserError(f"{self.option}: {self.source.name} is a pair task; a pretrained classifier reads one text")
        rationales = _clip_rationales(tokenized)
        special = set(self.tokenizer.all_special_ids)
        splits = {}
        for split, kept in tokenized.items():
            texts = [tokens for _, tokens, _ in kept]
            queries = [query for _, _, query in kept] if pair else None
            try:
                encoded = self.tokenizer(
                    texts,
                    queries,
                    is_split_into_words=True,
                    truncation="only_first" if pair else True,
                    max_length=self.max_length,
                )
            except Exception as err:  # the tokenizers library's own (a plain Exception) when a question leaves no room
                if "runcat" not in str(err):
                    raise
                raise UserError(self._no_room(split)) from None
            ids = [np.asarray(x, dtype=np.int64) for x in encoded["input_ids"]]
            if any(len(x) < 2 or x[0] not in special or x[-1] not in special for x in ids):
                raise UserError(f"{self.option}: its tokenizer does not wrap a text in special tokens ([CLS] … [SEP])")
            words = [piece_words(encoded, n) for n in range(len(kept))]
            if pair:
                asked = self.tokenizer(queries, is_split_into_words=True, add_special_tokens=False)["input_ids"]
                if any(encoded.sequence_ids(n).count(1) < len(q) for n, q in enumerate(asked)):
                    raise UserError(self._no_room(split))
            if any((w == NOT_A_WORD).all() for w in words):
                raise UserError(
                    f"{self.option}: its tokenizer leaves no piece of a {split} text (of characters it drops); "
                    "filter such texts out of the dataset"
                )
            cut = sum(int(w.max(initial=NOT_A_WORD)) + 1 < len(t) for w, t in zip(words, texts))
            if cut:
                log.info("%s: %d %s texts cut to %d pieces", self.option, cut, split, self.max_length)
            pieces = None
            if kept[0][0].rationale is not None:
                pieces = [
                    tuple(int(k) for k in np.flatnonzero(np.isin(w, list(chosen or ()))))
                    for w, chosen in zip(words, rationales[split])
                ]
            splits[split] = PretrainedSplit(
                ids=ids,
                labels=np.asarray([e.label for e, _, _ in kept], dtype=np.int64),
                uids=[e.uid for e, _, _ in kept],
                rationales=pieces,
                boundary=True,
                words=words,
            )
        vocab = TokenizerVocab(self.tokenizer)
        stats["vocab_size"] = len(vocab)
        self.data = ProcessedDataset(
            name=self.source.name,
            num_classes=self.source.num_classes,
            label_names=list(self.source.label_names),
            vocab=vocab,
            splits=splits,
            stats=stats,
        )

    def _no_room(self, split: str) -> str:
        return (
            f"{self.option}: a {split} question does not fit in {self.max_length} pieces with its passage; give "
            "encoder.max_length more pieces, or shorten the questions"
        )

    def loader(self, split: str, shuffle: bool = False, batch_size: int | None = None, indices=None):
        """``TextDataModule.loader``'s batches, each with its pieces' words (:func:`collate_pieces`)."""
        loader = super().loader(split, shuffle, batch_size, indices)
        loader.collate_fn = partial(collate_pieces, words=self.split(split).words, num_classes=self.num_classes)
        return loader


def piece_words(encoded, n: int) -> np.ndarray:
    """Instance ``n`` of a tokenizer's batch ``encoded``: the word index of each piece of its first text,
    ``NOT_A_WORD`` for the special tokens and the pieces of a pair's second text."""
    return np.asarray(
        [
            NOT_A_WORD if word is None or sequence != 0 else word
            for word, sequence in zip(encoded.word_ids(n), encoded.sequence_ids(n))
        ],
        dtype=np.int64,
    )
