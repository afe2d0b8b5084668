"""20 Newsgroups reader: post cleaning, folder and tarball input, labels, the dev carve, errors."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from attn_study.data.twenty_news import TwentyNewsSource, clean_post
from attn_study.errors import DataError, UserError
from tests.data.canonical_files import (
    NEWS_SPECIAL,
    NEWS_SPECIAL_CLEAN,
    news_body,
    write_news_tree,
    write_tree_tarball,
)


@pytest.fixture
def news_dir(tmp_path: Path) -> Path:
    return write_news_tree(tmp_path / "news")


@pytest.fixture
def news_tar(news_dir: Path, tmp_path: Path) -> Path:
    return write_tree_tarball(news_dir, tmp_path / "20news-bydate.tar.gz")


def test_clean_post_drops_header_quotes_attribution_and_signature() -> None:
    assert clean_post(NEWS_SPECIAL) == NEWS_SPECIAL_CLEAN
    assert clean_post(NEWS_SPECIAL.replace("\n", "\r\n")) == NEWS_SPECIAL_CLEAN
    assert clean_post(NEWS_SPECIAL.replace("\n", "\r")) == NEWS_SPECIAL_CLEAN  # old Mac line ends: a lone CR


@pytest.mark.parametrize(
    ("post", "expected"),
    [
        ("Subject: x\nLines: 2\n\nbody\n", "body"),
        ("Subject: x\n  \t\nbody after a whitespace-only blank line", "body after a whitespace-only blank line"),
        ("Subject: only a header\nLines: 0\n", ""),
        ("H: 1\n\nfirst\n\nsecond paragraph\n-- \nsig\n", "first\n\nsecond paragraph"),
        ("H: 1\n\n|> quoted\n> quoted\nkept | not at the start\n", "kept | not at the start"),
        ("H: 1\n\nIn article <x@y> z writes:\nreply\n", "reply"),
        ("H: 1\n\n---\nrule of three dashes is not a signature\n", "---\nrule of three dashes is not a signature"),
    ],
)
def test_clean_post_rules(post: str, expected: str) -> None:
    assert clean_post(post) == expected


def test_folder_and_tarball_give_identical_results(news_dir: Path, news_tar: Path) -> None:
    from_folder = TwentyNewsSource(str(news_dir), dev_size=4).load()
    assert TwentyNewsSource(str(news_tar), dev_size=4).load() == from_folder
    nested = news_dir.parent / "outer"
    shutil.copytree(news_dir, nested / "20news-bydate")
    assert TwentyNewsSource(str(nested), dev_size=4).load() == from_folder


def test_splits_labels_and_other_groups_ignored(news_dir: Path) -> None:
    source = TwentyNewsSource(str(news_dir), dev_size=4)
    assert (source.num_classes, source.label_names) == (2, ["rec.sport.baseball", "rec.sport.hockey"])
    splits = source.load()
    assert {k: len(v) for k, v in splits.items()} == {"train": 10, "dev": 4, "test": 5}
    assert [e.uid for e in splits["test"]] == [
        "test/rec.sport.baseball/301",
        "test/rec.sport.baseball/302",
        "test/rec.sport.hockey/401",
        "test/rec.sport.hockey/402",
        "test/rec.sport.hockey/403",
    ]
    for examples in splits.values():
        for e in examples:
            assert e.label == (1 if "hockey" in e.uid else 0)
            assert "graphics" not in e.uid and e.query is None
    assert Counter(e.label for e in splits["dev"]) == {0: 2, 1: 2}


def test_texts_are_cleaned_and_latin1_decoded(news_dir: Path) -> None:
    splits = TwentyNewsSource(str(news_dir), dev_size=4).load()
    by_uid = {e.uid: e.text for examples in splits.values() for e in examples}
    assert by_uid["train/rec.sport.baseball/104"] == NEWS_SPECIAL_CLEAN
    assert "café" in by_uid["train/rec.sport.baseball/104"]
    assert by_uid["test/rec.sport.hockey/402"] == news_body("test", "rec.sport.hockey", 402)
    assert by_uid["train/rec.sport.hockey/207"] == ""  # all header: kept, dropped later by min_length


def test_categories_option_picks_groups_and_order(news_dir: Path) -> None:
    source = TwentyNewsSource(str(news_dir), categories=["rec.sport.hockey", "comp.graphics"], dev_size=2)
    splits = source.load()
    assert source.label_names == ["rec.sport.hockey", "comp.graphics"]
    assert [(e.uid, e.label) for e in splits["test"]][-1] == ("test/rec.sport.hockey/403", 0)
    assert ("test/comp.graphics/601", 1) in [(e.uid, e.label) for e in splits["test"]]
    with pytest.raises(UserError, match="dataset.source.categories"):
        TwentyNewsSource(str(news_dir), categories=["rec.sport.hockey"])


def test_dev_carve_is_deterministic_and_seeded(news_dir: Path) -> None:
    first = TwentyNewsSource(str(news_dir), dev_size=4).load()
    assert TwentyNewsSource(str(news_dir), dev_size=4).load() == first
    train_dev = {e.uid for e in first["train"]} | {e.uid for e in first["dev"]}
    assert len(train_dev) == 14 and not {e.uid for e in first["dev"]} & {e.uid for e in first["train"]}
    others = [
        [e.uid for e in TwentyNewsSource(str(news_dir), dev_size=4, split_seed=s).load()["dev"]] for s in (1, 2, 3)
    ]
    assert any(dev != [e.uid for e in first["dev"]] for dev in others)
    with pytest.raises(UserError, match="dataset.source.dev_size=14"):
        TwentyNewsSource(str(news_dir), dev_size=14).load()


def test_fingerprint(news_dir: Path, news_tar: Path) -> None:
    tar = TwentyNewsSource(str(news_tar), dev_size=4).fingerprint()
    assert tar["files"][0]["size"] == news_tar.stat().st_size
    folder = TwentyNewsSource(str(news_dir), dev_size=4).fingerprint()["folder"]
    assert folder["files"] == 19  # comp.graphics posts are not part of the source
    (news_dir / "20news-bydate-test" / "rec.sport.hockey" / "401").write_text("changed!")
    assert TwentyNewsSource(str(news_dir), dev_size=4).fingerprint()["folder"]["blake2b"] != folder["blake2b"]


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"dataset.path=.*nope: not found; give the folder holding 20news-bydate"):
        TwentyNewsSource(str(tmp_path / "nope")).load()


def test_folder_without_bydate_folders(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no 20news-bydate-train/ or 20news-bydate-test/"):
        TwentyNewsSource(str(tmp_path)).load()


def test_missing_group_names_the_folder(news_dir: Path) -> None:
    shutil.rmtree(news_dir / "20news-bydate-test" / "rec.sport.hockey")
    with pytest.raises(DataError, match=r"20news-bydate-test/rec.sport.hockey: no posts") as error:
        TwentyNewsSource(str(news_dir), dev_size=4).load()
    assert "\n" not in str(error.value)


def test_truncated_tarball(news_tar: Path) -> None:
    news_tar.write_bytes(news_tar.read_bytes()[:-20])
    with pytest.raises(DataError, match=r"20news-bydate\.tar\.gz: corrupt or truncated archive"):
        TwentyNewsSource(str(news_tar), dev_size=4).load()
