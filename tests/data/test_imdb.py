"""IMDB reader: folder and tarball input, text cleaning, labels, the dev carve, errors."""

from __future__ import annotations

import hashlib
import shutil
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from attn_study.data.imdb import IMDBSource
from attn_study.errors import DataError, UserError
from tests.helpers import SHARED_DATA

REAL_IMDB = SHARED_DATA / "imdb" / "aclImdb_v1.tar.gz"
RATING_CLASS = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 9: 6, 10: 7}


def _uids(splits: dict) -> dict[str, list[str]]:
    return {split: [e.uid for e in examples] for split, examples in splits.items()}


def test_folder_and_tarball_give_identical_results(aclimdb_dir: Path, aclimdb_tar: Path) -> None:
    for ratings in (False, True):
        from_folder = IMDBSource(str(aclimdb_dir), dev_size=4, ratings=ratings).load()
        assert IMDBSource(str(aclimdb_tar), dev_size=4, ratings=ratings).load() == from_folder
        assert IMDBSource(str(aclimdb_dir.parent), dev_size=4, ratings=ratings).load() == from_folder


def test_splits_uids_and_ignored_files(aclimdb_dir: Path) -> None:
    splits = IMDBSource(str(aclimdb_dir), dev_size=4).load()
    assert {k: len(v) for k, v in splits.items()} == {"train": 6, "dev": 4, "test": 6}
    assert _uids(splits)["test"] == [
        "test/neg/0_1",
        "test/neg/1_4",
        "test/neg/2_2",
        "test/pos/0_10",
        "test/pos/1_7",
        "test/pos/2_8",
    ]
    train_and_dev = sorted(_uids(splits)["train"] + _uids(splits)["dev"])
    assert train_and_dev == sorted(
        f"train/{p}/{s}"
        for p, stems in [("pos", ["0_9", "1_7", "2_10", "3_8", "10_9"]), ("neg", ["0_3", "1_1", "2_4", "3_2", "11_1"])]
        for s in stems
    )
    for examples in splits.values():
        assert [e.uid for e in examples] == sorted(e.uid for e in examples)


def test_html_breaks_replaced_by_spaces(aclimdb_tar: Path) -> None:
    example = IMDBSource(str(aclimdb_tar), dev_size=4).load()["test"][0]
    assert example.text == "Review test neg 0_1.  Second line third end"


def test_binary_labels_follow_the_folder(aclimdb_dir: Path) -> None:
    source = IMDBSource(str(aclimdb_dir), dev_size=4)
    assert (source.name, source.num_classes, source.label_names) == ("imdb", 2, ["negative", "positive"])
    for examples in source.load().values():
        for example in examples:
            assert example.label == (1 if example.uid.split("/")[1] == "pos" else 0)


def test_ratings_map_to_eight_classes(aclimdb_dir: Path) -> None:
    source = IMDBSource(str(aclimdb_dir), dev_size=4, ratings=True)
    assert (source.name, source.num_classes) == ("imdb_rating", 8)
    assert len(source.label_names) == 8
    labels = {}
    for examples in source.load().values():
        for example in examples:
            rating = int(example.uid.rsplit("_", 1)[1])
            assert example.label == RATING_CLASS[rating]
            labels[rating] = example.label
    assert labels == RATING_CLASS


def test_rating_outside_the_eight_is_rejected(make_aclimdb: Callable[..., Path]) -> None:
    root = make_aclimdb(
        {
            ("train", "pos"): ["0_9", "1_6"],
            ("train", "neg"): ["0_1", "1_2"],
            ("test", "pos"): ["0_8"],
            ("test", "neg"): ["0_2"],
        }
    )
    IMDBSource(str(root), dev_size=2).load()
    with pytest.raises(DataError, match=r"train/pos/1_6\.txt: rating 6"):
        IMDBSource(str(root), dev_size=2, ratings=True).load()


def test_dev_carve_is_stratified_deterministic_and_order_free(
    make_aclimdb: Callable[..., Path], pack_tarball: Callable[..., Path], tmp_path: Path
) -> None:
    files = {
        ("train", "pos"): [f"{i}_8" for i in range(30)],
        ("train", "neg"): [f"{i}_2" for i in range(10)],
        ("test", "pos"): ["0_9"],
        ("test", "neg"): ["0_1"],
    }
    root = make_aclimdb(files)
    forward = pack_tarball(root, tmp_path / "forward.tar.gz")
    backward = pack_tarball(root, tmp_path / "backward.tar.gz", reverse=True)
    first = IMDBSource(str(forward), dev_size=8).load()
    assert Counter(e.label for e in first["dev"]) == {1: 6, 0: 2}
    assert Counter(e.label for e in first["train"]) == {1: 24, 0: 8}
    assert not {e.uid for e in first["dev"]} & {e.uid for e in first["train"]}
    assert IMDBSource(str(forward), dev_size=8).load() == first
    assert IMDBSource(str(backward), dev_size=8).load() == first
    assert IMDBSource(str(root), dev_size=8).load() == first
    other_seeds = [_uids(IMDBSource(str(root), dev_size=8, split_seed=s).load())["dev"] for s in (1, 2, 3)]
    assert any(dev != _uids(first)["dev"] for dev in other_seeds)


def test_dev_size_must_leave_train(aclimdb_dir: Path) -> None:
    for bad in (0, 10):
        with pytest.raises(UserError, match=f"dataset.source.dev_size={bad}"):
            IMDBSource(str(aclimdb_dir), dev_size=bad).load()


def test_fingerprint(aclimdb_dir: Path, aclimdb_tar: Path) -> None:
    tar = IMDBSource(str(aclimdb_tar), dev_size=4).fingerprint()
    assert tar["files"] == [
        {
            "path": str(aclimdb_tar.resolve()),
            "size": aclimdb_tar.stat().st_size,
            "blake2b": hashlib.blake2b(aclimdb_tar.read_bytes(), digest_size=20).hexdigest(),
        }
    ]
    assert (tar["class"], tar["dev_size"], tar["split_seed"], tar["ratings"]) == ("IMDBSource", 4, 13, False)
    folder = IMDBSource(str(aclimdb_dir), dev_size=4).fingerprint()["folder"]
    assert (folder["path"], folder["files"]) == (str(aclimdb_dir.resolve()), 16)
    (aclimdb_dir / "test" / "pos" / "0_10.txt").write_text("changed")
    assert IMDBSource(str(aclimdb_dir), dev_size=4).fingerprint()["folder"]["blake2b"] != folder["blake2b"]


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"dataset.path=.*nope: not found; give the aclImdb folder"):
        IMDBSource(str(tmp_path / "nope")).load()


def test_folder_without_splits(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no train/ or test/"):
        IMDBSource(str(tmp_path)).load()


def test_empty_split_names_the_folder(aclimdb_dir: Path) -> None:
    shutil.rmtree(aclimdb_dir / "test" / "pos")
    with pytest.raises(DataError, match=r"aclImdb/test/pos: no reviews"):
        IMDBSource(str(aclimdb_dir), dev_size=4).load()


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.9, -1])
def test_truncated_tarball(aclimdb_tar: Path, keep: float) -> None:
    data = aclimdb_tar.read_bytes()
    aclimdb_tar.write_bytes(data[: int(len(data) * keep)] if keep > 0 else data[:-1])
    with pytest.raises(DataError, match=r"aclImdb_v1\.tar\.gz: corrupt or truncated archive") as error:
        IMDBSource(str(aclimdb_tar), dev_size=4).load()
    assert "dataset.path" in str(error.value) and "\n" not in str(error.value)


def test_corrupted_tarball(aclimdb_tar: Path) -> None:
    data = bytearray(aclimdb_tar.read_bytes())
    data[len(data) // 2] ^= 0xFF
    aclimdb_tar.write_bytes(bytes(data))
    with pytest.raises(DataError, match="corrupt or truncated archive"):
        IMDBSource(str(aclimdb_tar), dev_size=4).load()


def test_not_a_gzip_file(tmp_path: Path) -> None:
    bogus = tmp_path / "aclImdb_v1.tar.gz"
    bogus.write_bytes(b"<html>404 Not Found</html>")
    with pytest.raises(DataError, match="corrupt or truncated archive"):
        IMDBSource(str(bogus)).load()


@pytest.mark.slow
def test_real_imdb_counts() -> None:
    if not REAL_IMDB.is_file():
        pytest.skip(f"real IMDB not at {REAL_IMDB}")
    start = time.perf_counter()
    splits = IMDBSource(str(REAL_IMDB)).load()
    assert time.perf_counter() - start < 60
    assert {k: len(v) for k, v in splits.items()} == {"train": 22500, "dev": 2500, "test": 25000}
    assert Counter(e.label for e in splits["train"] + splits["dev"]) == {0: 12500, 1: 12500}
    assert Counter(e.label for e in splits["test"]) == {0: 12500, 1: 12500}
    assert Counter(e.label for e in splits["dev"]) == {0: 1250, 1: 1250}
    assert not any("<br" in e.text for e in splits["test"])
