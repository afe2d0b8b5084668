"""bAbI QA tasks v1.2 (Weston et al. 2015) from the canonical ``tasks_1-20_v1-2`` release.

A task file holds numbered lines; number 1 starts a new story. A statement line is ``<n> <sentence>``;
a question line is ``<n> <question>\\t<answer>\\t<supporting line numbers>``. Each question is one
instance: the passage is the story's statements before it (in order; earlier questions are not part of
it), the query the question, the label the answer's index among the classes.

``classes`` says what the classes are: ``answers`` (every answer of the task's train file, sorted) or ``words``
(Jain & Wallace's output layer, ``preprocess/Babi/Babi.ipynb``'s ``entity2idx``: every word of the passages and
questions of the train files of ``class_tasks`` — tasks 1-3 in their notebook, which fits one vocabulary on all
three — as ``style`` writes them, split at spaces, case kept, sorted; only the answers ever occur as labels). A
class task whose train file is missing from the variant's folder or archive is read from the other variant's
(en and en-10k come from one generator with one vocabulary), and the log and the fingerprint say so.

``style`` says how the passage and question are written: ``as_written`` (the statements joined by spaces,
each with its full stop; the question with its "?") or ``jain_wallace`` (their notebook
``preprocess/Babi/Babi.ipynb``: each statement's final "." removed and the statements joined by " . ", the
question's "?" removed). ``dev_split``: ``stratified`` (``dev_fraction`` of the train file's questions per
answer, drawn with ``split_seed``) or ``jain_wallace`` (their notebook's scikit-learn ``train_test_split(test_size=0.15,
random_state=split_seed)`` over the train file's questions in file order — their seed is 16377, which
``recipe=jain_wallace`` sets; dev and train keep the file order).
"""

from __future__ import annotations

import gzip
import logging
import re
import tarfile
import zlib
from pathlib import Path
from typing import Any

from attn_study.data.digest import describe_file
from attn_study.data.example import RawExample
from attn_study.data.source import DOWNLOAD_DIR, DownloadableSource
from attn_study.data.splits import stratified_indices, train_test_split
from attn_study.errors import DataError, UserError

BABI_URL = "http://www.thespermwhale.com/jaseweston/babi/tasks_1-20_v1-2.tar.gz"
TAR_NAME = "tasks_1-20_v1-2.tar.gz"
PATH_HINT = "give the tasks_1-20_v1-2 folder or tasks_1-20_v1-2.tar.gz via dataset.path"
VARIANTS = ("en", "en-10k")
STYLES = ("as_written", "jain_wallace")
DEV_SPLITS = ("stratified", "jain_wallace")
FILE_SPLITS = ("train", "test")
CLASSES = ("answers", "words")
TASKS = {
    1: "single-supporting-fact",
    2: "two-supporting-facts",
    3: "three-supporting-facts",
    4: "two-arg-relations",
    5: "three-arg-relations",
    6: "yes-no-questions",
    7: "counting",
    8: "lists-sets",
    9: "simple-negation",
    10: "indefinite-knowledge",
    11: "basic-coreference",
    12: "conjunction",
    13: "compound-coreference",
    14: "time-reasoning",
    15: "basic-deduction",
    16: "basic-induction",
    17: "positional-reasoning",
    18: "size-reasoning",
    19: "path-finding",
    20: "agents-motivations",
}

LOG = logging.getLogger(__name__)
_LINE = re.compile(r"(\d+) (.*)")

Question = tuple[int, str, str, str]  # line number, passage, question, answer


def parse_babi(text: str, where: str, style: str = "as_written") -> list[Question]:
    """The questions of one task file: (line number, passage, question, answer) in file order, passage and
    question written in ``style`` (module docstring).

    Raise DataError naming ``where`` and the line when a line is not ``<n> ...``, when the numbers
    neither restart at 1 nor count up by one, or when a question line lacks its answer.
    """
    questions: list[Question] = []
    story: list[str] = []
    previous = 0
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        match = _LINE.fullmatch(line.rstrip("\r"))
        if match is None:
            raise DataError(
                f"{where}, line {number}: not '<number> <sentence>'; the file is not in the bAbI format; {PATH_HINT}"
            )
        index, rest = int(match[1]), match[2]
        if index == 1:
            story = []
        elif index != previous + 1:
            raise DataError(
                f"{where}, line {number}: line id {index} follows {previous}; the file is not "
                f"in the bAbI format or is damaged"
            )
        previous = index
        if "\t" not in rest:
            statement = rest.strip()
            story.append(statement.removesuffix(".").strip() if style == "jain_wallace" else statement)
            continue
        fields = rest.split("\t")
        question, answer = fields[0].strip(), fields[1].strip()
        if not question or not answer:
            raise DataError(f"{where}, line {number}: a question line needs '<question>\\t<answer>'")
        if style == "jain_wallace":
            questions.append((number, " . ".join(story), question.removesuffix("?").strip(), answer))
        else:
            questions.append((number, " ".join(story), question, answer))
    return questions


def jain_wallace_dev(n: int, seed: int) -> list[int]:
    """Positions of the dev questions among ``n`` train questions as Jain & Wallace drew them
    (``preprocess/Babi/Babi.ipynb``, with ``seed`` 16377): ``train_test_split(range(n), test_size=0.15,
    random_state=seed)``'s test part. Sorted (their CSV keeps the file order)."""
    return sorted(train_test_split(range(n), seed, test_size=0.15, what="the bAbI dev split")[1])


class BabiSource(DownloadableSource):
    """One bAbI task: the train file (a dev carved out of it, per answer, seeded) and the test file."""

    archive = TAR_NAME
    path_hint = PATH_HINT

    def __init__(
        self,
        path: str | None = None,
        task: int = 1,
        variant: str = "en-10k",
        url: str = BABI_URL,
        sha256: str | None = None,
        cache_dir: str = DOWNLOAD_DIR,
        dev_fraction: float = 0.1,
        split_seed: int = 13,
        style: str = "as_written",
        dev_split: str = "stratified",
        classes: str = "answers",
        class_tasks: list[int] | None = None,
    ) -> None:
        if task not in TASKS:
            raise UserError(f"dataset.source.task={task}: must be a bAbI task number 1-20")
        if variant not in VARIANTS:
            raise UserError(f"dataset.source.variant={variant}: must be one of {', '.join(VARIANTS)}")
        if style not in STYLES:
            raise UserError(f"dataset.source.style={style}: must be one of {', '.join(STYLES)}")
        if dev_split not in DEV_SPLITS:
            raise UserError(f"dataset.source.dev_split={dev_split}: must be one of {', '.join(DEV_SPLITS)}")
        if classes not in CLASSES:
            raise UserError(f"dataset.source.classes={classes}: must be one of {', '.join(CLASSES)}")
        wrong = [t for t in class_tasks or () if t not in TASKS]
        if wrong:
            raise UserError(
                f"dataset.source.class_tasks={list(class_tasks or ())}: {wrong[0]} is not a bAbI task (1-20)"
            )
        if not 0 < dev_fraction < 1:
            raise UserError(f"dataset.source.dev_fraction={dev_fraction}: must be between 0 and 1")
        super().__init__(path, url, sha256, cache_dir, name=f"babi{task}")  # classes: read on first use
        self.task = task
        self.variant = variant
        self.dev_fraction = dev_fraction
        self.split_seed = split_seed
        self.style, self.dev_split = style, dev_split
        self.classes = classes
        self.class_tasks = list(class_tasks) if class_tasks else [task]
        self._classes: list[str] | None = None
        self._class_texts: dict[tuple[str, int], tuple[str, str, str, Path]] = {}

    @property
    def label_names(self) -> list[str]:
        """The classes (module docstring; read on first use)."""
        if self._classes is None:
            source = self._resolve()
            self._classes = self._class_names(source, parse_babi(*self._read(source, ("train",))["train"], self.style))
        return list(self._classes)

    @property
    def num_classes(self) -> int:
        return len(self.label_names)

    def file_name(self, split: str, task: int | None = None) -> str:
        """``qa<task>_<task name>_<split>.txt`` (this source's task by default)."""
        task = self.task if task is None else task
        return f"qa{task}_{TASKS[task]}_{split}.txt"

    def load(self) -> dict[str, list[RawExample]]:
        """Read train/dev/test; uids are ``<file split>-<line number of the question>``."""
        source = self._resolve()
        texts = self._read(source, FILE_SPLITS)
        parsed = {split: parse_babi(*texts[split], self.style) for split in FILE_SPLITS}
        for split in FILE_SPLITS:
            if not parsed[split]:
                raise DataError(f"{texts[split][1]}: no questions; {PATH_HINT}")
        self._classes = self._class_names(source, parsed["train"])
        index = {answer: i for i, answer in enumerate(self._classes)}
        examples: dict[str, list[RawExample]] = {}
        for split in FILE_SPLITS:
            examples[split] = []
            for number, passage, question, answer in parsed[split]:
                if answer not in index:
                    raise DataError(
                        f"{texts[split][1]}, line {number}: answer {answer!r} never occurs in the "
                        f"train file, so it has no label; use train and test files of one task"
                    )
                examples[split].append(
                    RawExample(uid=f"{split}-{number}", text=passage, label=index[answer], query=question)
                )
        train = examples["train"]
        if self.dev_split == "jain_wallace":
            dev = set(jain_wallace_dev(len(train), self.split_seed))
        else:
            dev = set(
                stratified_indices(
                    [e.label for e in train],
                    round(self.dev_fraction * len(train)),
                    self.split_seed,
                    "dataset.source.dev_fraction (times the train questions)",
                )
            )
        return {
            "train": [e for i, e in enumerate(train) if i not in dev],
            "dev": [train[i] for i in sorted(dev)],
            "test": examples["test"],
        }

    def fingerprint(self) -> dict[str, Any]:
        """A JSON-able identity of the source content: class, options, input files' stats."""
        source = self._resolve()
        paths = [source] if source.is_file() else [self._file(source, split) for split in FILE_SPLITS]
        return {
            "class": type(self).__name__,
            "task": self.task,
            "variant": self.variant,
            "dev_fraction": self.dev_fraction,
            "split_seed": self.split_seed,
            "style": self.style,
            "dev_split": self.dev_split,
            "classes": self.classes,
            "files": [describe_file(path) for path in paths],
            **(
                {"class_tasks": self.class_tasks, "class_files": self._class_files(source)}
                if self.classes == "words"
                else {}
            ),
        }

    def _class_names(self, source: Path, train: list[Question]) -> list[str]:
        """The sorted classes (module docstring), ``train`` being this task's parsed train file."""
        if self.classes == "answers":
            return sorted({answer for _, _, _, answer in train})
        words = {answer for _, _, _, answer in train}
        for task in self.class_tasks:
            if task == self.task:
                questions = train
            else:
                text, where, _, _ = self._class_file(source, task)
                questions = parse_babi(text, where, self.style)
            for _, passage, question, answer in questions:
                words.update(passage.split(" ") + question.split(" ") + [answer])
        return sorted(words - {""})

    def _class_file(self, source: Path, task: int) -> tuple[str, str, str, Path]:
        """(text, where, variant, file or archive) of ``task``'s train file for the classes: the variant's, else
        the other variant's (read once per source)."""
        key = (str(source), task)
        if key not in self._class_texts:
            self._class_texts[key] = self._find_class_file(source, task)
        return self._class_texts[key]

    def _find_class_file(self, source: Path, task: int) -> tuple[str, str, str, Path]:
        other = next(v for v in VARIANTS if v != self.variant)
        for variant in (self.variant, other):
            where = source if source.is_file() else source.parent / variant
            try:
                text, name = self._read(where, ("train",), task, variant)["train"]
            except DataError:
                continue
            if variant != self.variant:
                LOG.info(
                    "bAbI classes: %s is not in %s; its words are read from %s",
                    self.file_name("train", task),
                    self.variant,
                    name,
                )
            return text, name, variant, where if where.is_file() else where / self.file_name("train", task)
        raise DataError(
            f"{source}: no {self.file_name('train', task)} in {' or '.join(VARIANTS)}; the classes "
            f"(dataset.source.classes=words) are the words of the train files of tasks {self.class_tasks}: give a "
            f"copy that holds them, or leave {task} out of dataset.source.class_tasks"
        )

    def _class_files(self, source: Path) -> list[dict[str, Any]]:
        """The identity of every other class task's train file (the archive's, when the source is one)."""
        out = []
        for task in self.class_tasks:
            if task != self.task:
                _, _, variant, path = self._class_file(source, task)
                out.append({"task": task, "variant": variant, **describe_file(path)})
        return out

    def _resolve(self) -> Path:
        """The variant's folder (``<root>/en-10k``), or the tarball (downloaded when no path)."""
        given = self._given()
        if given.is_file():
            return given
        if given.name == self.variant:
            return given
        for root in (given, given / "tasks_1-20_v1-2"):
            if (root / self.variant).is_dir():
                return root / self.variant
        raise DataError(
            f"dataset.path={self.path}: no {self.variant}/ folder in it or in tasks_1-20_v1-2/; {PATH_HINT}"
        )

    def _missing(self, where: str) -> DataError:
        advice = "; try dataset.source.variant=en" if self.variant != "en" else f"; {PATH_HINT}"
        return DataError(f"{where}: not found{advice}")

    def _file(self, folder: Path, split: str, task: int | None = None) -> Path:
        path = folder / self.file_name(split, task)
        if not path.is_file():
            raise self._missing(str(path))
        return path

    def _read(
        self, source: Path, splits: tuple[str, ...], task: int | None = None, variant: str | None = None
    ) -> dict[str, tuple[str, str]]:
        """split → (file text, where) for the files of ``splits`` of ``task`` in ``variant`` (this source's by
        default), from the variant's folder or the tarball."""
        variant = self.variant if variant is None else variant
        if source.is_dir():
            paths = {split: self._file(source, split, task) for split in splits}
            return {split: (_decode(path.read_bytes(), str(path)), str(path)) for split, path in paths.items()}
        wanted = {
            split: re.compile(rf"(?:.*/)?{re.escape(variant)}/{re.escape(self.file_name(split, task))}")
            for split in splits
        }
        found: dict[str, tuple[str, str]] = {}
        try:
            with gzip.open(source, "rb") as unzipped, tarfile.open(fileobj=unzipped, mode="r|") as tar:
                for member in tar:
                    split = next((s for s, pattern in wanted.items() if pattern.fullmatch(member.name)), None)
                    if split is not None and split not in found and member.isfile():
                        handle = tar.extractfile(member)
                        assert handle is not None
                        where = f"{source}:{member.name}"
                        found[split] = (_decode(handle.read(), where), where)
                        if len(found) == len(wanted):
                            break
        except (tarfile.TarError, EOFError, zlib.error, OSError) as error:
            raise DataError(
                f"{source}: corrupt or truncated archive ({error}); download it again or give "
                f"the extracted tasks_1-20_v1-2 folder via dataset.path"
            ) from error
        for split in splits:
            if split not in found:
                raise self._missing(f"{source}:{variant}/{self.file_name(split, task)}")
        return found


def _decode(data: bytes, where: str) -> str:
    """Decode UTF-8; DataError naming ``where`` on invalid bytes."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataError(f"{where}: not UTF-8 text ({error}); {PATH_HINT}") from error
