"""Stanford Sentiment Treebank (SST-2 / SST-5) from the canonical PTB tree files."""

from __future__ import annotations

import re
import zipfile
import zlib
from pathlib import Path
from typing import Any

from attn_study.data.digest import describe_file
from attn_study.data.example import SPLITS, RawExample
from attn_study.data.source import DOWNLOAD_DIR, DownloadableSource
from attn_study.errors import DataError

SST_URL = "https://nlp.stanford.edu/sentiment/trainDevTestTrees_PTB.zip"
# sha256 of trainDevTestTrees_PTB.zip as pinned by two unrelated public projects (FluxML/Flux.jl
# src/data/sentiment.jl, and one that also pins its size, 789,539 bytes). Not checked here by a
# download (no network); a max-deflate re-zip of the same three files, 790,971 bytes, is consistent.
SST_SHA256 = "5c613a4f673fc74097d523a2c83f38e0cc462984d847b82c7aaf36b01cbbbfcc"
ZIP_NAME = "trainDevTestTrees_PTB.zip"
PATH_HINT = "give the folder holding train.txt, dev.txt, test.txt (Stanford trainDevTestTrees_PTB) or the .zip"
# Where the split files may sit below the given folder or inside the zip, in order of preference.
SPLIT_DIRS = ("", "trees/", "trainDevTestTrees_PTB/trees/", "trainDevTestTrees_PTB/")

# ASCII whitespace only: a no-break space occurs inside one SST token ("8\xa01\\/2").
_TOKEN = re.compile(r"\(|\)|[^\s()]+", re.ASCII)
_BRACKETS = {"-LRB-": "(", "-RRB-": ")", "-LCB-": "{", "-RCB-": "}", "-LSB-": "[", "-RSB-": "]"}
_LABEL_NAMES = {
    False: ["negative", "positive"],
    True: ["very negative", "negative", "neutral", "positive", "very positive"],
}


def parse_ptb_tree(line: str) -> tuple[int, str]:
    """Return the root label (0-4) and the leaves joined by spaces, PTB escapes undone.

    Raise DataError describing the problem when ``line`` is not exactly one well-formed tree.
    """
    tokens = _TOKEN.findall(line)
    if not tokens or tokens[0] != "(":
        raise DataError("malformed PTB tree: does not start with '('")
    words: list[str] = []
    root_label: int | None = None
    depth = 0
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == ")":
            if depth == 0:
                raise DataError("malformed PTB tree: unbalanced ')'")
            depth -= 1
            i += 1
            continue
        if token != "(":
            raise DataError(f"malformed PTB tree: unexpected token {token!r} between subtrees")
        if depth == 0 and root_label is not None:
            raise DataError("malformed PTB tree: text after the root tree closes")
        label = _label(tokens[i + 1] if i + 1 < len(tokens) else None)
        if root_label is None:
            root_label = label
        i += 2
        following = tokens[i] if i < len(tokens) else None
        if following is None or following == ")":
            raise DataError("malformed PTB tree: a node has no children")
        if following == "(":
            depth += 1
            continue
        if i + 1 >= len(tokens) or tokens[i + 1] != ")":
            raise DataError(f"malformed PTB tree: leaf {following!r} is not closed by ')'")
        words.append(_unescape(following))
        i += 2
    if depth:
        raise DataError("malformed PTB tree: missing ')'")
    assert root_label is not None
    return root_label, " ".join(words)


def _label(token: str | None) -> int:
    """The sentiment label of a node; DataError unless it is 0-4."""
    if token is None or token not in {"0", "1", "2", "3", "4"}:
        raise DataError(f"malformed PTB tree: node label {token!r} is not 0-4")
    return int(token)


def _unescape(token: str) -> str:
    """Undo the PTB escapes: bracket tokens (-LRB- ...) and backslashed '/' and '*'."""
    return _BRACKETS.get(token, token).replace("\\/", "/").replace("\\*", "*")


class SSTSource(DownloadableSource):
    """SST sentences with their root labels: binary (neutral dropped) or fine-grained (5 classes)."""

    archive = ZIP_NAME
    path_hint = PATH_HINT

    def __init__(
        self,
        path: str | None = None,
        fine_grained: bool = False,
        url: str = SST_URL,
        sha256: str | None = SST_SHA256,
        cache_dir: str = DOWNLOAD_DIR,
    ) -> None:
        super().__init__(
            path, url, sha256, cache_dir, name="sst5" if fine_grained else "sst", label_names=_LABEL_NAMES[fine_grained]
        )
        self.fine_grained = fine_grained

    def load(self) -> dict[str, list[RawExample]]:
        """Read the three splits; uids are ``<split>-<line number>``."""
        source = self._resolve()
        if source.is_file():
            return self._load_zip(source)
        return {
            split: self._examples(split, path, _decode(path.read_bytes(), path))
            for split, path in _split_files(source).items()
        }

    def fingerprint(self) -> dict[str, Any]:
        """A JSON-able identity of the source content: class, options, input files' stats."""
        source = self._resolve()
        paths = [source] if source.is_file() else list(_split_files(source).values())
        return {
            "class": type(self).__name__,
            "fine_grained": self.fine_grained,
            "files": [describe_file(path) for path in paths],
        }

    def _resolve(self) -> Path:
        """The folder holding the split files, or the zip archive (downloaded when no path)."""
        given = self._given()
        if given.is_file():
            return given
        for sub in SPLIT_DIRS:
            if any((given / sub / f"{split}.txt").is_file() for split in SPLITS):
                return given / sub
        raise DataError(
            f"dataset.path={self.path}: no train.txt, dev.txt or test.txt in it, trees/ "
            f"or trainDevTestTrees_PTB/trees/; {PATH_HINT}"
        )

    def _load_zip(self, archive: Path) -> dict[str, list[RawExample]]:
        """Read the three splits from the zip members ``[<dir>/]<split>.txt``."""
        try:
            with zipfile.ZipFile(archive) as zipped:
                names = set(zipped.namelist())
                sub = next(
                    (sub for sub in SPLIT_DIRS if any(f"{sub}{split}.txt" in names for split in SPLITS)), "trees/"
                )
                splits = {}
                for split in SPLITS:
                    member = f"{sub}{split}.txt"
                    where = f"{archive}:{member}"
                    if member not in names:
                        raise DataError(f"{where}: not found in the archive; {PATH_HINT}")
                    splits[split] = self._examples(split, where, _decode(zipped.read(member), where))
                return splits
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as error:
            raise DataError(
                f"{archive}: not a readable .zip archive, corrupt or truncated ({error}); "
                f"download it again or give the extracted folder via dataset.path"
            ) from error

    def _examples(self, split: str, where: str | Path, text: str) -> list[RawExample]:
        """Parse one split file's trees into examples (neutral dropped when binary)."""
        examples = []
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                label, sentence = parse_ptb_tree(line)
            except DataError as error:
                raise DataError(
                    f"{where}, line {number}: {error}; the file is not in the Stanford "
                    f"PTB tree format, get trainDevTestTrees_PTB again"
                ) from error
            if not self.fine_grained:
                if label == 2:
                    continue
                label = int(label >= 3)
            examples.append(RawExample(uid=f"{split}-{number}", text=sentence, label=label))
        if not examples:
            raise DataError(f"{where}: no sentences in the {split} split; {PATH_HINT}")
        return examples


def _split_files(folder: Path) -> dict[str, Path]:
    """The three split files of ``folder``; DataError naming the first one missing."""
    files = {split: folder / f"{split}.txt" for split in SPLITS}
    for path in files.values():
        if not path.is_file():
            raise DataError(f"{path}: not found; {PATH_HINT}")
    return files


def _decode(data: bytes, where: str | Path) -> str:
    """Decode UTF-8; DataError naming ``where`` on invalid bytes."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataError(f"{where}: not UTF-8 text ({error}); {PATH_HINT}") from error
