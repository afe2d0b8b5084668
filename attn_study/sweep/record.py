"""The sweep record: ``<sweep dir>/sweep.json``, written by a Hydra callback when a multirun starts.

It holds the sweep's name, its W&B group (name + time of the *first* launch, so a resumed sweep stays
in one group), every launch (time, overrides, launcher) and every job ever asked for (directory →
overrides): the report lists jobs that are missing from it. When the launch ends the callback prints
what happened to this launch's jobs and exits non-zero when any failed or never finished.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from attn_study.io import read_json, write_json_atomic
from attn_study.job import state
from attn_study.sweep.naming import JOB_KEYS_ENV, SWEEP_RECORD, job_dir_name, swept_keys

RECORD = SWEEP_RECORD  # sweep.json
log = logging.getLogger(__name__)


def expand_grid(params: dict, task_overrides: list[str]) -> list[list[str]]:
    """The jobs Hydra's basic sweeper launches for ``hydra.sweeper.params`` + the command line (later
    values of a key replace earlier ones, so ``dataset=sst`` narrows a sweep file's dataset list)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    arguments = [f"{k}={v}" for k, v in (params or {}).items()] + list(task_overrides)
    overrides = OverridesParser.create().parse_overrides(arguments)
    return [job for batch in BasicSweeper.split_arguments(overrides, None) for job in batch]


def read_record(sweep_dir: Path) -> dict:
    path = Path(sweep_dir) / RECORD
    return read_json(path) if path.is_file() else {}


def wandb_group(sweep_dir: Path) -> str | None:
    return read_record(sweep_dir).get("group")


def job_outcomes(sweep_dir: Path, jobs: dict, since: float, launch: str | None = None) -> dict[str, list[str]]:
    """This launch's jobs by outcome, from each job's own final state: ``ran`` (completed by this
    launch) / ``skipped`` (complete before it) / ``elsewhere`` (run, or being run, by another launch
    of the same sweep at the same time) / ``failed`` / ``refused`` (complete with another config) /
    ``unfinished`` (no final state: killed, lost)."""
    out: dict[str, list[str]] = {k: [] for k in ("ran", "skipped", "elsewhere", "failed", "refused", "unfinished")}
    for name in jobs:
        status = state.read_status(Path(sweep_dir) / name)
        ours = launch is None or status.get("launch") in (None, launch)
        conflict = status.get("conflict", {})
        if conflict.get("time", 0) >= since and conflict.get("launch") in (None, launch):
            out["refused"].append(name)
        elif state.is_complete(Path(sweep_dir) / name, status):
            out["skipped" if status.get("finished", 0) < since else "ran" if ours else "elsewhere"].append(name)
        elif not ours and (status.get("finished", 0) >= since or state.still_running(status)):
            out["elsewhere"].append(name)
        elif status.get("state") == "failed" and status.get("finished", 0) >= since:
            out["failed"].append(name)
        else:
            out["unfinished"].append(name)
    return out


class SweepRecorder(Callback):
    """Hydra callback (``hydra.callbacks.sweep_record``): keeps ``sweep.json`` and reports outcomes."""

    def __init__(self, exit_on_failure: bool = True) -> None:
        self.exit_on_failure = exit_on_failure
        self.started = 0.0
        self.launch: str | None = None
        self.jobs: dict[str, list[str]] = {}

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        self.started = time.time()
        # every job of this launch records it (jobs inherit the environment, also under joblib and SLURM),
        # so this launch's closing count is right when another launch of the sweep runs at the same time
        self.launch = f"{time.strftime('%Y%m%d-%H%M%S', time.localtime(self.started))}-{os.getpid()}"
        os.environ[state.LAUNCH_ENV] = self.launch
        sweep_dir = Path(str(config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        params = config.hydra.sweeper.get("params")
        params = OmegaConf.to_container(params, resolve=False) if params is not None else {}
        task = list(config.hydra.overrides.task)
        record = read_record(sweep_dir)
        keys = self._job_keys(config, record, params, task)
        self.jobs = {job_dir_name(job, keys): job for job in expand_grid(params, task)}
        name = str(OmegaConf.select(config, "sweep.name", default=None) or "multirun")
        launched = time.strftime("%Y-%m-%d_%H-%M-%S", time.localtime(self.started))
        record.setdefault("name", name)
        record.setdefault("group", f"{name}-{launched}")
        record.setdefault("jobs", {}).update(self.jobs)
        record.setdefault("launches", []).append(
            {
                "id": self.launch,
                "time": launched,
                "started": self.started,
                "overrides": task,
                "hydra_overrides": list(config.hydra.overrides.hydra),
                "launcher": str(config.hydra.launcher.get("_target_", "")),
                "jobs": sorted(self.jobs),
            }
        )
        write_json_atomic(sweep_dir / RECORD, record)
        log.info("sweep %s: %d jobs in %s (W&B group %s)", name, len(self.jobs), sweep_dir, record["group"])

    @staticmethod
    def _job_keys(config: DictConfig, record: dict, params: dict, task: list[str]) -> list[str] | None:
        """What names this launch's jobs (naming.py): a sweep file's, every override (None); a plain
        multirun's, the keys it varies with those an earlier launch into the same folder varied (kept in the
        record). Set for the jobs in ``naming.JOB_KEYS_ENV``, which they inherit (also under joblib and SLURM)."""
        if OmegaConf.select(config, "hydra.runtime.choices.sweep", default=None) is not None:
            os.environ.pop(JOB_KEYS_ENV, None)
            return None
        keys = sorted(set(record.get("job_keys") or []) | swept_keys(params, task))
        record["job_keys"] = keys
        os.environ[JOB_KEYS_ENV] = json.dumps(keys)
        return keys

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        sweep_dir = Path(str(config.hydra.sweep.dir))
        outcomes = job_outcomes(sweep_dir, self.jobs, self.started, getattr(self, "launch", None))
        counts = ", ".join(f"{len(v)} {k}" for k, v in outcomes.items() if v)
        lines = [f"sweep {sweep_dir}: {len(self.jobs)} jobs: {counts}"]
        for kind in ("failed", "refused", "unfinished"):
            for name in outcomes[kind]:
                error = state.read_status(sweep_dir / name).get("error", "no status recorded")
                lines.append(f"  {kind}: {name}: {error}")
        print("\n".join(lines), flush=True)
        bad = outcomes["failed"] + outcomes["refused"] + outcomes["unfinished"]
        if bad and self.exit_on_failure:
            sys.exit(1)
