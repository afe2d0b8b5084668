"""One job of attn-study or attn-study-analyze: its plan (``plan.py``: the config checked once, its data, model and
the runs it stands on built once; ``components.py`` builds from ``_target_``, ``checks.py`` what the schema cannot
see), its lifecycle (``run.py``, with its state in ``status.json``: ``state.py``), one attempt (``attempt.py``:
train, test, analyse), analysing again (``analyze.py``, ``pretrained.py``), and what they share: a finished run read
back (``saved.py``), the loggers, the summary, the memory peak, stopping on a signal."""
