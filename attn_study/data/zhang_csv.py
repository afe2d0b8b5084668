"""The CSV releases of Zhang, Zhao & LeCun (2015): AG News, Yelp, Amazon and Yahoo! Answers.

Each release is a folder ``<name>_csv/`` (or its ``<name>_csv.tar.gz``) holding ``train.csv`` and
``test.csv``: one record per instance, ``"class index","field",...`` with the 1-based class index
first, then the text fields (AG News: title, description; Yelp: review text; Amazon: review title,
review text; Yahoo! Answers: question title, question content, best answer). Fields are quoted,
an inner ``"`` is written ``""``, and a newline is written as the two characters backslash, n.

Jain & Wallace's AG News (``preprocess/ag_news/AGNews.ipynb``) reads the CSV with pandas, takes the
description alone (``fields=[description]``) with its escapes as written (``escaped_newlines=keep``) and draws
dev as ``train_test_split(train rows, test_size=0.15, random_state=16377)`` (``dev_split=jain_wallace``).

This module also holds ``stratified_indices``, the seeded per-class draw the other new readers
use to carve a dev split from train (the same draw as ``IMDBSource``'s dev carve).
"""

from __future__ import annotations

import csv
import gzip
import logging
import re
import tarfile
import zlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from attn_study import ranges
from attn_study.data.digest import describe_file
from attn_study.data.example import RawExample
from attn_study.data.source import FileSource
from attn_study.data.splits import stratified_indices, train_test_split
from attn_study.errors import DataError, UserError

log = logging.getLogger(__name__)

FILE_SPLITS = ("train", "test")
OBTAIN = (
    "download {archive} from the Zhang et al. (2015) text classification datasets (the Google "
    "Drive folder linked from https://github.com/zhangxiangxiao/Crepe) and give it, or the folder it "
    "unpacks to, via dataset.path"
)


class Preset:
    """What distinguishes one release: its folder name, text columns and class names."""

    def __init__(self, folder: str, fields: tuple[str, ...], class_names: tuple[str, ...]) -> None:
        self.folder = folder
        self.fields = fields
        self.class_names = class_names


PRESETS = {
    "ag_news": Preset("ag_news_csv", ("title", "description"), ("World", "Sports", "Business", "Sci/Tech")),
    "yelp": Preset("yelp_review_full_csv", ("review text",), tuple(f"{k} star{'s' * (k > 1)}" for k in range(1, 6))),
    "amazon": Preset(
        "amazon_review_full_csv",
        ("review title", "review text"),
        tuple(f"{k} star{'s' * (k > 1)}" for k in range(1, 6)),
    ),
    "yahoo": Preset(
        "yahoo_answers_csv",
        ("question title", "question content", "best answer"),
        (
            "Society & Culture",
            "Science & Mathematics",
            "Health",
            "Education & Reference",
            "Computers & Internet",
            "Sports",
            "Business & Finance",
            "Entertainment & Music",
            "Family & Relationships",
            "Politics & Government",
        ),
    ),
}

_MEMBER = re.compile(r"(?:.*/)?(train|test)\.csv")


class ZhangCSVSource(FileSource):
    """One Zhang et al. (2015) CSV release: train.csv (dev carved from it) and test.csv.

    ``classes`` maps original 1-based class indices to new labels (classes left out are dropped
    and counted), or lists the indices to keep (label = position in the list); ``None`` keeps every
    class with label = class index - 1. ``dev_size`` instances
    are drawn from train per class with ``split_seed`` (``dev_split=stratified``), or as scikit-learn's
    ``train_test_split(rows, test_size=dev_size, random_state=split_seed)`` draws its test part
    (``dev_split=jain_wallace``, unstratified); ``max_train``, if set, then keeps at most
    that many of the remaining train instances (also per class, seeded). Train is read twice (labels
    first, then only the chosen rows' text) so that a subsample never holds the whole file in memory.
    The text is the ``fields`` named (all of the release's by default) joined by a space, each escaped newline
    (backslash, n) replaced by a space, or kept as written with ``escaped_newlines=keep``.
    """

    def __init__(
        self,
        path: str | None = None,
        dataset: str = "ag_news",
        classes: Mapping[int | str, int] | Sequence[int] | None = None,
        dev_size: int = 10000,
        split_seed: int = 13,
        max_train: int | None = None,
        text_columns: int | None = None,
        fields: Sequence[str] | None = None,
        escaped_newlines: str = "space",
        dev_split: str = "stratified",
    ) -> None:
        if dataset not in PRESETS:
            raise UserError(f"dataset.source.dataset={dataset}: must be one of {', '.join(PRESETS)}")
        self.dataset = dataset
        self.preset = PRESETS[dataset]
        self.fields = None if fields is None else [str(f) for f in fields]
        if self.fields is not None and (not self.fields or any(f not in self.preset.fields for f in self.fields)):
            raise UserError(
                f"dataset.source.fields={self.fields}: name some of {dataset}'s fields {list(self.preset.fields)}"
            )
        for option, value, allowed in (
            ("escaped_newlines", escaped_newlines, ("space", "keep")),
            ("dev_split", dev_split, ("stratified", "jain_wallace")),
        ):
            if value not in allowed:
                raise UserError(f"dataset.source.{option}={value}: choose {' or '.join(allowed)}")
        self.escaped_newlines = escaped_newlines
        self.dev_split = dev_split
        self.dev_size = dev_size
        self.split_seed = split_seed
        self.max_train = max_train
        self.text_columns = len(self.preset.fields) if text_columns is None else int(text_columns)
        self.classes = self._class_map(classes)
        super().__init__(path, name=dataset, label_names=self._label_names())
        self.hint = OBTAIN.format(archive=f"{self.preset.folder}.tar.gz")

    def load(self) -> dict[str, list[RawExample]]:
        """Read train (split into train and dev) and test; uids are ``<file split>-<record number>``."""
        source = self._resolve()
        kept_records, labels = [], []
        for _where, _line, record, label, _text in self._records(source, "train", with_text=False):
            if label is not None:
                kept_records.append(record)
                labels.append(label)
        if not kept_records:
            raise DataError(
                f"{self._where(source, 'train')}: no rows of the kept classes {sorted(self.classes)}; {self.hint}"
            )
        dev_positions = set(self._dev_positions(labels))
        train_positions = [i for i in range(len(labels)) if i not in dev_positions]
        if self.max_train is not None and len(train_positions) > self.max_train:
            ranges.require("dataset.source.max_train", self.max_train, UserError)
            picked = stratified_indices(
                [labels[i] for i in train_positions], self.max_train, (self.split_seed, 1), "dataset.source.max_train"
            )
            train_positions = [train_positions[i] for i in picked]
        role = {kept_records[i]: "dev" for i in dev_positions}
        role.update({kept_records[i]: "train" for i in train_positions})
        splits: dict[str, list[RawExample]] = {"train": [], "dev": [], "test": []}
        for _where, _line, record, label, text in self._records(source, "train", with_text=True):
            if record in role:
                assert label is not None and text is not None
                splits[role[record]].append(RawExample(uid=f"train-{record}", text=text, label=label))
        if len(splits["train"]) + len(splits["dev"]) != len(role):
            raise DataError(f"{self._where(source, 'train')}: changed while being read; read it again")
        dropped = {"train": len(labels) - len(role), "test": 0}
        for _where, _line, record, label, text in self._records(source, "test", with_text=True):
            if label is None:
                dropped["test"] += 1
                continue
            assert text is not None
            splits["test"].append(RawExample(uid=f"test-{record}", text=text, label=label))
        if not splits["test"]:
            raise DataError(
                f"{self._where(source, 'test')}: no rows of the kept classes {sorted(self.classes)}; {self.hint}"
            )
        log.info(
            "%s: %d train, %d dev, %d test instances; train rows of other classes or not sampled: %d, "
            "test rows of other classes: %d",
            self.name,
            len(splits["train"]),
            len(splits["dev"]),
            len(splits["test"]),
            dropped["train"],
            dropped["test"],
        )
        return splits

    def fingerprint(self) -> dict[str, Any]:
        """A JSON-able identity of the source content: class, options, input files' stats."""
        source = self._resolve()
        paths = [source] if source.is_file() else [source / f"{split}.csv" for split in FILE_SPLITS]
        return {
            "class": type(self).__name__,
            "dataset": self.dataset,
            "classes": {str(k): v for k, v in sorted(self.classes.items())},
            "dev_size": self.dev_size,
            "split_seed": self.split_seed,
            "max_train": self.max_train,
            "text_columns": self.text_columns,
            "fields": self.fields,
            "escaped_newlines": self.escaped_newlines,
            "dev_split": self.dev_split,
            "files": [describe_file(path) for path in paths if path.is_file()],
        }

    def _dev_positions(self, labels: list[int]) -> list[int]:
        """Positions among the kept train rows (file order) of the ``dev_size`` dev rows (``dev_split``)."""
        if self.dev_split == "jain_wallace":
            if not 0 < self.dev_size < len(labels):
                raise UserError(f"dataset.source.dev_size={self.dev_size}: must be between 1 and {len(labels) - 1}")
            return train_test_split(
                range(len(labels)), self.split_seed, test_size=self.dev_size, what="dataset.source.dev_size's dev split"
            )[1]
        return stratified_indices(labels, self.dev_size, self.split_seed, "dataset.source.dev_size")

    def _label_names(self) -> list[str]:
        """Per new label 0..M-1, the names of the original classes mapped to it, joined by '/'."""
        return [
            "/".join(self.preset.class_names[c - 1] for c in sorted(self.classes) if self.classes[c] == label)
            for label in range(max(self.classes.values()) + 1)
        ]

    def _class_map(self, classes: Mapping[int | str, int] | Sequence[int] | None) -> dict[int, int]:
        """The validated original-class → label map (keys 1..K, labels exactly 0..M-1)."""
        total = len(self.preset.class_names)
        if classes is None:
            return {c: c - 1 for c in range(1, total + 1)}
        try:
            if isinstance(classes, Mapping):
                mapping = {int(k): int(v) for k, v in dict(classes).items()}
            else:  # a list of class indices: label = position in the list
                mapping = {int(k): i for i, k in enumerate(classes)}
                if len(mapping) != len(classes):
                    raise ValueError("a class index is listed twice")
        except (TypeError, ValueError) as error:
            raise UserError(
                f"dataset.source.classes={classes}: must map class indices to labels, e.g. "
                f"{{1: 0, 3: 1}}, or list the indices to keep, e.g. [1, 3] ({error})"
            ) from error
        if not mapping or any(not 1 <= k <= total for k in mapping):
            raise UserError(
                f"dataset.source.classes={classes}: keys must be original class indices 1-{total} of {self.dataset}"
            )
        if set(mapping.values()) != set(range(max(mapping.values()) + 1)):
            raise UserError(f"dataset.source.classes={classes}: the new labels must be 0..M-1 with none missing")
        return mapping

    def _resolve(self) -> Path:
        """The folder holding train.csv and test.csv, or the release's .tar.gz archive."""
        given = self._local_path(
            f"dataset.path is required for {self.dataset} (no stable download URL); {self.hint}", self.hint
        )
        if given.is_file():
            return given
        for root in (given, given / self.preset.folder):
            if any((root / f"{split}.csv").is_file() for split in FILE_SPLITS):
                return root
        raise DataError(
            f"dataset.path={self.path}: no train.csv or test.csv in it or in {self.preset.folder}/; {self.hint}"
        )

    def _text(self, values: list[str]) -> str:
        """The instance's text: the ``fields`` of the row's text ``values`` (None: all) joined by a space, escaped
        newlines per ``escaped_newlines``."""
        chosen = values if self.fields is None else [values[self.preset.fields.index(f)] for f in self.fields]
        if self.escaped_newlines == "space":
            chosen = [value.replace("\\n", " ") for value in chosen]
        return " ".join(chosen)

    def _where(self, source: Path, split: str) -> str:
        return f"{source}:{split}.csv" if source.is_file() else str(source / f"{split}.csv")

    def _records(
        self, source: Path, split: str, with_text: bool
    ) -> Iterator[tuple[str, int, int, int | None, str | None]]:
        """(where, line, record number, label or None when dropped, text or None) of each row."""
        width = 1 + self.text_columns
        total = len(self.preset.class_names)
        for where, line, record, row in _csv_rows(source, split, self.hint):
            if len(row) != width:
                raise DataError(
                    f"{where}, line {line}: {len(row)} columns, expected {width} (class index, "
                    f"{', '.join(self.preset.fields)}); is this the {self.preset.folder} release? "
                    f"(or set dataset.source.text_columns)"
                )
            index = row[0].strip()
            if not index.isdigit() or not 1 <= int(index) <= total:
                raise DataError(
                    f"{where}, line {line}: class index {row[0]!r} is not 1-{total}; "
                    f"is this the {self.preset.folder} release?"
                )
            label = self.classes.get(int(index))
            text = self._text(row[1:]) if with_text and label is not None else None
            yield where, line, record, label, text


def _csv_rows(source: Path, split: str, hint: str) -> Iterator[tuple[str, int, int, list[str]]]:
    """(where, line, record number, fields) of every record of ``<split>.csv`` (folder or tarball)."""
    if source.is_dir():
        path = source / f"{split}.csv"
        if not path.is_file():
            raise DataError(f"{path}: not found; {hint}")
        with path.open("rb") as handle:
            yield from _parse(handle, str(path))
        return
    try:
        with gzip.open(source, "rb") as unzipped, tarfile.open(fileobj=unzipped, mode="r|") as tar:
            for member in tar:
                match = _MEMBER.fullmatch(member.name)
                if match and match[1] == split and member.isfile():
                    handle = tar.extractfile(member)
                    assert handle is not None
                    yield from _parse(handle, f"{source}:{member.name}")
                    return
    except (tarfile.TarError, EOFError, zlib.error, OSError) as error:
        raise DataError(
            f"{source}: corrupt or truncated archive ({error}); download it again or give "
            f"the extracted folder via dataset.path"
        ) from error
    raise DataError(f"{source}: no {split}.csv in the archive; {hint}")


def _parse(handle: IO[bytes], where: str) -> Iterator[tuple[str, int, int, list[str]]]:
    """CSV records of the byte stream ``handle`` (RFC 4180 quoting); DataError naming ``where`` on bad
    bytes or quoting. Lines are split on b"\\n" and decoded one by one (a tar member read as a stream
    cannot be wrapped in a TextIOWrapper)."""
    csv.field_size_limit(max(csv.field_size_limit(), 1 << 28))  # long Yahoo! answers exceed the 128 KiB default
    reader = csv.reader((line.decode("utf-8") for line in handle), strict=True)
    record = 0
    try:
        for row in reader:
            if not row:
                continue
            record += 1
            yield where, reader.line_num, record, row
    except UnicodeDecodeError as error:
        raise DataError(f"{where}, after line {reader.line_num}: not UTF-8 text ({error})") from error
    except csv.Error as error:
        raise DataError(f"{where}, line {reader.line_num}: malformed CSV ({error})") from error
