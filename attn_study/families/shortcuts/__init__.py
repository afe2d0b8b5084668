"""Bai et al. (2021), Why Attentions May Not Be Interpretable?.

One test family: ``analysis=shortcuts``; see docs/shortcuts.md."""
