"""Large Movie Review Dataset v1.0 (aclImdb, Maas et al. 2011): polarity or 8-way rating.

``html_breaks``: each ``<br />`` becomes a space (``space``), or stays in the text (``keep``) — as in Keras'
``imdb_full.pkl``, whose words Jain & Wallace used: its word index holds ``br`` among its most frequent words,
left by the breaks once the punctuation was filtered out (``recipe=jain_wallace`` keeps them, and its Keras-style
cleaning turns each into the token ``br``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from attn_study.data.digest import describe_file, describe_folder
from attn_study.data.download import stream_tar_gz
from attn_study.data.example import RawExample
from attn_study.data.source import DOWNLOAD_DIR, DownloadableSource
from attn_study.data.splits import stratified_indices, train_test_split
from attn_study.data.text import tokenize_many
from attn_study.errors import DataError, UserError

IMDB_URL = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"
IMDB_SHA256 = "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe"
TAR_NAME = "aclImdb_v1.tar.gz"
PATH_HINT = "give the aclImdb folder or aclImdb_v1.tar.gz via dataset.path"
RATINGS = (1, 2, 3, 4, 7, 8, 9, 10)  # aclImdb has no 5s or 6s
POLARITIES = ("neg", "pos")
FILE_SPLITS = ("train", "test")

_REVIEW_NAME = re.compile(r"(\d+)_(\d+)\.txt")
_MEMBER = re.compile(r"(?:.*/)?(train|test)/(neg|pos)/(\d+_\d+\.txt)")
_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)


class IMDBSource(DownloadableSource):
    """IMDB reviews: 25k train (a stratified dev carved out of it) and 25k test."""

    archive = TAR_NAME
    path_hint = PATH_HINT

    def __init__(
        self,
        path: str | None = None,
        url: str = IMDB_URL,
        sha256: str | None = IMDB_SHA256,
        cache_dir: str = DOWNLOAD_DIR,
        dev_size: int = 2500,
        split_seed: int = 13,
        ratings: bool = False,
        split: str = "standard",
        html_breaks: str = "space",
    ) -> None:
        if split not in ("standard", "jain_wallace"):
            raise UserError(f"dataset.source.split={split}: choose standard or jain_wallace")
        if html_breaks not in ("space", "keep"):
            raise UserError(f"dataset.source.html_breaks={html_breaks}: choose space or keep")
        super().__init__(
            path,
            url,
            sha256,
            cache_dir,
            name="imdb_rating" if ratings else "imdb",
            label_names=[f"{r}/10" for r in RATINGS] if ratings else ["negative", "positive"],
        )
        self.split = split
        self.html_breaks = html_breaks
        self.dev_size = dev_size
        self.split_seed = split_seed
        self.ratings = ratings

    def load(self) -> dict[str, list[RawExample]]:
        """Read train/dev/test, each sorted by uid ``<file split>/<pos|neg>/<id>_<rating>``."""
        source = self._resolve()
        found: dict[tuple[str, str], list[RawExample]] = {(s, p): [] for s in FILE_SPLITS for p in POLARITIES}
        for split, polarity, name, raw in _read_tar(source) if source.is_file() else _read_folder(source):
            found[split, polarity].append(self._example(split, polarity, name, raw))
        for (split, polarity), examples in found.items():
            if not examples:
                where = f"{source}:{split}/{polarity}/" if source.is_file() else source / split / polarity
                raise DataError(f"{where}: no reviews (<id>_<rating>.txt); {PATH_HINT}")
        train = sorted(found["train", "neg"] + found["train", "pos"], key=lambda e: e.uid)
        test = sorted(found["test", "neg"] + found["test", "pos"], key=lambda e: e.uid)
        if self.split == "jain_wallace":
            return jain_wallace_split(train, test, self.split_seed)
        dev_indices = self._dev_indices([e.label for e in train])
        return {
            "train": [e for i, e in enumerate(train) if i not in dev_indices],
            "dev": [train[i] for i in sorted(dev_indices)],
            "test": test,
        }

    def fingerprint(self) -> dict[str, Any]:
        """A JSON-able identity of the source content: class, options, input stats.

        A tarball is described by its path, size and content digest; a folder by its path, the number
        and total size of its review files, and a digest of their names and contents.
        """
        source = self._resolve()
        options = {
            "class": type(self).__name__,
            "dev_size": self.dev_size,
            "split_seed": self.split_seed,
            "ratings": self.ratings,
            "split": self.split,
            "html_breaks": self.html_breaks,
        }
        if source.is_file():
            return {**options, "files": [describe_file(source)]}
        return {**options, "folder": describe_folder(source, _review_paths(source))}

    def _resolve(self) -> Path:
        """The aclImdb folder, or the tarball (downloaded when no path is given)."""
        given = self._given()
        if given.is_file():
            return given
        for root in (given, given / "aclImdb"):
            if any((root / split).is_dir() for split in FILE_SPLITS):
                return root
        raise DataError(f"dataset.path={self.path}: no train/ or test/ in it or in aclImdb/; {PATH_HINT}")

    def _example(self, split: str, polarity: str, name: str, raw: bytes) -> RawExample:
        """One review: ``<br />`` replaced by a space (unless ``html_breaks=keep``), label from the folder or the
        rating."""
        uid = f"{split}/{polarity}/{name.removesuffix('.txt')}"
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise DataError(f"{uid}.txt: not UTF-8 text ({error}); {PATH_HINT}") from error
        if self.ratings:
            rating = int(name.removesuffix(".txt").split("_")[1])
            if rating not in RATINGS:
                raise DataError(f"{uid}.txt: rating {rating} is not one of {RATINGS}; {PATH_HINT}")
            label = RATINGS.index(rating)
        else:
            label = POLARITIES.index(polarity)
        return RawExample(uid=uid, text=text if self.html_breaks == "keep" else _BREAK.sub(" ", text), label=label)

    def _dev_indices(self, labels: list[int]) -> set[int]:
        """Indices of ``dev_size`` train reviews drawn per class (largest-remainder shares), seeded."""
        return set(stratified_indices(labels, self.dev_size, self.split_seed, "dataset.source.dev_size"))


def jain_wallace_split(train: list[RawExample], test: list[RawExample], seed: int) -> dict[str, list[RawExample]]:
    """Jain & Wallace's IMDB splits (``preprocess/IMDB/IMDB.ipynb``), their steps on this data: the reviews of
    fewer than 400 tokens (Keras-style: lower-cased, punctuation removed, split on whitespace) of each file
    split, in uid order; ``train_test_split(train, train_size=0.8, random_state=seed)`` gives train and dev, and
    the train part of ``train_test_split(test, train_size=0.2, random_state=seed)`` is the test split (their
    seed: 1378), each in the order scikit-learn returns it. Their reviews came in the order of Keras' pickled
    ``imdb_full.pkl``, which is not available here, so the members differ from theirs; the splitter, the
    proportions and the filter are theirs."""

    def short(examples):
        lengths = [len(t) for t in tokenize_many((e.text for e in examples), cleaning="keras", digits="keep")]
        return [e for e, n in zip(examples, lengths) if n < 400]

    kept_train, dev = train_test_split(short(train), seed, train_size=0.8, what="the IMDB dev split")
    kept_test, _rest = train_test_split(short(test), seed, train_size=0.2, what="the IMDB test split")
    return {"train": kept_train, "dev": dev, "test": kept_test}


def _review_paths(root: Path) -> Iterator[Path]:
    """The review files ``<split>/<pos|neg>/<id>_<rating>.txt`` below the aclImdb folder."""
    for split in FILE_SPLITS:
        for polarity in POLARITIES:
            folder = root / split / polarity
            if folder.is_dir():
                yield from (p for p in folder.iterdir() if _REVIEW_NAME.fullmatch(p.name) and p.is_file())


def _read_folder(root: Path) -> Iterator[tuple[str, str, str, bytes]]:
    """(split, polarity, file name, bytes) of every review in the aclImdb folder."""
    for path in _review_paths(root):
        yield path.parent.parent.name, path.parent.name, path.name, path.read_bytes()


def _read_tar(archive: Path) -> Iterator[tuple[str, str, str, bytes]]:
    """(split, polarity, file name, bytes) of every review in the tarball, streamed."""
    hint = "download it again or give the extracted aclImdb folder via dataset.path"
    for match, raw in stream_tar_gz(archive, _MEMBER, lambda m: True, hint):
        yield match[1], match[2], match[3], raw
