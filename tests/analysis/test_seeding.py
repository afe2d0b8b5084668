"""Each instance's random draws (analysis/seeding.py) are its own: batch size and padding never change a
statistic, and the adversary's closed-form gradient equals autograd's."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
import torch

from attn_study.analysis.measuring import analysis_mode
from attn_study.analysis.seeding import instance_draws
from attn_study.families.jain_wallace.adversarial import adversary_objective
from attn_study.families.jain_wallace.callback import JainWallace
from attn_study.families.serrano_smith.callback import SerranoSmith
from attn_study.models import encoders, projection
from attn_study.stats import jsd
from tests.helpers import StubData, tiny_model, token_batch

SEQS = [
    [5, 6, 7, 8, 9, 10, 11, 12, 13],
    [12, 13, 14],
    [15],
    [16, 17, 18, 19, 20, 2, 3],
    [4, 9],
    [7, 7, 8, 3],
    [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14],
]


def test_draws_depend_on_the_instance_alone():
    batch = token_batch(SEQS)
    whole = instance_draws(batch["index"], batch["mask"], 3, 2, (4,))
    assert whole.shape == (len(SEQS), 4, 13)
    assert torch.all(whole[~batch["mask"][:, None, :].expand_as(whole)] == 0)
    # instance 3 alone, in a batch of its own width: the same numbers, numpy's default_rng([seed, index, stream])
    alone = token_batch([SEQS[3]])
    alone["index"] = torch.tensor([3])
    torch.testing.assert_close(
        instance_draws(alone["index"], alone["mask"], 3, 2, (4,))[0], whole[3, :, :7], rtol=0, atol=0
    )
    expected = np.random.default_rng([3, 3, 2]).random((4, 7))
    torch.testing.assert_close(whole[3, :, :7], torch.from_numpy(expected), rtol=0, atol=0)
    # another seed, another stream: other numbers; normal draws are normal-looking
    assert not torch.equal(instance_draws(batch["index"], batch["mask"], 4, 2, (4,)), whole)
    assert not torch.equal(instance_draws(batch["index"], batch["mask"], 3, 3, (4,)), whole)
    normal = instance_draws(batch["index"], batch["mask"], 3, 3, (200,), normal=True)
    real = normal[batch["mask"][:, None, :].expand_as(normal)]
    assert abs(float(real.mean())) < 0.05 and abs(float(real.std()) - 1) < 0.05


def test_every_stream_keeps_its_published_number():
    """The streams were numbered once (a renumbered stream changes every published result drawn from it): the shared
    importance method ``random`` 1; faithfulness's tie-breaks 0 and soft masks 6; Jain & Wallace's permutations 2 and
    adversary initialisations 3; Serrano & Smith's random item 4 and random ranking 5."""
    from attn_study.analysis.seeding import SHARED_STREAMS
    from attn_study.families.faithfulness.callback import Faithfulness

    assert SHARED_STREAMS == {"random_importance": 1}
    assert Faithfulness.STREAMS == {"ties": 0, "soft": 6}
    assert JainWallace.STREAMS == {"permutation": 2, "adversary_init": 3}
    assert SerranoSmith.STREAMS == {"random_item": 4, "random_ranking": 5}


FAMILIES = {
    "jain_wallace": partial(JainWallace, seed=2, steps=40, permutations=20, tests=["permutation", "adversarial"]),
    "serrano_smith": partial(SerranoSmith, seed=2),
}


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("encoder", ["lstm", "average"])
def test_statistics_do_not_depend_on_the_batch_size(family, encoder):
    enc = {
        "lstm": partial(encoders.RNNEncoder, hidden_size=4),
        "average": partial(encoders.AverageEncoder, hidden_size=5),
    }[encoder]
    model = tiny_model(enc, proj=projection.Softmax, num_classes=3, double=True)
    batch = token_batch(SEQS, [0, 1, 2, 0, 1, 2, 0])
    data = StubData(batch, 3)
    indices = np.arange(len(SEQS))
    frames = []
    for size in (len(SEQS), 3, 1):
        analysis = FAMILIES[family](batch_size=size)
        with analysis_mode(model):
            frames.append(analysis.measure(model, data, "test", indices, list(analysis.tests)).frame)
    numeric = [c for c in frames[0].columns if frames[0][c].dtype.kind in "fiu"]
    assert len(numeric) > 5
    for other in frames[1:]:
        np.testing.assert_allclose(
            other[numeric].to_numpy(float), frames[0][numeric].to_numpy(float), atol=1e-9, rtol=0
        )


@pytest.mark.parametrize("diversity", ["pairs", "k_squared"])
def test_the_adversary_gradient_in_closed_form_equals_autograd(diversity):
    """∂/∂θ of the objective through the closed-form divergence gradient vs autograd through measures.jsd,
    with zeros in the model's attention (sparsemax) and padding in the adversaries."""
    gen = torch.Generator().manual_seed(0)
    b, k, t = 4, 5, 6
    mask = torch.ones(b, k, t, dtype=torch.bool)
    mask[1, :, 4:] = False
    alpha = torch.rand(b, t, generator=gen, dtype=torch.double)
    alpha[0, :2] = 0.0
    alpha[1, 4:] = 0.0
    alpha = alpha / alpha.sum(-1, keepdim=True)
    theta = torch.randn(b, k, t, generator=gen, dtype=torch.double, requires_grad=True)
    change = torch.rand(b, k, generator=gen, dtype=torch.double) * 0.02

    def by_autograd(adv):
        pairs = torch.triu(torch.ones(k, k, dtype=torch.bool), diagonal=1)
        unordered = jsd(adv[:, :, None, :], adv[:, None, :, :])[:, pairs].sum(-1)
        spread = unordered / (k * (k - 1)) if diversity == "pairs" else 2.0 * unordered / (k * k)
        return jsd(adv, alpha[:, None, :]).sum(-1) + spread - (500.0 / k) * torch.relu(change - 0.01).sum(-1)

    values, grads = [], []
    for objective in (
        by_autograd,
        lambda adv: adversary_objective(adv, alpha, change, 500.0, 0.01, diversity=diversity),
    ):
        adv = torch.softmax(theta.masked_fill(~mask, -torch.inf), dim=-1)
        value = objective(adv)
        values.append(value.detach())
        grads.append(torch.autograd.grad((value * torch.arange(1.0, b + 1, dtype=torch.double)).sum(), theta)[0])
    torch.testing.assert_close(values[1], values[0], rtol=0, atol=1e-12)
    torch.testing.assert_close(grads[1], grads[0], rtol=0, atol=1e-12)
    assert torch.isfinite(grads[1]).all() and grads[1][1, :, 4:].abs().max() == 0
