"""The per-instance table as W&B shows it (analysis/logged.py ``readable``): class names for label and prediction,
and each instance's text (and a pair task's query) right after its id."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd

from attn_study.analysis.logged import readable


def toy_data(query_ids=None):
    """Three instances of ids (4, 5, 6), (7,), (8, 9); a vocabulary that spells id k as ``wk``."""
    split = SimpleNamespace(ids=[np.array([4, 5, 6]), np.array([7]), np.array([8, 9])], query_ids=query_ids)
    return SimpleNamespace(
        data=SimpleNamespace(label_names=["neg", "pos"]),
        vocab=SimpleNamespace(decode=lambda ids: [f"w{i}" for i in ids]),
        split=lambda name: split,
    )


def test_the_text_follows_the_instances_id_and_labels_read_as_class_names():
    frame = pd.DataFrame({"index": [2, 0], "uid": ["c", "a"], "label": [1, 0], "prediction": [0, 0], "tau": [0.5, 1]})
    table = readable(frame, toy_data())
    assert list(table.columns) == ["index", "uid", "text", "label", "prediction", "tau"]
    assert table["text"].tolist() == ["w8 w9", "w4 w5 w6"]  # the rows' own instances (index 2, 0)
    assert table["label"].tolist() == ["pos", "neg"] and table["prediction"].tolist() == ["neg", "neg"]
    assert list(frame.columns) == ["index", "uid", "label", "prediction", "tau"]  # the family's frame untouched


def test_without_an_id_the_text_follows_the_index_and_a_pair_tasks_query_follows_the_text():
    frame = pd.DataFrame({"index": [1], "label": [0], "prediction": [1]})
    table = readable(frame, toy_data(query_ids=[np.array([1]), np.array([2, 3]), np.array([4])]))
    assert list(table.columns) == ["index", "text", "query", "label", "prediction"]
    assert table.iloc[0].tolist() == [1, "w7", "w2 w3", "neg", "pos"]
