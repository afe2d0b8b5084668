"""SST reader: PTB tree parsing, binary/fine-grained labels, input layouts, errors."""

from __future__ import annotations

import hashlib
import shutil
import zipfile
from pathlib import Path

import pytest

from attn_study.data.sst import SSTSource, parse_ptb_tree
from attn_study.errors import DataError
from tests.helpers import SHARED_DATA

REAL_SST = SHARED_DATA / "sst" / "trainDevTestTrees_PTB"


def _summary(splits: dict) -> dict[str, list[tuple[str, str, int]]]:
    return {split: [(e.uid, e.text, e.label) for e in examples] for split, examples in splits.items()}


BINARY = {
    "train": [
        ("train-1", "It 's good .", 1),
        ("train-2", "Awful ( really )", 0),
        ("train-4", "Brilliant n't 1/2", 1),
        ("train-5", "[ dull ]", 0),
    ],
    "dev": [("dev-2", "Bad *", 0), ("dev-3", "{ fine }", 1)],
    "test": [("test-1", "Great", 1), ("test-2", "Terrible .", 0)],
}
FINE = {
    "train": [
        ("train-1", "It 's good .", 3),
        ("train-2", "Awful ( really )", 0),
        ("train-3", "Just a film", 2),
        ("train-4", "Brilliant n't 1/2", 4),
        ("train-5", "[ dull ]", 1),
    ],
    "dev": [("dev-1", "So so", 2), ("dev-2", "Bad *", 1), ("dev-3", "{ fine }", 3)],
    "test": [("test-1", "Great", 4), ("test-2", "Terrible .", 0), ("test-3", "Meh .", 2)],
}


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("(3 (2 It) (4 (2 's) (3 good)))", (3, "It 's good")),
        ("(1 (2 -LRB-) (1 (1 bad) (2 -RRB-)))", (1, "( bad )")),
        ("(2 (2 -LCB-) (2 (2 -RCB-) (2 (2 -LSB-) (2 -RSB-))))", (2, "{ } [ ]")),
        ("(4 (2 1\\/2) (4 (2 \\*\\*\\*) (4 (2 ca) (2 n't))))", (4, "1/2 *** ca n't")),
        ("(0 Bad)", (0, "Bad")),
        ("(3 (2 8\xa01\\/2) (3 fun))", (3, "8\xa01/2 fun")),
        ("  (2 (2 a) (2 b))  \r", (2, "a b")),
    ],
)
def test_parse_ptb_tree(line: str, expected: tuple[int, str]) -> None:
    assert parse_ptb_tree(line) == expected


@pytest.mark.parametrize(
    "line",
    [
        "",
        "3 (2 It)",
        "(3 (2 It) (3 good)",
        "(3 (2 It) (3 good)))",
        "(3 (2 It) (3 good)) (2 more)",
        "(5 (2 It) (3 good))",
        "(x (2 It) (3 good))",
        "(3 (2 It good))",
        "(3 (2 It) stray (3 good))",
        "(3 (2 It) (3))",
        "(3",
    ],
)
def test_parse_ptb_tree_rejects_malformed(line: str) -> None:
    with pytest.raises(DataError, match="malformed PTB tree"):
        parse_ptb_tree(line)


def test_binary_drops_neutral_and_maps_labels(sst_dir: Path) -> None:
    source = SSTSource(str(sst_dir))
    assert (source.name, source.num_classes, source.label_names) == ("sst", 2, ["negative", "positive"])
    assert _summary(source.load()) == BINARY


def test_fine_grained_keeps_all_five_labels(sst_dir: Path) -> None:
    source = SSTSource(str(sst_dir), fine_grained=True)
    assert (source.name, source.num_classes, len(source.label_names)) == ("sst5", 5, 5)
    assert _summary(source.load()) == FINE


def test_zip_input_matches_folder(sst_dir: Path, sst_zip: Path) -> None:
    for fine_grained in (False, True):
        from_zip = SSTSource(str(sst_zip), fine_grained=fine_grained).load()
        assert from_zip == SSTSource(str(sst_dir), fine_grained=fine_grained).load()


@pytest.mark.parametrize("sub", ["", "trainDevTestTrees_PTB", "trainDevTestTrees_PTB/trees"])
def test_folder_variants(sst_dir: Path, sub: str) -> None:
    assert _summary(SSTSource(str(sst_dir / sub)).load()) == BINARY


def test_fingerprint_names_the_resolved_files(sst_dir: Path, sst_zip: Path) -> None:
    folder = SSTSource(str(sst_dir), fine_grained=True).fingerprint()
    trees = (sst_dir / "trainDevTestTrees_PTB" / "trees").resolve()
    assert folder["class"] == "SSTSource" and folder["fine_grained"] is True
    assert [f["path"] for f in folder["files"]] == [str(trees / f"{s}.txt") for s in ("train", "dev", "test")]
    assert folder["files"][0]["size"] == (trees / "train.txt").stat().st_size
    assert SSTSource(str(sst_zip)).fingerprint()["files"] == [
        {
            "path": str(sst_zip.resolve()),
            "size": sst_zip.stat().st_size,
            "blake2b": hashlib.blake2b(sst_zip.read_bytes(), digest_size=20).hexdigest(),
        }
    ]


def test_missing_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(DataError, match=r"dataset.path=.*nowhere: not found; give the folder holding train.txt"):
        SSTSource(str(missing)).load()


def test_folder_without_split_files(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no train.txt, dev.txt or test.txt"):
        SSTSource(str(tmp_path)).load()


def test_missing_split_file_is_named(sst_dir: Path) -> None:
    (sst_dir / "trainDevTestTrees_PTB" / "trees" / "dev.txt").unlink()
    with pytest.raises(DataError, match=r"trees/dev\.txt: not found"):
        SSTSource(str(sst_dir)).load()


def test_missing_zip_member_is_named(tmp_path: Path) -> None:
    archive = tmp_path / "partial.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("trees/train.txt", "(3 (2 a) (3 b))\n")
        zipped.writestr("trees/test.txt", "(3 (2 a) (3 b))\n")
    with pytest.raises(DataError, match=r"partial\.zip:trees/dev\.txt: not found in the archive"):
        SSTSource(str(archive)).load()


def test_empty_split_is_named(sst_dir: Path) -> None:
    test_file = sst_dir / "trainDevTestTrees_PTB" / "trees" / "test.txt"
    test_file.write_text("(2 (2 Meh) (2 .))\n\n")
    SSTSource(str(sst_dir), fine_grained=True).load()
    with pytest.raises(DataError, match=r"test\.txt: no sentences in the test split"):
        SSTSource(str(sst_dir)).load()


def test_malformed_line_reports_file_and_line(sst_dir: Path) -> None:
    dev = sst_dir / "trainDevTestTrees_PTB" / "trees" / "dev.txt"
    dev.write_text("(2 (2 So) (2 so))\n(1 (1 Bad) (2 *)\n")
    with pytest.raises(DataError, match=r"dev\.txt, line 2: malformed PTB tree") as error:
        SSTSource(str(sst_dir)).load()
    assert "\n" not in str(error.value)


def test_not_a_zip(tmp_path: Path) -> None:
    bogus = tmp_path / "trees.zip"
    bogus.write_bytes(b"not a zip at all")
    with pytest.raises(DataError, match=r"trees\.zip: not a readable \.zip archive"):
        SSTSource(str(bogus)).load()


def test_truncated_zip(sst_zip: Path) -> None:
    data = sst_zip.read_bytes()
    sst_zip.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match="corrupt or truncated"):
        SSTSource(str(sst_zip)).load()


@pytest.mark.slow
def test_real_sst_counts(tmp_path: Path) -> None:
    if not (REAL_SST / "train.txt").is_file():
        pytest.skip(f"real SST not at {REAL_SST}")
    binary = SSTSource(str(REAL_SST)).load()
    assert {k: len(v) for k, v in binary.items()} == {"train": 6920, "dev": 872, "test": 1821}
    fine = SSTSource(str(REAL_SST), fine_grained=True).load()
    assert {k: len(v) for k, v in fine.items()} == {"train": 8544, "dev": 1101, "test": 2210}
    assert {e.label for e in fine["train"]} == {0, 1, 2, 3, 4}
    assert not any("-LRB-" in e.text or "\\/" in e.text for v in fine.values() for e in v)
    shutil.copytree(REAL_SST, tmp_path / "trees")
    archive = Path(shutil.make_archive(str(tmp_path / "trainDevTestTrees_PTB"), "zip", tmp_path, "trees"))
    assert SSTSource(str(archive), fine_grained=True).load() == fine
