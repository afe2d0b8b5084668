"""The shared base of the dataset sources (attn_study.data.source)."""

from __future__ import annotations

from pathlib import Path

import pytest

from attn_study.data.babi import BabiSource
from attn_study.data.cnn_qa import CNNQASource
from attn_study.data.imdb import IMDBSource
from attn_study.data.snli import SNLISource
from attn_study.data.source import DOWNLOAD_DIR, DownloadableSource, FileSource, Source
from attn_study.data.sst import SSTSource
from attn_study.data.synthetic import SyntheticSource
from attn_study.data.twenty_news import TwentyNewsSource
from attn_study.data.user_csv import UserCSVSource
from attn_study.data.zhang_csv import ZhangCSVSource
from attn_study.errors import DataError

DOWNLOADABLE = (SSTSource, IMDBSource, SNLISource, BabiSource, TwentyNewsSource)


@pytest.mark.parametrize("cls", DOWNLOADABLE)
def test_downloadable_sources_hold_path_url_pin_and_cache_dir(cls) -> None:
    source = cls(path="somewhere", sha256="ab" * 32, cache_dir="/tmp/dl")
    assert isinstance(source, DownloadableSource)
    assert (source.path, source.sha256, source.cache_dir) == ("somewhere", "ab" * 32, "/tmp/dl")
    assert source.url.startswith("http") and cls().cache_dir == DOWNLOAD_DIR
    assert source.archive and source.path_hint  # what _given() downloads, and what a wrong path is told


@pytest.mark.parametrize("make", [lambda: CNNQASource("x"), lambda: ZhangCSVSource("x"), lambda: UserCSVSource("x")])
def test_file_sources_hold_their_path_and_name(make) -> None:
    source = make()
    assert isinstance(source, FileSource) and not isinstance(source, DownloadableSource)
    assert source.path == "x" and source.name


def test_label_names_are_a_copy_and_set_num_classes() -> None:
    categories = ["a.b", "c.d", "e.f"]
    source = TwentyNewsSource(categories=categories)
    assert source.label_names == categories and source.label_names is not source.categories
    assert source.num_classes == 3


def test_local_path_says_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="^needed$"):
        FileSource(None, "x")._local_path("needed", "hint")
    with pytest.raises(DataError, match=r"^dataset.path=.*nope: not found; hint$"):
        FileSource(str(tmp_path / "nope"), "x")._local_path("needed", "hint")
    assert FileSource(str(tmp_path), "x")._local_path("needed", "hint") == tmp_path


def test_synthetic_source_keys_its_cache_on_its_settings_only() -> None:
    source = SyntheticSource(n_train=5, n_dev=2, n_test=2, seed=1)
    assert isinstance(source, Source)
    assert set(source.fingerprint()) == {
        "source",
        "sizes",
        "min_length",
        "max_length",
        "negation_prob",
        "decoy_negators",
        "seed",
    }
