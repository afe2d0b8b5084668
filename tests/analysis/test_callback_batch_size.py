"""The analyses' automatic batch size (``AnalysisCallback.batch_size_for``, attn_study/analysis/callback.py): with
``batch_size=null`` a family takes as many instances as a token budget holds, the longest analysed text deciding —
tokens // T for a family whose work per instance is linear in T, tokens // T² for one whose work is T × T
(``QUADRATIC``: Meister's sparsity family) —, at least 1 and at most the device's cap."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from attn_study.families.jain_wallace.callback import JainWallace
from attn_study.families.sparsity.callback import Sparsity
from tests.helpers import StubData, tiny_model, token_batch

LENGTHS = np.array([30, 100, 7, 64, 200, 600])


class Lengths:
    """The one thing ``batch_size_for`` reads of the data: the split's text lengths."""

    def split(self, _name):
        return SimpleNamespace(lengths=LENGTHS)


@pytest.mark.parametrize(
    ("indices", "linear", "quadratic"),
    [
        # Jain & Wallace: 32768 tokens, at most 512; sparsity: 262144 (T² units), at most 64
        ([0, 1, 2, 3], 327, 26),  # longest 100: 32768 // 100 = 327; 262144 // 100² = 26
        ([0, 2, 3], 512, 64),  # longest 64: 32768 // 64 = 512; 262144 // 64² = 64 — both their caps
        ([2], 512, 64),  # longest 7: 4681 and 5349, over both caps
        ([4, 0], 163, 6),  # longest 200: 32768 // 200 = 163; 262144 // 200² = 6
        ([5], 54, 1),  # longest 600: 32768 // 600 = 54; 262144 // 600² = 0, at least 1
    ],
)
def test_on_a_cpu_the_token_budget_is_divided_by_the_longest_text_or_its_square(indices, linear, quadratic, capsys):
    assert (Sparsity.QUADRATIC, JainWallace.QUADRATIC) == (True, False)
    # the budgets the values above are worked out from
    assert (JainWallace.CPU_TOKENS, JainWallace.CPU_MAX_BATCH, Sparsity.CPU_TOKENS, Sparsity.CPU_MAX_BATCH) == (
        32_768,
        512,
        262_144,
        64,
    )
    cpu = torch.device("cpu")
    assert JainWallace().batch_size_for(Lengths(), "test", np.array(indices), cpu) == linear
    assert Sparsity().batch_size_for(Lengths(), "test", np.array(indices), cpu) == quadratic
    longest = LENGTHS[indices].max()
    said = capsys.readouterr().out
    assert f"sparsity on test: batch_size={quadratic} (auto: CPU, 262144 tokens, longest text {longest}²;" in said


def test_on_a_gpu_the_budget_is_half_the_free_memory_at_256_kib_a_token(monkeypatch, capsys):
    """80 GiB free: 40 GiB / 256 KiB = 163840 tokens (both families); longest 100: 1638 instances, or 16 for the
    T × T family; at most 8192."""
    assert (Sparsity.GPU_BYTES_PER_TOKEN, Sparsity.GPU_MAX_BATCH) == (JainWallace.GPU_BYTES_PER_TOKEN, 8192)
    assert JainWallace.GPU_BYTES_PER_TOKEN == 256 * 1024
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (80 * 2**30, 141 * 2**30))
    gpu = torch.device("cuda")
    indices = np.array([0, 1, 2, 3])
    assert JainWallace().batch_size_for(Lengths(), "test", indices, gpu) == 1638
    assert Sparsity().batch_size_for(Lengths(), "test", indices, gpu) == 16
    assert JainWallace().batch_size_for(Lengths(), "test", np.array([2]), gpu) == 8192  # 23405: over the cap
    said = capsys.readouterr().out
    assert "sparsity on test: batch_size=16 (auto: half of 80 GiB free, 163840 tokens, longest text 100²;" in said


def test_no_instance_or_one_token_texts_take_the_cap(capsys):
    """Nothing to analyse, or texts of one token: the longest text counts as 1 token, and the size is the cap."""
    one_token = SimpleNamespace(split=lambda _name: SimpleNamespace(lengths=np.array([1, 1])))
    cpu = torch.device("cpu")
    for data, indices in ((Lengths(), np.array([], dtype=np.int64)), (one_token, np.array([0, 1]))):
        assert Sparsity().batch_size_for(data, "test", indices, cpu) == 64
        assert JainWallace().batch_size_for(data, "test", indices, cpu) == 512
        said = capsys.readouterr().out
        assert "(auto: CPU, 262144 tokens, longest text 1²;" in said and "32768 tokens, longest text 1;" in said


def test_a_family_measures_in_batches_of_the_size_it_chose():
    """The loader is asked for the automatic size: texts of 40, 90 and 12 tokens, 262144 // 90² = 32 for sparsity,
    32768 // 90 = 364 for Jain & Wallace; a size set by the user is used as it is."""
    batch = token_batch([[5] * 40, [6] * 90, [7] * 12])
    asked = []

    class Recording(StubData):
        def loader(self, split, batch_size=None, indices=None, shuffle=False):
            asked.append(batch_size)
            return super().loader(split, batch_size=batch_size, indices=indices)

    model, data = tiny_model(), Recording(batch)
    for family in (Sparsity(), JainWallace(), Sparsity(batch_size=2)):
        with family.measuring(model, data, "test", np.arange(3), family.tests) as run:
            assert sum(len(b["index"]) for b in run) == 3
    assert asked == [32, 364, 2]
