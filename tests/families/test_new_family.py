"""A new family is one folder + one YAML: in a copy of the package and its configs, an existing family copied
under a new name (``attn_study/families/<name>/`` and ``conf/analysis/<name>.yaml``, its namespace renamed in its
own keys.py) shows up in ``--help``, runs, logs its keys, tracks its own statistics during training (its
``epochs.png``: the tracked keys come from the copy's keys.py, not from the family it was copied from) and appears
in the report, no other file touched — also when the copy draws its random numbers from a stream of its own (named
and numbered in its callback: nothing shared lists the families' streams)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pandas as pd

from tests.helpers import REPO, TINY, cli_env

NAME, NAMESPACE = "erasure_copy", "ec"


def make_copy(root):
    for part in ("attn_study", "conf", "sweeps", "hydra_plugins"):
        shutil.copytree(REPO / part, root / part, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    folder = root / "attn_study" / "families" / NAME
    shutil.copytree(
        REPO / "attn_study" / "families" / "serrano_smith", folder, ignore=shutil.ignore_patterns("__pycache__")
    )
    keys = folder / "keys.py"
    keys.write_text(keys.read_text().replace('NAMESPACE = "ss"', f'NAMESPACE = "{NAMESPACE}"'))
    callback = folder / "callback.py"
    declared = 'STREAMS = {"random_item": 4, "random_ranking": 5}'
    assert declared in callback.read_text()  # the copy's random item gets a stream of its own
    own = callback.read_text().replace(declared, 'STREAMS = {"copy_item": 44, "random_ranking": 5}')
    callback.write_text(own.replace('"random_item"', '"copy_item"'))
    yaml = (REPO / "conf" / "analysis" / "serrano_smith.yaml").read_text()
    yaml = yaml.replace("analysis.serrano_smith", f"analysis.{NAME}").replace(
        "attn_study.families.serrano_smith.callback", f"attn_study.families.{NAME}.callback"
    )
    (root / "conf" / "analysis" / f"{NAME}.yaml").write_text(yaml)


def test_a_copied_family_is_found_runs_logs_its_keys_and_is_reported(tmp_path):
    make_copy(tmp_path)
    env = {**cli_env(), "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    before = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout

    shown = subprocess.run(
        [sys.executable, "-m", "attn_study.cli", "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert shown.returncode == 0 and NAME in shown.stdout, shown.stderr[-2000:]

    run_dir = tmp_path / "run"
    job = subprocess.run(
        [
            sys.executable,
            "-m",
            "attn_study.cli",
            *TINY,
            f"analysis=[{NAME}]",
            "logger=csv",
            f"analysis.{NAME}.max_instances=8",
            f"analysis.{NAME}.every_n_epochs=1",
            f"analysis.{NAME}.val_max_instances=8",
            f"hydra.run.dir={run_dir}",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert job.returncode == 0, job.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    own = json.loads((run_dir / "analysis" / NAME / "summary.json").read_text())
    assert own and all(k.startswith(f"{NAMESPACE}/") for k in own)
    assert f"{NAMESPACE}/n_instances" in summary and summary[f"{NAMESPACE}/n_instances"] == 8
    assert not any(k.startswith("ss/") for k in summary)
    folder = run_dir / "analysis" / NAME
    epochs = pd.read_csv(folder / "epochs.csv")
    assert len(epochs) >= 1 and any(c.startswith(f"{NAMESPACE}/multi/") for c in epochs.columns)
    assert (folder / "epochs.png").is_file()  # drawn from the copy's own TRACKED keys

    report = subprocess.run(
        [sys.executable, "-m", "attn_study.report.cli", str(run_dir)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.returncode == 0, report.stderr[-2000:]
    page = (run_dir / "report" / "index.html").read_text()
    assert "Serrano &amp; Smith Table 2" in page or "Serrano & Smith Table 2" in page
    assert subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True).stdout == before
