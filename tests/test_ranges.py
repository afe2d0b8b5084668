"""The ranges of the numeric options (attn_study/ranges.py): each kind of bound on values whose answer is known, and
the table against the schema. Refusals through a run: tests/sweep/test_trust.py (REFUSED)."""

from __future__ import annotations

import math

import pytest
from omegaconf import OmegaConf

from attn_study.config import check_config
from attn_study.errors import UserError
from attn_study.ranges import (
    ANALYZE,
    BATCHES,
    RANGES,
    SEED,
    SMALLEST_LR,
    TEXT,
    Boolean,
    ClassWeights,
    Devices,
    Either,
    ListOf,
    Mapping,
    PathTo,
    Text,
    Word,
    annotated,
    number,
    problems,
    refusal,
    source_option,
    untyped,
    whole,
)
from tests.helpers import REPO, compose_config


@pytest.mark.parametrize(
    ("allowed", "accepted", "refused"),
    [
        (whole(1), [1, 2, 10**6], [0, -1, 1.0, 1.5, True, "abc", None, [1]]),
        (whole(1, optional=True), [None, 1], [0, "null"]),
        (whole(1, also=(-1,)), [-1, 1, 5], [0, -2, -1.0]),
        (SEED, [0, 2**32 - 1], [-1, 2**32, 10**20, 10**400]),
        (number(0, 1, below=True), [0, 0.0, 0.5, 0.999999], [1, 1.0, 1.5, -0.1, math.nan, math.inf, "0.5", False]),
        (number(0, above=True), [1e-12, 3], [0, 0.0, -1e-12, math.nan, -math.inf]),
        (number(high=1, below=True), [-5, 0.99], [1, 2]),
        (number(0, 1), [0, 1, 0.3], [1.0000001, -0.0000001]),
        (BATCHES, [1, 7, 0.5, 1.0, 1e-9, None], [0, 0.0, -1, 2.0, 1.5, True, "all"]),
        (Devices(), [1, -1, "auto", [0], [0, 1]], [0, -2, [], [-1], "gpu", 1.0]),
    ],
)
def test_each_kind_of_range_accepts_and_refuses_the_values_it_must(allowed, accepted, refused):
    assert [v for v in accepted if allowed.problem(v) is not None] == []
    assert [v for v in refused if allowed.problem(v) is None] == []


def test_the_message_says_what_the_option_must_be():
    assert whole(1).problem(0) == "must be a whole number >= 1"
    assert whole(1).problem(2.0) == "must be a whole number >= 1, not 2.0"
    assert SEED.problem(10**20) == "must be a whole number in [0, 4294967295]"
    assert number(0, 1, below=True).problem(1.5) == "must be a number in [0, 1)"
    assert number(0, above=True, note="why").problem(0) == "must be a number > 0 (why)"
    assert number(0.5, 2.5).problem(math.nan) == "must be a number in [0.5, 2.5], not nan"
    assert whole(1, optional=True).problem("x") == "must be a whole number >= 1 or null, not 'x'"
    assert BATCHES.problem(0).startswith("must be a whole number >= 1 or null or a number in (0, 1]")


def test_problems_reads_the_options_where_they_are_and_skips_absent_ones():
    assert problems({"encoder": {"hidden_size": 8}, "seed": 3}) == []
    assert problems({"encoder": {"name": "noenc"}}) == []  # no hidden_size: nothing to check
    assert problems({"encoder": {"hidden_size": 0}, "model": {"optimizer": {"lr": 0.0}}}) == [
        "model.optimizer.lr=0.0: must be a number >= 1e-30 (below it no float32 weight changes, as at 0: the model "
        "tested would be untrained)",
        "encoder.hidden_size=0: must be a whole number >= 1",
    ]


def test_untyped_finds_the_settings_without_a_kind_and_leaves_free_form_tables_alone():
    assert untyped({"encoder": {"hidden_size": 8, "width": 3, "name": "x"}, "analysis": {"jw": {"steps": 1}}}) == [
        "encoder.width"
    ]
    assert untyped({"cluster": {"additional_parameters": {"constraint": "a100"}}, "sweep": {"synthetic": None}}) == []
    assert untyped({"model": {"optimizer": {"amsgrad": True, "betas": [0.9, 0.99]}}}) == ["model.optimizer.betas"]


@pytest.mark.parametrize(
    ("allowed", "accepted", "refused"),
    [
        (Boolean(), [True, False], ["false", "true", "maybe", 2, 1, 0, None, 1.0]),
        (Boolean(optional=True), [None, False], ["null"]),
        (Word(("relu", "tanh")), ["relu", "tanh"], ["bogus", "Relu", None, 1, ["relu"]]),
        (Word(("a",), optional=True), [None, "a"], ["b"]),
        (Text(), ["", "x"], [None, 1, ["x"]]),
        (PathTo(), [None, "/data", "rel/dir"], ["", "  ", 3, True]),
        (PathTo(optional=False), ["/data"], [None]),
        (ListOf(whole(1), nonempty=True), [[1], (1, 2)], [[], [0], [1, 1.5], "1", None]),
        (ListOf(TEXT, optional=True), [None, [], ["a"]], [[1], "a"]),
        (Mapping(), [None, {}, {"a": 1}], [[], "a"]),
        (ClassWeights(), [None, "pos_weight", [1, 3.5], [0, 1]], [[1, -2], [0, 0], [], [1, math.nan], "bogus", [True]]),
        (Either(Word(("warn",)), Boolean()), [True, "warn"], ["no", 1]),
    ],
)
def test_each_kind_of_setting_accepts_and_refuses_the_values_it_must(allowed, accepted, refused):
    assert [v for v in accepted if allowed.problem(v) is not None] == []
    assert [v for v in refused if allowed.problem(v) is None] == []


def test_a_refusal_writes_the_value_as_the_user_did_a_quoted_boolean_quoted():
    assert refusal("encoder.bidirectional", "false", Boolean()) == (
        "encoder.bidirectional='false': must be true or false, not 'false'"
    )
    assert refusal("x", 2, Boolean()) == "x=2: must be true or false, not 2"
    assert refusal("x", None, whole(1)) == "x=null: must be a whole number >= 1, not None"
    assert refusal("encoder.cell", "bogus", Word(("lstm", "gru"))) == "encoder.cell=bogus: choose one of lstm, gru"
    # a boolean where a number goes: written as on the command line
    assert refusal("x", True, whole(1)) == "x=true: must be a whole number >= 1, not True"
    assert refusal("x", False, whole(1)) == "x=false: must be a whole number >= 1, not False"


def test_a_value_set_through_another_option_is_refused_under_the_name_the_user_wrote():
    """``encoder.filters: ${attn_study.or:${dataset.cnn_filters},64}``: a 0 the user gave as ``dataset.cnn_filters``
    is refused as ``dataset.cnn_filters`` with the range of the setting it feeds (it was refused as ``encoder.filters``,
    which the user never wrote)."""
    written = {"dataset": {"cnn_filters": 0}, "encoder": {"filters": "${attn_study.or:${dataset.cnn_filters},64}"}}
    resolved = {"dataset": {"cnn_filters": 0}, "encoder": {"filters": 0}}
    assert problems(resolved, written)[0] == "dataset.cnn_filters=0: must be a whole number >= 1"
    assert problems(resolved)[0] == "encoder.filters=0: must be a whole number >= 1"  # without the written config
    # the interpolation of another value (a default, a different option's) names the option itself
    assert source_option("encoder.filters", 64, {"dataset": {"cnn_filters": None}}, written) == "encoder.filters"


def test_an_unknown_setting_is_said_with_the_settings_its_node_has_and_the_nearest_name():
    """The settings listed are the first parts of the table's keys below the node — ``model_seed`` is a top-level
    setting that starts with the letters ``model``, not a setting ``seed`` of ``model``."""
    table = {"model_seed": SEED, "model.name": TEXT, "model.optimizer.lr": number(0, above=True)}

    def refused(config: dict) -> str:
        with pytest.raises(UserError) as raised:
            check_config(OmegaConf.create(config), table)
        return str(raised.value)

    node = {"name": "flat", "optimizer": {"lr": 0.1}}
    assert refused({"model_seed": 1, "model": {**node, "nmae": "x"}}) == (
        "model.nmae: no such setting (did you mean name?); model has ['name', 'optimizer']"
    )
    assert refused({"model_seed": 1, "model": {**node, "optimizer": {"lr": 0.1, "lrr": 1}}}) == (
        "model.optimizer.lrr: no such setting (did you mean lr?); model.optimizer has ['lr']"
    )
    assert refused({"model_sed": 1, "model": node}) == (
        "model_sed: no such setting (did you mean model_seed?); the top level has ['model', 'model_seed']"
    )
    check_config(OmegaConf.create({"model_seed": 1, "model": node}), table)  # every setting known: nothing said


def test_a_constructors_annotation_gives_a_kind_for_a_familys_option():
    assert annotated(bool) == Boolean() and annotated(str) == Text()
    assert annotated(bool | None) == Boolean(optional=True) and annotated(str | None) == Text(optional=True)
    assert annotated(list[str]) == ListOf(Text()) and annotated(dict) is None
    assert annotated(int) is None and annotated(float | None) is None  # a family checks its numbers' bounds itself
    assert annotated(bool).problem("false") == "must be true or false, not 'false'"


def test_the_smallest_learning_rate_changes_a_float32_weight_and_the_refused_ones_do_not():
    """The bound's reason, measured: a weight of 1 after one step of −lr (an Adam step is ≈ lr) in float32."""
    import torch

    one = torch.ones(1)
    assert number(SMALLEST_LR, note="").problem(1e-320) and (one - torch.tensor(1e-320)).item() == 1.0
    assert torch.tensor(1e-320, dtype=torch.float32).item() == 0.0  # what 1e-320 is in float32
    assert RANGES["model.optimizer.lr"].problem(SMALLEST_LR) is None and RANGES["model.optimizer.lr"].problem(1e-31)
    tiny = torch.zeros(1) - torch.tensor(SMALLEST_LR)
    assert tiny.item() != 0.0  # a weight at 0 (a bias) still moves at the bound


@pytest.mark.parametrize("option", [("model", "network", "decoder_dim"), ("dataset", "decoder_dim")])
def test_a_decoder_size_is_a_whole_number_from_1_or_null_for_half_the_encoders_output(option):
    """null: Jain & Wallace's ``AttnDecoderQA`` (half the encoder's output, recipe=jain_wallace's pair tasks)."""

    def at(value):
        tree = {option[-1]: value}
        for part in reversed(option[:-1]):
            tree = {part: tree}
        return problems(tree)

    assert at(None) == [] and at(1) == []
    assert at(0) and at(2.0)


DROPOUTS = ("model.network.dropout", "model.network.sentence_dropout", "encoder.dropout")
SIZES = (
    "model.network.embedding_dim",
    "model.network.k",
    "encoder.hidden_size",
    "encoder.num_layers",
    "encoder.filters",
    "encoder.model_dim",
    "encoder.num_heads",
    "encoder.ff_dim",
    "encoder.max_positions",
    "projection.n_iter",
    "dataset.batch_size",
    "dataset.eval_batch_size",
    "dataset.preprocessing.min_count",
    "dataset.preprocessing.min_length",
    "dataset.source.n_train",
    "dataset.source.max_length",
    "trainer.log_every_n_steps",
    "trainer.accumulate_grad_batches",
    "roar.batch_size",
    "cluster.cpus",
    "cluster.time_min",
    "cluster.array_parallelism",
)
OPTIONAL_SIZES = (
    "threads",
    "analysis_max_instances",
    "model.network.decoder_dim",
    "attention.attention_dim",
    "dataset.rnn_hidden_size",
    "dataset.preprocessing.max_length",
    "dataset.preprocessing.truncate",
)
SEEDS = ("seed", "dataset.source.seed", "dataset.source.split_seed", "dataset.inject.seed")
COUNTS_FROM_0 = (
    "training.pretrain_epochs",
    "training.select_from_epoch",
    "dataset.num_workers",
    "dataset.inject.count",
    "callbacks.early_stopping.patience",
    "cluster.gpus",
    "cluster.max_requeue",  # 0: a job that times out is not requeued
)
NON_NEGATIVE = (
    "model.optimizer.weight_decay",
    "model.optimizer.attention_weight_decay",
    "encoder.conicity_weight",
    "training.lam",
    "training.word_tying.weight",
    "dataset.source.decoy_negators",
)


@pytest.mark.parametrize(
    ("options", "accepted", "refused"),
    [
        (DROPOUTS, [0, 0.0, 0.5, 0.999999], [1, 1.0, -1e-9, None]),
        (("model.network.word_dropout",), [None, 0, 0.999], [1, -0.1]),
        (SIZES, [1, 2, 10**6], [0, -1, 1.0, None]),
        (OPTIONAL_SIZES, [None, 1], [0, -1]),
        (SEEDS, [0, 2**32 - 1], [-1, 2**32, None]),
        (("model_seed",), [None, 0, 2**32 - 1], [-1, 2**32]),
        (("model.optimizer.lr",), [1e-30, 1e-3, 10], [0, 0.0, 9.9e-31, -1e-3]),
        (COUNTS_FROM_0, [0, 3], [-1, 0.5]),
        (NON_NEGATIVE, [0, 0.0, 1e-12, 2.5], [-1e-12]),
        (("model.gradient_clip_val", "trainer.gradient_clip_val"), [None, 0, 5.0], [-0.1]),
        (("model.network.temperature", "cluster.mem_gb"), [1e-9, 3], [0, -1]),
        (("projection.alpha",), [1.0000001, 1.5, 1000], [1, 1.0, 1000.001]),
        (("projection.lam",), [-5, 0, 0.999], [1, 1.5]),
        (("dataset.source.task",), [1, 20], [0, 21]),
        (("dataset.source.min_length", "sweep.synthetic.min_length"), [6, 7], [5]),
        (("dataset.source.negation_prob", "roar.fraction"), [0, 1, 0.25], [-0.01, 1.01]),
        (("dataset.source.dev_fraction",), [0.1, 0.9], [0, 1]),
        (("roar.step",), [None, 1, 0.05], [0, 1.5]),
        (("trainer.max_steps",), [-1, 1], [0, -2]),
        (("trainer.num_sanity_val_steps",), [-1, 0, 2], [-2]),
        (("trainer.limit_train_batches", "trainer.limit_val_batches"), [None, 1, 0.5, 1.0], [0, 1.5, -1]),
        (("training.weight_clip",), [[1e-3], [0.5, 2]], [[0], [], [-1]]),
        (("encoder.kernel_sizes",), [[1, 3, 5]], [[0], []]),
    ],
)
def test_the_table_holds_each_options_own_bounds(options, accepted, refused):
    """The bounds RANGES gives representative options — a dropout in [0, 1), a size ≥ 1, a seed ≤ 2³² − 1, a learning
    rate ≥ 1e-30, … —, each at and just past its bound: moving a bound in the table turns this red."""
    for option in options:
        allowed = RANGES[option]
        assert [v for v in accepted if allowed.problem(v) is not None] == [], option
        assert [v for v in refused if allowed.problem(v) is None] == [], option


def test_attn_study_analyzes_own_options_have_their_bounds():
    assert [v for v in (None, 0, 2**32 - 1) if ANALYZE["seed"].problem(v)] == []
    assert all(ANALYZE["seed"].problem(v) for v in (-1, 2**32))
    assert ANALYZE["threads"].problem(None) is None and ANALYZE["threads"].problem(1) is None
    assert ANALYZE["threads"].problem(0)


@pytest.mark.parametrize("dataset", sorted(p.stem for p in (REPO / "conf" / "dataset").glob("[!_]*.yaml")))
def test_every_shipped_datasets_defaults_are_inside_the_table(dataset):
    """What conf/ ships (a bAbI task's ``class_tasks: null``, Zhang et al.'s ``classes: null``, W&B's ``group: null``)
    is accepted as it is: a run refused before the user changed anything would be the table's mistake."""
    cfg = compose_config(f"dataset={dataset}", "logger=[wandb,csv]")
    assert problems(OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)) == []


def test_attn_study_analyze_refuses_a_run_directory_that_does_not_exist_before_any_work(tmp_path):
    missing = tmp_path / "no-such-run"
    with pytest.raises(UserError) as refused:
        check_config(compose_config(f"ckpt_path={missing}", name="analyze"), ANALYZE)
    assert str(refused.value).startswith(f"ckpt_path={missing}: no such file or folder")
