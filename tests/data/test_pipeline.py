"""Preprocessing, the on-disk cache, batching."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attn_study.data.datamodule import BucketBatchSampler, TextDataModule, collate
from attn_study.data.example import RawExample
from attn_study.data.processed import Preprocessing, build, cache_key, load_or_build
from attn_study.errors import DataError


class ListSource:
    """A tiny in-memory source with the interface every dataset source has."""

    name = "tiny"
    num_classes = 2
    label_names = ["neg", "pos"]

    def __init__(self, splits, tag="v1"):
        self.splits, self.tag, self.loads = splits, tag, 0

    def fingerprint(self):
        return {"tag": self.tag}

    def load(self):
        self.loads += 1
        return self.splits


def tiny(query=False):
    def ex(i, text, label):
        return RawExample(uid=str(i), text=text, label=label, query="what is it ?" if query else None)

    texts = ["good film", "a bad bad film", "great", "the worst film of 1999 ever made , truly", "fine fine"]
    return {split: [ex(i, t, i % 2) for i, t in enumerate(texts)] for split in ("train", "dev", "test")}


def test_length_filter_is_inclusive_counted_and_truncation_cuts(caplog):
    caplog.set_level("INFO")
    data = build(ListSource(tiny()), Preprocessing(min_length=2, max_length=4))
    assert data.stats["train"] == {"read": 5, "kept": 3, "too_short": 1, "too_long": 1, "longest": 0}
    assert sorted(len(x) for x in data.splits["train"].ids) == [2, 2, 4]  # both bounds inclusive
    assert "tiny/train: 5 read, 3 kept; dropped: 1 shorter than 2 tokens, 1 longer than 4 tokens" in caplog.text
    cut = build(ListSource(tiny()), Preprocessing(truncate=3))
    assert max(len(x) for x in cut.splits["test"].ids) == 3 and cut.stats["test"]["kept"] == 5


def test_vocab_min_count_and_unknown_words():
    data = build(ListSource(tiny()), Preprocessing(min_count=2))
    assert set(data.vocab.itos[2:]) == {"film", "bad", "fine"}
    assert data.vocab.itos[data.splits["train"].ids[2][0]] == "<unk>"  # "great" is seen once


def test_empty_split_and_filter_that_empties_a_split_are_errors():
    splits = tiny()
    splits["dev"] = []
    with pytest.raises(DataError, match="dev split is empty"):
        build(ListSource(splits), Preprocessing())
    with pytest.raises(DataError, match="removes every train instance; relax dataset.preprocessing"):
        build(ListSource(tiny()), Preprocessing(min_length=50))
    with pytest.raises(DataError, match="max_length"):
        Preprocessing(min_length=5, max_length=2)


def test_a_label_outside_the_classes_is_an_error_naming_the_split():
    """2 classes: labels 0..1. -1 among 0, 1, 0, 0 is outside, although the largest label is inside; 2 (the
    number of classes) among 0, 1, 0, 0 is outside, although the smallest is inside."""
    for bad in (-1, 2):
        splits = tiny()
        splits["train"][3] = RawExample(uid="3", text="x y", label=bad)
        with pytest.raises(DataError, match=r"^dataset tiny/train: labels outside 0\.\.1$"):
            build(ListSource(splits), Preprocessing())


def test_boundary_tokens_move_each_rationale_position_by_one():
    """ "good film" with rationale (1,) "film" becomes <sos> good film <eos>: "film" is now at 2; "a bad bad film"
    with (0, 2) ("a", the second "bad") becomes (1, 3)."""

    def ex(i, text, rationale):
        return RawExample(uid=str(i), text=text, label=i % 2, rationale=rationale)

    splits = {s: [ex(0, "good film", (1,)), ex(1, "a bad bad film", (0, 2))] for s in ("train", "dev", "test")}
    data = build(ListSource(splits), Preprocessing(boundary_tokens=True))
    train = data.splits["train"]
    assert train.rationales == [(2,), (1, 3)]
    assert [data.vocab.decode(ids[list(r)]) for ids, r in zip(train.ids, train.rationales)] == [
        ["film"],
        ["a", "bad"],
    ]


def test_a_cache_folder_whose_parents_do_not_exist_yet_is_created_and_used(tmp_path):
    source = ListSource(tiny())
    cache = tmp_path / "not" / "yet"
    load_or_build(source, Preprocessing(), cache)
    load_or_build(source, Preprocessing(), cache)
    assert source.loads == 1 and (next(cache.iterdir()) / "COMPLETE").is_file()


def test_cache_is_reused_keyed_and_rebuilt_when_corrupt(tmp_path):
    source = ListSource(tiny())
    first = load_or_build(source, Preprocessing(), tmp_path)
    second = load_or_build(source, Preprocessing(), tmp_path)
    assert source.loads == 1 and second.vocab.itos == first.vocab.itos
    # another preprocessing or another source content is another entry
    assert cache_key(source, Preprocessing(min_count=2)) != cache_key(source, Preprocessing())
    assert cache_key(ListSource(tiny(), tag="v2"), Preprocessing()) != cache_key(source, Preprocessing())
    entry = next(tmp_path.iterdir())
    # a truncated data file (the marker's size disagrees) is rebuilt
    data = entry / "dataset.pkl"
    data.write_bytes(data.read_bytes()[:50])
    load_or_build(source, Preprocessing(), tmp_path)
    assert source.loads == 2
    # garbage with a matching marker is rebuilt too
    data.write_bytes(b"garbage!")
    (entry / "COMPLETE").write_text(str(len(b"garbage!")))
    rebuilt = load_or_build(source, Preprocessing(), tmp_path)
    assert source.loads == 3 and rebuilt.vocab.itos == first.vocab.itos
    # a missing marker (a write interrupted before it) is rebuilt
    (entry / "COMPLETE").unlink()
    load_or_build(source, Preprocessing(), tmp_path)
    assert source.loads == 4 and (entry / "COMPLETE").is_file()


def test_collate_pads_masks_and_carries_pair_and_sentence_fields():
    items = [
        {
            "index": 4,
            "ids": np.array([5, 6, 7]),
            "label": 1,
            "query_ids": np.array([9]),
            "sentence_lengths": np.array([2, 1]),
        },
        {
            "index": 2,
            "ids": np.array([8]),
            "label": 0,
            "query_ids": np.array([9, 10]),
            "sentence_lengths": np.array([1]),
        },
    ]
    batch = collate(items)
    assert batch["ids"].tolist() == [[5, 6, 7], [8, 0, 0]]
    assert batch["mask"].tolist() == [[True, True, True], [True, False, False]]
    assert batch["lengths"].tolist() == [3, 1] and batch["labels"].tolist() == [1, 0]
    assert batch["index"].tolist() == [4, 2]
    assert batch["query_ids"].tolist() == [[9, 0], [9, 10]] and batch["query_lengths"].tolist() == [1, 2]
    assert batch["sentence_ids"].tolist() == [[0, 0, 1], [0, -1, -1]]


def test_bucket_sampler_covers_every_index_once_with_similar_lengths():
    lengths = np.random.default_rng(0).integers(1, 200, size=1000)
    sampler = BucketBatchSampler(lengths, batch_size=32, shuffle=True, seed=0, pool=10)
    batches = list(sampler)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(1000)) and len(batches) == len(sampler)
    spread = np.mean([lengths[b].max() - lengths[b].min() for b in batches])
    assert spread < 30  # random batches would spread over ~190
    sampler.set_epoch(1)
    assert list(sampler) != batches  # a new order each epoch
    sampler.set_epoch(0)
    assert list(sampler) == batches  # the order of an epoch is a function of (seed, epoch): resumable
    again = BucketBatchSampler(lengths, batch_size=32, shuffle=True, seed=0, pool=10)
    assert list(again) == batches  # reproducible from the seed
    unbucketed = BucketBatchSampler(lengths, batch_size=32, shuffle=True, seed=0, pool=1)
    assert sorted(i for b in unbucketed for i in b) == list(range(1000))
    assert np.mean([lengths[b].max() - lengths[b].min() for b in unbucketed]) > 100  # random batches
    ordered = [i for b in BucketBatchSampler(lengths, 32, shuffle=False) for i in b]
    assert list(lengths[ordered]) == sorted(lengths)


def test_datamodule_batches_index_back_into_the_split(tmp_path):
    dm = TextDataModule(ListSource(tiny(query=True)), batch_size=2, cache_dir=tmp_path)
    dm.setup()
    seen = []
    for batch in dm.test_dataloader():
        for row, idx in enumerate(batch["index"].tolist()):
            n = int(batch["lengths"][row])
            assert batch["ids"][row, :n].tolist() == dm.split("test").ids[idx].tolist()
            assert "query_ids" in batch
            seen.append(idx)
    assert sorted(seen) == list(range(5))
    assert isinstance(next(iter(dm.train_dataloader()))["ids"], torch.Tensor)


def test_unbucketed_training_batches_are_consecutive_cuts_of_the_epochs_shuffle(tmp_path):
    """``bucket=false``: a training batch is ``batch_size`` consecutive instances of the epoch's permutation (from
    (seed, epoch)), never regrouped by length across batches; the batches come in a shuffled order."""
    texts = [" ".join(["word"] * n) for n in range(1, 41)]  # 40 instances of 40 distinct lengths
    splits = {
        split: [RawExample(uid=str(i), text=t, label=i % 2) for i, t in enumerate(texts)]
        for split in ("train", "dev", "test")
    }
    dm = TextDataModule(ListSource(splits), batch_size=4, bucket=False, seed=3, cache_dir=tmp_path)
    served = [sorted(batch["index"].tolist()) for batch in dm.train_dataloader()]
    permutation = np.random.default_rng([3, 0]).permutation(40).tolist()
    assert sorted(served) == sorted(sorted(permutation[i : i + 4]) for i in range(0, 40, 4))


def test_a_fixed_attention_must_have_one_weight_per_token_of_each_instance(tmp_path):
    dm = TextDataModule(ListSource(tiny()), cache_dir=tmp_path)
    weights = [np.full(len(ids), 1 / len(ids)) for ids in dm.split("test").ids]
    dm.fix_attention({"test": weights})
    np.testing.assert_array_equal(dm.split("test").fixed_attention[1], weights[1])
    weights[1] = weights[1][:-1]  # one instance's attention a token short
    with pytest.raises(ValueError, match="test: the fixed attentions do not match the instances' lengths"):
        dm.fix_attention({"test": weights})


def test_cache_is_keyed_on_content_and_checks_its_own_bytes(tmp_path):
    """A CSV corrected in place with its size and mtime kept (``cp -p``) gets a new entry; an entry with
    flipped bits but the same size is rebuilt, never used."""
    import os

    from attn_study.data.user_csv import UserCSVSource
    from tests.data.canonical_files import write_user_csv

    path = write_user_csv(tmp_path / "data.csv")
    source = UserCSVSource(path=str(path), dataset="mine")
    cache = tmp_path / "cache"
    first = load_or_build(source, Preprocessing(), cache)
    stat = path.stat()
    text = path.read_text()
    flipped = text.replace("today,0,train", "today,1,train")  # one label corrected, the same length
    assert flipped != text and len(flipped) == len(text)
    path.write_text(flipped)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # what cp -p / rsync -a / tar x keep
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    second = load_or_build(source, Preprocessing(), cache)
    assert len(list(cache.glob("mine-*"))) == 2  # a new entry for the new content
    assert first.splits["train"].labels.tolist() == [1, 0, 0] and second.splits["train"].labels.tolist() == [1, 1, 0]
    # bits flipped inside an entry, its size unchanged: detected by the checksum and rebuilt
    entry = cache / f"mine-{cache_key(source, Preprocessing())}"
    blob = bytearray((entry / "dataset.pkl").read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    (entry / "dataset.pkl").write_bytes(bytes(blob))
    third = load_or_build(source, Preprocessing(), cache)
    assert third.splits["test"].labels.tolist() == second.splits["test"].labels.tolist()
    assert (entry / "dataset.pkl").read_bytes() != bytes(blob)  # rewritten
