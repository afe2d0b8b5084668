"""Serrano & Smith (2019), Is Attention Interpretable?: the family's metric keys, under ``ss/``.

No torch here: the registry and the report read it."""

from __future__ import annotations

from collections.abc import Iterable

from attn_study.keys import children, class_part, classes, key  # noqa: F401  the generic schema, for this family

NAMESPACE = "ss"
ORDER = 20  # the family's place in the report (its sections come in ORDER)

RANKINGS = ("attention", "random", "gradient", "grad_attention")
RANKING_LABELS = {
    "attention": "attention",
    "random": "random",
    "gradient": "gradient",
    "grad_attention": "gradient × attention",
}
#: single-weight 2×2 tables: table name → the ranking whose top item i* is erased (Table 2 / Figs 9, 12, 13)
SINGLE_TABLES = {"single": "attention", "single_grad": "gradient", "single_grad_attention": "grad_attention"}
#: cells of a 2×2 flip table: (erasing i* flips?, erasing r flips?)
CELLS = ("yes_yes", "yes_no", "no_yes", "no_no")
CELL_HEADERS = {"yes_yes": "both flip", "yes_no": "only i* flips", "no_yes": "only r flips", "no_no": "neither"}
#: paired comparisons with the attention ranking: key stem of the challenger → ranking
PAIRED = {"grad": "gradient", "grad_attention": "grad_attention"}


def single_flip_columns(table: str) -> tuple[str, str]:
    """Per-instance columns of a single-weight table: (erasing i* flips, erasing r flips), 1.0 / 0.0."""
    suffix = "" if table == "single" else table.removeprefix("single")
    return f"flip_top{suffix}", f"flip_random{suffix}"


def ss_flip_cell(table: str, cell: str) -> str:
    return key(NAMESPACE, table, "flip_table", cell)


def ss_multi(ranking: str, what: str, stat: str | None = None) -> str:
    """``ss_multi('gradient', 'frac_removed', 'median')`` → ``ss/multi/gradient/frac_removed/median``."""
    return key(NAMESPACE, "multi", ranking, what, stat)


def ss_rankings(summary: Iterable[str]) -> list[str]:
    """The multi-weight rankings present in ``summary`` (those with a never-flip count)."""
    summary = list(summary)
    return [r for r in children(summary, key(NAMESPACE, "multi")) if ss_multi(r, "never_flip") in summary]


#: statistics drawn against the epoch when tracked during training (analysis/serrano_smith/epochs.png, the report)
TRACKED = (
    ss_multi("attention", "frac_removed", "median"),
    ss_multi("gradient", "frac_removed", "median"),
    ss_multi("random", "frac_removed", "median"),
    key(NAMESPACE, "multi", "grad_faster_than_attn"),
    ss_flip_cell("single", "yes_no"),
)

#: the per-instance columns by which an instance disagrees most (the explorer's ★, W&B's coloured sample): erasing
#: attention's top item moves the output less than erasing a random one (ΔJS < 0), attention's ranking needing
#: the largest share of the items removed to flip the decision
DISAGREEMENT = (("delta_js", "low"), ("attention_frac", "high"))
#: the explorer's columns shown at first (beside the ★ one): the headline measures per instance → their headers
INSTANCE_HEADLINE = {
    "delta_js": "ΔJS: top item − random item erased",
    "attention_frac": "attention: fraction removed to flip",
    "gradient_frac": "∂d/∂α: fraction removed to flip",
}
#: the explorer's page name and one-line definition of each per-token score it records but attention (tokens.parquet)
TOKEN_METHODS = {
    "gradient": ("∂d/∂α", "∂d/∂α_t, signed: the gradient of the decision d (the largest output probability) by α_t"),
    "grad_attention": ("α · ∂d/∂α", "α_t · ∂d/∂α_t, signed: the attention weight times the decision's gradient"),
}
