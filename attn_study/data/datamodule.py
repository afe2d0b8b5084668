"""LightningDataModule: length-bucketed batches of padded token ids."""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from attn_study import ranges
from attn_study.data.processed import (
    Preprocessing,
    ProcessedDataset,
    ProcessedSplit,
    load_or_build,
)
from attn_study.data.text import PAD_ID
from attn_study.errors import UserError

log = logging.getLogger(__name__)


class SplitDataset(Dataset):
    """Index ``i`` of a processed split → a dict of that instance's arrays."""

    def __init__(self, split: ProcessedSplit):
        self.split = split

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, i: int) -> dict:
        s = self.split
        item = {"index": i, "ids": s.ids[i], "label": int(s.labels[i])}
        if s.query_ids is not None:
            item["query_ids"] = s.query_ids[i]
        if s.sentence_lengths is not None:
            item["sentence_lengths"] = s.sentence_lengths[i]
        if s.candidates is not None:
            item["candidates"] = s.candidates[i]
        if s.rationales is not None:
            item["rationale"] = s.rationales[i]
        if s.markers is not None:
            item["markers"] = s.markers[i]
        if s.boundary:
            item["boundary"] = True
        if s.fixed_attention is not None:
            item["fixed_attention"] = s.fixed_attention[i]
        return item


def _pad(seqs: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    ids = torch.full((len(seqs), int(lengths.max())), PAD_ID, dtype=torch.long)
    for row, seq in enumerate(seqs):
        ids[row, : len(seq)] = torch.from_numpy(np.asarray(seq))
    mask = torch.arange(ids.shape[1])[None, :] < lengths[:, None]
    return ids, lengths, mask


def collate(items: list[dict], num_classes: int | None = None) -> dict[str, torch.Tensor]:
    """Pad a list of instances into a batch.

    Keys: ``ids`` (B, T) long, ``lengths`` (B,), ``mask`` (B, T) bool (True on real tokens),
    ``labels`` (B,), ``index`` (B,) position in the split; for pair tasks ``query_ids``,
    ``query_lengths``, ``query_mask``; for QA with restricted answers ``candidates`` (B, num_classes)
    bool, True on the allowed answers; with sentence boundaries ``sentence_ids`` (B, T): the sentence
    index of each token, -1 on padding; where the dataset knows them, ``rationale`` (B, T) bool (the
    ground-truth rationale's tokens) and ``markers`` (B, T) bool (injected marker tokens); with another
    run's attention attached (:meth:`TextDataModule.fix_attention`) ``fixed_attention`` (B, T) float and
    ``fixed_lengths`` (B,); with boundary
    tokens, ``token_mask`` (B, T): the text's own tokens (``mask`` without ``<sos>`` and ``<eos>``).
    """
    ids, lengths, mask = _pad([it["ids"] for it in items])
    batch = {
        "ids": ids,
        "lengths": lengths,
        "mask": mask,
        "labels": torch.tensor([it["label"] for it in items], dtype=torch.long),
        "index": torch.tensor([it["index"] for it in items], dtype=torch.long),
    }
    if "query_ids" in items[0]:
        batch["query_ids"], batch["query_lengths"], batch["query_mask"] = _pad([it["query_ids"] for it in items])
    if "candidates" in items[0]:
        allowed = torch.zeros(len(items), num_classes, dtype=torch.bool)
        for row, it in enumerate(items):
            allowed[row, list(it["candidates"])] = True
        batch["candidates"] = allowed
    for name in ("rationale", "markers"):  # token positions → (B, T) bool
        if name in items[0]:
            positions = torch.zeros(ids.shape, dtype=torch.bool)
            for row, it in enumerate(items):
                positions[row, list(it[name] or ())] = True
            batch[name] = positions
    if "fixed_attention" in items[0]:  # another run's α: float (B, T), 0 on padding, and its lengths
        fixed = torch.zeros(ids.shape, dtype=torch.float32)
        for row, it in enumerate(items):
            fixed[row, : len(it["fixed_attention"])] = torch.from_numpy(it["fixed_attention"])
        batch["fixed_attention"] = fixed
        batch["fixed_lengths"] = torch.tensor([len(it["fixed_attention"]) for it in items], dtype=torch.long)
    if items[0].get("boundary"):  # <sos> … <eos>: the positions in between are the text's tokens
        batch["token_mask"] = (
            mask
            & (torch.arange(ids.shape[1])[None, :] > 0)
            & (torch.arange(ids.shape[1])[None, :] < (lengths - 1)[:, None])
        )
    if "sentence_lengths" in items[0]:
        sentence_ids = torch.full(ids.shape, -1, dtype=torch.long)
        for row, it in enumerate(items):
            per_token = np.repeat(np.arange(len(it["sentence_lengths"])), it["sentence_lengths"])
            sentence_ids[row, : len(per_token)] = torch.from_numpy(per_token)
        batch["sentence_ids"] = sentence_ids
    return batch


class BucketBatchSampler(Sampler[list[int]]):
    """Batches of similar length: shuffle, cut into pools of ``pool`` batches, sort each pool by
    length, batch it, shuffle the batch order. Without ``shuffle``: batches in length order.

    The order of epoch e is a function of (seed, e) alone: Lightning calls ``set_epoch`` before each
    training epoch, so a run resumed at epoch e sees the batches the uninterrupted run saw."""

    def __init__(self, lengths: np.ndarray, batch_size: int, shuffle: bool, seed: int = 0, pool: int = 50):
        self.lengths, self.batch_size, self.shuffle, self.seed, self.pool = lengths, batch_size, shuffle, seed, pool
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return -(-len(self.lengths) // self.batch_size)

    def __iter__(self):
        if not self.shuffle:
            order = np.argsort(self.lengths, kind="stable")
            yield from (order[i : i + self.batch_size].tolist() for i in range(0, len(order), self.batch_size))
            return
        rng = np.random.default_rng([self.seed, self.epoch])
        order = rng.permutation(len(self.lengths))
        span = self.batch_size * self.pool
        batches = []
        for start in range(0, len(order), span):
            pool = order[start : start + span]
            pool = pool[np.argsort(self.lengths[pool], kind="stable")]
            batches += [pool[i : i + self.batch_size].tolist() for i in range(0, len(pool), self.batch_size)]
        yield from (batches[i] for i in rng.permutation(len(batches)))


class TextDataModule(L.LightningDataModule):
    """Serves a dataset source (any object with ``name``, ``num_classes``, ``label_names``,
    ``load()`` and ``fingerprint()``) as padded, length-bucketed batches."""

    def __init__(
        self,
        source,
        preprocessing: Preprocessing | dict | None = None,
        batch_size: int = 32,
        eval_batch_size: int = 128,
        bucket: bool = True,
        cache_dir: str | Path | None = None,
        num_workers: int = 0,
        seed: int = 0,
        name: str | None = None,
    ):
        super().__init__()
        self.source = source
        self.preprocessing = (
            preprocessing if isinstance(preprocessing, Preprocessing) else Preprocessing(**(preprocessing or {}))
        )
        for option, value in (("batch_size", batch_size), ("eval_batch_size", eval_batch_size)):
            ranges.require(f"dataset.{option}", value, UserError)
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size
        self.bucket, self.cache_dir, self.num_workers, self.seed = bucket, cache_dir, num_workers, seed
        self.name = name or source.name
        self.data: ProcessedDataset | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.data is None:
            self.data = load_or_build(self.source, self.preprocessing, self.cache_dir)

    def shuffle_labels(self, seed: int) -> int:
        """Permute the train and dev labels (the test labels stay): a model trained on them learns no relation
        between text and label — Adebayo et al.'s (2018) randomised-label model. The permutation keeps each
        class's count and is a function of ``seed``; returns how many labels changed."""
        self.setup()
        rng = np.random.default_rng([int(seed), 0x5EED])
        changed = 0
        for name in ("train", "dev"):
            rows = self.data.splits[name]
            shuffled = rng.permutation(rows.labels)
            changed += int((shuffled != rows.labels).sum())
            rows.labels = shuffled
        return changed

    def fix_attention(self, attentions: dict[str, list[np.ndarray]]) -> None:
        """Attach another run's attention (``{split: [α per instance]}``, aligned with the splits) to every
        batch as ``fixed_attention``: what attention=preloaded uses, and the W&P adversary's reference."""
        self.setup()
        for split, values in attentions.items():
            rows = self.data.splits[split]
            if len(values) != len(rows) or any(len(a) != len(x) for a, x in zip(values, rows.ids)):
                raise ValueError(f"{split}: the fixed attentions do not match the instances' lengths")
            rows.fixed_attention = [np.asarray(a, dtype=np.float32) for a in values]

    @property
    def vocab(self):
        self.setup()
        return self.data.vocab

    @property
    def num_classes(self) -> int:
        self.setup()
        return self.data.num_classes

    def split(self, name: str) -> ProcessedSplit:
        self.setup()
        return self.data.splits[name]

    def loader(
        self, split: str, shuffle: bool = False, batch_size: int | None = None, indices: np.ndarray | None = None
    ) -> DataLoader:
        """A DataLoader over ``split`` (or only its ``indices``); every batch carries ``index``, the
        position of each instance in the split."""
        data = self.split(split)
        size = batch_size or (self.batch_size if shuffle else self.eval_batch_size)
        dataset = SplitDataset(data)
        if indices is not None:
            dataset = torch.utils.data.Subset(dataset, [int(i) for i in indices])
        collate_fn = partial(collate, num_classes=self.num_classes)
        lengths = data.lengths if indices is None else data.lengths[np.asarray(indices, dtype=np.int64)]
        if self.bucket or shuffle:  # unbucketed shuffling: pools of one batch (the order still a function of the epoch)
            sampler = BucketBatchSampler(lengths, size, shuffle=shuffle, seed=self.seed, pool=50 if self.bucket else 1)
            return DataLoader(dataset, batch_sampler=sampler, collate_fn=collate_fn, num_workers=self.num_workers)
        return DataLoader(dataset, batch_size=size, shuffle=False, collate_fn=collate_fn, num_workers=self.num_workers)

    def train_dataloader(self) -> DataLoader:
        return self.loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self.loader("dev")

    def test_dataloader(self) -> DataLoader:
        return self.loader("test")
