"""A ROAR run's data: its source run found and checked, its masks computed once (``<run>/roar/masks.json``)
and applied to every split before the model is built.

- ``roar.fraction=0``: nothing is masked (the unmasked model a chain starts from).
- ``roar.recursive=false`` (Hooker et al.): the source must be unmasked; its model scores every instance.
- ``roar.recursive=true`` (Madsen et al.): the source is the previous step (a ROAR run at a smaller fraction,
  or the unmasked run); this run keeps the source's masks and masks more by the source model's importance.
- ``roar.source=null``: a sweep job's source is the job of the same sweep (its ``sweep.json``) whose overrides
  are this job's but ``roar.fraction`` — 0 (ROAR), or the one at k − ``roar.step`` (recursive; with
  ``roar.step=null``, the largest fraction below this one).
- ``roar.label``, ``roar.gradient`` (``scores.py``) and ``roar.rounding`` (``masking.py``): the conventions that
  change which tokens are masked; ``roar=recursive`` defaults to Madsen et al.'s.

The masks are a function of the source's model, the method and the seed: a relaunch reuses the file while the
source is the same finished run (its path and finishing time), and a finished ROAR run is read back from it.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import numpy as np
import torch
import yaml
from omegaconf import DictConfig

from attn_study import layout
from attn_study.data.example import SPLITS
from attn_study.errors import UserError
from attn_study.io import atomic_open, read_json
from attn_study.job import saved, state
from attn_study.roar import masking, scores
from attn_study.sweep.naming import SWEEP_RECORD, changes_results, override_key

log = logging.getLogger(__name__)

FOLDER, MASKS = "roar", "masks.json"  # <run>/roar/masks.json
#: scores that need no importance method: the data's known rationale (1 on its tokens, 0 elsewhere)
TRUTH = "truth"


def masks_file(run_dir: str | Path) -> Path:
    return Path(run_dir) / FOLDER / MASKS


def methods() -> list[str]:
    from attn_study.analysis.importance import METHODS

    return [*METHODS, TRUTH]


def prepare(cfg: DictConfig, datamodule, run_dir: str | Path, other_runs) -> dict | None:
    """Mask ``datamodule``'s data (set up) as ``cfg.roar`` says; returns what it was masked by (``status.json``'s
    ``roar``, with each split's masked share), or None for a run without ``roar``. Refused in one line, before any
    training, when the source is missing, incomplete, masked other than this step needs, or trained on other data.
    ``other_runs`` is how the job stands on another run (the plan's ``attn_study.job.plan.OtherRuns``: resolve, require
    complete, load)."""
    roar = cfg.get("roar")
    if not roar:
        return None
    method, fraction = str(roar.method), float(roar.fraction)
    if method not in methods():
        raise UserError(f"roar.method={method}: no such importance method; choose from {methods()}")
    chosen = check_conventions(roar)
    described = {
        "method": method,
        "fraction": fraction,
        "recursive": bool(roar.recursive),
        "token": str(roar.token),
        **chosen,
    }
    if fraction == 0:
        return {**described, "source": None, "masked_share": dict.fromkeys(SPLITS, 0.0)}
    data = datamodule.data
    masking.check_token_unused(data, str(roar.token))
    path = masks_file(run_dir)
    stored = read_json(path) if path.is_file() else None
    if state.is_complete(run_dir):  # read back (a finished run analysed again, or the source of the next step)
        if stored is None:
            raise UserError(f"{run_dir}: a finished ROAR run without {FOLDER}/{MASKS}; train it again (force=true)")
    else:
        source = resolve_source(cfg, run_dir)
        wait_for(source, float((cfg.get("sweep") or {}).get("wait_min") or 0))
        other_runs.directory("roar.source", source)  # complete (or force=true)
        settings = _settings(cfg, source)
        if stored is None or stored.get("settings") != settings:
            stored = compute(cfg, datamodule, run_dir, source, settings, other_runs)
            with atomic_open(path) as handle:
                json.dump(stored, handle, separators=(",", ":"))
        else:
            log.info("roar: masks of %s reused (same source, method and seed)", path)
    masks = _masks_by_position(stored, data, path)
    masking.apply(data, masks, str(roar.token))
    share = masking.shares(data, masks)
    log.info("roar: %s at k=%g masked %s", method, fraction, ", ".join(f"{s} {v:.1%}" for s, v in share.items()))
    settings = stored["settings"]
    return {
        **described,
        "source": settings["source"],
        "source_fraction": settings["source_fraction"],
        "masked_share": share,
        "scoring_seconds": stored.get("seconds"),  # the source model's pass over every split (when first computed)
    }


def conventions(roar) -> dict:
    """``roar``'s conventions (``conf/roar/``), with the values a config written before they existed meant."""
    step = roar.get("step")
    return {
        "label": str(roar.get("label") or "predicted"),
        "gradient": str(roar.get("gradient") or "jain_wallace"),
        "rounding": str(roar.get("rounding") or "half_up"),
        "step": None if step is None else float(step),
    }


def check_conventions(roar) -> dict:
    """:func:`conventions`, each refused in one line unless it is one of its choices; ``roar.step`` only for
    recursive ROAR, and ``roar.fraction`` a whole number of steps."""
    out = conventions(roar)
    for name, allowed in (
        ("label", scores.LABELS),
        ("gradient", scores.GRADIENTS),
        ("rounding", masking.ROUNDINGS),
    ):
        if out[name] not in allowed:
            raise UserError(f"roar.{name}={out[name]}: choose from {list(allowed)}")
    step, fraction = out["step"], float(roar.fraction)
    if step is not None:
        if not roar.recursive:
            raise UserError(f"roar.step={step:g}: a step is recursive ROAR's (roar=recursive); leave it null for ROAR")
        if not 0 < step <= 1:
            raise UserError(f"roar.step={step:g}: give a share in (0, 1], or null (any smaller fraction)")
        if abs(fraction / step - round(fraction / step)) > 1e-6:
            raise UserError(
                f"roar.fraction={fraction:g} is not a whole number of roar.step={step:g} steps (recursive ROAR steps "
                f"{step:g}, {2 * step:g}, ...); choose such a fraction, or set roar.step=null"
            )
    return out


def summary_keys(described: dict | None) -> dict:
    """The run's ``summary.json`` keys of its masking: ``data/masked_share/<split>``."""
    if not described:
        return {}
    return {f"data/masked_share/{split}": float(v) for split, v in described["masked_share"].items()}


def _settings(cfg: DictConfig, source: Path) -> dict:
    """What the masks are a function of: the method, fraction, seed, importance options and the source run."""
    roar = cfg.roar
    status = state.read_status(source)
    source_cfg = saved.run_config(source)
    source_roar = source_cfg.get("roar") or {}
    chosen = conventions(roar)
    return {
        "method": str(roar.method),
        "fraction": float(roar.fraction),
        "recursive": bool(roar.recursive),
        "token": str(roar.token),
        "label": chosen["label"],
        "gradient": chosen["gradient"],
        "rounding": chosen["rounding"],
        "ig_steps": int(roar.ig_steps),
        "seed": int(cfg.seed),
        "source": str(source.resolve()),
        "source_finished": status.get("finished"),
        "source_fraction": float(source_roar.get("fraction") or 0) if source_roar else 0.0,
    }


def _masks_by_position(stored: dict, data, path: Path) -> dict[str, list]:
    """``stored``'s masks per split, checked to be for these instances (by uid, in order)."""
    out = {}
    for split in SPLITS:
        entry = stored["splits"][split]
        if list(entry["uids"]) != list(data.splits[split].uids):
            raise UserError(f"{path}: its {split} instances are not this run's; train it again (force=true)")
        out[split] = [np.asarray(p, dtype=np.int64) for p in entry["positions"]]
    return out


def resolve_source(cfg: DictConfig, run_dir: str | Path) -> Path:
    """``roar.source`` as a run directory; null: the predecessor job of this job's sweep (module docstring)."""
    roar = cfg.roar
    if roar.get("source"):
        return Path(str(roar.source)).expanduser().resolve()
    run_dir = Path(run_dir)
    overrides_file, record = layout.overrides_file(run_dir), run_dir.parent / SWEEP_RECORD
    if not overrides_file.is_file() or not record.is_file():
        raise UserError(
            "roar.source is not set: give the run directory whose model scores the tokens, or run the job in a "
            "sweep beside its predecessor (sweep=roar)"
        )
    mine = _keyed(yaml.safe_load(overrides_file.read_text()) or [])
    fraction = float(roar.fraction)
    mine.pop("roar.fraction", None)
    steps = {}
    for name, overrides in (read_json(record).get("jobs") or {}).items():
        theirs = _keyed(overrides)
        other = theirs.pop("roar.fraction", None)
        if other is not None and theirs == mine:
            steps[float(other)] = name
    step = conventions(roar)["step"]
    if not roar.recursive:
        wanted, says = 0.0, "zero roar.fraction"
    elif step is not None:  # the job one step below, matched to float precision (0.3 − 0.1 is 0.19999999999999998)
        wanted = next((f for f in steps if abs(f - (fraction - step)) < 1e-9), round(fraction - step, 9))
        says = f"roar.fraction={wanted:g} (one roar.step={step:g} below this job's {fraction:g})"
    else:
        below = [f for f in steps if f < fraction]
        wanted, says = (max(below) if below else None), "a smaller roar.fraction"
    if wanted not in steps:
        raise UserError(
            f"roar.source is not set and this sweep has no job with {says} and otherwise this job's overrides: add "
            "that roar.fraction to the sweep, or give roar.source"
        )
    return run_dir.parent / steps[wanted]


def _keyed(overrides) -> dict[str, str]:
    """A job's overrides that change results, as key → value."""
    return {override_key(o): o.split("=", 1)[1] for o in overrides if "=" in o and changes_results(o)}


def wait_for(source: Path, minutes: float) -> None:
    """Wait (up to ``minutes``) while ``source`` is not complete and has not failed since the wait began: a
    sweep's predecessor job still queued or running under a parallel launcher or SLURM."""
    if minutes <= 0:
        return
    began, deadline, said = time.time(), time.time() + 60 * minutes, False
    while time.time() < deadline:
        status = state.read_status(source)
        if state.is_complete(source, status):
            return
        if status.get("state") in ("failed", "unreadable") and status.get("finished", began) >= began:
            return
        if not said:
            log.info("roar: waiting up to %g min for its source %s (state: %s)", minutes, source, status.get("state"))
            said = True
        time.sleep(max(min(5.0, deadline - time.time()), 0.0))


def compute(cfg: DictConfig, datamodule, run_dir, source: Path, settings: dict, other_runs) -> dict:
    """The masks file's content: the source's masks (recursive) and this step's, per split, by uid."""
    from attn_study.models.selector import soft_token_attention

    roar, token = cfg.roar, str(cfg.roar.token)
    loaded = other_runs.load("roar.source", source)  # its data is checked below, once this run's is masked as its
    if not soft_token_attention(loaded.model):
        raise UserError(f"roar.source={source}: {type(loaded.model).__name__} does not score tokens; use model=flat")
    before = settings["source_fraction"]
    if not roar.recursive and before > 0:
        raise UserError(
            f"roar.source={source} is itself masked (roar.fraction={before:g}); ROAR scores with the unmasked model: "
            "give the unmasked run, or set roar=recursive"
        )
    if roar.recursive and before >= float(roar.fraction):
        raise UserError(
            f"roar.source={source} is masked at roar.fraction={before:g}, not below this step's "
            f"{float(roar.fraction):g}; give the previous step's run"
        )
    step = conventions(roar)["step"]
    if roar.recursive and step is not None and abs(before - (float(roar.fraction) - step)) > 1e-9:
        raise UserError(
            f"roar.source={source} is masked at roar.fraction={before:g}, and with roar.step={step:g} this step's "
            f"source is the run at {float(roar.fraction) - step:g}; give that run, or set roar.step=null"
        )
    data = datamodule.data
    earlier = (
        _masks_by_position(read_json(masks_file(source)), data, masks_file(source))
        if before > 0
        else {s: [np.zeros(0, dtype=np.int64)] * len(data.splits[s]) for s in SPLITS}
    )
    if before > 0 and str((loaded.cfg.get("roar") or {}).get("token")) != token:
        raise UserError(f"roar.source={source} masks with another roar.token; use the same token")
    masking.apply(data, earlier, token)  # this run's data starts as the source's
    saved.check_same_data(loaded, datamodule, "roar.source", this_run=run_dir)
    started = time.time()
    new = score_and_choose(loaded, cfg, settings, data)
    log.info("roar: %s scored every split with %s in %.0f s", source, settings["method"], time.time() - started)
    splits = {
        split: {
            "uids": list(data.splits[split].uids),
            "positions": [sorted({*map(int, a), *map(int, b)}) for a, b in zip(earlier[split], new[split])],
        }
        for split in SPLITS
    }
    return {"settings": settings, "splits": splits, "seconds": time.time() - started}


def _device(cfg: DictConfig) -> torch.device:
    accelerator = str((cfg.get("trainer") or {}).get("accelerator", "auto"))
    return torch.device("cuda" if accelerator != "cpu" and torch.cuda.is_available() else "cpu")


def score_and_choose(loaded, cfg: DictConfig, settings: dict, data) -> dict[str, list]:
    """Per split, the positions this step masks in each instance (``masking.choose``), scored by the source's
    model on the source's data (the same as this run's, masked as the source was), for the class and with the
    gradient ``settings`` name (``scores.scores``)."""
    from attn_study.analysis.importance import ImportanceOptions, token_mask

    roar = cfg.roar
    method, fraction, seed = settings["method"], settings["fraction"], settings["seed"]
    device = _device(cfg)
    model = loaded.model.to(device).eval()
    token_id = data.vocab.stoi.get(settings["token"], -1)
    out = {}
    for split_no, split in enumerate(SPLITS):
        rows = data.splits[split]
        if method == TRUTH and rows.rationales is None:
            raise UserError(f"roar.method={TRUTH}: dataset {data.name} has no known rationales; choose another method")
        options = ImportanceOptions(
            chunk_size=int(roar.chunk_size), ig_steps=int(roar.ig_steps), seed=seed * len(SPLITS) + split_no
        )
        chosen: list = [None] * len(rows)
        for batch in loaded.datamodule.loader(split, batch_size=int(roar.batch_size)):
            batch = {k: v.to(device) for k, v in batch.items()}
            if method == TRUTH:
                values = batch["rationale"].double()
            else:
                values = scores.scores(method, model, batch, settings["label"], settings["gradient"], options)
            text = token_mask(batch)
            eligible = (text & (batch["ids"] != token_id)).cpu().numpy()
            values, text = values.detach().double().cpu().numpy(), text.cpu().numpy()
            for r, (index, length) in enumerate(zip(batch["index"].tolist(), batch["lengths"].tolist())):
                chosen[index] = masking.choose(
                    values[r, :length],
                    eligible[r, :length],
                    int(text[r, :length].sum() - eligible[r, :length].sum()),
                    int(text[r, :length].sum()),
                    fraction,
                    masking.tie_keys(seed, split, index, length),
                    settings["rounding"],
                )
        out[split] = chosen
    return out
