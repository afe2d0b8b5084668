"""The metric-key schema shared by every family: how a key is built and read (no torch here).

A key is a ``/``-joined path ``<namespace>/<statistic>/…/<stat>``:

- ``train/``, ``val/``, ``test/``, ``data/``, ``run/``: training, model selection and the run itself;
- one namespace per test family, declared in its ``families/<name>/keys.py`` (``jw/`` Jain & Wallace,
  ``ss/`` Serrano & Smith, ``sp/`` Meister et al., ``sc/`` Bai et al., ``ff/`` ERASER, ``wp/`` Wiegreffe &
  Pinter, ``ag/`` agreement between methods, ``sn/`` randomisation sanity checks;
  ``attn_study.families.FAMILIES`` lists them all);
- a mean comes with its 95 % bootstrap interval: ``…/mean``, ``…/ci_low``, ``…/ci_high``;
- per predicted class, ``class_<k>`` comes before the last part: ``jw/tau_grad/class_1/mean``;
- a family's statistics tracked during training are its keys under ``val/``: ``val/jw/tau_grad/mean``.

Families build their keys with the functions below and the report parses them with the same functions,
so the two cannot drift apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

TRAINING_NAMESPACES = ("train", "val", "test", "data", "run")
DURING_TRAINING = "val"


def key(*parts) -> str:
    """``key('jw', 'tau_grad', 'mean')`` → ``jw/tau_grad/mean`` (``None`` / empty parts are skipped)."""
    return "/".join(str(p) for p in parts if p is not None and p != "")


def class_part(k: int | None) -> str | None:
    return None if k is None else f"class_{int(k)}"


def namespace(name: str) -> str:
    return name.split("/", 1)[0]


def during_training(name: str) -> str:
    """The key of a family statistic measured on the dev subsample while training: ``val/<key>``."""
    return key(DURING_TRAINING, name)


_CLASS = re.compile(r"^class_(\d+)$")


def classes(summary: Iterable[str], stem: str) -> list[int]:
    """The predicted classes with keys ``<stem>/class_<k>/…`` in ``summary``."""
    found = set()
    for name in summary:
        if name.startswith(stem + "/"):
            match = _CLASS.match(name[len(stem) + 1 :].split("/", 1)[0])
            if match:
                found.add(int(match.group(1)))
    return sorted(found)


def children(summary: Iterable[str], stem: str) -> list[str]:
    """The distinct path parts right after ``<stem>/`` in ``summary``'s keys, sorted."""
    return sorted({name[len(stem) + 1 :].split("/", 1)[0] for name in summary if name.startswith(stem + "/")})


def disagreement_of(family_keys, where: str) -> tuple[tuple[str, str], ...]:
    """A family's ``keys.py`` (the module ``family_keys``, at ``where``) DISAGREEMENT as (column, "low" | "high")
    pairs; () when it declares none. Any other end is refused."""
    declared = tuple((str(column), str(end)) for column, end in getattr(family_keys, "DISAGREEMENT", ()))
    odd = [end for _, end in declared if end not in ("low", "high")]
    if odd:
        raise ImportError(f"{where}: DISAGREEMENT ends {odd}: 'low' or 'high'")
    return declared


def first_present(disagreement: Iterable[tuple[str, str]], columns) -> tuple[str, str] | None:
    """The first (column, "low" | "high") of a family's ``DISAGREEMENT`` whose column is among ``columns`` (a
    per-instance frame's): the measure its instances are sorted by, most disagreeing first; None for none."""
    present = set(columns)
    return next((pair for pair in disagreement if pair[0] in present), None)
