"""Faithfulness: ERASER's metrics (DeYoung et al., 2020).

One test family: ``analysis=faithfulness``; see docs/faithfulness.md."""
