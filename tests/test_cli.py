"""The commands as the README and ``--help`` show them: a debug run that finishes, the messages users read."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from attn_study import options
from attn_study.cli import _quiet_third_party, analyze_main, train_main
from attn_study.config import config_differences
from attn_study.data.processed import Preprocessing, build
from attn_study.errors import UserError
from attn_study.job import saved
from attn_study.job.attempt import train_and_test
from attn_study.job.plan import check_plan, load_run
from attn_study.job.run import run
from attn_study.sweep.naming import JOB_KEYS_ENV, job_dir_name, swept_keys
from attn_study.sweep.record import SweepRecorder
from tests.data.test_recipes import ListSource
from tests.helpers import REPO, TINY, TWO_JOBS, cli_env, compose_config, conf_options, entry_point, job_dirs

# a debug run's test (trainer=debug: 2 batches) sees 32 of these 80 test instances
CUT_SHORT = [*TINY, "logger=none", "encoder.hidden_size=8", "dataset.source.n_test=80", "dataset.eval_batch_size=16"]


def test_a_test_cut_short_still_records_every_test_instances_attention(trained_runs):
    """``trainer=debug`` tests 2 batches; attention.parquet holds all 80 instances, each as the model gives it."""
    run_dir = trained_runs.get(*CUT_SHORT)  # read only
    assert trained_runs.summary(*CUT_SHORT)["data/test_size"] == 80
    frame = pd.read_parquet(run_dir / "attention.parquet")
    loaded = load_run(run_dir, force=True)
    expected = saved.record(loaded.model, loaded.datamodule)["test"]
    assert list(frame["uid"]) == list(loaded.datamodule.split("test").uids)
    for row, (alpha, probs) in enumerate(zip(expected.attention, expected.outputs)):
        assert frame["attention"].iloc[row] == pytest.approx(alpha, abs=1e-6)
        assert frame["probabilities"].iloc[row] == pytest.approx(probs, abs=1e-6)


def test_a_partial_attention_record_is_refused_in_one_line(trained_runs, make_cfg, tmp_path):
    """A run compared with a base whose attention.parquet lacks instances stops before training, in one line."""
    base = trained_runs.copy(*CUT_SHORT, into=tmp_path, name="base")
    frame = pd.read_parquet(base / "attention.parquet")
    frame.iloc[:40].to_parquet(base / "attention.parquet")
    compared = make_cfg(*CUT_SHORT, "analysis=[wiegreffe_pinter]", f"analysis.wiegreffe_pinter.base={base}")
    with pytest.raises(UserError) as refused:
        train_and_test(check_plan(compared), tmp_path / "compared")
    assert "\n" not in str(refused.value) and "40 vs 80" in str(refused.value)
    assert not (tmp_path / "compared" / "checkpoints").exists()


# -- the refusal of a run directory holding another configuration ---------------------------------


def test_config_differences_lead_with_the_choices_and_keep_constructor_paths_out():
    stored = {
        "encoder/name": "lstm",
        "encoder/_target_": "attn_study.models.encoders.RNNEncoder",
        "encoder/cell": "lstm",
        "analysis/jain_wallace/split": "test",
        "analysis/jain_wallace/steps": 500,
        "model/optimizer/lr": 0.001,
        "run_name": "synthetic-flat-lstm",
        "seed": 13,
    }
    current = {
        "encoder/name": "cnn",
        "encoder/_target_": "attn_study.models.encoders.CNNEncoder",
        "encoder/filters": 64,
        "analysis/jain_wallace/split": "test",
        "analysis/jain_wallace/steps": 30,
        "analysis/sparsity/split": "test",
        "model/optimizer/lr": 0.01,
        "model/new_setting": None,  # added later, off: the same experiment
        "run_name": "synthetic-flat-cnn",
        "seed": 13,
    }
    assert config_differences(stored, current, limit=None) == [
        "encoder: lstm → cnn",
        "analysis: [jain_wallace] → [jain_wallace,sparsity]",
        "analysis.jain_wallace.steps: 500 → 30",
        "model.optimizer.lr: 0.001 → 0.01",
    ]
    assert config_differences(stored, current, limit=2)[-1] == "… 2 more"
    assert config_differences({"analysis": {}}, {"analysis/sparsity/split": "test"}) == ["analysis: [] → [sparsity]"]
    only_paths = {**stored, "encoder/_target_": "elsewhere.RNNEncoder"}
    assert config_differences(stored, only_paths) == [
        "encoder._target_: attn_study.models.encoders.RNNEncoder → elsewhere.RNNEncoder"
    ]


def test_a_single_run_refused_for_another_configuration_says_what_differs_and_hydra_run_dir(
    trained_runs, make_cfg, tmp_path, caplog
):
    run_dir = trained_runs.copy(*TINY, "logger=none", "encoder.hidden_size=8", into=tmp_path)
    other = make_cfg(*TINY, "logger=none", "encoder=cnn", "encoder.filters=4")
    with pytest.raises(UserError) as refused:
        run(other, run_dir)
    message = str(refused.value)
    assert "(encoder: lstm → cnn)" in message and message.endswith("choose another hydra.run.dir")
    assert "_target_" not in message and "\n" not in message
    assert run(other, run_dir, keep_going=True) is None  # a sweep job: logged, the sweep goes on
    assert "choose another hydra.sweep.dir" in caplog.text


# -- what the data filter says ------------------------------------------------------------------------


def test_the_data_filter_says_each_drop_with_its_reason_and_nothing_for_a_reason_that_dropped_nothing(caplog):
    caplog.set_level("INFO", logger="attn_study.data.processed")
    lengths = (1, 2, 3, 5, 5, 7)
    texts = {split: [(" ".join(["w"] * n), n % 2) for n in lengths] for split in ("train", "dev", "test")}
    build(ListSource(texts), Preprocessing())
    assert "toy/test: 6 read, 6 kept\n" in caplog.text + "\n" and "None" not in caplog.text
    assert "dropped" not in caplog.text
    caplog.clear()
    data = build(ListSource(texts), Preprocessing(min_length=2, max_length=6, drop_longest=True))
    assert (
        "toy/test: 6 read, 2 kept; dropped: 1 shorter than 2 tokens, 1 longer than 6 tokens, 2 of the split's "
        "longest length 5 (drop_longest)"
    ) in caplog.text
    assert data.stats["test"] == {"read": 6, "kept": 2, "too_short": 1, "too_long": 1, "longest": 2}
    caplog.clear()
    build(ListSource(texts), Preprocessing(drop_longest=True))
    assert "toy/test: 6 read, 5 kept; dropped: 1 of the split's longest length 7 (drop_longest)" in caplog.text
    assert "longer than" not in caplog.text and "shorter than" not in caplog.text


# -- --help ---------------------------------------------------------------------------------------------

CONF = REPO / "conf"


def help_of(main, monkeypatch, capsys) -> str:
    """``--help`` of the console entry point ``main``, run in this process (each entry point is run in a fresh one
    in tests/test_run.py and tests/report/test_report.py)."""
    code, out, err = entry_point(main, "--help", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0, err[-2000:]
    return out


def option_lines(text: str) -> dict[str, str]:
    """``{option: description}`` from the help's indented ``  name  description`` lines, per group header."""
    found, group = {}, None
    for line in text.splitlines():
        header = re.match(r"^([a-z_/]+)=", line)
        if header:
            group = header.group(1)
        elif group and re.match(r"^  \S", line):
            name, _, description = line.strip().partition(" ")
            found[f"{group}={name}"] = description.strip()
        elif not line.strip():
            group = None
    return found


def test_help_lists_every_selectable_option_with_a_description_and_nothing_else(monkeypatch, capsys):
    """The listing is conf/'s files (each of which composes and passes the schema: tests/sweep/test_trust.py) and
    the launchers, each of which composes here."""
    listed = option_lines(help_of(train_main, monkeypatch, capsys))
    selectable, other = conf_options()
    launchers = {k for k in listed if k.startswith("hydra/launcher=")}
    assert set(listed) - launchers == selectable
    assert not set(listed) & other and "trainer=_base" in other and "local=example" in other
    for option, text in listed.items():
        assert text and len(text) <= 110, option
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        for option in sorted(launchers):
            compose("config", overrides=[option], return_hydra_config=True)
    assert {"hydra/launcher=basic", "hydra/launcher=joblib", "hydra/launcher=slurm"} <= launchers


def test_each_option_files_first_comment_line_is_its_description(tmp_path):
    option = tmp_path / "conf" / "encoder"
    option.mkdir(parents=True)
    (option / "x.yaml").write_text("# @package _global_\n#\n# One line.\n# More.\nname: x\n")
    (option / "y.yaml").write_text("name: y  # not a header\n")
    (option / "_base.yaml").write_text("# A base.\n")
    assert options.options("encoder", tmp_path / "conf") == {"x": "One line.", "y": ""}


def test_analyze_help_lists_only_what_applies_to_a_trained_model(monkeypatch, capsys):
    text = help_of(analyze_main, monkeypatch, capsys)
    listed = option_lines(text)
    assert {k.partition("=")[0] for k in listed} == {"analysis"}
    assert "ckpt_path=???" in text
    assert not re.search(r"(?m)^(encoder|dataset|trainer|training|model)=", text)


def test_report_help_is_plain_text(monkeypatch, capsys):
    from attn_study.report.cli import main as report_main

    text = help_of(report_main, monkeypatch, capsys)
    assert "index.html" in text and "--out DIR" in text
    assert "``" not in text and "`" not in text


# -- how a multirun names its job folders -------------------------------------------------------------


def test_swept_keys_are_those_given_several_values():
    task = ["encoder=lstm,cnn", "++trainer.max_epochs=1", "seed=range(3)"]
    keys = swept_keys({"dataset": "sst,imdb", "x": "1"}, task)
    assert keys == {"dataset", "encoder", "seed"}
    overrides = ["encoder=lstm", "++trainer.max_epochs=1", "trainer=debug", "logger=none", "seed=0"]
    assert job_dir_name(overrides, keys) == "encoder=lstm,seed=0"
    assert job_dir_name(overrides) == "encoder=lstm,seed=0,trainer=debug,++trainer.max_epochs=1"  # every override
    assert job_dir_name(["trainer=debug"], keys) == "default"


def launch_record(tmp_path, *overrides: str, task: list[str]) -> SweepRecorder:
    """The sweep record's start of a launch of ``task`` (as Hydra gives it) into ``tmp_path``."""
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=[*overrides, f"hydra.sweep.dir={tmp_path}"], return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.overrides.task = task
    recorder = SweepRecorder()
    recorder.on_multirun_start(cfg)
    return recorder


def test_a_plain_multirun_names_its_jobs_by_what_varies_and_a_narrowed_relaunch_finds_them(tmp_path, monkeypatch):
    monkeypatch.delenv(JOB_KEYS_ENV, raising=False)
    fixed = ["trainer=debug", "++trainer.max_epochs=1", "logger=none"]
    first = launch_record(tmp_path, *fixed, task=["encoder=lstm,cnn", "seed=1,2", *fixed])
    assert sorted(first.jobs) == [f"encoder={e},seed={s}" for e in ("cnn", "lstm") for s in (1, 2)]
    assert json.loads(os.environ[JOB_KEYS_ENV]) == ["encoder", "seed"]  # what the jobs' own resolver reads
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        job = compose("config", overrides=["encoder=cnn", "seed=2", *fixed], return_hydra_config=True)
    assert job.hydra.sweep.subdir == "encoder=cnn,seed=2"
    narrowed = launch_record(tmp_path, *fixed, task=["encoder=cnn", "seed=1,2", *fixed])
    assert sorted(narrowed.jobs) == ["encoder=cnn,seed=1", "encoder=cnn,seed=2"]
    assert json.loads((tmp_path / "sweep.json").read_text())["job_keys"] == ["encoder", "seed"]


def test_a_sweep_files_jobs_keep_every_override_in_their_names(tmp_path, monkeypatch):
    monkeypatch.setenv(JOB_KEYS_ENV, '["encoder"]')  # left by an earlier plain multirun in this process
    recorder = launch_record(tmp_path, "sweep=smoke", task=["sweep=smoke", "attention=dot", "seed=5"])
    assert sorted(recorder.jobs) == [
        "attention=dot,encoder=average,seed=5",
        "attention=dot,encoder=cnn,seed=5",
        "attention=dot,encoder=lstm,seed=5",
    ]
    assert JOB_KEYS_ENV not in os.environ


def test_a_plain_multirun_runs_into_folders_named_by_what_varies(tmp_path, monkeypatch, capsys):
    sweep = tmp_path / "sweep"
    quick = ["logger=none", "++trainer.max_epochs=1", f"hydra.sweep.dir={sweep}"]
    code, _, err = entry_point(train_main, "-m", *TWO_JOBS, *quick, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0, err[-2000:]
    assert sorted(d.name for d in job_dirs(sweep)) == ["encoder=average", "encoder=lstm"]
    code, out, _ = entry_point(
        train_main, "-m", "encoder=lstm", *TWO_JOBS[1:], *quick, monkeypatch=monkeypatch, capsys=capsys
    )
    assert code == 0 and "1 skipped" in out


# -- console noise ----------------------------------------------------------------------------------


def test_the_noise_filters_are_for_those_exact_messages():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _quiet_third_party()
        warnings.warn("Checkpoint directory /r/checkpoints exists and is not empty.", UserWarning, stacklevel=1)
        warnings.warn("`isinstance(treespec, LeafSpec)` is deprecated, use ...", FutureWarning, stacklevel=1)
        warnings.warn("Checkpoint directory /r/other exists and is not empty.", UserWarning, stacklevel=1)
        warnings.warn("something else is deprecated", FutureWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == [
        "Checkpoint directory /r/other exists and is not empty.",
        "something else is deprecated",
    ]


def test_a_run_with_its_output_in_a_file_says_what_informs_and_no_noise(tmp_path):
    env = {k: v for k, v in cli_env().items() if k != "WANDB_SILENT"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "attn_study.cli",
            *TINY,
            "logger=[wandb,csv]",
            "analysis=[jain_wallace]",
            "analysis.jain_wallace.max_instances=8",
            "analysis.jain_wallace.tests=[correlation]",
            f"hydra.run.dir={tmp_path}/run",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    noises = ("anonymous setting", "LeafSpec", "exists and is not empty", "jain_wallace/correlation", "None tokens")
    for noise in noises:
        assert noise not in output, noise
    for information in ("synthetic/test: 32 read, 32 kept", "analysis:  jain_wallace on test", "results:"):
        assert information in output, information
    # the answer on screen: the headline statistics with their intervals, as summary.json holds them
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    shown = [line.split() for line in done.stdout.splitlines() if line.startswith("  jw/tau_grad/mean")]
    assert len(shown) == 1, done.stdout[-2000:]
    value, low, high = (f"{summary[f'jw/tau_grad/{part}']:.3f}" for part in ("mean", "ci_low", "ci_high"))
    assert shown[0] == ["jw/tau_grad/mean", value, f"[{low},", f"{high}]"]
    assert f"  test/acc {summary['test/acc']:.3f}".split() in [line.split() for line in done.stdout.splitlines()]


def test_trainer_debug_bounds_the_analyses_too():
    """trainer=debug is quick end to end: every chosen family analyses 32 test instances unless told otherwise."""
    debug = compose_config("trainer=debug", "analysis=[agreement,sanity]")
    assert debug.trainer.max_epochs == 1 and debug.trainer._target_ == "lightning.pytorch.Trainer"
    assert [debug.analysis[f].max_instances for f in ("agreement", "sanity")] == [32, 32]
    chosen = compose_config("trainer=debug", "analysis=[sanity]", "analysis.sanity.max_instances=5")
    assert chosen.analysis.sanity.max_instances == 5
    assert compose_config("analysis=[sanity]").analysis.sanity.max_instances is None


def test_help_lists_every_familys_options_with_their_defaults():
    """``--help`` (both commands) ends with the options every family shares, each with its comment, then each
    family's own as analysis.<family>.<key>=default — every key of its YAML, none left out."""
    import yaml

    for app in ("train", "analyze"):
        text = options.help_text(app)
        part = text[text.index("== Family options") :]
        assert "  max_instances=null " in part and "  val_max_instances=200 " in part and "_target_" not in part
        joined = " ".join(part.split())
        for family in options.options("analysis"):
            values = yaml.safe_load((CONF / "analysis" / f"{family}.yaml").read_text()) or {}
            own = [k for k in values if k not in ("defaults", "_target_", "tests", "val_tests")]
            assert all(f" {k}=" in joined or f"{family}: {k}=" in joined for k in own), family
        assert "jain_wallace: tests=[correlation,permutation,adversarial]," in joined
        assert "auc_tp_fractions=[0,0.1," in joined and "target=null" in joined  # numbers as numbers, defaults


@pytest.mark.parametrize(
    ("option", "says"),
    [
        ("force=maybe", "force=maybe: must be true or false, not 'maybe'"),
        ("use_loggers=maybe", "use_loggers=maybe: must be true or false, not 'maybe'"),
        ("use_loggers='false'", "use_loggers='false': must be true or false, not 'false'"),
        ("seed=abc", "seed=abc: must be a whole number in [0, 4294967295] or null, not 'abc'"),
        ("seed=nan", "seed=nan: must be a whole number in [0, 4294967295] or null, not nan"),
        ("seed=-1", "seed=-1: must be a whole number in [0, 4294967295] or null (null: the analysed run's seed)"),
        ("device=bogus", "device=bogus: choose one of auto, cpu, cuda"),
        ("threads=0", "threads=0: must be a whole number >= 1 or null"),
        ("+ckpt=x", "ckpt: no such setting (did you mean ckpt_path?)"),
    ],
)
def test_attn_study_analyzes_own_options_are_typed_as_attn_studys(option, says):
    """attn-study-analyze's top level (ranges.ANALYZE) is checked as attn-study's is, before any run is read."""
    from attn_study.cli import _check_analyze_options

    with pytest.raises(UserError) as err:
        _check_analyze_options(compose_config("ckpt_path=/runs/x", option, name="analyze"))
    assert str(err.value).startswith(says)


def test_attn_study_analyze_refuses_a_cuda_device_the_machine_lacks_and_sets_threads(monkeypatch):
    import torch

    from attn_study.cli import _check_analyze_options

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(UserError, match=r"^device=cuda: this machine has no CUDA GPU that torch can use"):
        _check_analyze_options(compose_config(f"ckpt_path={REPO}", "device=cuda", name="analyze"))
    with pytest.raises(UserError, match=r"^ckpt_path=/runs/x: no such file or folder"):  # before torch is imported
        _check_analyze_options(compose_config("ckpt_path=/runs/x", name="analyze"))
    before = torch.get_num_threads()
    try:
        _check_analyze_options(compose_config(f"ckpt_path={REPO}", "threads=1", name="analyze"))
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
