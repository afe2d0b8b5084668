"""The raw example every dataset source yields, before tokenisation."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RawExample:
    """One labelled instance as read from a dataset's canonical files.

    ``text`` is the passage (raw, untokenised); ``query`` the second sequence of pair tasks
    (question, hypothesis) or ``None``; ``rationale`` the indices of the label-deciding tokens of
    ``text`` after tokenisation, where the dataset knows them (synthetic tasks), else ``None``.
    ``uid`` identifies the instance within its dataset (file name, line number, …).
    ``candidates`` restricts the answer of a QA instance to these label ids (the entities present
    in a CNN passage), or ``None`` when every label is allowed.
    """

    uid: str
    text: str
    label: int
    query: str | None = None
    rationale: tuple[int, ...] | None = None
    candidates: tuple[int, ...] | None = None


SPLITS = ("train", "dev", "test")
