"""Madsen et al.'s (2022) conventions of recursive ROAR as options (issue 38 §7), each against a known answer:
⌊k n⌋ tokens, the gold label's importance, their gradient (a norm over the one-hot input), steps of 10 %; and
``roar=recursive`` defaults to them while ``roar=roar`` keeps the earlier ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from attn_study.analysis.importance import ImportanceOptions, predict
from attn_study.errors import UserError
from attn_study.models import attention, encoders
from attn_study.roar import job, masking, scores
from tests.helpers import tiny_model, token_batch


@pytest.mark.parametrize(
    ("fraction", "n", "floor", "half_up"),
    [(0.15, 20, 3, 3), (0.25, 10, 2, 3), (0.5, 7, 3, 4), (0.1, 9, 0, 1), (0.3, 10, 3, 3), (0.7, 10, 7, 7)],
)
def test_floor_rounding_masks_int_k_n_tokens(fraction, n, floor, half_up):
    """Madsen et al.'s ``int(k/100 · n)``: 0.25 · 10 = 2.5 masks 2 (half up: 3); 0.3 · 10 (3.0000000000000004 in
    floats) and 0.7 · 10 (7.000000000000001) are 3 and 7 either way."""
    assert masking.masked_count(fraction, n, "floor") == floor
    assert masking.masked_count(fraction, n, "half_up") == half_up
    scores_, keys = np.arange(n, dtype=float), np.zeros(n)
    assert len(masking.choose(scores_, np.ones(n, dtype=bool), 0, n, fraction, keys, "floor")) == floor


def test_recursive_roar_defaults_to_madsen_et_al_and_roar_keeps_its_conventions(make_cfg):
    assert job.conventions(make_cfg("roar=recursive").roar) == {
        "label": "gold",
        "gradient": "one_hot_norm",
        "rounding": "floor",
        "step": 0.1,
    }
    assert job.conventions(make_cfg("roar=roar").roar) == {
        "label": "predicted",
        "gradient": "jain_wallace",
        "rounding": "half_up",
        "step": None,
    }
    # a run configured before these options existed meant the latter
    assert job.conventions(OmegaConf.create({"fraction": 0.2}))["gradient"] == "jain_wallace"


# -- the class explained, and the gradient over the one-hot input ------------------------------------------------


def linear_model():
    """noenc, uniform attention (no attention parameters: α_t = 1/n whatever the embeddings), three classes:
    z = W ē + b, ē the mean of the text's embeddings; so ∂z_c/∂e_t = W_c / n."""
    model = tiny_model(encoders.NoEncoder, scorer=attention.UniformScorer, num_classes=3, double=True, seed=3)
    return model


def test_one_hot_gradient_norm_is_the_gradients_norm_over_the_one_hot_input():
    """Against autograd through an explicit one-hot input X (e = X E) on a BiLSTM: ‖∂y_c/∂x_t‖₂ over the
    vocabulary, y_c the logit of the class asked for (three classes; a binary model: ±x)."""
    for num_classes in (3, 2):
        model = tiny_model(num_classes=num_classes, double=True, seed=1)
        texts = [[5, 6, 7, 8, 9], [10, 11, 12], [13, 14, 15, 16]]
        batch = token_batch(texts, labels=[0, 1, 1])
        target = torch.tensor([1, 0, num_classes - 1])
        got = scores.one_hot_gradient_norm(model, batch, target)
        weight = model.embedding.weight
        for i, text in enumerate(texts):
            one = token_batch([text])
            x = torch.nn.functional.one_hot(torch.tensor(text), weight.shape[0]).double().requires_grad_(True)
            with torch.enable_grad():
                enc = model.encode(one, embedded=(x @ weight)[None])
                logits = model.decode(enc, model.attend(enc))[0]
                y = logits[target[i]] if num_classes > 2 else (logits[0] if target[i] == 1 else -logits[0])
                (grad,) = torch.autograd.grad(y, x)
            expected = grad.norm(dim=-1)
            np.testing.assert_allclose(got[i, : len(text)].numpy(), expected.numpy(), rtol=1e-10, atol=1e-12)
            assert (got[i, len(text) :] == 0).all()


def test_the_gold_labels_importance_is_the_gold_classs():
    """The closed-form model, an instance whose prediction is not its gold label: each class-dependent method
    explains the gold class — gradient |∂ℓ_y/∂e_t · e_t|, input × gradient ∂ℓ_y/∂e_t · e_t (ℓ_y = z_y −
    log Σ_{k≠y} e^{z_k}, so ∂ℓ_y/∂e_t = (W_y − Σ_{k≠y} π_k W_k)/n, π the softmax of the other logits), leave-one-out
    p(y|x) − p(y|x₋ₜ), and Madsen et al.'s gradient ‖E W_y‖/n — and not the predicted one."""
    model = linear_model()
    text = [4, 9, 13, 17, 21]
    n = len(text)
    probe = token_batch([text])
    predicted = int(predict(model, probe)[2].argmax(-1))
    gold = (predicted + 1) % 3
    batch = token_batch([text], labels=[gold])
    emb = model.embedding.weight[text]  # (n, d)
    w, b = model.output.weight, model.output.bias
    z = w @ emb.mean(0) + b

    def direction(c):  # ∂ℓ_c/∂ē
        others = [k for k in range(3) if k != c]
        pi = torch.softmax(z[others], 0)
        return w[c] - (pi[:, None] * w[others]).sum(0)

    def probability(tokens, c):
        return float(model.probabilities(model(token_batch([tokens]))[0])[0, c])

    def expected(method, gradient, c):
        if gradient == "one_hot_norm":
            return (model.embedding.weight @ w[c]).norm().expand(n) / n
        if method == "gradient":
            return (emb @ direction(c) / n).abs()
        if method == "input_x_gradient":
            return emb @ direction(c) / n
        drops = [probability(text, c) - probability(text[:t] + text[t + 1 :], c) for t in range(n)]  # loo
        return torch.tensor(drops, dtype=torch.float64)

    options = ImportanceOptions()
    for method, gradient in (
        ("gradient", "jain_wallace"),
        ("input_x_gradient", "jain_wallace"),
        ("loo", "jain_wallace"),
        ("gradient", "one_hot_norm"),
    ):
        got = scores.scores(method, model, batch, "gold", gradient, options)[0, :n]
        np.testing.assert_allclose(got.numpy(), expected(method, gradient, gold).numpy(), rtol=1e-9, atol=1e-12)
        other = scores.scores(method, model, batch, "predicted", gradient, options)[0, :n]
        np.testing.assert_allclose(other.numpy(), expected(method, gradient, predicted).numpy(), rtol=1e-9, atol=1e-12)
        assert not np.allclose(got.numpy(), other.numpy()), method  # the two classes' scores differ here
    with pytest.raises(UserError, match="roar.gradient=one_hot_norm"):
        scores.one_hot_gradient_norm(torch.nn.Linear(2, 2), batch, torch.tensor([gold]))


@pytest.mark.parametrize("method", ["attention", "raw", "rollout", "flow", "norms"])
def test_a_method_that_explains_no_class_scores_the_same_for_the_gold_label(method):
    """α and a Transformer's layer attention read no class: ``roar.label=gold`` gives the scores ``predicted`` does
    (attention: α itself), never a refusal."""
    from functools import partial

    model = tiny_model(partial(encoders.TransformerEncoder, model_dim=8, num_heads=2, num_layers=2, ff_dim=16))
    texts = [[4, 9, 13, 17, 21], [5, 6, 7]]
    predicted = predict(model, token_batch(texts))[2].argmax(-1)
    batch = token_batch(texts, labels=((predicted + 1) % 2).tolist())  # gold differs from the prediction
    gold = scores.scores(method, model, batch, "gold", "jain_wallace", ImportanceOptions())
    torch.testing.assert_close(
        gold, scores.scores(method, model, batch, "predicted", "jain_wallace", ImportanceOptions())
    )
    if method == "attention":
        torch.testing.assert_close(gold, predict(model, batch)[1])


# -- the step (its sweep job one step below: tests/roar/test_source.py) and the options' checks ---------------------


@pytest.mark.parametrize(
    ("roar", "says"),
    [
        ({"fraction": 0.15, "recursive": True, "step": 0.1}, "not a whole number of roar.step=0.1 steps"),
        ({"fraction": 0.2, "recursive": False, "step": 0.1}, "a step is recursive ROAR's"),
        ({"fraction": 0.2, "recursive": True, "step": 0.1, "label": "true"}, r"roar.label=true: choose from"),
        ({"fraction": 0.2, "recursive": True, "gradient": "norm"}, r"roar.gradient=norm: choose from"),
        ({"fraction": 0.2, "recursive": True, "rounding": "ceil"}, r"roar.rounding=ceil: choose from"),
    ],
)
def test_conventions_are_checked_in_one_line(roar, says):
    with pytest.raises(UserError, match=says) as err:
        job.check_conventions(OmegaConf.create(roar))
    assert "\n" not in str(err.value)
    assert job.check_conventions(OmegaConf.create({"fraction": 0.3, "recursive": True, "step": 0.1}))["step"] == 0.1
