"""Stanford Natural Language Inference corpus 1.0 (Bowman et al. 2015) from its canonical jsonl files.

``snli_1.0/snli_1.0_{train,dev,test}.jsonl``: one JSON object per line with ``sentence1`` (premise,
the attended passage), ``sentence2`` (hypothesis, the query), ``gold_label`` and ``pairID``. Pairs
whose annotators reached no consensus have gold label ``-``; they are dropped and counted.
"""

from __future__ import annotations

import json
import logging
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from attn_study.data.digest import describe_file
from attn_study.data.example import SPLITS, RawExample
from attn_study.data.source import DOWNLOAD_DIR, DownloadableSource
from attn_study.errors import DataError, UserError

log = logging.getLogger(__name__)

SNLI_URL = "https://nlp.stanford.edu/projects/snli/snli_1.0.zip"
ZIP_NAME = "snli_1.0.zip"
PATH_HINT = "give the snli_1.0 folder (snli_1.0_{train,dev,test}.jsonl) or snli_1.0.zip via dataset.path"
LABELS = ("entailment", "neutral", "contradiction")
NO_CONSENSUS = "-"


class SNLISource(DownloadableSource):
    """SNLI premise/hypothesis pairs; label = position of the gold label in ``labels``."""

    archive = ZIP_NAME
    path_hint = PATH_HINT

    def __init__(
        self,
        path: str | None = None,
        labels: Sequence[str] = LABELS,
        url: str = SNLI_URL,
        sha256: str | None = None,
        cache_dir: str = DOWNLOAD_DIR,
    ) -> None:
        self.labels = [str(label) for label in labels]
        if sorted(self.labels) != sorted(LABELS):
            raise UserError(f"dataset.source.labels={self.labels}: must order exactly {', '.join(LABELS)}")
        super().__init__(path, url, sha256, cache_dir, name="snli", label_names=self.labels)
        self.dropped: dict[str, int] = {}

    def load(self) -> dict[str, list[RawExample]]:
        """Read the three splits in file order; uids are the pairIDs; '-' pairs dropped (``self.dropped``)."""
        source = self._resolve()
        splits = {}
        for split in SPLITS:
            examples, dropped = [], 0
            for where, record in self._records(source, split):
                label = record["gold_label"]
                if label == NO_CONSENSUS:
                    dropped += 1
                    continue
                if label not in self.labels:
                    raise DataError(f"{where}: gold_label {label!r} is not one of {', '.join(LABELS)} or '-'")
                examples.append(
                    RawExample(
                        uid=str(record["pairID"]),
                        text=record["sentence1"],
                        label=self.labels.index(label),
                        query=record["sentence2"],
                    )
                )
            if not examples:
                raise DataError(f"{self._where(source, split)}: no labelled pairs; {PATH_HINT}")
            self.dropped[split] = dropped
            splits[split] = examples
        log.info(
            "snli: %s; pairs without a gold label ('-') dropped: %s",
            ", ".join(f"{len(v)} {k}" for k, v in splits.items()),
            ", ".join(f"{self.dropped[k]} {k}" for k in SPLITS),
        )
        return splits

    def fingerprint(self) -> dict[str, Any]:
        """A JSON-able identity of the source content: class, options, input files' stats."""
        source = self._resolve()
        paths = [source] if source.is_file() else [source / _file_name(split) for split in SPLITS]
        return {
            "class": type(self).__name__,
            "labels": self.labels,
            "files": [describe_file(path) for path in paths if path.is_file()],
        }

    def _resolve(self) -> Path:
        """The folder holding the jsonl files, or the zip archive (downloaded when no path)."""
        given = self._given()
        if given.is_file():
            return given
        for root in (given, given / "snli_1.0"):
            if any((root / _file_name(split)).is_file() for split in SPLITS):
                return root
        raise DataError(f"dataset.path={self.path}: no snli_1.0_*.jsonl in it or in snli_1.0/; {PATH_HINT}")

    def _where(self, source: Path, split: str) -> str:
        return f"{source}:snli_1.0/{_file_name(split)}" if source.is_file() else str(source / _file_name(split))

    def _records(self, source: Path, split: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """(where, record) of every line of the split's jsonl file (folder or zip)."""
        if source.is_dir():
            path = source / _file_name(split)
            if not path.is_file():
                raise DataError(f"{path}: not found; {PATH_HINT}")
            with path.open("rb") as handle:
                yield from _parse(handle, str(path))
            return
        try:
            with zipfile.ZipFile(source) as zipped:
                names = [
                    n
                    for n in zipped.namelist()
                    if (n == _file_name(split) or n.endswith(f"/{_file_name(split)}")) and not n.startswith("__MACOSX/")
                ]
                if not names:
                    raise DataError(f"{source}: no {_file_name(split)} in the archive; {PATH_HINT}")
                member = min(names, key=len)
                with zipped.open(member) as handle:
                    yield from _parse(handle, f"{source}:{member}")
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as error:
            raise DataError(
                f"{source}: not a readable .zip archive, corrupt or truncated ({error}); "
                f"download it again or give the extracted folder via dataset.path"
            ) from error


def _file_name(split: str) -> str:
    return f"snli_1.0_{split}.jsonl"


def _parse(handle: IO[bytes], where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """JSON objects of a jsonl byte stream, each checked for the four fields used."""
    for number, raw in enumerate(handle, start=1):
        if not raw.strip():
            continue
        at = f"{where}, line {number}"
        try:
            record = json.loads(raw.decode("utf-8"))
        except ValueError as error:  # JSONDecodeError and UnicodeDecodeError
            raise DataError(f"{at}: not a JSON object ({error}); the file is not SNLI 1.0 jsonl") from error
        missing = [
            k
            for k in ("sentence1", "sentence2", "gold_label", "pairID")
            if not isinstance(record, dict) or not isinstance(record.get(k), str)
        ]
        if missing:
            raise DataError(f"{at}: no string field {', '.join(missing)}; the file is not SNLI 1.0 jsonl")
        yield at, record
