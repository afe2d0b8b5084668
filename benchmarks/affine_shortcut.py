"""Benchmark: every sub-test that decodes many attentions, through the projected states U_t = W h_t (the
affine shortcut, the default) and by pooling each attention (``general_decoding``), on one trained run.

Sub-tests: Jain & Wallace's permutations and adversarial search, Serrano & Smith's single- and
multi-weight erasures, Meister et al.'s intermediate leave-one-out (flat models). For each, both ways
run on the same instances with the same seeds; the script prints their seconds, the ratio and the
largest difference between the two per-instance frames (the shortcut is exact up to rounding).

    python benchmarks/affine_shortcut.py --run outputs/runs/<run> [--max-instances 1000] [--device cuda]
        [--subtests "ss single,ss multi"]
Time it alone: other torch processes on the same cores distort it.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import numpy as np
import pandas as pd
import torch

from attn_study.analysis.callback import AnalysisCallback, analysis_mode
from attn_study.analysis.protocol import staged_model
from attn_study.families.jain_wallace.callback import JainWallace
from attn_study.families.serrano_smith.callback import SerranoSmith
from attn_study.families.sparsity.callback import Sparsity
from attn_study.job.plan import load_run
from attn_study.models.classifier import general_decoding


def max_difference(a: pd.DataFrame, b: pd.DataFrame) -> float:
    numeric = [c for c in a.columns if pd.api.types.is_numeric_dtype(a[c])]
    diff = np.abs(a[numeric].to_numpy(float) - b[numeric].to_numpy(float))
    return float(np.nanmax(diff)) if diff.size else 0.0


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="a run directory made by attn-study")
    parser.add_argument("--max-instances", type=int, default=None, help="test instances (default: all)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--subtests", default=None, help="comma-separated labels to run, e.g. 'ss single,ss multi' (default: all)"
    )
    args = parser.parse_args(argv)
    run = load_run(args.run, option="--run")
    model = staged_model(run.module).to(args.device)
    data = run.datamodule
    indices = AnalysisCallback.instances(data, "test", args.max_instances, 0)
    subtests = [
        ("jw permutation", JainWallace(seed=0), ["permutation"]),
        ("jw adversarial", JainWallace(seed=0), ["adversarial"]),
        ("ss single", SerranoSmith(seed=0), ["single"]),
        ("ss multi", SerranoSmith(seed=0), ["multi"]),
    ]
    if getattr(model, "token_attention", True):
        subtests.append(("sp intermediate", Sparsity(seed=0), ["intermediate"]))
    if args.subtests:
        wanted = {label.strip() for label in args.subtests.split(",")}
        subtests = [s for s in subtests if s[0] in wanted]
    print(f"{args.run}: {len(indices)} test instances, {type(model).__name__} on {args.device}")
    print(f"{'sub-test':18s} {'general s':>10s} {'shortcut s':>11s} {'ratio':>7s} {'max |diff|':>11s}")
    totals = [0.0, 0.0]
    for label, family, tests in subtests:
        frames, seconds = [], []
        for general in (True, False):
            with analysis_mode(model), general_decoding() if general else contextlib.nullcontext():
                started = time.perf_counter()
                frames.append(family.measure(model, data, "test", indices, tests).frame)
                if args.device.startswith("cuda"):
                    torch.cuda.synchronize()
                seconds.append(time.perf_counter() - started)
        totals = [t + s for t, s in zip(totals, seconds)]
        print(
            f"{label:18s} {seconds[0]:10.2f} {seconds[1]:11.2f} {seconds[0] / seconds[1]:6.1f}× "
            f"{max_difference(*frames):11.2e}"
        )
    print(f"{'all':18s} {totals[0]:10.2f} {totals[1]:11.2f} {totals[0] / totals[1]:6.1f}×")


if __name__ == "__main__":
    main()
