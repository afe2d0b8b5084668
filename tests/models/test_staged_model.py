"""Every encoder × scoring × projection: padding, staging, gradients, one training step."""

from __future__ import annotations

import itertools
from functools import partial

import entmax
import numpy as np
import pytest
import torch

from attn_study.data.datamodule import collate
from attn_study.models import attention, encoders, projection
from attn_study.models.classifier import AttentionClassifier
from attn_study.models.module import AttentionModule, _metrics

ENCODERS = {
    "lstm": partial(encoders.RNNEncoder, hidden_size=8, cell="lstm"),
    "gru": partial(encoders.RNNEncoder, hidden_size=8, cell="gru"),
    "orthogonal_lstm": partial(encoders.OrthogonalLSTMEncoder, hidden_size=8),
    "cnn": partial(encoders.CNNEncoder, kernel_sizes=(1, 3, 5, 7), filters=4),
    "conv": partial(encoders.CNNEncoder, kernel_sizes=(3, 5), filters=4),
    "average": partial(encoders.AverageEncoder, hidden_size=8),
    "noenc": encoders.NoEncoder,
    "transformer": partial(encoders.TransformerEncoder, model_dim=8, num_heads=2, num_layers=1, ff_dim=16),
}
SCORERS = {"additive": attention.AdditiveScorer, "dot": attention.DotScorer}
PROJECTIONS = {
    "softmax": projection.Softmax,
    "sparsemax": projection.Sparsemax,
    "entmax15": projection.Entmax15,
    "entmax_bisect": partial(projection.EntmaxBisect, alpha=1.3),
    "sparsegen": partial(projection.SparsegenLin, lam=0.3),
}
COMBOS = list(itertools.product(ENCODERS, SCORERS, PROJECTIONS))
SEQS = [[5, 6, 7, 8, 9, 10, 11], [12, 13, 14], [15], [16, 17, 18, 19, 20]]


def make_model(enc, score, proj, num_classes=2):
    torch.manual_seed(0)
    model = AttentionClassifier(
        vocab_size=30,
        num_classes=num_classes,
        encoder=ENCODERS[enc],
        scorer=SCORERS[score],
        projection=PROJECTIONS[proj](),
        embedding_dim=6,
    )
    return model.eval()


def batch_of(seqs, labels=None, extra_pad=0):
    items = [{"index": i, "ids": s + [0] * 0, "label": (labels or [0] * len(seqs))[i]} for i, s in enumerate(seqs)]
    batch = collate(items)
    if extra_pad:
        pad = torch.zeros(len(seqs), extra_pad, dtype=torch.long)
        batch["ids"] = torch.cat([batch["ids"], pad], 1)
        batch["mask"] = torch.cat([batch["mask"], pad.bool()], 1)
    return batch


@pytest.mark.parametrize("enc,score,proj", COMBOS)
def test_padding_staging_and_gradients(enc, score, proj):
    model = make_model(enc, score, proj)
    batch = batch_of(SEQS)
    logits, alpha = model(batch)

    # padding gets exactly zero attention; attention is a distribution over real tokens
    assert torch.all(alpha[~batch["mask"]] == 0)
    torch.testing.assert_close(alpha.sum(-1), torch.ones(len(SEQS)))
    assert torch.all(alpha >= 0)

    # decode(encode(x), attend(encode(x))) == forward(x)
    enc_out = model.encode(batch)
    torch.testing.assert_close(model.decode(enc_out, model.attend(enc_out)), logits)

    # output and attention do not depend on how much padding follows
    padded = batch_of(SEQS, extra_pad=6)
    logits_p, alpha_p = model(padded)
    torch.testing.assert_close(logits_p, logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(alpha_p[:, : alpha.shape[1]], alpha, atol=1e-5, rtol=1e-5)
    # nor on the other instances of the batch
    alone_logits, _ = model(batch_of(SEQS[1:2]))
    torch.testing.assert_close(alone_logits[0], logits[1], atol=1e-5, rtol=1e-5)

    # gradients w.r.t. a leaf embedding, with attention detached, reach real tokens only
    emb = model.embed(batch).detach().requires_grad_(True)
    enc_g = model.encode(batch, embedded=emb)
    out = model.decode(enc_g, model.attend(enc_g).detach())
    model.probabilities(out)[:, 1].sum().backward()
    assert torch.isfinite(emb.grad).all()
    assert torch.all(emb.grad[~batch["mask"]] == 0)


@pytest.mark.parametrize("enc,score,proj", COMBOS)
def test_one_training_step(enc, score, proj):
    model = make_model(enc, score, proj, num_classes=3)
    model.train()
    module = AttentionModule(model, lr=0.01)
    optimizer = module.configure_optimizers()
    batch = batch_of(SEQS, labels=[0, 1, 2, 1])
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    logits, _ = model(batch)
    loss = module.loss(logits, batch["labels"])
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss)
    changed = [n for n, p in model.named_parameters() if not torch.equal(p, before[n])]
    assert "output.weight" in changed and "embedding.weight" in changed
    assert torch.all(model.embedding.weight[0] == 0), "the <pad> row must stay zero"


def test_binary_uses_one_sigmoid_logit_and_full_distribution():
    model = make_model("average", "additive", "softmax")
    logits, _ = model(batch_of(SEQS))
    assert logits.shape == (4, 1)
    probs = model.probabilities(logits)
    torch.testing.assert_close(probs[:, 1], torch.sigmoid(logits[:, 0]))
    torch.testing.assert_close(probs.sum(-1), torch.ones(4))


def test_decode_pooled_zero_vector_is_bias_only():
    model = make_model("noenc", "dot", "softmax", num_classes=3)
    out = model.decode_pooled(torch.zeros(2, model.encoder.output_dim))
    torch.testing.assert_close(out, model.output.bias.expand(2, 3))


def test_projection_values_against_closed_forms():
    scores = torch.tensor([[2.0, 1.0, 0.1, -1.0, 5.0]])
    mask = torch.tensor([[True, True, True, True, False]])
    # softmax over the first four only
    expected = torch.softmax(scores[:, :4], -1)
    torch.testing.assert_close(projection.Softmax()(scores, mask)[:, :4], expected)
    # sparsemax of (2, 1, 0.1, -1): threshold tau = (2 + 1 - 1) / 2 = 1 → (1, 0, 0, 0)
    torch.testing.assert_close(projection.Sparsemax()(scores, mask), torch.tensor([[1.0, 0, 0, 0, 0]]))
    # sparsemax of (.9, .4, 0): support {1, 2} (1 + 2·.4 > 1.3, 1 + 3·0 ≤ 1.3), tau = (1.3 - 1)/2 → (.75, .25, 0)
    z3 = torch.tensor([[0.9, 0.4, 0.0]])
    m3 = torch.ones(1, 3, dtype=torch.bool)
    torch.testing.assert_close(projection.Sparsemax()(z3, m3), torch.tensor([[0.75, 0.25, 0.0]]))
    # sparsegen-lin with lam=-1 is sparsemax of z/2 = (.45, .2, 0): full support, tau = (.65 - 1)/3
    tau = (0.65 - 1) / 3
    torch.testing.assert_close(projection.SparsegenLin(lam=-1.0)(z3, m3), torch.tensor([[0.45 - tau, 0.2 - tau, -tau]]))
    # ... and with lam=0.5 sparsemax of 2z = (1.8, .8, 0): support {1}: (1, 0, 0) — larger lam, sparser
    torch.testing.assert_close(projection.SparsegenLin(lam=0.5)(z3, m3), torch.tensor([[1.0, 0.0, 0.0]]))
    # entmax_bisect with alpha=2 equals sparsemax; alpha=1.5 equals the exact entmax15
    z = torch.randn(3, 7)
    mz = torch.ones(3, 7, dtype=torch.bool)
    torch.testing.assert_close(
        projection.EntmaxBisect(alpha=2.0)(z, mz), projection.Sparsemax()(z, mz), atol=1e-5, rtol=0
    )
    torch.testing.assert_close(
        projection.EntmaxBisect(alpha=1.5)(z, mz), projection.Entmax15()(z, mz), atol=1e-5, rtol=0
    )


def _sparsemax_by_full_sort(z: torch.Tensor) -> torch.Tensor:
    """Sparsemax written out: sorted descending, support k(z) = max{k : 1 + k·z₍ₖ₎ > Σ_{j≤k} z₍ⱼ₎},
    τ = (Σ_{j≤k(z)} z₍ⱼ₎ − 1) / k(z), α = max(z − τ, 0)."""
    ordered, _ = torch.sort(z, dim=-1, descending=True)
    ks = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
    cumulative = ordered.cumsum(-1)
    support = ((1 + ks * ordered) > cumulative).sum(-1, keepdim=True)
    tau = (cumulative.gather(-1, support - 1) - 1) / support.to(z.dtype)
    return (z - tau).clamp_min(0)


def test_long_rows_partially_sorted_give_the_full_sorts_projection():
    # rows of 300 scores whose supports run from 1 to all 300 (the scale sets it), 40 of them padded at the end,
    # in a (4, 12, 300) block as a Transformer's heads have them: supports below, at, and 2× and 4× above each
    # map's first partial sort, where the pass must be redone
    torch.manual_seed(0)
    t = 300
    scale = torch.logspace(-3, 1, 24).repeat_interleave(2)[:, None]
    scores = (torch.randn(48, t) * scale).reshape(4, 12, t).requires_grad_()
    mask = torch.ones(48, t, dtype=torch.bool)
    mask[1::2, -40:] = False
    mask = mask.reshape(4, 12, t)
    alpha = projection.Sparsemax()(scores, mask)
    support = (alpha > 0).sum(-1)
    assert support.min() == 1 and support.max() == t and ((support > 4 * projection.Entmax15.partial_sort).sum() > 2)
    masked = scores.detach().masked_fill(~mask, -1e9)
    torch.testing.assert_close(alpha.detach(), _sparsemax_by_full_sort(masked) * mask, atol=1e-6, rtol=0)
    # bit for bit the library's full sort, forward and backward, for each sorting projection
    weights = torch.randn(4, 12, t)
    for name, module, full in [
        ("sparsemax", projection.Sparsemax(), lambda s: entmax.sparsemax(s, dim=-1)),
        ("entmax15", projection.Entmax15(), lambda s: entmax.entmax15(s, dim=-1)),
        ("sparsegen", projection.SparsegenLin(lam=-3.0), lambda s: entmax.sparsemax(s / 4.0, dim=-1)),
    ]:
        ours = module(scores, mask)
        (grad_ours,) = torch.autograd.grad((ours * weights).sum(), scores)
        theirs = full(scores.masked_fill(~mask, -1e9)) * mask
        (grad_theirs,) = torch.autograd.grad((theirs * weights).sum(), scores)
        assert torch.equal(ours, theirs), name
        assert torch.equal(grad_ours, grad_theirs), name


def test_invalid_projection_parameters_are_rejected():
    with pytest.raises(ValueError, match="projection.alpha"):
        projection.EntmaxBisect(alpha=1.0)
    with pytest.raises(ValueError, match="projection.lam"):
        projection.SparsegenLin(lam=1.0)


def test_rnn_summary_is_last_forward_and_first_backward_state():
    torch.manual_seed(0)
    enc = encoders.RNNEncoder(input_dim=3, hidden_size=4)
    x = torch.randn(2, 5, 3)
    lengths = torch.tensor([5, 2])
    mask = torch.arange(5)[None] < lengths[:, None]
    h = enc(x, mask, lengths)
    _, (h_n, _) = enc.rnn(torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
    torch.testing.assert_close(enc.summarize(h, mask, lengths), torch.cat([h_n[0], h_n[1]], -1))


def test_training_seconds_stop_at_the_end_of_fit(monkeypatch):
    """``train/seconds`` is the fit's own time: testing reloads the best checkpoint (its ``train_seconds`` as
    of its epoch), and neither that value nor the testing and analyses after fit are added to it."""
    from types import SimpleNamespace

    from attn_study.models import module as module_code

    now = [100.0]
    monkeypatch.setattr(module_code, "time", SimpleNamespace(time=lambda: now[0]))
    module = AttentionModule(make_model("average", "additive", "softmax"), lr=0.01)
    module.on_fit_start()
    now[0] = 130.0
    assert module.train_seconds == 30.0  # while fitting: the time so far
    module.on_fit_end()
    module._trainer = SimpleNamespace(state=SimpleNamespace(fn="test"))
    module.on_load_checkpoint({"train_seconds": 20.0, "state_dict": {}})  # the best epoch's checkpoint
    now[0] = 500.0  # testing and analyses
    assert module.train_seconds == 30.0
    assert module.seconds_before == 0.0  # run/seconds adds it to this attempt's wall time: not the best epoch's
    resumed = AttentionModule(make_model("average", "additive", "softmax"), lr=0.01)
    resumed._trainer = SimpleNamespace(state=SimpleNamespace(fn="fit"))
    resumed.on_load_checkpoint({"train_seconds": 20.0, "state_dict": {}})  # resuming: the earlier attempt's training
    assert resumed.seconds_before == 20.0


def test_the_bar_shows_the_training_and_validation_loss_once_per_epoch_and_the_test_loss_is_a_final_value(tmp_path):
    """``train/loss`` and ``val/loss`` are on the training bar, ``test/loss`` is logged but not shown there; each is
    an epoch's mean alone (no ``…_step`` / ``…_epoch`` twins)."""
    from attn_study.job.components import build_datamodule, build_model
    from tests.helpers import TINY, compose_config, quiet_trainer

    cfg = compose_config(*TINY, "logger=none", "encoder.hidden_size=8")
    datamodule = build_datamodule(cfg)
    module = build_model(cfg, datamodule)
    trainer = quiet_trainer(tmp_path, max_epochs=1, limit_train_batches=2, limit_val_batches=1, limit_test_batches=1)
    trainer.fit(module, datamodule=datamodule)
    assert {"train/loss", "val/loss"} <= set(trainer.progress_bar_metrics)
    trainer.test(module, datamodule=datamodule, verbose=False)
    assert "test/loss" in trainer.logged_metrics and "test/loss" not in trainer.progress_bar_metrics
    assert not [k for k in trainer.logged_metrics if k.endswith(("_step", "_epoch"))]


def test_the_peak_memory_is_counted_from_the_runs_start():
    """``run/peak_memory_mib`` is the resident set's peak since :func:`memory.reset_peak`: a 200 MiB array freed
    before the reset does not count, one held after it does (Linux's VmHWM)."""
    import numpy as np

    from attn_study.job import memory

    big = np.ones(200 * 2**20 // 8)
    del big
    memory.reset_peak()
    before = memory.peak_mib()["run/peak_memory_mib"]
    held = np.ones(200 * 2**20 // 8)
    after = memory.peak_mib()["run/peak_memory_mib"]
    assert held.sum() > 0 and after - before == pytest.approx(200, abs=20)


def test_the_peak_memory_in_mib_from_linux_its_fallback_and_cuda(tmp_path, monkeypatch):
    """VmHWM 204800 kB = 200 MiB; without /proc, ru_maxrss 409600 kB = 400 MiB; CUDA's peak 3 · 2^20 bytes = 3 MiB."""
    from types import SimpleNamespace

    from attn_study.job import memory

    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmPeak:\t  999999 kB\nVmHWM:\t  204800 kB\nVmRSS:\t  1000 kB\n")
    monkeypatch.setattr(memory, "_STATUS", status)
    monkeypatch.setattr(memory.torch.cuda, "is_available", lambda: False)
    assert memory.peak_mib() == {"run/peak_memory_mib": 200.0}
    monkeypatch.setattr(memory, "_STATUS", tmp_path / "no-proc")
    monkeypatch.setattr(memory.resource, "getrusage", lambda who: SimpleNamespace(ru_maxrss=409600))
    assert memory.peak_mib() == {"run/peak_memory_mib": 400.0}
    monkeypatch.setattr(memory.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(memory.torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(memory.torch.cuda, "max_memory_allocated", lambda: 3 * 2**20)
    assert memory.peak_mib() == {"run/peak_memory_mib": 400.0, "run/peak_gpu_memory_mib": 3.0}


def _packed_states(rnn: torch.nn.RNNBase, embedded: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The reference: ``rnn`` over the packed sequences (what RNNEncoder ran before its padded two-pass path)."""
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    packed = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
    return pad_packed_sequence(rnn(packed)[0], batch_first=True, total_length=embedded.shape[1])[0]


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("layers,bidirectional", [(1, True), (2, True), (1, False)])
def test_rnn_padded_path_equals_packed_sequences_in_float64(cell, layers, bidirectional):
    """The fused padded path (forward reads the batch, backward each sequence reversed within its length) gives
    the packed run's states, and the same gradients for the inputs and every weight, to 1e-6 in float64 — with
    padding of any content (here random, not zeros), which must change nothing."""
    torch.manual_seed(0)
    enc = encoders.RNNEncoder(5, hidden_size=6, cell=cell, num_layers=layers, bidirectional=bidirectional).double()
    lengths = torch.tensor([7, 3, 1, 5])
    mask = torch.arange(7)[None, :] < lengths[:, None]
    x = torch.randn(4, 7, 5, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(4, 7, enc.output_dim, dtype=torch.float64)  # a loss that reads every real state

    ours = enc(x, mask, lengths)
    grads = torch.autograd.grad((ours * weights * mask[..., None]).sum(), [x, *enc.parameters()])
    reference = _packed_states(enc.rnn, x, lengths)
    expected = torch.autograd.grad((reference * weights * mask[..., None]).sum(), [x, *enc.parameters()])

    assert torch.allclose(ours, reference, atol=1e-6, rtol=0)
    assert (ours[~mask] == 0).all()
    for got, want in zip(grads, expected):
        assert torch.allclose(got, want, atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
def test_transformer_self_attention_projects_each_heads_scores(name):
    """With a sparse self-attention every head's weights are that projection of q_i·k_j/√d over the real keys
    (computed here from the layer's own weights), exactly 0 for some keys, and the forward pass is the trace's."""
    from entmax import entmax15, sparsemax

    torch.manual_seed(0)
    enc = encoders.TransformerEncoder(6, model_dim=8, num_heads=2, num_layers=1, ff_dim=16, self_attention=name)
    enc.eval()
    with torch.no_grad():
        enc.layers.layers[0].self_attn.in_proj_weight.mul_(4)  # peaked scores: some weights exactly 0
    x = torch.randn(2, 5, 6)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)
    with torch.no_grad():
        trace = enc.trace(x, mask)
        layer = enc.layers.layers[0]
        y = layer.norm1(enc.proj(x) + enc.positions[:5])
        q, k, _ = torch.nn.functional.linear(y, layer.self_attn.in_proj_weight, layer.self_attn.in_proj_bias).chunk(
            3, -1
        )
        q, k = (z.view(2, 5, 2, 4).transpose(1, 2) for z in (q, k))
        scores = (q @ k.transpose(-1, -2)) / 2.0
        expected = {"sparsemax": sparsemax, "entmax15": entmax15}[name](
            scores.masked_fill(~mask[:, None, None, :], -1e9), dim=-1
        ) * (mask[:, None, :, None] & mask[:, None, None, :])
        torch.testing.assert_close(trace.attention[:, 0], expected)
        assert (trace.attention[:, 0][expected.bool().logical_not() & mask[:, None, :, None]] == 0).all()
        assert (expected[mask[:, None, :, None].expand_as(expected) & mask[:, None, None, :]] == 0).any()
        torch.testing.assert_close(enc(x, mask, mask.sum(1)), trace.hidden)


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
def test_the_sparse_transformers_forward_pass_is_its_traces_in_training_too(name):
    """The forward pass of a written-out self-attention skips the trace's f^h (W_O applied after A·V): in training
    mode, with dropout on, two layers and padding, its states and every gradient are the trace's (float64), the
    dropout draws the same."""
    torch.manual_seed(0)
    enc = (
        encoders.TransformerEncoder(
            6, model_dim=8, num_heads=2, num_layers=2, ff_dim=16, dropout=0.3, self_attention=name
        )
        .double()
        .train()
    )
    x = torch.randn(3, 7, 6, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[1] * 7, [1] * 5 + [0] * 2, [1] * 2 + [0] * 5], dtype=torch.bool)
    weights = torch.randn(3, 7, 8, dtype=torch.float64)
    results = []
    for run in (lambda: enc(x, mask, mask.sum(1)), lambda: enc.trace(x, mask).hidden):
        torch.manual_seed(1)
        hidden = run()
        grads = torch.autograd.grad((hidden * weights).sum(), [x, *enc.parameters()])
        results.append((hidden, grads))
    (fast, fast_grads), (traced, traced_grads) = results
    assert (fast != 0).any() and not torch.equal(fast, enc.eval().trace(x, mask).hidden)  # dropout was on
    torch.testing.assert_close(fast, traced, atol=1e-12, rtol=0)
    for ours, theirs in zip(fast_grads, traced_grads):
        torch.testing.assert_close(ours, theirs, atol=1e-12, rtol=0)


def test_transformer_self_attention_pooling_takes_the_models_projection(make_cfg):
    """``encoder.self_attention=pooling`` (Meister's Transformer) builds the self-attention from ``projection``:
    sparsegen-lin with the grid's λ; an unknown name is refused in one line naming the option."""
    from attn_study.errors import UserError
    from attn_study.job.components import _encoder

    cfg = make_cfg("experiment=meister_transformer", "projection=sparsegen_grid/lam0.5")
    enc = _encoder(cfg)(input_dim=6)
    assert isinstance(enc.self_attention, projection.SparsegenLin) and enc.self_attention.lam == 0.5
    assert isinstance(_encoder(make_cfg("encoder=transformer"))(input_dim=6).self_attention, projection.Softmax)
    with pytest.raises(UserError, match="encoder.self_attention=relu"):
        encoders.TransformerEncoder(6, self_attention="relu")


def _auroc_by_ranks(scores: np.ndarray, positive: np.ndarray) -> float:
    """P(score of a positive > score of a negative) + ½ P(tie), over every positive × negative pair."""
    pos, neg = scores[positive], scores[~positive]
    return float(((pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])).mean())


def test_auroc_is_the_mean_over_the_classes_the_targets_hold():
    """The logged AUROC averages one-vs-rest AUROC over the classes with a target only: a class never a label
    (bAbI's classes=words) is left out, not counted as 0; with every class present it is the plain macro."""
    gen = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(40, 7, generator=gen), -1)
    target = torch.tensor([0, 2, 5] * 13 + [6])  # classes 1, 3, 4 never occur, class 6 once
    metric = _metrics(7)["auroc"]
    metric.update(probs, target)
    expected = np.mean([_auroc_by_ranks(probs[:, c].numpy(), (target == c).numpy()) for c in (0, 2, 5, 6)])
    assert metric.compute().item() == pytest.approx(expected, abs=1e-6)
    every = torch.arange(40) % 7
    metric.reset()
    metric.update(probs, every)
    expected = np.mean([_auroc_by_ranks(probs[:, c].numpy(), (every == c).numpy()) for c in range(7)])
    assert metric.compute().item() == pytest.approx(expected, abs=1e-6)
