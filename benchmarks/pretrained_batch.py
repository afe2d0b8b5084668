"""Benchmark: each family's work per second on a trained ``encoder=pretrained`` run at batch 1 against the batch its
automatic size chooses (``analysis.<family>.batch_size=null``: ``analysis/batch_size.py``'s token budget) — whether
the chosen batch does more work per second than one instance at a time, as it should (issue 60).

    python benchmarks/pretrained_batch.py --run <an encoder=pretrained run> [--families jain_wallace,sparsity]
        [--instances 32] [--threads 1] [--out batch.csv]

Each family is configured as ``attn-study-analyze ckpt_path=<run> analysis=[<family>]`` configures it
(``analysis_speed.analysis_for``), run on the same ``--instances`` test instances at batch 1 and at its chosen batch,
in that order, after one warm-up pass; per family: the chosen batch and how it was chosen, the instances and the
work (Σ T, or Σ T² for a family whose work per instance is T × T) per second of each, and their ratio. CPU time
(``time.process_time``) beside wall time: with ``--threads 1`` a measure that a busy machine distorts less. On a
GPU the same script measures the GPU's budget (half the free memory at the family's bytes per token).

Time it alone on a quiet machine: other torch processes on the same cores distort it.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # analysis_speed, beside this script

FAMILIES = ("jain_wallace", "serrano_smith", "sparsity", "faithfulness", "agreement", "sanity")


def timed(callback, model, data, indices) -> tuple[float, float]:
    """(wall, CPU) seconds of one pass of ``callback``'s tests over ``indices`` of the test split."""
    from attn_study.analysis.measuring import analysis_mode

    started, cpu = time.perf_counter(), time.process_time()
    with analysis_mode(model):
        callback.measure(model, data, "test", indices, callback.tests)
    return time.perf_counter() - started, time.process_time() - cpu


def main(argv=None) -> int:
    from analysis_speed import analysis_for

    from attn_study.analysis.measuring import instance_work
    from attn_study.job.plan import load_run

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="a complete run trained with encoder=pretrained")
    parser.add_argument("--families", default=",".join(FAMILIES), help="comma-separated, of the registry")
    parser.add_argument("--instances", type=int, default=32, help="test instances per pass")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--out", default=None, help="a CSV of the rows too")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    loaded = load_run(Path(args.run))
    model, data = loaded.model, loaded.datamodule
    device = next(model.parameters()).device
    rows = []
    for family in args.families.split(","):
        callback = analysis_for(Path(args.run), family)
        indices = callback.instances(data, "test", args.instances, 0)
        lengths = torch.as_tensor(data.split("test").lengths[indices], dtype=torch.float64)
        work = instance_work(lengths, callback.QUADRATIC)
        callback.batch_size = None
        chosen = callback.batch_size_for(data, "test", indices, device)
        timed(callback, model, data, indices[:2])  # warm-up: first calls, caches
        row = {"family": family, "chosen_batch": chosen, "instances": len(indices), "work": work}
        for label, size in (("batch1", 1), ("chosen", chosen)):
            callback.batch_size = size
            wall, cpu = timed(callback, model, data, indices)
            row |= {
                f"{label}_wall_s": wall,
                f"{label}_cpu_s": cpu,
                f"{label}_instances_per_s": len(indices) / wall,
                f"{label}_work_per_cpu_s": work / max(cpu, 1e-9),
            }
        row["speedup_wall"] = row["batch1_wall_s"] / row["chosen_wall_s"]
        row["speedup_cpu"] = row["batch1_cpu_s"] / max(row["chosen_cpu_s"], 1e-9)
        rows.append(row)
        print(" ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
    if args.out:
        with open(args.out, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
