"""Data no model can learn from is refused before training; data whose numbers would mislead is
flagged, and the flag is recorded in status.json and summary.json."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from attn_study.data.datamodule import TextDataModule
from attn_study.data.markers import Injection
from attn_study.data.processed import Preprocessing
from attn_study.data.synthetic import SyntheticSource
from attn_study.data.text import Vocab
from attn_study.errors import DataError, UserError
from attn_study.job.attempt import train_and_test
from attn_study.job.run import run
from tests.data.canonical_files import write_user_csv
from tests.helpers import TINY, compose_config, status

CSV = "\ufeffid,text,label,split\n" + "".join(
    f"{i},{text},{label},{split}\n"
    for i, (text, label, split) in enumerate(
        [
            ("good film indeed", 1, "train"),
            ("bad film indeed", 0, "train"),
            ("good plot", 1, "train"),
            ("bad plot", 0, "train"),
            ("good story", 1, "dev"),
            ("bad story", 0, "dev"),
            ("good cast", 1, "test"),
            ("great cast", 1, "test"),
        ]
    )
)  # the test split has one class


def user_csv(tmp_path, text=CSV, *overrides):
    path = write_user_csv(tmp_path / "data.csv", text)
    return compose_config(
        "dataset=adr",
        f"dataset.path={path}",
        "trainer=debug",
        "analysis=[]",
        "logger=none",
        "dataset.preprocessing.min_length=1",
        "dataset.preprocessing.max_length=null",
        "dataset.preprocessing.min_count=1",
        "model.network.embedding_dim=8",
        "encoder=average",
        "encoder.hidden_size=4",
        *overrides,
    )


def test_one_class_in_the_test_split_gives_an_undefined_auroc_and_a_recorded_warning(tmp_path):
    summary = run(user_csv(tmp_path), tmp_path / "run")
    on_disk = json.loads(
        (tmp_path / "run" / "summary.json").read_text(),
        parse_constant=lambda c: pytest.fail(f"bare {c} in summary.json"),
    )
    assert on_disk["test/auroc"] is None and summary["test/auroc"] is None
    assert "one class" in on_disk["undefined"]["test/auroc"]
    assert any("test split has one class" in w for w in on_disk["warnings"])
    assert any("test split has one class" in w for w in status(tmp_path / "run")["warnings"])
    # the test texts "good cast", "great cast": of their 4 tokens only "good" is in the training vocabulary
    assert on_disk["data/unk_rate/test"] == 0.75 and on_disk["data/unk_rate/train"] == 0.0


def test_one_class_in_the_training_split_is_refused_before_training(tmp_path):
    text = CSV.replace(",0,train", ",1,train")
    with pytest.raises(DataError, match="every training instance has the same label"):
        train_and_test(user_csv(tmp_path, text), tmp_path / "run")
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_vocabulary_without_words_is_refused_and_a_mostly_unknown_one_flagged(tmp_path):
    with pytest.raises(DataError, match="dataset.preprocessing.min_count"):
        train_and_test(user_csv(tmp_path, CSV, "dataset.preprocessing.min_count=100"), tmp_path / "a")
    summary = train_and_test(user_csv(tmp_path, CSV, "dataset.preprocessing.min_count=2"), tmp_path / "b")
    # every training word occurs twice: the vocabulary is the same, 3 of the 4 test tokens unknown
    assert summary["data/unk_rate/test"] == 0.75 and any(
        "75% of the test tokens are <unk>" in w for w in summary["warnings"]
    )


def test_embeddings_covering_no_word_are_refused_and_low_coverage_flagged(tmp_path):
    vectors = tmp_path / "vectors.txt"
    vectors.write_text("zebra 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8\n")
    with pytest.raises(DataError, match="none of the .* vocabulary words has a vector"):
        train_and_test(user_csv(tmp_path, CSV, f"model.embeddings.path={vectors}"), tmp_path / "a")
    vectors.write_text("good 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8\n")
    summary = train_and_test(user_csv(tmp_path, CSV, f"model.embeddings.path={vectors}"), tmp_path / "b")
    assert 0 < summary["data/embedding_coverage"] < 0.5 and any("cover" in w for w in summary["warnings"])


def test_very_long_instances_are_flagged_before_training(tmp_path):
    text = CSV.replace("good film indeed", " ".join(["word"] * 2500))
    summary = train_and_test(user_csv(tmp_path, text), tmp_path / "run")
    assert any("longest instances have 2500" in w for w in summary["warnings"])


def test_batch_sizes_and_class_weights_are_checked_before_training(tmp_path):
    for override, named in (
        ("dataset.batch_size=0", "dataset.batch_size=0"),
        ("dataset.eval_batch_size=0", "dataset.eval_batch_size=0"),
        ("model.class_weights=[1.0,2.0,3.0]", "model.class_weights"),
    ):
        with pytest.raises(UserError, match=named.replace(".", r"\.").replace("[", r"\[")):
            train_and_test(compose_config(*TINY, "logger=none", override), tmp_path / "run")
        assert not (tmp_path / "run" / "checkpoints").exists(), override


@pytest.mark.parametrize(
    "build, line",
    [
        (lambda: Preprocessing(min_count=0), "dataset.preprocessing.min_count=0: must be a whole number >= 1"),
        (lambda: Preprocessing(min_length=1.0), "dataset.preprocessing.min_length=1.0: must be a whole number >= 1"),
        (lambda: Preprocessing(truncate=0), "dataset.preprocessing.truncate=0: must be a whole number >= 1 or null"),
        (lambda: Injection(count=0), "dataset.inject.count=0: must be a whole number >= 1"),
        (
            lambda: TextDataModule(SyntheticSource(), eval_batch_size=0),
            "dataset.eval_batch_size=0: must be a whole number >= 1",
        ),
    ],
)
def test_a_data_constructor_refuses_in_the_configs_words(build, line):
    """Python users build these without the config's checks: the constructors refuse in the same one line."""
    with pytest.raises((DataError, UserError)) as refused:
        build()
    assert str(refused.value).startswith(line)


class StubSplit:
    """A split as check_data reads it: labels, per-instance ids and their lengths."""

    def __init__(self, labels, ids):
        self.labels, self.ids = np.array(labels, dtype=int), [np.array(i, dtype=int) for i in ids]
        self.lengths = np.array([len(i) for i in ids], dtype=int)

    def __len__(self):
        return len(self.labels)


def stub_module(splits: dict, vocab_size: int = 10) -> SimpleNamespace:
    """A set-up datamodule as check_data reads it: ``splits`` {name: (labels, ids)}, a vocabulary of
    ``vocab_size`` words with <unk> = 1."""
    data = SimpleNamespace(
        splits={name: StubSplit(*split) for name, split in splits.items()},
        vocab=Vocab([f"w{i}" for i in range(vocab_size - 2)]),
        stats={},
        label_names=["a", "b"],
    )
    return SimpleNamespace(data=data, name="stub", preprocessing=SimpleNamespace(min_count=1), batch_size=4)


def test_two_classes_and_half_unknown_tokens_are_no_warning():
    """By hand: every split has both classes (no AUROC warning); the test split's tokens are 1 of 2 <unk> — a rate of
    exactly 0.5, not "mostly unknown" (the warning is for > 0.5)."""
    from attn_study.data.checks import check_data

    both = ([0, 1], [[2, 3], [4, 5]])
    metrics, warnings = check_data(stub_module({"train": both, "dev": both, "test": ([0, 1], [[1, 2], [1, 3]])}))
    assert warnings == [] and metrics == {"data/unk_rate/train": 0.0, "data/unk_rate/test": 0.5}


def test_the_long_instance_warning_names_the_three_longest():
    from attn_study.data.checks import LONG_INSTANCE, check_data

    lengths = [LONG_INSTANCE + 4, LONG_INSTANCE + 3, LONG_INSTANCE + 2, LONG_INSTANCE + 1]
    train = ([0, 1, 0, 1], [[2] * n for n in lengths])
    both = ([0, 1], [[2, 3], [4, 5]])
    _, warnings = check_data(stub_module({"train": train, "dev": both, "test": both}))
    (long,) = [w for w in warnings if "longest instances" in w]
    assert f"have {lengths[0]}, {lengths[1]}, {lengths[2]} tokens and no" in long
