"""A family's numeric options checked where its callback reads them: refused in one line (``UserError``) naming the
option, in the words every other numeric option of the config is refused in (``attn_study.ranges``)."""

from __future__ import annotations

from attn_study import ranges
from attn_study.errors import UserError


def checked(option: str, value, allowed) -> None:
    """A one-line ``UserError`` naming ``option`` when ``value`` is outside ``allowed`` (an ``attn_study.ranges``
    range): a family's options are refused as every other numeric option of the config is, in the same words."""
    ranges.require(option, value, UserError, allowed)


def whole(option: str, value, low: int = 1, optional: bool = False) -> int | None:
    """``value``, a whole number ≥ ``low`` (null allowed when ``optional``): ``abc``, ``1.5`` and ``2.0`` are
    refused, never read as something else."""
    checked(option, value, ranges.whole(low, optional=optional))
    return None if value is None else int(value)


def finite(option: str, value, low: float = 0.0) -> float:
    """``value``, a finite number ≥ ``low`` — a learning rate, a penalty's weight, a scale: NaN, an infinity and a
    word are refused."""
    checked(option, value, ranges.number(low))
    return float(value)


def probability(option: str, value) -> float:
    """``value`` in (0, 1) — a significance level, a threshold."""
    checked(option, value, ranges.number(0, 1, above=True, below=True))
    return float(value)
