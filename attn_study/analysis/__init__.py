"""What every test family uses: the callback that runs a family (``callback``), the model and data it may
touch (``protocol``), the importance methods (``importance``), the erasures (``erasure``), the statistics
(``measures``) and the per-instance random draws (``seeding``). The families themselves are in
``attn_study.families``."""
