"""Console entry points. ``attn-study``: train, test, analyse one configuration (Hydra app); ``attn-study-analyze``:
test a saved run again with other analyses; ``attn-study-explain``: a run's prediction for texts you type, coloured
by each importance method."""

from __future__ import annotations

import difflib
import logging
import os
import re
import sys
import warnings
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from attn_study.errors import UserError
from attn_study.job import stopping

CONFIG_DIR = str(Path(__file__).resolve().parent.parent / "conf")
log = logging.getLogger("attn_study")


def _quiet_third_party() -> None:
    # Lightning hints at srun whenever SLURM's tools are installed; jobs of hydra/launcher=slurm
    # already run under srun, anywhere else the hint is noise
    warnings.filterwarnings("ignore", message=".*The `srun` command is available.*")
    # Lightning's own pytree helper calls a torch API torch deprecated: nothing a user can change, shown per
    # fit and per test
    warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated")
    # the run manages <run dir>/checkpoints itself: emptied for a new attempt, kept to resume one
    warnings.filterwarnings("ignore", message=r"Checkpoint directory .*checkpoints exists and is not empty")
    for name in ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.seed"):
        logging.getLogger(name).setLevel(logging.WARNING)


class WritableOutput(Callback):
    """Hydra callback (``hydra.callbacks.output_dir``): ``hydra.run.dir`` (a sweep's ``hydra.sweep.dir``) is a
    directory this process can write in, or ``<app>: error: …`` in one line and exit status 2 — before Hydra
    creates it, whose own error would be a traceback."""

    def __init__(self, app: str = "attn-study") -> None:
        self.app = app

    def on_run_start(self, config: DictConfig, **kwargs) -> None:
        self._check(config.hydra.run.dir, "hydra.run.dir")

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        self._check(config.hydra.sweep.dir, "hydra.sweep.dir")

    def _check(self, path, option: str) -> None:
        from attn_study.job.checks import ensure_writable

        try:
            ensure_writable(Path(str(path)), option)
        except UserError as err:
            print(f"{self.app}: error: {err}", file=sys.stderr)
            sys.exit(2)


def _sweep_settings(cfg: DictConfig) -> bool:
    """In a multirun: the W&B group from the sweep record; torch threads = the cores a job has
    (cores / n_jobs under joblib, the allocated CPUs under SLURM).
    Returns whether this is a sweep job (whose failures are recorded, not raised)."""
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode != RunMode.MULTIRUN:
        return False
    from attn_study.sweep.record import wandb_group

    with open_dict(cfg):
        wandb_cfg = cfg.get("logger", {}).get("wandb") if cfg.get("logger") else None
        if wandb_cfg is not None and wandb_cfg.get("group") is None:
            wandb_cfg.group = wandb_group(Path(hydra_cfg.sweep.dir))
        if cfg.get("threads") is None:
            cfg.threads = job_threads(hydra_cfg.launcher, os.cpu_count() or 1, os.environ)
    return True


def job_threads(launcher, cpus: int, environ) -> int | None:
    """A sweep job's torch threads: under joblib, cores / n_jobs (n_jobs < 1: as many jobs as cores, one thread
    each; at least 1); under SLURM, the job's allocated CPUs (``SLURM_CPUS_PER_TASK``), not the node's; else None
    (torch's default)."""
    if "joblib" in str(launcher.get("_target_", "")).lower():
        n_jobs = int(launcher.get("n_jobs") or -1)
        return max(1, cpus // (cpus if n_jobs < 1 else n_jobs))
    if str(environ.get("SLURM_CPUS_PER_TASK", "")).isdigit():
        return int(environ["SLURM_CPUS_PER_TASK"])
    return None


def composition_error(err: BaseException, argv: list[str]) -> str | None:
    """The one line, naming the fix, for Hydra's errors of composing the config from the command line (``argv``);
    None for any other error:

    - an option no group has (``analysis=[faithfullness]``, ``encoder=lstmm``): the nearest and every option;
    - a family's options for a family not chosen (``analysis.jain_wallace.x=…`` with ``analysis=[sanity]``): the
      list to give; options for no family at all: the families;
    - a group the command's config does not choose (``attn-study-analyze … logger=csv``): that it has none;
    - a key the config does not have (``trainer.max_epoch=1``): the nearest setting (never Hydra's ``+key=…``
      advice for a typo); a parameter its constructor takes but the config leaves out (``trainer.precision=16``):
      the ``+`` that adds it."""
    from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    from attn_study import options
    from attn_study.config import nearest

    if isinstance(err, OverrideParseException):
        return unparsable_override(argv)
    if isinstance(err, MissingConfigException) and err.missing_cfg_file:
        path = err.missing_cfg_file.strip("/")
        groups = sorted([*options.groups(), "hydra/launcher"], key=len, reverse=True)
        group = next((g for g in groups if path.startswith(g + "/")), None)
        if group is None:
            return None
        name = path[len(group) + 1 :]
        choices = list(options.launchers() if group == "hydra/launcher" else options.options(group))
        if group == "analysis":
            families = [c for c in choices if c != "none"]
            near = nearest(name, families)
            return f"analysis=[…,{name},…]: no test family {name}{near}; the families: {', '.join(families)}"
        near = nearest(name, choices)
        return f"{group}={name}: no such option{near}; choose from {', '.join(choices)}"
    unchosen = re.match(r"Could not override '([^']+)'\. No match in the defaults list", str(err))
    if isinstance(err, ConfigCompositionException) and unchosen:  # a group this command's config does not choose
        group = unchosen.group(1)
        given = next((a for a in argv if a.split("=", 1)[0].lstrip("+~") == group), group)
        hint = "; the run's own loggers log (use_loggers=false: none)" if group == "logger" else ""
        return f"{given}: this command has no {group} to choose{hint}; --help lists its settings"
    cause = err.__cause__
    if not (isinstance(err, ConfigCompositionException) and isinstance(cause, (ConfigKeyError, ConfigAttributeError))):
        return None
    given = re.search(r"use \+(\S+)", str(err))
    setting = given.group(1) if given else str(cause.full_key)
    parent, _, missing = str(cause.full_key).rpartition(".")
    if parent == "analysis":
        families = [f for f in options.options("analysis") if f != "none"]
        if missing in families:
            chosen = _chosen_families(argv)
            fix = f"analysis=[{','.join([*chosen, missing])}]" if chosen is not None else f"{missing} to analysis=[…]"
            return f"{setting}: {missing} is not among the chosen families; add {fix}"
        return f"{setting}: no test family {missing}{nearest(missing, families)}; the families: {', '.join(families)}"
    if not parent and missing in options.groups():  # a group none of whose options is chosen (roar: none)
        choices = " or ".join(f"{missing}={o}" for o in options.options(missing))
        return f"{setting}: no {missing} is chosen (none by default); choose one first: {choices}"
    node = cause.parent_node
    target = node.get("_target_") if node is not None and "_target_" in node else None
    keys = sorted(str(k) for k in node.keys()) if node is not None else []
    if isinstance(target, str):
        group, _, node_path = parent.partition(".")
        chosen = group in options.groups()
        others = options.having(group, node_path, missing) if chosen else []
        if others:  # another option of the group reads it (model.network.decoder_dim: model=pair)
            return (
                f"{cause.full_key}: no such setting of the chosen {group}; "
                f"{' and '.join(f'{group}={o}' for o in others)} {'has' if len(others) == 1 else 'have'} it"
            )
        # the settings a user gives — the node's and its group's files' —, read without importing the constructor:
        # a typo is answered in a second, not after importing Lightning
        keys = sorted(set(keys) | (options.settable(group, node_path) if chosen else set()))
        if not difflib.get_close_matches(missing, keys, n=1):
            from attn_study.job.components import constructor_parameters

            accepted = constructor_parameters(target)
            if accepted is None or missing in accepted:
                return (
                    f"{setting}: not in the config, though {target.rsplit('.', 1)[-1]} takes it; add it as +{setting}"
                )
    close = difflib.get_close_matches(missing, keys, n=1)
    if close:
        fixed = f"{parent}.{close[0]}" if parent else close[0]
        value = setting.partition("=")[2]
        return f"{cause.full_key}: no such setting; did you mean {fixed}{f'={value}' if value else ''}?"
    return f"{cause.full_key}: no such setting; {parent or 'the top level'} has {', '.join(keys)}"


def unparsable_override(argv: list[str]) -> str | None:
    """The first argument of ``argv`` Hydra's grammar cannot read, and how to write it: a value holding ``=``, a
    space or another character of the grammar — a sweep job's directory, ``…/encoder=lstm,seed=13`` — is read only
    when quoted (Hydra reads ``,`` as a sweep and ``=`` as the end of the key). None when each reads alone."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser = OverridesParser.create()
    for arg in argv:
        if arg.startswith("-") or "=" not in arg:
            continue
        try:
            parser.parse_overrides([arg])
        except OverrideParseException:
            key, _, value = arg.partition("=")
            return (
                f"{arg}: Hydra cannot read this value (it holds =, a comma, a space or brackets, as a sweep job's "
                f"directory does); quote it: '{key}=\"{value}\"'"
            )
    return None


def _chosen_families(argv: list[str]) -> list[str] | None:
    """The families an ``analysis=[a,b]`` of ``argv`` chooses; None when it has none (the config's default)."""
    for arg in argv:
        name, sep, value = arg.partition("=")
        if sep and name.lstrip("+~") == "analysis":
            return [name for name in re.findall(r"\w+", value) if name != "none"]
    return None


def one_line_composition_errors(app: str) -> None:
    """Hydra reports every error of ``@hydra.main`` through ``hydra._internal.utils.run_and_report``, its errors of
    composing the config as several lines of advice (``+key`` for a typo); wrapped here, those get
    :func:`composition_error`'s one line, ``<app>: error: …`` with exit status 2, as every other user mistake.
    Any other error goes on to Hydra's own report."""
    from hydra._internal import utils

    report = utils.run_and_report
    if getattr(report, "one_line", False):
        return

    def run_and_report(func):
        def composed():
            try:
                return func()
            except Exception as err:
                line = composition_error(err, sys.argv[1:])
                if line is None:
                    raise
                print(f"{app}: error: {line}", file=sys.stderr)
                sys.exit(2)

        return report(composed)

    run_and_report.one_line = True
    utils.run_and_report = run_and_report


def train_main() -> None:
    """``attn-study``: Hydra's composition errors in one line (:func:`one_line_composition_errors`), then the run."""
    one_line_composition_errors("attn-study")
    _train()


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="config")
def _train(cfg: DictConfig) -> float | None:
    """Train, test and (when configured) analyse; the run directory is Hydra's output dir. A
    complete run directory is skipped; inside a sweep a failure is recorded and the sweep goes on."""
    from attn_study.job.run import run  # heavy imports after Hydra has parsed --help etc.

    _quiet_third_party()
    stopping.install("attn-study", "launch the run again to resume it from its last checkpoint")
    in_sweep = _sweep_settings(cfg)
    hydra_cfg = HydraConfig.get()
    try:
        summary = run(
            cfg,
            hydra_cfg.runtime.output_dir,
            keep_going=in_sweep,
            overrides=list(hydra_cfg.overrides.task),
            hydra=hydra_cfg,
        )
    except UserError as err:
        print(f"attn-study: error: {err}", file=sys.stderr)
        sys.exit(2)
    return summary.get("test/acc") if summary else None


def unquoted_path_error(argv: list[str], options: tuple[str, ...]) -> str | None:
    """The one-line error for a path option whose value Hydra would misparse: a sweep's job directory
    (``dataset=sst,seed=13``) holds ``=`` and ``,`` and must be quoted."""
    for arg in argv:
        name, sep, value = arg.partition("=")
        if sep and name.lstrip("+~") in options and value[:1] not in "'\"" and ("=" in value or "," in value):
            return f"{name}={value}: quote a path holding '=' or ',' for Hydra: \"{name}='{value}'\""
    return None


def analyze_main() -> None:
    """``attn-study-analyze``: refuse an unquoted sweep-job path in one line, then run Hydra (its composition errors
    in one line too)."""
    error = unquoted_path_error(sys.argv[1:], ("ckpt_path",))
    if error:
        print(f"attn-study-analyze: error: {error}", file=sys.stderr)
        sys.exit(2)
    one_line_composition_errors("attn-study-analyze")
    _analyze()


def _check_analyze_options(cfg: DictConfig) -> None:
    """``attn-study-analyze``'s own options (``ranges.ANALYZE``: ``force=maybe``, ``seed=abc``, ``device=bogus``, a
    ``ckpt_path`` or ``hf_model`` that does not exist are refused in one line, before torch is imported), a CUDA
    device asked for that torch cannot see, then torch's threads as asked."""
    from attn_study import ranges
    from attn_study.config import check_config

    table = dict(ranges.ANALYZE)
    if cfg.get("hf_model"):  # a pretrained checkpoint is analysed instead of a run: ckpt_path is not read
        table["ckpt_path"] = ranges.Text()
    elif OmegaConf.is_missing(cfg, "ckpt_path"):
        raise UserError("ckpt_path is required: attn-study-analyze ckpt_path=<run dir or its .ckpt> analysis=[...]")
    check_config(cfg, table)
    import torch

    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise UserError("device=cuda: this machine has no CUDA GPU that torch can use; use device=auto or device=cpu")
    if cfg.get("threads"):
        torch.set_num_threads(int(cfg.threads))


@hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name="analyze")
def _analyze(cfg: DictConfig) -> None:
    """Run an analysis on a saved checkpoint (``attn-study-analyze ckpt_path=... analysis=...``)."""
    _quiet_third_party()
    stopping.install("attn-study-analyze", "the analyses it finished are kept; run it again for the others")
    try:
        _check_analyze_options(cfg)
        if cfg.get("hf_model"):  # a pretrained checkpoint, not a run of this project
            from attn_study.job.pretrained import analyze_pretrained

            analyze_pretrained(cfg, HydraConfig.get().runtime.output_dir)
            return
        from attn_study.job.analyze import analyze  # torch and Lightning: once the options are known good

        analyze(cfg)
    except UserError as err:
        print(f"attn-study-analyze: error: {err}", file=sys.stderr)
        sys.exit(2)


def explain_main(argv: list[str] | None = None) -> None:
    """``attn-study-explain <run> "a text" … [--file texts.txt] [--methods …] [--out page.html]``: the run's prediction
    for each text and the text coloured by each importance method, on the terminal and as one HTML page
    (``attn_study.job.explain``)."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="attn-study-explain",
        description="A trained run's prediction for texts you type, and each text coloured by each importance "
        "method: on the terminal and as one self-contained HTML page.",
    )
    parser.add_argument("run", type=Path, help="a run directory made by attn-study (complete)")
    parser.add_argument("texts", nargs="*", help="texts to explain (quote each)")
    parser.add_argument("--file", type=Path, default=None, help="a text file, one text a line (blank lines skipped)")
    parser.add_argument(
        "--methods",
        default="attention,gradient,loo,integrated_gradients",
        help="importance methods, comma-separated (analysis.importance.METHODS; default: %(default)s)",
    )
    parser.add_argument("--ig-steps", type=int, default=50, help="integrated gradients' steps (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=None, help="the page (default: <run>/explain/<time>.html)")
    args = parser.parse_args(argv)
    try:
        texts = list(args.texts)
        if args.file is not None:
            try:
                texts += [line.strip() for line in args.file.read_text().splitlines() if line.strip()]
            except (OSError, UnicodeDecodeError) as err:
                why = getattr(err, "strerror", None) or err
                raise UserError(f"--file {args.file}: cannot read it ({why})") from None
        if args.ig_steps < 1:
            raise UserError(f"--ig-steps={args.ig_steps}: must be a whole number >= 1")
        from attn_study.job import explain  # torch: once the arguments are read

        methods = [m.strip() for m in args.methods.split(",") if m.strip()]
        path = explain.page_path(args.run, args.out)
        explained = explain.explain(args.run, texts, methods, args.ig_steps)
        print(explain.terminal(explained, colour=sys.stdout.isatty()))
        print(f"page: {explain.write_page(explained, args.run, path)}")
    except UserError as err:
        print(f"attn-study-explain: error: {err}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    train_main()
