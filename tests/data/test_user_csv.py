"""User CSV reader (ADR, MIMIC): columns, splits, labels, quoting, errors that say how to get the data."""

from __future__ import annotations

from pathlib import Path

import pytest

from attn_study.data.user_csv import UserCSVSource
from attn_study.errors import DataError, UserError
from tests.data.canonical_files import USER_CSV, write_user_csv

HINT = "ask the authors"


@pytest.fixture
def user_csv(tmp_path: Path) -> Path:
    return write_user_csv(tmp_path / "adr.csv")


def _source(path: Path | None, **options) -> UserCSVSource:
    return UserCSVSource(
        str(path) if path else None, dataset="adr", label_names=["no ADR", "ADR"], obtain=HINT, **options
    )


def test_rows_go_to_their_split(user_csv: Path) -> None:
    source = _source(user_csv)
    assert (source.name, source.num_classes, source.label_names) == ("adr", 2, ["no ADR", "ADR"])
    splits = source.load()
    assert {k: [(e.uid, e.text, e.label) for e in v] for k, v in splits.items()} == {
        "train": [
            ("train-1", "i took DRUG and now my head hurts, badly", 1),
            ("train-2", "feeling fine today", 0),
            ("train-3", 'a "quoted" tweet\nover two lines', 0),
        ],
        "dev": [("dev-4", "DRUG gave me a rash", 1), ("dev-5", "nothing to report", 0)],
        "test": [("test-6", "cannot sleep since DRUG", 1), ("test-7", "lovely weather", 0)],
    }


def test_renamed_columns(tmp_path: Path) -> None:
    path = write_user_csv(tmp_path / "d.csv", USER_CSV.replace(",split\n", ",exp_split\n", 1))
    with pytest.raises(DataError, match=r"d\.csv: no column split in the header row"):
        _source(path).load()
    assert len(_source(path, split_column="exp_split").load()["test"]) == 2


def test_bad_split_and_label_name_the_line(tmp_path: Path) -> None:
    path = write_user_csv(tmp_path / "a.csv", USER_CSV.replace("0,dev", "0,valid"))
    with pytest.raises(DataError, match=r"a\.csv, line 7: split 'valid' is not one of train, dev, test"):
        _source(path).load()
    path = write_user_csv(tmp_path / "b.csv", USER_CSV.replace("1,test", "2,test"))
    with pytest.raises(DataError, match=r"b\.csv, line 8: label '2' is not 0-1 \(no ADR, ADR\)"):
        _source(path).load()


def test_every_split_needs_rows(tmp_path: Path) -> None:
    path = write_user_csv(tmp_path / "a.csv", USER_CSV.replace(",dev\n", ",train\n"))
    with pytest.raises(DataError, match=r"a\.csv: no rows with split=dev"):
        _source(path).load()


def test_path_required_says_how_to_obtain() -> None:
    with pytest.raises(DataError, match=f"dataset.path is required for adr: attn_study cannot download it; {HINT}"):
        _source(None).load()


def test_missing_file_and_folder(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=f"nope.csv: not found; give the CSV .*{HINT}"):
        _source(tmp_path / "nope.csv").load()
    with pytest.raises(DataError, match="a folder, not a CSV file"):
        _source(tmp_path).load()


def test_not_utf8_and_malformed(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_bytes(USER_CSV.encode("utf-8") + b"8,caf\xe9,0,test\n")
    with pytest.raises(DataError, match=r"a\.csv: not UTF-8 text"):
        _source(path).load()
    write_user_csv(path, USER_CSV + '8,"never closed,0,test\n')
    with pytest.raises(DataError, match=r"a\.csv: malformed CSV"):
        _source(path).load()


def test_label_names_option() -> None:
    with pytest.raises(UserError, match="dataset.source.label_names"):
        UserCSVSource("x.csv", label_names=["only"])


def test_fingerprint(user_csv: Path) -> None:
    fp = _source(user_csv).fingerprint()
    assert fp["columns"] == ["text", "label", "split"] and fp["files"][0]["size"] == user_csv.stat().st_size
