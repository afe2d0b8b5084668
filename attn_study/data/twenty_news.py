"""20 Newsgroups, "bydate" version (Rennie): a binary or multi-class task over chosen newsgroups.

The canonical ``20news-bydate.tar.gz`` holds ``20news-bydate-{train,test}/<newsgroup>/<id>``, one
latin-1 encoded post per file. Jain & Wallace use rec.sport.baseball (0) vs rec.sport.hockey (1).

``strip`` says how a post is cut down to its body: ``clean_post`` (this project's rules) or ``scikit_learn``
(``fetch_20newsgroups(remove=('headers', 'footers', 'quotes'))``'s three rules, in that order, as Jain & Wallace's
``preprocess/20News/20News.ipynb`` fetched the posts: :func:`strip_header`, :func:`strip_footer`,
:func:`strip_quotes`). ``split``: ``bydate`` (the release's test half; dev carved from its train half) or
``jain_wallace`` (their notebook's order and splits: :func:`fetch_order`, :func:`jain_wallace_split`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from attn_study.data.digest import describe_file, describe_folder
from attn_study.data.download import stream_tar_gz
from attn_study.data.example import RawExample
from attn_study.data.source import DOWNLOAD_DIR, DownloadableSource
from attn_study.data.splits import stratified_indices, train_test_split
from attn_study.errors import DataError, UserError

log = logging.getLogger(__name__)

NEWS_URL = "http://qwone.com/~jason/20Newsgroups/20news-bydate.tar.gz"
TAR_NAME = "20news-bydate.tar.gz"
PATH_HINT = (
    "give the folder holding 20news-bydate-train/ and 20news-bydate-test/, or 20news-bydate.tar.gz, via dataset.path"
)
FILE_SPLITS = ("train", "test")
CATEGORIES = ("rec.sport.baseball", "rec.sport.hockey")
STRIPS = ("clean_post", "scikit_learn")
SPLITS = ("bydate", "jain_wallace")
# the fixed shuffles of scikit-learn's loaders: load_files' random_state (each bydate half) and
# fetch_20newsgroups' default random_state (the pooled halves), neither of which the authors' notebook set
LOAD_FILES_SEED, FETCH_SEED = 0, 42

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


_QUOTE_LINE = re.compile(r"writes in|writes:|wrote:|says:|said:|^In article|^Quoted from|^\||^>")


def strip_header(text: str) -> str:
    """scikit-learn's header rule: everything after the first ``\\n\\n`` (no such pair: nothing is left)."""
    return text.partition("\n\n")[2]


def strip_footer(text: str) -> str:
    """scikit-learn's footer rule: of the text's lines (surrounding whitespace stripped first), the last one that
    is empty or made of dashes only (spaces around allowed) starts the footer, cut off with all after it — so the
    last paragraph of a post with several goes; when that line is the first or there is none, the text is
    returned as given."""
    lines = text.strip().split("\n")
    for cut in range(len(lines) - 1, 0, -1):
        if not lines[cut].strip().strip("-"):
            return "\n".join(lines[:cut])
    return text


def strip_quotes(text: str) -> str:
    """scikit-learn's quote rule: every line dropped that contains ``writes in``, ``writes:``, ``wrote:``,
    ``says:`` or ``said:``, or that starts (first column) with ``In article``, ``Quoted from``, ``|`` or ``>``."""
    return "\n".join(line for line in text.split("\n") if not _QUOTE_LINE.search(line))


def strip_post(text: str, strip: str) -> str:
    """The body of a post by the rules ``strip`` (:data:`STRIPS`): :func:`clean_post`, or scikit-learn's
    header, footer and quote rules applied in that order (``fetch_20newsgroups``' order)."""
    if strip == "clean_post":
        return clean_post(text)
    return strip_quotes(strip_footer(strip_header(text)))


def fetch_order(posts: Iterable[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """The posts ``(file split, newsgroup, file name)`` — every post of the folder or archive, of every
    newsgroup — in the order ``fetch_20newsgroups(subset='all', shuffle=True)`` returns them: each half as
    ``load_files`` lists it (newsgroups sorted, file names sorted as strings within each) shuffled by
    ``numpy.random.RandomState(0).shuffle``; train then test; the whole shuffled by ``RandomState(42).shuffle``.
    Jain & Wallace passed no ``categories``, so the order depends on every newsgroup present."""
    halves: list[tuple[str, str, str]] = []
    posts = list(posts)
    for split in FILE_SPLITS:
        listed = sorted((group, name) for s, group, name in posts if s == split)
        order = np.arange(len(listed))
        np.random.RandomState(LOAD_FILES_SEED).shuffle(order)
        halves += [(split, *listed[i]) for i in order]
    order = np.arange(len(halves))
    np.random.RandomState(FETCH_SEED).shuffle(order)
    return [halves[i] for i in order]


def jain_wallace_split(posts: list[RawExample], seed: int) -> dict[str, list[RawExample]]:
    """Jain & Wallace's 20News splits (``preprocess/20News/20News.ipynb``) of ``posts``, given in their order
    (the posts of the first newsgroup in :func:`fetch_order`'s order, then those of the second, ...): the empty
    posts dropped (theirs drops the texts left empty by cleaning, which are exactly those holding only
    whitespace), then scikit-learn's ``train_test_split(stratify=labels, test_size=0.2, random_state=seed)`` gives
    train and test, and the same on that train part gives train and dev (their seed: 13478); each split in the
    order scikit-learn returns it."""
    posts = [p for p in posts if p.text.strip()]
    rest, test = train_test_split(
        posts, seed, test_size=0.2, stratify=[p.label for p in posts], what="the 20News test split"
    )
    train, dev = train_test_split(
        rest, seed, test_size=0.2, stratify=[p.label for p in rest], what="the 20News dev split"
    )
    return {"train": train, "dev": dev, "test": test}


class TwentyNewsSource(DownloadableSource):
    """Posts of ``categories`` (label = position in the list), each stripped by ``strip``: bydate train (dev carved
    out) and test, or Jain & Wallace's splits (``split``, module docstring)."""

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
        strip: str = "clean_post",
    ) -> None:
        if split not in SPLITS:
            raise UserError(f"dataset.source.split={split}: choose {' or '.join(SPLITS)}")
        if strip not in STRIPS:
            raise UserError(f"dataset.source.strip={strip}: choose {' or '.join(STRIPS)}")
        self.categories = [str(c) for c in categories]
        if len(self.categories) < 2 or len(set(self.categories)) != len(self.categories):
            raise UserError(f"dataset.source.categories={self.categories}: give two or more distinct newsgroups")
        super().__init__(path, url, sha256, cache_dir, name="twenty_news", label_names=self.categories)
        self.split = split
        self.strip = strip
        self.dev_size = dev_size
        self.split_seed = split_seed

    def load(self) -> dict[str, list[RawExample]]:
        """Read train/dev/test; uids ``<file split>/<newsgroup>/<id>``. ``bydate``: each split sorted by uid;
        ``jain_wallace``: in the order :func:`jain_wallace_split` gives."""
        source = self._resolve()
        found: dict[tuple[str, str], list[RawExample]] = {(s, c): [] for s in FILE_SPLITS for c in self.categories}
        posts = _read_tar(source, self.categories) if source.is_file() else _read_folder(source, self.categories)
        listing = []
        for split, category, name, raw in posts:
            listing.append((split, category, name))
            if raw is None:
                continue
            uid = f"{split}/{category}/{name}"
            label = self.categories.index(category)
            text = strip_post(raw.decode("latin-1"), self.strip)
            found[split, category].append(RawExample(uid=uid, text=text, label=label))
        for (split, category), examples in found.items():
            if not examples:
                where = (
                    f"{source}:20news-bydate-{split}/{category}/"
                    if source.is_file()
                    else source / f"20news-bydate-{split}" / category
                )
                raise DataError(f"{where}: no posts; check dataset.source.categories or {PATH_HINT}")
        if self.split == "jain_wallace":
            log.info(
                "%s: Jain & Wallace's post order over the %d newsgroups found (their run: the 20 of the release)",
                self.name,
                len({category for _, category, _ in listing}),
            )
            by_uid = {e.uid: e for examples in found.values() for e in examples}
            ordered = [f"{s}/{c}/{n}" for s, c, n in fetch_order(listing)]
            posts_in_order = [
                by_uid[uid] for category in self.categories for uid in ordered if uid.split("/")[1] == category
            ]
            return jain_wallace_split(posts_in_order, self.split_seed)
        train = sorted((e for c in self.categories for e in found["train", c]), key=lambda e: e.uid)
        test = sorted((e for c in self.categories for e in found["test", c]), key=lambda e: e.uid)
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
        size and a digest of the names and contents of the post files of the chosen newsgroups — of every
        newsgroup with ``split=jain_wallace``, whose order depends on them all.
        """
        source = self._resolve()
        options = {
            "class": type(self).__name__,
            "categories": self.categories,
            "dev_size": self.dev_size,
            "split_seed": self.split_seed,
            "split": self.split,
            "strip": self.strip,
        }
        if source.is_file():
            return {**options, "files": [describe_file(source)]}
        groups = None if self.split == "jain_wallace" else self.categories
        return {**options, "folder": describe_folder(source, _post_paths(source, groups))}

    def _resolve(self) -> Path:
        """The folder holding the two bydate folders, or the tarball (downloaded when no path)."""
        given = self._given()
        if given.is_file():
            return given
        for root in (given, given / "20news-bydate"):
            if any((root / f"20news-bydate-{split}").is_dir() for split in FILE_SPLITS):
                return root
        raise DataError(f"dataset.path={self.path}: no 20news-bydate-train/ or 20news-bydate-test/ in it; {PATH_HINT}")


def _post_paths(root: Path, categories: Sequence[str] | None) -> Iterator[Path]:
    """The post files ``20news-bydate-<split>/<newsgroup>/<id>`` of the chosen newsgroups (None: of all)."""
    for split in FILE_SPLITS:
        half = root / f"20news-bydate-{split}"
        if not half.is_dir():
            continue
        groups = categories if categories is not None else sorted(p.name for p in half.iterdir() if p.is_dir())
        for category in groups:
            folder = half / category
            if folder.is_dir():
                yield from (p for p in folder.iterdir() if p.is_file())


def _read_folder(root: Path, categories: Sequence[str]) -> Iterator[tuple[str, str, str, bytes | None]]:
    """(split, newsgroup, file name, bytes) of every post in the folder: the bytes of the chosen newsgroups'
    posts, None for the others'."""
    wanted = set(categories)
    for path in _post_paths(root, None):
        group = path.parent.name
        raw = path.read_bytes() if group in wanted else None
        yield path.parent.parent.name.removeprefix("20news-bydate-"), group, path.name, raw


def _read_tar(archive: Path, categories: Sequence[str]) -> Iterator[tuple[str, str, str, bytes | None]]:
    """(split, newsgroup, file name, bytes) of every post in the tarball: the bytes of the chosen newsgroups'
    posts, None for the others'."""
    wanted = set(categories)
    hint = "download it again or give the extracted folder via dataset.path"
    for match, raw in stream_tar_gz(archive, _MEMBER, lambda m: True, hint):
        yield match[1], match[2], match[3], raw if match[2] in wanted else None
