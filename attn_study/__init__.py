"""attn_study: train the attention models of the interpretability literature and test their attention."""

from attn_study.config import register_resolvers

__version__ = "0.1.0"

# Hydra resolves sweep job directories and W&B job types with these resolvers, also inside launcher
# worker processes, which import this package when they unpickle the job function.
register_resolvers()
