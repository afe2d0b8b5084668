"""Aggregate many runs into the papers' tables and figures (``attn-study-report``)."""
