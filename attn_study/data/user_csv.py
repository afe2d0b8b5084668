"""A dataset the user prepares: one CSV with a text, a label and a split column.

For corpora attn_study may not download or redistribute (ADR tweets, MIMIC-III notes), the user
builds the file with the original authors' preprocessing and gives it via ``dataset.path``. The
first row names the columns (others are ignored); ``label`` is an integer 0..K-1 and ``split`` one
of train, dev, test. The file is UTF-8 (a byte-order mark is allowed) with RFC 4180 quoting.
"""

from __future__ import annotations

import csv
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attn_study.data.digest import describe_file
from attn_study.data.example import SPLITS, RawExample
from attn_study.data.source import FileSource
from attn_study.errors import DataError, UserError

log = logging.getLogger(__name__)


class UserCSVSource(FileSource):
    """Rows of a user-supplied CSV, split by its split column; uids are ``<split>-<row number>``."""

    def __init__(
        self,
        path: str | None = None,
        dataset: str = "user_csv",
        label_names: Sequence[str] = ("0", "1"),
        obtain: str = "prepare the CSV yourself",
        text_column: str = "text",
        label_column: str = "label",
        split_column: str = "split",
    ) -> None:
        names = [str(name) for name in label_names]
        if len(names) < 2:
            raise UserError(f"dataset.source.label_names={names}: give two or more class names")
        super().__init__(path, name=dataset, label_names=names)
        self.dataset = dataset
        self.obtain = obtain
        self.text_column = text_column
        self.label_column = label_column
        self.split_column = split_column

    def load(self) -> dict[str, list[RawExample]]:
        """Read every row into the split its split column names, in file order."""
        path = self._resolve()
        columns = (self.text_column, self.label_column, self.split_column)
        splits: dict[str, list[RawExample]] = {split: [] for split in SPLITS}
        try:
            with path.open("r", encoding="utf-8-sig", newline="") as handle:
                csv.field_size_limit(max(csv.field_size_limit(), 1 << 28))  # long discharge summaries
                reader = csv.DictReader(handle, strict=True)
                missing = [c for c in columns if c not in (reader.fieldnames or [])]
                if missing:
                    raise DataError(
                        f"{path}: no column {', '.join(missing)} in the header row "
                        f"{reader.fieldnames}; the file needs columns text,label,split (or set "
                        f"dataset.source.text_column / label_column / split_column)"
                    )
                for row_number, row in enumerate(reader, start=1):
                    where = f"{path}, line {reader.line_num}"
                    split = (row[self.split_column] or "").strip()
                    if split not in SPLITS:
                        raise DataError(f"{where}: split {split!r} is not one of train, dev, test")
                    label = (row[self.label_column] or "").strip()
                    if not label.isdigit() or int(label) >= self.num_classes:
                        raise DataError(
                            f"{where}: label {label!r} is not 0-{self.num_classes - 1} ({', '.join(self.label_names)})"
                        )
                    text = row[self.text_column]
                    if text is None:
                        raise DataError(f"{where}: fewer fields than the header row names")
                    splits[split].append(RawExample(uid=f"{split}-{row_number}", text=text, label=int(label)))
        except UnicodeDecodeError as error:
            raise DataError(f"{path}: not UTF-8 text ({error})") from error
        except csv.Error as error:
            raise DataError(f"{path}: malformed CSV ({error})") from error
        for split, examples in splits.items():
            if not examples:
                raise DataError(f"{path}: no rows with {self.split_column}={split}; every split needs rows")
        log.info("%s: %s", self.name, ", ".join(f"{len(v)} {k}" for k, v in splits.items()))
        return splits

    def fingerprint(self) -> dict[str, Any]:
        """A JSON-able identity of the source content: class, options, the CSV's stats."""
        return {
            "class": type(self).__name__,
            "dataset": self.dataset,
            "label_names": self.label_names,
            "columns": [self.text_column, self.label_column, self.split_column],
            "files": [describe_file(self._resolve())],
        }

    def _resolve(self) -> Path:
        """The CSV file; DataError saying how to obtain it when no path is given."""
        hint = f"give the CSV (columns text,label,split) — {self.obtain}"
        given = self._local_path(
            f"dataset.path is required for {self.dataset}: attn_study cannot download it; {self.obtain}", hint
        )
        if not given.is_file():
            state = "a folder, not a CSV file" if given.is_dir() else "not found"
            raise DataError(f"dataset.path={self.path}: {state}; {hint}")
        return given
