"""A dataset tokenised by a pretrained checkpoint's tokenizer, for analysing that checkpoint
(``attn-study-analyze hf_model=<dir>``; models/huggingface.py).

The instances are the dataset's own — read, tokenised into words and length-filtered by the project's pipeline
(``processed``: the same instances and uids as a run of the project on the same settings) — and each text's words
are then split by the checkpoint's tokenizer (``is_split_into_words``), which adds its special tokens
(``[CLS]`` … ``[SEP]``: the batch's boundary tokens, read by the model, never scored). A known rationale's words map
to all their sub-word pieces. Texts longer than the model's positions are cut (``max_length``).
"""

from __future__ import annotations

import numpy as np

from attn_study.data.datamodule import TextDataModule
from attn_study.data.processed import ProcessedDataset, ProcessedSplit, _clip_rationales, _tokenize_and_filter
from attn_study.errors import UserError


class TokenizerVocab:
    """The ``Vocab`` interface the families read (``decode``, ``len``) over a Hugging Face tokenizer."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __len__(self) -> int:
        return len(self.tokenizer)

    def decode(self, ids) -> list[str]:
        return self.tokenizer.convert_ids_to_tokens([int(i) for i in ids])


class PretrainedTextData(TextDataModule):
    """A ``TextDataModule`` whose splits are tokenised by ``tokenizer`` (see the module docstring)."""

    def __init__(self, source, tokenizer, max_length: int, **kwargs):
        super().__init__(source, **kwargs)
        self.tokenizer, self.max_length = tokenizer, int(max_length)

    def setup(self, stage: str | None = None) -> None:
        if self.data is not None:
            return
        tokenized, _, stats, _ = _tokenize_and_filter(self.source, self.source.load(), self.preprocessing)
        if next(iter(tokenized.values()))[0][2] is not None:
            raise UserError(f"hf_model: {self.source.name} is a pair task; a pretrained classifier reads one text")
        rationales = _clip_rationales(tokenized)
        special = set(self.tokenizer.all_special_ids)
        splits = {}
        for split, kept in tokenized.items():
            words = [tokens for _, tokens, _ in kept]
            encoded = self.tokenizer(words, is_split_into_words=True, truncation=True, max_length=self.max_length)
            ids = [np.asarray(x, dtype=np.int64) for x in encoded["input_ids"]]
            if any(len(x) < 3 or x[0] not in special or x[-1] not in special for x in ids):
                raise UserError("hf_model: its tokenizer does not wrap a text in special tokens ([CLS] … [SEP])")
            pieces = None
            if kept[0][0].rationale is not None:
                pieces = []
                for n, chosen in enumerate(rationales[split]):
                    chosen = set(chosen or ())
                    pieces.append(tuple(k for k, w in enumerate(encoded.word_ids(n)) if w is not None and w in chosen))
            splits[split] = ProcessedSplit(
                ids=ids,
                labels=np.asarray([e.label for e, _, _ in kept], dtype=np.int64),
                uids=[e.uid for e, _, _ in kept],
                rationales=pieces,
                boundary=True,
            )
        self.data = ProcessedDataset(
            name=self.source.name,
            num_classes=self.source.num_classes,
            label_names=list(self.source.label_names),
            vocab=TokenizerVocab(self.tokenizer),
            splits=splits,
            stats=stats,
        )
