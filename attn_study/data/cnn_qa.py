"""DeepMind CNN cloze questions (Hermann et al. 2015) from the ``cnn/questions`` release.

One ``.question`` file per instance, in ``questions/{training,validation,test}/``:

    <url>
    (blank)
    <passage, entities anonymised as @entity<N>>
    (blank)
    <question, the answer replaced by @placeholder>
    (blank)
    <answer, an @entity<N>>
    (blank)
    @entity<N>:<original name>      (one line per entity of the article)

The label is the answer's entity number N; ``candidates`` the sorted entity numbers mentioned in the
passage. ``num_classes`` is 1 + the largest entity number mentioned in any training passage,
question or answer; a dev/test answer beyond it is an error, and dev/test candidates beyond it are
left out (no model can output them).
"""

from __future__ import annotations

import gzip
import logging
import re
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from attn_study.data.digest import describe_file, describe_folder
from attn_study.data.example import RawExample
from attn_study.data.source import FileSource
from attn_study.errors import DataError

log = logging.getLogger(__name__)

FOLDERS = {"train": "training", "dev": "validation", "test": "test"}
OBTAIN = (
    "download the CNN 'questions' archive (cnn.tgz) from https://cs.nyu.edu/~kcho/DMQA/ (a Google Drive "
    "link, so attn_study cannot fetch it) and give the cnn folder, cnn/questions or cnn.tgz via dataset.path"
)

_ENTITY = re.compile(r"@entity(\d+)\b")
_ANSWER = re.compile(r"@entity(\d+)")
_MEMBER = re.compile(r"(?:.*/)?questions/(training|validation|test)/([^/]+)\.question")


def parse_question(text: str, where: str) -> tuple[str, str, int]:
    """(passage, question, answer entity number) of one ``.question`` file's text."""
    lines = text.replace("\r\n", "\n").split("\n")
    if len(lines) < 7 or any(lines[i].strip() for i in (1, 3, 5)) or not all(lines[i].strip() for i in (2, 4, 6)):
        raise DataError(
            f"{where}: not a .question file (url, blank, passage, blank, question, blank, answer); {OBTAIN}"
        )
    answer = _ANSWER.fullmatch(lines[6].strip())
    if answer is None:
        raise DataError(f"{where}, line 7: answer {lines[6].strip()!r} is not an @entity<N>")
    question = lines[4].strip()
    if "@placeholder" not in question:
        raise DataError(f"{where}, line 5: the question has no @placeholder")
    return lines[2].strip(), question, int(answer[1])


class CNNQASource(FileSource):
    """CNN questions: training → train, validation → dev, test → test (files sorted by name)."""

    def __init__(self, path: str | None = None) -> None:
        super().__init__(path, name="cnn_qa")  # classes: the entities of the training files, read on first use
        self._num_classes: int | None = None

    @property
    def num_classes(self) -> int:
        """1 + the largest entity number in the training files (reads them on first use)."""
        if self._num_classes is None:
            self.load()
        assert self._num_classes is not None
        return self._num_classes

    @property
    def label_names(self) -> list[str]:
        return [f"@entity{k}" for k in range(self.num_classes)]

    def load(self) -> dict[str, list[RawExample]]:
        """Read the three splits; uids are ``<folder>/<file stem>``."""
        source = self._resolve()
        raw: dict[str, list[tuple[str, str, str, int]]] = {split: [] for split in FOLDERS}
        split_of = {folder: split for split, folder in FOLDERS.items()}
        files = _read_tar(source) if source.is_file() else _read_folder(source)
        for folder, stem, where, text in files:
            passage, question, answer = parse_question(text, where)
            raw[split_of[folder]].append((f"{folder}/{stem}", passage, question, answer))
        for split, folder in FOLDERS.items():
            if not raw[split]:
                where = f"{source}:questions/{folder}/" if source.is_file() else source / folder
                raise DataError(f"{where}: no .question files; {OBTAIN}")
        largest = max(
            max([answer, *_entities(passage), *_entities(question)]) for _, passage, question, answer in raw["train"]
        )
        self._num_classes = largest + 1
        splits: dict[str, list[RawExample]] = {}
        for split, items in raw.items():
            examples = []
            for uid, passage, question, answer in sorted(items):
                if answer >= self._num_classes:
                    raise DataError(
                        f"{self._where(source, uid)}: answer @entity{answer} is beyond the largest "
                        f"entity of the training files (@entity{largest}), so it has no label"
                    )
                candidates = tuple(k for k in sorted(set(_entities(passage))) if k < self._num_classes)
                examples.append(RawExample(uid=uid, text=passage, label=answer, query=question, candidates=candidates))
            splits[split] = examples
        log.info(
            "%s: %s; %d entity labels",
            self.name,
            ", ".join(f"{len(v)} {k}" for k, v in splits.items()),
            self._num_classes,
        )
        return splits

    def fingerprint(self) -> dict[str, Any]:
        """A JSON-able identity: an archive's content digest, or the count, size and a digest of the files."""
        source = self._resolve()
        if source.is_file():
            return {"class": type(self).__name__, "files": [describe_file(source)]}
        folder = describe_folder(source, [p for _, p in _question_paths(source)])
        return {"class": type(self).__name__, "folder": folder}

    def _resolve(self) -> Path:
        """The ``questions`` folder or the archive."""
        given = self._local_path(f"dataset.path is required for CNN: {OBTAIN}", OBTAIN)
        if given.is_file():
            return given
        for root in (given, given / "questions", given / "cnn" / "questions"):
            if any((root / folder).is_dir() for folder in FOLDERS.values()):
                return root
        raise DataError(
            f"dataset.path={self.path}: no training/, validation/ or test/ in it or in questions/; {OBTAIN}"
        )

    def _where(self, source: Path, uid: str) -> str:
        return f"{source}:questions/{uid}.question" if source.is_file() else str(source / f"{uid}.question")


def _entities(text: str) -> list[int]:
    return [int(k) for k in _ENTITY.findall(text)]


def _question_paths(root: Path) -> Iterator[tuple[str, Path]]:
    for folder in FOLDERS.values():
        if (root / folder).is_dir():
            yield from ((folder, p) for p in (root / folder).iterdir() if p.suffix == ".question" and p.is_file())


def _read_folder(root: Path) -> Iterator[tuple[str, str, str, str]]:
    """(folder, file stem, where, text) of every ``.question`` file below ``root``."""
    for folder, path in _question_paths(root):
        yield folder, path.stem, str(path), _decode(path.read_bytes(), str(path))


def _read_tar(archive: Path) -> Iterator[tuple[str, str, str, str]]:
    """(folder, file stem, where, text) of every ``.question`` member, streamed and drained."""
    try:
        with gzip.open(archive, "rb") as unzipped, tarfile.open(fileobj=unzipped, mode="r|") as tar:
            for member in tar:
                match = _MEMBER.fullmatch(member.name)
                if match and member.isfile():
                    handle = tar.extractfile(member)
                    assert handle is not None
                    where = f"{archive}:{member.name}"
                    yield match[1], match[2], where, _decode(handle.read(), where)
            while unzipped.read(1 << 20):
                pass
    except (tarfile.TarError, EOFError, zlib.error, OSError) as error:
        raise DataError(
            f"{archive}: corrupt or truncated archive ({error}); download it again or give "
            f"the extracted cnn folder via dataset.path"
        ) from error


def _decode(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataError(f"{where}: not UTF-8 text ({error}); {OBTAIN}") from error
