"""A sweep job's source found in its sweep's record, and the wait for a source job still running."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from attn_study.errors import UserError
from attn_study.roar import job

JOBS = {
    f"roar.fraction={k},roar.method={m},seed=13": [f"roar.fraction={k}", f"roar.method={m}", "seed=13", "sweep=roar"]
    for k in ("0", "0.1", "0.3")
    for m in ("gradient", "random")
}


def _sweep(tmp_path, jobs=JOBS):
    (tmp_path / "sweep.json").write_text(json.dumps({"jobs": jobs}))
    for name, overrides in jobs.items():
        (tmp_path / name / ".hydra").mkdir(parents=True)
        (tmp_path / name / ".hydra" / "overrides.yaml").write_text("\n".join(f"- {o}" for o in overrides))
    return tmp_path


def _cfg(fraction, recursive, source=None, step=None):
    return OmegaConf.create({"roar": {"fraction": fraction, "recursive": recursive, "source": source, "step": step}})


@pytest.mark.parametrize(
    ("fraction", "recursive", "expected"),
    [("0.3", False, "0"), ("0.1", False, "0"), ("0.3", True, "0.1"), ("0.1", True, "0")],
)
def test_roar_builds_on_k_0_and_recursive_roar_on_the_previous_k_of_the_same_method(
    tmp_path, fraction, recursive, expected
):
    sweep = _sweep(tmp_path)
    found = job.resolve_source(
        _cfg(float(fraction), recursive), sweep / f"roar.fraction={fraction},roar.method=random,seed=13"
    )
    assert found == sweep / f"roar.fraction={expected},roar.method=random,seed=13"


def test_a_sweep_without_the_predecessor_and_a_lone_run_without_a_source_are_refused(tmp_path):
    sweep = _sweep(tmp_path)
    JOBS_WITHOUT_0 = {k: v for k, v in JOBS.items() if not k.startswith("roar.fraction=0,")}
    (sweep / "sweep.json").write_text(json.dumps({"jobs": JOBS_WITHOUT_0}))
    with pytest.raises(UserError, match="no job with zero roar.fraction"):
        job.resolve_source(_cfg(0.3, False), sweep / "roar.fraction=0.3,roar.method=random,seed=13")
    with pytest.raises(UserError, match="roar.source is not set"):
        job.resolve_source(_cfg(0.3, False), tmp_path / "alone")
    assert job.resolve_source(_cfg(0.3, False, str(tmp_path / "x")), tmp_path / "alone") == tmp_path / "x"


def test_a_job_waits_for_its_source_until_it_completes(tmp_path, monkeypatch):
    source = tmp_path / "source"
    source.mkdir()
    (source / "status.json").write_text(json.dumps({"state": "running"}))
    sleeps = []

    def finish(seconds):  # the source completes while the job waits
        sleeps.append(seconds)
        (source / "summary.json").write_text("{}")
        (source / "status.json").write_text(json.dumps({"state": "complete"}))

    monkeypatch.setattr(job.time, "sleep", finish)
    job.wait_for(source, minutes=0.05)
    assert len(sleeps) == 1
    (source / "status.json").write_text(json.dumps({"state": "failed", "finished": 1e12}))  # failed while waiting
    job.wait_for(source, minutes=0.05)
    assert len(sleeps) == 1


# -- issue 38 §7: Madsen et al.'s step ------------------------------------------------------------------------------

STEPS = {
    f"roar.fraction={k},seed=13": [f"roar.fraction={k}", "seed=13", "sweep=roar"] for k in ("0", "0.1", "0.2", "0.4")
}


def test_a_recursive_step_builds_on_the_job_one_step_below(tmp_path):
    """Steps of 0.1: the job at 0.2 builds on 0.1 (0.2 − 0.1 in floats is 0.1 exactly; 0.3 − 0.1 is not 0.2); the
    job at 0.4 finds no job at 0.3 and is refused, though 0.2 is below it; without a step it takes 0.2."""
    sweep = _sweep(tmp_path, STEPS)

    def source(fraction, step):
        return job.resolve_source(_cfg(fraction, True, step=step), sweep / f"roar.fraction={fraction},seed=13").name

    assert source(0.2, 0.1) == "roar.fraction=0.1,seed=13" and source(0.1, 0.1) == "roar.fraction=0,seed=13"
    with pytest.raises(UserError, match=r"roar.fraction=0.3 \(one roar.step=0.1 below"):
        source(0.4, 0.1)
    assert source(0.4, None) == "roar.fraction=0.2,seed=13" and source(0.4, 0.2) == "roar.fraction=0.2,seed=13"
