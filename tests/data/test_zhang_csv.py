"""Zhang et al. (2015) CSV reader: quoting and escapes, class maps, dev carve, subsample, archives, errors."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from attn_study.data.zhang_csv import ZhangCSVSource, stratified_indices
from attn_study.errors import DataError, UserError
from tests.data.canonical_files import (
    AG_TRAIN_HEAD,
    AG_TRAIN_HEAD_PARSED,
    write_ag_news,
    write_tree_tarball,
    write_zhang_csv,
    zhang_rows,
)


@pytest.fixture
def ag_dir(tmp_path: Path) -> Path:
    return write_ag_news(tmp_path / "data")


@pytest.fixture
def ag_tar(ag_dir: Path, tmp_path: Path) -> Path:
    return write_tree_tarball(ag_dir, tmp_path / "ag_news_csv.tar.gz", prefix="ag_news_csv/")


def _all(splits: dict) -> dict[str, tuple[str, int]]:
    return {e.uid: (e.text, e.label) for examples in splits.values() for e in examples}


def test_quotes_commas_and_escaped_newlines(ag_dir: Path) -> None:
    found = _all(ZhangCSVSource(str(ag_dir), dev_size=4).load())
    for record, (klass, text) in enumerate(AG_TRAIN_HEAD_PARSED, start=1):
        assert found[f"train-{record}"] == (text, klass - 1)
    assert found["test-1"] == ('World, today Text with "quotes" and a break', 0)
    assert found["train-5"] == ("train 1 0 field0 train 1 0 field1", 0)


def test_all_classes_by_default(ag_dir: Path) -> None:
    source = ZhangCSVSource(str(ag_dir), dev_size=4)
    assert (source.name, source.num_classes) == ("ag_news", 4)
    assert source.label_names == ["World", "Sports", "Business", "Sci/Tech"]
    splits = source.load()
    assert {k: len(v) for k, v in splits.items()} == {"train": 24, "dev": 4, "test": 9}
    assert Counter(e.label for e in splits["test"]) == {0: 3, 1: 2, 2: 2, 3: 2}


def test_class_map_keeps_and_renumbers(ag_dir: Path) -> None:
    source = ZhangCSVSource(str(ag_dir), classes={1: 0, 3: 1}, dev_size=2)
    assert (source.num_classes, source.label_names) == (2, ["World", "Business"])
    splits = source.load()
    assert {k: len(v) for k, v in splits.items()} == {"train": 12, "dev": 2, "test": 5}
    found = _all(splits)
    assert found["train-1"][1] == 1 and found["train-2"][1] == 0  # class 3 → 1, class 1 → 0
    assert "train-3" not in found and "train-4" not in found  # Sports, Sci/Tech dropped
    assert Counter(e.label for e in splits["dev"]) == {0: 1, 1: 1}
    merged = ZhangCSVSource(str(ag_dir), classes={"1": 0, "2": 0, "3": 1, "4": 1}, dev_size=2)
    assert merged.label_names == ["World/Sports", "Business/Sci/Tech"]
    listed = ZhangCSVSource(str(ag_dir), classes=[3, 1], dev_size=2)
    assert (listed.classes, listed.label_names) == ({3: 0, 1: 1}, ["Business", "World"])


@pytest.mark.parametrize("classes", [{5: 0}, {1: 0, 3: 2}, {}, {"x": 0}, [1, 1], [0, 2]])
def test_bad_class_map(ag_dir: Path, classes: dict) -> None:
    with pytest.raises(UserError, match="dataset.source.classes"):
        ZhangCSVSource(str(ag_dir), classes=classes)


def test_dev_carve_and_subsample_are_stratified_and_reproducible(ag_dir: Path) -> None:
    first = ZhangCSVSource(str(ag_dir), dev_size=8, max_train=12).load()
    assert {k: len(v) for k, v in first.items()} == {"train": 12, "dev": 8, "test": 9}
    assert Counter(e.label for e in first["dev"]) == {0: 2, 1: 2, 2: 2, 3: 2}
    assert Counter(e.label for e in first["train"]) == {0: 3, 1: 3, 2: 3, 3: 3}
    assert ZhangCSVSource(str(ag_dir), dev_size=8, max_train=12).load() == first
    full = ZhangCSVSource(str(ag_dir), dev_size=8).load()
    assert full["dev"] == first["dev"]  # the subsample never changes dev
    assert {e.uid for e in first["train"]} < {e.uid for e in full["train"]}
    assert [e.uid for e in full["train"]] == sorted((e.uid for e in full["train"]), key=lambda u: int(u[6:]))
    others = [[e.uid for e in ZhangCSVSource(str(ag_dir), dev_size=8, split_seed=s).load()["dev"]] for s in (1, 2)]
    assert any(dev != [e.uid for e in first["dev"]] for dev in others)
    assert ZhangCSVSource(str(ag_dir), dev_size=8, max_train=1000).load() == full
    with pytest.raises(UserError, match="dataset.source.max_train=0"):
        ZhangCSVSource(str(ag_dir), dev_size=8, max_train=0).load()


def test_tarball_and_parent_folder_match_the_folder(ag_dir: Path, ag_tar: Path) -> None:
    expected = ZhangCSVSource(str(ag_dir), dev_size=4).load()
    assert ZhangCSVSource(str(ag_tar), dev_size=4).load() == expected
    assert ZhangCSVSource(str(ag_dir.parent), dev_size=4).load() == expected


def test_other_presets(tmp_path: Path) -> None:
    yahoo = write_zhang_csv(tmp_path / "yahoo_answers_csv", zhang_rows(10, 2, 3, "q"), zhang_rows(10, 1, 3, "t"))
    source = ZhangCSVSource(str(yahoo), dataset="yahoo", dev_size=10)
    assert source.num_classes == 10 and source.label_names[9] == "Politics & Government"
    test = source.load()["test"]
    assert (test[9].label, test[9].text) == (9, "t 10 0 field0 t 10 0 field1 t 10 0 field2")
    yelp = write_zhang_csv(
        tmp_path / "yelp", ['"5","Great food, ""really""."'] + zhang_rows(5, 2, 1, "r"), zhang_rows(5, 1, 1, "s")
    )
    splits = ZhangCSVSource(str(yelp), dataset="yelp", dev_size=5).load()
    assert ('Great food, "really".', 4) in [(e.text, e.label) for e in splits["train"] + splits["dev"]]
    stars = ["1 star", "2 stars", "3 stars", "4 stars", "5 stars"]  # the reviews' class indices 1-5
    for dataset in ("yelp", "amazon"):
        source = ZhangCSVSource(str(yelp), dataset=dataset)
        assert (source.num_classes, source.label_names) == (5, stars)
    with pytest.raises(UserError, match="dataset.source.dataset=imdb"):
        ZhangCSVSource(str(yelp), dataset="imdb")


def test_wrong_column_count_names_file_and_line(tmp_path: Path) -> None:
    folder = write_zhang_csv(tmp_path / "ag", AG_TRAIN_HEAD + ['"2","only a title"'], zhang_rows(4, 1, 2, "t"))
    with pytest.raises(DataError, match=r"ag/train\.csv, line 5: 2 columns, expected 3"):
        ZhangCSVSource(str(folder), dev_size=1).load()
    assert ZhangCSVSource(str(folder), dataset="amazon", dev_size=1, classes={1: 0, 2: 1}) is not None


def test_class_index_out_of_range(tmp_path: Path) -> None:
    folder = write_zhang_csv(tmp_path / "ag", zhang_rows(4, 2, 2, "r"), ['"0","a","b"'])
    with pytest.raises(DataError, match=r"test\.csv, line 1: class index '0' is not 1-4"):
        ZhangCSVSource(str(folder), dev_size=1).load()


def test_malformed_quoting(tmp_path: Path) -> None:
    folder = write_zhang_csv(
        tmp_path / "ag", zhang_rows(4, 2, 2, "r") + ['"1","unterminated,"b'], zhang_rows(4, 1, 2, "t")
    )
    with pytest.raises(DataError, match=r"train\.csv, line 9: malformed CSV"):
        ZhangCSVSource(str(folder), dev_size=1).load()


def test_path_required_with_where_to_get_it() -> None:
    with pytest.raises(DataError, match=r"dataset.path is required for yelp .*yelp_review_full_csv\.tar\.gz") as error:
        ZhangCSVSource(None, dataset="yelp").load()
    assert "zhangxiangxiao" in str(error.value) and "\n" not in str(error.value)


def test_missing_path_and_missing_split_file(ag_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"dataset.path=.*nope: not found; download ag_news_csv\.tar\.gz"):
        ZhangCSVSource(str(tmp_path / "nope")).load()
    (ag_dir / "test.csv").unlink()
    with pytest.raises(DataError, match=r"ag_news_csv/test\.csv: not found"):
        ZhangCSVSource(str(ag_dir), dev_size=4).load()
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no train.csv or test.csv"):
        ZhangCSVSource(str(tmp_path / "empty")).load()


def test_archive_without_test_member_and_truncated_archive(ag_dir: Path, tmp_path: Path) -> None:
    (ag_dir / "test.csv").unlink()
    archive = write_tree_tarball(ag_dir, tmp_path / "ag_news_csv.tar.gz", prefix="ag_news_csv/")
    with pytest.raises(DataError, match=r"ag_news_csv\.tar\.gz: no test\.csv in the archive"):
        ZhangCSVSource(str(archive), dev_size=4).load()
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    with pytest.raises(DataError, match="corrupt or truncated archive"):
        ZhangCSVSource(str(archive), dev_size=4).load()


def test_fingerprint(ag_dir: Path) -> None:
    fp = ZhangCSVSource(str(ag_dir), classes={1: 0, 3: 1}, dev_size=4).fingerprint()
    assert (fp["dataset"], fp["classes"], fp["dev_size"]) == ("ag_news", {"1": 0, "3": 1}, 4)
    assert [Path(f["path"]).name for f in fp["files"]] == ["train.csv", "test.csv"]


def test_stratified_indices() -> None:
    labels = [0] * 30 + [1] * 10
    chosen = stratified_indices(labels, 8, 13, "opt")
    assert Counter(labels[i] for i in chosen) == {0: 6, 1: 2} and chosen == sorted(chosen)
    assert stratified_indices(labels, 8, 13, "opt") == chosen
    for bad in (0, 40):
        with pytest.raises(UserError, match=f"opt={bad}: must be between 1 and 39"):
            stratified_indices(labels, bad, 13, "opt")


def test_the_sources_python_defaults_are_the_configs():
    """Built from Python (``ZhangCSVSource(path)``), the source reads the data as ``dataset=<zhang csv>`` does: each
    constructor default equals the value conf/dataset/_zhang_csv.yaml gives it (dev_size 10000, split_seed 13, …)."""
    import inspect

    import yaml

    from tests.helpers import REPO

    given = yaml.safe_load((REPO / "conf" / "dataset" / "_zhang_csv.yaml").read_text())["source"]
    defaults = {name: p.default for name, p in inspect.signature(ZhangCSVSource).parameters.items()}
    shared = sorted(set(given) & set(defaults) - {"path", "dataset"})  # those two each dataset's file sets
    assert "dev_size" in shared and {name: defaults[name] for name in shared} == {name: given[name] for name in shared}
