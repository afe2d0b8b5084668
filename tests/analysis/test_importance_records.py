"""The importance methods as records (attn_study/analysis/importance/methods.py): what each record says of its
method — signed or not, through the attention or not — is what its computation does, and the families' lists of
methods are the records'."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from attn_study.analysis.importance import METHODS, ImportanceOptions, importance, predict
from attn_study.families.faithfulness.keys import FF_METHODS
from attn_study.families.faithfulness.measures import CLASS_SUM_ZERO
from attn_study.models import encoders
from tests.helpers import tiny_model, token_batch

SEQS = [[5, 6, 7, 8, 9, 10], [11, 12, 13], [14, 15, 16, 17], [18, 19, 20, 21, 22, 23, 24]]
#: the methods that differentiate the model's output with respect to its embeddings
GRADIENTS = ("gradient", "grad_norm", "input_x_gradient", "integrated_gradients")


def test_every_record_names_its_method_its_formula_and_its_paper():
    assert [method.name for method in METHODS.values()] == list(METHODS)
    for method in METHODS.values():
        assert method.paper and "\n\n" in method.formula, method.name  # a sentence, then the formula on its own


def test_the_records_are_the_methods_the_faithfulness_keys_describe_in_their_order():
    assert list(METHODS) == list(FF_METHODS)


def test_the_methods_whose_class_scores_sum_to_zero_are_the_signed_ones_explaining_a_class():
    """Σ_c of a signed score of p_c is 0 (Σ_c p_c = 1): input × gradient, integrated gradients, signed leave-one-out."""
    assert CLASS_SUM_ZERO == ("input_x_gradient", "integrated_gradients", "loo")


@pytest.fixture(scope="module")
def scored():
    """Every token-level method's scores on a BiLSTM whose attention depends on the input, and each gradient's with
    the attention's dependence cut (α detached in the model's attend)."""
    model = tiny_model(partial(encoders.RNNEncoder, hidden_size=4), num_classes=3, double=True, seed=2)
    batch = token_batch(SEQS)
    _, alpha, probs = predict(model, batch)
    options = ImportanceOptions(ig_steps=16)
    methods = [name for name, method in METHODS.items() if not method.layer_attention]
    scores = {name: importance(name, model, batch, alpha, probs, options)[0] for name in methods}
    attend = model.attend
    model.attend = lambda enc: attend(enc).detach()
    try:
        detached = {name: importance(name, model, batch, alpha, probs, options)[0] for name in GRADIENTS}
    finally:
        del model.attend
    return scores, detached, batch["mask"]


def test_an_unsigned_method_never_scores_below_zero_and_a_signed_one_does(scored):
    scores, _, mask = scored
    for name, values in scores.items():
        lowest = float(values[mask].min())
        assert (lowest < 0) == METHODS[name].signed, (name, lowest)


def test_a_gradient_flows_through_the_attention_exactly_when_its_record_says_so(scored):
    """Detaching α in the model changes a gradient that flows through it, and leaves one taken with α constant."""
    scores, detached, _ = scored
    for name in GRADIENTS:
        same = torch.allclose(scores[name], detached[name], atol=1e-12, rtol=0)
        assert same != METHODS[name].through_attention, name
