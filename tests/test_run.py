"""End to end: compose the config with Hydra, train, test, write the run directory; the CLI."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest
from hydra.errors import MissingConfigException

from attn_study.cli import analyze_main, train_main
from attn_study.job.attempt import train_and_test
from tests.helpers import REPO, TINY, accuracy_by_hand, cli_env, compose_config, entry_point

CLI = [sys.executable, "-m", "attn_study.cli"]


def test_run_directory_contract(make_cfg, tmp_path):
    cfg = make_cfg(*TINY, "logger=csv", "encoder.hidden_size=8")
    summary = train_and_test(cfg, tmp_path / "run")
    run = tmp_path / "run"
    on_disk = json.loads((run / "summary.json").read_text())
    assert on_disk == summary
    assert on_disk["undefined"] == {} and on_disk["warnings"] == []
    for key in (
        "test/acc",
        "test/f1",
        "test/auroc",
        "test/loss",
        "val/acc_best",
        "train/seconds_per_epoch",
        "data/train_size",
    ):
        assert key in on_disk
    assert on_disk["data/train_size"] == 96
    # trainer=debug trains 1 epoch: the seconds per epoch are all the training's seconds
    assert on_disk["train/epochs"] == 1 and on_disk["train/seconds_per_epoch"] == on_disk["train/seconds"] > 0
    assert (run / "checkpoints" / "best.ckpt").is_file()
    assert "val/acc" in (run / "csv" / "metrics.csv").read_text().splitlines()[0]
    assert not list(run.glob(".*.tmp"))


@pytest.mark.parametrize("epochs, per_epoch", [(4, 3.0), (1, 12.0), (0, 12.0)])
def test_the_seconds_per_epoch_are_the_training_seconds_over_the_epochs_trained(epochs, per_epoch):
    """12 s of training over 4 epochs: 3 s each; over 1: 12 s; stopped before an epoch ended: the 12 s as one."""
    from types import SimpleNamespace

    from attn_study.job.summary import training_summary

    trainer = SimpleNamespace(checkpoint_callback=None, current_epoch=epochs)
    module = SimpleNamespace(train_seconds=12.0, test_conicity=[])
    stats = {"vocab_size": 50, "train": {"kept": 10}, "dev": {"kept": 4}, "test": {"kept": 4}}
    data = SimpleNamespace(data=SimpleNamespace(stats=stats), split=lambda name: SimpleNamespace(labels=[0, 1, 1, 0]))
    summary = training_summary(trainer, module, data, {"test/acc": 0.75})
    assert (summary["train/epochs"], summary["train/seconds"]) == (epochs, 12.0)
    assert summary["train/seconds_per_epoch"] == per_epoch


def test_the_trainer_shows_the_projects_training_bar_unless_it_is_turned_off(make_cfg, tmp_path):
    """No ``trainer.enable_progress_bar`` given: the project's training bar (not Lightning's own); false: none."""
    from attn_study.job.attempt import _trainer
    from attn_study.progress import training_bar

    shown = _trainer(make_cfg(*TINY), tmp_path, [], []).progress_bar_callback
    assert type(shown) is type(training_bar())
    hidden = _trainer(make_cfg(*TINY, "++trainer.enable_progress_bar=false"), tmp_path, [], [])
    assert hidden.progress_bar_callback is None


def test_a_test_cut_short_says_how_many_instances_a_pass_of_their_own_recorded(make_cfg, tmp_path, caplog):
    """trainer=debug tests 2 batches of 16 of the 80 test instances: the other 80 − 2 × 16 = 48 are recorded by a
    pass of their own, and the log says so, naming the file they go to. (``logger=none``: no logger at all.)"""
    cut_short = ["logger=none", "encoder.hidden_size=8", "dataset.source.n_test=80", "dataset.eval_batch_size=16"]
    with caplog.at_level(logging.INFO, logger="attn_study.job.attempt"):
        train_and_test(make_cfg(*TINY, *cut_short), tmp_path / "run")
    assert "attention.parquet: 48 of the 80 test instances were not tested" in caplog.text
    assert not (tmp_path / "run" / "lightning_logs").exists()  # logger=none: no logger of Lightning's own either


def test_same_seed_same_metrics(make_cfg, tmp_path):
    a = train_and_test(make_cfg(*TINY, "logger=none", "encoder=cnn", "encoder.filters=4"), tmp_path / "a")
    b = train_and_test(make_cfg(*TINY, "logger=none", "encoder=cnn", "encoder.filters=4"), tmp_path / "b")
    c = train_and_test(make_cfg(*TINY, "logger=none", "encoder=cnn", "encoder.filters=4", "seed=14"), tmp_path / "c")
    keys = ("test/acc", "test/loss", "test/auroc")
    assert [a[k] for k in keys] == [b[k] for k in keys]
    assert a["test/loss"] != c["test/loss"]


def test_wandb_offline_run_is_written_into_the_run_directory(make_cfg, tmp_path):
    train_and_test(make_cfg(*TINY, "logger=wandb", "encoder=average", "encoder.hidden_size=8"), tmp_path / "run")
    runs = list((tmp_path / "run" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and list(runs[0].glob("*.wandb"))


@pytest.mark.parametrize(
    "combo",
    [
        ["encoder=gru", "encoder.hidden_size=8", "attention=dot", "projection=sparsemax"],
        ["encoder=conv", "encoder.filters=4", "projection=entmax15"],
        ["encoder=noenc", "projection=sparsegen"],
        [
            "encoder=transformer",
            "encoder.model_dim=8",
            "encoder.num_heads=2",
            "encoder.ff_dim=16",
            "attention=dot",
            "projection=entmax_bisect",
        ],
    ],
)
def test_other_components_compose_and_run(make_cfg, tmp_path, combo):
    summary = train_and_test(make_cfg(*TINY, "logger=none", *combo), tmp_path / "run")
    assert summary["test/acc"] == pytest.approx(accuracy_by_hand(tmp_path / "run"))


def test_wrong_choice_lists_the_available_options(make_cfg):
    with pytest.raises(MissingConfigException, match=r"(?s)Available options.*average.*cnn.*lstm"):
        make_cfg("encoder=lstmm")


def test_cli_user_error_is_one_line(tmp_path, monkeypatch, capsys):
    args = ["dataset=sst", f"dataset.path={tmp_path}/missing", "logger=none", f"hydra.run.dir={tmp_path}/run"]
    code, _, err = entry_point(train_main, *args, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 2
    errors = [line for line in err.splitlines() if line.startswith("attn-study: error:")]
    assert len(errors) == 1 and "dataset.path=" in errors[0] and "no such file or folder" in errors[0]
    assert "Traceback" not in err
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").glob("*.json"))  # refused before any run


@pytest.mark.slow
def test_cli_default_run(tmp_path):
    """`attn-study` with no arguments (the README's `make run`), into a temporary run directory."""
    proc = subprocess.run(
        [*CLI, f"hydra.run.dir={tmp_path}/run"], capture_output=True, text=True, cwd=REPO, env=cli_env(), timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["test/acc"] > 0.85
    assert "results:" in proc.stdout and "W&B run:" in proc.stdout


def test_token_level_analysis_on_a_sentence_level_model_fails_before_training(make_cfg, tmp_path):
    from attn_study.errors import UserError

    cfg = make_cfg("trainer=debug", "logger=none", "model=han", "encoder=gru", "analysis=jain_wallace")
    with pytest.raises(UserError, match="analysis=serrano_smith"):
        train_and_test(cfg, tmp_path / "run")
    assert not (tmp_path / "run" / "checkpoints").exists()
    assert list(make_cfg("model=han").analysis) == ["serrano_smith"]  # the HAN's default analysis


@pytest.mark.parametrize("lr, says", [("1e30", "train/loss = nan"), ("1e10", "100 × the loss of a uniform guess")])
def test_diverged_training_fails_the_run_in_one_line(tmp_path, monkeypatch, capsys, lr, says):
    args = [*TINY, "logger=none", f"model.optimizer.lr={lr}", "trainer.max_epochs=2", f"hydra.run.dir={tmp_path}"]
    code, _, err = entry_point(train_main, *args, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 2
    errors = [line for line in err.splitlines() if line.startswith("attn-study: error:")]
    assert len(errors) == 1 and "diverged" in errors[0] and says in errors[0] and "model.optimizer.lr" in errors[0]
    assert "Traceback" not in err
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["state"] == "failed" and "diverged" in status["error"] and not (tmp_path / "summary.json").exists()


ANALYZE = [sys.executable, "-c", "from attn_study.cli import analyze_main; analyze_main()"]


def test_user_mistakes_of_the_command_line_get_one_line(tmp_path, monkeypatch, capsys):
    """Each entry point once in a fresh process (what a user runs), the other mistakes in this one."""
    env = {k: v for k, v in cli_env().items() if k not in ("WANDB_MODE", "WANDB_API_KEY")} | {"HOME": str(tmp_path)}
    job = f"{tmp_path}/encoder=lstm,seed=13"
    in_subprocess = [
        ([*CLI, *TINY, "logger=wandb", "logger.wandb.mode=online", f"hydra.run.dir={tmp_path}/a"], "wandb login"),
        ([*ANALYZE, f"ckpt_path='{job}'"], "encoder=lstm,seed=13: no such file or folder"),  # quoted: read whole
    ]
    for args, says in in_subprocess:
        proc = subprocess.run(args, capture_output=True, text=True, cwd=REPO, env=env)
        errors = [line for line in proc.stderr.splitlines() if ": error:" in line]
        assert proc.returncode == 2 and len(errors) == 1 and says in errors[0], (args, proc.stderr[-1500:])
        assert "Traceback" not in proc.stderr
    (tmp_path / "a-file").write_text("")
    in_process = [
        (train_main, [*TINY, f"hydra.run.dir={tmp_path}/a-file"], "a-file: a file, not a directory; choose another"),
        (train_main, ["trainer.max_epoch=1"], "did you mean trainer.max_epochs=1?"),  # Hydra's own error, one line
        (analyze_main, [], "ckpt_path is required"),
        (analyze_main, [f"ckpt_path={tmp_path}"], "no checkpoint"),
        (analyze_main, [f"ckpt_path={job}"], "quote a path"),
    ]
    for main, args, says in in_process:
        code, _, err = entry_point(main, *args, monkeypatch=monkeypatch, capsys=capsys)
        errors = [line for line in err.splitlines() if ": error:" in line]
        assert code == 2 and len(errors) == 1 and says in errors[0], (args, err[-1500:])
        assert "Traceback" not in err


@pytest.mark.parametrize(
    "rule", [["training.select_from_epoch=2"], ["training=random_attention_pretraining", "training.pretrain_epochs=2"]]
)
def test_the_checkpoint_tested_is_the_best_of_the_epochs_that_may_be_chosen(make_cfg, tmp_path, rule):
    """With a learning rate too small to change anything, every epoch scores the same on dev and the first
    candidate stays the best (ties never replace it): the tested checkpoint is epoch 2 — the first that the rule
    (Jain & Wallace's select_from_epoch, or the end of random-attention pretraining) lets be chosen — not 0."""
    import torch

    run_dir = tmp_path / "run"
    train_and_test(make_cfg(*TINY, "trainer.max_epochs=3", "model.optimizer.lr=1e-12", "logger=csv", *rule), run_dir)
    assert torch.load(run_dir / "checkpoints" / "best.ckpt", weights_only=False)["epoch"] == 2


@pytest.mark.parametrize(("name", "app"), [("config", "attn-study"), ("analyze", "attn-study-analyze")])
def test_an_output_directory_that_cannot_be_written_is_one_line_before_hydra_makes_it(
    tmp_path, monkeypatch, capsys, name, app
):
    """The entry points' Hydra callback (``hydra.callbacks.output_dir``) checks ``hydra.run.dir`` (and a sweep's
    ``hydra.sweep.dir``) before Hydra creates it: a file there, or a directory it may not write in (as a read-only
    one refuses), is one line and exit status 2."""
    import errno
    import tempfile

    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from tests.helpers import CONFIG_DIR

    (tmp_path / "a-file").write_text("")

    def callback(*overrides):
        with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
            cfg = compose(name, overrides=list(overrides), return_hydra_config=True)
        return instantiate(cfg.hydra.callbacks.output_dir), cfg

    def refused(start, cfg) -> str:
        with pytest.raises(SystemExit) as exit_:
            start(config=cfg)
        assert exit_.value.code == 2
        lines = capsys.readouterr().err.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"{app}: error: ")
        return lines[0]

    check, cfg = callback(f"hydra.run.dir={tmp_path / 'a-file'}")
    assert "a-file: a file, not a directory; choose another hydra.run.dir" in refused(check.on_run_start, cfg)
    check, cfg = callback(f"hydra.run.dir={tmp_path / 'run'}")
    check.on_run_start(config=cfg)  # writable: nothing said
    assert (tmp_path / "run").is_dir() and capsys.readouterr().err == ""

    def read_only(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", read_only)
    said = refused(check.on_run_start, cfg)
    assert "run: cannot write there (Permission denied); choose another hydra.run.dir" in said
    if name == "config":
        check, cfg = callback(f"hydra.sweep.dir={tmp_path / 'a-file'}")
        assert "choose another hydra.sweep.dir" in refused(check.on_multirun_start, cfg)


@pytest.mark.parametrize(
    "overrides, says",
    [
        (
            ["analysis=[faithfullness]"],
            "analysis=[…,faithfullness,…]: no test family faithfullness (did you mean faithfulness?); the families: "
            "agreement, faithfulness, jain_wallace, sanity, serrano_smith, shortcuts, sparsity, wiegreffe_pinter",
        ),
        (
            ["analysis=[sanity]", "analysis.jain_wallace.max_instances=5"],
            "analysis.jain_wallace.max_instances=5: jain_wallace is not among the chosen families; add "
            "analysis=[sanity,jain_wallace]",
        ),
        (
            ["model=han", "analysis.jain_wallace.max_instances=5"],
            "analysis.jain_wallace.max_instances=5: jain_wallace is not among the chosen families; add jain_wallace "
            "to analysis=[…]",
        ),
        (["analysis.jain_walace.steps=5"], "analysis.jain_walace.steps=5: no test family jain_walace (did you mean"),
        (["trainer.max_epoch=1"], "trainer.max_epoch: no such setting; did you mean trainer.max_epochs=1?"),
        (
            ["analysis.jain_wallace.max_instancs=5"],
            "analysis.jain_wallace.max_instancs: no such setting; did you mean analysis.jain_wallace.max_instances=5?",
        ),
        (["model.optimizer.zzz=1"], "model.optimizer.zzz: no such setting; model.optimizer has amsgrad, "),
        (["trainer.precision=16"], "trainer.precision=16: not in the config, though Trainer takes it; add it as "),
        (["encoder=lstmm"], "encoder=lstmm: no such option (did you mean lstm?); choose from average, cnn, "),
        # a setting of another option of the group: who has it, never a setting the code gives (model.network.encoder)
        (
            ["model.network.decoder_dim=3"],
            "model.network.decoder_dim: no such setting of the chosen model; model=pair has it",
        ),
        (
            ["model.network.embeding_dim=3"],
            "model.network.embeding_dim: no such setting; did you mean model.network.embedding_dim",
        ),
        # a group none of whose options is chosen
        (
            ["roar.step=0"],
            "roar.step=0: no roar is chosen (none by default); choose one first: roar=recursive or roar=roar",
        ),
        (
            ["trainer=debug", "training.base=/runs/sweep/encoder=lstm,seed=13"],
            "training.base=/runs/sweep/encoder=lstm,seed=13: Hydra cannot read this value (it holds =, a comma, a "
            """space or brackets, as a sweep job's directory does); quote it: 'training.base="/runs/sweep/encoder=""",
        ),
    ],
)
def test_hydras_composition_errors_get_one_line_naming_the_fix(overrides, says):
    """What Hydra says in several lines (a list of search paths, 'Key ... is not in struct', '+key=...' advice for a
    typo) as the one line attn-study prints instead (attn_study.cli.composition_error)."""
    from attn_study.cli import composition_error

    with pytest.raises(Exception) as raised:
        compose_config(*overrides)
    line = composition_error(raised.value, overrides)
    assert line is not None and line.startswith(says) and "\n" not in line, line
    assert "+" not in line or "add it as +trainer.precision=16" in line


def test_a_group_attn_study_analyze_does_not_choose_gets_one_line():
    """attn-study-analyze composes its own config, which chooses no logger (the run's own are used): Hydra's
    'Could not override …' and its '+logger=csv' advice become one line."""
    from attn_study.cli import composition_error

    overrides = ["ckpt_path=/runs/x", "logger=csv"]
    with pytest.raises(Exception) as raised:
        compose_config(*overrides, name="analyze")
    line = composition_error(raised.value, overrides)
    assert line == (
        "logger=csv: this command has no logger to choose; the run's own loggers log (use_loggers=false: none); "
        "--help lists its settings"
    )
