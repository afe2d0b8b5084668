"""Each analysed instance's text and the per-token importances a family computed for it: kept batch by batch
(:class:`TokenScores`), written beside the family's per-instance rows as ``analysis/<family>/tokens.parquet``
(one row per instance: ``uid``, ``tokens`` — the text's tokens as the model saw them, no ``<sos>``/``<eos>`` —,
``query`` for a pair task, ``words`` for word pieces (each piece's word: ``data/pieces.py``), and one float32 list
per method, a score per token), and shown as coloured text:
the report's instance explorer reads the file, and the family's W&B table carries the same colouring
(:func:`coloured_cells`) for a bounded number of instances. Nothing here changes what a family measures."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from attn_study import keys
from attn_study.figures.tokens import coloured_text_html
from attn_study.layout import TOKENS_TEXT, token_methods
from attn_study.models.classifier import attended

#: instances of a family's W&B table with coloured text: the most disagreeing by the family's measure
#: (``keys.DISAGREEMENT``), then a random sample of the others (seeded: the same instances every time)
WANDB_MOST, WANDB_RANDOM, WANDB_SEED = 20, 20, 0


@dataclass
class TokenScores:
    """Per instance (by position in the split): its text's token ids, its query's, and per method its scores."""

    ids: dict[int, np.ndarray] = field(default_factory=dict)
    query: dict[int, np.ndarray] = field(default_factory=dict)
    words: dict[int, np.ndarray] = field(default_factory=dict)  # each piece's word (encoder=pretrained: word_ids)
    scores: dict[str, dict[int, np.ndarray]] = field(default_factory=dict)

    def add(self, batch: dict, sentences: bool = False, **scores: torch.Tensor | None) -> None:
        """Keep each instance of ``batch``'s scores (B, T) over its text's tokens (``attended``: no boundary tokens,
        no padding), as float32; ``None`` is skipped. ``sentences``: the scores are (B, S), one per sentence
        (a HAN's attention), and each token gets its sentence's (``batch['sentence_ids']``)."""
        clash = set(scores) & set(TOKENS_TEXT)
        if clash:
            raise ValueError(f"token scores may not be named {sorted(clash)}")
        text = attended(batch)
        kept = {}
        for name, values in scores.items():
            if values is None:
                continue
            values = values.detach()
            if sentences:
                values = values.gather(1, batch["sentence_ids"].clamp_min(0))
            if values.shape != text.shape:
                raise ValueError(f"token scores {name!r}: shape {tuple(values.shape)}, the text's {tuple(text.shape)}")
            kept[name] = values.float().cpu().numpy()
        mask, ids = text.cpu().numpy(), batch["ids"].cpu().numpy()
        if "query_ids" in batch:
            query, query_mask = batch["query_ids"].cpu().numpy(), batch["query_mask"].cpu().numpy()
        words = batch["word_ids"].cpu().numpy() if "word_ids" in batch else None
        for r, i in enumerate(batch["index"].tolist()):
            self.ids[i] = ids[r][mask[r]]
            if words is not None:
                self.words[i] = words[r][mask[r]]
            if "query_ids" in batch:
                self.query[i] = query[r][query_mask[r]]
            for name, values in kept.items():
                self.scores.setdefault(name, {})[i] = values[r][mask[r]]

    def table(self, frame: pd.DataFrame, data) -> pd.DataFrame | None:
        """The file's rows, in the order of ``frame`` (the family's per-instance rows: ``index``, ``uid``): tokens
        decoded by ``data.vocab``; a method not computed for an instance is None there. None when nothing was kept
        or the data has no vocabulary to decode with."""
        vocab = getattr(data, "vocab", None)
        if vocab is None or not self.ids or "index" not in frame or "uid" not in frame:
            return None
        index = frame["index"].astype(int).tolist()

        def decoded(kept: dict) -> list:
            return [vocab.decode(kept[i].tolist()) if i in kept else None for i in index]

        out = {"uid": frame["uid"].tolist(), "tokens": decoded(self.ids)}
        if self.query:
            out["query"] = decoded(self.query)
        if self.words:  # pieces of words (data/pieces.py): each piece's word, so that scores are read per word too
            out["words"] = [self.words[i].tolist() if i in self.words else None for i in index]
        for name, kept in self.scores.items():
            out[name] = [kept[i] if i in kept else None for i in index]
        return pd.DataFrame(out)


def wandb_rows(frame: pd.DataFrame, disagreement=()) -> list[int]:
    """Positions in ``frame`` of the instances a W&B table colours: the :data:`WANDB_MOST` most disagreeing by the
    family's measure (the first of its ``disagreement`` columns present: ``keys.first_present``; missing values
    never chosen), then :data:`WANDB_RANDOM` drawn at random from the rest, in that order."""
    most: list[int] = []
    measure = keys.first_present(disagreement, frame.columns)
    if measure is not None:
        column, end = measure
        values = pd.to_numeric(frame[column], errors="coerce").to_numpy(float)
        finite = np.flatnonzero(np.isfinite(values))
        ordered = finite[np.argsort(values[finite] if end == "low" else -values[finite], kind="stable")]
        most = ordered[:WANDB_MOST].tolist()
    rest = np.setdiff1d(np.arange(len(frame)), most)
    drawn = np.random.default_rng(WANDB_SEED).choice(rest, size=min(WANDB_RANDOM, len(rest)), replace=False)
    return most + sorted(drawn.tolist())


def coloured_cells(frame: pd.DataFrame, table: pd.DataFrame, disagreement=()) -> list[str | None]:
    """Per row of ``frame`` (a family's per-instance rows), its text coloured by each method of ``table``
    (:func:`attn_study.figures.tokens.coloured_text_html`) for the rows :func:`wandb_rows` chooses, None for
    the others."""
    by_uid = table.set_index("uid")
    methods = token_methods(table.columns)
    cells: list[str | None] = [None] * len(frame)
    for row in wandb_rows(frame, disagreement):
        uid = frame["uid"].iloc[row]
        if uid not in by_uid.index or by_uid.at[uid, "tokens"] is None:
            continue
        found = by_uid.loc[uid]
        scores = {m: found[m] for m in methods if found[m] is not None}
        cells[row] = coloured_text_html(list(found["tokens"]), scores)
    return cells
