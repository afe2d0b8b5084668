"""bAbI reader: story parsing, answer labels, dev carve, folder/tarball input, errors; real counts (slow)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from attn_study.data.babi import BabiSource, jain_wallace_dev, parse_babi
from attn_study.errors import DataError, UserError
from tests.data.canonical_files import (
    BABI_TASK1,
    BABI_TEST,
    BABI_TRAIN,
    write_babi,
    write_tree_tarball,
)
from tests.helpers import SHARED_DATA

REAL_BABI = SHARED_DATA / "babi" / "tasks_1-20_v1-2"
ANSWERS = ["bathroom", "garden", "hallway", "kitchen", "office"]


@pytest.fixture
def babi_dir(tmp_path: Path) -> Path:
    return write_babi(tmp_path / "babi")


@pytest.fixture
def babi_tar(babi_dir: Path, tmp_path: Path) -> Path:
    return write_tree_tarball(babi_dir, tmp_path / "tasks_1-20_v1-2.tar.gz", prefix="tasks_1-20_v1-2/")


def test_parse_two_stories() -> None:
    questions = parse_babi(BABI_TRAIN, "train.txt")
    assert len(questions) == 8
    assert questions[0] == (3, "Mary moved to the bathroom. John went to the hallway.", "Where is Mary?", "bathroom")
    assert questions[2] == (
        9,
        "Mary moved to the bathroom. John went to the hallway. Daniel went back to the "
        "hallway. Sandra moved to the garden. John moved to the office. Sandra journeyed "
        "to the bathroom.",
        "Where is Sandra?",
        "bathroom",
    )
    # line 1 of the second story starts a new passage; questions are not part of it
    assert questions[3] == (
        12,
        "Sandra travelled to the office. Mary went to the kitchen.",
        "Where is Sandra?",
        "office",
    )
    assert questions[7] == (
        20,
        "Sandra travelled to the office. Mary went to the kitchen. Mary moved to the "
        "garden. John went to the kitchen. Daniel went to the garden. Mary went to the "
        "office.",
        "Where is Mary?",
        "office",
    )


def test_jain_wallace_style_joins_statements_with_dots_and_drops_the_question_mark() -> None:
    """Their notebook: each statement without its final ".", joined by " . " (so no full stop at the end), the
    question without its "?"; the passages still hold only the story's statements before the question."""
    questions = parse_babi(BABI_TRAIN, "train.txt", style="jain_wallace")
    assert questions[0] == (3, "Mary moved to the bathroom . John went to the hallway", "Where is Mary", "bathroom")
    assert questions[3] == (
        12,
        "Sandra travelled to the office . Mary went to the kitchen",
        "Where is Sandra",
        "office",
    )


def test_jain_wallace_dev_split_is_scikit_learns_train_test_split() -> None:
    """The dev questions of ``train_test_split(range(n), test_size=0.15, random_state=16377)``, as scikit-learn
    1.9.1 printed them once (the first ⌈0.15·n⌉ of ``RandomState(16377).permutation(n)``), sorted."""
    assert jain_wallace_dev(10, 16377) == [1, 8]
    assert jain_wallace_dev(20, 16377) == [4, 11, 17]
    dev = jain_wallace_dev(10000, 16377)
    assert len(dev) == 1500 and dev[:8] == [3, 9, 12, 17, 41, 46, 57, 65]
    assert jain_wallace_dev(9000, 16377)[:8] == [0, 3, 12, 17, 36, 41, 46, 65]
    assert jain_wallace_dev(20, 16377) == sorted(np.random.RandomState(16377).permutation(20)[:3].tolist())
    assert jain_wallace_dev(9000, 1) != jain_wallace_dev(9000, 16377)  # the seed is dataset.source.split_seed


def test_jain_wallace_dev_split_of_a_source(babi_dir: Path) -> None:
    """``dev_split=jain_wallace`` takes the train file's questions at :func:`jain_wallace_dev`'s positions (in file
    order) for ``split_seed`` as dev, the rest as train, whatever the answers; a bad value is one line naming the
    option."""
    splits = BabiSource(str(babi_dir), style="jain_wallace", dev_split="jain_wallace", split_seed=16377).load()
    every = parse_babi(BABI_TRAIN, "train.txt", style="jain_wallace")
    dev = set(jain_wallace_dev(len(every), 16377))
    assert [e.uid for e in splits["dev"]] == [f"train-{q[0]}" for i, q in enumerate(every) if i in dev]
    assert [e.uid for e in splits["train"]] == [f"train-{q[0]}" for i, q in enumerate(every) if i not in dev]
    assert not splits["dev"][0].text.endswith(".") and not splits["dev"][0].query.endswith("?")
    with pytest.raises(UserError, match="dataset.source.dev_split=random"):
        BabiSource(str(babi_dir), dev_split="random")
    with pytest.raises(UserError, match="dataset.source.style=plain"):
        BabiSource(str(babi_dir), style="plain")


def test_labels_from_sorted_train_answers(babi_dir: Path) -> None:
    source = BabiSource(str(babi_dir), dev_fraction=0.3)
    assert (source.name, source.label_names, source.num_classes) == ("babi1", ANSWERS, 5)  # before load
    splits = source.load()
    assert {k: len(v) for k, v in splits.items()} == {"train": 6, "dev": 2, "test": 2}
    for examples in splits.values():
        for e in examples:
            assert e.query is not None and e.query.startswith("Where is ")
    assert [(e.uid, e.label, e.query) for e in splits["test"]] == [
        ("test-3", 2, "Where is John?"),
        ("test-6", 1, "Where is John?"),
    ]
    assert splits["test"][1].text == (
        "John travelled to the hallway. Mary journeyed to the bathroom. Daniel went "
        "back to the bathroom. John moved to the garden."
    )
    train_dev = sorted((e.uid for e in splits["train"] + splits["dev"]), key=lambda u: int(u[6:]))
    assert train_dev == ["train-3", "train-6", "train-9", "train-12", "train-14", "train-16", "train-18", "train-20"]


#: the words of BABI_TRAIN as style=jain_wallace writes it (statements joined by " . ", no "?"), sorted, case kept
TRAIN_WORDS = sorted(
    {
        ".",
        "Daniel",
        "John",
        "Mary",
        "Sandra",
        "Where",
        "back",
        "is",
        "journeyed",
        "moved",
        "the",
        "to",
        "travelled",
        "went",
    }
    | set(ANSWERS)
    | {"bathroom", "hallway"}
)
TASK2 = "qa2_two-supporting-facts"


def test_classes_words_are_every_word_of_the_train_file(babi_dir: Path) -> None:
    """``classes=words`` (Jain & Wallace's output layer): a class per word of the train file's passages and
    questions as the style writes them, sorted with case kept; each label is its answer's index among them."""
    source = BabiSource(str(babi_dir), style="jain_wallace", classes="words", dev_fraction=0.3)
    assert source.label_names == TRAIN_WORDS and source.num_classes == 19
    splits = source.load()
    assert [(e.uid, TRAIN_WORDS[e.label]) for e in splits["test"]] == [("test-3", "hallway"), ("test-6", "garden")]
    assert {TRAIN_WORDS[e.label] for e in splits["train"] + splits["dev"]} == set(ANSWERS)
    as_written = BabiSource(str(babi_dir), classes="words", dev_fraction=0.3).label_names
    assert "bathroom." in as_written and "Mary?" in as_written and "bathroom" in as_written  # the answers too


def test_class_tasks_add_the_words_of_other_tasks(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """``class_tasks`` unions the words of those tasks' train files; a task missing from the variant is read
    from the other variant's folder (logged, and named in the fingerprint); missing from both, one line."""
    root = write_babi(tmp_path / "b", variants=("en-10k",))
    other = "1 Mary dropped the milk.\n2 Where was the milk before the office? \toffice\t1\n"
    write_babi(tmp_path / "b", variants=("en",), train=other, tasks=(TASK2,))
    source = BabiSource(str(root), style="jain_wallace", classes="words", class_tasks=[1, 2], dev_fraction=0.3)
    with caplog.at_level("INFO", logger="attn_study.data.babi"):
        names = source.label_names
    assert names == sorted(set(TRAIN_WORDS) | {"before", "dropped", "milk", "was"})
    assert f"{TASK2}_train.txt is not in en-10k" in caplog.text and f"en/{TASK2}_train.txt" in caplog.text
    splits = source.load()
    assert [names[e.label] for e in splits["test"]] == ["hallway", "garden"]
    class_files = source.fingerprint()["class_files"]
    assert [(f["task"], f["variant"], Path(f["path"]).name) for f in class_files] == [(2, "en", f"{TASK2}_train.txt")]
    assert BabiSource(str(root), classes="words").fingerprint()["class_files"] == []
    for missing in (root / "en" / f"{TASK2}_train.txt",):
        missing.unlink()
    with pytest.raises(
        DataError, match=rf"no {TASK2}_train\.txt in en or en-10k.*leave 2 out of dataset.source.class_tasks"
    ):
        _ = BabiSource(str(root), classes="words", class_tasks=[1, 2]).label_names


def test_classes_from_a_tarball(babi_dir: Path, tmp_path: Path) -> None:
    """The archive gives the same classes as the folder, another task's train file included."""
    write_babi(babi_dir.parent, tasks=(TASK2,), train=BABI_TRAIN.replace("Daniel", "Fred"))
    tar = write_tree_tarball(babi_dir, tmp_path / "tasks_1-20_v1-2.tar.gz", prefix="tasks_1-20_v1-2/")
    options = {"style": "jain_wallace", "classes": "words", "class_tasks": [1, 2], "dev_fraction": 0.3}
    folder = BabiSource(str(babi_dir), **options)
    assert "Fred" in folder.label_names
    assert BabiSource(str(tar), **options).load() == folder.load()


def test_unreadable_files_are_named(babi_dir: Path, tmp_path: Path) -> None:
    """A task file that is not UTF-8, or a class task's file that is not in the bAbI format, is one line naming
    that file (in a folder and in the archive)."""
    (babi_dir / "en-10k" / f"{BABI_TASK1}_test.txt").write_bytes(b"1 Mary went to the \xff.\n")
    with pytest.raises(DataError, match=rf"en-10k/{BABI_TASK1}_test\.txt: not UTF-8 text"):
        BabiSource(str(babi_dir)).load()
    tar = write_tree_tarball(babi_dir, tmp_path / "tasks_1-20_v1-2.tar.gz", prefix="tasks_1-20_v1-2/")
    with pytest.raises(DataError, match=rf"tar\.gz:tasks_1-20_v1-2/en-10k/{BABI_TASK1}_test\.txt: not UTF-8 text"):
        BabiSource(str(tar)).load()
    write_babi(babi_dir.parent, tasks=(TASK2,), train="Mary went home.\n")
    with pytest.raises(DataError, match=rf"en-10k/{TASK2}_train\.txt, line 1: not '<number> <sentence>'"):
        _ = BabiSource(str(babi_dir), classes="words", class_tasks=[1, 2]).label_names


def test_class_options_are_checked() -> None:
    with pytest.raises(UserError, match="dataset.source.classes=vocabulary: must be one of answers, words"):
        BabiSource(classes="vocabulary")
    with pytest.raises(UserError, match=r"dataset.source.class_tasks=\[1, 21\]: 21 is not a bAbI task"):
        BabiSource(classes="words", class_tasks=[1, 21])


def test_dev_carve_is_stratified_and_deterministic(tmp_path: Path) -> None:
    story = "".join(
        f"1 Mary went to the {place}.\n2 Where is Mary? \t{place}\t1\n" for place in ["garden"] * 30 + ["office"] * 10
    )
    root = write_babi(tmp_path / "b", train=story, test=BABI_TEST.replace("hallway\t1", "garden\t1"))
    first = BabiSource(str(root), dev_fraction=0.2).load()
    assert Counter(e.label for e in first["dev"]) == {0: 6, 1: 2}
    assert BabiSource(str(root), dev_fraction=0.2).load() == first
    assert not {e.uid for e in first["dev"]} & {e.uid for e in first["train"]}
    with pytest.raises(UserError, match="dataset.source.dev_fraction=1.5"):
        BabiSource(str(root), dev_fraction=1.5)


def test_folder_variant_folder_and_tarball_agree(babi_dir: Path, babi_tar: Path) -> None:
    expected = BabiSource(str(babi_dir), dev_fraction=0.3).load()
    assert BabiSource(str(babi_tar), dev_fraction=0.3).load() == expected
    assert BabiSource(str(babi_dir.parent), dev_fraction=0.3).load() == expected
    assert BabiSource(str(babi_dir / "en-10k"), dev_fraction=0.3).load() == expected
    assert BabiSource(str(babi_tar), variant="en", dev_fraction=0.3).load() == expected  # same fixture text


def test_unknown_test_answer_names_the_file(tmp_path: Path) -> None:
    root = write_babi(tmp_path / "b", test=BABI_TEST.replace("garden\t5", "cellar\t5"))
    with pytest.raises(DataError, match=rf"en-10k/{BABI_TASK1}_test\.txt, line 6: answer 'cellar' never occurs"):
        BabiSource(str(root), dev_fraction=0.3).load()


def test_missing_train_file_suggests_en(babi_dir: Path, babi_tar: Path) -> None:
    (babi_dir / "en-10k" / f"{BABI_TASK1}_train.txt").unlink()
    with pytest.raises(DataError, match=rf"en-10k/{BABI_TASK1}_train\.txt: not found; try dataset.source.variant=en"):
        BabiSource(str(babi_dir)).load()
    with pytest.raises(DataError, match="variant=en"):
        _ = BabiSource(str(babi_dir)).label_names
    BabiSource(str(babi_dir), variant="en", dev_fraction=0.3).load()
    with pytest.raises(
        DataError,
        match=r"tasks_1-20_v1-2\.tar\.gz:en-10k/qa3_three-supporting-facts_train\.txt: "
        r"not found; try dataset.source.variant=en",
    ):
        BabiSource(str(babi_tar), task=3).load()


def test_malformed_lines(tmp_path: Path) -> None:
    root = write_babi(tmp_path / "a", train=BABI_TRAIN.replace("4 Daniel", "7 Daniel"))
    with pytest.raises(DataError, match=r"_train\.txt, line 4: line id 7 follows 3"):
        BabiSource(str(root)).load()
    root = write_babi(tmp_path / "b", train="Mary went home.\n")
    with pytest.raises(DataError, match=r"line 1: not '<number> <sentence>'"):
        BabiSource(str(root)).load()
    root = write_babi(tmp_path / "c", train=BABI_TRAIN.replace("\tbathroom\t1", "\t\t1"))
    with pytest.raises(DataError, match=r"line 3: a question line needs"):
        BabiSource(str(root)).load()


def test_options_and_paths(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="dataset.source.task=21"):
        BabiSource(task=21)
    with pytest.raises(UserError, match="dataset.source.variant=hn"):
        BabiSource(variant="hn")
    with pytest.raises(DataError, match=r"dataset.path=.*nope: not found; give the tasks_1-20_v1-2 folder"):
        BabiSource(str(tmp_path / "nope")).load()
    with pytest.raises(DataError, match=r"no en-10k/ folder in it"):
        BabiSource(str(tmp_path)).load()


#: the 20 tasks' train files of the bAbI release (tasks_1-20_v1-2/en), as Weston et al. (2015) published them
RELEASE_TRAIN_FILES = """
qa1_single-supporting-fact qa2_two-supporting-facts qa3_three-supporting-facts qa4_two-arg-relations
qa5_three-arg-relations qa6_yes-no-questions qa7_counting qa8_lists-sets qa9_simple-negation
qa10_indefinite-knowledge qa11_basic-coreference qa12_conjunction qa13_compound-coreference qa14_time-reasoning
qa15_basic-deduction qa16_basic-induction qa17_positional-reasoning qa18_size-reasoning qa19_path-finding
qa20_agents-motivations
""".split()


def test_every_tasks_file_is_named_as_in_the_release() -> None:
    source = BabiSource()
    assert [source.file_name("train", task) for task in range(1, 21)] == [f"{n}_train.txt" for n in RELEASE_TRAIN_FILES]
    assert BabiSource(task=6).file_name("test") == "qa6_yes-no-questions_test.txt"


def test_fingerprint(babi_dir: Path) -> None:
    fp = BabiSource(str(babi_dir), task=1, variant="en").fingerprint()
    assert (fp["task"], fp["variant"]) == (1, "en")
    assert [Path(f["path"]).name for f in fp["files"]] == [f"{BABI_TASK1}_train.txt", f"{BABI_TASK1}_test.txt"]


@pytest.mark.slow
@pytest.mark.parametrize("task", [1, 2, 3])
@pytest.mark.parametrize("variant", ["en-10k", "en"])
def test_real_babi_counts(task: int, variant: str) -> None:
    if not REAL_BABI.is_dir():
        pytest.skip(f"real bAbI not at {REAL_BABI}")
    source = BabiSource(str(REAL_BABI), task=task, variant=variant)
    if not (REAL_BABI / variant / source.file_name("train")).is_file():
        with pytest.raises(DataError, match="try dataset.source.variant=en"):
            source.load()
        pytest.skip(f"{variant}/{source.file_name('train')} is missing from the shared copy")
    splits = source.load()
    train_questions = 10000 if variant == "en-10k" else 1000
    # J&W Table 1: 10000 train / 1000 test per task (en-10k); dev is carved out of train
    assert {k: len(v) for k, v in splits.items()} == {
        "train": train_questions * 9 // 10,
        "dev": train_questions // 10,
        "test": 1000,
    }
    assert source.label_names == ["bathroom", "bedroom", "garden", "hallway", "kitchen", "office"]
    assert all(e.query and e.query.endswith("?") for e in splits["test"])


@pytest.mark.slow
def test_real_babi_jain_wallace_classes() -> None:
    """Their notebook's 36 classes: the words of tasks 1-3's train files (each variant's copy of a task has the
    same words, so a task missing from one variant gives the same classes from the other)."""
    if not REAL_BABI.is_dir():
        pytest.skip(f"real bAbI not at {REAL_BABI}")
    options = {"style": "jain_wallace", "classes": "words", "class_tasks": [1, 2, 3]}
    names = BabiSource(str(REAL_BABI), task=1, variant="en", **options).label_names
    places = ["bathroom", "bedroom", "garden", "hallway", "kitchen", "office"]
    people = ["Daniel", "John", "Mary", "Sandra"]
    objects = ["apple", "football", "milk"]
    verbs = ["discarded", "dropped", "got", "grabbed", "journeyed", "left", "moved", "picked", "put", "took"]
    rest = [".", "Where", "back", "before", "down", "is", "the", "there", "to", "travelled", "up", "was", "went"]
    assert names == sorted(places + people + objects + verbs + rest)
    for task in (1, 2):
        one = BabiSource(str(REAL_BABI), task=task, variant="en", style="jain_wallace", classes="words")
        ten = BabiSource(str(REAL_BABI), task=task, variant="en-10k", style="jain_wallace", classes="words")
        assert one.label_names == ten.label_names
    assert BabiSource(str(REAL_BABI), task=2, variant="en-10k", **options).label_names == names
