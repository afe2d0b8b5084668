"""Job directory names, the expanded grid of a sweep, the sweep files, outcome bookkeeping."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from hydra import compose, initialize_config_dir

from attn_study.cli import CONFIG_DIR
from attn_study.io import write_json_atomic
from attn_study.sweep.naming import MAX_NAME, job_dir_name
from attn_study.sweep.record import expand_grid, job_outcomes


def test_job_dir_name_is_sorted_by_key_and_ignores_settings_that_do_not_change_results():
    a = job_dir_name(
        [
            "encoder=lstm",
            "dataset=sst",
            "sweep=jain_wallace",
            "logger=csv",
            "force=true",
            "paths.data.sst=/x/y",
            "cluster.partition=gpu",
            "threads=1",
        ]
    )
    b = job_dir_name(["dataset=sst", "encoder=lstm"])
    assert a == b == "dataset=sst,encoder=lstm"
    assert job_dir_name(["sweep=smoke"]) == "default"


def test_job_dir_name_makes_paths_safe_and_long_names_unique():
    assert job_dir_name(["dataset.path=../data/sst dir"]) == "dataset.path=.._data_sst_dir"
    long_a = job_dir_name([f"+model.x{i}=value{i}" for i in range(30)])
    long_b = job_dir_name([f"+model.x{i}=value{i}" for i in range(29)] + ["+model.x29=other"])
    assert len(long_a) <= MAX_NAME and len(long_b) <= MAX_NAME and long_a != long_b


def test_expand_grid_is_the_product_and_the_command_line_narrows_it():
    params = {"dataset": "sst,imdb", "encoder": "lstm,cnn,average"}
    assert len(expand_grid(params, ["sweep=x"])) == 6
    narrowed = expand_grid(params, ["dataset=sst", "attention=dot"])
    assert sorted(job_dir_name(j) for j in narrowed) == [
        "attention=dot,dataset=sst,encoder=average",
        "attention=dot,dataset=sst,encoder=cnn",
        "attention=dot,dataset=sst,encoder=lstm",
    ]


@pytest.mark.parametrize(
    "sweep, size, analysis",
    [
        ("jain_wallace", 12 * 3 * 2, "jain_wallace"),
        ("serrano_smith", 4 * 2 * 3, "serrano_smith"),
        ("smoke", 3 * 2, "jain_wallace"),
        ("smoke_serrano_smith", 3, "serrano_smith"),
    ],
)
def test_sweep_files_compose_and_name_their_grid(sweep, size, analysis):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose("config", overrides=[f"sweep={sweep}"], return_hydra_config=True)
    params = dict(cfg.hydra.sweeper.params)
    assert len(expand_grid(params, [f"sweep={sweep}"])) == size
    assert cfg.sweep.name == sweep and list(cfg.analysis) == [analysis]
    assert cfg.hydra.sweep.dir == f"outputs/sweeps/{sweep}"


def test_every_serrano_smith_job_gets_its_analysis_whatever_the_model():
    for model in ("han", "flat"):
        with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
            cfg = compose("config", overrides=["sweep=serrano_smith", f"model={model}", "encoder=conv"])
        assert list(cfg.analysis) == ["serrano_smith"] and cfg.model.name == model


def test_job_outcomes_sort_jobs_by_what_happened_in_this_launch(tmp_path):
    launch = time.time()
    states = {
        "old": ("complete", launch - 100),
        "new": ("complete", launch + 1),
        "bad": ("failed", launch + 1),
        "killed": ("running", launch + 1),
        "stale_failure": ("failed", launch - 100),
    }
    for name, (state, finished) in states.items():
        (tmp_path / name).mkdir()
        write_json_atomic(tmp_path / name / "status.json", {"state": state, "finished": finished})
        (tmp_path / name / "summary.json").write_text("{}")
    out = job_outcomes(tmp_path, [*states, "never_started"], since=launch)
    assert out == {
        "ran": ["new"],
        "skipped": ["old"],
        "elsewhere": [],
        "failed": ["bad"],
        "refused": [],
        "unfinished": ["killed", "stale_failure", "never_started"],
    }


def test_job_outcomes_count_from_each_jobs_own_final_state_when_launches_overlap(tmp_path):
    """Two launches of one sweep at once: each counts what *it* ran; the other's jobs are 'elsewhere'."""
    since = time.time()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        states = {
            "mine": {"state": "complete", "finished": since + 1, "launch": "A"},
            "theirs": {"state": "complete", "finished": since + 2, "launch": "B"},
            "theirs_running": {"state": "running", "launch": "B", "host": os.uname().nodename, "pid": sleeper.pid},
            "mine_killed": {"state": "running", "launch": "A", "host": os.uname().nodename, "pid": 999999999},
            "before": {"state": "complete", "finished": since - 5, "launch": "C"},
        }
        for name, status in states.items():
            (tmp_path / name).mkdir()
            write_json_atomic(tmp_path / name / "status.json", status)
            (tmp_path / name / "summary.json").write_text("{}")
        out = job_outcomes(tmp_path, list(states), since=since, launch="A")
    finally:
        sleeper.kill()
    assert out == {
        "ran": ["mine"],
        "skipped": ["before"],
        "elsewhere": ["theirs", "theirs_running"],
        "failed": [],
        "refused": [],
        "unfinished": ["mine_killed"],
    }


def test_local_overlay_fills_dataset_paths_and_cluster_settings(tmp_path):
    """conf/local/default.yaml (git-ignored) is loaded when present; the command line still wins."""
    import shutil

    conf = tmp_path / "conf"
    shutil.copytree(CONFIG_DIR, conf, symlinks=False)
    shutil.copy(conf / "local" / "example.yaml", conf / "local" / "default.yaml")
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = compose("config", overrides=["dataset=imdb"])
        assert cfg.dataset.path == "/data/nlp/aclImdb_v1.tar.gz" and cfg.cluster.partition == "gpu"
        cfg = compose("config", overrides=["dataset=babi2", "cluster.partition=debug"])
        assert cfg.dataset.path == "/data/nlp/tasks_1-20_v1-2" and cfg.cluster.partition == "debug"
    shutil.rmtree(conf / "local")
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        assert compose("config", overrides=["dataset=imdb"]).dataset.path is None  # optional: absent is fine


def test_slurm_launcher_config_takes_the_cluster_settings():
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose(
            "config",
            overrides=[
                "hydra/launcher=slurm",
                "cluster.partition=p",
                "cluster.account=a",
                "cluster.qos=q",
                "cluster.gpus=2",
                "cluster.time_min=60",
                "cluster.max_requeue=5",
                "sweep=smoke",
            ],
            return_hydra_config=True,
        )
    launcher = cfg.hydra.launcher
    assert launcher._target_ == "hydra_plugins.attn_study_launcher.slurm_launcher.SlurmLauncher"
    assert (
        launcher.partition,
        launcher.account,
        launcher.qos,
        launcher.gpus_per_node,
        launcher.timeout_min,
        launcher.max_num_timeout,
        launcher.name,
    ) == ("p", "a", "q", 2, 60, 5, "smoke")


@pytest.mark.parametrize("recorded", [None, ["experiment", "seed"]])
def test_a_sibling_is_named_by_its_sweeps_record_not_by_this_processs_environment(tmp_path, monkeypatch, recorded):
    """A report or an analysis resolves ``sibling:`` in a process that may have launched another multirun (its
    job keys left in the environment): the sweep's own record decides how its jobs are named."""
    import json

    from attn_study.job.saved import resolve_run
    from attn_study.sweep.naming import JOB_KEYS_ENV, job_dir_name

    sweep = tmp_path / "sweep"
    overrides = ["experiment=adversary", "seed=1", "dataset.path=/data/sst"]
    job = sweep / job_dir_name(overrides, recorded)
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text("\n".join(f"- {o}" for o in overrides) + "\n")
    (sweep / "sweep.json").write_text(json.dumps({} if recorded is None else {"job_keys": recorded}))
    monkeypatch.setenv(JOB_KEYS_ENV, '["encoder"]')  # left by an earlier plain multirun of this process
    expected = sweep / job_dir_name(["seed=1", "dataset.path=/data/sst", "experiment=base"], recorded)
    assert resolve_run("sibling:base", "attention.source", job) == expected


def test_a_first_sweep_into_folders_that_do_not_exist_yet_is_recorded_there(tmp_path, monkeypatch):
    """A fresh project's first sweep: hydra.sweep.dir (``outputs/sweeps/<name>``) is made with its parents, and the
    sweep's record written into it. Launched again (to resume it), the sweep's folder exists: the same record gets
    the second launch."""
    from omegaconf import open_dict

    from attn_study.job.state import LAUNCH_ENV
    from attn_study.sweep.naming import JOB_KEYS_ENV
    from attn_study.sweep.record import SweepRecorder, read_record

    for var in (LAUNCH_ENV, JOB_KEYS_ENV):  # set by the launch: restored afterwards
        monkeypatch.setenv(var, "")
    sweep_dir = tmp_path / "outputs" / "sweeps" / "grid"
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["logger=none", f"hydra.sweep.dir={sweep_dir}"], return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.overrides.task = ["seed=1,2"]
    SweepRecorder().on_multirun_start(cfg)
    assert sorted(read_record(sweep_dir)["jobs"]) == ["seed=1", "seed=2"]
    SweepRecorder().on_multirun_start(cfg)
    record = read_record(sweep_dir)
    assert sorted(record["jobs"]) == ["seed=1", "seed=2"] and len(record["launches"]) == 2
