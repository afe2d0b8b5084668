"""Serrano & Smith (2019), Is Attention Interpretable?.

One test family: ``analysis=serrano_smith``; see docs/serrano_smith.md."""
