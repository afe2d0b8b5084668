"""The ranges of the numeric options (attn_study/ranges.py): each kind of bound on values whose answer is known, and
the table against the schema. Refusals through a run: tests/sweep/test_trust.py (REFUSED)."""

from __future__ import annotations

import math

import pytest

from attn_study import config
from attn_study.ranges import BATCHES, RANGES, SEED, Devices, number, problems, unranged, whole


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
        "model.optimizer.lr=0.0: must be a number > 0 (at 0 no weight changes: the model tested would be untrained)",
        "encoder.hidden_size=0: must be a whole number >= 1",
    ]


def test_every_numeric_setting_of_the_schema_has_a_range_and_unranged_finds_the_others():
    ranged = [
        f"{path}.{name}" if path else name
        for path, settings in config.SCHEMA.items()
        for name, check in settings.items()
        if check is config.ranged
    ]
    assert len(ranged) > 30 and [option for option in ranged if option not in RANGES] == []
    assert unranged({"encoder": {"hidden_size": 8, "width": 3, "name": "x"}, "analysis": {"jw": {"steps": 1}}}) == [
        "encoder.width"
    ]


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
