"""Interpretability tests: measures, importance, and one module per test family."""
