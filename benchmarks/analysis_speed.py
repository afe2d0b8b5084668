"""Benchmark: the faithfulness and Jain & Wallace analyses of one trained run — seconds per sub-test, the work
they do, and their values against a saved reference.

The analyses are configured exactly as ``attn-study-analyze ckpt_path=<run> analysis=[<family>]`` configures
them (the run's own settings, e.g. a recipe's, and the family's defaults), and measured on the test split:

    python benchmarks/analysis_speed.py --run <run dir> [--families faithfulness,jain_wallace]
        [--double] [--max-instances N] [--save DIR] [--compare DIR] [--count]

- prints each family's ``<ns>/seconds/*`` and their sum, and the process's CPU seconds (with ``--threads 1`` a
  measure that a busy machine distorts less than wall time);
- ``--save DIR`` writes each family's per-instance frame and summary (``DIR/<family>.parquet``, ``.json``);
  ``--compare DIR`` prints the largest absolute difference of every numeric column and summary value from
  them (seconds excluded), the worst first — run with ``--save`` before a change, ``--compare`` after;
- ``--double`` analyses the model in float64 (the equality checks' mode: what differs is the code, not
  float32 rounding);
- ``--count`` counts the work — encoder passes and the sequences and tokens (real, and with padding) they ran
  on, backward passes, decode calls — per importance method and sub-test (in an extra, uncounted-time run);
- ``--profile N`` prints cProfile's N most expensive functions per family.

Time it alone on a quiet machine: other torch processes on the same cores distort it.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import importlib
import io
import json
import math
import pstats
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from attn_study.analysis import importance

FAMILIES = ("faithfulness", "jain_wallace")  # the default of --families; any family of the registry can be named


def analysis_for(run_dir: Path, family: str):
    """The family's callback as ``attn-study-analyze ckpt_path=<run> analysis=[<family>]`` builds it."""
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from attn_study.cli import CONFIG_DIR
    from attn_study.job.analyze import analysis_config

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("analyze", overrides=[f"ckpt_path='{run_dir}'", f"analysis=[{family}]"])
    return instantiate(analysis_config(cfg, run_dir).analysis[family])


#: the functions whose work is counted apart: {family: (callback module, [(function name, label)])}; a label of
#: None takes the first argument (the faithfulness method's name)
LABELLED = {
    "faithfulness": (
        "attn_study.families.faithfulness.callback",
        [("importance", None), ("removal_curves", "removal")],
    ),
    "jain_wallace": (
        "attn_study.families.jain_wallace.callback",
        [
            ("predict", "predict"),
            ("gradient_importance", "gradient"),
            ("leave_one_out", "leave-one-out"),
            ("permutation_tvd", "permutation"),
            ("adversarial_attention", "adversarial"),
        ],
    ),
}


class Counter:
    """Counts, per labelled function (``LABELLED``), the encoder passes and the sequences and tokens (real,
    and with padding) they ran on, backward passes, and decode_many calls and the attentions they decoded."""

    def __init__(self, model, family: str):
        self.model, self.family = model, family
        self.counts: dict = defaultdict(lambda: defaultdict(int))
        self.label, self.undo = "other", []

    def count(self, name: str, amount: int = 1) -> None:
        self.counts[self.label][name] += amount

    def _patch(self, owner, name, replacement) -> None:
        original = getattr(owner, name)
        self.undo.append((owner, name, original, name in vars(owner)))
        setattr(owner, name, replacement(original))

    def __enter__(self):
        def on_encoder(module, args, output):
            mask = args[1]
            self.count("encoder passes")
            self.count("sequences encoded", int(mask.shape[0]))
            self.count("tokens encoded", int(mask.sum()))
            self.count("tokens with padding", int(mask.numel()))

        self.hook = self.model.encoder.register_forward_hook(on_encoder)

        def decode_many(original):
            def wrapped(enc, alphas):
                self.count("decode_many calls")
                self.count("attentions decoded", int(alphas.shape[0] * alphas.shape[1]))
                return original(enc, alphas)

            return wrapped

        def backward(original):
            def wrapped(*args, **kwargs):
                self.count("backward passes")
                return original(*args, **kwargs)

            return wrapped

        def direction(original):  # leave-one-out's one-direction re-runs of a recurrent encoder
            def wrapped(rnn, reverse, inputs, state=None, layer=0):
                self.count("one-direction runs")
                self.count("tokens run in one direction", int(inputs.shape[0] * inputs.shape[1]))
                return original(rnn, reverse, inputs, state, layer)

            return wrapped

        self._patch(importance, "run_direction", direction)
        self._patch(self.model, "decode_many", decode_many)
        self._patch(torch.autograd, "grad", backward)
        self._patch(torch.Tensor, "backward", backward)
        module, functions = LABELLED.get(self.family, (None, []))
        module = importlib.import_module(module) if module else None
        for name, label in functions:

            def labelled(original, label=label):
                def wrapped(*args, **kwargs):
                    outer, self.label = self.label, label or args[0]
                    try:
                        return original(*args, **kwargs)
                    finally:
                        self.label = outer

                return wrapped

            self._patch(module, name, labelled)
        return self

    def __exit__(self, *exc):
        self.hook.remove()
        for owner, name, original, own in reversed(self.undo):
            if own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)


def largest_differences(frame: pd.DataFrame, summary: dict, reference: Path, family: str) -> list[tuple[str, float]]:
    """(column or key, max |difference|) against the saved reference, the largest first; NaN where one side is
    NaN and the other is not (or the shapes differ)."""
    ref_frame = pd.read_parquet(reference / f"{family}.parquet")
    ref_summary = json.loads((reference / f"{family}.json").read_text())
    out = []
    for column in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[column]) or column not in ref_frame:
            continue
        a, b = frame[column].to_numpy(float), ref_frame[column].to_numpy(float)
        both_nan = np.isnan(a) & np.isnan(b)
        diff = np.where(both_nan, 0.0, np.abs(a - b))
        out.append((column, float(np.max(diff)) if len(diff) else 0.0))
    for key, value in summary.items():
        if "/seconds/" in key or not isinstance(value, (int, float)) or key not in ref_summary:
            continue
        other = ref_summary[key]
        other = float("nan") if other is None else float(other)
        same_nan = math.isnan(float(value)) and math.isnan(other)
        out.append((key, 0.0 if same_nan else abs(float(value) - other)))
    missing = sorted(set(ref_frame.columns) - set(frame.columns)) + sorted(set(ref_summary) - set(summary))
    out += [(name, float("nan")) for name in missing if "/seconds/" not in name]
    return sorted(out, key=lambda kv: -np.inf if kv[1] == 0 else (np.inf if math.isnan(kv[1]) else kv[1]))[::-1]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="a run directory made by attn-study")
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--max-instances", type=int, default=None, help="test instances (default: all)")
    parser.add_argument("--double", action="store_true", help="analyse in float64")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--save", type=Path, default=None, help="write the frames and summaries here")
    parser.add_argument("--compare", type=Path, default=None, help="compare with the frames and summaries here")
    parser.add_argument("--count", action="store_true", help="count encoder passes, tokens, backward passes")
    parser.add_argument("--profile", type=int, default=0, help="print cProfile's N most expensive functions")
    args = parser.parse_args(argv)
    from attn_study.analysis.measuring import analysis_mode
    from attn_study.analysis.protocol import staged_model
    from attn_study.job.plan import load_run

    if args.threads:
        torch.set_num_threads(args.threads)
    run = load_run(args.run, option="--run")
    model = staged_model(run.module).to(args.device)
    if args.double:
        model.double()
    data = run.datamodule
    print(f"{args.run}: {type(model).__name__}, {'float64' if args.double else 'float32'} on {args.device}")
    for family in args.families.split(","):
        analysis = analysis_for(Path(args.run), family)
        if args.max_instances is not None:
            analysis.max_instances = args.max_instances
        indices = analysis.instances(data, analysis.split, analysis.max_instances, analysis.subsample_seed)
        profiler = cProfile.Profile() if args.profile else None
        counts = {}
        with analysis_mode(model):
            if args.count:
                with Counter(model, family) as counter:
                    analysis.measure(model, data, analysis.split, indices, analysis.tests)
                counts = counter.counts
            started, cpu = time.perf_counter(), time.process_time()
            with profiler if profiler else contextlib.nullcontext():
                measured = analysis.measure(model, data, analysis.split, indices, analysis.tests)
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        summary = analysis.summarise(measured, analysis.tests)
        seconds = {k: v for k, v in summary.items() if "/seconds/" in k}
        print(f"\n{family}: {len(indices)} instances, {wall:.1f} s wall, {cpu:.1f} s CPU (all threads)")
        for key, value in seconds.items():
            print(f"  {key:45s} {value:8.2f}")
        print(f"  {'sum':45s} {sum(seconds.values()):8.2f}")
        for label, work in counts.items():
            print(f"  work of {label}: " + ", ".join(f"{k} {v}" for k, v in work.items()))
        if profiler:
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(args.profile)
            print(text.getvalue())
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            measured.frame.to_parquet(args.save / f"{family}.parquet")
            (args.save / f"{family}.json").write_text(json.dumps(summary, indent=1, default=float))
        if args.compare:
            diffs = largest_differences(measured.frame, summary, args.compare, family)
            worst = max((d for _, d in diffs if not math.isnan(d)), default=0.0)
            print(f"  max |difference| from {args.compare}: {worst:.3e}")
            for name, d in diffs[:8]:
                print(f"    {name:55s} {d:.3e}")


if __name__ == "__main__":
    main()
