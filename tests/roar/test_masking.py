"""Which tokens a ROAR step masks (hand-worked cases), and the masks applied to a processed dataset."""

from __future__ import annotations

import numpy as np
import pytest

from attn_study.data.processed import ProcessedDataset, ProcessedSplit
from attn_study.data.text import Vocab
from attn_study.errors import DataError
from attn_study.roar import masking


@pytest.mark.parametrize(
    ("fraction", "n", "count"), [(0.15, 20, 3), (0.25, 10, 3), (0.1, 4, 0), (0.1, 5, 1), (0.5, 7, 4), (1.0, 9, 9)]
)
def test_masked_count_is_k_n_rounded_half_up(fraction, n, count):
    assert masking.masked_count(fraction, n) == count


def test_the_highest_scores_among_the_eligible_tokens_are_masked():
    scores = np.array([0.1, 0.9, 0.5, 0.95, 0.0, np.nan])
    eligible = np.array([True, True, True, False, True, True])  # position 3 is masked already
    keys = np.zeros(6)
    # 6 text tokens at k = 0.5: 3 masked in all, one already, so 2 more: the best eligible are 1 (0.9) and 2 (0.5)
    assert masking.choose(scores, eligible, 1, 6, 0.5, keys).tolist() == [1, 2]
    # nothing more when the earlier steps masked enough; NaN ranks lowest
    assert masking.choose(scores, eligible, 3, 6, 0.5, keys).tolist() == []
    assert masking.choose(scores, eligible, 0, 6, 5 / 6, keys).tolist() == [0, 1, 2, 4, 5]


def test_ties_are_broken_by_the_seeds_keys_alone():
    scores, eligible = np.ones(10), np.ones(10, dtype=bool)
    first = masking.choose(scores, eligible, 0, 10, 0.3, masking.tie_keys(13, "train", 4, 10))
    again = masking.choose(scores, eligible, 0, 10, 0.3, masking.tie_keys(13, "train", 4, 10))
    assert first.tolist() == again.tolist()
    keys = masking.tie_keys(13, "train", 4, 10)
    assert first.tolist() == sorted(np.argsort(keys)[:3].tolist())  # the lowest keys win a tie
    others = {
        tuple(masking.choose(scores, eligible, 0, 10, 0.3, masking.tie_keys(*where, 10)))
        for where in [(14, "train", 4), (13, "test", 4), (13, "train", 5)]
    }
    assert tuple(first) not in others  # another seed, split or instance draws other keys


def _dataset(boundary: bool = False):
    ids = [np.array([2, 3, 4, 5]), np.array([3, 3, 2])]
    split = ProcessedSplit(ids=ids, labels=np.array([0, 1]), uids=["a", "b"], boundary=boundary)
    return ProcessedDataset(
        "toy", 2, ["n", "p"], Vocab(["x", "y", "z", "w"]), {"train": split}, stats={"vocab_size": 6}
    )


def test_masks_replace_tokens_by_a_token_appended_to_the_vocabulary():
    data = _dataset()
    token = masking.apply(data, {"train": [np.array([0, 3]), np.array([], dtype=np.int64)]}, "<mask>")
    assert token == 6 and data.vocab.itos[6] == "<mask>" and data.stats["vocab_size"] == 7
    assert data.splits["train"].ids[0].tolist() == [6, 3, 4, 6] and data.splits["train"].ids[1].tolist() == [3, 3, 2]
    assert masking.shares(data, {"train": [np.array([0, 3]), np.array([])]}) == {"train": 2 / 7}
    boundary = _dataset(boundary=True)  # <sos> … <eos>: 2 + 1 text tokens
    assert masking.shares(boundary, {"train": [np.array([1]), np.array([])]}) == {"train": 1 / 3}


def test_nothing_masked_leaves_the_vocabulary_alone_and_a_word_of_the_text_is_no_mask():
    data = _dataset()
    assert masking.apply(data, {"train": [np.array([]), np.array([])]}, "<mask>") == -1 and len(data.vocab) == 6
    with pytest.raises(DataError, match="roar.token=y"):
        masking.check_token_unused(data, "y")


def test_a_roar_runs_name_says_how_its_data_was_masked(make_cfg):
    assert make_cfg("roar=recursive", "roar.method=loo", "roar.fraction=0.3").run_name.endswith("-recursive_loo0.3-s13")
    assert make_cfg().run_name == "synthetic-flat-lstm-additive-softmax-s13"


def test_one_wanted_one_candidate_and_more_masked_already_than_wanted():
    """k·n rounding to one token masks exactly the best one; a single eligible token left is masked; an instance
    whose earlier steps masked more than this step's round(k·n) gets nothing more (not "all but the excess")."""
    scores, keys = np.array([0.1, 0.9, 0.5, 0.3]), np.zeros(4)
    every = np.ones(4, dtype=bool)
    assert masking.choose(scores, every, 0, 10, 0.1, keys).tolist() == [1]  # round(0.1 · 10) = 1
    assert masking.choose(scores, np.array([False, False, True, False]), 0, 4, 0.5, keys).tolist() == [2]
    assert masking.choose(scores, every, 3, 4, 0.5, keys).tolist() == []  # round(0.5 · 4) − 3 = −1


def test_the_masked_share_of_a_split_without_text_tokens_is_zero_and_of_one_masked_token_one():
    split = ProcessedSplit(ids=[np.array([2, 3])], labels=np.array([0]), uids=["a"], boundary=True)  # <sos> <eos>
    data = ProcessedDataset("toy", 2, ["n", "p"], Vocab(["x"]), {"train": split}, stats={"vocab_size": 3})
    assert masking.shares(data, {"train": [np.array([], dtype=np.int64)]}) == {"train": 0.0}
    one = ProcessedSplit(ids=[np.array([2, 4, 3])], labels=np.array([0]), uids=["a"], boundary=True)  # one text token
    data.splits["train"] = one
    assert masking.shares(data, {"train": [np.array([1])]}) == {"train": 1.0}
