"""Wiegreffe & Pinter (2019), Attention is not not Explanation.

One test family: ``analysis=wiegreffe_pinter``; see docs/wiegreffe_pinter.md."""
