"""Benchmark: this project's gradient and leave-one-out importance against Captum.

On one trained run (a directory made by ``attn-study``) and the same instances, time
  - ``gradient_importance`` vs Captum ``InputXGradient`` (one attribute call per output class,
    |attribution summed over the embedding| summed over classes, attention detached), and
  - ``leave_one_out`` vs Captum ``FeatureAblation`` whose ablation *deletes* the token (the model
    is run on the shortened sequence; the attributed value is TVD to the original output), with each
    ``perturbations_per_eval`` given, reporting Captum's best,
check the values agree (max absolute difference ≤ --tolerance), and print the speed ratios.

    python benchmarks/importance.py --run outputs/runs/<run> --max-instances 500 --min-length 2
Captum is one of the dependencies (the faithfulness analysis uses it).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from attn_study import assemble
from attn_study.analysis.importance import gradient_importance, leave_one_out, predict
from attn_study.analysis.measures import tvd


def load_run(run: str):
    run = assemble.load(run, option="--run")
    return run.cfg, run.datamodule, run.model


def compact(ids: torch.Tensor, keep: torch.Tensor, mask: torch.Tensor):
    """Rows of ``ids`` with the tokens where ``keep`` < 0.5 deleted (order kept), and their lengths."""
    kept = (keep > 0.5) & mask
    order = torch.argsort((~kept).long() * ids.shape[1] + torch.arange(ids.shape[1]), dim=1, stable=True)
    lengths = kept.sum(1)
    new_mask = torch.arange(ids.shape[1])[None, :] < lengths[:, None]
    return ids.gather(1, order) * new_mask, lengths, new_mask


def captum_gradient(model, batch, num_classes):
    from captum.attr import InputXGradient

    def forward(emb, mask, lengths):
        enc = model.encode({"ids": None, "mask": mask, "lengths": lengths}, embedded=emb)
        return model.probabilities(model.decode(enc, model.attend(enc).detach()))

    emb = model.embed(batch).detach()
    explainer = InputXGradient(forward)
    total = torch.zeros(batch["mask"].shape)
    for c in range(num_classes):
        attr = explainer.attribute(emb, target=c, additional_forward_args=(batch["mask"], batch["lengths"]))
        total += attr.sum(-1).abs()
    return total * batch["mask"]


def captum_loo(model, batch, probs, perturbations_per_eval):
    from captum.attr import FeatureAblation

    def forward(keep, ids, mask, base_probs):
        new_ids, lengths, new_mask = compact(ids, keep, mask)
        out = model.probabilities(model({"ids": new_ids, "lengths": lengths, "mask": new_mask})[0])
        return -tvd(out, base_probs)  # FeatureAblation attributes f(x) − f(x ablated) = TVD

    mask, lengths = batch["mask"], batch["lengths"]
    positions = torch.arange(mask.shape[1])[None, :].expand_as(mask)
    feature_mask = torch.minimum(positions, (lengths - 1)[:, None])  # padding shares the last token's id
    keep = torch.ones(mask.shape)
    attr = FeatureAblation(forward).attribute(
        keep,
        baselines=0.0,
        additional_forward_args=(batch["ids"], mask, probs),
        feature_mask=feature_mask,
        perturbations_per_eval=perturbations_per_eval,
    )
    return attr * mask


def timed(fn, warm_up=None):
    """(value, seconds) of ``fn()``; ``warm_up()`` runs first, untimed (first-call allocations)."""
    if warm_up is not None:
        warm_up()
    started = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True)
    parser.add_argument("--split", default="test")
    parser.add_argument("--max-instances", type=int, default=500)
    parser.add_argument("--min-length", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--loo-chunk-size", type=int, default=512)
    parser.add_argument("--perturbations-per-eval", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--tolerance", type=float, default=1e-5)
    args = parser.parse_args()

    cfg, datamodule, model = load_run(args.run)
    data = datamodule.split(args.split)
    eligible = np.flatnonzero(data.lengths >= args.min_length)
    chosen = np.random.default_rng(0).permutation(eligible)[: args.max_instances]
    batches = list(datamodule.loader(args.split, batch_size=args.batch_size, indices=np.sort(chosen)))
    k = datamodule.num_classes
    result = {
        "run": args.run,
        "encoder": cfg.encoder.name,
        "dataset": cfg.dataset.name,
        "instances": len(chosen),
        "mean_length": float(data.lengths[chosen].mean()),
        "threads": torch.get_num_threads(),
    }

    first = batches[0]
    ours_g, t_ours_g = timed(
        lambda: [gradient_importance(model, b, normalise=False) for b in batches],
        lambda: gradient_importance(model, first),
    )
    theirs_g, t_captum_g = timed(
        lambda: [captum_gradient(model, b, k) for b in batches], lambda: captum_gradient(model, first, k)
    )
    result["grad_max_abs_diff"] = max(float((a - b.detach()).abs().max()) for a, b in zip(ours_g, theirs_g))
    result.update(grad_seconds_ours=t_ours_g, grad_seconds_captum=t_captum_g, grad_speedup=t_captum_g / t_ours_g)

    probs = [predict(model, b)[2] for b in batches]
    ours_l, t_ours_l = timed(
        lambda: [leave_one_out(model, b, p, chunk_size=args.loo_chunk_size) for b, p in zip(batches, probs)],
        lambda: leave_one_out(model, first, probs[0], chunk_size=args.loo_chunk_size),
    )
    best = None
    for ppe in args.perturbations_per_eval:
        theirs_l, seconds = timed(
            lambda: [captum_loo(model, b, p, ppe) for b, p in zip(batches, probs)],  # noqa: B023 (called at once)
            lambda: captum_loo(model, first, probs[0], ppe),  # noqa: B023
        )
        diff = max(float((a - b).abs().max()) for a, b in zip(ours_l, theirs_l))
        result[f"loo_seconds_captum_ppe{ppe}"] = seconds
        if best is None or seconds < best[1]:
            best = (ppe, seconds, diff)
    result.update(
        loo_seconds_ours=t_ours_l,
        loo_best_captum_ppe=best[0],
        loo_seconds_captum=best[1],
        loo_max_abs_diff=best[2],
        loo_speedup=best[1] / t_ours_l,
    )
    result["agree"] = result["grad_max_abs_diff"] <= args.tolerance and result["loo_max_abs_diff"] <= args.tolerance
    print(json.dumps(result, indent=2))
    if not result["agree"]:
        raise SystemExit(f"values differ by more than {args.tolerance}")


if __name__ == "__main__":
    main()
