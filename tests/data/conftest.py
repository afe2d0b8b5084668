"""Small dataset fixtures written in the canonical formats (SST PTB trees, aclImdb) into tmp_path."""

from __future__ import annotations

import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

SST_TREES = {
    "train": [
        "(3 (2 It) (3 (2 (2 's) (3 good)) (2 .)))",
        "(0 (0 Awful) (2 (2 -LRB-) (2 (2 really) (2 -RRB-))))",
        "(2 (2 Just) (2 (2 a) (2 film)))",
        "(4 (4 Brilliant) (3 (2 n't) (2 1\\/2)))",
        "(1 (2 -LSB-) (1 (1 dull) (2 -RSB-)))",
    ],
    "dev": [
        "(2 (2 So) (2 so))",
        "(1 (1 Bad) (2 \\*))",
        "(3 (2 -LCB-) (3 (3 fine) (2 -RCB-)))",
    ],
    "test": [
        "(4 Great)",
        "(0 (0 Terrible) (2 .))",
        "(2 (2 Meh) (2 .))",
    ],
}

# (split, polarity) -> review file names <id>_<rating>.txt
IMDB_FILES = {
    ("train", "pos"): ["0_9", "1_7", "2_10", "3_8", "10_9"],
    ("train", "neg"): ["0_3", "1_1", "2_4", "3_2", "11_1"],
    ("test", "pos"): ["0_10", "1_7", "2_8"],
    ("test", "neg"): ["0_1", "1_4", "2_2"],
}


def write_sst_trees(folder: Path) -> Path:
    """Write train.txt, dev.txt, test.txt of SST_TREES into ``folder``; return it."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, lines in SST_TREES.items():
        (folder / f"{split}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


@pytest.fixture
def sst_dir(tmp_path: Path) -> Path:
    """A folder laid out like the unpacked zip: ``<tmp>/trainDevTestTrees_PTB/trees/{split}.txt``."""
    write_sst_trees(tmp_path / "sst" / "trainDevTestTrees_PTB" / "trees")
    return tmp_path / "sst"


@pytest.fixture
def sst_zip(tmp_path: Path) -> Path:
    """``trainDevTestTrees_PTB.zip`` with members ``trees/{split}.txt`` as Stanford ships it."""
    trees = write_sst_trees(tmp_path / "zip_src" / "trees")
    archive = tmp_path / "trainDevTestTrees_PTB.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        zipped.write(trees, "trees/")
        for split in SST_TREES:
            zipped.write(trees / f"{split}.txt", f"trees/{split}.txt")
    return archive


@pytest.fixture
def make_aclimdb(tmp_path: Path) -> Callable[..., Path]:
    """Factory: write an ``aclImdb`` tree with the given review names (plus files to ignore)."""

    def make(files: dict[tuple[str, str], list[str]], name: str = "imdb") -> Path:
        root = tmp_path / name / "aclImdb"
        for (split, polarity), stems in files.items():
            folder = root / split / polarity
            folder.mkdir(parents=True, exist_ok=True)
            for stem in stems:
                text = f"Review {split} {polarity} {stem}.<br /><br />Second line<br/>third<BR>end"
                (folder / f"{stem}.txt").write_text(text, encoding="utf-8")
        (root / "unsup").mkdir(parents=True, exist_ok=True)
        (root / "unsup" / "0_0.txt").write_text("unlabelled review", encoding="utf-8")
        (root / "train" / "urls_pos.txt").write_text("http://www.imdb.com/title/tt0000001/usercomments\n")
        (root / "train" / "labeledBow.feat").write_text("9 0:9 1:1\n")
        (root / "imdbEr.txt").write_text("0.0490972013402\n")
        (root / "README").write_text("Large Movie Review Dataset v1.0\n")
        return root

    return make


def write_tarball(root: Path, archive: Path, reverse: bool = False) -> Path:
    """Pack the ``aclImdb`` folder ``root`` into ``archive`` (gzip); members reversed if asked."""
    paths = sorted(root.rglob("*"), reverse=reverse)
    with tarfile.open(archive, "w:gz") as tar:
        for path in paths:
            tar.add(path, arcname=f"aclImdb/{path.relative_to(root).as_posix()}", recursive=False)
    return archive


@pytest.fixture
def pack_tarball() -> Callable[..., Path]:
    """The ``write_tarball`` helper, for tests that pack their own trees."""
    return write_tarball


@pytest.fixture
def aclimdb_dir(make_aclimdb: Callable[..., Path]) -> Path:
    """The small ``aclImdb`` folder of IMDB_FILES."""
    return make_aclimdb(IMDB_FILES)


@pytest.fixture
def aclimdb_tar(aclimdb_dir: Path, tmp_path: Path) -> Path:
    """``aclImdb_v1.tar.gz`` packed from ``aclimdb_dir``."""
    return write_tarball(aclimdb_dir, tmp_path / "aclImdb_v1.tar.gz")
