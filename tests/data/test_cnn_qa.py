"""CNN cloze QA reader: .question parsing, entity labels and candidates, layouts, archive, errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from attn_study.data.cnn_qa import CNNQASource, parse_question
from attn_study.errors import DataError
from tests.data.canonical_files import (
    CNN_FILES,
    question_file,
    write_cnn,
    write_tree_tarball,
)


@pytest.fixture
def cnn_dir(tmp_path: Path) -> Path:
    return write_cnn(tmp_path / "dmqa")


def test_parse_question_file() -> None:
    text = question_file(
        "@entity0 met @entity1 .", "@placeholder met @entity1", "@entity0", {0: "Ann Lee", 1: "Bob: the builder"}
    )
    assert parse_question(text, "x.question") == ("@entity0 met @entity1 .", "@placeholder met @entity1", 0)
    with pytest.raises(DataError, match=r"x\.question: not a \.question file"):
        parse_question(text.replace("\n\n@entity0 met", "\n@entity0 met", 1), "x.question")
    with pytest.raises(DataError, match=r"x\.question, line 7: answer 'Ann Lee' is not an @entity<N>"):
        parse_question(text.replace("\n@entity0\n", "\nAnn Lee\n", 1), "x.question")
    with pytest.raises(DataError, match="no @placeholder"):
        parse_question(text.replace("@placeholder", "@entity0"), "x.question")


def test_labels_candidates_and_splits(cnn_dir: Path) -> None:
    source = CNNQASource(str(cnn_dir))
    splits = source.load()
    assert source.num_classes == 8  # largest training entity is @entity7
    assert source.label_names == [f"@entity{k}" for k in range(8)]
    summary = {split: [(e.uid, e.label, e.candidates) for e in examples] for split, examples in splits.items()}
    assert summary == {
        "train": [("training/0a1b", 1, (0, 1, 2, 3)), ("training/5c5c", 2, (2, 5)), ("training/9f8e", 0, (0, 4, 7))],
        "dev": [("validation/1111", 1, (1, 3))],  # @entity9 is beyond the training entities: not a candidate
        "test": [("test/2222", 6, (0, 6))],
    }
    first = splits["train"][0]
    assert first.text == CNN_FILES["training"]["0a1b"][0]
    assert first.query == "@placeholder police arrested @entity3"


def test_num_classes_before_load_reads_the_files(cnn_dir: Path) -> None:
    assert CNNQASource(str(cnn_dir)).num_classes == 8


def test_layouts_and_archive_agree(cnn_dir: Path, tmp_path: Path) -> None:
    expected = CNNQASource(str(cnn_dir)).load()
    assert CNNQASource(str(cnn_dir / "questions")).load() == expected
    assert CNNQASource(str(cnn_dir.parent)).load() == expected
    archive = write_tree_tarball(cnn_dir, tmp_path / "cnn.tgz", prefix="cnn/")
    assert CNNQASource(str(archive)).load() == expected


def test_test_answer_beyond_training_entities(tmp_path: Path) -> None:
    files = {**CNN_FILES, "test": {"3333": ("@entity12 beat @entity0 .", "@placeholder beat @entity0", "@entity12")}}
    cnn = write_cnn(tmp_path / "x", files)
    with pytest.raises(
        DataError,
        match=r"test/3333\.question: answer @entity12 is beyond the largest entity of "
        r"the training files \(@entity7\)",
    ):
        CNNQASource(str(cnn)).load()


def test_path_required_and_missing(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"dataset.path is required for CNN: .*cs.nyu.edu/~kcho/DMQA") as error:
        CNNQASource(None).load()
    assert "Google Drive" in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(DataError, match=r"dataset.path=.*nope: not found"):
        CNNQASource(str(tmp_path / "nope")).load()
    with pytest.raises(DataError, match=r"no training/, validation/ or test/"):
        CNNQASource(str(tmp_path)).load()


def test_missing_split_folder(cnn_dir: Path) -> None:
    shutil.rmtree(cnn_dir / "questions" / "validation")
    with pytest.raises(DataError, match=r"questions/validation: no \.question files"):
        CNNQASource(str(cnn_dir)).load()


def test_malformed_file_is_named(cnn_dir: Path) -> None:
    bad = cnn_dir / "questions" / "training" / "bad.question"
    bad.write_text("http://x\n\nonly a passage\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"training/bad\.question: not a \.question file"):
        CNNQASource(str(cnn_dir)).load()


def test_fingerprint(cnn_dir: Path) -> None:
    folder = CNNQASource(str(cnn_dir)).fingerprint()["folder"]
    assert folder["files"] == 5
    (cnn_dir / "questions" / "test" / "2222.question").write_text("changed")
    assert CNNQASource(str(cnn_dir)).fingerprint()["folder"]["blake2b"] != folder["blake2b"]
