"""Bai et al.'s combinatorial shortcuts: marker injection, the selector–predictor, both mitigations, the
shortcut measures, the explainer of a black box, and the sweep + report."""

from __future__ import annotations

import json
from functools import partial

import lightning as L
import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from attn_study.analysis.importance import predict
from attn_study.analysis.measuring import analysis_mode
from attn_study.data.datamodule import TextDataModule
from attn_study.data.example import RawExample
from attn_study.data.markers import Injection
from attn_study.data.processed import Preprocessing, build
from attn_study.data.synthetic import SyntheticSource
from attn_study.errors import DataError, UserError
from attn_study.families.shortcuts import keys as shortcuts_keys
from attn_study.families.shortcuts.callback import Shortcuts, choice_accuracy, neutral_predictions
from attn_study.job.analyze import analyze
from attn_study.job.run import run as run_job
from attn_study.models import attention, encoders, objectives
from attn_study.models.mitigation import shortcut_weights
from attn_study.models.module import AttentionModule
from attn_study.models.selector import SelectorPredictor, hard_top_k, random_subsets, relaxed_top_k
from attn_study.report.cli import build_report
from tests.helpers import TINY, compose_config, launch, tiny_model, token_batch

INJECT = {"count": 2, "tokens": ["<m1>", "<m2>"], "positions": "random", "seed": 3}


# ------------------------------------------------------------------------------------------------
# injected markers
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def injected():
    source = SyntheticSource(n_train=1500, n_dev=200, n_test=600, seed=5)
    return build(source, Preprocessing(inject=INJECT)), build(source, Preprocessing())


def test_markers_are_in_every_instance_and_the_rationales_move_with_their_tokens(injected):
    data, plain = injected
    for split in ("train", "dev", "test"):
        with_markers, without = data.splits[split], plain.splits[split]
        for ids, old_ids, markers, rationale, old_rationale in zip(
            with_markers.ids, without.ids, with_markers.markers, with_markers.rationales, without.rationales
        ):
            tokens = data.vocab.decode(ids.tolist())
            assert len(ids) == len(old_ids) + 2 and len(markers) == 2
            assert all(tokens[p] in ("<m1>", "<m2>") for p in markers)
            rest = [t for p, t in enumerate(tokens) if p not in markers]
            assert rest == plain.vocab.decode(old_ids.tolist())  # the text itself is untouched
            assert [tokens[p] for p in rationale] == [plain.vocab.decode(old_ids.tolist())[p] for p in old_rationale]
    counts = data.stats["train"]["markers"]
    assert sum(sum(by_class.values()) for by_class in counts.values()) == 2 * len(data.splits["train"])


def test_markers_carry_no_label_information(injected):
    """Deterministic, not a significance test: the same dataset with every label flipped and every word replaced
    (same uids, same lengths) gets exactly the same markers — the same tokens at the same positions in every
    instance — so which markers an instance has, where, and which comes first are a function of the seed, the
    split, the uid and the length alone; neither the label nor the words enter. And every ordered pair of the two
    markers occurs in both classes."""
    from dataclasses import replace

    data, _ = injected

    class Relabelled(SyntheticSource):
        def load(self):
            return {
                split: [replace(e, label=1 - e.label, text=" ".join("x" for _ in e.text.split())) for e in examples]
                for split, examples in super().load().items()
            }

    other = build(Relabelled(n_train=1500, n_dev=200, n_test=600, seed=5), Preprocessing(inject=INJECT))
    for split in ("train", "dev", "test"):
        s, t = data.splits[split], other.splits[split]
        assert list(s.uids) == list(t.uids) and (s.labels != t.labels).all()
        assert [len(ids) for ids in s.ids] == [len(ids) for ids in t.ids]
        assert [tuple(m) for m in s.markers] == [tuple(m) for m in t.markers], split
        mine = [data.vocab.decode(ids[list(m)].tolist()) for ids, m in zip(s.ids, s.markers)]
        theirs = [other.vocab.decode(ids[list(m)].tolist()) for ids, m in zip(t.ids, t.markers)]
        assert mine == theirs, split
        orders = {(tuple(m), int(y)) for m, y in zip(mine, s.labels)}
        assert orders == {(o, y) for o in (("<m1>", "<m2>"), ("<m2>", "<m1>")) for y in (0, 1)}


def test_injection_options_are_checked():
    with pytest.raises(DataError, match="dataset.inject.positions"):
        Preprocessing(inject={**INJECT, "positions": "middle"})
    with pytest.raises(DataError, match="dataset.inject.tokens"):
        Preprocessing(inject={**INJECT, "tokens": ["two words"]})
    with pytest.raises(DataError, match="model=han"):
        Preprocessing(inject=INJECT, sentences=True)
    with pytest.raises(DataError, match="dataset.inject.count=3: an instance's markers are distinct"):
        Preprocessing(inject={**INJECT, "count": 3})
    with pytest.raises(DataError, match="listed twice"):
        Preprocessing(inject={**INJECT, "tokens": ["<m1>", "<m1>"]})
    assert Injection.from_config({**INJECT, "count": 0}) is None  # count 0: off
    fixed = Injection(tokens=("<m>", "<n>"), count=2, positions=(0, 99))
    tokens, slots, _ = fixed.apply(list("abc"), None, "test", "u")
    assert slots == (0, 4) and tokens[1:4] == ["a", "b", "c"] and {tokens[0], tokens[4]} == {"<m>", "<n>"}


def test_the_markers_of_an_instance_are_distinct(injected):
    data, _ = injected
    for split in ("train", "test"):
        s = data.splits[split]
        for ids, markers in zip(s.ids, s.markers):
            assert len(set(ids[list(markers)].tolist())) == len(markers) == 2


# ------------------------------------------------------------------------------------------------
# the selector–predictor
# ------------------------------------------------------------------------------------------------


def test_hard_top_k_selects_exactly_k_real_tokens_never_padding():
    torch.manual_seed(0)
    batch = token_batch([[3] * 9, [4] * 3, [5], [6] * 6])
    scores = torch.randn(batch["mask"].shape)
    scores[~batch["mask"]] = 100.0  # padding scored highest must still never be chosen
    for k in (1, 2, 5):
        chosen = hard_top_k(scores, batch["mask"], k)
        assert chosen.sum(-1).tolist() == [min(k, n) for n in (9, 3, 1, 6)]
        assert torch.all(chosen[~batch["mask"]] == 0)
        for row in range(4):
            n = int(batch["lengths"][row])
            top = scores[row, :n].topk(min(k, n)).indices
            assert set(top.tolist()) == set(chosen[row].nonzero().flatten().tolist())
    relaxed = relaxed_top_k(scores, batch["mask"], 3, 0.5, torch.Generator().manual_seed(0))
    assert torch.all(relaxed[~batch["mask"]] == 0) and relaxed.max() <= 1.0 and relaxed.min() >= 0.0


def test_random_attention_is_drawn_from_the_mask_alone():
    a, b = token_batch([[3, 4, 5, 6, 7], [8, 9]]), token_batch([[10, 11, 12, 13, 14], [15, 16]])
    for model in (
        tiny_model(),
        SelectorPredictor(20, 2, encoders.NoEncoder, attention.AdditiveScorer, k=2, embedding_dim=4),
    ):
        first = model.random_attention(a["mask"], torch.Generator().manual_seed(1))
        other = model.random_attention(b["mask"], torch.Generator().manual_seed(1))
        torch.testing.assert_close(first, other)  # other content, same lengths: the same draw
        assert torch.all(first[~a["mask"]] == 0)
    draws = torch.stack([random_subsets(a["mask"], 2, torch.Generator().manual_seed(s))[0] for s in range(400)])
    assert draws.sum(-1).eq(2).all() and draws.mean(0)[:5].sub(0.4).abs().max() < 0.08  # uniform over positions


class XorSource:
    """``mark mark b1 b2 w w``: the label is b1 XOR b2, so no single token tells it; with k = 1 a
    selector can only pass the label to its predictor through *which* token it selects."""

    name, num_classes, label_names = "xor", 2, ["same", "different"]

    def __init__(self, seed: int = 0):
        self.seed = seed

    def fingerprint(self):
        return {"seed": self.seed}

    def load(self):
        rng = np.random.default_rng(self.seed)
        out = {}
        for split, n in (("train", 1200), ("dev", 200), ("test", 200)):
            out[split] = []
            for i in range(n):
                bits = rng.integers(0, 2, 2)
                words = ["mark", "mark", *(("yes", "no")[b] for b in bits), *rng.choice(["the", "a", "film"], 2)]
                out[split].append(RawExample(uid=f"{split}-{i}", text=" ".join(words), label=int(bits[0] != bits[1])))
        return out


def train_xor(schedule: str, seed: int = 1):
    """A selector–predictor (k = 1, BiLSTMs) on the XOR task, its predictor blind to token content (one
    frozen embedding for every token): the only way to the label is *where* the selection falls."""
    L.seed_everything(seed, verbose=False)
    data = TextDataModule(XorSource(seed), batch_size=32)
    data.setup()
    model = SelectorPredictor(
        len(data.vocab),
        2,
        partial(encoders.RNNEncoder, hidden_size=16),
        attention.AdditiveScorer,
        k=1,
        temperature=0.5,
        embedding_dim=16,
    )
    model.embedding.weight.data.fill_(1.0)
    model.embedding.weight.requires_grad_(False)
    chosen = objectives.objective({"schedule": schedule, "pretrain_epochs": 4})
    module = AttentionModule(model, lr=1e-2, objective=chosen)
    L.Trainer(
        max_epochs=8, logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False
    ).fit(module, datamodule=data)
    analysis = Shortcuts(top_k=1)
    with analysis_mode(model):
        measured = analysis.measure(model, data, "test", np.arange(200), ["mask_only"])
    return analysis.summarise(measured, ["mask_only"])


def test_a_constructed_shortcut_is_found_and_random_attention_pretraining_removes_it():
    vanilla = train_xor("standard")
    assert vanilla["sc/accuracy"] >= 0.9 and vanilla["sc/mask_only/accuracy"] >= 0.9  # the pattern is the label
    mitigated = train_xor("random_attention_pretraining")
    assert mitigated["sc/mask_only/accuracy"] <= 0.65  # a predictor pretrained on random masks cannot read it


def test_phase_two_trains_only_the_attention():
    class Snapshot(L.Callback):
        def on_train_epoch_start(self, trainer, module):  # before the module's own hook: end of phase 1
            if trainer.current_epoch == 1:
                self.before = {n: p.detach().clone() for n, p in module.model.named_parameters()}

    L.seed_everything(0, verbose=False)
    data = TextDataModule(XorSource(0), batch_size=32)
    data.setup()
    for model in (
        tiny_model(vocab=len(data.vocab)).requires_grad_(True).train(),
        SelectorPredictor(len(data.vocab), 2, encoders.NoEncoder, attention.AdditiveScorer, k=2, embedding_dim=6),
    ):
        module = AttentionModule(model, objective=objectives.RandomAttentionPretraining(pretrain_epochs=1), lr=0.05)
        snapshot = Snapshot()
        L.Trainer(
            max_epochs=2,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            limit_val_batches=0,
            enable_model_summary=False,
            callbacks=[snapshot],
        ).fit(module, datamodule=data)
        attention_ids = {id(p) for p in model.attention_parameters()}
        for name, p in model.named_parameters():
            changed = not torch.equal(snapshot.before[name], p.detach())
            assert changed == (id(p) in attention_ids), (type(model).__name__, name)


def test_instance_weights_make_the_label_independent_of_the_pattern():
    # patterns A and B decide the label 80/20 and 25/75; the mask-only classifier knows p(y | pattern)
    pattern = np.array([0] * 10 + [1] * 8)
    labels = np.array([1] * 8 + [0] * 2 + [1] * 2 + [0] * 6)
    prior = np.bincount(labels) / len(labels)
    conditional = np.array([np.mean(labels[pattern == p] == y) for p, y in zip(pattern, labels)])
    weights = shortcut_weights(torch.tensor(prior[labels]), torch.tensor(conditional), clip=(0.01, 100.0)).numpy()
    assert weights.mean() == pytest.approx(1.0)
    for p in (0, 1):
        here = pattern == p
        weighted = np.array([weights[here & (labels == y)].sum() for y in (0, 1)]) / weights[here].sum()
        np.testing.assert_allclose(weighted, prior, atol=1e-12)  # p_w(y | pattern) = p(y)
    clipped = shortcut_weights(torch.tensor([0.5, 0.5]), torch.tensor([0.001, 0.9]), clip=(0.1, 10.0))
    assert clipped[0] / clipped[1] == pytest.approx(10.0 / (0.5 / 0.9))


def test_choice_accuracy_by_hand():
    """Labels 0 0 1 1 0 1 (three of each). The baseline guesses each label as the majority of the five
    others, always the other class here: 0 of 6. A choice equal to the label: each instance's two others
    with its choice share its label, 6 of 6. A choice 5 7 5 7 5 7 carrying little: choice 5 holds labels
    0, 1, 0 — instance 1 sees (1, 0): a tie, guessed 0 (right); instance 3 sees (0, 0): 0 (wrong);
    instance 5 sees (0, 1): tie, 0 (right); choice 7 holds 0, 1, 1 — (1, 1): 1 (wrong), (0, 1): 0
    (wrong), (0, 1): 0 (wrong): 2 of 6."""
    labels = np.array([0, 0, 1, 1, 0, 1])
    informative = choice_accuracy(np.array([5, 5, 7, 7, 5, 7.0]), labels)
    assert informative[:2] == (1.0, 0.0)
    assert informative[2] == pytest.approx(stats.chi2_contingency([[3, 0], [0, 3]])[1])
    accuracy, baseline, p = choice_accuracy(np.array([5, 7, 5, 7, 5, 7.0]), labels)
    assert (accuracy, baseline) == (pytest.approx(2 / 6), 0.0)
    assert p == pytest.approx(stats.chi2_contingency([[2, 1], [1, 2]])[1])
    assert np.isnan(choice_accuracy(np.array([5, 5, 5, 5, 5, 5.0]), labels)[2])  # one choice: no test


def test_mask_only_and_selected_only_by_hand():
    """noenc, every <unk> embedding 0, additive attention, one logit w·c + b: blanking every token pools
    the zero vector (the prediction is σ(b)'s class whatever the text); keeping the selected tokens pools
    Σ_{t selected} α_t e_t with α from the real input."""
    model = tiny_model(encoders.NoEncoder, num_classes=2, double=True, seed=3, vocab=30)
    model.embedding.weight[1].zero_()  # <unk>
    model.output.bias.fill_(-0.25)
    batch = token_batch([[5, 6, 7, 8, 9, 10], [12, 13, 14], [20, 21, 22, 23]])
    _, alpha, probs = predict(model, batch)
    blank = neutral_predictions(model, batch, alpha)
    torch.testing.assert_close(blank[:, 1], torch.sigmoid(torch.full((3,), -0.25, dtype=torch.double)))
    assert not torch.allclose(blank, probs)
    chosen = hard_top_k(alpha, batch["mask"], 2).bool()
    kept = neutral_predictions(model, batch, alpha, keep=chosen)
    emb = model.embedding.weight[batch["ids"]] * chosen.unsqueeze(-1)
    logit = (alpha.unsqueeze(-1) * emb).sum(1) @ model.output.weight[0] - 0.25
    torch.testing.assert_close(kept[:, 1], torch.sigmoid(logit))


# ------------------------------------------------------------------------------------------------
# end to end
# ------------------------------------------------------------------------------------------------


def small(*overrides):
    return compose_config(
        *TINY, "encoder.hidden_size=8", "trainer.max_epochs=2", "trainer.limit_train_batches=1.0", *overrides
    )


def test_shortcut_measures_on_injected_data(tmp_path):
    """End to end on the synthetic task with markers: the summary's marker numbers are those recomputed from the
    trained model itself, instance by instance (the markers' attention mass; whether one of the top 5 tokens is
    a marker; the accuracy)."""
    from attn_study.job.plan import load_run

    summary = run_job(small("dataset=synthetic_markers", "analysis=[shortcuts]", "logger=none"), tmp_path / "r")
    trained = load_run(tmp_path / "r")
    split = trained.datamodule.split("test")
    mass, selected, correct = [], [], []
    frame = pd.read_parquet(tmp_path / "r" / "analysis" / "shortcuts" / "instances.parquet").set_index("index")
    for i in range(len(split)):
        batch = token_batch([split.ids[i].tolist()])
        _, alpha, probs = predict(trained.model, batch)
        markers = list(split.markers[i])
        most = markers[int(alpha[0, markers].argmax())]  # the most attended marker: which token it is
        assert frame.loc[i, "top_marker"] == split.ids[i][most]
        mass.append(float(alpha[0, markers].sum()))
        selected.append(bool(set(alpha[0].topk(min(5, alpha.shape[1])).indices.tolist()) & set(markers)))
        correct.append(int(probs.argmax()) == int(split.labels[i]))
    assert summary["sc/markers/mass/mean"] == pytest.approx(np.mean(mass), abs=1e-6)
    assert summary["sc/markers/selected_frac"] == pytest.approx(np.mean(selected))
    assert summary["sc/accuracy"] == pytest.approx(np.mean(correct))
    assert "sc/posthoc/accuracy" not in summary  # not an explainer
    # on data with markers, the statistics drawn against the epoch (report, epochs.png) are ones the family computes
    assert set(shortcuts_keys.TRACKED) <= summary.keys()


def test_an_explainer_reproduces_its_black_box_and_is_scored_post_hoc(tmp_path):
    """The explainer's post-hoc accuracy is recomputed by hand: the black box on each test text's selected
    tokens alone (in order) against the black box on the whole text."""
    from attn_study.job.plan import load_run

    black_box = tmp_path / "black_box"
    run_job(small("logger=none"), black_box)
    summary = run_job(
        small("model=selector", f"explainer.target={black_box}", "analysis=[shortcuts]", "logger=csv"),
        tmp_path / "explainer",
    )
    explainer, box = load_run(tmp_path / "explainer"), load_run(black_box)
    split = explainer.datamodule.split("test")
    agree = []
    for i in range(len(split)):
        ids = split.ids[i].tolist()
        _, alpha, _ = predict(explainer.model, token_batch([ids]))
        kept = [w for t, w in enumerate(ids) if alpha[0, t] > 0]
        full = predict(box.model, token_batch([ids]))[2].argmax().item()
        alone = predict(box.model, token_batch([kept]))[2].argmax().item()
        agree.append(full == alone)
    assert summary["sc/posthoc/accuracy"] == pytest.approx(np.mean(agree))
    metrics = pd.read_csv(tmp_path / "explainer" / "csv" / "metrics.csv")
    assert metrics["val/fidelity"].notna().any()
    with pytest.raises(UserError, match=f"explainer.target={black_box}.*differ"):
        run_job(small("model=selector", f"explainer.target={black_box}", "seed=99", "logger=none"), tmp_path / "other")
    # analysed later, the explainer stands on its own: what only its training needed (the black box's predictions,
    # its soft targets) is not rebuilt, so with the black box gone a family that does not ask for it still runs
    black_box.rename(tmp_path / "black_box_moved")
    options = ["analysis=[shortcuts]", "analysis.shortcuts.target=null", "use_loggers=false"]
    again = analyze(compose_config(f"ckpt_path={tmp_path / 'explainer'}", *options, name="analyze"))
    assert again["sc/accuracy"] == summary["sc/accuracy"] and "sc/posthoc/accuracy" not in again


@pytest.mark.slow  # a paper's smoke sweep beside the Jain & Wallace one of the fast suite (issue 42 §5)
def test_smoke_bai_sweep_then_report(tmp_path):
    sweep = tmp_path / "smoke_bai"
    run = launch(sweep, "sweep=smoke_bai", "logger=csv", timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "6 jobs: 6 ran" in run.stdout
    out = build_report(sweep)
    table = pd.read_csv(out / "sc_synthetic_markers.csv")
    assert len(table) == 6
    assert set(table["variant"]) == {"standard", "random_attention_pretraining", "instance_weighting"}
    assert set(table["method"]) == {"flat lstm", "selector lstm"}
    md = (out / "sc_synthetic_markers.md").read_text()
    assert "mask-only acc." in md and "marker mass" in md
    one = json.loads(next(sweep.glob("model=flat,training=standard*/summary.json")).read_text())
    row = table[(table["method"] == "flat lstm") & (table["variant"] == "standard")].iloc[0]
    assert row["mask-only acc."] == pytest.approx(one["sc/mask_only/accuracy"])


def hand_model():
    """The by-hand model of test_mask_only_and_selected_only_by_hand: noenc, <unk> embedding 0, bias −0.25."""
    model = tiny_model(encoders.NoEncoder, num_classes=2, double=True, seed=3, vocab=30)
    model.embedding.weight[1].zero_()
    model.output.bias.fill_(-0.25)
    return model


def test_a_selectors_mask_only_prediction_keeps_its_selection_and_blanks_the_content():
    """For a selector the mask-only input is its predictor on <unk> everywhere with the selector's own choice of
    positions (from the real text); selected-only is its ordinary prediction."""
    model = (
        SelectorPredictor(
            30, 2, partial(encoders.RNNEncoder, hidden_size=3), attention.AdditiveScorer, k=2, embedding_dim=4
        )
        .double()
        .eval()
    )
    batch = token_batch([[5, 6, 7, 8, 9], [10, 11, 12]])
    enc, alpha, probs = predict(model, batch)
    selection = (alpha > 0).double()
    assert selection.sum(-1).tolist() == [2.0, 2.0]
    blank = model.encode_selected({**batch, "ids": torch.full_like(batch["ids"], 1)}, selection)
    expected = model.probabilities(model.decode(blank, alpha))
    torch.testing.assert_close(neutral_predictions(model, batch, alpha), expected)
    torch.testing.assert_close(neutral_predictions(model, batch, alpha, keep=selection.bool()), probs)


def test_the_family_measures_what_its_definitions_say(tmp_path):
    """The frame and summary of analysis=[shortcuts] on the by-hand model — batches of 2 whose rows are not the
    split's order: mask-only predictions are σ(−0.25)'s class (0) for every text, so its accuracy is the share
    of label 0; selected-only predictions and post-hoc agreement are recomputed by hand from the top-2 tokens;
    rationale precision is |selected ∩ truth| / |selected|."""
    from types import SimpleNamespace

    from attn_study.data.datamodule import collate
    from tests.helpers import StubData

    model = hand_model()
    black_box = tiny_model(encoders.NoEncoder, num_classes=2, double=True, seed=1, vocab=30)
    texts = [[5, 6, 7, 8, 9, 10], [12, 13, 14], [20, 21, 22, 23], [24, 25, 26, 27, 28], [9, 8, 7, 6]]
    labels, truths = [0, 1, 1, 0, 1], [(0, 1), (2,), (1, 2, 3), (4,), (0, 3)]
    batch = collate(
        [{"index": i, "ids": t, "label": y, "rationale": r} for i, (t, y, r) in enumerate(zip(texts, labels, truths))],
        num_classes=2,
    )
    analysis = Shortcuts(top_k=2, target="black_box", batch_size=2)
    analysis._black_box = SimpleNamespace(model=black_box)
    with analysis_mode(model):
        measured = analysis.measure(
            model,
            StubData(batch, 2, serve_order=[2, 4, 0, 3, 1]),
            "test",
            np.arange(5),
            ["mask_only", "selected_only", "rationale", "posthoc"],
        )
    frame = measured.frame.set_index("index")
    summary = analysis.summarise(measured, ["mask_only", "selected_only", "rationale", "posthoc"])
    assert (frame["mask_only_prediction"] == 0).all()
    assert summary["sc/mask_only/accuracy"] == pytest.approx(np.mean(np.array(labels) == 0))
    agree, kept_correct = [], []
    for i, text in enumerate(texts):
        single = token_batch([text])
        _, alpha, probs = predict(model, single)
        top = set(alpha[0].topk(2).indices.tolist())
        emb = model.embedding.weight[torch.tensor(text)] * torch.tensor([[t in top] for t in range(len(text))])
        logit = (alpha[0][:, None] * emb).sum(0) @ model.output.weight[0] - 0.25
        assert frame.loc[i, "selected_only_prediction"] == int(logit > 0)
        kept_correct.append(int(logit > 0) == labels[i])
        assert frame.loc[i, "rationale_precision"] == pytest.approx(len(top & set(truths[i])) / 2)
        full = predict(black_box, single)[2].argmax().item()
        alone = predict(black_box, token_batch([[w for t, w in enumerate(text) if t in top]]))[2].argmax().item()
        agree.append(full == alone)
        assert frame.loc[i, "posthoc_agree"] == float(full == alone)
    assert summary["sc/selected_only/accuracy"] == pytest.approx(np.mean(kept_correct))
    chance = max(labels.count(0), labels.count(1)) / len(labels)
    assert summary["sc/chance"] == pytest.approx(chance)
    assert summary["sc/mask_only/above_chance"] == pytest.approx(summary["sc/mask_only/accuracy"] - chance)
    assert summary["sc/posthoc/accuracy"] == pytest.approx(np.mean(agree))
    assert not all(agree)  # the case is one where the selection alone changes the black box's mind
