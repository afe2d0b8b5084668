"""Wiegreffe & Pinter (2019), Attention is not not Explanation: the family's metric keys, under ``wp/``.

No torch here: the registry and the report read it."""

from __future__ import annotations

from attn_study.keys import children, class_part, classes, key  # noqa: F401  the generic schema, for this family

NAMESPACE = "wp"
ORDER = 60  # the family's place in the report (its sections come in ORDER)


def wp(*parts) -> str:
    """``wp('jsd', 'mean')`` → ``wp/jsd/mean``."""
    return key(NAMESPACE, *parts)


TRACKED: tuple[str, ...] = ()

#: the per-instance column by which an instance disagrees most (the explorer's ★, W&B's coloured sample): this
#: model's attention far from the base run's (JSD)
DISAGREEMENT = (("jsd", "high"),)
#: the statistics a team sorts runs by (W&B's headline/…): how far this run's attention is from the base's, and
#: how often their predictions agree
HEADLINE_KEYS = (wp("jsd", "mean"), wp("tvd", "mean"), wp("agreement"))
#: the explorer's columns shown at first (beside the ★ one): the headline measures per instance → their headers
INSTANCE_HEADLINE = {
    "jsd": "JSD(α, base α)",
    "tvd": "TVD(output, base output)",
    "same_prediction": "same prediction as the base",
}
#: the explorer's page name and one-line definition of each per-token score it records but attention (tokens.parquet)
TOKEN_METHODS = {"base_attention": ("base attention", "α_t of the base run (analysis.wiegreffe_pinter.base)")}
