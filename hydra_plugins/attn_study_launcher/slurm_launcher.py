"""``hydra/launcher=slurm``: hydra-submitit-launcher's SLURM launcher, waiting for *every* job.

The plugin's launcher stops collecting results at the first job that ends without one (cancelled,
killed for memory or time, node failure) and the whole multirun errors out while the rest still run.
This one waits for all of them and records each lost job in its own run directory (``status.json``
``failed`` + ``error.txt`` naming the SLURM job and its state); the sweep record's end-of-launch
summary then lists it and the launch exits non-zero. Jobs that raise inside Python record their own
failure (``attn_study.job.run.run``). Timeouts: submitit requeues a job that reaches its time limit up to
``max_num_timeout`` times (``cluster.max_requeue``); the requeued job resumes training from
``checkpoints/last.ckpt``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from omegaconf import OmegaConf

from attn_study.job import state
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import BaseSubmititLauncher

log = logging.getLogger(__name__)

# keys of the launcher config that AutoExecutor takes without the "slurm_" prefix
_GENERIC = {
    "timeout_min",
    "mem_gb",
    "nodes",
    "cpus_per_task",
    "gpus_per_node",
    "tasks_per_node",
    "stderr_to_stdout",
    "name",
}


class SlurmLauncher(BaseSubmititLauncher):
    _EXECUTOR = "slurm"

    def _executor(self):
        import submitit

        params = dict(self.params)
        cluster = OmegaConf.to_container(self.config.get("cluster") or OmegaConf.create(), resolve=True)
        params["setup"] = [*(params.get("setup") or []), *(cluster.get("setup") or [])]
        params["additional_parameters"] = {
            **(cluster.get("additional_parameters") or {}),
            **(params.get("additional_parameters") or {}),
        }
        executor = submitit.AutoExecutor(
            folder=params.pop("submitit_folder"),
            cluster="slurm",
            slurm_max_num_timeout=params.pop("max_num_timeout", 0),
        )
        executor.update_parameters(
            **{k if k in _GENERIC else f"slurm_{k}": v for k, v in params.items() if v is not None}
        )
        return executor

    def _run_dir(self, overrides: Sequence[str]) -> Path:
        cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        return Path(str(cfg.hydra.sweep.dir)) / str(cfg.hydra.sweep.subdir)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from submitit.core.utils import UncompletedJobError

        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        arguments = []
        for num, overrides in enumerate(job_overrides, start=initial_job_idx):
            log.info("\t#%d : %s", num, " ".join(filter_overrides(overrides)))
            arguments.append((list(overrides), "hydra.sweep.dir", num, f"job_id_for_{num}", Singleton.get_state()))
        jobs = self._executor().map_array(self, *zip(*arguments))
        log.info("submitted %d SLURM jobs (array %s) from %s", len(jobs), jobs[0].job_id.split("_")[0], sweep_dir)
        returns = []
        for job, overrides in zip(jobs, job_overrides):
            try:
                returns.append(job.results()[0])
            except UncompletedJobError as err:
                message = f"SLURM job {job.job_id} ended {job.state} without a result"
                log.error("%s (%s): %s", message, " ".join(overrides), str(err).splitlines()[0])
                state.record_lost_job(self._run_dir(overrides), f"{message}; its log: {job.paths.stderr}")
                # recorded, not raised: the sweeper would stop at the first failed job's return value
                returns.append(JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED))
        return returns
