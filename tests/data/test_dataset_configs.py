"""Every dataset config added with the newer sources composes, instantiates its source and loads a fixture."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import OmegaConf

from attn_study.data.example import SPLITS, RawExample
from attn_study.data.processed import Preprocessing
from attn_study.errors import DataError
from tests.data.canonical_files import (
    BABI_TASK1,
    IMDB_FILES,
    write_ag_news,
    write_babi,
    write_cnn,
    write_news_tree,
    write_snli,
    write_user_csv,
    write_zhang_csv,
    zhang_rows,
)

CONFIG_DIR = str(Path(__file__).resolve().parents[2] / "conf")
BABI_TASKS = (BABI_TASK1, "qa2_two-supporting-facts", "qa3_three-supporting-facts")


def _zhang(folder: str, classes: int, fields: int) -> Callable[[Path], Path]:
    return lambda tmp: write_zhang_csv(
        tmp / folder, zhang_rows(classes, 3, fields, "r"), zhang_rows(classes, 1, fields, "t")
    )


# config name → (fixture writer, extra overrides, expected num_classes, expected split sizes)
CASES: dict[str, tuple[Callable[[Path], Path], list[str], int, dict[str, int]]] = {
    "twenty_news": (
        lambda tmp: write_news_tree(tmp / "news"),
        ["dataset.source.dev_size=4"],
        2,
        {"train": 10, "dev": 4, "test": 5},
    ),
    "ag_news": (lambda tmp: write_ag_news(tmp), ["dataset.source.dev_size=2"], 2, {"train": 12, "dev": 2, "test": 5}),
    "yelp": (
        _zhang("yelp_review_full_csv", 5, 1),
        ["dataset.source.dev_size=5"],
        5,
        {"train": 10, "dev": 5, "test": 5},
    ),
    "amazon": (
        _zhang("amazon_review_full_csv", 5, 2),
        ["dataset.source.dev_size=5", "dataset.source.max_train=5"],
        5,
        {"train": 5, "dev": 5, "test": 5},
    ),
    "yahoo": (
        _zhang("yahoo_answers_csv", 10, 3),
        ["dataset.source.dev_size=10"],
        10,
        {"train": 20, "dev": 10, "test": 10},
    ),
    "adr": (lambda tmp: write_user_csv(tmp / "adr.csv"), [], 2, {"train": 3, "dev": 2, "test": 2}),
    "mimic_diabetes": (lambda tmp: write_user_csv(tmp / "d.csv"), [], 2, {"train": 3, "dev": 2, "test": 2}),
    "mimic_anemia": (lambda tmp: write_user_csv(tmp / "a.csv"), [], 2, {"train": 3, "dev": 2, "test": 2}),
    "babi1": (lambda tmp: write_babi(tmp, tasks=BABI_TASKS), [], 5, {"train": 7, "dev": 1, "test": 2}),
    "babi2": (lambda tmp: write_babi(tmp, tasks=BABI_TASKS), [], 5, {"train": 7, "dev": 1, "test": 2}),
    "babi3": (lambda tmp: write_babi(tmp, tasks=BABI_TASKS), [], 5, {"train": 7, "dev": 1, "test": 2}),
    "cnn_qa": (lambda tmp: write_cnn(tmp), [], 8, {"train": 3, "dev": 1, "test": 1}),
    "snli": (lambda tmp: write_snli(tmp), [], 3, {"train": 3, "dev": 2, "test": 2}),
}


def _compose(*overrides: str):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        return compose("config", overrides=list(overrides))


def _source(cfg):
    node = {k: v for k, v in OmegaConf.to_container(cfg.dataset.source, resolve=True).items() if k != "name"}
    return instantiate(node)


@pytest.mark.parametrize("name", sorted(CASES))
def test_config_composes_and_loads(name: str, tmp_path: Path) -> None:
    write, overrides, num_classes, sizes = CASES[name]
    path = write(tmp_path)
    cfg = _compose(f"dataset={name}", f"dataset.path={path}", *overrides)
    assert cfg.dataset.name == name
    Preprocessing(**OmegaConf.to_container(cfg.dataset.preprocessing, resolve=True))
    source = _source(cfg)
    splits = source.load()
    assert {k: len(v) for k, v in splits.items()} == sizes
    assert source.num_classes == num_classes == len(source.label_names)
    for split in SPLITS:
        assert all(isinstance(e, RawExample) and 0 <= e.label < num_classes for e in splits[split])
    pair_task = name.startswith(("babi", "cnn", "snli"))
    assert all((e.query is not None) == pair_task for examples in splits.values() for e in examples)


def test_imdb_rating_config(make_aclimdb: Callable[..., Path]) -> None:
    root = make_aclimdb(IMDB_FILES)
    cfg = _compose("dataset=imdb_rating", f"dataset.path={root}", "dataset.source.dev_size=4")
    source = _source(cfg)
    assert (source.name, source.num_classes) == ("imdb_rating", 8)
    assert {k: len(v) for k, v in source.load().items()} == {"train": 6, "dev": 4, "test": 6}


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("ag_news", "ag_news_csv.tar.gz"),
        ("yelp", "yelp_review_full_csv.tar.gz"),
        ("amazon", "amazon_review_full_csv.tar.gz"),
        ("yahoo", "yahoo_answers_csv.tar.gz"),
        ("adr", "not redistributable"),
        ("mimic_diabetes", "PhysioNet credentialed"),
        ("mimic_anemia", "PhysioNet credentialed"),
        ("cnn_qa", "Google Drive"),
    ],
)
def test_configs_without_download_say_where_to_get_the_data(name: str, needle: str) -> None:
    source = _source(_compose(f"dataset={name}"))
    with pytest.raises(DataError, match="dataset.path is required") as error:
        source.load()
    assert needle in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("name", ["twenty_news", "babi1", "snli"])
def test_downloadable_configs_default_to_a_download(name: str) -> None:
    source = _source(_compose(f"dataset={name}"))
    assert source.path is None and source.url.startswith("http") and source.sha256 is None
