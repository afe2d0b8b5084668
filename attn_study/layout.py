"""The run directory's layout: every file and folder name a run writes and other code reads, in one place.

<run>/
  .hydra/config.yaml, overrides.yaml, hydra.yaml   the run's record of its config (written once an attempt starts)
  status.json                                      running → complete | failed (attn_study.job.state)
  .attn-study.lock                                 locked by the process running an attempt (attn_study.job.state)
  summary.json                                     every final metric, flat
  error.txt                                        the traceback of a failed attempt
  checkpoints/best.ckpt, last.ckpt                 the tested checkpoint; the resume point while training
  attention.parquet                                each test instance's attention and output (flat and pair runs)
  analysis/<family>/                               instances.parquet, tokens.parquet, summary.json, figures, epochs.*
  csv/, wandb/                                     the loggers' files (an attn-study-analyze's CSV: csv/analyze_<n>/)
  analyze/<time>/cli.log                           the log of each attn-study-analyze of the run
  report/                                          attn-study-report's output, when the run is a report's root
"""

from __future__ import annotations

from pathlib import Path

RECORD = ".hydra"
CONFIG, OVERRIDES, HYDRA = "config.yaml", "overrides.yaml", "hydra.yaml"
STATUS, SUMMARY, ERROR = "status.json", "summary.json", "error.txt"
CLAIM = ".attn-study.lock"
CHECKPOINTS, BEST, LAST = "checkpoints", "best.ckpt", "last.ckpt"
ATTENTION = "attention.parquet"
ANALYSIS = "analysis"
INSTANCES = "instances.parquet"  # and SUMMARY, inside analysis/<family>/
TOKENS = "tokens.parquet"  # each instance's text and per-token importances, inside analysis/<family>/
#: tokens.parquet's columns of text (the instance's uid, its tokens, a pair task's query); every other is a method's
TOKENS_TEXT = ("uid", "tokens", "query", "words")
EPOCHS_CSV, EPOCHS_PARQUET, EPOCHS_FIGURE = "epochs.csv", "epochs.parquet", "epochs.png"
CSV, WANDB, REPORT = "csv", "wandb", "report"
ANALYZE_LOGS = "analyze"
#: an unfinished attempt's outputs, removed before the next attempt starts (the record and the logs stay)
ATTEMPT_OUTPUTS = (SUMMARY, ERROR, ANALYSIS, CSV, WANDB, CHECKPOINTS)
#: folders inside a run that are never runs themselves (what a search for runs skips)
NOT_RUNS = frozenset({".submitit", WANDB, ANALYSIS, CHECKPOINTS, CSV, REPORT, RECORD, ANALYZE_LOGS})


def config_file(run_dir: Path) -> Path:
    return Path(run_dir) / RECORD / CONFIG


def overrides_file(run_dir: Path) -> Path:
    return Path(run_dir) / RECORD / OVERRIDES


def family_dir(run_dir: Path, family: str) -> Path:
    return Path(run_dir) / ANALYSIS / family


def token_methods(columns) -> list[str]:
    """The importance methods of a ``tokens.parquet`` with ``columns``: each has a score per token."""
    return [c for c in columns if c not in TOKENS_TEXT]


def run_of(path: Path) -> Path:
    """The run directory a ``ckpt_path`` names: the directory itself, or the run that holds the ``.ckpt`` file
    (in its ``checkpoints/`` or beside it)."""
    path = Path(path).expanduser().resolve()
    if path.is_dir():
        return path
    return path.parent.parent if path.parent.name == CHECKPOINTS else path.parent


def is_run(path: Path) -> bool:
    """Whether ``path`` is a run directory (it holds the record of a config)."""
    return config_file(path).is_file()
