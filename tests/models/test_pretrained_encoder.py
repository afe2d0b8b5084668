"""``encoder=pretrained`` (models/pretrained.py): a tiny BERT, RoBERTa and DistilBERT written by the test
(tests/hf_checkpoints.py) as the encoder under the project's attention — the checkpoint's own states through the
stages, padding and special tokens never weighed, gradients reaching the embeddings, the fine-tuning optimiser and
its schedule by hand, a frozen encoder, training end to end and the checkpoint read back, one-line refusals."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from attn_study.errors import UserError
from attn_study.models.attention import AdditiveScorer
from attn_study.models.pretrained import PretrainedEncoder
from attn_study.models.projection import Softmax
from tests.helpers import compose_config
from tests.hf_checkpoints import save_checkpoint, tokenizer

transformers = pytest.importorskip("transformers")


def pieces_batch(texts: list[list[str]], pairs: list[list[str]] | None = None) -> dict:
    """A batch of ``texts`` (word lists) in the WordPiece tokenizer's pieces, as the data module serves it."""
    from attn_study.data.pretrained import collate_pieces, piece_words

    fast = tokenizer(pieces=True)
    encoded = fast(texts, pairs, is_split_into_words=True)
    items = [
        {"index": n, "ids": np.asarray(ids), "label": n % 2, "boundary": True}
        for n, ids in enumerate(encoded["input_ids"])
    ]
    words = [piece_words(encoded, n) for n in range(len(texts))]
    return collate_pieces(items, words, num_classes=2)


def classifier(folder, kind: str = "bert", scorer=None, **settings):
    from attn_study.models.pretrained import PretrainedAttentionClassifier, PretrainedEncoder

    encoder = PretrainedEncoder(str(folder), **settings)
    scorer = scorer or (lambda hidden_dim: AdditiveScorer(hidden_dim))
    return PretrainedAttentionClassifier(encoder, 2, scorer, Softmax()).eval()


TEXTS = [["unbelievable", "film"], ["a", "wonderful", "terrible", "plot", "and", "cast"], ["good"]]


@pytest.mark.parametrize("kind", ["bert", "roberta", "distilbert"])
def test_the_encoder_gives_the_checkpoints_own_states_and_the_attention_weighs_the_text_only(tmp_path, kind):
    """H equals the checkpoint's last hidden state computed by transformers from the ids (its word table read
    through ours); 0 on padding; α sums to 1 over the text's pieces and is exactly 0 on [CLS], [SEP] and padding;
    the logits are the decoder's W (Σ α_t h_t) + b."""
    folder = save_checkpoint(tmp_path / kind, kind, head=False, pieces=True)
    model = classifier(folder, kind)
    reference = transformers.AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    batch = pieces_batch(TEXTS)
    with torch.no_grad():
        enc = model.encode(batch)
        own = reference(input_ids=batch["ids"], attention_mask=batch["mask"].long()).last_hidden_state
        alpha = model.attend(enc)
        logits = model.decode(enc, alpha)
    real = batch["mask"].unsqueeze(-1)
    torch.testing.assert_close(enc.hidden, own * real, atol=1e-5, rtol=0)
    assert (enc.hidden[~batch["mask"]] == 0).all()
    assert torch.equal(alpha > 0, batch["token_mask"])
    torch.testing.assert_close(alpha.sum(-1), torch.ones(3))
    pooled = (alpha.unsqueeze(-1) * enc.hidden).sum(1)
    torch.testing.assert_close(logits, pooled @ model.output.weight.T + model.output.bias)


def test_a_bert_whose_tokenizer_has_no_separator_is_refused_when_the_model_is_built(tmp_path):
    """BERT's segments are read off [SEP] (the tokenizer's; its config.json, like a real BERT's, has no
    sep_token_id): without one the run is refused in one line before training, not at its first step."""
    folder = save_checkpoint(tmp_path / "bert", head=False, pieces=True)
    settings = json.loads((folder / "tokenizer_config.json").read_text())
    del settings["sep_token"]
    (folder / "tokenizer_config.json").write_text(json.dumps(settings))
    with pytest.raises(UserError, match=r"^encoder.path=.*: a BERT checkpoint's tokenizer needs a sep_token") as no:
        PretrainedEncoder(str(folder))
    assert "\n" not in str(no.value)


def test_a_texts_states_do_not_depend_on_the_padding_beside_it(tmp_path):
    model = classifier(save_checkpoint(tmp_path / "bert", head=False, pieces=True))
    alone, padded = pieces_batch(TEXTS[2:]), pieces_batch(TEXTS)
    with torch.no_grad():
        short = model.encode(alone).hidden[0]
        long = model.encode(padded).hidden[2, : short.shape[0]]
    torch.testing.assert_close(short, long, atol=1e-5, rtol=0)


def test_berts_segments_are_read_off_the_ids_as_its_tokenizer_builds_a_pair(tmp_path):
    """[CLS] passage [SEP] question [SEP]: segment 0 through the first [SEP], 1 after it — the tokenizer's
    token_type_ids; and the states with them are transformers' own."""
    folder = save_checkpoint(tmp_path / "bert", head=False, pieces=True)
    model = classifier(folder)
    fast = tokenizer(pieces=True)
    encoded = fast(
        [["terrible", "film"]],
        [["good", "film"]],
        is_split_into_words=True,
        return_tensors="pt",
        return_token_type_ids=True,
    )
    assert model.encoder.inputs(encoded["input_ids"])["token_type_ids"].tolist() == [[0, 0, 0, 0, 0, 1, 1, 1]]
    assert encoded["token_type_ids"].tolist() == [[0, 0, 0, 0, 0, 1, 1, 1]]
    batch = pieces_batch([["terrible", "film"]], [["good", "film"]])
    reference = transformers.AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        own = reference(**encoded).last_hidden_state
        torch.testing.assert_close(model.encode(batch).hidden, own, atol=1e-5, rtol=0)
        alpha = model.attend(model.encode(batch))
    assert (alpha[0, 4:] == 0).all() and (alpha[0, 1:4] > 0).all()  # the question is read, never weighed


def test_the_gradient_reaches_the_embeddings_as_a_finite_difference_says(tmp_path):
    """d logit / d E[b, t, k] from ``encode(batch, embedded=E)`` against (f(E + h) − f(E − h)) / 2h, in float64."""
    model = classifier(save_checkpoint(tmp_path / "bert", head=False, pieces=True)).double()
    batch = pieces_batch(TEXTS[:1])
    embedded = model.embed(batch).detach().requires_grad_(True)

    def logit(e):
        enc = model.encode(batch, embedded=e)
        return model.decode(enc, model.attend(enc))[0, 0]

    logit(embedded).backward()
    for t, k in ((1, 0), (3, 5)):
        step = torch.zeros_like(embedded)
        step[0, t, k] = 1e-6
        with torch.no_grad():
            difference = (logit(embedded + step) - logit(embedded - step)) / 2e-6
        assert embedded.grad[0, t, k].item() == pytest.approx(difference.item(), rel=1e-5, abs=1e-9)
    assert embedded.grad[0, 1].abs().sum() > 0


def test_attention_cls_reads_the_classification_tokens_state(tmp_path):
    from attn_study.models.pretrained import ClassificationToken

    model = classifier(save_checkpoint(tmp_path / "bert", head=False, pieces=True), scorer=ClassificationToken)
    batch = pieces_batch(TEXTS)
    with torch.no_grad():
        enc = model.encode(batch)
        alpha = model.attend(enc)
        logits = model.decode(enc, alpha)
    assert (alpha[:, 0] == 1).all() and alpha[:, 1:].sum() == 0 and not model.pooling_attention
    torch.testing.assert_close(logits, enc.hidden[:, 0] @ model.output.weight.T + model.output.bias)


def test_the_layers_of_the_encoder_are_traced_for_rollout_and_flow(tmp_path):
    """The trace's states are the encoder's, its attention transformers' own (rows of 1 over the real pieces)."""
    folder = save_checkpoint(tmp_path / "bert", head=False, pieces=True)
    model = classifier(folder)
    reference = transformers.AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    batch = pieces_batch(TEXTS)
    with torch.no_grad():
        trace = model.layer_trace(batch)
        own = reference(input_ids=batch["ids"], attention_mask=batch["mask"].long(), output_attentions=True)
    real = batch["mask"][:, None, :, None] & batch["mask"][:, None, None, :]
    torch.testing.assert_close(trace.attention[:, 1] * real, own.attentions[1] * real)
    torch.testing.assert_close(trace.hidden, model.encode(batch).hidden, atol=1e-6, rtol=0)
    assert model.attention_shape == (2, 2, True) and trace.transformed.shape == (3, 2, 2, batch["ids"].shape[1], 8)


def test_the_learning_rate_warms_up_then_decays_linearly_by_hand():
    """10 steps, 20 % warm-up: w = 2 steps rising 0, 1/2, then (10 − s)/8 down to 0."""
    from attn_study.models.pretrained import warmup_then_linear

    got = [warmup_then_linear(s, 10, 0.2) for s in range(11)]
    assert got == pytest.approx([0, 0.5, 1, 7 / 8, 6 / 8, 5 / 8, 4 / 8, 3 / 8, 2 / 8, 1 / 8, 0])
    assert [warmup_then_linear(s, 4, 0.0) for s in range(4)] == pytest.approx([1, 3 / 4, 2 / 4, 1 / 4])


def test_the_fine_tuning_optimiser_gives_each_part_its_rate_and_decay(tmp_path):
    """AdamW; the encoder's matrices at encoder.lr with its decay, its biases and layer norms at encoder.lr without;
    the scorer with attention_weight_decay; the decoder with the model's weight_decay — every trained weight once —,
    and the rates after 3 of 10 steps (warm-up 2) are 7/8 of the base rates."""
    from types import SimpleNamespace

    folder = save_checkpoint(tmp_path / "bert", head=False, pieces=True)
    model = classifier(folder, lr=3e-5, weight_decay=0.02, warmup=0.2)
    hparams = SimpleNamespace(lr=1e-3, weight_decay=1e-5, attention_weight_decay=0.5, amsgrad=False)
    extra = torch.nn.Parameter(torch.zeros(3))
    built = model.configure_optimizers(hparams, [extra], 10.0)
    optimizer, schedule = built["optimizer"], built["lr_scheduler"]["scheduler"]
    assert isinstance(optimizer, torch.optim.AdamW) and built["lr_scheduler"]["interval"] == "step"
    groups = [(g["initial_lr"], g["weight_decay"], {id(p) for p in g["params"]}) for g in optimizer.param_groups]
    by_name = dict(model.named_parameters())
    where = {name: next((lr, wd) for lr, wd, ids in groups if id(p) in ids) for name, p in by_name.items()}
    assert where["embedding.weight"] == (3e-5, 0.02)
    assert where["encoder.hf.encoder.layer.0.attention.self.query.weight"] == (3e-5, 0.02)
    assert where["encoder.hf.encoder.layer.0.attention.self.query.bias"] == (3e-5, 0)
    assert where["encoder.hf.embeddings.LayerNorm.weight"] == (3e-5, 0)
    assert where["scorer.w1.weight"] == where["scorer.v.weight"] == (1e-3, 0.5)
    assert where["output.weight"] == where["output.bias"] == (1e-3, 1e-5)
    assert sum(len(ids) for *_, ids in groups) == len(by_name) + 1  # every weight once, and the extra
    for _ in range(3):
        optimizer.step()
        schedule.step()
    assert [g["lr"] for g in optimizer.param_groups] == pytest.approx([3e-5 * 7 / 8] * 2 + [1e-3 * 7 / 8] * 2)
    with pytest.raises(UserError, match=r"unbounded \(trainer.max_epochs=-1\)"):
        model.configure_optimizers(hparams, [], float("inf"))


def test_a_frozen_encoder_is_not_trained_and_reads_without_dropout(tmp_path):
    from types import SimpleNamespace

    model = classifier(save_checkpoint(tmp_path / "bert", head=False, pieces=True), finetune=False).train()
    assert not model.encoder.training and model.output.training and model.dropout.training
    assert not any(p.requires_grad for p in model.encoder.parameters()) and not model.embedding.weight.requires_grad
    hparams = SimpleNamespace(lr=1e-3, weight_decay=0.0, attention_weight_decay=0.0, amsgrad=False)
    optimizer = model.configure_optimizers(hparams, [], 5.0)["optimizer"]
    trained = {id(p) for g in optimizer.param_groups for p in g["params"]}
    assert trained == {id(p) for n, p in model.named_parameters() if n.startswith(("scorer.", "output."))}
    batch = pieces_batch(TEXTS)
    first, second = model.encode(batch).hidden, model.encode(batch).hidden
    assert torch.equal(first, second) and first.dtype == torch.float32  # no dropout, float32 on a CPU


@pytest.mark.skipif(not torch.cuda.is_available(), reason="bf16 autocast is for CUDA devices")
def test_mixed_precision_on_a_gpu_trains_in_bf16_and_analyses_in_float32(tmp_path):
    """With every dropout at 0, the training pass (bf16 autocast) and the evaluation pass (float32) differ by bf16's
    rounding only, and both return float32."""
    model = classifier(save_checkpoint(tmp_path / "bert", head=False, pieces=True)).cuda()
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    batch = {k: v.cuda() for k, v in pieces_batch(TEXTS).items()}
    with torch.no_grad():
        exact = model.eval().encode(batch).hidden
        mixed = model.train().encode(batch).hidden
    assert mixed.dtype == torch.float32 and exact.dtype == torch.float32
    assert not torch.equal(mixed, exact)  # the training pass ran in bf16
    torch.testing.assert_close(mixed, exact, atol=0.1, rtol=0.05)


def run_config(folder, *overrides):
    """A quick run of encoder=pretrained on the checkpoint ``folder`` (another encoder= among ``overrides``: that)."""
    chosen = [o for o in overrides if o.startswith("encoder=")]
    return compose_config(
        *(chosen or ["encoder=pretrained", f"encoder.path={folder}"]),
        "trainer=debug",
        "logger=[csv]",
        "dataset.source.n_train=64",
        "dataset.source.n_dev=16",
        "dataset.source.n_test=16",
        *[o for o in overrides if o not in chosen],
    )


def test_training_lowers_the_loss_and_the_checkpoint_reads_back_to_the_same_outputs(tmp_path):
    """Four epochs on the synthetic task: the epochs' mean training loss falls; the tested checkpoint loaded again
    (its encoder rebuilt from encoder.path, then its weights) gives the outputs the test pass recorded."""
    from attn_study.job.plan import load_run
    from attn_study.job.run import run

    folder = save_checkpoint(tmp_path / "bert", head=False, pieces=True)
    cfg = run_config(
        folder,
        "analysis=[]",
        "trainer.max_epochs=4",
        "trainer.limit_train_batches=null",
        "trainer.limit_test_batches=null",
        "encoder.lr=1e-3",
        "model.optimizer.lr=1e-2",
    )
    summary = run(cfg, tmp_path / "run")
    metrics = pd.read_csv(tmp_path / "run" / "csv" / "metrics.csv")
    losses = metrics.dropna(subset=["train/loss"]).groupby("epoch")["train/loss"].mean().tolist()
    assert len(losses) == 4 and losses[-1] < losses[0]
    recorded = pd.read_parquet(tmp_path / "run" / "attention.parquet")
    loaded = load_run(tmp_path / "run")
    from attn_study.analysis.importance import predict

    test = loaded.datamodule.split("test")
    probabilities, labels = {}, dict(zip(test.uids, test.labels.tolist()))
    for batch in loaded.datamodule.loader("test"):
        _, alpha, probs = predict(loaded.model, batch)
        for r, i in enumerate(batch["index"].tolist()):
            probabilities[test.uids[i]] = probs[r].tolist()
    for _, row in recorded.iterrows():
        np.testing.assert_allclose(probabilities[row["uid"]], row["probabilities"], atol=1e-6)
    assert summary["test/acc"] == pytest.approx(np.mean([np.argmax(probabilities[u]) == labels[u] for u in labels]))
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert status["state"] == "complete"


@pytest.mark.parametrize(
    "overrides, says",
    [
        (["encoder.path=null"], r"encoder=pretrained: give encoder.path="),
        (["encoder.max_length=100"], r"encoder.max_length=100: the checkpoint reads at most 72 pieces"),
        (["model=han"], r"model=han: encoder=pretrained reads one sequence of word pieces"),
        (["dataset.inject.count=1"], r"dataset.inject: encoder.path reads texts through its checkpoint's tokenizer"),
        (["roar=roar", "roar.source=/nowhere"], r"roar.token=<mask>: encoder=pretrained masks a piece with one of"),
        (["encoder=lstm", "attention=cls"], r"attention=cls reads the classification token \(\[CLS\]\) of"),
    ],
)
def test_what_encoder_pretrained_cannot_take_is_refused_in_one_line(tmp_path, overrides, says):
    from attn_study.job.plan import build_plan, check_plan

    folder = save_checkpoint(tmp_path / "bert", head=False, pieces=True)
    with pytest.raises(UserError, match=says) as refused:
        build_plan(check_plan(run_config(folder, "analysis=[]", *overrides)), tmp_path / "run")
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_roar_at_fraction_0_masks_no_piece_so_its_token_is_not_refused(tmp_path):
    """roar.fraction=0 (ROAR's unmasked baseline) with the default roar.token=<mask>, which is no special token of
    the BERT tokenizer: nothing is masked, so the run is planned (the same with fraction 0.1 is refused above)."""
    from attn_study.job.plan import build_plan, check_plan

    folder = save_checkpoint(tmp_path / "bert", head=False, pieces=True)
    overrides = ("analysis=[]", "roar=roar", "roar.source=/nowhere", "roar.fraction=0")
    build_plan(check_plan(run_config(folder, *overrides)), tmp_path / "run")


def test_the_batch_benchmark_runs_each_family_at_batch_1_and_at_its_chosen_batch(tmp_path):
    """benchmarks/pretrained_batch.py on a tiny trained run: a row per family, the chosen batch (the CPU's token
    budget over 4 texts: more than 1), the same instances at each batch."""
    from attn_study.job.run import run
    from tests.helpers import run_benchmark

    folder = save_checkpoint(tmp_path / "bert", head=False, pieces=True)
    run(run_config(folder, "analysis=[]"), tmp_path / "run")
    out = tmp_path / "batch.csv"
    run_benchmark(
        "pretrained_batch.py",
        *["--run", str(tmp_path / "run"), "--instances", "4", "--families", "jain_wallace,sparsity"],
        *["--threads", "1", "--out", str(out)],
    )
    rows = pd.read_csv(out)
    assert rows["family"].tolist() == ["jain_wallace", "sparsity"]
    assert (rows["chosen_batch"] > 1).all() and (rows["instances"] == 4).all()
    assert (rows["batch1_instances_per_s"] > 0).all() and (rows["chosen_instances_per_s"] > 0).all()


@pytest.mark.parametrize("kind, limit", [("bert", 72), ("roberta", 72 - 1), ("distilbert", 512)])
def test_a_text_may_hold_as_many_pieces_as_the_checkpoint_has_positions(tmp_path, kind, limit):
    """BERT: its 72 positions; RoBERTa: 72 less the positions up to its padding index 0 (its positions start at 1);
    DistilBERT's config keeps the default 512."""
    from attn_study.models.huggingface import load_tokenizer
    from attn_study.models.pretrained import piece_limit

    config, fast = load_tokenizer(save_checkpoint(tmp_path / kind, kind, head=False, pieces=True))
    assert piece_limit(config, fast, None) == limit and piece_limit(config, fast, 10) == 10


def test_the_run_is_named_after_its_checkpoint_and_whether_it_was_frozen(tmp_path):
    folder = tmp_path / "tiny-bert"
    assert "-pretrained_tiny-bert-additive-" in run_config(folder).run_name
    assert "-pretrained_tiny-bert_frozen-cls-" in run_config(folder, "encoder.finetune=false", "attention=cls").run_name


def test_the_unknown_rate_counts_the_tokenizers_own_unknown_piece():
    """check_data's data/unk_rate/<split> is the share of pieces that are the tokenizer's unknown token (by id)."""
    from attn_study.data.checks import check_data
    from tests.data.test_word_pieces import PairSource, data

    module = data(PairSource(texts=["film", "zzz film", "zzz zzz"]))
    module.data.vocab.unk_id = 3  # [SEP], as if it were the tokenizer's unknown token: one per text
    metrics, _ = check_data(module)
    pieces = np.concatenate(module.split("test").ids)
    # [CLS] film [SEP], [CLS] [UNK] film [SEP], [CLS] [UNK] [UNK] [SEP]: 3 of 11 pieces
    assert metrics["data/unk_rate/test"] == pytest.approx(np.mean(pieces == 3)) == pytest.approx(3 / 11)
