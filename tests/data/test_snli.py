"""SNLI reader: jsonl fields, labels and their order, '-' pairs dropped and counted, zip input, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attn_study.data.snli import SNLISource
from attn_study.errors import DataError, UserError
from tests.data.canonical_files import snli_line, write_snli, write_snli_zip


@pytest.fixture
def snli_dir(tmp_path: Path) -> Path:
    return write_snli(tmp_path / "data")


@pytest.fixture
def snli_zip(snli_dir: Path, tmp_path: Path) -> Path:
    return write_snli_zip(snli_dir, tmp_path / "snli_1.0.zip")


def test_fields_labels_and_dropped_pairs(snli_dir: Path) -> None:
    source = SNLISource(str(snli_dir))
    assert (source.name, source.num_classes, source.label_names) == (
        "snli",
        3,
        ["entailment", "neutral", "contradiction"],
    )
    splits = source.load()
    assert {k: [(e.uid, e.label) for e in v] for k, v in splits.items()} == {
        "train": [("3416050480.jpg#4r1n", 1), ("3416050480.jpg#4r1c", 2), ("3416050480.jpg#4r1e", 0)],
        "dev": [("4705552913.jpg#2r1n", 1), ("4705552913.jpg#2r1e", 0)],
        "test": [("2677109430.jpg#1r1n", 1), ("2677109430.jpg#1r1c", 2)],
    }
    assert source.dropped == {"train": 1, "dev": 0, "test": 1}
    first = splits["train"][0]
    assert first.text == "A person on a horse jumps over a broken down airplane."
    assert first.query == "A person is training his horse for a competition."


def test_label_order_option(snli_dir: Path) -> None:
    source = SNLISource(str(snli_dir), labels=["neutral", "contradiction", "entailment"])
    assert [e.label for e in source.load()["train"]] == [0, 1, 2]
    with pytest.raises(UserError, match="dataset.source.labels"):
        SNLISource(str(snli_dir), labels=["entailment", "neutral"])


def test_zip_and_parent_folder_match_the_folder(snli_dir: Path, snli_zip: Path) -> None:
    expected = SNLISource(str(snli_dir)).load()
    assert SNLISource(str(snli_zip)).load() == expected
    assert SNLISource(str(snli_dir.parent)).load() == expected


def test_unknown_gold_label(snli_dir: Path) -> None:
    with (snli_dir / "snli_1.0_dev.jsonl").open("a", encoding="utf-8") as handle:
        handle.write(snli_line("1#1", "p", "h", "maybe", ["maybe"]) + "\n")
    with pytest.raises(DataError, match=r"snli_1\.0_dev\.jsonl, line 3: gold_label 'maybe'"):
        SNLISource(str(snli_dir)).load()


def test_bad_json_and_missing_field(snli_dir: Path) -> None:
    path = snli_dir / "snli_1.0_test.jsonl"
    path.write_text(path.read_text(encoding="utf-8") + "{not json\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"snli_1\.0_test\.jsonl, line 4: not a JSON object"):
        SNLISource(str(snli_dir)).load()
    path.write_text(json.dumps({"sentence1": "p", "gold_label": "neutral", "pairID": "1"}) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"line 1: no string field sentence2"):
        SNLISource(str(snli_dir)).load()


def test_missing_split_file_and_paths(snli_dir: Path, tmp_path: Path) -> None:
    (snli_dir / "snli_1.0_dev.jsonl").unlink()
    with pytest.raises(DataError, match=r"snli_1\.0/snli_1\.0_dev\.jsonl: not found"):
        SNLISource(str(snli_dir)).load()
    with pytest.raises(DataError, match=r"dataset.path=.*nope: not found; give the snli_1.0 folder"):
        SNLISource(str(tmp_path / "nope")).load()
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"no snli_1\.0_\*\.jsonl"):
        SNLISource(str(tmp_path / "empty")).load()


def test_zip_without_a_split_and_broken_zip(snli_dir: Path, tmp_path: Path) -> None:
    (snli_dir / "snli_1.0_test.jsonl").unlink()
    archive = write_snli_zip(snli_dir, tmp_path / "snli_1.0.zip")
    with pytest.raises(DataError, match=r"snli_1\.0\.zip: no snli_1\.0_test\.jsonl in the archive"):
        SNLISource(str(archive)).load()
    archive.write_bytes(b"<html>404</html>")
    with pytest.raises(DataError, match=r"not a readable \.zip archive"):
        SNLISource(str(archive)).load()


def test_only_unlabelled_pairs_is_an_error(snli_dir: Path) -> None:
    (snli_dir / "snli_1.0_dev.jsonl").write_text(snli_line("1#1", "p", "h", "-", ["neutral"]) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"snli_1\.0_dev\.jsonl: no labelled pairs"):
        SNLISource(str(snli_dir)).load()


def test_fingerprint(snli_dir: Path, snli_zip: Path) -> None:
    assert [Path(f["path"]).name for f in SNLISource(str(snli_dir)).fingerprint()["files"]] == [
        "snli_1.0_train.jsonl",
        "snli_1.0_dev.jsonl",
        "snli_1.0_test.jsonl",
    ]
    assert SNLISource(str(snli_zip)).fingerprint()["files"][0]["size"] == snli_zip.stat().st_size
