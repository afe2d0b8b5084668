"""What a family may need of a model beyond the stages of ``protocol.StagedModel`` — attention over tokens, a soft
attention —, declared in its callback's ``NEEDS`` and refused in one line before any work."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from attn_study.models.selector import hard_selection


@dataclass(frozen=True)
class Capability:
    """Something a model may lack: ``present(model)``, and what a model without it has instead (``{model}``: the
    model's class name)."""

    present: Callable[[object], bool]
    lacking: str


#: α is over the input tokens (not a hierarchical model's sentences)
TOKEN_ATTENTION = Capability(
    lambda model: getattr(model, "token_attention", True), "{model}'s final attention is over sentences"
)
#: α is a distribution the model computes (not a selector's hard choice of k tokens)
SOFT_ATTENTION = Capability(
    lambda model: not hard_selection(model), "a selector's attention is its k selected tokens, all tied"
)

#: α pools the text's tokens (not fixed on a classification token: ``attention=cls``, a wrapped pretrained classifier)
POOLING_ATTENTION = Capability(
    lambda model: getattr(model, "pooling_attention", True),
    "{model}'s attention is fixed on its classification token ([CLS]), on no token of the text",
)


@dataclass(frozen=True)
class Need:
    """A family's need of a model: the ``capability``, what the family does with it (``because``: "needs attention
    over tokens", "ranks tokens") and what to use ``instead`` (another family, another model)."""

    capability: Capability
    because: str
    instead: str

    def refusal(self, family: str, model) -> str | None:
        """The one line that refuses ``model`` for ``family``, None when the model has the capability:
        ``analysis=<family> <because>, and <what the model has instead>; use <instead>``."""
        if self.capability.present(model):
            return None
        lacking = self.capability.lacking.format(model=type(model).__name__)
        return f"analysis={family} {self.because}, and {lacking}; use {self.instead}"
