"""What every test family uses: the callback that runs a family (``callback``: the base class and its measuring loop;
``measuring``, ``batch_size``, ``checks``, ``folder`` and ``logged`` its parts), the model and data it may touch
(``protocol``) and what else it may need of a model (``needs``), the importance methods (``importance``), a
Transformer's layer attention (``aggregation``), the erasures (``erasure``), the per-token scores kept
(``token_scores``) and the per-instance random draws (``seeding``). The statistics are ``attn_study.stats``, below
it; the families themselves are in ``attn_study.families``."""
