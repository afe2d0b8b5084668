"""What a team sees in W&B, read back from the offline run's own file: a history of what has a time axis (per
epoch, against ``epoch``), final values in the summary, a config of real types without machine settings,
readable per-instance tables, one W&B run over a resumed run's attempts, ``attn-study-analyze`` runs linked
to their training run, names that tell experiments apart, the code version."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys

import pandas as pd
import pytest
import torch
from lightning.pytorch.loggers import Logger, WandbLogger
from omegaconf import OmegaConf

from attn_study import names, tracking
from attn_study.figures import training as training_figures
from attn_study.job import loggers, state
from attn_study.job.run import run
from tests.helpers import REPO, TINY, compose_config, status, summary
from tests.wandb_records import offline_runs, read_run

TRACKED = [
    *TINY,
    "logger=[wandb,csv]",
    "logger.wandb.group=team-sweep",
    "encoder=average",
    "encoder.hidden_size=8",
    "trainer.max_epochs=2",
    "analysis=[jain_wallace]",
    "analysis.jain_wallace.max_instances=8",
    "analysis.jain_wallace.steps=5",
    "analysis.jain_wallace.permutations=5",
    "analysis.jain_wallace.every_n_epochs=1",
    "analysis.jain_wallace.val_max_instances=8",
]


@pytest.fixture(scope="module")
def trained(trained_runs):
    """One tiny run with a tracked family, logged to W&B (offline) and CSV (trained once for the whole pytest run:
    read, never changed), and its W&B run read back."""
    run_dir = trained_runs.get(*TRACKED)
    (wandb_run,) = offline_runs(run_dir)
    return run_dir, read_run(wandb_run)


def media_roots(keys) -> set[str]:
    return {k.rsplit("/", 1)[0] for k in keys if k.endswith("/_type")}


def test_the_history_holds_only_what_has_a_time_axis(trained):
    run_dir, logged = trained
    keys = logged.history_keys
    roots = media_roots(keys)
    numeric = {k for k in keys if not any(k == r or k.startswith(r + "/") for r in roots)}
    assert numeric, "nothing per epoch was logged"
    assert all(k in ("epoch", "trainer/global_step") or k.startswith(("train/", "val/")) for k in numeric), sorted(
        k for k in numeric if not k.startswith(("train/", "val/"))
    )
    assert "test/acc" not in keys and "jw/tau_grad/mean" not in keys and "data/train_size" not in keys
    assert {"jw/instances", "jw/figures/epochs"} <= roots  # media: in the history, as media panels
    # every per-epoch key is plotted against the epoch, its min, max and last value in the summary
    for key in ("val/acc", "train/loss", "val/jw/tau_grad/mean"):
        metric = logged.metrics[key]
        assert metric.step_metric == "epoch" and metric.summary.min and metric.summary.max and metric.summary.last
        assert set(logged.summary[key]) == {"min", "max", "last"}
    assert logged.metrics["epoch"].options.hidden  # the x axis, not a panel of its own
    epochs = [row["epoch"] for row in logged.history if "val/jw/tau_grad/mean" in row]
    assert epochs == [0, 1]
    steps = [row["_step"] for row in logged.history]
    assert steps == sorted(steps) and steps[0] > 0  # the global step: a resumed attempt continues it


def test_final_values_are_the_summary_and_the_same_as_summary_json(trained):
    run_dir, logged = trained
    on_disk = summary(run_dir)
    for key in ("test/acc", "test/loss", "jw/tau_grad/mean", "data/train_size", "train/epochs", "run/attempts"):
        assert logged.summary[key] == pytest.approx(on_disk[key]), key
    assert logged.summary["jw/hist/tau_grad"]["_type"] == "histogram"  # a histogram has no time axis either


def test_one_epoch_numbering_everywhere(trained, monkeypatch):
    """0 = the first epoch: Lightning's CSV, the family's epochs.csv/parquet, W&B and the figure."""
    run_dir, logged = trained
    metrics = pd.read_csv(run_dir / "csv" / "metrics.csv")
    tracked = pd.read_csv(run_dir / "analysis" / "jain_wallace" / "epochs.csv")
    per_instance = pd.read_parquet(run_dir / "analysis" / "jain_wallace" / "epochs.parquet")
    assert sorted(metrics.dropna(subset=["val/acc"])["epoch"]) == [0, 1]
    assert list(tracked["epoch"]) == [0, 1] and sorted(per_instance["epoch"].unique()) == [0, 1]
    assert [row["epoch"] for row in logged.history if "val/acc" in row] == [0, 1]
    drawn = {}
    monkeypatch.setattr(training_figures, "save_png", lambda fig, path: drawn.setdefault("fig", fig) and path)
    training_figures.epochs_figure(tracked, ["jw/tau_grad/mean"], run_dir / "unused.png")
    assert list(drawn["fig"].axes[0].lines[0].get_xdata()) == [0, 1]


def test_the_csv_history_has_no_final_values(trained):
    """Lightning's test row is at the last step; the analyses' statistics are in summary.json, not metrics.csv."""
    run_dir, _ = trained
    metrics = pd.read_csv(run_dir / "csv" / "metrics.csv")
    assert not [c for c in metrics.columns if c.startswith("jw/") or c.startswith(("data/", "run/"))]
    assert list(metrics["step"]) == sorted(metrics["step"])
    test_row = metrics.dropna(subset=["test/acc"])
    assert len(test_row) == 1 and test_row["step"].item() == metrics["step"].max()


def test_the_config_is_what_one_filters_by_in_real_types(trained):
    _, logged = trained
    config = logged.config
    assert config["analysis/jain_wallace/tests"] == ["correlation", "permutation", "adversarial"]  # a list
    assert config["encoder/hidden_size"] == 8 and config["dataset/name"] == "synthetic"
    assert config["data/labels"] == ["negative", "positive"]
    assert not [k for k in config if k.startswith(("paths/", "logger/", "cluster/", "hydra/", "sweep/"))]
    assert not [k for k in config if k.endswith("_target_") or k in ("lr", "class_prior", "run_name", "force")]
    assert config["code/commit"] == tracking.code_version()["commit"] and config["code/version"] != "unknown"
    assert logged.run.run_group == "team-sweep" and list(logged.run.tags)[:5] == [
        "synthetic",
        "flat",
        "average",
        "additive",
        "softmax",
    ]


def test_the_status_records_the_wandb_id_labels_code_and_numerics(trained):
    run_dir, logged = trained
    recorded = status(run_dir)
    assert recorded["wandb_id"] == logged.run.run_id
    assert recorded["labels"] == ["negative", "positive"]
    assert recorded["code"] == {k.split("/")[1]: v for k, v in logged.config.items() if k.startswith("code/")}
    numerics = {k.split("/")[1]: v for k, v in logged.config.items() if k.startswith("numerics/")}
    assert (
        recorded["numerics"]
        == numerics
        == {
            "torch": torch.__version__,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        }
    )


def test_per_instance_tables_carry_text_and_class_names(trained):
    run_dir, _ = trained
    (path,) = (offline_runs(run_dir)[0] / "files" / "media" / "table" / "jw").glob("instances_*.table.json")
    table = json.loads(path.read_text())
    rows = [dict(zip(table["columns"], row)) for row in table["data"]]
    classes = ("negative", "positive")
    assert rows and all(r["label"] in classes and r["prediction"] in classes for r in rows)
    assert all(isinstance(r["text"], str) and len(r["text"].split()) == r["length"] for r in rows)


def test_an_analyze_run_is_linked_to_its_training_run(trained, tmp_path):
    from attn_study.job.analyze import analyze

    run_dir = tmp_path / "run"
    shutil.copytree(trained[0], run_dir)
    cfg = compose_config(
        f"ckpt_path={run_dir}", "analysis=[jain_wallace]", "analysis.jain_wallace.max_instances=4", name="analyze"
    )
    cfg.analysis.jain_wallace.steps = 3
    cfg.analysis.jain_wallace.permutations = 3
    analyze(cfg)
    training, analysed = (read_run(p) for p in offline_runs(run_dir))
    assert analysed.run.job_type == "analyze" and analysed.run.run_group == training.run.run_group == "team-sweep"
    assert re.fullmatch(
        re.escape(f"{training.run.display_name}-analyze-jain_wallace-") + r"\d{8}-\d{6}", analysed.run.display_name
    )
    assert not [row for row in analysed.history if "epoch" in row]  # its media: in its one history row
    assert analysed.config["analyze/of"] == training.run.run_id == status(run_dir)["wandb_id"]
    assert analysed.config["analyze/run"] == "run"
    assert analysed.config["encoder/name"] == "average" and analysed.config["data/labels"] == ["negative", "positive"]
    assert "jw/tau_grad/mean" in analysed.summary and "jw/tau_grad/mean" not in analysed.history_keys


def test_a_run_of_its_own_and_its_analyses_share_a_group_and_two_analyses_are_named_apart(tmp_path, capsys):
    """A run outside a sweep groups under its directory's name, and each attn-study-analyze of it joins that group
    under a name of its own (two analyses of the same families are two W&B runs a team tells apart). Each analysis
    shows the headline results of the family it analysed on screen."""
    import time

    from attn_study import families
    from attn_study.job.analyze import analyze

    run_dir = tmp_path / "solo"
    run(compose_config(*TINY, "logger=wandb", "encoder=average", "encoder.hidden_size=8"), run_dir)
    for _ in range(2):
        capsys.readouterr()
        options = ["analysis.jain_wallace.tests=[correlation]", "analysis.jain_wallace.max_instances=4"]
        summary = analyze(compose_config(f"ckpt_path={run_dir}", *options, name="analyze"))
        shown = [k for k in families.REGISTRY["jain_wallace"].headline if k in summary]
        on_screen = capsys.readouterr().out
        assert shown and all(re.search(rf"^  {re.escape(k)} ", on_screen, re.M) for k in shown)
        time.sleep(1.1)  # the names tell analyses apart to the second
    # W&B's folders sort by the second they started: the training's and an analysis' may share one
    records = [read_run(p) for p in offline_runs(run_dir)]
    analyses = [r for r in records if "-analyze-" in r.run.display_name]
    (training,) = [r for r in records if r not in analyses]
    assert training.run.run_group == "solo" and [a.run.run_group for a in analyses] == ["solo", "solo"]
    names = [a.run.display_name for a in analyses]
    prefix = f"{training.run.display_name}-analyze-jain_wallace-"
    assert len(set(names)) == 2 and all(n.startswith(prefix) for n in names)
    assert not [r for r in records if "sweep/name" in r.config]  # no sweep's job: the analyses say so too


def test_a_stopped_analysis_ends_its_wandb_run_as_stopped(trained, tmp_path):
    """SIGTERM during attn-study-analyze: the W&B run ends (exit status 143, ``run/stopped_by``), not left running."""
    run_dir = tmp_path / "run"
    shutil.copytree(trained[0], run_dir)
    script = (
        "import sys, time\n"
        "from attn_study.families.jain_wallace.callback import JainWallace\n"
        "def slow(self, *a, **k):\n"
        "    print('measuring', flush=True); time.sleep(120)\n"
        "JainWallace.measure = slow\n"
        "from attn_study.cli import analyze_main\n"
        f"sys.argv = ['attn-study-analyze', 'ckpt_path={run_dir}', 'analysis.jain_wallace.max_instances=4']\n"
        "analyze_main()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    for line in proc.stdout:
        if line.strip() == "measuring":
            break
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143 and "stopped by SIGTERM" in err
    stopped = [read_run(p) for p in offline_runs(run_dir)][-1]
    assert stopped.run.job_type == "analyze" and stopped.summary["run/stopped_by"] == "SIGTERM"
    assert stopped.exit_code == 143


def test_a_resumed_run_continues_its_wandb_run(tmp_path, monkeypatch):
    """A run killed after two of its three epochs resumes from last.ckpt under the same W&B id; the killed
    attempt's offline run stays (``wandb sync`` uploads a run's files as one run, oldest first) and the resumed
    history continues its steps."""
    import lightning as L
    import wandb

    import attn_study.job.attempt as run_module

    cfg = compose_config(*TINY, "logger=wandb", "encoder=average", "encoder.hidden_size=8", "trainer.max_epochs=3")

    class Killed(BaseException):
        pass

    class KillAtEpoch2(L.Callback):
        def on_train_epoch_start(self, trainer, pl_module):
            if trainer.current_epoch == 2:
                raise Killed

    first = tmp_path / "run"
    build_callbacks = run_module.build_callbacks
    with monkeypatch.context() as patch:
        patch.setattr(run_module, "build_callbacks", lambda *a: build_callbacks(*a) + [KillAtEpoch2()])
        with pytest.raises(Killed):
            run(cfg, first)
    wandb.finish()
    before = status(first)
    assert before["state"] == "running" and (first / "checkpoints" / "last.ckpt").is_file()
    run(cfg, first)
    after = status(first)
    assert after["state"] == "complete" and after["attempt"] == 2 and after["wandb_id"] == before["wandb_id"]
    runs = [read_run(p) for p in offline_runs(first)]
    assert len(runs) == 2 and {r.run.run_id for r in runs} == {before["wandb_id"]}
    assert sorted({row["epoch"] for row in runs[0].history}) == [0, 1]
    assert sorted({row["epoch"] for row in runs[1].history}) == [2]
    assert min(row["_step"] for row in runs[1].history) > max(row["_step"] for row in runs[0].history)


def test_a_new_attempt_that_does_not_resume_gets_a_new_wandb_id(tmp_path):
    previous = {"state": "running", "wandb_id": "old12345", "attempt": 1}
    assert state.mark_running(tmp_path, {}, previous, resumed=True)["wandb_id"] == "old12345"
    assert state.mark_running(tmp_path, {}, previous, resumed=False)["wandb_id"] != "old12345"


def test_a_failed_attempt_ends_its_wandb_run_with_exit_status_1(tmp_path, monkeypatch):
    """Training that raises: the run is ``failed`` and its W&B run is ended with exit status 1 (W&B shows it as
    failed), not left open for the next job of a sweep nor ended as finished (status 0)."""
    import lightning as L

    import attn_study.job.attempt as run_module

    class Broken(L.Callback):
        def on_train_epoch_start(self, trainer, pl_module):
            raise RuntimeError("broken on purpose")

    run_dir = tmp_path / "run"
    build_callbacks = run_module.build_callbacks
    monkeypatch.setattr(run_module, "build_callbacks", lambda *a: build_callbacks(*a) + [Broken()])
    cfg = compose_config(*TINY, "logger=wandb", "encoder=average", "encoder.hidden_size=8")
    with pytest.raises(RuntimeError, match="broken on purpose"):
        run(cfg, run_dir)
    assert status(run_dir)["state"] == "failed"
    (failed,) = [read_run(p) for p in offline_runs(run_dir)]
    assert failed.exit_code == 1


SWEEP_JOBS = [
    ["projection=sparsegen_grid/lam-3"],
    ["projection=sparsegen_grid/lam0.5"],
    ["projection=entmax_bisect", "projection.alpha=1.5"],
    ["recipe=jain_wallace"],
    ["training=random_attention_pretraining"],
    ["training=instance_weighting"],
    *[[f"experiment=wiegreffe_pinter/{job}"] for job in ("seed1", "uniform", "adversary_lam0.01")],
    *[[f"experiment=wiegreffe_pinter/{job}"] for job in ("adversary_lam1", "mlp_adversary_lam0.01", "mlp_preloaded")],
    [],
]


def test_run_names_tell_experiments_apart():
    """Every pair of these jobs trains another model (a λ, a recipe, a training variant, a seed, an adversary, the
    run pre-loaded attention comes from): no two get one name. (Jobs that differ only in their analyses share a
    model, and its name; their W&B job type differs.)"""
    resolved = {tuple(job): compose_config(*job) for job in SWEEP_JOBS}
    run_names = {job: cfg.run_name for job, cfg in resolved.items()}
    assert len(set(run_names.values())) == len(run_names), run_names
    assert run_names[()] == "synthetic-flat-lstm-additive-softmax-s13"
    assert run_names[("projection=sparsegen_grid/lam-3",)] == "synthetic-flat-lstm-additive-sparsegen_lam-3-s13"
    assert run_names[("experiment=wiegreffe_pinter/seed1",)].endswith("-s13-m1001")
    tags = {job: list(cfg.logger.wandb.tags) for job, cfg in resolved.items()}
    assert tags[()] == ["synthetic", "flat", "lstm", "additive", "softmax"]
    assert tags[("projection=sparsegen_grid/lam-3",)][-1] == "sparsegen_lam-3"
    assert tags[("training=random_attention_pretraining",)][-1] == "pretrain4"
    assert tags[("recipe=jain_wallace",)][-1] == "recipe_jain_wallace"


def test_a_run_name_is_not_part_of_the_identity():
    """Runs recorded with an older naming are still the same experiment."""
    ident = state.identity(compose_config(*TINY))
    assert "run_name" not in ident
    assert state.same_identity({**ident, "run_name": "synthetic-flat-lstm-additive-softmax-s13-old"}, ident)


def test_the_code_version_outside_a_checkout_says_unknown(tmp_path):
    described = tracking.describe_code(tmp_path)
    assert described["commit"] == "unknown" and described["dirty"] is None
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    if head:  # a checkout (an installed copy has no .git)
        described = tracking.describe_code(REPO)
        assert described["commit"] == head and isinstance(described["dirty"], bool)


def test_a_folder_whose_git_is_no_checkout_has_an_unknown_commit(tmp_path, monkeypatch):
    """git fails there (no repository above either): the commit is unknown and whether it was changed is not said —
    never git's empty output taken for a commit."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    (tmp_path / ".git").mkdir()
    described = tracking.describe_code(tmp_path)
    assert described["commit"] == "unknown" and described["dirty"] is None


def test_an_analysis_logs_the_sweep_name_as_its_training_did_only_for_a_sweeps_job(tmp_path):
    """``sweep/name`` in an analysis' config: for a run whose directory lies in a sweep's (its record beside it), not
    for a run of its own, although the analysis of that one gets a W&B group too (its directory's name)."""
    from attn_study.io import write_json_atomic
    from attn_study.job.analyze import analysis_record
    from attn_study.sweep.naming import SWEEP_RECORD

    cfg = compose_config(*TINY, "logger=wandb", "logger.wandb.group=solo")
    (tmp_path / "solo").mkdir()
    assert "sweep/name" not in analysis_record(cfg, tmp_path / "solo", ["negative", "positive"])
    (tmp_path / "grid" / "job").mkdir(parents=True)
    write_json_atomic(tmp_path / "grid" / SWEEP_RECORD, {"name": "multirun", "group": "multirun-2026-11-29"})
    assert analysis_record(cfg, tmp_path / "grid" / "job", ["negative", "positive"])["sweep/name"] == "multirun"


def test_machine_paths_are_logged_by_their_last_part():
    cfg = compose_config(*TINY, "dataset.path=/home/someone/data/aclImdb_v1.tar.gz")
    config = tracking.logged_config(cfg, in_sweep=True)
    assert config["dataset/path"] == "aclImdb_v1.tar.gz" and config["sweep/name"] == "multirun"
    assert "sweep/name" not in tracking.logged_config(cfg)


def test_windows_and_home_paths_are_logged_by_their_last_part_and_other_values_as_they_are():
    cfg = OmegaConf.create(
        {"dataset": {"path": "C:/Users/someone/aclImdb_v1.tar.gz", "vectors": "~/glove.txt", "split": "data/dev.tsv"}}
    )
    cfg.dataset.note = "a:b"  # a colon, but no drive letter before it
    assert tracking.logged_config(cfg) == {
        "dataset/path": "aclImdb_v1.tar.gz",
        "dataset/vectors": "glove.txt",
        "dataset/split": "data/dev.tsv",
        "dataset/note": "a:b",
    }


class Recording(Logger):
    name, version = "recording", 0

    def __init__(self):
        super().__init__()
        self.logged = []

    def log_metrics(self, metrics, step=None):
        self.logged.append((dict(metrics), step))

    def log_hyperparams(self, params, *args, **kwargs):
        pass


def test_other_loggers_get_the_final_values_once_at_the_last_step():
    other = Recording()
    tracking.publish_summary([other], {"jw/tau_grad/mean": 0.5}, step=752)
    assert other.logged == [({"jw/tau_grad/mean": 0.5}, 752)]


def test_a_logger_that_cannot_finish_says_so_in_one_line_naming_the_moment(caplog):
    """Finalised as a success at the end of the run, as failed at a stop; its failure one error line each time."""

    class Unfinishable(Recording):
        def finalize(self, status):
            self.logged.append(status)
            raise OSError("No space left on device\nwhile closing")

    logger = Unfinishable()
    with caplog.at_level("ERROR"):
        tracking.finish([logger])
        tracking.finish([logger], stopped_by="SIGTERM", code=143)
    assert logger.logged == ["success", "failed"]
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == [
        f"Unfinishable: {moment} not logged (OSError: No space left on device); the results on disk are complete"
        for moment in ("the end of the run", "the stop")
    ]


def test_the_name_resolvers_are_registered():
    cfg = compose_config("projection=sparsegen_grid/lam-100")
    assert cfg.run_name == names.run_name(_root_=cfg)


def test_a_histogram_of_values_equal_but_for_rounding_is_one_bar():
    """The randomisation check's τ's of a constant method differ by 2e-16: numpy cannot cut that range into 64
    bins (wandb.Histogram(values) raised 'Too many bins'); they are one bar holding every value. A real spread is
    numpy's 64 bins."""
    import numpy as np
    import wandb

    tied = -0.14285714285714285 + np.array([0.0, 2e-16, 1e-17, 2e-16])
    counts, edges = tracking.histogram_counts(tied)
    assert counts.tolist() == [4] and edges[0] < tied.min() and tied.max() < edges[1]
    assert wandb.Histogram(np_histogram=(counts, edges)).histogram == [4]
    assert tracking.histogram_counts(np.zeros(3))[0].tolist() == [3]
    spread = np.random.default_rng(0).normal(size=200)
    counts, edges = tracking.histogram_counts(spread)
    expected = np.histogram(spread, bins=64)
    assert counts.tolist() == expected[0].tolist() and edges.tolist() == expected[1].tolist()


class BrokenWandb(WandbLogger):
    """A W&B logger whose run refuses everything (a bug in wandb, a full disk, a lost connection)."""

    def __init__(self):  # no run is started
        pass

    @property
    def experiment(self):
        raise ValueError("Too many bins for data range.\nCannot create 64 finite-sized bins.")


def test_a_loggers_failure_leaves_the_analysis_whole_and_says_so_in_one_line(tmp_path, caplog):
    """The results are on disk and returned; the failure is one error line naming the logger and the error."""
    from attn_study.families.jain_wallace.callback import JainWallace
    from tests.helpers import StubData, tiny_model, token_batch

    family = JainWallace(tests=["correlation"])
    batch = token_batch([[5, 6, 7, 8], [9, 10, 11], [4, 12, 13, 14, 15]], labels=[0, 1, 0])
    with caplog.at_level("ERROR"):
        summary = family.analyse(tiny_model(), StubData(batch), tmp_path, loggers=[BrokenWandb()])
    assert summary["jw/n_instances"] == 3 and family.summary == summary
    assert json.loads((tmp_path / "analysis" / "jain_wallace" / "summary.json").read_text())["jw/n_instances"] == 3
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == [
        "W&B: jw/ results not logged (ValueError: Too many bins for data range.); the results on disk are complete"
    ]


def test_an_epoch_that_cannot_be_chosen_logs_no_nan(tmp_path):
    """recipe=jain_wallace never keeps epoch 0 (training.select_from_epoch=1): the module logs its val/acc, val/f1
    and val/auroc as NaN for model selection, the real values under val/early/. No logger writes the NaN: W&B's
    history holds none, so the summary's min and max of val/acc are numbers, and metrics.csv has an empty cell."""
    import math

    import wandb

    nan = float("nan")
    epochs = [
        ({"epoch": 0, "val/acc": nan, "val/auroc": nan, "val/early/acc": 0.6, "val/loss": 0.7}, 5),
        ({"epoch": 1, "val/acc": 0.8, "val/auroc": 0.9, "val/loss": 0.5}, 10),
    ]
    wandb_logger = loggers.RunLogger(project="attn_study", mode="offline", save_dir=str(tmp_path))
    csv_logger = loggers.RunCSVLogger(save_dir=str(tmp_path), name="csv", version="")
    for metrics, step in epochs:
        wandb_logger.log_metrics(dict(metrics), step=step)
        csv_logger.log_metrics(dict(metrics), step=step)
    csv_logger.save()
    wandb.finish()
    (path,) = offline_runs(tmp_path)
    logged = read_run(path)
    values = [v for row in logged.history for k, v in row.items() if not k.startswith("_")]
    assert values and all(math.isfinite(v) for v in values), logged.history
    assert [row["val/early/acc"] for row in logged.history if "val/early/acc" in row] == [0.6]
    assert [row["epoch"] for row in logged.history if "val/acc" in row] == [1]
    assert logged.summary["val/acc"] == {"min": 0.8, "max": 0.8, "last": 0.8}
    assert "nan" not in (tmp_path / "csv" / "metrics.csv").read_text().lower()
    assert pd.read_csv(tmp_path / "csv" / "metrics.csv")["val/acc"].tolist()[1] == 0.8


def test_the_training_bar_shows_the_epoch_as_the_files_number_it_and_no_noise():
    from attn_study import progress

    assert progress.epoch_label(0, 2) == "Epoch 0 (1 of 2)" and progress.epoch_label(3, -1) == "Epoch 3"
    shown = progress.shown({"v_num": "t5q_", "val/acc": float("nan"), "train/loss": 0.5, "val/f1": float("inf")})
    assert shown == {"train/loss": 0.5}


def test_each_analyze_logs_inside_the_run_beside_the_earlier_ones(trained, tmp_path):
    """attn-study-analyze's Hydra directory (its cli.log) is <run>/analyze/<time>/ when ckpt_path names a run,
    outputs/analyze/<time>/ otherwise (a pretrained model; a wrong path, refused once it runs); each analysis's CSV
    log is csv/analyze_<n>/, so a second one replaces nothing."""
    from attn_study.config import analyze_dir
    from attn_study.job.analyze import analysis_config

    run_dir = tmp_path / "run"
    shutil.copytree(trained[0], run_dir)
    t = "2026-01-01_00-00-00"
    assert analyze_dir(str(run_dir), t) == str(run_dir / "analyze" / t)
    assert analyze_dir(str(run_dir / "checkpoints" / "best.ckpt"), t) == str(run_dir / "analyze" / t)
    assert analyze_dir(str(tmp_path / "typo"), t) == analyze_dir(None, t) == f"outputs/analyze/{t}"
    from hydra import compose, initialize_config_dir

    from attn_study.cli import CONFIG_DIR

    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        hydra = compose("analyze", [f"ckpt_path={run_dir}"], return_hydra_config=True).hydra
    assert hydra.run.dir.startswith(str(run_dir / "analyze" / "20")) and hydra.output_subdir is None
    cfg = compose_config(f"ckpt_path={run_dir}", "analysis=[jain_wallace]", name="analyze")
    assert analysis_config(cfg, run_dir).logger.csv.version == "analyze_1"
    (run_dir / "csv" / "analyze_1").mkdir()
    assert analysis_config(cfg, run_dir).logger.csv.version == "analyze_2"


def test_summary_json_holds_no_nan_and_says_why_each_value_is_undefined():
    from attn_study.job.summary import finite_summary

    nan = float("nan")
    clean, undefined = finite_summary({"test/auroc": nan, "jw/tau_grad/mean": nan, "test/acc": 0.8, "x": float("inf")})
    assert clean == {"test/auroc": None, "jw/tau_grad/mean": None, "test/acc": 0.8, "x": None}
    assert undefined == {
        "test/auroc": "undefined: the test split has one class",
        "jw/tau_grad/mean": "undefined: no instance where it is defined",
        "x": "inf",
    }


def test_the_answer_on_screen_is_each_familys_headline_with_its_interval():
    """``summary.answer``: the test metrics, the dev score chosen by, each family's HEADLINE_KEYS with their 95 %
    interval (only the families asked for), and a dash for an undefined value."""
    from attn_study.job.summary import answer

    summary = {
        "test/acc": 0.8159,
        "test/f1": 0.8,
        "test/auroc": None,
        "val/auroc_best": 0.9,
        "jw/tau_grad/mean": 0.3434,
        "jw/tau_grad/ci_low": 0.33,
        "jw/tau_grad/ci_high": 0.35649,
        "ff/attention/comprehensiveness/aopc/mean": 0.00012,
        "ff/attention/comprehensiveness/aopc/ci_low": -0.001,
        "ff/attention/comprehensiveness/aopc/ci_high": 0.0011,
    }
    lines = [line.split() for line in answer(summary).splitlines()]
    assert lines[1:5] == [["test/acc", "0.816"], ["test/f1", "0.800"], ["test/auroc", "—"], ["val/auroc_best", "0.900"]]
    assert ["jw/tau_grad/mean", "0.343", "[0.330,", "0.356]"] in lines
    assert ["ff/attention/comprehensiveness/aopc/mean", "0.00012", "[-0.001,", "0.001]"] in lines
    only = [line.split()[0] for line in answer(summary, ["jain_wallace"]).splitlines()[1:]]
    assert "jw/tau_grad/mean" in only and not any(k.startswith("ff/") for k in only)
    assert answer({}) == ""
