"""User-facing errors: one line that names the file or option and the fix."""


class UserError(Exception):
    """A mistake in the user's input (path, option, file contents).

    The CLI prints ``str(error)`` as a single line and exits with status 2 instead of a stack trace.
    """


class DataError(UserError):
    """A dataset, archive or embeddings file that is missing, corrupt, or empty."""


class TrainingDiverged(UserError):
    """Training produced a non-finite or exploded loss: the run's numbers cannot be trusted."""
