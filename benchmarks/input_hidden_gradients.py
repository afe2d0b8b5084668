"""Benchmark: the T×T input → intermediate gradients g_{h_p}(x_i) of Meister et al. (Eq. 5).

Three ways to get G[b, p, i] = ‖∂‖h_p‖₂/∂e_i‖₂ for every real p of every instance:
  - per-p loop: one backward pass of Σ_b ‖h_{b,p}‖ per position p (the obvious code);
  - is_grads_batched: the same backward passes vectorised by ``torch.autograd.grad(...,
    is_grads_batched=True)`` (vmap over the cotangents), ``--chunk`` positions per call;
  - replicated rows (what ``attn_study.analysis.importance.input_to_hidden_gradients`` does): each
    (instance, p) is one row of a batch of ``--chunk`` sequences, encoded once, one backward pass.
All three must agree (max abs difference printed); the times and ratios are printed.

    python benchmarks/input_hidden_gradients.py --encoder lstm --instances 16 --length 200
    python benchmarks/input_hidden_gradients.py --imdb ../shared/data/imdb/aclImdb_v1.tar.gz --instances 16
With ``--imdb`` the inputs are the first test reviews of at least ``--length`` tokens (any length up to
399, as Jain & Wallace's filter); else random token ids of exactly ``--length`` tokens. The model is an
untrained BiLSTM / Transformer of the project's default sizes (embeddings 300): training does not
change the cost.
"""

from __future__ import annotations

import argparse
import time
from functools import partial

import torch

from attn_study.analysis.importance import input_to_hidden_gradients
from attn_study.data.datamodule import collate
from attn_study.models import attention, encoders, projection
from attn_study.models.classifier import AttentionClassifier

ENCODERS = {
    "lstm": (partial(encoders.RNNEncoder, hidden_size=128), attention.AdditiveScorer),
    "transformer": (partial(encoders.TransformerEncoder), attention.DotScorer),
    "cnn": (partial(encoders.CNNEncoder), attention.AdditiveScorer),
}


def inputs(args, vocab_size: int) -> list[list[int]]:
    if not args.imdb:
        g = torch.Generator().manual_seed(0)
        return [torch.randint(2, vocab_size, (args.length,), generator=g).tolist() for _ in range(args.instances)]
    from attn_study.data.imdb import IMDBSource
    from attn_study.data.text import tokenize_many

    test = IMDBSource(path=args.imdb).load()["test"]
    seqs = []
    for tokens in tokenize_many(e.text for e in test[: 20 * args.instances]):
        if args.length <= len(tokens) < 400:
            seqs.append([2 + hash(t) % (vocab_size - 2) for t in tokens])
        if len(seqs) == args.instances:
            break
    return seqs


def per_p_loop(model, batch):
    mask = batch["mask"]
    b, t = mask.shape
    emb = model.embed(batch).detach().requires_grad_(True)
    norms = model.encode(batch, embedded=emb).hidden.norm(dim=-1)
    out = torch.zeros(b, t, t)
    for p in range(t):
        (grad,) = torch.autograd.grad(norms[:, p].sum(), emb, retain_graph=True)
        out[:, p] = grad.norm(dim=-1) * mask
    return out * mask[:, :, None]


def grads_batched(model, batch, chunk: int):
    mask = batch["mask"]
    b, t = mask.shape
    emb = model.embed(batch).detach().requires_grad_(True)
    norms = model.encode(batch, embedded=emb).hidden.norm(dim=-1)
    out = torch.zeros(b, t, t)
    for s in range(0, t, chunk):
        ps = torch.arange(s, min(t, s + chunk))
        cotangents = torch.zeros(len(ps), b, t)
        cotangents[torch.arange(len(ps)), :, ps] = 1.0
        (grad,) = torch.autograd.grad(norms, emb, cotangents, is_grads_batched=True, retain_graph=True)
        out[:, ps] = grad.norm(dim=-1).transpose(0, 1) * mask[:, None, :]
    return out * mask[:, :, None]


def timed(fn):
    started = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encoder", choices=list(ENCODERS), default="lstm")
    parser.add_argument("--instances", type=int, default=16)
    parser.add_argument("--length", type=int, default=200)
    parser.add_argument("--chunk", type=int, default=256, help="rows (replicated) or positions (batched) per call")
    parser.add_argument("--imdb", default=None, help="aclImdb folder or tarball: real reviews as inputs")
    parser.add_argument("--skip-loop", action="store_true", help="skip the per-p loop (slow on long inputs)")
    args = parser.parse_args()
    torch.manual_seed(0)
    encoder, scorer = ENCODERS[args.encoder]
    model = (
        AttentionClassifier(
            vocab_size=20000,
            num_classes=2,
            encoder=encoder,
            scorer=scorer,
            projection=projection.Softmax(),
            embedding_dim=300,
        )
        .eval()
        .requires_grad_(False)
    )
    seqs = inputs(args, 20000)
    batch = collate([{"index": i, "ids": s, "label": 0} for i, s in enumerate(seqs)])
    print(
        f"{args.encoder}: {len(seqs)} instances of {int(batch['lengths'].min())}–{int(batch['lengths'].max())} "
        f"tokens ({int(batch['lengths'].sum())} rows of G), {torch.get_num_threads()} threads"
    )
    replicated, t_rep = timed(lambda: input_to_hidden_gradients(model, batch, chunk_size=args.chunk))
    vmapped, t_vmap = timed(lambda: grads_batched(model, batch, chunk=max(1, args.chunk // len(seqs))))
    print(f"replicated rows    {t_rep:8.2f} s")
    print(
        f"is_grads_batched   {t_vmap:8.2f} s   (replicated is {t_vmap / t_rep:.1f}x faster); "
        f"max |diff| {float((vmapped - replicated).abs().max()):.2e}"
    )
    if not args.skip_loop:
        loop, t_loop = timed(lambda: per_p_loop(model, batch))
        print(
            f"per-p loop         {t_loop:8.2f} s   (replicated is {t_loop / t_rep:.1f}x faster); "
            f"max |diff| {float((loop - replicated).abs().max()):.2e}"
        )


if __name__ == "__main__":
    main()
