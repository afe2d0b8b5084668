"""The measuring loop the base callback owns (attn_study/analysis/callback.py): a family's hooks called in their order
per pass, batch and sub-test, each step timed under its name; a test skipped on batches without the field it reads;
what a family needs of a model refused in one line; a family's own random streams."""

from __future__ import annotations

from functools import partial
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from attn_study.analysis.callback import AnalysisCallback
from attn_study.analysis.importance import predict
from attn_study.analysis.measuring import analysis_mode, instance_work, record_rows
from attn_study.errors import UserError
from attn_study.families import REGISTRY
from attn_study.models import attention, encoders, projection
from attn_study.models.han import HierarchicalAttentionClassifier
from attn_study.models.selector import SelectorPredictor
from tests.helpers import StubData, tiny_model, token_batch

SEQS = [[5, 6, 7], [8, 9], [10, 11, 12, 13], [14], [15, 16, 17, 18, 19]]


class Toy(AnalysisCallback):
    """Two sub-tests: ``length`` on every batch, ``marked`` on batches with markers only; each call noted in
    ``run.state``, and each instance's first draw of its own stream ``own`` kept."""

    name = "toy"
    TESTS = ("length", "marked")
    PREPARE = "predict"
    BATCH_FIELDS = {"marked": ("markers",)}
    STREAMS = {"own": 40}

    def begin(self, run):
        run.state["calls"] = ["begin"]

    def prepare(self, run, batch):
        run.state["calls"].append(("prepare", batch["index"].tolist()))
        return {"probs": predict(run.model, batch)[2], "columns": {}}

    def measure_length(self, run, batch, prepared):
        run.state["calls"].append(("length", batch["index"].tolist()))
        prepared["columns"]["length"] = batch["lengths"]
        prepared["columns"]["first_draw"] = self.draws(batch, batch["mask"], "own")[:, 0]

    def measure_marked(self, run, batch, prepared):
        run.state["calls"].append(("marked", batch["index"].tolist()))

    def record(self, run, batch, prepared):
        run.state["calls"].append(("record", batch["index"].tolist()))
        run.record(batch, prepared["probs"], prepared["columns"])

    def end(self, run):
        run.extras["calls"] = run.state["calls"] + ["end"]
        return run.frame()


@pytest.mark.parametrize("markers", [True, False])
def test_the_base_calls_the_hooks_per_pass_batch_and_test(markers):
    """Batches of 2 served in the order 3, 0 | 4, 1 | 2: begin once; per batch prepare, each test, record; end once.
    Without markers the test that reads them is never called nor timed (its seconds stay 0)."""
    batch = token_batch(SEQS)
    if markers:
        batch["markers"] = torch.zeros_like(batch["mask"])
    model = tiny_model(double=True)
    family = Toy(batch_size=2, seed=7)
    with analysis_mode(model):
        measured = family.measure(
            model, StubData(batch, serve_order=[3, 0, 4, 1, 2]), "test", np.arange(5), family.tests
        )
    served = [[3, 0], [4, 1], [2]]
    tests = ["length", "marked"] if markers else ["length"]
    expected = ["begin"]
    for rows in served:
        expected += [("prepare", rows), *[(test, rows) for test in tests], ("record", rows)]
    assert measured.extras["calls"] == expected + ["end"]
    assert list(measured.seconds) == ["predict", "length", "marked"]
    assert (measured.seconds["marked"] > 0) == markers
    # the rows in the split's order; each instance's draw from numpy's default_rng([seed, index, stream])
    assert measured.frame["index"].tolist() == [0, 1, 2, 3, 4]
    assert measured.frame["length"].tolist() == [len(s) for s in SEQS]
    expected_draws = [np.random.default_rng([7, i, 40]).random(len(s))[0] for i, s in enumerate(SEQS)]
    assert measured.frame["first_draw"].tolist() == expected_draws


def test_a_test_without_its_hook_is_refused_when_the_family_is_defined():
    with pytest.raises(TypeError, match="no hook measure_other"):

        class Missing(Toy):
            TESTS = ("length", "other")


@pytest.mark.parametrize("streams", [{"a": 40, "b": 40}, {"a": 1}, {"a": -1}])
def test_a_familys_streams_are_numbers_of_their_own(streams):
    """Two uses of one number, or the shared code's (1: the random importance method), would draw the same numbers."""
    with pytest.raises(TypeError, match="STREAMS"):

        class Clash(Toy):
            STREAMS = streams


def sentence_model():
    return HierarchicalAttentionClassifier(
        vocab_size=32,
        num_classes=2,
        encoder=partial(encoders.RNNEncoder, hidden_size=4),
        scorer=attention.AdditiveScorer,
        projection=projection.Softmax(),
        embedding_dim=6,
    )


def selector_model():
    return SelectorPredictor(20, 2, encoders.NoEncoder, attention.AdditiveScorer, k=2, embedding_dim=4)


def refusals(model) -> dict[str, str]:
    """{family: its one-line refusal of ``model``} over the registry (its defaults)."""
    out = {}
    for name, family in REGISTRY.items():
        callback = next(
            c
            for c in vars(family.module("callback")).values()
            if isinstance(c, type) and issubclass(c, AnalysisCallback) and c.__module__.endswith(f"{name}.callback")
        )
        try:
            callback().check(model)
        except UserError as err:
            out[name] = str(err)
    return out


def test_each_family_refuses_the_models_it_cannot_analyse_in_one_line():
    """What the families checked one by one before, now declared: attention over tokens (every family but Serrano &
    Smith's, which erases a HAN's sentences, and shortcuts, which explains a selector); a soft attention (Jain &
    Wallace, Serrano & Smith, sparsity, Wiegreffe & Pinter)."""
    sentences = refusals(sentence_model())
    assert set(sentences) == {"jain_wallace", "sparsity", "faithfulness", "agreement", "sanity", "wiegreffe_pinter"}
    assert sentences["jain_wallace"] == (
        "analysis=jain_wallace needs attention over tokens, and HierarchicalAttentionClassifier's final attention is "
        "over sentences; use analysis=serrano_smith (or model=flat)"
    )
    assert sentences["faithfulness"] == (
        "analysis=faithfulness ranks tokens, and HierarchicalAttentionClassifier's final attention is over "
        "sentences; use model=flat"
    )
    selector = refusals(selector_model())
    assert set(selector) == {"jain_wallace", "serrano_smith", "sparsity", "wiegreffe_pinter"}
    assert selector["serrano_smith"] == (
        "analysis=serrano_smith erases weights of a soft attention in order, and a selector's attention is its k "
        "selected tokens, all tied; use analysis=[shortcuts] or [faithfulness]"
    )
    assert all("\n" not in message for message in [*sentences.values(), *selector.values()])


def test_the_time_left_counts_tokens_or_for_a_quadratic_family_squared_lengths():
    """Texts of 3 and 4 tokens: 3 + 4 = 7 units of work, or 3² + 4² = 25 for a family whose work is T × T."""
    lengths = torch.tensor([3.0, 4.0], dtype=torch.float64)
    assert instance_work(lengths, quadratic=False) == 7.0
    assert instance_work(lengths, quadratic=True) == 25.0


def test_analysis_mode_takes_no_parameter_gradients_and_gives_the_model_back_as_it_was():
    model = tiny_model()
    model.train()
    frozen = model.output.weight
    model.requires_grad_(True)
    frozen.requires_grad_(False)
    with analysis_mode(model):
        assert not model.training and not any(p.requires_grad for p in model.parameters())
    assert model.training and not frozen.requires_grad
    assert all(p.requires_grad for name, p in model.named_parameters() if p is not frozen)


def test_each_recorded_row_names_its_instance_and_holds_its_prediction_and_columns():
    """Three instances of two classes: each row's predicted class and its probability are the instance's own (the
    largest of its row of ŷ), the counts written as integers."""
    split = SimpleNamespace(uids=["a", "b", "c", "d"], labels=np.array([0, 1, 1, 0]))
    batch = {"index": torch.tensor([2, 0, 3])}
    probs = torch.tensor([[0.2, 0.8], [0.9, 0.1], [0.4, 0.6]], dtype=torch.float64)
    columns = {"length": torch.tensor([3.0, 5.0, 2.0]), "tau": torch.tensor([0.5, -0.25, 1.0])}
    rows = {}
    record_rows(rows, split, batch, probs, columns)
    assert rows == {
        2: {"index": 2, "uid": "c", "label": 1, "prediction": 1, "probability": 0.8, "length": 3, "tau": 0.5},
        0: {"index": 0, "uid": "a", "label": 0, "prediction": 0, "probability": 0.9, "length": 5, "tau": -0.25},
        3: {"index": 3, "uid": "d", "label": 0, "prediction": 1, "probability": 0.6, "length": 2, "tau": 1.0},
    }
    assert all(type(row["length"]) is int for row in rows.values())
