"""The test families, one folder each, found by looking: nothing here names a family.

A family ``<name>`` is the folder ``attn_study/families/<name>/`` (plus ``conf/analysis/<name>.yaml``):

    keys.py      NAMESPACE (its key prefix), ORDER, TRACKED and its key builders — no torch; optionally
                 DISAGREEMENT, the per-instance columns that say an instance disagrees (the explorer, W&B),
                 and HEADLINE_KEYS, its few statistics a team sorts runs by
    callback.py  the measures: an ``attn_study.analysis.callback.AnalysisCallback`` (the YAML's _target_)
    figures.py   its per-run figures (optional)
    report.py    ``sections(runs, work)``: its part of ``attn-study-report`` (optional)

The registry below is derived from the folders, so adding a family touches no other file.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from types import ModuleType

from attn_study import keys


@dataclass(frozen=True)
class Family:
    name: str  # the config option analysis=<name> and a run's folder analysis/<name>/
    namespace: str  # the prefix of its metric keys
    order: int  # its place in the report
    tracked: tuple[str, ...]  # statistics drawn against the epoch when tracked during training
    # (per-instance column, "low" | "high"): the columns by which an instance disagrees most, in preference order
    disagreement: tuple[tuple[str, str], ...] = ()
    # its few statistics a team sorts runs by (W&B's headline/…): its keys.py's HEADLINE_KEYS, else TRACKED
    headline: tuple[str, ...] = ()

    def module(self, part: str) -> ModuleType | None:
        """``families/<name>/<part>.py`` imported, or ``None`` when the family has no such part."""
        try:
            return importlib.import_module(f"{__name__}.{self.name}.{part}")
        except ModuleNotFoundError as err:
            if err.name != f"{__name__}.{self.name}.{part}":
                raise
            return None


def _discover() -> dict[str, Family]:
    found = {}
    for info in pkgutil.iter_modules(__path__):
        if not info.ispkg or info.name.startswith("_"):
            continue
        k = importlib.import_module(f"{__name__}.{info.name}.keys")
        disagreement = keys.disagreement_of(k, f"attn_study/families/{info.name}/keys.py")
        headline = tuple(getattr(k, "HEADLINE_KEYS", k.TRACKED))
        found[info.name] = Family(
            info.name, k.NAMESPACE, int(k.ORDER), tuple(k.TRACKED), disagreement, headline=headline
        )
    owners: dict[str, str] = {}
    for family in found.values():
        taken = owners.get(family.namespace) or (family.namespace in keys.TRAINING_NAMESPACES and "training")
        if taken:
            raise ImportError(
                f"attn_study/families/{family.name}/keys.py: NAMESPACE = {family.namespace!r} is already "
                f"{taken}'s; give each family its own key prefix"
            )
        owners[family.namespace] = family.name
        for what, listed in (("TRACKED", family.tracked), ("HEADLINE_KEYS", family.headline)):
            stray = [k for k in listed if keys.namespace(k) != family.namespace]
            if stray:
                raise ImportError(
                    f"attn_study/families/{family.name}/keys.py: {what} keys outside {family.namespace}/: {stray}"
                )
    return dict(sorted(found.items(), key=lambda item: (item[1].order, item[0])))


#: every family, in report order
REGISTRY: dict[str, Family] = _discover()
#: family name → key namespace
FAMILIES: dict[str, str] = {name: family.namespace for name, family in REGISTRY.items()}
#: family name → statistics drawn against the epoch
TRACKED: dict[str, tuple[str, ...]] = {name: family.tracked for name, family in REGISTRY.items() if family.tracked}
#: every family's headline statistics (W&B's ``headline/`` namespace), in report order
HEADLINE_KEYS: tuple[str, ...] = tuple(k for family in REGISTRY.values() for k in family.headline)


def disagreement(family: str, columns) -> tuple[str, str] | None:
    """(column, "low" | "high"): the first of ``family``'s ``DISAGREEMENT`` columns among ``columns`` (a per-instance
    frame's), by which its instances are sorted most disagreeing first; None when it declares none of them."""
    known = REGISTRY.get(family)
    return keys.first_present(known.disagreement if known else (), columns)


def family_of(name: str) -> str | None:
    """The family whose namespace the key ``name`` is under (``jw/tau_grad/mean`` → ``jain_wallace``)."""
    space = keys.namespace(name)
    return next((f for f, ns in FAMILIES.items() if ns == space), None)


def is_analysis_key(name: str) -> bool:
    """Whether ``name`` belongs to a test family (``jw/…``, ``ss/…``), not to training."""
    return family_of(name) is not None


def tracked_key(name: str) -> str | None:
    """``val/jw/tau_grad/mean`` → ``jw/tau_grad/mean``; ``None`` for keys that are not tracked statistics."""
    head, _, rest = name.partition("/")
    return rest if head == keys.DURING_TRAINING and is_analysis_key(rest) else None
