"""What is checked of a dataset before training: errors for data no model can learn from, warnings
(recorded in ``status.json`` and ``summary.json``) for data whose numbers would be misleading."""

from __future__ import annotations

import logging

import numpy as np

from attn_study.errors import DataError

log = logging.getLogger(__name__)

#: a dataset whose longest instance has more tokens than this (with no max_length) gets a warning
LONG_INSTANCE = 2000


def check_data(datamodule, max_length: int | None = None) -> tuple[dict, list[str]]:
    """(metrics ``data/unk_rate/<split>``, warnings) of a set-up datamodule; a ``DataError`` for a
    training split with one class or a vocabulary with no word."""
    data = datamodule.data
    name = datamodule.name
    warnings, metrics = [], {}
    train_classes = np.unique(data.splits["train"].labels)
    if len(train_classes) < 2:
        label = data.label_names[int(train_classes[0])] if len(train_classes) else "none"
        raise DataError(
            f"dataset {name}: every training instance has the same label ({label}); nothing can be "
            "learned — check dataset.path and the label column"
        )
    if len(data.vocab) <= 2:
        raise DataError(
            f"dataset {name}: the vocabulary has no word (every token is <unk>); lower dataset.preprocessing.min_count"
        )
    for split in ("dev", "test"):
        if len(np.unique(data.splits[split].labels)) < 2:
            warnings.append(f"the {split} split has one class: its AUROC is undefined (null)")
    for split in ("train", "test"):
        ids = np.concatenate(data.splits[split].ids)  # an empty split is refused when the data are read
        rate = float(np.mean(ids == data.vocab.unk_id))  # a checkpoint's tokenizer has its own unk_id
        metrics[f"data/unk_rate/{split}"] = rate
        if rate > 0.5:
            warnings.append(
                f"{100 * rate:.0f}% of the {split} tokens are <unk> (dataset.preprocessing.min_count="
                f"{datamodule.preprocessing.min_count}): the model sees mostly unknown words"
            )
    if data.stats.get("markers_in_text"):
        warnings.append(
            f"dataset.inject.tokens: {data.stats['markers_in_text']} texts already hold one of the marker "
            "tokens, so the markers are not label-independent (a real word's occurrences can carry the "
            "label); choose tokens that never occur in the text, e.g. the default <m1>, <m2>"
        )
    longest = max(int(data.splits[s].lengths.max()) for s in ("train", "dev", "test"))
    if max_length is None and longest > LONG_INSTANCE:
        lengths = sorted(np.concatenate([data.splits[s].lengths for s in ("train", "dev", "test")]))[-3:][::-1]
        warnings.append(
            f"the longest instances have {', '.join(map(str, lengths))} tokens and no "
            "dataset.preprocessing.max_length or truncate bounds them: time and memory grow with the "
            f"length (T × T for some analyses); batches of {datamodule.batch_size} such instances may be slow"
        )
    for warning in warnings:
        log.warning("dataset %s: %s", name, warning)
    return metrics, warnings


def check_embeddings(coverage: float | None) -> tuple[dict, list[str]]:
    """(``data/embedding_coverage``, warnings) for pretrained vectors covering ``coverage`` of the vocabulary."""
    if coverage is None:
        return {}, []
    warnings = []
    if coverage < 0.5:
        warnings.append(
            f"pretrained embeddings cover {100 * coverage:.1f}% of the vocabulary: most words start from random vectors"
        )
        log.warning(warnings[-1])
    return {"data/embedding_coverage": coverage}, warnings
