"""What every dataset source shares: its name and classes, where its files are, and where they are downloaded.

A source is anything with ``name``, ``label_names``, ``num_classes``, ``load()`` (split → raw examples) and
``fingerprint()`` (a JSON-able identity of its content, which keys the processed cache). The classes here
hold the attributes the readers have in common, so each reader's constructor only states what differs;
every reader keeps its own explicit signature, since Hydra (``conf/dataset/*.yaml``) instantiates it with
keyword arguments and ``attn_study.job.components.check_settings`` reads the parameters from that signature.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from attn_study.data.download import local_or_download
from attn_study.data.example import RawExample
from attn_study.errors import DataError

DOWNLOAD_DIR = "~/.cache/attn_study/downloads"  # the default ``cache_dir`` of every downloadable source


class Source:
    """The interface of every dataset source. Holds no state of its own (``SyntheticSource`` keys its cache
    on its instance attributes, so the base adds none)."""

    name: str
    label_names: list[str]
    num_classes: int

    def load(self) -> dict[str, list[RawExample]]:
        """The raw examples of each split (``train``, ``dev``, ``test``)."""
        raise NotImplementedError

    def fingerprint(self) -> dict[str, Any]:
        """A JSON-able identity of the source's content and options."""
        raise NotImplementedError


class FileSource(Source):
    """A source read from the user's ``dataset.path`` (a file or a folder; None when not given).

    Sets ``path`` and ``name``, and, when the class names are known at construction, ``label_names`` (a new
    list) and ``num_classes``; readers whose classes come from the data (bAbI answers, CNN entities) leave
    ``label_names`` out and define both as properties."""

    def __init__(self, path: str | None, name: str, label_names: Sequence[str] | None = None) -> None:
        self.path = path
        self.name = name
        if label_names is not None:
            self.label_names = list(label_names)
            self.num_classes = len(self.label_names)

    def _local_path(self, required: str, hint: str) -> Path:
        """``dataset.path``, user-expanded: DataError ``required`` when it is not given, and DataError
        ``dataset.path=<path>: not found; <hint>`` when nothing is there."""
        if self.path is None:
            raise DataError(required)
        given = Path(self.path).expanduser()
        if not given.exists():
            raise DataError(f"dataset.path={self.path}: not found; {hint}")
        return given


class DownloadableSource(FileSource):
    """A file source whose canonical archive is downloaded from ``url`` into ``cache_dir`` when no
    ``dataset.path`` is given, checked against ``sha256`` when one is pinned (``download.fetch``).

    Subclasses name the archive's file in ``cache_dir`` (``archive``) and what to tell a user whose
    ``dataset.path`` is wrong (``path_hint``)."""

    archive: ClassVar[str]
    path_hint: ClassVar[str]

    def __init__(
        self,
        path: str | None,
        url: str,
        sha256: str | None,
        cache_dir: str,
        name: str,
        label_names: Sequence[str] | None = None,
    ) -> None:
        super().__init__(path, name, label_names)
        self.url = url
        self.sha256 = sha256
        self.cache_dir = cache_dir

    def _given(self) -> Path:
        """The user's ``dataset.path`` (DataError with ``path_hint`` when it does not exist), else the
        archive downloaded (or found verified) in ``cache_dir``."""
        return local_or_download(self.path, self.url, self.cache_dir, self.archive, self.sha256, self.path_hint)
