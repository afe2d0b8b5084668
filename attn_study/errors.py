"""User-facing errors: one line that names the file or option and the fix."""

import logging
import os


class UserError(Exception):
    """A mistake in the user's input (path, option, file contents).

    The CLI prints ``str(error)`` as a single line and exits with status 2 instead of a stack trace.
    """


class DataError(UserError):
    """A dataset, archive or embeddings file that is missing, corrupt, or empty."""


class TrainingDiverged(UserError):
    """Training produced a non-finite or exploded loss: the run's numbers cannot be trusted."""


class RunLogFile(logging.FileHandler):
    """The run's log file (Hydra's job logging, conf/hydra/job_logging/attn_study.yaml), opened when first
    written to; where it cannot be written (a read-only run directory) the lines go nowhere instead of
    ending the process in a traceback before attn-study can say what is wrong."""

    def __init__(self, filename, mode="a", encoding=None):
        super().__init__(filename, mode, encoding, delay=True)

    def _open(self):
        try:
            return super()._open()
        except OSError:
            return open(os.devnull, "w", encoding=self.encoding)
