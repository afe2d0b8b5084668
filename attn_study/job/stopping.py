"""SIGTERM and SIGINT (Ctrl-C) end the process at once, whatever it is doing.

Python runs a signal handler in the main thread between two bytecodes, so a main thread inside one long call of
a compiled library (a training step over 5000-token texts, an analysis's kernel) would hear the signal only when
that call returns: minutes later. Here the signal also wakes a watcher thread: ``signal.set_wakeup_fd`` makes
the C-level handler write the signal's number to a pipe the moment it arrives, and torch releases the GIL in its
kernels, so the watcher runs within milliseconds. Whichever of the two comes first runs the cleanups registered
with :func:`on_stop` (a run marked interrupted, a half-written folder removed), says in one line what happened
and what to do, and ends the process with status 128 + the signal's number.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator

SIGNALS = (signal.SIGTERM, signal.SIGINT)

_cleanups: list[Callable[[str], None]] = []
_stopping = threading.RLock()  # held from the first signal on: the process ends holding it
_said = {"app": "attn_study", "advice": ""}


def install(app: str, advice: str) -> None:
    """From now on SIGTERM and SIGINT stop the process at once with ``<app>: stopped by <SIGNAL>; <advice>``.
    Only the main thread can install signal handlers; elsewhere (a launcher's worker thread) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        return
    _said.update(app=app, advice=advice)
    for signum in SIGNALS:
        signal.signal(signum, lambda signum, _frame: _stop(signum))
    if not any(t.name == "attn-study-signals" for t in threading.enumerate()):
        read, write = os.pipe()
        os.set_blocking(write, False)
        signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        threading.Thread(target=_watch, args=(read,), name="attn-study-signals", daemon=True).start()


@contextlib.contextmanager
def on_stop(cleanup: Callable[[str], None]) -> Iterator[None]:
    """Within the block, a stop first calls ``cleanup(signal name)``. Leaving the block while a stop is under way
    waits for it (the process then ends), so a cleanup never undoes what the code after the block did."""
    _cleanups.append(cleanup)
    try:
        yield
    finally:
        with _stopping:
            _cleanups.remove(cleanup)


def _watch(fd: int) -> None:
    while True:
        try:
            received = os.read(fd, 64)
        except OSError:
            return
        for signum in received:
            if signum in SIGNALS:
                _stop(signum)


def _stop(signum: int) -> None:
    """The cleanups (newest first, each allowed to fail), the line, the exit. A second caller (the other of the
    watcher and the main thread's handler, another signal) waits for the first to end the process."""
    _stopping.acquire()
    name = signal.Signals(signum).name
    for cleanup in reversed(_cleanups):
        with contextlib.suppress(Exception):
            cleanup(name)
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    with contextlib.suppress(Exception):
        print(f"{_said['app']}: stopped by {name}; {_said['advice']}", file=sys.stderr, flush=True)
    os._exit(128 + signum)
