"""Jain & Wallace (2019), Attention is not Explanation.

One test family: ``analysis=jain_wallace``; see docs/jain_wallace.md."""
