"""Nothing lost, nothing mislabelled: what a run directory holds survives every relaunch that is refused, runs
are built only on finished runs, meaningless settings are refused before training, and every user mistake
is one line naming the option or file."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from omegaconf import OmegaConf

from attn_study.cli import train_main
from attn_study.errors import UserError
from attn_study.job import saved, state
from attn_study.job.analyze import analyze
from attn_study.job.checks import check_recipe, ensure_writable, out_of_space
from attn_study.job.plan import load_run
from attn_study.job.run import run
from tests.helpers import (
    REPO,
    TINY,
    accuracy_by_hand,
    claimed_elsewhere,
    compose_config,
    conf_options,
    entry_point,
    status,
)

QUICK = [*TINY, "logger=csv", "encoder=average", "encoder.hidden_size=8"]


def files_of(run_dir: Path) -> dict:
    return {p: p.read_bytes() for p in Path(run_dir).rglob("*") if p.is_file()}


@pytest.fixture
def complete_run(trained_runs, tmp_path):
    """A private copy (at ``tmp_path/run``) of the complete run of QUICK, trained once for the whole pytest run."""
    return trained_runs.copy(*QUICK, into=tmp_path)


# -- results lost or relabelled ----------------------------------------------------------------------


def test_results_without_a_status_are_unknown_and_never_deleted(complete_run):
    (complete_run / "status.json").unlink()
    before = files_of(complete_run)
    with pytest.raises(UserError, match=r"holds results but no status.json.*unknown.*nothing was changed.*force=true"):
        run(compose_config(*QUICK[:-2], "encoder=lstm", "encoder.hidden_size=8"), complete_run)
    assert run(compose_config(*QUICK, "seed=14"), complete_run, keep_going=True) is None
    assert files_of(complete_run) == before


def test_a_status_that_is_not_a_status_is_unreadable(complete_run):
    (complete_run / "status.json").write_text("[]")
    before = files_of(complete_run)
    with pytest.raises(UserError, match="status.json is unreadable"):
        run(compose_config(*QUICK), complete_run)
    assert files_of(complete_run) == before


def test_a_refused_relaunch_leaves_the_runs_record_of_itself_untouched(tmp_path, monkeypatch, capsys):
    """Through the CLI (Hydra writes its config files before the job starts): the relaunch with another
    encoder and seed is refused, and the run's .hydra/ still says what the results are, so the report and
    attn-study-analyze read the LSTM of seed 13."""
    run_dir = tmp_path / "run"
    base = [*TINY, "logger=csv", "encoder.hidden_size=8", f"hydra.run.dir={run_dir}"]
    code, _, err = entry_point(train_main, *base, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0, err[-2000:]
    record = {p.name: p.read_bytes() for p in (run_dir / ".hydra").iterdir()}
    assert set(record) == {"config.yaml", "overrides.yaml", "hydra.yaml"}
    code, _, err = entry_point(train_main, *base, "encoder=gru", "seed=14", monkeypatch=monkeypatch, capsys=capsys)
    assert code == 2
    assert err.strip().splitlines()[-1].startswith("attn-study: error: ")
    assert "encoder: lstm → gru" in err and "hydra.run.dir" in err
    assert {p.name: p.read_bytes() for p in (run_dir / ".hydra").iterdir()} == record
    assert saved.run_config(run_dir).encoder.name == "lstm" and saved.run_config(run_dir).seed == 13


def test_a_run_is_built_only_on_a_complete_run(complete_run, tmp_path):
    state._write(complete_run, {**status(complete_run), "state": "running", "pid": 999999999})  # killed
    options = (
        ["attention=preloaded", f"attention.source={complete_run}"],
        ["training=model_consistent_adversary", f"training.base={complete_run}"],
        ["analysis=[wiegreffe_pinter]", f"analysis.wiegreffe_pinter.base={complete_run}"],
        ["model=selector", f"explainer.target={complete_run}", "analysis=[]"],
    )
    for i, extra in enumerate(options):
        with pytest.raises(UserError, match=r"is not complete \(state: running\).*force=true"):
            run(compose_config(*QUICK, *extra), tmp_path / f"built{i}")
        assert not (tmp_path / f"built{i}" / "checkpoints").exists(), extra  # refused before training
    summary_ = run(compose_config(*QUICK, *options[0], "force=true"), tmp_path / "forced")
    assert summary_["test/acc"] == pytest.approx(accuracy_by_hand(tmp_path / "forced"))


def test_analysing_a_complete_run_without_its_attention_file_writes_the_same_one(complete_run):
    """A run from before ``attention.parquet`` existed gets it when analysed: the attention and outputs its
    test pass recorded, from the same checkpoint."""
    written = pd.read_parquet(complete_run / "attention.parquet")
    (complete_run / "attention.parquet").unlink()
    args = [f"ckpt_path={complete_run}", "analysis=[jain_wallace]", "analysis.jain_wallace.tests=[correlation]"]
    analyze(compose_config(*args, "analysis.jain_wallace.max_instances=5", "use_loggers=false", name="analyze"))
    again = pd.read_parquet(complete_run / "attention.parquet")
    assert list(again.columns) == list(written.columns) and len(again) == len(written) > 0
    for column in written.columns:
        first, second = written[column].tolist(), again[column].tolist()
        if isinstance(first[0], str):
            assert first == second, column
        else:
            for a, b in zip(first, second):
                np.testing.assert_allclose(np.asarray(a, float), np.asarray(b, float), rtol=1e-5, err_msg=column)


def test_a_family_that_fails_part_way_leaves_each_familys_folder_and_summary_keys_in_step(complete_run, monkeypatch):
    """``attn-study-analyze … analysis=[jain_wallace,serrano_smith]`` whose second family fails: jain_wallace's folder
    and its keys in ``summary.json`` are both the new analysis, serrano_smith's both the old one (the report reads the
    summary, the explorer the folder: they must agree)."""
    from attn_study.families.serrano_smith.callback import SerranoSmith
    from attn_study.io import read_json

    def analysed(instances: int) -> None:
        args = [
            f"ckpt_path={complete_run}",
            "analysis=[jain_wallace,serrano_smith]",
            "analysis.jain_wallace.tests=[correlation]",
            f"analysis.jain_wallace.max_instances={instances}",
            f"analysis.serrano_smith.max_instances={instances}",
            "use_loggers=false",
        ]
        analyze(compose_config(*args, name="analyze"))

    analysed(10)

    def broken(self, *args, **kwargs):
        raise RuntimeError("planted: the second family fails")

    monkeypatch.setattr(SerranoSmith, "measure", broken)
    with pytest.raises(RuntimeError, match="planted"):
        analysed(20)
    summary = read_json(complete_run / "summary.json")
    for family, n in (("jain_wallace", 20), ("serrano_smith", 10)):
        folder = complete_run / "analysis" / family
        assert len(pd.read_parquet(folder / "instances.parquet")) == n, family
        own = read_json(folder / "summary.json")
        assert {k: summary[k] for k in own} == own, family
    assert not list((complete_run / "analysis").glob(".*.partial"))


def test_an_analysis_on_a_full_disk_is_one_line_and_leaves_the_earlier_results(complete_run, monkeypatch):
    from attn_study import io

    before = {p: p.read_bytes() for p in (complete_run / "analysis").rglob("*") if p.is_file()}
    summary = (complete_run / "summary.json").read_bytes()

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(io.tempfile, "mkstemp", full)  # every result file is written through atomic_open
    args = [f"ckpt_path={complete_run}", "analysis.jain_wallace.tests=[correlation]", "use_loggers=false"]
    with pytest.raises(UserError, match=r"^no space left on the device of .*: free some space, or choose another "):
        analyze(compose_config(*args, "analysis.jain_wallace.max_instances=5", name="analyze"))
    after = {p: p.read_bytes() for p in (complete_run / "analysis").rglob("*") if p.is_file()}
    assert after == before and (complete_run / "summary.json").read_bytes() == summary


def test_analysing_an_unfinished_run_does_not_make_it_look_finished(complete_run):
    (complete_run / "attention.parquet").unlink()
    state._write(complete_run, {**status(complete_run), "state": "failed"})
    args = [
        f"ckpt_path={complete_run}",
        "analysis=[jain_wallace]",
        "analysis.jain_wallace.tests=[correlation]",
        "use_loggers=false",
    ]
    with pytest.raises(UserError, match=r"ckpt_path=.*not complete \(state: failed\)"):
        analyze(compose_config(*args, name="analyze"))
    analyze(compose_config(*args, "force=true", name="analyze"))
    assert (complete_run / "analysis" / "jain_wallace" / "summary.json").is_file()
    assert not (complete_run / "attention.parquet").exists() and status(complete_run)["state"] == "failed"
    with pytest.raises(UserError, match="not complete"):  # still no base for another run
        run(
            compose_config(*QUICK, "attention=preloaded", f"attention.source={complete_run}"),
            complete_run.parent / "on_it",
        )


def test_a_loaded_run_and_the_runs_it_stands_on_must_be_finished_unless_forced(complete_run, tmp_path):
    """``load_run`` (``attn-study-explain``, a run built on another) requires the run complete, and the runs *it*
    was built on too (here its ``attention.source``), each refused in one line naming its option; ``force`` reaches
    down to them."""
    on_it = tmp_path / "on_it"
    run(compose_config(*QUICK, "attention=preloaded", f"attention.source={complete_run}"), on_it)
    assert load_run(on_it).path == on_it
    state._write(complete_run, {**status(complete_run), "state": "failed"})
    with pytest.raises(UserError, match=r"^attention.source=.*not complete \(state: failed\)"):
        load_run(on_it)
    assert load_run(on_it, force=True).path == on_it
    state._write(on_it, {**status(on_it), "state": "failed"})
    with pytest.raises(UserError, match=r"^ckpt_path=.*on_it.*not complete \(state: failed\)"):
        load_run(on_it)


def test_a_run_another_process_trains_or_analyses_is_not_analysed_at_once(complete_run):
    """Two analyses of one run at once would write the same folders (and one's clean-up would remove the other's
    half-written ones): an analysis waits for the run's claim like training, refused in one line, nothing changed."""
    before = files_of(complete_run)
    args = [f"ckpt_path={complete_run}", "analysis=[jain_wallace]", "use_loggers=false"]
    with claimed_elsewhere(complete_run):
        with pytest.raises(UserError, match=r"^.*/run is being trained or analysed by another attn-study process"):
            analyze(compose_config(*args, name="analyze"))
    assert files_of(complete_run) == before


# -- configurations that produce meaningless numbers ----------------------------------------------------

REFUSED = {
    "trainer.max_epochs=0": "trainer.max_epochs=0: give a number of epochs",
    "trainer.max_epochs=-1": "trainer.max_epochs=-1 trains until early stopping, and callbacks has none",
    "recipe=jain_wallace trainer.max_epochs=1": r"no epoch can be chosen as the best checkpoint",
    "training=random_attention_pretraining training.pretrain_epochs=1": r"no epoch can be chosen",
    "training=model_consistent_adversary training.lam=-1": r"training.lam=-1: must be a number >= 0$",
    "analysis.jain_wallace.p_threshold=2": r"analysis.jain_wallace.p_threshold=2: must be a number in \(0, 1\)$",
    "analysis=[faithfulness] analysis.faithfulness.ig_steps=0": r"ig_steps=0: must be a whole number >= 1$",
    # a family's numbers: NaN and infinities refused, not compared (NaN < 0 is false)
    "analysis.jain_wallace.lr=nan": r"^analysis.jain_wallace.lr=nan: must be a number >= 0, not nan$",
    "analysis.jain_wallace.lam=inf": r"^analysis.jain_wallace.lam=inf: must be a number >= 0, not inf$",
    "analysis.jain_wallace.init_scale=-1": r"^analysis.jain_wallace.init_scale=-1: must be a number >= 0$",
    "dataset=synthetic_markers dataset.inject.count=-1": r"dataset.inject.count=-1: must be a whole number >= 0$",
    "analysis.jain_wallace.every_n_epochs=1.5": r"every_n_epochs=1.5: must be a whole number >= 1 or null, not 1.5$",
    "model=selector": r"analysis=jain_wallace compares a soft attention.*selector",
    "model=selector analysis=[sparsity]": r"analysis=sparsity .*selector",
    "model=selector analysis=[serrano_smith]": r"analysis=serrano_smith .*selector",
    "+model.optimizer.lrr=0.01": r"model.optimizer.lrr: no such setting \(did you mean lr\?\)",
    "seed=-1": r"seed=-1: must be a whole number in \[0, 4294967295\]$",
    "seed=99999999999999999999": r"seed=99999999999999999999: must be a whole number in \[0, 4294967295\]$",
    "seed=abc": r"seed=abc: must be a whole number",
    "threads=-1": r"threads=-1: must be a whole number >= 1 or null$",
    "dataset=synthetic_markers dataset.inject.count=abc": r"dataset.inject.count=abc: must be a whole number",
    "dataset=synthetic_markers dataset.inject.seed=xyz": r"dataset.inject.seed=xyz: must be a whole number",
    "analysis.jain_wallace.every_n_epochs=abc": r"every_n_epochs=abc: must be a whole number",
    "++analysis.jain_wallace.max_instance=20": r"analysis.jain_wallace.max_instance: no such setting \(did you mean "
    r"max_instances\?\)",
    "callbacks.model_checkpoint.monitor=val/bogus": r"monitor=val/bogus: the run logs no such key; choose from",
    "analysis.jain_wallace.permutations=0": r"permutations=0: must be a whole number >= 1$",
    "analysis.jain_wallace.adversaries=0": r"adversaries=0: must be a whole number >= 1$",
    "+trainer.max_epoch=3": r"trainer.max_epoch: no such setting \(did you mean max_epochs\?\)",
    # settings under which no weight changes: the model tested would be untrained
    "model.optimizer.lr=0": r"model.optimizer.lr=0: must be a number >= 1e-30 \(below it no float32 weight changes, as",
    "trainer.limit_train_batches=0": r"limit_train_batches=0: must be a whole number >= 1 or null or a number in",
    "trainer.limit_train_batches=0.0": r"limit_train_batches=0.0: must be a whole number >= 1 or null or a number",
    "++trainer.max_steps=0": r"trainer.max_steps=0: must be a whole number >= 1 or -1 \(-1: as many as",
    # sizes, probabilities and numbers that would reach torch
    "encoder.hidden_size=0": r"encoder.hidden_size=0: must be a whole number >= 1$",
    "encoder.hidden_size=8.0": r"encoder.hidden_size=8.0: must be a whole number >= 1, not 8.0$",
    "model.network.embedding_dim=0": r"model.network.embedding_dim=0: must be a whole number >= 1$",
    "model.network.dropout=1.5": r"model.network.dropout=1.5: must be a number in \[0, 1\) \(the probability",
    "encoder=diversity_lstm encoder.conicity_weight=abc": r"conicity_weight=abc: must be a number >= 0, not .abc.$",
    "encoder=diversity_lstm encoder.conicity_weight=nan": r"conicity_weight=nan: must be a number >= 0, not nan$",
    "projection=entmax_bisect projection.alpha=1": r"projection.alpha=1: must be a number in \(1, 1000\] \(α = 1 is",
    "dataset.source.n_train=0": r"dataset.source.n_train=0: must be a whole number >= 1 \(the number of training",
    "dataset.source.n_test=-5": r"dataset.source.n_test=-5: must be a whole number >= 1 \(the number of test",
    "+encoder.hiden_size=3": r"encoder.hiden_size: no such setting \(did you mean hidden_size\?\)",
    # booleans: a quoted 'false', a word, a number (each read as true by Python) — an encoder's, a network's, a family's
    "encoder=lstm encoder.bidirectional='false'": r"^encoder.bidirectional='false': must be true or false, not 'fals",
    "encoder=lstm encoder.bidirectional=maybe": r"^encoder.bidirectional=maybe: must be true or false, not 'maybe'$",
    "encoder=lstm encoder.bidirectional=2": r"^encoder.bidirectional=2: must be true or false, not 2$",
    "model.embeddings.freeze='false'": r"^model.embeddings.freeze='false': must be true or false",
    "analysis.jain_wallace.lam_per_adversary=maybe": r"^analysis.jain_wallace.lam_per_adversary=maybe: must be true or",
    "analysis.jain_wallace.detach_attention=1": r"^analysis.jain_wallace.detach_attention=1: must be true or false",
    # words from a list, weights, a learning rate that is 0 in float32, a projection's overflow
    "encoder=lstm encoder.cell=bogus": r"^encoder.cell=bogus: choose one of lstm, gru$",
    "dataset.average_activation=bogus": r"^dataset.average_activation=bogus: choose one of relu, tanh, gelu$",
    "model.class_weights=[1,-2]": r"^model.class_weights=\[1, -2\]: must be null, pos_weight or a list of weights >= 0",
    "model.class_weights=[0,0]": r"^model.class_weights=\[0, 0\]: must be .*with every weight 0 the loss is 0",
    "model.class_weights=bogus": r"^model.class_weights=bogus: must be null, pos_weight or a list of weights",
    "model.class_weights=[1,nan]": r"^model.class_weights=\[1, nan\]: must be null, pos_weight",
    "model.optimizer.lr=1e-320": r"^model.optimizer.lr=1e-320: must be a number >= 1e-30 \(below it no float32 weight",
    "projection=entmax_bisect projection.alpha=1e308": r"^projection.alpha=1e\+308: must be a number in \(1, 1000\]",
    # a pair of options that must agree; paths the run reads
    "model.embeddings.path=/no/such/vectors.txt": r"^model.embeddings.path=/no/such/vectors.txt: no such file or",
}


@pytest.mark.parametrize("overrides", list(REFUSED))
def test_meaningless_settings_are_refused_in_one_line_before_anything_runs(overrides, tmp_path):
    extra = overrides.split()
    family = [] if any(o.startswith("analysis=") for o in extra) else ["analysis=[jain_wallace]"]
    with pytest.raises(UserError, match=REFUSED[overrides]) as err:
        run(compose_config(*[o for o in QUICK if o != "analysis=[]"], *family, *extra), tmp_path / "run")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "run" / "checkpoints").exists()  # before training
    if not overrides.startswith("model=selector"):  # these are known from the config alone: nothing written
        assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


@pytest.mark.parametrize(
    ("overrides", "refusal"),
    [
        # the user wrote dataset.*; the encoder reads it by interpolation: the refusal names what the user wrote
        (
            "encoder=average dataset.average_hidden_size=0",
            r"^dataset.average_hidden_size=0: must be a whole number >= 1",
        ),
        ("encoder=cnn dataset.cnn_filters=0", r"^dataset.cnn_filters=0: must be a whole number >= 1"),
        ("encoder=lstm dataset.rnn_hidden_size=2.5", r"^dataset.rnn_hidden_size=2.5: must be a whole number >= 1"),
        # the longest text is known once the data is read: refused then, before the model is built
        ("encoder=transformer encoder.max_positions=4", r"^encoder.max_positions=4: the longest train text has \d+ "),
        ("encoder=transformer encoder.num_heads=3", r"^encoder.num_heads=3 does not divide encoder.model_dim=128"),
    ],
)
def test_refusals_name_the_option_the_user_wrote_and_leave_no_run_directory(overrides, refusal, tmp_path):
    with pytest.raises(UserError, match=refusal):
        run(compose_config(*TINY, "logger=csv", *overrides.split()), tmp_path / "run")
    assert not (tmp_path / "run").exists()  # a refusal is no run for the report to list as failed


@pytest.mark.parametrize(
    ("model", "built"),
    [("model=han encoder=gru", "HierarchicalAttentionClassifier"), ("model=selector", "SelectorPredictor")],
)
def test_a_model_without_attention_over_tokens_cannot_build_on_another_runs_attention(model, built, tmp_path):
    """``attention=preloaded`` reads another run's attention over tokens: a model without one (HAN's is over
    sentences, the selector's a hard choice) is refused in one line naming the option the user wrote, before the
    run it names is even looked for."""
    elsewhere = tmp_path / "no_such_run"
    overrides = [*model.split(), "attention=preloaded", f"attention.source={elsewhere}"]
    with pytest.raises(UserError) as err:
        run(compose_config(*TINY, "logger=csv", *overrides), tmp_path / "run")
    assert str(err.value) == (
        f"attention.source builds on another run's attention over tokens, which {built} does not have: "
        "use model=flat or model=pair"
    )
    assert not (tmp_path / "run").exists()


def test_a_data_path_that_does_not_exist_is_refused_before_any_data_is_read(tmp_path):
    cfg = compose_config("trainer=debug", "analysis=[]", "logger=none", "dataset=sst", "dataset.path=/no/such/data")
    with pytest.raises(UserError, match=r"^dataset.path=/no/such/data: no such file or folder"):
        run(cfg, tmp_path / "run")
    assert not (tmp_path / "run").exists()
    # given as the machine's default (paths.data.sst), it is named so
    cfg = compose_config("trainer=debug", "analysis=[]", "logger=none", "dataset=sst", "paths.data.sst=/no/sst")
    with pytest.raises(UserError, match=r"^paths.data.sst=/no/sst: no such file or folder"):
        run(cfg, tmp_path / "run")


def test_a_suggestion_no_chosen_component_reads_is_said_with_who_would(tmp_path, caplog):
    overrides = ["encoder=lstm", "encoder.hidden_size=8", "dataset.average_activation=tanh", "dataset.cnn_filters=4"]
    with caplog.at_level("WARNING", logger="attn_study.job.run"):
        run(compose_config(*TINY, "logger=none", *overrides), tmp_path / "run", overrides=overrides)
    said = [r.getMessage() for r in caplog.records if "reads it" in r.getMessage()]
    assert said == [
        "dataset.cnn_filters=4: nothing in this run reads it (encoder=cnn would); it is recorded with the run and "
        "changes nothing",
        "dataset.average_activation=tanh: nothing in this run reads it (encoder=average would); it is recorded with "
        "the run and changes nothing",
    ]


def test_the_suggestion_a_chosen_component_reads_reaches_it_and_is_not_flagged(tmp_path, caplog):
    overrides = ["encoder=average", "dataset.average_activation=tanh", "dataset.average_hidden_size=8"]
    cfg = compose_config(*TINY, "logger=none", *overrides)
    assert cfg.encoder.activation == "tanh" and cfg.encoder.hidden_size == 8
    assert compose_config(*TINY, "encoder=average").encoder.hidden_size == 256  # null: the encoder's own default
    from attn_study.job.checks import unread_settings

    assert unread_settings(cfg, overrides) == []


def test_a_model_whose_every_weight_is_frozen_is_refused_before_training(tmp_path, monkeypatch):
    """No option of conf/ freezes every weight today (the decoder always trains); a model built so is refused, as
    a learning rate of 0 is, instead of being tested untrained."""
    from attn_study.job import components

    built = components.build_model

    def frozen(cfg, datamodule):
        return built(cfg, datamodule).requires_grad_(False)

    monkeypatch.setattr(components, "build_model", frozen)
    with pytest.raises(UserError, match=r"every weight of the model is frozen: training would change nothing"):
        run(compose_config(*QUICK), tmp_path / "run")
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_gpu_asked_for_on_a_machine_without_one_is_refused(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(UserError, match="trainer=gpu: this machine has no CUDA GPU.*trainer=auto"):
        run(compose_config(*QUICK, "trainer=gpu"), tmp_path / "run")


def test_real_words_as_markers_are_flagged(tmp_path):
    done = run(
        compose_config(*QUICK, "analysis=[]", "dataset=synthetic_markers", "dataset.inject.tokens=[not,good]"),
        tmp_path / "run",
    )
    assert any("dataset.inject.tokens" in w and "already hold" in w for w in done["warnings"])
    assert any("already hold" in w for w in status(tmp_path / "run")["warnings"])


# -- one line where a traceback was -------------------------------------------------------------------


def test_a_process_that_reused_the_pid_does_not_block_the_run(complete_run):
    other = os.getppid()  # alive, and started long before this status was written ...
    state._write(complete_run, {**status(complete_run), "state": "running", "pid": other, "started": time.time()})
    with pytest.raises(UserError, match=f"being run by process {other}.*force=true"):
        run(compose_config(*QUICK), complete_run)
    run(compose_config(*QUICK, "force=true"), complete_run)  # the user knows better
    assert status(complete_run)["state"] == "complete"
    # ... a status written before that process started is not that process's
    state._write(complete_run, {**status(complete_run), "state": "running", "pid": other, "started": 1.0})
    assert not state.still_running(status(complete_run))


def test_a_directory_that_cannot_be_written_is_one_line(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(UserError, match=r"a_file/run: cannot write there.*choose another hydra.run.dir"):
        run(compose_config(*QUICK), blocker / "run")
    from attn_study.report.cli import build_report

    run(compose_config(*QUICK, "analysis=[]"), tmp_path / "one")
    with pytest.raises(UserError, match=r"cannot write .*a_file/report.*--out"):
        build_report(tmp_path / "one", blocker / "report")


def test_a_run_directory_is_made_with_its_parents_and_an_existing_one_is_accepted(tmp_path):
    """``ensure_writable`` creates a missing directory and every missing parent, leaves no write-check file behind,
    and passes a directory that already exists (a relaunch into the same run directory)."""
    nested = tmp_path / "a" / "b" / "run"
    ensure_writable(nested, "hydra.run.dir")
    assert nested.is_dir() and list(nested.iterdir()) == []
    ensure_writable(nested, "hydra.run.dir")
    assert list(nested.iterdir()) == []


def test_a_recipe_notes_a_dataset_its_paper_did_not_use(caplog):
    """recipe=jain_wallace's datasets are the files of conf/recipe_dataset/jain_wallace (sst is one, yelp is not):
    yelp is noted in one warning, sst is not; nor is it with warn=False, nor for a recipe with its own table."""
    noted = "is not one of the paper's datasets"

    def notes(recipe: dict, dataset: str, warn: bool = True) -> list[str]:
        caplog.clear()
        with caplog.at_level("WARNING", logger="attn_study.job.checks"):
            check_recipe(OmegaConf.create({"recipe": recipe, "dataset": {"name": dataset}}), warn=warn)
        return [r.getMessage() for r in caplog.records if noted in r.getMessage()]

    jain_wallace = {"name": "jain_wallace"}
    assert notes(jain_wallace, "yelp") == [
        "recipe=jain_wallace: yelp is not one of the paper's datasets; only its general settings apply"
    ]
    assert notes(jain_wallace, "sst") == []
    assert notes(jain_wallace, "yelp", warn=False) == []
    tabled = {"name": "jain_wallace", "table": {"sst": {}}, "row": {"lr": 1e-3}}
    assert notes(tabled, "yelp") == []


def test_a_read_only_cache_builds_the_data_in_memory(tmp_path, monkeypatch):
    from attn_study.data import processed

    def refuse(*_args, **_kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(processed, "_write_atomic", refuse)
    assert run(compose_config(*QUICK, "analysis=[]"), tmp_path / "run")["test/acc"] == pytest.approx(
        accuracy_by_hand(tmp_path / "run")
    )


def test_a_full_disk_is_said_in_one_line(tmp_path, monkeypatch):
    full = OSError(errno.ENOSPC, "No space left on device")
    assert "no space left on the device of" in str(out_of_space(full, tmp_path, "hydra.run.dir"))
    err = RuntimeError("[enforce fail at inline_container.cc] unexpected pos 512 vs 128")
    err.__context__ = full
    assert "no space left on the device of" in str(out_of_space(err, tmp_path, "hydra.run.dir"))
    assert out_of_space(RuntimeError("something else"), tmp_path, "hydra.run.dir") is None
    import shutil

    monkeypatch.setattr(shutil, "disk_usage", lambda _path: shutil._ntuple_diskusage(100, 100, 0))
    assert out_of_space(RuntimeError("unexpected pos 1 vs 2"), tmp_path, "hydra.run.dir") is not None
    mib = 2**20  # a truncated write is a full disk below 64 MiB free, not at 64 MiB
    for free, full in ((64 * mib - 1, True), (64 * mib, False)):
        monkeypatch.setattr(shutil, "disk_usage", lambda _path, free=free: shutil._ntuple_diskusage(100 * mib, 0, free))
        assert (out_of_space(RuntimeError("unexpected pos 1 vs 2"), tmp_path, "hydra.run.dir") is not None) == full


def test_another_version_of_a_checkpoint_or_config_is_named(complete_run):
    config = complete_run / ".hydra" / "config.yaml"
    original = config.read_text()
    config.write_text(original.replace("hidden_size: 8", "hidden_size: 9"))
    with pytest.raises(
        UserError, match=r"best.ckpt: its weights are not this model's \(other shapes: .*another version"
    ):
        analyze(compose_config(f"ckpt_path={complete_run}", "use_loggers=false", name="analyze"))
    config.write_text(original.replace("amsgrad: true", "amsgrad: true\n    momentum: 0.9"))
    with pytest.raises(UserError, match=r"made by another version of attn_study.*model.optimizer.momentum"):
        analyze(compose_config(f"ckpt_path={complete_run}", "use_loggers=false", name="analyze"))


def test_a_base_run_on_other_texts_is_refused_before_training(complete_run, tmp_path):
    """The synthetic task's uids are test-0 … for every seed: the texts are compared, not only the uids."""
    with pytest.raises(UserError, match=r"its test instances differ"):
        run(
            compose_config(
                *QUICK, "seed=14", "analysis=[wiegreffe_pinter]", f"analysis.wiegreffe_pinter.base={complete_run}"
            ),
            tmp_path / "other",
        )
    assert not (tmp_path / "other" / "checkpoints").exists()
    frame = pd.read_parquet(complete_run / "attention.parquet")
    assert frame["text"].str.startswith("test-").all()


@pytest.mark.parametrize("sweep", sorted(p.stem for p in (REPO / "sweeps").glob("smoke*.yaml")))
def test_every_smoke_sweep_also_composes_on_real_data(sweep):
    """A smoke sweep sizes the synthetic data only (``sweep.synthetic``): with ``dataset=sst`` it keeps SST's
    source and passes the schema (``dataset.source.n_train`` would be refused as no setting of SST's)."""
    from attn_study.config import check_config
    from attn_study.job.components import check_components

    synthetic = compose_config(f"sweep={sweep}")
    size = OmegaConf.to_container(compose_config(f"sweep={sweep}").sweep.synthetic)
    assert (synthetic.dataset.source.n_train, synthetic.dataset.source.n_test) == (size["n_train"], size["n_test"])
    cfg = compose_config(f"sweep={sweep}", "dataset=sst")
    check_config(cfg)
    check_components(cfg)
    assert cfg.dataset.name == "sst" and "n_train" not in cfg.dataset.source


def config_options() -> list[str]:
    """A command line choosing each option ``--help`` lists (:func:`tests.helpers.conf_options`: experiments, sweeps
    and every ``none`` included); the list groups' as one-element lists."""
    out = []
    for option in sorted(conf_options()[0]):
        group, _, name = option.partition("=")
        out.append(f"{group}=[{name}]" if group in ("callbacks", "analysis", "logger") and name != "none" else option)
    # early stopping watches what the checkpoint does; Serrano & Smith's recipe has rows for its own datasets
    return [
        {
            "callbacks=[early_stopping]": "callbacks=[model_checkpoint,early_stopping]",
            "recipe=serrano_smith": "recipe=serrano_smith dataset=yelp model=han encoder=gru",
        }.get(o, o)
        for o in out
    ]


@pytest.mark.parametrize("option", config_options())
def test_every_option_of_every_group_passes_the_schema(option):
    """The table of kinds (attn_study/ranges.py) and the constructors' parameters know every setting the configs
    themselves use, and every one has a kind and range (attn_study/ranges.py) its default lies in: adding a setting
    to a YAML without them fails here."""
    from attn_study.config import check_config
    from attn_study.job.components import check_components
    from attn_study.ranges import untyped

    cfg = compose_config(*option.split())
    check_config(cfg)
    check_components(cfg)
    assert untyped(OmegaConf.to_container(cfg, resolve=True)) == []


def test_a_familys_number_at_its_bound_is_accepted_and_past_it_refused():
    """``finite``'s bound is inclusive: a weight of 0 (no penalty) is a setting, −1e-9 is not."""
    from attn_study.analysis.checks import finite

    assert finite("analysis.jain_wallace.lam", 0) == 0.0
    assert finite("x", 2, low=2) == 2.0
    with pytest.raises(UserError, match=r"^x=-1e-09: must be a number >= 0$"):
        finite("x", -1e-9)


def test_a_familys_count_and_probability_at_their_bounds():
    """``whole`` counts from 1 and is not optional unless asked; ``probability`` is open at both ends (a
    significance level of 0 or 1 decides nothing)."""
    from attn_study.analysis.checks import probability, whole

    assert whole("x", 1) == 1 and whole("x", None, optional=True) is None
    for value in (0, None):
        with pytest.raises(UserError, match=r"^x=(0|null): must be a whole number >= 1"):
            whole("x", value)
    assert probability("x", 0.5) == 0.5
    for value in (0, 1):
        with pytest.raises(UserError, match=rf"^x={value}: must be a number in \(0, 1\)$"):
            probability("x", value)
