"""Agreement between explanation methods (Neely et al. 2022): pairwise Kendall τ per instance, under ``ag/``."""
