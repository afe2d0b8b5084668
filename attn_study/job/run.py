"""One run's lifecycle: checked, then skipped (complete), resumed (killed), refused (unknown state, another
configuration's results) or attempted (``training.train_and_test``: train, select on dev, test the best checkpoint
with the analyses as callbacks of that test, write ``summary.json``), its state recorded throughout.

Run directory contract (docs/architecture.md): ``.hydra/`` (written by Hydra), ``status.json`` (the
state: running / complete / failed, see ``attn_study.job.state``), ``summary.json``,
``checkpoints/``, ``csv/metrics.csv``, ``wandb/`` (offline run), ``analysis/<family>/``,
``error.txt`` on failure.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import time
from pathlib import Path

from omegaconf import DictConfig

from attn_study import layout
from attn_study.config import config_differences
from attn_study.errors import UserError
from attn_study.io import read_json
from attn_study.job import state, stopping
from attn_study.job.checks import ensure_writable, out_of_space, unread_settings
from attn_study.job.plan import check_plan

log = logging.getLogger(__name__)


def _canonical(ident: dict) -> str:
    return json.dumps(ident, sort_keys=True, default=str)


def run(
    cfg: DictConfig, run_dir: str | Path, keep_going: bool = False, overrides: list[str] | None = None, hydra=None
) -> dict | None:
    """One job with its state in ``run_dir``: the way both ``attn-study`` and every sweep job run.

    - the config is checked first, once (``check_plan``: the plan the attempt builds and trains), and that
      ``run_dir`` can be written; any refusal changes nothing in ``run_dir``;
    - the attempt holds the run's claim (``state.claim``: the OS's lock) from before it reads the status until it
      ends; a job another process holds is left to it (refused), so two launches never run one job;
    - complete already with the same config identity → skipped (its summary returned) unless
      ``force=true``; complete with a *different* identity → refused, the results are left alone; a
      directory holding results but no readable status (unknown) → refused, nothing deleted;
    - an earlier attempt that was killed (state ``running``, its process gone) with the same identity and a
      ``checkpoints/last.ckpt`` → training resumes from it (``resume=true``, the default: SLURM requeues
      after a timeout land here); any other unfinished attempt's outputs are removed first;
    - the run's record of its config (``.hydra/``: ``overrides`` and ``hydra`` from the CLI) is written only
      once the attempt goes ahead, so a refused relaunch never relabels the results;
    - an exception → ``failed`` with the traceback in ``error.txt``; re-raised, unless ``keep_going``
      (sweeps), where it is logged in one line and ``None`` returned so the other jobs go on;
    - SIGTERM / SIGINT (``attn_study.job.stopping``) → ``interrupted`` noted in ``status.json``, the state left
      ``running`` so that the next launch resumes it.
    """
    run_dir = Path(run_dir)
    elsewhere = "hydra.sweep.dir" if keep_going else "hydra.run.dir"
    try:
        plan = check_plan(cfg)  # the config, once: refused here, before any state changes
    except UserError as err:
        return _refuse(str(err), keep_going)
    for line in unread_settings(cfg, overrides):
        log.warning(line)
    ident = json.loads(_canonical(state.identity(cfg)))
    force = bool(cfg.get("force"))
    previous = state.read_status(run_dir)
    if state.is_complete(run_dir, previous) and not force:  # skipped even where the directory is read-only
        return _complete_already(run_dir, previous, ident, keep_going, elsewhere)
    try:
        ensure_writable(run_dir, elsewhere)
    except UserError as err:
        return _refuse(str(err), keep_going)
    with state.claim(run_dir) as held:
        if not held:
            return _refuse(f"{run_dir} is being run by {state.claimed_by(run_dir)}; wait for it or stop it", keep_going)
        return _attempt(plan, run_dir, ident, force, keep_going, elsewhere, overrides, hydra)


def _complete_already(run_dir: Path, previous: dict, ident: dict, keep_going: bool, elsewhere: str) -> dict | None:
    """A complete run: skipped (its summary) when its config identity is ``ident``, else refused, untouched."""
    if state.same_identity(previous.get("identity", {}), ident):
        print(f"complete already, skipped (force=true re-runs it): {run_dir}", flush=True)
        return read_json(run_dir / layout.SUMMARY)
    diffs = config_differences(previous.get("identity", {}), ident)
    message = (
        f"{run_dir} holds complete results of another configuration ({'; '.join(diffs)}); nothing was "
        f"changed: re-run it with force=true (replaces them) or choose another {elsewhere}"
    )
    with contextlib.suppress(OSError):  # a note on the run, where it can be written
        state.record_conflict(run_dir, previous, message)
    return _refuse(message, keep_going)


def _attempt(
    plan, run_dir: Path, ident: dict, force: bool, keep_going: bool, elsewhere: str, overrides, hydra
) -> dict | None:
    """The attempt, under the run's claim: its state read again (another launch may have finished it since),
    then skipped, refused, resumed or started afresh."""
    cfg = plan.cfg
    previous = state.read_status(run_dir)
    if state.is_complete(run_dir, previous) and not force:
        return _complete_already(run_dir, previous, ident, keep_going, elsewhere)
    same_config = state.same_identity(previous.get("identity", {}), ident)
    refusal = _unfinished_state_refusal(run_dir, previous, force, elsewhere)
    last = run_dir / layout.CHECKPOINTS / layout.LAST
    resume = bool(cfg.get("resume", True)) and previous.get("state") == "running" and last.is_file() and same_config
    if resume and refusal is None:
        refusal = _unreadable_checkpoint(last)
    if refusal is not None:
        return _refuse(refusal, keep_going)
    fresh = not previous and not any(p for p in run_dir.iterdir() if p.name not in (layout.ANALYZE_LOGS, layout.CLAIM))
    state.clear_attempt(run_dir, keep_checkpoints=resume)
    state.write_record(run_dir, cfg, overrides, hydra)
    running = state.mark_running(run_dir, ident, previous, resumed=resume)
    details: dict = {}
    from attn_study.job.attempt import train_and_test  # Lightning and torch: once a run goes ahead

    try:
        with stopping.on_stop(lambda signal_name: stopped(run_dir, running, signal_name)):
            summary = train_and_test(
                plan,
                run_dir,
                resume_from=last if resume else None,
                details=details,
                attempt=running["attempt"],
                wandb_id=running["wandb_id"],
            )
    except UserError as err:  # refused once the data was read (a missing file, too long a text), before training
        if details.get("stage") is not None or not fresh:
            return _failed(err, run_dir, running, keep_going, elsewhere)
        _finish_wandb()
        _remove_fresh(run_dir)
        return _refuse(str(err), keep_going)
    except Exception as err:  # recorded in the run dir; a sweep goes on with its other jobs
        return _failed(err, run_dir, running, keep_going, elsewhere)
    details.pop("stage", None)
    state.mark_complete(run_dir, running, **details)
    return summary


def _failed(err: Exception, run_dir: Path, running: dict, keep_going: bool, elsewhere: str) -> None:
    """An attempt that failed: ``failed`` with the traceback in ``error.txt``; re-raised unless ``keep_going``."""
    err = out_of_space(err, run_dir, elsewhere) or err
    _finish_wandb()
    with contextlib.suppress(OSError):  # a full disk may not take the record either
        state.mark_failed(run_dir, running, err)
    if not keep_going:
        raise err
    log.error("job failed: %s (traceback: %s)", f"{type(err).__name__}: {err}".splitlines()[0], run_dir / layout.ERROR)
    return None


def stopped(run_dir: Path, running: dict, signal_name: str) -> None:
    """What a signal leaves of an attempt: no half-written analysis folder (``analysis/.<family>.partial``, where a
    family writes before renaming it into place) — removed first —, then the run marked interrupted, its state left
    ``running`` so that the next launch resumes it from ``checkpoints/last.ckpt``."""
    for partial in (Path(run_dir) / layout.ANALYSIS).glob(".*.partial"):
        shutil.rmtree(partial, ignore_errors=True)
    state.mark_interrupted(run_dir, running, signal_name)


def _finish_wandb() -> None:
    """End a W&B run a failed attempt left open (so the next job of an in-process sweep starts its own)."""
    from attn_study.job.loggers import finish_wandb

    finish_wandb(exit_code=1)


def _remove_fresh(run_dir: Path) -> None:
    """Remove what this attempt alone wrote in ``run_dir`` (a new directory it made; Hydra's log stays where the
    launcher keeps it): a refusal leaves no run for ``attn-study-report`` to list as failed."""
    for path in run_dir.iterdir():
        if path.name == layout.ANALYZE_LOGS or path.suffix == ".log":
            continue
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    with contextlib.suppress(OSError):
        run_dir.rmdir()  # empty (no log in it): gone too


def _unfinished_state_refusal(run_dir: Path, previous: dict, force: bool, elsewhere: str) -> str | None:
    """Why ``run_dir`` must be left alone (what it holds is unknown; another live process runs it), or None."""
    unknown = previous.get("state") == "unreadable" or (not previous and state.holds_results(run_dir))
    if unknown and not force:
        why = (
            f"{run_dir / layout.STATUS} is unreadable"
            if previous
            else f"{run_dir} holds results but no {layout.STATUS}"
        )
        return (
            f"{why}, so what it holds is unknown; nothing was changed: re-run it with force=true "
            f"(replaces its results) or choose another {elsewhere}"
        )
    if previous.get("state") == "running" and state.still_running(previous) and not force:
        return (
            f"{run_dir} is being run by process {previous['pid']} on this host (started "
            f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(previous.get('started', 0)))}); wait for it "
            "or stop it, or force=true if that process is not attn-study"
        )
    return None


def _unreadable_checkpoint(last: Path) -> str | None:
    """Why the resume point cannot be resumed from (a truncated or damaged file: deleted by nothing), or None."""
    import torch

    try:
        torch.load(last, map_location="cpu", weights_only=False)
    except Exception as err:
        return (
            f"{last}: unreadable checkpoint ({type(err).__name__}); re-run with resume=false to start this run's "
            "training over"
        )
    return None


def _refuse(message: str, keep_going: bool) -> None:
    """A job that must not run: logged in a sweep (``keep_going``), a ``UserError`` otherwise."""
    if not keep_going:
        raise UserError(message)
    log.error("job refused: %s", message)
