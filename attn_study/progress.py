"""What a person sees while a run works: the training bar, and how far each analysis is.

- Training (:func:`training_bar`): Lightning's bar (Rich where installed, else tqdm) without what says nothing —
  the logger's version (``v_num``) and undefined values (NaN) — and with the epoch as the files number it and the
  count of epochs: ``Epoch 0 (1 of 2)``; it ends with the test loop, before the analyses (callbacks after it) draw
  their own.
- Analyses (:class:`Progress`, one per family, counted in instances): on a terminal a tqdm bar with the instances
  done and the time left — from the tokens done and left where the family gives its instances' lengths (batches come
  shortest first, so a count of instances would promise the long ones too soon) —, and under it a bar per step (a
  method or sub-test, :meth:`Progress.step`) with the instances it has done and its seconds; elsewhere (a log file,
  SLURM) a line every :data:`EVERY` seconds with the instances done, the time so far, the time left and the step
  under way. The steps' timer is the family's clock: when a family is done, :func:`seconds_lines` gives a line per
  step with its seconds.
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
import time

from lightning.pytorch.callbacks import RichProgressBar, TQDMProgressBar
from lightning.pytorch.utilities.imports import _RICH_AVAILABLE
from tqdm.auto import tqdm

#: seconds between two progress lines of an analysis in a log (not on a terminal)
EVERY = 30.0
#: what starts every line an analysis prints
PREFIX = "analysis:  "
#: the family bar's width in columns (tqdm would squeeze it to one between a long label and the time left)
BAR = 24


def duration(seconds: float) -> str:
    """``4.2 s``, ``3 min 05 s``, ``1 h 02 min``: the unit that the value, rounded as shown, reaches (59.96 s is
    ``1 min 00 s``, never ``60.0 s``)."""
    if round(seconds, 1) < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {rest:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def epoch_label(epoch: int, max_epochs: int | None) -> str:
    """``Epoch 0 (1 of 2)``: the epoch numbered from 0, as in every file, and which of how many it is."""
    if max_epochs is None or max_epochs < 1:
        return f"Epoch {epoch}"
    return f"Epoch {epoch} ({epoch + 1} of {max_epochs})"


def shown(metrics: dict) -> dict:
    """The bar's metrics without the logger's version (``v_num``) and without undefined (non-finite) values."""
    return {k: v for k, v in metrics.items() if k != "v_num" and not (isinstance(v, float) and not math.isfinite(v))}


class _RichTrainingBar(RichProgressBar):
    def get_metrics(self, trainer, pl_module):
        return shown(super().get_metrics(trainer, pl_module))

    def _get_train_description(self, current_epoch: int) -> str:
        return epoch_label(current_epoch, self.trainer.max_epochs)

    def on_test_end(self, trainer, pl_module) -> None:
        """Rich's display ends with the test loop (Lightning keeps it until teardown): while it is live it holds
        back what others write to the terminal, and the analyses, callbacks after this one, draw their bars."""
        super().on_test_end(trainer, pl_module)
        self._stop_progress()


class _TqdmTrainingBar(TQDMProgressBar):
    def get_metrics(self, trainer, pl_module):
        return shown(super().get_metrics(trainer, pl_module))

    def on_train_epoch_start(self, trainer, *args) -> None:
        super().on_train_epoch_start(trainer, *args)
        self.train_progress_bar.set_description(epoch_label(trainer.current_epoch, trainer.max_epochs))


def training_bar():
    """The training bar (the module docstring): Rich's where it is installed, else tqdm's."""
    return _RichTrainingBar() if _RICH_AVAILABLE else _TqdmTrainingBar()


class Progress:
    """How far ``label`` (``<family>/<sub-tests> on <split>``) is through ``total`` instances, and where the time goes.

    On a terminal (``interactive``; default: standard error is one) a tqdm bar, its clock redrawn every second, and
    a bar per step; else a line to ``stream`` (standard output) at most every ``every`` seconds (:data:`EVERY`),
    from :meth:`update` and from a ticker thread, so that a batch of several minutes still shows the run is alive.
    ``steps`` are the family's steps in the order its summary lists their seconds (a step not named there is added
    when it first runs). ``clock`` is the time source (a test's fake clock). ``work``: the instances' total
    work (their tokens, or squared lengths: ``analysis.measuring.instance_work``); the time left is then elapsed ×
    (work left) / (work done), each batch's work given to :meth:`update`.
    """

    def __init__(
        self,
        label: str,
        total: int,
        interactive=None,
        every=None,
        stream=None,
        clock=time.monotonic,
        steps=(),
        work: float | None = None,
    ):
        self.label, self.total, self.done = label, int(total), 0
        self.work, self.work_done = (float(work) if work else None), 0.0
        self.every = EVERY if every is None else float(every)
        self.stream, self.clock = stream or sys.stdout, clock
        self.started = self.said = self.updated = clock()  # updated: when the last batch ended
        self.seconds: dict[str, float] = dict.fromkeys(steps, 0.0)  # per step, the seconds it took so far
        self.step_done: dict[str, int] = dict.fromkeys(steps, 0)  # per step, the instances it has done
        self.current: str | None = None  # the step under way
        self.batch, self.batches = 0, 0  # instances in the batch under way (what a step counts), batches begun
        self._counted: dict[str, int] = {}  # per step, the last batch it counted
        interactive = sys.stderr.isatty() if interactive is None else interactive
        self.bar = (
            tqdm(
                total=self.total,
                desc=label,
                unit="inst",
                leave=False,
                dynamic_ncols=True,
                # the time left: ours; the bar BAR columns wide, whatever the label and the terminal's width
                bar_format="{l_bar}{bar:" + str(BAR) + "}| {n_fmt}/{total_fmt} inst [{elapsed}{postfix}]",
            )
            if interactive
            else None
        )
        self.step_bars: dict[str, tqdm] = {}
        self._lock, self._stop = threading.RLock(), threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> Progress:
        self._ticker = threading.Thread(target=self._tick, name=f"progress {self.label}", daemon=True)
        self._ticker.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        for bar in reversed(list(self.step_bars.values())):
            bar.close()
        if self.bar is not None:
            self.bar.close()

    def update(self, instances: int, work: float = 0.0) -> None:
        """``instances`` more are done (``work``: theirs, in the unit of the total)."""
        with self._lock:
            self.done += int(instances)
            self.work_done += float(work)
            self.updated = self.clock()
            if self.bar is not None:
                self.bar.update(int(instances))
                self._postfix()
        self.beat()

    def left(self, now: float) -> float | None:
        """Seconds left: the rate of the batches done so far — the seconds until the last of them ended, per unit of
        ``work`` done (tokens, or squared lengths) where it is known, else per instance — times what is left, less the
        seconds the batch under way has taken since (so the time left counts down while a batch runs, instead of
        growing with time no finished batch has paid for yet); 0 once every instance is done, never below; None
        before any batch is done."""
        if self.done >= self.total:
            return 0.0
        if not self.done:
            return None
        paid, under_way = self.updated - self.started, now - self.updated
        if self.work is not None and self.work_done > 0:
            expected = paid / self.work_done * max(self.work - self.work_done, 0.0)
        else:
            expected = paid / self.done * (self.total - self.done)
        return max(expected - under_way, 0.0)

    def _postfix(self) -> None:
        left = self.left(self.clock())
        parts = [f"about {duration(left)} left"] if left is not None else []
        parts += [f"now {self.current}"] if self.current else []
        self.bar.set_postfix_str(", ".join(parts), refresh=False)

    def begin_batch(self, instances: int) -> None:
        """A batch of ``instances`` begins: the steps that run on it count it once."""
        with self._lock:
            self.batch, self.batches = int(instances), self.batches + 1

    @contextlib.contextmanager
    def step(self, name: str):
        """Time ``name`` (a method or sub-test) while the block runs: its seconds add up in ``seconds[name]``, and
        the first time it ends on the batch under way it has done that batch's instances (a step run before the
        first batch, none). While it runs, the bar and the log's lines name it."""
        started = self.clock()
        with self._lock:
            outer, self.current = self.current, name
            if self.bar is not None:
                self._postfix()
        try:
            yield
        finally:
            elapsed = self.clock() - started
            with self._lock:
                count = self.batch if self._counted.get(name) != self.batches else 0
                self._counted[name] = self.batches
                self.current = outer
                self.seconds[name] = self.seconds.get(name, 0.0) + elapsed
                self.step_done[name] = self.step_done.get(name, 0) + count
                if self.bar is not None:
                    self._postfix()
                    self._draw_step(name, count)

    def _draw_step(self, name: str, count: int) -> None:
        bar = self.step_bars.get(name)
        if bar is None and not count:  # a step before the first batch: its seconds are in the summary's lines
            return
        if bar is None:
            width = max(len(step) for step in self.step_done)
            bar = tqdm(  # the step's instances and seconds; the time left is the family bar's (steps interleave)
                total=self.total,
                desc=f"  {name.ljust(width)}",
                bar_format="{desc} {bar} {n_fmt}/{total_fmt} inst{postfix}",
                leave=False,
                dynamic_ncols=True,
                position=len(self.step_bars) + 1,
            )
            self.step_bars[name] = bar
        bar.set_postfix_str(duration(self.seconds[name]), refresh=False)
        bar.update(count)

    def beat(self) -> None:
        """In a log: the progress line, when ``every`` seconds have passed since the last one (or the start)."""
        if self.bar is not None:
            return
        with self._lock:
            now = self.clock()
            if now - self.said < self.every or self.done >= self.total:
                return
            self.said = now
            print(self.line(now), file=self.stream, flush=True)

    def line(self, now: float) -> str:
        """``analysis:  sanity/cascading on test: 320/1000 instances, 1 min 05 s, about 2 min 18 s left; now
        gradient``."""
        text = f"{PREFIX}{self.label}: {self.done}/{self.total} instances, {duration(now - self.started)}"
        left = self.left(now)
        if left is not None:
            text += f", about {duration(left)} left"
        if self.current is not None:
            text += f"; now {self.current}"
        return text

    def _tick(self) -> None:
        pause = 1.0 if self.bar is not None else min(max(self.every / 4, 0.01), 5.0)
        while not self._stop.wait(pause):
            if self.bar is not None:
                with self._lock:
                    self._postfix()
                    for bar in (self.bar, *self.step_bars.values()):
                        bar.refresh()
            else:
                self.beat()


def seconds_lines(label: str, instances: int, wall: float, seconds: dict) -> list[str]:
    """The lines a finished family prints: its instances and ``wall`` seconds, then one line per sub-test with the
    seconds it took (``seconds``, the family's ``Measured.seconds``)."""
    width = max((len(name) for name in seconds), default=0)
    lines = [f"{PREFIX}{label}: {instances} instances in {duration(wall)}"]
    lines += [f"{PREFIX}  {name.ljust(width)}  {duration(value)}" for name, value in seconds.items()]
    return lines
