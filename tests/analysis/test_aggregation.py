"""Attention through the layers (analysis/aggregation.py): rollout and flow against values worked out by hand
on hand-set attention, flow against a brute-force minimum cut, norms against the formula, and the Transformer
encoder's trace against its own forward pass."""

from __future__ import annotations

import itertools
from functools import partial

import numpy as np
import pytest
import torch

from attn_study.analysis import aggregation
from attn_study.analysis.aggregation import AggregationOptions, aggregated_importance, attention_norms, compose
from attn_study.errors import UserError
from attn_study.models.encoders import AverageEncoder, LayerTrace, TransformerEncoder
from tests.helpers import tiny_model


def transformer_model(layers: int = 2):
    """A tiny flat model with a Transformer encoder (model_dim 8, 2 heads), eval mode, frozen."""
    return tiny_model(partial(TransformerEncoder, model_dim=8, num_heads=2, num_layers=layers, ff_dim=16))


def average_model():
    return tiny_model(partial(AverageEncoder, hidden_size=4))


# Two layers over three positions (a fourth is padding). Layer 1's two heads average to
#   A1 = [[1, 0, 0], [.5, .5, 0], [0, 0, 1]]  →  Â1 = .5·A1 + .5·I = [[1, 0, 0], [.25, .75, 0], [0, 0, 1]]
# and layer 2 (both heads alike) is a cyclic shift
#   A2 = [[0, 1, 0], [0, 0, 1], [1, 0, 0]]    →  Â2 = [[.5, .5, 0], [0, .5, .5], [.5, 0, .5]]
# Rollout R = Â2·Â1 = [[.625, .375, 0], [.125, .375, .5], [.5, 0, .5]].
HEAD_A = [[1, 0, 0], [1, 0, 0], [0, 0, 1]]
HEAD_B = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
SHIFT = [[0, 1, 0], [0, 0, 1], [1, 0, 0]]


def hand_set(alpha):
    attention = torch.zeros(1, 2, 2, 4, 4, dtype=torch.float64)
    attention[0, 0, 0, :3, :3] = torch.tensor(HEAD_A)
    attention[0, 0, 1, :3, :3] = torch.tensor(HEAD_B)
    attention[0, 1, :, :3, :3] = torch.tensor(SHIFT)
    mask = torch.tensor([[True, True, True, False]])
    return attention, torch.tensor([alpha + [0.0]], dtype=torch.float64), mask


def test_rollout_equals_the_product_worked_by_hand():
    attention, alpha, mask = hand_set([1.0, 0.0, 0.0])
    matrix = aggregation.rollout(attention.mean(2), mask)
    expected = [[0.625, 0.375, 0, 0], [0.125, 0.375, 0.5, 0], [0.5, 0, 0.5, 0], [0, 0, 0, 0]]
    np.testing.assert_allclose(matrix[0].numpy(), expected, atol=1e-12)
    np.testing.assert_allclose(compose(matrix, alpha, mask)[0, :3].numpy(), [0.625, 0.375, 0], atol=1e-12)
    half = compose(matrix, torch.tensor([[0.5, 0.5, 0, 0]], dtype=torch.float64), mask)
    np.testing.assert_allclose(half[0, :3].numpy(), [0.375, 0.375, 0.25], atol=1e-12)


def test_flow_equals_the_maximum_flows_worked_by_hand():
    # α = (1, 0, 0): only layer-2 node 0 reaches the pooled vector (capacity 1), and it is fed by layer-1 nodes
    # 0 and 1 with .5 each. From token 0: 0→0→0 carries .5, 0→1→0 the .25 of edge 0→1: .75. From token 1:
    # 1→1 (.75) then 1→0 (.5): .5. Token 2 reaches layer-1 node 2 only, which does not feed node 0: 0.
    # Normalised: (.75, .5, 0) / 1.25 = (.6, .4, 0) — not rollout's (.625, .375, 0).
    attention, alpha, mask = hand_set([1.0, 0.0, 0.0])
    scores, too_long = aggregation.flow(attention.mean(2), alpha, mask, mask, max_length=8)
    np.testing.assert_allclose(scores[0, :3].numpy(), [0.6, 0.4, 0.0], atol=1e-9)
    assert scores[0, 3] == 0 and not too_long.any()
    # α = (.5, .5, 0): from token 0 .5 via node 0 and .25 via 0→1→1: .75; token 1 1→1 (.75) → nodes 0 and 1:
    # .75; token 2 2→2 (1) → node 1 (.5): .5 → (.75, .75, .5) / 2
    attention, alpha, mask = hand_set([0.5, 0.5, 0.0])
    scores, _ = aggregation.flow(attention.mean(2), alpha, mask, mask, max_length=8)
    np.testing.assert_allclose(scores[0, :3].numpy(), [0.375, 0.375, 0.25], atol=1e-9)


def brute_force_min_cuts(adjusted: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Per input token, the capacity of the minimum cut between it and the pooled vector, over every set of
    the other nodes on the source's side (max-flow = min-cut)."""
    layers, n, _ = adjusted.shape
    edges = [((k, j), (k + 1, i), adjusted[k, i, j]) for k in range(layers) for i in range(n) for j in range(n)]
    edges += [((layers, i), "pool", alpha[i]) for i in range(n)]
    nodes = [(k, i) for k in range(layers + 1) for i in range(n)]
    out = np.zeros(n)
    for source in range(n):
        others = [v for v in nodes if v != (0, source)]
        best = np.inf
        for chosen in itertools.product([False, True], repeat=len(others)):
            side = {(0, source)} | {v for v, c in zip(others, chosen) if c}
            best = min(best, sum(c for u, v, c in edges if u in side and v not in side))
        out[source] = best
    return out


def test_flow_equals_the_minimum_cut_on_random_attention():
    generator = torch.Generator().manual_seed(3)
    attention = torch.softmax(3 * torch.randn(1, 2, 2, 3, 3, generator=generator, dtype=torch.float64), -1)
    alpha = torch.softmax(torch.randn(1, 3, generator=generator, dtype=torch.float64), -1)
    mask = torch.ones(1, 3, dtype=torch.bool)
    adjusted = aggregation.residual_attention(attention.mean(2), mask)[0].numpy()
    cuts = brute_force_min_cuts(adjusted, alpha[0].numpy())
    scores, _ = aggregation.flow(attention.mean(2), alpha, mask, mask, max_length=8)
    np.testing.assert_allclose(scores[0].numpy(), cuts / cuts.sum(), atol=1e-7)


def test_flow_refuses_sequences_longer_than_its_bound_and_says_so():
    attention, alpha, mask = hand_set([1.0, 0.0, 0.0])
    both = (torch.cat([attention, attention]), torch.cat([alpha, alpha]), torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]]))
    scores, too_long = aggregation.flow(both[0].mean(2), both[1], both[2].bool(), both[2].bool(), max_length=2)
    assert too_long.tolist() == [True, False]
    assert torch.isnan(scores[0]).all() and torch.isfinite(scores[1]).all()


def test_flow_is_normalised_over_the_text_when_a_boundary_token_takes_most_of_it():
    # One layer over <sos>, w1, w2 (the text: w1, w2); every position attends to <sos> alone:
    #   A = [[1, 0, 0]] * 3  →  Â = [[1, 0, 0], [.5, .5, 0], [.5, 0, .5]], α = (0, .8, .2).
    # With one layer a token's flow is Σ_i min(Â[i, j], α_i): w1 min(.5, .8) = .5, w2 min(.5, .2) = .2, a total of
    # .7 < 1 (<sos> is no source), normalised (0, 5/7, 2/7).
    attention = torch.tensor([[[[1.0, 0, 0], [1, 0, 0], [1, 0, 0]]]], dtype=torch.float64)
    alpha = torch.tensor([[0.0, 0.8, 0.2]], dtype=torch.float64)
    mask, text = torch.ones(1, 3, dtype=torch.bool), torch.tensor([[False, True, True]])
    scores, _ = aggregation.flow(attention, alpha, mask, text, max_length=8)
    np.testing.assert_allclose(scores[0].numpy(), [0.0, 5 / 7, 2 / 7], atol=1e-9)


def test_norms_equal_the_formula_on_two_tokens():
    # one layer, two heads, vectors in 2-d: f^0(x_0) = (1, 0), f^0(x_1) = (0, 2), f^1(x_0) = (3, 4), f^1(x_1) = (1, 1)
    transformed = torch.tensor([[[[1.0, 0], [0, 2]], [[3, 4], [1, 1]]]], dtype=torch.float64)
    attention = torch.tensor([[[[0.5, 0.5], [0.25, 0.75]], [[1.0, 0], [0.5, 0.5]]]], dtype=torch.float64)
    norms = attention_norms(attention, transformed)
    # N[i, j] = ‖A^0[i, j] f^0(x_j) + A^1[i, j] f^1(x_j)‖
    expected = [
        [np.hypot(0.5 + 3, 4), np.hypot(0, 1)],  # (.5, 0) + (3, 4); (0, 1) + (0, 0)
        [np.hypot(0.25 + 1.5, 2), np.hypot(0.5, 1.5 + 0.5)],  # (.25, 0) + (1.5, 2); (0, 1.5) + (.5, .5)
    ]
    np.testing.assert_allclose(norms[0].numpy(), expected, atol=1e-12)
    one = attention_norms(attention, transformed, head=1)  # A^1[i, j]·‖f^1(x_j)‖
    np.testing.assert_allclose(one[0].numpy(), [[5.0, 0], [2.5, 0.5 * np.sqrt(2)]], atol=1e-12)


def encoder_and_batch(layers=2):
    torch.manual_seed(0)
    encoder = TransformerEncoder(6, model_dim=8, num_heads=2, num_layers=layers, ff_dim=16, dropout=0.1).eval()
    embedded = torch.randn(3, 5, 6)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 0, 0, 0]], dtype=torch.bool)
    return encoder, embedded, mask


def test_the_encoder_trace_gives_the_forward_pass_states_and_the_attention_torch_computes():
    encoder, embedded, mask = encoder_and_batch()
    with torch.no_grad():
        hidden = encoder(embedded, mask, mask.sum(1))
        trace = encoder.trace(embedded, mask)
        x = encoder.proj(embedded) + encoder.positions[:5]
        first = encoder.layers.layers[0]
        y = first.norm1(x)
        _, weights = first.self_attn(y, y, y, key_padding_mask=~mask, need_weights=True, average_attn_weights=False)
    torch.testing.assert_close(trace.hidden, hidden, atol=1e-5, rtol=0)
    torch.testing.assert_close(trace.attention[:, 0] * mask[:, None, :, None], weights * mask[:, None, :, None])
    assert trace.attention.shape == (3, 2, 2, 5, 5) and trace.transformed.shape == (3, 2, 2, 5, 8)
    rows = trace.attention.sum(-1)
    torch.testing.assert_close(rows, mask[:, None, None, :].float().expand_as(rows))
    # f^h(y_j) = W_O^h (W_V^h y_j + b_V^h): summed over heads and positions with A it is the attention block's output
    attn = first.self_attn
    value = torch.nn.functional.linear(y, attn.in_proj_weight[16:], attn.in_proj_bias[16:])
    head1 = value[..., 4:] @ attn.out_proj.weight[:, 4:].T
    torch.testing.assert_close(trace.transformed[:, 0, 1], head1, atol=1e-6, rtol=0)
    with torch.no_grad():
        block = first.self_attn(y, y, y, key_padding_mask=~mask, need_weights=False)[0]
    mixed = torch.einsum("bhij,bhjo->bio", trace.attention[:, 0], trace.transformed[:, 0]) + attn.out_proj.bias
    torch.testing.assert_close(mixed * mask[..., None], block * mask[..., None], atol=1e-6, rtol=0)


def test_a_real_position_does_not_depend_on_the_padding_after_it():
    encoder, embedded, mask = encoder_and_batch()
    with torch.no_grad():
        whole = encoder.trace(embedded, mask)
        short = encoder.trace(embedded[1:2, :3], mask[1:2, :3])
    torch.testing.assert_close(whole.attention[1:2, :, :, :3, :3], short.attention, atol=1e-6, rtol=0)


def uniform_attention_model():
    """A flat classifier whose Transformer attends uniformly (W_Q = W_K = 0, no biases): every layer's A is
    1/n everywhere, so for two tokens Â = [[.75, .25], [.25, .75]] and two layers roll out to
    [[.625, .375], [.375, .625]]."""
    model = transformer_model(2)
    for layer in model.encoder.layers.layers:
        with torch.no_grad():
            layer.self_attn.in_proj_weight[:16].zero_()
            layer.self_attn.in_proj_bias[:16].zero_()
    return model.eval()


def test_rollout_of_a_uniformly_attending_transformer_model_is_worked_out_by_hand():
    model = uniform_attention_model()
    batch = {"ids": torch.tensor([[2, 3]]), "mask": torch.ones(1, 2, dtype=torch.bool), "lengths": torch.tensor([2])}
    batch["index"] = torch.tensor([0])
    alpha = model.attend(model.encode(batch))
    scores, _ = aggregated_importance("rollout", model, batch, alpha, AggregationOptions())
    a0, a1 = alpha[0].tolist()
    expected = [0.625 * a0 + 0.375 * a1, 0.375 * a0 + 0.625 * a1]
    np.testing.assert_allclose(scores[0].tolist(), expected, atol=1e-6)
    raw, _ = aggregated_importance("raw", model, batch, alpha, AggregationOptions(layer=0, head=1))
    np.testing.assert_allclose(raw[0].tolist(), [0.5, 0.5], atol=1e-6)


def test_boundary_tokens_get_no_score_and_the_text_sums_to_one():
    model = transformer_model(2).eval()
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]], dtype=torch.bool)
    batch = {"ids": torch.tensor([[2, 3, 4, 5, 6], [2, 7, 8, 6, 0]]), "mask": mask, "lengths": mask.sum(1)}
    batch["token_mask"] = torch.tensor([[0, 1, 1, 1, 0], [0, 1, 1, 0, 0]], dtype=torch.bool)
    alpha = model.attend(model.encode(batch))
    for method in aggregation.AGGREGATIONS:
        scores, _ = aggregated_importance(method, model, batch, alpha, AggregationOptions())
        assert (scores[~batch["token_mask"]] == 0).all(), method
        torch.testing.assert_close(scores.sum(1), torch.ones(2), msg=method)


def test_models_without_layer_attention_or_with_too_few_layers_are_refused_in_one_line():
    with pytest.raises(UserError, match="encoder=transformer"):
        aggregation.check_aggregations(average_model(), ["rollout"], AggregationOptions(), "analysis.x.methods")
    model = transformer_model(2)
    with pytest.raises(UserError, match="2 layers"):
        aggregation.check_aggregations(model, ["raw"], AggregationOptions(layer=2), "analysis.x.methods")
    with pytest.raises(UserError, match="heads"):
        aggregation.check_aggregations(model, ["norms"], AggregationOptions(head=5), "analysis.x.methods")
    for head in (-1, 2):  # two heads: 0 and 1
        with pytest.raises(UserError, match=rf"head={head}, and the model has 2 heads \(0 … 1\)"):
            aggregation.check_aggregations(model, ["raw"], AggregationOptions(head=head), "analysis.x.methods")
    aggregation.check_aggregations(model, ["raw"], AggregationOptions(head=0), "x")
    aggregation.check_aggregations(model, ["raw", "flow"], AggregationOptions(layer=-2, head=1), "x")
    aggregation.check_aggregations(average_model(), ["attention", "loo"], AggregationOptions(), "x")


class HandSetModel:
    """A model whose layer attention is given (the ``layer_trace`` a wrapped checkpoint provides)."""

    attention_shape = (2, 2, False)

    def __init__(self, attention):
        self.attention = attention

    def layer_trace(self, batch):
        return LayerTrace(self.attention, None, torch.zeros(self.attention.shape[0], self.attention.shape[-1], 1))


def test_raw_attention_of_a_chosen_layer_and_head_through_the_pooling_attention():
    attention, alpha, mask = hand_set([0.0, 1.0, 0.0])  # α on position 1: row 1 of the chosen matrix
    model = HandSetModel(attention)
    batch = {"mask": mask}
    for layer, head, row in ((0, 0, [1, 0, 0]), (0, 1, [0, 1, 0]), (0, None, [0.5, 0.5, 0]), (-1, None, [0, 0, 1])):
        scores, _ = aggregated_importance("raw", model, batch, alpha, AggregationOptions(layer=layer, head=head))
        np.testing.assert_allclose(scores[0, :3].numpy(), row, atol=1e-12, err_msg=f"{layer}, {head}")
    with pytest.raises(UserError, match="value vectors"):
        aggregation.check_aggregations(model, ["norms"], AggregationOptions(), "analysis.x.methods")


def test_jain_wallace_correlates_the_chosen_layer_attention_and_refuses_it_without_a_transformer():
    from attn_study.analysis.importance import gradient_importance
    from attn_study.analysis.measuring import analysis_mode
    from attn_study.families.jain_wallace.callback import JainWallace
    from attn_study.stats import kendall_tau_b
    from tests.helpers import StubData, token_batch

    model = transformer_model(2)
    batch = token_batch([[4, 5, 6, 7, 8], [9, 10, 11], [12, 4, 13, 14]], boundary=True)
    analysis = JainWallace(tests=["correlation"], attention_scores="rollout")
    analysis.check_model(model)
    with analysis_mode(model):
        frame = analysis.measure(model, StubData(batch), "test", np.arange(3), ["correlation"]).frame
    alpha = model.attend(model.encode(batch))
    rollout, _ = aggregated_importance("rollout", model, batch, alpha, AggregationOptions())
    expected, _ = kendall_tau_b(rollout.double(), gradient_importance(model, batch).double(), batch["token_mask"])
    np.testing.assert_allclose(frame["tau_grad"], expected.numpy(), atol=1e-9)
    pooling, _ = kendall_tau_b(alpha.double(), gradient_importance(model, batch).double(), batch["token_mask"])
    assert not np.allclose(frame["tau_grad"], pooling.numpy())  # not the pooling attention's τ
    with pytest.raises(UserError, match="analysis.jain_wallace.attention_scores"):
        JainWallace(attention_scores="flow").check_model(average_model())
    with pytest.raises(UserError, match="choose from"):
        JainWallace(attention_scores="rolout")


def test_faithfulness_ranks_by_an_aggregation_on_a_transformer_and_refuses_it_elsewhere():
    from attn_study.analysis.measuring import analysis_mode
    from attn_study.families.faithfulness.callback import Faithfulness
    from tests.helpers import StubData, token_batch

    model = transformer_model(2)
    batch = token_batch([[4, 5, 6, 7, 8], [9, 10, 11], [12, 4, 13, 14]])
    analysis = Faithfulness(methods=["rollout", "flow"], fractions=[0.5], tests=["removal"])
    analysis.check_model(model)
    with analysis_mode(model):
        frame = analysis.measure(model, StubData(batch), "test", np.arange(3), ["removal"]).frame
    assert frame["rollout_comp_aopc"].notna().all() and frame["flow_too_long"].eq(0).all()
    with pytest.raises(UserError, match="analysis.faithfulness.methods: rollout"):
        Faithfulness(methods=["attention", "rollout"]).check_model(average_model())
    assert "rollout" not in Faithfulness().methods  # asked for by name only


# -- through aggregated_importance: the heads of a layer are averaged (issue 41) ---------------------------------


def test_rollout_and_flow_of_a_model_average_its_heads_worked_by_hand():
    """Layer 1's two heads differ (HEAD_A, HEAD_B): through the model's trace, rollout and flow use their mean.
    α = (1, 0, 0): rollout's row 0 (.625, .375, 0), flow (.6, .4, 0) (the worked products above); α = (.5, .5, 0):
    rollout (.375, .375, .25). Head 0 alone (Â1 = [[1, 0, 0], [.5, .5, 0], [0, 0, 1]]) would give rollout
    (.75, .25, 0) and (.5, .25, .25)."""
    for alpha_, method, expected in (
        ([1.0, 0.0, 0.0], "rollout", [0.625, 0.375, 0.0]),
        ([0.5, 0.5, 0.0], "rollout", [0.375, 0.375, 0.25]),
        ([1.0, 0.0, 0.0], "flow", [0.6, 0.4, 0.0]),
    ):
        attention, alpha, mask = hand_set(alpha_)
        scores, _ = aggregated_importance(method, HandSetModel(attention), {"mask": mask}, alpha, AggregationOptions())
        np.testing.assert_allclose(scores[0, :3].numpy(), expected, atol=1e-9, err_msg=f"{method}, α = {alpha_}")


def test_the_residual_adjustment_renormalises_over_the_real_positions_and_zeroes_padding():
    """Â = 0.5·A + 0.5·I over the real positions, rows renormalised: a row that gave mass to padding (a model that
    does not mask its queries' keys) loses it — row 0 (.5, .25 | .25): (.75, .125) / .875 = (6/7, 1/7) —, and a
    padding position's row and column are 0 whatever A holds there."""
    attention = torch.tensor([[[[0.5, 0.25, 0.25], [0.0, 1.0, 0.0], [0.2, 0.3, 0.5]]]], dtype=torch.float64)
    mask = torch.tensor([[True, True, False]])
    adjusted = aggregation.residual_attention(attention, mask)
    expected = [[6 / 7, 1 / 7, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
    np.testing.assert_allclose(adjusted[0, 0].numpy(), expected, atol=1e-12)
    np.testing.assert_allclose(
        aggregation.rollout(torch.cat([attention, attention], 1), mask)[0].numpy(),
        [
            [6 / 7 * 6 / 7, 6 / 7 * 1 / 7 + 1 / 7, 0.0],
            [0.0, 1.0, 0.0],
            [0.0, 0.0, 0.0],
        ],
        atol=1e-12,
    )


def test_norms_through_a_models_trace_compose_the_formula_with_the_pooling_attention():
    """One layer of two heads over two tokens (the vectors of test_norms_equal_the_formula_on_two_tokens), α = (1, 0):
    the scores are N's row 0, (‖(3.5, 4)‖, ‖(0, 1)‖), normalised; head 1 alone: (5, 0)."""

    class Traced(HandSetModel):
        attention_shape = (1, 2, True)

        def layer_trace(self, batch):
            transformed = torch.tensor([[[[1.0, 0], [0, 2]], [[3, 4], [1, 1]]]], dtype=torch.float64)[:, None]
            return LayerTrace(self.attention, transformed, torch.zeros(1, 2, 1))

    attention = torch.tensor([[[[0.5, 0.5], [0.25, 0.75]], [[1.0, 0], [0.5, 0.5]]]], dtype=torch.float64)[:, None]
    batch = {"mask": torch.ones(1, 2, dtype=torch.bool)}
    alpha = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    scores, _ = aggregated_importance("norms", Traced(attention), batch, alpha, AggregationOptions())
    first = np.hypot(3.5, 4)
    np.testing.assert_allclose(scores[0].numpy(), [first / (first + 1), 1 / (first + 1)], atol=1e-12)
    one, _ = aggregated_importance("norms", Traced(attention), batch, alpha, AggregationOptions(head=1))
    np.testing.assert_allclose(one[0].numpy(), [1.0, 0.0], atol=1e-12)
