"""20 Newsgroups, "bydate" version (Rennie): a binary or multi-class task over chosen newsgroups.

The canonical ``20news-bydate.tar.gz`` holds ``20news-bydate-{train,test}/<newsgroup>/<id>``, one
latin-1 encoded post per file. Jain & Wallace use rec.sport.baseball (0) vs rec.sport.hockey (1).
Each post is cleaned by ``clean_post`` (headers, quotes and signature removed).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from attn_study.data.digest import describe_file, describe_folder
from attn_study.data.download import stream_tar_gz
from attn_study.data.example import RawExample
from attn_study.data.source import DOWNLOAD_DIR, DownloadableSource
from attn_study.data.splits import stratified_indices
from attn_study.errors import DataError, UserError

NEWS_URL = "http://qwone.com/~jason/20Newsgroups/20news-bydate.tar.gz"
TAR_NAME = "20news-bydate.tar.gz"
PATH_HINT = (
    "give the folder holding 20news-bydate-train/ and 20news-bydate-test/, or 20news-bydate.tar.gz, via dataset.path"
)
FILE_SPLITS = ("train", "test")
CATEGORIES = ("rec.sport.baseball", "rec.sport.hockey")

_MEMBER = re.compile(r"(?:.*/)?20news-bydate-(train|test)/([^/]+)/([^/]+)")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_ATTRIBUTION = re.compile(r"^\s*In article\b|(?:writes|wrote):\s*$")


def clean_post(text: str) -> str:
    """The body of a newsgroup post without its header, signature, quotes and attribution lines.

    1. The header block is everything up to the first blank line (a post without one is all header).
    2. The signature is everything from the last line that is ``--`` (spaces around it allowed).
    3. Quoted lines (first non-blank character ``>`` or ``|``) are dropped.
    4. Attribution lines are dropped: a line starting ``In article`` (``In article <msg-id>, who
       writes:``), and a line ending with ``writes:`` or ``wrote:`` (also the second half of an
       attribution wrapped over two lines).
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    parts = _BLANK_LINE.split(text, maxsplit=1)
    lines = parts[1].split("\n") if len(parts) == 2 else []
    delimiters = [i for i, line in enumerate(lines) if line.strip() == "--"]
    if delimiters:
        lines = lines[: delimiters[-1]]
    kept = [line for line in lines if not line.lstrip().startswith((">", "|")) and not _ATTRIBUTION.search(line)]
    return "\n".join(kept).strip()


def jain_wallace_split(posts: list[RawExample], seed: int) -> dict[str, list[RawExample]]:
    """Jain & Wallace's 20News splits (their ``fetch_20newsgroups(subset='all')`` preprocessing): the
    non-empty posts of both bydate halves pooled, a stratified 20 % test split, then a stratified 20 % of
    the rest as dev, both drawn with ``seed`` (theirs: 13478). They drew with scikit-learn; the
    proportions, the stratification and the seed are theirs, the members differ."""
    posts = [p for p in posts if p.text.strip()]
    test = set(stratified_indices([p.label for p in posts], int(round(0.2 * len(posts))), seed, "20News test split"))
    rest = [p for i, p in enumerate(posts) if i not in test]
    dev = set(stratified_indices([p.label for p in rest], int(round(0.2 * len(rest))), [seed, 1], "20News dev split"))
    return {
        "train": [p for i, p in enumerate(rest) if i not in dev],
        "dev": [rest[i] for i in sorted(dev)],
        "test": [posts[i] for i in sorted(test)],
    }


class TwentyNewsSource(DownloadableSource):
    """Posts of ``categories`` (label = position in the list): bydate train (dev carved out) and test."""

    archive = TAR_NAME
    path_hint = PATH_HINT

    def __init__(
        self,
        path: str | None = None,
        categories: Sequence[str] = CATEGORIES,
        url: str = NEWS_URL,
        sha256: str | None = None,
        cache_dir: str = DOWNLOAD_DIR,
        dev_size: int = 120,
        split_seed: int = 13,
        split: str = "bydate",
    ) -> None:
        if split not in ("bydate", "jain_wallace"):
            raise UserError(f"dataset.source.split={split}: choose bydate or jain_wallace")
        self.categories = [str(c) for c in categories]
        if len(self.categories) < 2 or len(set(self.categories)) != len(self.categories):
            raise UserError(f"dataset.source.categories={self.categories}: give two or more distinct newsgroups")
        super().__init__(path, url, sha256, cache_dir, name="twenty_news", label_names=self.categories)
        self.split = split
        self.dev_size = dev_size
        self.split_seed = split_seed

    def load(self) -> dict[str, list[RawExample]]:
        """Read train/dev/test, each sorted by uid ``<file split>/<newsgroup>/<id>``."""
        source = self._resolve()
        found: dict[tuple[str, str], list[RawExample]] = {(s, c): [] for s in FILE_SPLITS for c in self.categories}
        posts = _read_tar(source, self.categories) if source.is_file() else _read_folder(source, self.categories)
        for split, category, name, raw in posts:
            uid = f"{split}/{category}/{name}"
            label = self.categories.index(category)
            found[split, category].append(RawExample(uid=uid, text=clean_post(raw.decode("latin-1")), label=label))
        for (split, category), examples in found.items():
            if not examples:
                where = (
                    f"{source}:20news-bydate-{split}/{category}/"
                    if source.is_file()
                    else source / f"20news-bydate-{split}" / category
                )
                raise DataError(f"{where}: no posts; check dataset.source.categories or {PATH_HINT}")
        train = sorted((e for c in self.categories for e in found["train", c]), key=lambda e: e.uid)
        test = sorted((e for c in self.categories for e in found["test", c]), key=lambda e: e.uid)
        if self.split == "jain_wallace":
            return jain_wallace_split(train + test, self.split_seed)
        dev = set(
            stratified_indices([e.label for e in train], self.dev_size, self.split_seed, "dataset.source.dev_size")
        )
        return {
            "train": [e for i, e in enumerate(train) if i not in dev],
            "dev": [train[i] for i in sorted(dev)],
            "test": test,
        }

    def fingerprint(self) -> dict[str, Any]:
        """A JSON-able identity of the source content: class, options, input stats.

        A tarball is described by its path, size and content digest; a folder by the number, total
        size and a digest of the names and contents of the post files of the chosen newsgroups.
        """
        source = self._resolve()
        options = {
            "class": type(self).__name__,
            "categories": self.categories,
            "dev_size": self.dev_size,
            "split_seed": self.split_seed,
            "split": self.split,
        }
        if source.is_file():
            return {**options, "files": [describe_file(source)]}
        return {**options, "folder": describe_folder(source, _post_paths(source, self.categories))}

    def _resolve(self) -> Path:
        """The folder holding the two bydate folders, or the tarball (downloaded when no path)."""
        given = self._given()
        if given.is_file():
            return given
        for root in (given, given / "20news-bydate"):
            if any((root / f"20news-bydate-{split}").is_dir() for split in FILE_SPLITS):
                return root
        raise DataError(f"dataset.path={self.path}: no 20news-bydate-train/ or 20news-bydate-test/ in it; {PATH_HINT}")


def _post_paths(root: Path, categories: Sequence[str]) -> Iterator[Path]:
    """The post files ``20news-bydate-<split>/<newsgroup>/<id>`` of the chosen newsgroups."""
    for split in FILE_SPLITS:
        for category in categories:
            folder = root / f"20news-bydate-{split}" / category
            if folder.is_dir():
                yield from (p for p in folder.iterdir() if p.is_file())


def _read_folder(root: Path, categories: Sequence[str]) -> Iterator[tuple[str, str, str, bytes]]:
    """(split, newsgroup, file name, bytes) of every post of the chosen newsgroups in the folder."""
    for path in _post_paths(root, categories):
        yield path.parent.parent.name.removeprefix("20news-bydate-"), path.parent.name, path.name, path.read_bytes()


def _read_tar(archive: Path, categories: Sequence[str]) -> Iterator[tuple[str, str, str, bytes]]:
    """(split, newsgroup, file name, bytes) of every post of the chosen newsgroups in the tarball."""
    wanted = set(categories)
    hint = "download it again or give the extracted folder via dataset.path"
    for match, raw in stream_tar_gz(archive, _MEMBER, lambda m: m[2] in wanted, hint):
        yield match[1], match[2], match[3], raw
