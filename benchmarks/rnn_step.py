"""Benchmark: one training step of the bidirectional RNN encoder against the hardware's floor, on the same batch.

A step is the encoder's forward and backward pass over one batch of embedded tokens (B × T × d, lengths drawn
as a length-bucketed batch of the data has them). Three ways to compute the same states:

- ``floor``: two unidirectional ``nn.LSTM``/``nn.GRU`` modules over the padded batch, the backward one reading
  the batch reversed (what torch's fused kernel costs for these sizes; no reversal, no masking);
- ``encoder``: ``RNNEncoder`` as the models run it (each direction fused over the padded batch, the backward
  one reading each sequence reversed within its own length, padding zeroed);
- ``packed``: the same weights over ``pack_padded_sequence`` (what ``RNNEncoder`` ran before).

    python benchmarks/rnn_step.py                      # BiLSTM 50 → 2 × 128, 32 × 180 tokens, one thread
    python benchmarks/rnn_step.py --cell gru --hidden 50 --threads 2
    python benchmarks/rnn_step.py --lengths imdb.npy   # lengths drawn from a file of a dataset's lengths

Prints the median milliseconds per step of each (``--repeats`` rounds after ``--warmup``; the floor and the
encoder take turns), the ratio of
each to the floor, and the largest difference between the encoder's and the packed states at real positions.
Time it on a quiet machine: another torch process on the same cores changes every number.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attn_study.models.encoders import RNNEncoder


def batch_lengths(args, rng: np.random.Generator) -> torch.Tensor:
    """The batch's lengths: ``--batch`` lengths within ``--spread`` of ``--length`` (a length-bucketed batch), or
    ``--batch`` consecutive lengths of a sorted random pool of ``--lengths``'s values."""
    if args.lengths:
        pool = np.sort(rng.choice(np.load(args.lengths), size=args.batch * 50))
        start = rng.integers(0, len(pool) - args.batch)
        return torch.as_tensor(pool[start : start + args.batch].copy(), dtype=torch.long)
    lengths = rng.integers(max(args.length - args.spread, 1), args.length + 1, size=args.batch)
    lengths[0] = args.length
    return torch.as_tensor(lengths, dtype=torch.long)


def timed(steps: dict, repeats: int, warmup: int) -> dict[str, float]:
    """The median milliseconds of each step, the steps taken in turn (one of each per round), so that a slow spell
    of the machine falls on all of them alike."""
    for step in steps.values():
        for _ in range(warmup):
            step()
    times = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) * 1000 for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cell", choices=["lstm", "gru"], default="lstm")
    parser.add_argument("--input", type=int, default=50, help="embedding size d")
    parser.add_argument("--hidden", type=int, default=128, help="hidden size per direction")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=180, help="the batch's longest text")
    parser.add_argument("--spread", type=int, default=8, help="lengths lie within this of --length")
    parser.add_argument("--lengths", help=".npy of a dataset's lengths to draw the batch from")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)

    lengths = batch_lengths(args, rng)
    width = int(lengths.max())
    mask = torch.arange(width)[None, :] < lengths[:, None]
    embedded = torch.randn(len(lengths), width, args.input, requires_grad=True)
    encoder = RNNEncoder(args.input, args.hidden, cell=args.cell)
    rnn = encoder.rnn
    one_way = {"lstm": nn.LSTM, "gru": nn.GRU}[args.cell]
    forward, backward = (one_way(args.input, args.hidden, batch_first=True) for _ in range(2))

    def floor():
        (forward(embedded)[0].sum() + backward(embedded.flip(1))[0].sum()).backward()

    def ours():
        encoder(embedded, mask, lengths).sum().backward()

    def packed_states():
        packed = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
        return pad_packed_sequence(rnn(packed)[0], batch_first=True, total_length=width)[0]

    def packed():
        packed_states().sum().backward()

    with torch.no_grad():
        difference = float((encoder(embedded, mask, lengths) - packed_states())[mask].abs().max())
    padding = 1 - float(lengths.sum()) / (len(lengths) * width)
    times = timed({"floor": floor, "encoder": ours}, args.repeats, args.warmup)
    times |= timed({"packed": packed}, max(args.repeats // 4, 3), 1)
    print(
        f"Bi{args.cell.upper()} {args.input} → 2 × {args.hidden}, batch {len(lengths)} × {width} tokens "
        f"({padding:.1%} padding), {args.threads} thread(s), forward + backward:"
    )
    for name, ms in times.items():
        print(f"  {name:8s} {ms:8.1f} ms   {ms / times['floor']:5.2f} × floor")
    print(f"  largest |encoder − packed| at real positions: {difference:.2e}")


if __name__ == "__main__":
    main()
