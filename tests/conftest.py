"""Fixtures shared by every test: an isolated cache and offline W&B, and config composition."""

from __future__ import annotations

import pytest

from tests.helpers import compose_config


@pytest.fixture(autouse=True)
def isolated_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_STUDY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")


@pytest.fixture
def make_cfg():
    """``make_cfg(*overrides)`` → the composed run config, as ``attn-study`` would build it."""
    return compose_config
