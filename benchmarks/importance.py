"""Benchmark: this project's gradient and leave-one-out importance against Captum.

On one trained run (a directory made by ``attn-study``) and the same instances, time
  - ``gradient_importance`` vs Captum ``InputXGradient`` (attention detached, unnormalised), in each mode of
    the J&W option ``gradient_classes``: ``predicted`` — the predicted class's log-odds
    log(ŷ_c / (1 − ŷ_c)) as the target, |attribution summed over the embedding|; ``sum`` — one attribute
    call per class of ŷ, those summed over classes; and
  - ``leave_one_out`` vs Captum ``FeatureAblation`` whose ablation *deletes* the token (the model
    is run on the shortened sequence; the attributed value is TVD to the original output), with each
    ``perturbations_per_eval`` given, reporting Captum's best,
check the values agree (largest difference ≤ --tolerance: for gradients relative to the batch's largest
score, for leave-one-out's TVDs absolute), and print the speed ratios.

    python benchmarks/importance.py --run outputs/runs/<run> --max-instances 500 --min-length 2
Captum is one of the dependencies (the faithfulness analysis uses it).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from attn_study.analysis.importance import gradient_importance, leave_one_out, predict
from attn_study.job import plan
from attn_study.stats import tvd


def load_run(run: str):
    run = plan.load_run(run, option="--run")
    return run.cfg, run.datamodule, run.model


def compact(ids: torch.Tensor, keep: torch.Tensor, mask: torch.Tensor):
    """Rows of ``ids`` with the tokens where ``keep`` < 0.5 deleted (order kept), and their lengths."""
    kept = (keep > 0.5) & mask
    order = torch.argsort((~kept).long() * ids.shape[1] + torch.arange(ids.shape[1]), dim=1, stable=True)
    lengths = kept.sum(1)
    new_mask = torch.arange(ids.shape[1])[None, :] < lengths[:, None]
    return ids.gather(1, order) * new_mask, lengths, new_mask


def all_log_odds(logits: torch.Tensor) -> torch.Tensor:
    """ℓ (B, C), ℓ_c = z_c − log Σ_{k≠c} exp z_k for every class c (binary, one logit x: ℓ = (−x, x)), written
    here apart from attn_study's own (``attn_study.models.outputs.log_odds``) so the two are compared."""
    if logits.shape[-1] == 1:
        return torch.cat([-logits, logits], dim=-1)
    eye = torch.eye(logits.shape[-1], dtype=torch.bool, device=logits.device)
    others = logits[:, None, :].masked_fill(eye, float("-inf"))  # (B, c, k): every logit but the c-th
    return logits - torch.logsumexp(others, dim=-1)


def captum_gradient(model, batch, num_classes, classes: str = "predicted"):
    """|InputXGradient summed over the embedding| of the predicted class's log-odds (``classes='predicted'``),
    or of each class's probability summed over the classes (``'sum'``); attention detached."""
    from captum.attr import InputXGradient

    def forward(emb, mask, lengths):
        enc = model.encode({"ids": None, "mask": mask, "lengths": lengths}, embedded=emb)
        logits = model.decode(enc, model.attend(enc).detach())
        return all_log_odds(logits) if classes == "predicted" else model.probabilities(logits)

    emb = model.embed(batch).detach()
    explainer = InputXGradient(forward)
    extra = (batch["mask"], batch["lengths"])
    if classes == "predicted":
        with torch.no_grad():
            target = forward(emb, *extra).argmax(-1)  # the class of the largest log-odds is the predicted one
        total = explainer.attribute(emb, target=target, additional_forward_args=extra).sum(-1).abs()
    elif classes == "sum":
        total = torch.zeros(batch["mask"].shape)
        for c in range(num_classes):
            total += explainer.attribute(emb, target=c, additional_forward_args=extra).sum(-1).abs()
    else:
        raise ValueError(f"gradient classes={classes!r}: the benchmark knows {list(GRADIENT_CLASSES)}")
    return total.detach() * batch["mask"]


#: every mode of the J&W option ``gradient_classes``, each with its Captum reference above
GRADIENT_CLASSES = ("predicted", "sum")


def relative_difference(ours: list[torch.Tensor], theirs: list[torch.Tensor]) -> float:
    """max over batches of max |ours − theirs| / max |theirs| (the batch's largest score)."""
    return max(float((a - b).abs().max() / b.abs().max().clamp_min(1e-30)) for a, b in zip(ours, theirs))


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
    for classes in GRADIENT_CLASSES:
        ours_g, t_ours_g = timed(
            lambda: [gradient_importance(model, b, normalise=False, classes=classes) for b in batches],  # noqa: B023
            lambda: gradient_importance(model, first, normalise=False, classes=classes),  # noqa: B023
        )
        theirs_g, t_captum_g = timed(
            lambda: [captum_gradient(model, b, k, classes) for b in batches],  # noqa: B023
            lambda: captum_gradient(model, first, k, classes),  # noqa: B023
        )
        result.update(
            {
                f"grad_{classes}_max_abs_diff": max(float((a - b).abs().max()) for a, b in zip(ours_g, theirs_g)),
                f"grad_{classes}_max_rel_diff": relative_difference(ours_g, theirs_g),
                f"grad_{classes}_seconds_ours": t_ours_g,
                f"grad_{classes}_seconds_captum": t_captum_g,
                f"grad_{classes}_speedup": t_captum_g / t_ours_g,
            }
        )

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
    result["agree"] = result["loo_max_abs_diff"] <= args.tolerance and all(
        result[f"grad_{classes}_max_rel_diff"] <= args.tolerance for classes in GRADIENT_CLASSES
    )
    print(json.dumps(result, indent=2))
    if not result["agree"]:
        raise SystemExit(f"values differ by more than {args.tolerance}")


if __name__ == "__main__":
    main()
