"""Shared fixtures: Hydra composition with tiny settings, an isolated cache, the shared data folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from attn_study.cli import CONFIG_DIR

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

# a model small enough that a whole train/test run takes seconds on a CPU
TINY = [
    "trainer=debug",
    "analysis=none",
    "dataset.source.n_train=96",
    "dataset.source.n_dev=32",
    "dataset.source.n_test=32",
    "model.network.embedding_dim=16",
]


@pytest.fixture(autouse=True)
def isolated_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_STUDY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")


@pytest.fixture
def make_cfg():
    """``make_cfg(*overrides)`` → the composed run config, as ``attn-study`` would build it."""

    def _compose(*overrides: str):
        with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
            return compose("config", overrides=list(overrides))

    return _compose


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data, or skip the test when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not available")
    return path


def cli_env() -> dict:
    env = dict(os.environ)
    env.setdefault("WANDB_SILENT", "true")
    return env
