"""The training objectives (``attn_study/models/objectives.py``): each ``conf/training/*.yaml`` builds the one
it names with its options; the model-consistent adversary's loss by hand; what each refuses."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from attn_study.errors import UserError
from attn_study.models import objectives
from attn_study.models.module import AttentionModule
from tests.helpers import tiny_model

CONF = Path(__file__).resolve().parents[2] / "conf"


def training_node(name: str) -> dict:
    with initialize_config_dir(str(CONF), version_base=None):
        cfg = compose("config", overrides=[f"training={name}"])
    return dict(cfg.training)


@pytest.mark.parametrize(
    "name, kind, first, monitored",
    [
        ("standard", objectives.Standard, 0, set()),
        ("instance_weighting", objectives.Standard, 0, set()),
        ("random_attention_pretraining", objectives.RandomAttentionPretraining, 4, set()),
        ("model_consistent_adversary", objectives.ModelConsistentAdversary, 0, {"val/adversary_loss"}),
    ],
)
def test_each_training_yaml_builds_its_objective(name, kind, first, monitored):
    chosen = objectives.objective(training_node(name))
    assert type(chosen) is kind
    assert chosen.first_selectable == first
    assert monitored <= chosen.monitored and (not monitored) == (not chosen.monitored)
    assert chosen.instance_weighting == (name == "instance_weighting")
    assert chosen.trains_towards_base == (name == "model_consistent_adversary")
    assert (chosen.mask_classifier(2) is not None) == (name == "instance_weighting")


def test_the_first_selectable_epoch_is_the_later_of_the_two_rules():
    assert objectives.objective({"schedule": "standard", "select_from_epoch": 2}).first_selectable == 2
    pretraining = {"schedule": "random_attention_pretraining", "pretrain_epochs": 3}
    assert objectives.objective({**pretraining, "select_from_epoch": 1}).first_selectable == 3
    assert objectives.objective({**pretraining, "select_from_epoch": 5}).first_selectable == 5
    phases = objectives.objective(pretraining)
    assert [phases.pretraining(epoch) for epoch in range(5)] == [True, True, True, False, False]
    assert not any(objectives.Standard().pretraining(epoch) for epoch in range(3))


@pytest.mark.parametrize(
    "training, message",
    [
        ({"schedule": "adversarial"}, r"^training.schedule=adversarial: choose from \['standard', "),
        ({"schedule": "random_attention_pretraining", "pretrain_epochs": 0}, r"^training.pretrain_epochs=0: "),
        ({"schedule": "model_consistent_adversary", "instance_weighting": True}, r"has no instance weights"),
    ],
)
def test_what_an_objective_refuses_gets_one_line(training, message):
    with pytest.raises(UserError, match=message):
        objectives.objective(training)


def test_an_objective_refuses_a_model_it_cannot_train():
    class NoRandomAttention(torch.nn.Module):
        num_classes = 2

    with pytest.raises(UserError, match=r"random_attention_pretraining needs a flat or selector model"):
        AttentionModule(NoRandomAttention(), objective=objectives.RandomAttentionPretraining(pretrain_epochs=1))
    with pytest.raises(UserError, match=r"model_consistent_adversary needs soft attention over tokens, not Linear"):
        objectives.ModelConsistentAdversary().check(torch.nn.Linear(2, 2))
    objectives.ModelConsistentAdversary().check(tiny_model())  # a flat model: soft attention over its tokens


class Logged:
    """The few module attributes an objective's loss reads, and what it logs."""

    def __init__(self, model):
        self.model, self.logged, self.per = model, {}, {}

    def log(self, key, value, on_step=None, on_epoch=None, **_):
        self.logged[key] = float(value)
        self.per[key] = "step" * bool(on_step) + "epoch" * bool(on_epoch)  # Lightning's aggregation of the value


def test_the_adversary_loss_by_hand():
    """Two instances, binary model (ŷ = σ(logit)). Instance 1: ŷ_1 = 0.5, base 0.9 → TVD = ½(|0.5−0.9| +
    |0.5−0.1|) = 0.4; α = (½, ½) against base (¼, ¾) → KL = ½ ln 2 + ½ ln(2/3). Instance 2: ŷ_2 = σ(ln 3) =
    0.75, base 0.75 → TVD 0; α = (1, 0) against (1, 0) → KL 0 (0 · log 0 = 0, the base's zero floored only
    where α > 0). Instance 3 as instance 2 (three instances of two classes and two tokens: a sum over the wrong
    axis shows). Loss = mean(TVD) − λ mean(KL) with λ = 2, each logged as an epoch's mean."""
    module = Logged(tiny_model(num_classes=2))
    logits = torch.tensor([[0.0], [math.log(3.0)], [math.log(3.0)]])
    attention = torch.tensor([[0.5, 0.5], [1.0, 0.0], [1.0, 0.0]])
    base = torch.tensor([[0.25, 0.75], [1.0, 0.0], [1.0, 0.0]])
    batch = {"labels": torch.tensor([1, 0, 0]), "fixed_attention": base}
    soft = torch.tensor([[0.1, 0.9], [0.25, 0.75], [0.25, 0.75]])
    loss = objectives.ModelConsistentAdversary(lam=2.0).training_loss(module, logits, attention, batch, soft)
    kl = 0.5 * math.log(2) + 0.5 * math.log(2 / 3)
    assert float(loss) == pytest.approx(0.4 / 3 - 2.0 * kl / 3)
    assert module.logged["train/adversary_tvd"] == pytest.approx(0.4 / 3)
    assert module.logged["train/adversary_kl"] == pytest.approx(kl / 3)
    assert module.logged["train/adversary_loss"] == pytest.approx(float(loss))
    objectives.ModelConsistentAdversary(lam=2.0).evaluate(module, logits, attention, batch, soft, "val")
    assert module.logged["val/adversary_loss"] == pytest.approx(float(loss))
    assert set(module.per.values()) == {"epoch"}
    with pytest.raises(RuntimeError, match="base run's outputs and attention"):
        objectives.ModelConsistentAdversary().training_loss(module, logits, attention, batch, None)


@pytest.mark.parametrize("name", ["standard", "instance_weighting", "random_attention_pretraining"])
def test_the_yaml_states_the_objectives_defaults(name):
    """``conf/training/*.yaml`` and the classes' defaults are the same numbers (a default changed in one place only
    turns this red); the adversary's YAML adds only its base run."""
    chosen = objectives.objective(training_node(name))
    assert chosen == type(chosen)(instance_weighting=name == "instance_weighting")
    adversary = objectives.objective({**training_node("model_consistent_adversary"), "base": "/runs/base"})
    assert adversary == objectives.ModelConsistentAdversary(base="/runs/base")


def test_the_instance_weighted_loss_by_hand():
    """Prior p(y) = (¼, ¾); the mask-only classifier, its weights zeroed, says p̂(y | α) = ½ for every pattern.
    Labels 0, 1, 1: w ∝ p(y)/p̂(y) = ½, 3/2, 3/2 (inside the clip), times the class weights where there are.
    Loss = Σ w_i ℓ_i / Σ w_i + the classifier's own cross-entropy ln 2, with ℓ_i the BCE of logits 0, 1, −1:
    ln 2, softplus(−1), softplus(1)."""
    module = AttentionModule(
        tiny_model(num_classes=2), objective=objectives.Standard(instance_weighting=True), class_prior=[0.25, 0.75]
    )
    for parameter in module.mask_classifier.parameters():
        parameter.data.zero_()
    module.log = Logged(None).log  # outside a trainer: what it logs, and how
    logits = torch.tensor([[0.0], [1.0], [-1.0]])
    attention = torch.tensor([[0.5, 0.5], [1.0, 0.0], [0.2, 0.8]])
    batch = {"labels": torch.tensor([0, 1, 1]), "mask": torch.ones(3, 2, dtype=torch.bool)}
    loss = module.objective.training_loss(module, logits, attention, batch, None)
    softplus = lambda x: math.log1p(math.exp(x))  # noqa: E731
    expected = (0.5 * math.log(2) + 1.5 * softplus(-1.0) + 1.5 * softplus(1.0)) / 3.5 + math.log(2)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    logged = module.log.__self__
    # the weights over their mean 7/6: the largest 3/2 / (7/6) = 9/7
    assert logged.logged == pytest.approx({"train/shortcut_aux_loss": math.log(2), "train/shortcut_weight_max": 9 / 7})
    assert set(logged.per.values()) == {"epoch"}
    module.class_weights = torch.tensor([1.0, 2.0])  # class weights c = (1, 2) multiply w: ½, 3, 3
    loss = module.objective.training_loss(module, logits, attention, batch, None)
    expected = (0.5 * math.log(2) + 3 * softplus(-1.0) + 3 * softplus(1.0)) / 6.5 + math.log(2)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    module.class_weights = None
    plain = objectives.Standard().training_loss(module, logits, attention, batch, None)  # no weights: the mean
    assert plain.item() == pytest.approx((math.log(2) + softplus(-1.0) + softplus(1.0)) / 3, rel=1e-6)
