"""One run: train, select on dev, test the best checkpoint (the analyses run as callbacks of that
test), write ``summary.json``.

Run directory contract (docs/architecture.md): ``.hydra/`` (written by Hydra), ``status.json`` (the
state: running / complete / failed, see ``attn_study.sweep.state``), ``summary.json``,
``checkpoints/``, ``csv/metrics.csv``, ``wandb/`` (offline run), ``analysis/<family>/``,
``error.txt`` on failure.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import netrc
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import lightning as L
import numpy as np
import torch
from lightning.pytorch.loggers import WandbLogger
from lightning.pytorch.plugins import TorchCheckpointIO
from lightning.pytorch.plugins.environments import SLURMEnvironment
from omegaconf import DictConfig

from attn_study import assemble, families, keys, layout, memory, saved, stopping, tracking
from attn_study.analysis.measures import summarise
from attn_study.build import (
    build_analyses,
    build_callbacks,
    check_components,
    component,
    model_seed,
)
from attn_study.config import check_config, config_differences
from attn_study.data.checks import check_embeddings
from attn_study.errors import UserError
from attn_study.io import atomic_open, read_json, write_json_atomic
from attn_study.models.selector import soft_token_attention
from attn_study.progress import training_bar
from attn_study.sweep import state

log = logging.getLogger(__name__)


def _canonical(ident: dict) -> str:
    return json.dumps(ident, sort_keys=True, default=str)


def run(
    cfg: DictConfig, run_dir: str | Path, keep_going: bool = False, overrides: list[str] | None = None, hydra=None
) -> dict | None:
    """One job with its state in ``run_dir``: the way both ``attn-study`` and every sweep job run.

    - the config is checked first (``config.check_config``, :func:`check_options`), and that ``run_dir``
      can be written; any refusal changes nothing in ``run_dir``;
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
    - SIGTERM / SIGINT (``attn_study.stopping``) → ``interrupted`` noted in ``status.json``, the state left
      ``running`` so that the next launch resumes it.
    """
    run_dir = Path(run_dir)
    elsewhere = "hydra.sweep.dir" if keep_going else "hydra.run.dir"
    try:
        check_recipe(cfg, warn=False)
        check_config(cfg)
        check_components(cfg)
        check_options(cfg)
        build_analyses(cfg)  # their constructors check their options: refused here, before any state changes
    except UserError as err:
        return _refuse(str(err), keep_going)
    ident = json.loads(_canonical(state.identity(cfg)))
    previous = state.read_status(run_dir)
    same_config = state.same_identity(previous.get("identity", {}), ident)
    force = bool(cfg.get("force"))
    if state.is_complete(run_dir, previous) and not force:
        if same_config:
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
    try:
        ensure_writable(run_dir, elsewhere)
    except UserError as err:
        return _refuse(str(err), keep_going)
    refusal = _unfinished_state_refusal(run_dir, previous, force, elsewhere)
    last = run_dir / layout.CHECKPOINTS / layout.LAST
    resume = bool(cfg.get("resume", True)) and previous.get("state") == "running" and last.is_file() and same_config
    if resume and refusal is None:
        refusal = _unreadable_checkpoint(last)
    if refusal is not None:
        return _refuse(refusal, keep_going)
    state.clear_attempt(run_dir, keep_checkpoints=resume)
    state.write_record(run_dir, cfg, overrides, hydra)
    running = state.mark_running(run_dir, ident, previous, resumed=resume)
    details: dict = {}
    try:
        with stopping.on_stop(lambda signal_name: state.mark_interrupted(run_dir, running, signal_name)):
            summary = train_and_test(
                cfg,
                run_dir,
                resume_from=last if resume else None,
                details=details,
                attempt=running["attempt"],
                wandb_id=running["wandb_id"],
            )
    except Exception as err:  # recorded in the run dir; a sweep goes on with its other jobs
        err = out_of_space(err, run_dir, elsewhere) or err
        _finish_wandb(exit_code=1)
        with contextlib.suppress(OSError):  # a full disk may not take the record either
            state.mark_failed(run_dir, running, err)
        if not keep_going:
            raise err
        log.error(
            "job failed: %s (traceback: %s)", f"{type(err).__name__}: {err}".splitlines()[0], run_dir / layout.ERROR
        )
        return None
    state.mark_complete(run_dir, running, **details)
    return summary


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
    try:
        torch.load(last, map_location="cpu", weights_only=False)
    except Exception as err:
        return (
            f"{last}: unreadable checkpoint ({type(err).__name__}); re-run with resume=false to start this run's "
            "training over"
        )
    return None


def ensure_writable(path: Path, option: str) -> None:
    """``path`` exists and a file can be written in it, or a one-line ``UserError`` naming ``option``."""
    if path.exists() and not path.is_dir():
        raise UserError(f"{path}: a file, not a directory; choose another {option}")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-"):
            pass
    except OSError as err:
        raise UserError(f"{path}: cannot write there ({err.strerror or err}); choose another {option}") from None


def out_of_space(error: BaseException, path: Path, option: str) -> UserError | None:
    """A ``UserError`` saying so when ``error`` came from a full disk (``ENOSPC`` anywhere in its chain, or
    torch's "unexpected pos" from a truncated write with no room left), else None."""
    chain, seen, full = error, set(), False
    while chain is not None and id(chain) not in seen and not full:
        seen.add(id(chain))
        full = getattr(chain, "errno", None) == errno.ENOSPC or "No space left" in str(chain)
        chain = chain.__cause__ or chain.__context__
    if not full and "unexpected pos" in str(error):
        with contextlib.suppress(OSError):
            full = shutil.disk_usage(path).free < 64 * 2**20
    if not full:
        return None
    return UserError(
        f"no space left on the device of {path}: free some space, or choose another {option}; "
        "relaunching resumes from the last checkpoint"
    )


def check_options(cfg: DictConfig) -> None:
    """What the schema cannot see, before anything is read: the epochs leave a checkpoint to choose, the
    monitored key is one the run logs, a GPU asked for exists."""
    trainer = cfg.get("trainer") or {}
    epochs = trainer.get("max_epochs")
    callbacks = cfg.get("callbacks") or {}
    training = cfg.get("training") or {}
    if epochs is not None:
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs == 0 or epochs < -1:
            raise UserError(f"trainer.max_epochs={epochs}: give a number of epochs >= 1 (or -1 with early stopping)")
        if epochs == -1 and not callbacks.get("early_stopping"):
            raise UserError(
                "trainer.max_epochs=-1 trains until early stopping, and callbacks has none: add "
                "callbacks=[model_checkpoint,early_stopping] or give a number of epochs"
            )
        first = int(training.get("select_from_epoch") or 0)
        if training.get("schedule") == "random_attention_pretraining":
            first = max(first, int(training.get("pretrain_epochs") or 0))
        if epochs > 0 and first >= epochs:
            raise UserError(
                f"trainer.max_epochs={epochs}: no epoch can be chosen as the best checkpoint — epochs "
                f"before {first} never are (training.select_from_epoch / pretrain_epochs); train at "
                f"least {first + 1} epochs"
            )
    for name in ("model_checkpoint", "early_stopping"):
        node = callbacks.get(name)
        monitor = node.get("monitor") if node else None
        if monitor and monitor not in monitored_keys(cfg) and not _tracked(cfg, monitor):
            raise UserError(
                f"callbacks.{name}.monitor={monitor}: the run logs no such key; choose from "
                f"{sorted(monitored_keys(cfg))}"
            )
    accelerator = str(trainer.get("accelerator", "auto"))
    if accelerator in ("gpu", "cuda") and not torch.cuda.is_available():
        raise UserError(
            "trainer=gpu: this machine has no CUDA GPU that torch can use; use trainer=auto (GPU when "
            "there is one, else CPU) or trainer=cpu"
        )


def monitored_keys(cfg: DictConfig) -> set[str]:
    """The per-epoch dev keys a run logs (what model selection and early stopping can watch)."""
    keys_ = {"val/loss", "val/acc", "val/f1", "val/auroc"}
    if (cfg.get("training") or {}).get("schedule") == "model_consistent_adversary":
        keys_ |= {"val/adversary_loss", "val/adversary_tvd", "val/adversary_kl", "val/fidelity"}
    if (cfg.get("explainer") or {}).get("target"):
        keys_.add("val/fidelity")
    return keys_


def _tracked(cfg: DictConfig, monitor: str) -> bool:
    """A family's statistic tracked during training (``val/<namespace>/…`` with ``every_n_epochs`` set)."""
    name = families.tracked_key(monitor)
    if name is None:
        return False
    family = {ns: f for f, ns in families.FAMILIES.items()}.get(keys.namespace(name))
    node = (cfg.get("analysis") or {}).get(family) or {}
    return bool(node.get("_target_") and node.get("every_n_epochs"))


def _refuse(message: str, keep_going: bool) -> None:
    """A job that must not run: logged in a sweep (``keep_going``), a ``UserError`` otherwise."""
    if not keep_going:
        raise UserError(message)
    log.error("job refused: %s", message)


def _finish_wandb(exit_code: int = 0) -> None:
    """End the active W&B run, so the next job of an in-process sweep starts its own."""
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is not None:
        wandb.finish(exit_code=exit_code)


def _check_wandb_login(node) -> None:
    """Online W&B needs a login: say so in one line, before anything runs."""
    mode = os.environ.get("WANDB_MODE") or node.get("mode") or "online"
    if mode != "online" or os.environ.get("WANDB_API_KEY"):
        return
    try:
        if netrc.netrc().authenticators("api.wandb.ai"):
            return
    except (OSError, netrc.NetrcParseError):
        pass
    raise UserError(
        "logger.wandb.mode=online needs a W&B login: run `wandb login` or set WANDB_API_KEY "
        "(or keep the default logger.wandb.mode=offline and `wandb sync` later)"
    )


def build_loggers(cfg: DictConfig, run_dir: Path, wandb_id: str | None = None) -> list:
    """The loggers of ``cfg.logger``, writing into ``run_dir``; W&B's run is ``wandb_id`` when given (resumed,
    offline too: ``wandb sync`` uploads a run's offline attempts as one run)."""
    loggers = []
    for name, node in (cfg.get("logger") or {}).items():
        if node is None:
            continue
        extra = {}
        if name == "wandb":
            _check_wandb_login(node)
            extra = {"id": wandb_id, "resume": "allow"} if wandb_id else {}
        loggers.append(component(node, drop=(), option=f"logger.{name}", save_dir=str(run_dir), **extra))
        log.debug("logger %s enabled", name)
    return loggers


def train_and_test(
    cfg: DictConfig,
    run_dir: str | Path,
    resume_from: Path | None = None,
    details: dict | None = None,
    attempt: int = 1,
    wandb_id: str | None = None,
) -> dict:
    """Train ``cfg``'s model (continuing from ``resume_from``, a Lightning checkpoint, when given),
    test the checkpoint best on dev, analyse, write and return the summary. ``details``, when given,
    receives the class names and where the loggers wrote; ``attempt`` is this attempt's number;
    ``wandb_id`` the W&B run to log to (the run's own over its attempts; None: a new one)."""
    run_dir = Path(run_dir)
    started = time.time()
    memory.reset_peak()
    _prepare(cfg, run_dir)
    assembled, data_metrics, warnings = _assemble(cfg, run_dir)
    module, datamodule = assembled.module, assembled.datamodule
    loggers = build_loggers(cfg, run_dir, wandb_id)
    labels = [str(name) for name in datamodule.data.label_names]
    for lg in loggers:
        lg.log_hyperparams(tracking.logged_config(cfg, tracking.in_multirun(), **tracking.run_metadata(labels)))
    trainer = _trainer(cfg, run_dir, loggers, assembled.analyses)
    if resume_from is not None:
        print(f"resuming training from {resume_from}", flush=True)
    trainer.fit(module, datamodule=datamodule, ckpt_path=str(resume_from) if resume_from else None)
    tested = _test(trainer, module, datamodule, run_dir)
    summary = {**_training_summary(trainer, module, datamodule, tested), **data_metrics}
    for analysis in assembled.analyses:
        summary.update(analysis.summary)
    # this attempt's wall time and the earlier attempts' training (what they did after their last checkpoint
    # is lost with them)
    summary["run/seconds"] = time.time() - started + module.seconds_before
    summary["run/attempts"] = attempt
    summary.update(memory.peak_mib())  # this attempt's peak, analyses included
    summary, undefined = finite_summary(summary)
    summary.update(undefined=undefined, warnings=warnings)
    locations = _publish(summary, loggers, run_dir, trainer.global_step)
    if details is not None:
        details["labels"] = labels
        details["warnings"] = warnings
        details["torch_threads"] = torch.get_num_threads()
        if assembled.roar is not None:  # what the data was masked by (ROAR: attn_study/roar/)
            details["roar"] = assembled.roar
    print(locations, flush=True)
    return summary


def _prepare(cfg: DictConfig, run_dir: Path) -> None:
    """The checks of the config, the run's record, the W&B login, torch's threads and the model's seed."""
    check_recipe(cfg)
    check_config(cfg)
    check_options(cfg)
    run_dir.mkdir(parents=True, exist_ok=True)
    if not (run_dir / layout.RECORD / layout.CONFIG).is_file():  # run() writes it; runs composed in Python need it too
        state.write_record(run_dir, cfg)
    if (cfg.get("logger") or {}).get("wandb"):
        _check_wandb_login(cfg.logger.wandb)  # before the data is read, not after
    if cfg.get("threads"):
        torch.set_num_threads(int(cfg.threads))
    L.seed_everything(model_seed(cfg), workers=True, verbose=False)


def _assemble(cfg: DictConfig, run_dir: Path) -> tuple[assemble.Assembled, dict, list]:
    """Data, model, the runs it builds on, its targets (a W&P adversary's base outputs, an explainer's black
    box) and its analyses, all checked before training; the data metrics and warnings."""
    assembled = assemble.data_and_model(cfg, run_dir)
    datamodule, module = assembled.datamodule, assembled.module
    if not any(p.requires_grad for p in module.parameters()):
        raise UserError(
            "every weight of the model is frozen: training would change nothing and the model tested would be "
            "untrained; leave some trainable (model.embeddings.freeze=false)"
        )
    if assembled.references is not None and cfg.training.get("schedule") == "model_consistent_adversary":
        module.use_soft_targets({split: recorder.probabilities() for split, recorder in assembled.references.items()})
    embedding_metrics, embedding_warnings = check_embeddings(module.embedding_coverage)
    target = (cfg.get("explainer") or {}).get("target")
    if target:  # an explainer: trained to reproduce a black-box run's predictions
        black_box = assemble.load(target, option="explainer.target", force=bool(cfg.get("force")))
        saved.check_same_data(black_box, datamodule, "explainer.target")
        module.use_soft_targets(saved.predictions(black_box))
    assemble.with_analyses(assembled, cfg, run_dir)  # before training (Lightning's setup checks again)
    return assembled, {**assembled.data_metrics, **embedding_metrics}, assembled.warnings + embedding_warnings


def _trainer(cfg: DictConfig, run_dir: Path, loggers: list, analyses: list) -> L.Trainer:
    extra = {}
    if SLURMEnvironment.detect():  # submitit requeues on time-out and we resume from last.ckpt;
        extra["plugins"] = [SLURMEnvironment(auto_requeue=False)]  # Lightning's own requeue stays off
    bar = [training_bar()] if cfg.trainer.get("enable_progress_bar", True) else []
    return component(
        cfg.trainer,
        option="trainer",
        logger=loggers or False,
        callbacks=build_callbacks(cfg, run_dir) + bar + analyses,
        default_root_dir=str(run_dir),
        plugins=[AtomicCheckpointIO(), *extra.pop("plugins", [])],
        **extra,
    )


def _test(trainer: L.Trainer, module, datamodule, run_dir: Path) -> dict:
    """Test the checkpoint best on dev (the analyses run as its callbacks); each test instance's α and ŷ
    recorded for a model with attention over tokens (what other runs compare with): all of them, those a
    test cut short (``trainer.limit_test_batches``, as ``trainer=debug``) did not see by a pass of their own."""
    checkpoint = trainer.checkpoint_callback
    best = checkpoint.best_model_path if checkpoint is not None else ""
    recording = soft_token_attention(module.model)
    module.test_recorder = saved.AttentionRecorder(len(datamodule.split("test"))) if recording else None
    tested = trainer.test(module, datamodule=datamodule, ckpt_path=best or None, verbose=False)[0]
    if recording:
        size = len(datamodule.split("test"))
        untested = module.test_recorder.fill(module.model, datamodule, "test")
        if untested:
            log.info(
                "%s: %d of the %d test instances were not tested (trainer.limit_test_batches): recorded by a pass "
                "of their own",
                layout.ATTENTION,
                untested,
                size,
            )
        module.test_recorder.write(datamodule.split("test"), run_dir / layout.ATTENTION)
    return tested


def _training_summary(trainer: L.Trainer, module, datamodule, tested: dict) -> dict:
    """The test metrics, the selection score, the epochs and seconds of training, and the data's sizes."""
    checkpoint = trainer.checkpoint_callback
    stats = datamodule.data.stats
    fit_seconds = module.train_seconds  # every attempt's, when resumed
    summary = {k: float(v) for k, v in tested.items()}
    if len(np.unique(datamodule.split("test").labels)) < 2:  # torchmetrics reports 0; it is undefined
        summary["test/auroc"] = float("nan")
    summary.update(
        {
            # the score the checkpoint was chosen by: val/acc_best (a W&P adversary: val/adversary_loss_best)
            f"{checkpoint.monitor if checkpoint is not None and checkpoint.monitor else 'val/acc'}_best": (
                float(checkpoint.best_model_score)
                if checkpoint is not None and checkpoint.best_model_score is not None
                else float("nan")
            ),
            "train/epochs": trainer.current_epoch,
            "train/seconds": fit_seconds,
            "train/seconds_per_epoch": fit_seconds / max(trainer.current_epoch, 1),
            "data/vocab_size": stats["vocab_size"],
            **{f"data/{split}_size": stats[split]["kept"] for split in ("train", "dev", "test")},
        }
    )
    if module.test_conicity:  # the states' conicity per test instance: its mean with the bootstrap interval
        conicity = summarise(torch.cat(module.test_conicity))
        summary.update({f"test/conicity/{name}": conicity[name] for name in ("mean", "ci_low", "ci_high", "n")})
    return summary


def _publish(summary: dict, loggers: list, run_dir: Path, step: int) -> str:
    """The summary to ``summary.json`` first, then to every logger (final values: W&B's run summary, not its
    history; ``tracking.publish_summary``; a logger's failure is one line, not the run's); the resume point
    removed. Returns where everything went, for the console."""
    write_json_atomic(run_dir / layout.SUMMARY, summary)
    tracking.publish_summary(loggers, summary, step)
    locations = describe_locations(run_dir, loggers, summary)
    tracking.finish(loggers)
    Path(run_dir / layout.CHECKPOINTS / layout.LAST).unlink(missing_ok=True)  # resume point, no longer needed
    return locations


RECIPE_DATASETS = Path(__file__).resolve().parent.parent / "conf" / "recipe_dataset"


def check_recipe(cfg: DictConfig, warn: bool = True) -> None:
    """A paper's recipe (``recipe=...``): say in one line each what it cannot reproduce here; refuse a
    model its table has no row for; note a dataset the paper did not use."""
    recipe = cfg.get("recipe")
    if not recipe:
        return
    if "row" in recipe and recipe.row.get("lr") is None:
        table = recipe.table
        models = sorted({m for d in table.values() for m in d})
        encoders = sorted({e for d in table.values() for m in d.values() for e in m})
        raise UserError(
            f"recipe={recipe.name} has no settings for dataset={cfg.dataset.name} model={cfg.model.name} "
            f"encoder={cfg.encoder.name}; its table covers dataset {sorted(table)} × model {models} × "
            f"encoder {encoders}"
        )
    if not warn:
        return
    for line in recipe.get("differs") or []:
        log.warning("recipe=%s differs from the authors' run: %s", recipe.name, line)
    if "table" not in recipe and not (RECIPE_DATASETS / recipe.name / f"{cfg.dataset.name}.yaml").is_file():
        log.warning(
            "recipe=%s: %s is not one of the paper's datasets; only its general settings apply",
            recipe.name,
            cfg.dataset.name,
        )


def finite_summary(summary: dict) -> tuple[dict, dict]:
    """(the summary with every NaN / ±inf replaced by None — JSON has no NaN —, {key: why it is undefined})."""
    clean, undefined = {}, {}
    for key, value in summary.items():
        if isinstance(value, float) and not np.isfinite(value):
            clean[key] = None
            undefined[key] = (
                "undefined: the test split has one class"
                if key == "test/auroc"
                else "undefined: no instance where it is defined"
                if np.isnan(value)
                else f"{value}"
            )
        else:
            clean[key] = value
    return clean, undefined


class AtomicCheckpointIO(TorchCheckpointIO):
    """Checkpoints written to a temporary file and renamed into place: a run stopped mid-save keeps
    its previous ``last.ckpt`` intact, so it can always be resumed."""

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_open(path, "wb") as handle:
            torch.save(checkpoint, handle)


def rebuild_summary(run_dir: Path) -> dict:
    """``summary.json`` = its training keys + the summary of every analysis folder now in the run
    directory, so an analysis run again replaces its family's keys and none stay behind."""
    path = Path(run_dir) / layout.SUMMARY
    summary = {k: v for k, v in (read_json(path) if path.is_file() else {}).items() if not families.is_analysis_key(k)}
    undefined = {k: v for k, v in summary.pop("undefined", {}).items() if not families.is_analysis_key(k)}
    for family in families.FAMILIES:
        family_summary = Path(run_dir) / layout.ANALYSIS / family / layout.SUMMARY
        if family_summary.is_file():
            values = read_json(family_summary)
            summary.update(values)
            undefined.update({k: "undefined: no instance where it is defined" for k, v in values.items() if v is None})
    summary["undefined"] = undefined
    write_json_atomic(path, summary)
    return summary


def describe_locations(run_dir: Path, loggers: list, summary: dict) -> str:
    def number(key):
        value = summary.get(key)
        return "undefined" if value is None else f"{value:.4f}"

    chosen_by = next((k for k in summary if k.startswith("val/") and k.endswith("_best")), "val/acc_best")
    lines = [
        f"test/acc {number('test/acc')}  ({chosen_by} {number(chosen_by)})",
        f"results:  {run_dir / 'summary.json'}",
    ]
    for lg in loggers:
        if isinstance(lg, WandbLogger):
            wandb_dir = Path(lg.experiment.dir).parent
            lines.append(f"W&B run:  {wandb_dir}  (upload: wandb sync {wandb_dir})")
    return "\n".join(lines)
