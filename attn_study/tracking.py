"""What a team sees of a run in Weights & Biases (and its other loggers): the summary, the config (its name and tags:
``attn_study.names``), the code and numerics that made it.

- Final values — ``test/…``, the analyses' statistics, data sizes, seconds — go to the run *summary* (and
  ``summary.json``), never to one-point history charts (:func:`publish_summary`; the per-epoch *history* is the
  loggers' own: ``job/loggers.py``), with the few a team sorts by under ``headline/``.
- The *config* is the resolved config as the flat keys one filters and groups by, in their own types
  (:func:`logged_config`): no machine paths, no logger or cluster settings, ``sweep/name`` only in a sweep; beside it
  the code version and what rounds the floating point (:func:`run_metadata`).

Lightning is imported only where a logger is looked at, so reading a run (its status, its code) imports none of it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import subprocess
from importlib import metadata
from pathlib import Path

import numpy as np
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)

#: top-level settings that are not what one filters or groups runs by (where files go, loggers, resources)
NOT_LOGGED = frozenset({"sweep", "force", "resume", "threads", "paths", "logger", "cluster", "hydra", "run_name"})
#: a recipe's documentation (what it cannot reproduce, its whole table): its ``name`` and ``row`` are logged
RECIPE_DOCS = ("recipe/differs", "recipe/table")


# -- the config ---------------------------------------------------------------------------------------


def _without_machine_path(value):
    """An absolute or home path (``/data/aclImdb_v1.tar.gz``) → its last part; other values unchanged."""
    if isinstance(value, str) and (value.startswith(("/", "~")) or value[1:3] in (":\\", ":/")):
        return Path(value).name
    return value


def flatten(container: dict) -> dict:
    """``{'a': {'b': 1}}`` → ``{'a/b': 1}`` (lists and empty dicts stay leaves)."""
    out: dict = {}

    def walk(node, prefix):
        if isinstance(node, dict) and node:
            for k, v in node.items():
                walk(v, f"{prefix}{k}/")
        else:
            out[prefix.rstrip("/")] = node

    walk(container, "")
    return out


def logged_config(cfg: DictConfig, in_sweep: bool = False, **extra) -> dict:
    """The flat config a run records in W&B (and its other loggers): ``a/b/c → value`` in the value's own
    type (lists stay lists), without what does not describe the experiment — file locations, logger,
    cluster and run-control settings, ``_target_`` class paths, a recipe's documentation; a path kept as
    its last part (a dataset's archive, a base run's directory); ``sweep/name`` only in a sweep. ``extra``
    (already flat: ``data/labels``, ``code/commit``) is added."""
    container = OmegaConf.to_container(cfg, resolve=True)
    flat = flatten({k: v for k, v in container.items() if k not in NOT_LOGGED})
    if in_sweep and (container.get("sweep") or {}).get("name"):
        flat["sweep/name"] = container["sweep"]["name"]
    flat = {
        k: _without_machine_path(v)
        for k, v in flat.items()
        if not k.endswith("/_target_") and not k.endswith("cache_dir") and not k.startswith(RECIPE_DOCS)
    }
    return {**flat, **extra}


def in_multirun() -> bool:
    """Whether this process runs a job of a Hydra multirun (a sweep), under any launcher."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


@functools.lru_cache(maxsize=1)
def code_version() -> dict:
    """The code this process runs (:func:`describe_code` of the folder the package is imported from)."""
    return describe_code(Path(__file__).resolve().parents[1])


def numerics() -> dict:
    """What rounds the run's floating point: torch's ``version`` and the CPU vector instructions its kernels use
    (``cpu_capability``: ``AVX512``, ``AVX2``, …). A seed gives the same numbers again where these and the code
    are the same; across instruction sets sums round in another order (docs/runs.md)."""
    import torch

    return {"torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability()}


def describe_code(source: Path) -> dict:
    """attn_study's package ``version`` and git ``commit`` — of the checkout at ``source`` (``dirty``: it had
    uncommitted changes to tracked files), else the commit pip recorded when installing from git — or
    ``"unknown"`` where neither is known."""
    try:
        version = metadata.version("attn_study")
    except metadata.PackageNotFoundError:
        version = "unknown"
    commit, dirty = "unknown", None
    if (source / ".git").exists():
        try:
            git = ["git", "-C", str(source)]
            commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True)
            changes = subprocess.run(
                [*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=10
            )
            commit, dirty = commit.stdout.strip(), bool(changes.stdout.strip())
        except (OSError, subprocess.SubprocessError):
            commit = "unknown"
    if commit == "unknown":
        try:
            installed = json.loads(metadata.distribution("attn_study").read_text("direct_url.json") or "{}")
            commit = installed.get("vcs_info", {}).get("commit_id") or "unknown"
        except (metadata.PackageNotFoundError, ValueError):
            pass
    return {"version": version, "commit": commit, "dirty": dirty}


def run_metadata(labels: list[str]) -> dict:
    """What a run records besides its config: the class names (``data/labels``: class ``k`` of every
    ``class_<k>`` key is ``labels[k]``), the code version (``code/version``, ``code/commit``, ``code/dirty``) and what
    rounds its floating point (``numerics/torch``, ``numerics/cpu_capability``)."""
    recorded = {"code": code_version(), "numerics": numerics()}
    return {"data/labels": list(labels), **{f"{group}/{k}": v for group, d in recorded.items() for k, v in d.items()}}


#: the training's statistics in the headline (with the dev score the checkpoint was chosen by, ``val/…_best``)
TRAINING_HEADLINE = ("test/acc", "test/f1", "test/auroc")


def headline(summary: dict, keys: tuple[str, ...] = ()) -> dict:
    """The few final values a team sorts runs by, copied under ``headline/`` (W&B's runs table has them side by side
    in one section, of the ~700 keys of a run): test accuracy, F1 and AUROC, the best dev score, and ``keys`` (the
    families' headline statistics, given by who logs them) — those ``summary`` has, as numbers."""
    chosen = [*TRAINING_HEADLINE, *(k for k in summary if k.startswith("val/") and k.endswith("_best")), *keys]
    return {
        f"headline/{k}": summary[k]
        for k in chosen
        if isinstance(summary.get(k), (int, float)) and not isinstance(summary.get(k), bool)
    }


def final_values(logger, summary: dict, step: int, headline_keys: tuple[str, ...] = ()) -> None:
    """Final values to one logger: W&B's run summary, the :func:`headline` (with ``headline_keys``) too; nothing to a
    ``CSVLogger`` (its ``metrics.csv`` is the per-epoch history, ``summary.json`` beside it holds these); any other
    logger, having no summary, gets them once at ``step`` (the final global step)."""
    from lightning.pytorch.loggers import CSVLogger, WandbLogger

    if isinstance(logger, WandbLogger):
        logger.experiment.summary.update({**summary, **headline(summary, headline_keys)})
    elif not isinstance(logger, CSVLogger):
        logger.log_metrics(summary, step=step)


def publish_summary(loggers, summary: dict, step: int, headline_keys: tuple[str, ...] = ()) -> None:
    """:func:`final_values` to each logger; one that fails says so in one line (:func:`reported`)."""
    for lg in loggers:
        with reported(logger_name(lg), "the summary"):
            final_values(lg, summary, step, headline_keys)


def finish(loggers, stopped_by: str | None = None, code: int | None = None) -> None:
    """Each logger finalised and the W&B run ended (its offline files complete), each failure one line
    (:func:`reported`). ``stopped_by`` a signal's name: finalised as failed, the W&B run ended with
    ``run/stopped_by`` in its summary and exit status ``code`` (128 + the signal's number: W&B then shows it failed,
    never still running)."""
    import sys

    moment = "the end of the run" if stopped_by is None else "the stop"
    for lg in loggers:
        with reported(logger_name(lg), moment):
            lg.finalize("success" if stopped_by is None else "failed")
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        with reported("W&B", moment):
            if stopped_by is not None:
                wandb.run.summary["run/stopped_by"] = stopped_by
            wandb.finish(exit_code=code)


def logger_name(logger) -> str:
    """What a person calls the logger: ``W&B``, ``CSV``, else its class."""
    from lightning.pytorch.loggers import CSVLogger, WandbLogger

    if isinstance(logger, WandbLogger):
        return "W&B"
    return "CSV" if isinstance(logger, CSVLogger) else type(logger).__name__


@contextlib.contextmanager
def reported(logger: str, what: str):
    """A failure of ``logger`` (its name) while it is given ``what`` becomes one error line, never the run's
    failure: what a logger is given is on disk already (``summary.json``, ``analysis/<family>/``)."""
    try:
        yield
    except Exception as err:  # a logger's bug or a full quota must not undo finished results
        first = f"{type(err).__name__}: {err}".splitlines()[0]
        log.error("%s: %s not logged (%s); the results on disk are complete", logger, what, first)


def histogram_counts(values: np.ndarray, bins: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """(counts, edges) of the finite ``values`` in ``bins`` equal bins over their range, as ``np.histogram``; values
    that differ by rounding only (a spread under 1e-12 of their magnitude: τ's equal to 2e-16, which numpy cannot cut
    into 64 bins) as one bin of width 2e-6 × their magnitude (at least 2e-6) around their middle."""
    values = np.asarray(values, dtype=float)
    low, high = float(values.min()), float(values.max())
    scale = max(abs(low), abs(high))
    if high - low > 1e-12 * scale:
        return np.histogram(values, bins=bins)
    middle, half = (low + high) / 2, 1e-6 * max(scale, 1.0)
    return np.array([len(values)]), np.array([middle - half, middle + half])


def histogram(values: np.ndarray):
    """A ``wandb.Histogram`` of the finite ``values`` (:func:`histogram_counts`)."""
    import wandb

    return wandb.Histogram(np_histogram=histogram_counts(values))
