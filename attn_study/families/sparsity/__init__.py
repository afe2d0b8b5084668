"""Meister et al. (2021), Is Sparse Attention more Interpretable?.

One test family: ``analysis=sparsity``; see docs/sparsity.md."""
