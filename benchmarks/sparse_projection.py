"""Benchmark: one training step of Meister et al.'s sparse Transformer, the projections' rows fully or partially sorted.

The model is ``experiment=meister_transformer`` with ``projection=sparsemax`` (or ``--projection entmax15``): a
2-layer, 4-head, 128-d Transformer whose every head and whose pooling attention project their scores with the
same map, over a batch of ``--batch`` × ``--length`` random tokens (50-d embeddings). A step is the forward and
backward pass. The sorting-based maps are timed with a full sort of every row and with entmax's partial sort
over each row's k largest scores first (each map's ``partial_sort`` in ``attn_study.models.projection``; a row
whose support reaches k is solved again over 2k, so α is the same bit for bit, which the script checks).

    python benchmarks/sparse_projection.py                         # 32 × 256 tokens, one thread
    python benchmarks/sparse_projection.py --length 400 --ks 16,32,64 --threads 2

Prints the median seconds per step for each variant (``--repeats`` after one warm-up step; the variants take
turns). Time it on a quiet machine: another torch process on the same cores changes every number.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time

import entmax
import torch

from attn_study.models import projection
from attn_study.models.attention import DotScorer
from attn_study.models.classifier import AttentionClassifier
from attn_study.models.encoders import TransformerEncoder

MAPS = {"sparsemax": (projection.Sparsemax, entmax.sparsemax), "entmax15": (projection.Entmax15, entmax.entmax15)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--projection", choices=sorted(MAPS), default="sparsemax")
    parser.add_argument("--ks", default="16,32,64", help="partial sorts to time besides the full sort")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    module, function = MAPS[args.projection]
    model = AttentionClassifier(
        20000,
        2,
        functools.partial(TransformerEncoder, self_attention=args.projection),
        DotScorer,
        module(),
        embedding_dim=50,
    ).train()
    b, t = args.batch, args.length
    batch = {
        "ids": torch.randint(4, 20000, (b, t)),
        "lengths": torch.full((b,), t),
        "mask": torch.ones(b, t, dtype=torch.bool),
    }
    variants = {"full sort": None, **{f"k = {k}": int(k) for k in args.ks.split(",")}}
    project = module.project

    def step(k):
        module.project = lambda self, scores: function(scores, dim=-1, k=k)
        torch.manual_seed(1)
        logits, alpha = model(batch)
        logits.sum().backward()
        module.project = project
        return alpha.detach()

    reference = step(None)
    times = {name: [] for name in variants}
    for name, k in variants.items():
        if not torch.equal(step(k), reference):
            raise SystemExit(f"{name}: the pooled attention differs from the full sort's")
    for _ in range(args.repeats):
        for name, k in variants.items():
            start = time.perf_counter()
            step(k)
            times[name].append(time.perf_counter() - start)
    full = statistics.median(times["full sort"])
    for name, values in times.items():
        median = statistics.median(values)
        print(
            f"{name:10s} {median:7.3f} s a step  ({median / full:.2f} of the full sort's; {b} × {t} tokens, "
            f"{args.projection}, {args.threads} thread(s))"
        )


if __name__ == "__main__":
    main()
