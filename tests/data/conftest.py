"""Fixtures: small SST and aclImdb copies in their canonical formats, written into tmp_path."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.data.canonical_files import IMDB_FILES, SST_TREES, write_sst_trees, write_tarball


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
