"""Fixtures shared by every test: an isolated cache and offline W&B, config composition, and the runs trained once
per pytest run."""

from __future__ import annotations

import os

if os.environ.get("PYTEST_XDIST_WORKER"):  # `make test` runs two workers: one torch thread each, subprocesses too
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = "1"

import pytest
import torch

from tests.helpers import TrainedRuns, compose_config

if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_STUDY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")


@pytest.fixture
def make_cfg():
    """``make_cfg(*overrides)`` → the composed run config, as ``attn-study`` would build it."""
    return compose_config


@pytest.fixture(scope="session")
def trained_runs(tmp_path_factory):
    """The runs trained once for the whole pytest run (tests.helpers.TrainedRuns): under xdist, in the base temporary
    folder that every worker's own lies in, so the workers share them. At the end, none may have been changed."""
    base = tmp_path_factory.getbasetemp()
    runs = TrainedRuns((base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "trained-runs")
    yield runs
    runs.check_all_unchanged()  # no test changed a run it was handed to read
