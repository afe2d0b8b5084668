"""A run directory's life: skip when complete, force, refuse a different config, record failures,
clean up after a killed attempt, resume training from the last checkpoint."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from attn_study.cli import train_main
from attn_study.errors import UserError
from attn_study.job import state
from attn_study.job.run import run
from tests.helpers import REPO, TINY, claimed_elsewhere, cli_env, entry_point, status, summary

QUICK = [*TINY, "logger=csv", "encoder=average", "encoder.hidden_size=8"]


def test_complete_run_is_skipped_and_force_runs_it_again(trained_runs, make_cfg, tmp_path, capsys):
    run_dir = trained_runs.copy(*QUICK, into=tmp_path)  # a complete run
    first = summary(run_dir)
    done = status(run_dir)
    assert done["state"] == "complete" and done["labels"] == ["negative", "positive"] and done["attempt"] == 1
    again = run(make_cfg(*QUICK, "logger=none", "threads=1"), run_dir)  # loggers and threads: same experiment
    assert again == first and status(run_dir) == done
    assert "complete already, skipped" in capsys.readouterr().out
    run(make_cfg(*QUICK, "force=true"), run_dir)
    assert status(run_dir)["finished"] > done["finished"] and status(run_dir)["attempt"] == 2


def test_complete_results_of_another_config_are_never_overwritten(trained_runs, make_cfg, tmp_path):
    run_dir = trained_runs.copy(*QUICK, into=tmp_path)  # a complete run
    before = (run_dir / "summary.json").read_bytes()
    with pytest.raises(UserError, match=r"another configuration \(.*seed: 13 → 14.*force=true"):
        run(make_cfg(*QUICK, "seed=14"), run_dir)
    assert run(make_cfg(*QUICK, "seed=14"), run_dir, keep_going=True) is None
    assert (run_dir / "summary.json").read_bytes() == before
    assert status(run_dir)["state"] == "complete" and "seed" in status(run_dir)["conflict"]["message"]


def test_failure_is_recorded_in_the_run_dir(make_cfg, tmp_path):
    cfg = make_cfg(*QUICK, "model.optimizer.lr=1e30")  # known only once training runs: it diverges
    with pytest.raises(UserError):
        run(cfg, tmp_path / "a")
    failed = status(tmp_path / "a")
    assert failed["state"] == "failed" and "train/loss" in failed["error"]
    assert "Traceback" in (tmp_path / "a" / "error.txt").read_text()
    assert run(cfg, tmp_path / "b", keep_going=True) is None  # in a sweep: recorded, not raised
    assert status(tmp_path / "b")["state"] == "failed"


def test_a_run_refused_once_its_data_is_read_leaves_no_directory_and_an_earlier_one_is_kept(make_cfg, tmp_path):
    """A refusal before training (here: a text longer than the encoder's positions, known once the data is read)
    removes what the new attempt wrote; a directory that held an earlier attempt keeps it, marked failed."""
    refused = make_cfg(*TINY, "logger=csv", "encoder=transformer", "encoder.max_positions=4")
    with pytest.raises(UserError, match="encoder.max_positions=4"):
        run(refused, tmp_path / "new")
    assert not (tmp_path / "new").exists()
    assert run(refused, tmp_path / "in_sweep", keep_going=True) is None and not (tmp_path / "in_sweep").exists()
    earlier = tmp_path / "earlier"
    run(make_cfg(*QUICK, "model.optimizer.lr=1e30"), earlier, keep_going=True)  # a failed attempt
    with pytest.raises(UserError, match="encoder.max_positions=4"):
        run(refused, earlier)
    assert status(earlier)["state"] == "failed" and (earlier / ".hydra" / "config.yaml").is_file()


def test_a_killed_attempt_is_cleared_and_run_again(trained_runs, make_cfg, tmp_path):
    cfg = make_cfg(*QUICK)
    run_dir = trained_runs.copy(*QUICK, into=tmp_path)  # a complete run
    first = summary(run_dir)
    record = status(run_dir)
    # what a kill between writing summary.json and the completion marker leaves behind
    state._write(run_dir, {**record, "state": "running", "pid": 999999999})
    (run_dir / "summary.json").write_text('{"test/acc": -1}')
    (run_dir / "analysis" / "stale").mkdir(parents=True)
    assert not state.is_complete(run_dir)
    result = run(cfg, run_dir)
    assert result["test/loss"] == first["test/loss"] and summary(run_dir) == result
    assert not (run_dir / "analysis").exists() and status(run_dir)["state"] == "complete"


def test_a_live_attempt_on_this_host_is_not_run_twice(make_cfg, tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        state._write(tmp_path, {"state": "running", "host": os.uname().nodename, "pid": sleeper.pid})
        with pytest.raises(UserError, match=f"being run by process {sleeper.pid}"):
            run(make_cfg(*QUICK), tmp_path)
    finally:
        sleeper.kill()


def fake_training(trained: list):
    """A stand-in for ``train_and_test`` that notes the call, takes a moment and writes the summary."""

    def train_and_test(plan, run_dir, **kwargs):
        trained.append(threading.get_ident())
        time.sleep(0.3)
        (run_dir / "summary.json").write_text("{}")
        return {}

    return train_and_test


def test_two_launches_reaching_one_job_at_the_same_moment_run_it_once(make_cfg, tmp_path, monkeypatch):
    """Two launches read the job's status before either has marked it running (each read waits for the other's,
    unless the run's claim has refused the other already): exactly one trains it, the other leaves it (refused)."""
    together = threading.Barrier(2, timeout=2)
    read = state.read_status

    def read_at_once(run_dir):
        found = read(run_dir)
        with contextlib.suppress(threading.BrokenBarrierError):
            together.wait()
        return found

    trained: list = []
    monkeypatch.setattr(state, "read_status", read_at_once)
    monkeypatch.setattr("attn_study.job.attempt.train_and_test", fake_training(trained))
    cfg, results = make_cfg(*QUICK), []
    launches = [threading.Thread(target=lambda: results.append(run(cfg, tmp_path, keep_going=True))) for _ in range(2)]
    for launch in launches:
        launch.start()
    for launch in launches:
        launch.join(30)
    assert len(trained) == 1 and sorted(result is None for result in results) == [False, True]
    assert status(tmp_path)["state"] == "complete" and status(tmp_path)["attempt"] == 1


def test_a_job_claimed_by_another_process_is_left_to_it_even_with_force_and_free_once_it_ends(
    make_cfg, tmp_path, monkeypatch
):
    """The claim is the OS's lock on ``.attn-study.lock``: another process holding it (before it has written any
    status) keeps the job from ``run`` — ``force=true`` included, nothing written — and a holder killed with
    SIGKILL leaves no stale claim behind."""
    with claimed_elsewhere(tmp_path):
        for force in ("false", "true"):
            with pytest.raises(UserError, match="being run by another attn-study process; wait for it or stop it"):
                run(make_cfg(*QUICK, f"force={force}"), tmp_path)
        assert [p.name for p in tmp_path.iterdir()] == [".attn-study.lock"]
    trained: list = []
    monkeypatch.setattr("attn_study.job.attempt.train_and_test", fake_training(trained))
    run(make_cfg(*QUICK), tmp_path)
    assert len(trained) == 1 and status(tmp_path)["state"] == "complete"


@pytest.mark.parametrize(("error", "held"), [(errno.ENOLCK, True), (errno.EOPNOTSUPP, True), (errno.EIO, None)])
def test_a_file_system_without_locks_leaves_the_pid_check_to_guard_and_any_other_error_is_raised(
    tmp_path, monkeypatch, error, held
):
    """No locks on the file system (ENOLCK, EOPNOTSUPP): the claim is granted (``still_running`` is then the
    guard); any other error of ``flock`` is not taken for either answer."""

    def no_locks(fd, operation):
        raise OSError(error, os.strerror(error))

    monkeypatch.setattr(state.fcntl, "flock", no_locks)
    if held is None:
        with pytest.raises(OSError), state.claim(tmp_path):
            pass
    else:
        with state.claim(tmp_path) as granted:
            assert granted is held


def test_a_job_another_launch_finished_while_this_one_reached_its_claim_is_skipped_not_run_again(
    trained_runs, make_cfg, tmp_path, monkeypatch
):
    """This launch read no status; before it takes the claim, the other launch completes the job and lets go.
    Under the claim the status is read again: the complete run is skipped, its results untouched."""
    complete = trained_runs.copy(*QUICK, into=tmp_path, name="other")
    job, hold = tmp_path / "job", state.claim

    @contextlib.contextmanager
    def finished_meanwhile(run_dir):
        shutil.copytree(complete, run_dir, dirs_exist_ok=True)  # the other launch's attempt, complete
        with hold(run_dir) as held:
            yield held

    trained: list = []
    monkeypatch.setattr(state, "claim", finished_meanwhile)
    monkeypatch.setattr("attn_study.job.attempt.train_and_test", fake_training(trained))
    assert run(make_cfg(*QUICK), job) == summary(complete)
    assert trained == [] and status(job) == status(complete)


def launch_and_stop(args, tmp_path, sig, output: bool = False, ready=None):
    """Start ``args``; once ``ready`` exists (default: once a few epochs have their ``last.ckpt``), send ``sig``;
    return the seconds the process took to end after the signal (with ``output``: and its stderr and exit code).
    A process still running 20 s after the signal is killed and counts as taking that long."""
    errors = tmp_path.parent / f"{tmp_path.name}.stderr"
    proc = subprocess.Popen(args, cwd=REPO, env=cli_env(), stdout=subprocess.DEVNULL, stderr=errors.open("w"))
    deadline = time.time() + 120
    while not (ready or tmp_path / "checkpoints" / "last.ckpt").exists() and time.time() < deadline:
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    if ready is None:
        time.sleep(0.5)  # let a few epochs pass
    sent = time.time()
    proc.send_signal(sig)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    took = time.time() - sent
    return (took, errors.read_text(), proc.returncode) if output else took


def test_training_killed_mid_way_resumes_to_the_uninterrupted_result(tmp_path, monkeypatch, capsys):
    """A real kill (SIGKILL) after the first epochs; the relaunch continues from checkpoints/last.ckpt
    and ends with exactly the numbers of a run that was never interrupted: the same batches (the
    sampler's order is a function of the epoch) and the same random numbers (restored from the
    checkpoint). Its training time counts both attempts. The killed attempt runs in a process of its own, the
    relaunch and the uninterrupted run in this one (one torch thread everywhere: the same arithmetic)."""

    def overrides(directory):
        return [
            *QUICK,
            "threads=1",
            "trainer.max_epochs=40",
            "trainer.limit_train_batches=3",
            "model.network.dropout=0.3",
            f"hydra.run.dir={directory}",
        ]  # dropout: random numbers in training

    resumed = tmp_path / "resumed"
    launch_and_stop([sys.executable, "-m", "attn_study.cli", *overrides(resumed)], resumed, signal.SIGKILL)
    if status(resumed)["state"] == "complete":
        pytest.skip("the run finished before it could be killed")
    import torch

    seconds_before = torch.load(resumed / "checkpoints" / "last.ckpt", weights_only=False)["train_seconds"]
    code, out, err = entry_point(train_main, *overrides(resumed), monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0, err[-2000:]
    assert "resuming training from" in out + err
    final = status(resumed)
    assert final["state"] == "complete" and final["attempt"] == 2
    assert summary(resumed)["train/epochs"] == 40 and not (resumed / "checkpoints" / "last.ckpt").exists()
    assert summary(resumed)["train/seconds"] > seconds_before > 0
    # the run's own time counts the earlier attempt's training too (the report's minutes)
    assert summary(resumed)["run/attempts"] == 2 and summary(resumed)["run/seconds"] > summary(resumed)["train/seconds"]
    uninterrupted = tmp_path / "uninterrupted"
    code, _, err = entry_point(train_main, *overrides(uninterrupted), monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0, err[-2000:]
    for key in ("test/acc", "test/loss", "test/auroc", "val/acc_best", "train/epochs"):
        assert summary(resumed)[key] == summary(uninterrupted)[key], key


#: attn-study whose training step, from the third epoch on, first touches the file named by $STUCK and then never
#: returns from one torch call that releases the GIL — what a step over very long texts is like for a signal
#: handler (Python runs one between bytecodes, in the main thread: only once such a call returns)
STUCK_STEP = """
import os, sys, torch
from pathlib import Path
from attn_study.cli import train_main
from attn_study.models.module import AttentionModule

step = AttentionModule.training_step

def stuck(self, batch, batch_idx):
    if self.current_epoch >= 2:
        Path(os.environ["STUCK"]).touch()
        torch.futures.Future().wait()
    return step(self, batch, batch_idx)

AttentionModule.training_step = stuck
sys.argv = ["attn-study", *sys.argv[1:]]
train_main()
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_training_at_once_says_so_and_leaves_a_resumable_run(tmp_path, sig, monkeypatch, capsys):
    """Even with the main thread inside a torch call that does not return, the process ends within seconds,
    says so, and notes the signal on the run, left ``running`` with an intact ``last.ckpt`` for the relaunch."""
    overrides = [*QUICK, "trainer.max_epochs=400", "trainer.limit_train_batches=3", f"hydra.run.dir={tmp_path}"]
    stuck = tmp_path.parent / f"{tmp_path.name}.stuck"
    monkeypatch.setenv("STUCK", str(stuck))
    took, stderr, code = launch_and_stop(
        [sys.executable, "-c", STUCK_STEP, *overrides], tmp_path, sig, output=True, ready=stuck
    )
    assert stuck.exists(), stderr[-2000:]
    assert took < 5, f"{took:.1f} s after {signal.Signals(sig).name}"
    assert code == 128 + sig and f"stopped by {signal.Signals(sig).name}; launch the run again to resume" in stderr
    record = status(tmp_path)
    assert record["state"] == "running" and record["interrupted"]["signal"] == signal.Signals(sig).name
    import torch

    torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=False)  # intact: written atomically
    relaunch = [*overrides[:-2], "trainer.max_epochs=4", overrides[-1]]
    code, _, err = entry_point(train_main, *relaunch, monkeypatch=monkeypatch, capsys=capsys)
    # another max_epochs is another configuration: the unfinished run is cleared and started over
    assert code == 0 and status(tmp_path)["state"] == "complete", err[-2000:]
    assert "interrupted" not in status(tmp_path)


def test_a_stopped_attempt_removes_its_half_written_analysis_folder_before_it_is_marked_interrupted(tmp_path):
    """What a signal during a run's analyses leaves: the family's hidden ``.partial`` folder removed first (the
    finished families' folders kept), then the run marked interrupted — never the other way round, where a run
    looks cleanly stopped while half-written results lie in it."""
    from attn_study.job import run as run_module

    (tmp_path / "analysis" / ".sparsity.partial").mkdir(parents=True)
    (tmp_path / "analysis" / ".sparsity.partial" / "instances.parquet").write_bytes(b"half")
    (tmp_path / "analysis" / "jain_wallace").mkdir()
    running = state.mark_running(tmp_path, {"seed": 13}, {})
    seen = []
    real = state.mark_interrupted

    def marking(run_dir, record, signal_name):
        seen.append(sorted(p.name for p in (run_dir / "analysis").iterdir()))
        return real(run_dir, record, signal_name)

    try:
        state.mark_interrupted = marking
        run_module.stopped(tmp_path, running, "SIGINT")
    finally:
        state.mark_interrupted = real
    assert seen == [["jain_wallace"]]  # the partial folder was gone when the run was marked
    assert status(tmp_path)["interrupted"]["signal"] == "SIGINT" and status(tmp_path)["state"] == "running"


def test_an_unreadable_status_never_lets_a_relaunch_delete_results(trained_runs, make_cfg, tmp_path):
    run_dir = trained_runs.copy(*QUICK, into=tmp_path)  # a complete run
    files = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file() and p.name != "status.json"}
    (run_dir / "status.json").write_text('{"state": "compl')  # damaged
    with pytest.raises(UserError, match=r"status.json is unreadable.*force=true"):
        run(make_cfg(*QUICK, "seed=14"), run_dir)
    assert run(make_cfg(*QUICK, "seed=14"), run_dir, keep_going=True) is None
    assert {p: p.read_bytes() for p in files} == files  # nothing deleted or changed
    run(make_cfg(*QUICK, "seed=14", "force=true"), run_dir)  # the user's explicit choice
    assert status(run_dir)["state"] == "complete"


def test_a_truncated_checkpoint_is_named_not_resumed(trained_runs, make_cfg, tmp_path):
    cfg = make_cfg(*QUICK)
    run_dir = trained_runs.copy(*QUICK, into=tmp_path)  # a complete run
    first = summary(run_dir)
    record = status(run_dir)
    state._write(run_dir, {**record, "state": "running", "pid": 999999999})  # killed
    last = run_dir / "checkpoints" / "last.ckpt"
    last.write_bytes((run_dir / "checkpoints" / "best.ckpt").read_bytes()[:100])
    with pytest.raises(UserError, match=r"last.ckpt: unreadable checkpoint.*resume=false"):
        run(cfg, run_dir)
    assert last.is_file() and (run_dir / "summary.json").is_file()  # nothing deleted
    assert run(make_cfg(*QUICK, "resume=false"), run_dir)["test/loss"] == first["test/loss"]  # trained over


# -- what a relaunch trusts: the summary, every setting, the resume point's config (issue 41) ---------------------


def test_a_complete_run_whose_summary_is_gone_is_trained_again(trained_runs, make_cfg, tmp_path):
    """``complete`` in status.json is not enough: without summary.json the results are not whole, so the run is
    not complete and a relaunch trains it again (it does not skip it, nor fail reading the missing file)."""
    cfg = make_cfg(*QUICK)
    run_dir = trained_runs.copy(*QUICK, into=tmp_path)  # a complete run
    first = summary(run_dir)
    (run_dir / "summary.json").unlink()
    assert status(run_dir)["state"] == "complete" and not state.is_complete(run_dir)
    again = run(cfg, run_dir)
    assert status(run_dir)["state"] == "complete" and status(run_dir)["attempt"] == 2
    assert summary(run_dir) == again and again["test/loss"] == first["test/loss"]


def test_a_setting_only_one_identity_has_is_the_same_only_when_it_is_null():
    """A setting added to the code later (absent from an old run's record) matches only its off value, null; a
    value either side lacks is a different experiment, said as ``<absent>``."""
    assert state.same_identity({"a": 1}, {"a": 1, "b": None}) and state.same_identity({"a": 1, "b": None}, {"a": 1})
    assert not state.same_identity({"a": 1}, {"a": 1, "b": 2})
    assert not state.same_identity({"a": 1, "b": 0}, {"a": 1})  # 0 and False are values, not null
    assert state.identity_differences({"a": 1}, {"a": 1, "b": 2}) == ["b: <absent> → 2"]


def test_a_complete_run_recorded_without_a_setting_now_set_is_another_configuration(trained_runs, make_cfg, tmp_path):
    cfg = make_cfg(*QUICK)
    run_dir = trained_runs.copy(*QUICK, into=tmp_path)  # a complete run
    record = status(run_dir)
    old = {k: v for k, v in record["identity"].items() if k != "model/optimizer/lr"}  # recorded before lr existed
    state._write(run_dir, {**record, "identity": old})
    with pytest.raises(UserError, match=r"another configuration \(.*model.optimizer.lr: <absent> → 0.001"):
        run(cfg, run_dir)


def test_a_killed_run_relaunched_with_another_setting_starts_over_not_from_its_last_checkpoint(
    trained_runs, make_cfg, tmp_path, capsys
):
    """A killed attempt (``running``, its process gone) left ``checkpoints/last.ckpt``; the relaunch has another
    learning rate. It must not continue the other configuration's training: it trains from scratch, and ends with
    the numbers of a fresh run of the new setting (resuming the finished epoch would test the old model)."""
    trained_runs.copy(*QUICK, into=tmp_path)  # a complete run at tmp_path/run
    record = status(tmp_path / "run")
    state._write(tmp_path / "run", {**record, "state": "running", "pid": 999999999})  # killed
    checkpoints = tmp_path / "run" / "checkpoints"
    (checkpoints / "last.ckpt").write_bytes((checkpoints / "best.ckpt").read_bytes())
    capsys.readouterr()
    changed = [*QUICK, "model.optimizer.lr=0.05"]
    relaunched = run(make_cfg(*changed), tmp_path / "run")
    assert "resuming training from" not in capsys.readouterr().out
    fresh = run(make_cfg(*changed), tmp_path / "fresh")
    for key in ("test/loss", "test/acc", "val/acc_best"):
        assert relaunched[key] == fresh[key], key
    assert status(tmp_path / "run")["identity"]["model/optimizer/lr"] == 0.05


def test_only_a_live_process_of_this_host_started_before_the_status_is_still_running():
    """A ``running`` status names its host, PID and start: another host's, a missing PID and this very process (a
    relaunch in the process that crashed) are not running it; a live process that started before the status is;
    one that started after it (the PID reused) is not."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        here, started = os.uname().nodename, state.process_start_time(sleeper.pid)
        assert started is not None and abs(started - time.time()) < 60
        live = {"state": "running", "host": here, "pid": sleeper.pid, "started": started + 5}
        assert state.still_running(live)
        assert not state.still_running({**live, "host": here + "-other"})
        assert not state.still_running({**live, "pid": None})
        assert not state.still_running({**live, "pid": os.getpid()})
        assert not state.still_running({**live, "started": started - 5})  # the PID now belongs to a newer process
        assert state.still_running({**live, "started": started - 0.5})  # /proc's start: whole-second boot time
        with pytest.raises(subprocess.TimeoutExpired):
            sleeper.wait(timeout=1)  # asked whether it runs, never signalled: it lives on
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not state.still_running(live)  # gone


def test_the_differences_name_dotted_settings_both_ways_and_count_the_rest():
    stored = {"model/optimizer/lr": 0.001, "a": 1, "b": 2}
    assert state.identity_differences(stored, {"model/optimizer/lr": 0.01, "a": 1}) == [
        "b: 2 → <absent>",  # the shallower settings first
        "model.optimizer.lr: 0.001 → 0.01",
    ]
    four = {f"k{i}": i for i in range(4)}
    assert state.identity_differences(four, {}) == [f"k{i}: {i} → <absent>" for i in range(4)]  # four: no "more"
    five = {f"k{i}": i for i in range(5)}
    assert state.identity_differences(five, {})[4:] == ["… 1 more"]


def test_a_complete_run_recorded_without_an_identity_is_another_configuration(make_cfg, tmp_path):
    """A complete run whose status predates identities: its settings are unknown, so it is never taken for this
    one — refused in one line, nothing changed."""
    (tmp_path / "status.json").write_text('{"state": "complete"}')
    (tmp_path / "summary.json").write_text('{"test/acc": 0.5}')
    with pytest.raises(UserError, match=r"holds complete results of another configuration") as err:
        run(make_cfg(*QUICK), tmp_path)
    assert "\n" not in str(err.value) and summary(tmp_path) == {"test/acc": 0.5}


def test_a_run_that_fills_the_disk_says_so_naming_its_directory_and_is_recorded_failed(make_cfg, tmp_path, monkeypatch):
    import errno

    from attn_study.job import attempt

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(attempt, "train_and_test", full)
    with pytest.raises(UserError, match=f"no space left on the device of {tmp_path}: .*hydra.run.dir") as err:
        run(make_cfg(*QUICK), tmp_path)
    assert "\n" not in str(err.value) and status(tmp_path)["state"] == "failed"
