"""attn_study: train the attention models of the interpretability literature and test their attention."""

__version__ = "0.1.0"
