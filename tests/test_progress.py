"""What a person sees while a run works: the analyses' progress in a log (a line every 30 s, a line per sub-test
with its seconds) and on a terminal (a bar counted in instances), checked in process with a fake clock or a short
interval."""

from __future__ import annotations

import io
import time

import pytest

from attn_study import progress
from attn_study.families.jain_wallace.callback import JainWallace
from attn_study.progress import Progress, duration, seconds_lines
from tests.helpers import StubData, tiny_model, token_batch


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_in_a_log_a_line_every_30_seconds_with_instances_done_and_time_left():
    clock, out = FakeClock(), io.StringIO()
    bar = Progress("sanity/cascading on test", 1000, interactive=False, stream=out, clock=clock)
    clock.now = 10.0
    bar.update(100)  # 10 s since the start: nothing yet
    clock.now = 31.0
    bar.update(100)  # 200 done in 31 s: 800 left at that rate, 124 s
    clock.now = 45.0
    bar.beat()  # 14 s since the last line
    clock.now = 61.0
    bar.beat()  # the ticker's call: no instance more, the time left counts down from the last batch's estimate
    clock.now = 100.0
    bar.update(800)  # done: the family's own lines follow
    assert out.getvalue().splitlines() == [
        "analysis:  sanity/cascading on test: 200/1000 instances, 31.0 s, about 2 min 04 s left",
        "analysis:  sanity/cascading on test: 200/1000 instances, 1 min 01 s, about 1 min 34 s left",
    ]


def test_with_the_instances_tokens_the_time_left_follows_the_tokens_left():
    """Batches come shortest first: 3 short instances (10 tokens each) in 30 s, the last one 90 tokens long: 90 s
    left at 1 token a second (counted in instances it would say 10 s), on a terminal's bar as in a log."""
    clock, out = FakeClock(), io.StringIO()
    bar = Progress("sparsity/input on test", 4, interactive=False, stream=out, clock=clock, work=120)
    clock.now = 30.0
    bar.update(3, work=30)
    assert bar.left(clock.now) == pytest.approx(90.0)
    assert out.getvalue().splitlines() == [
        "analysis:  sparsity/input on test: 3/4 instances, 30.0 s, about 1 min 30 s left"
    ]
    terminal = Progress("sparsity/input on test", 4, interactive=True, stream=io.StringIO(), clock=clock, work=120)
    with terminal:
        clock.now = 60.0
        terminal.update(3, work=30)
        with terminal.step("gradient"):
            assert terminal.bar.postfix == "about 1 min 30 s left, now gradient"  # from 30 s to 60 s: 1 s a token
    assert Progress("x", 4, interactive=False, clock=clock).left(clock.now) is None  # nothing done yet
    one = Progress("x", 2, interactive=False, clock=clock, work=5)
    clock.now += 2.0
    one.update(1, work=1)  # 1 token in 2 s, 4 to go
    assert one.left(clock.now) == pytest.approx(8.0)
    one.update(1, work=6)  # more tokens than announced: nothing left, not less
    assert one.left(clock.now) == 0.0
    untold = Progress("x", 4, interactive=False, clock=clock, work=100)
    clock.now += 4.0
    untold.update(1)  # a batch without its tokens: per instance, 4 s each
    assert untold.left(clock.now) == pytest.approx(12.0)


def test_the_ticker_speaks_while_one_batch_takes_long():
    out = io.StringIO()
    with Progress("faithfulness/removal on test", 10, interactive=False, every=0.05, stream=out):
        time.sleep(0.5)  # one long batch: no update
    lines = out.getvalue().splitlines()
    assert lines and all(line.startswith("analysis:  faithfulness/removal on test: 0/10 instances, ") for line in lines)


def test_on_a_terminal_a_bar_counted_in_instances():
    out = io.StringIO()
    with Progress("agreement/attention+gradient on test", 1000, interactive=True, stream=out) as bar:
        bar.update(300)
        assert (bar.bar.n, bar.bar.total, bar.bar.unit) == (300, 1000, "inst")
        assert bar.bar.desc.startswith("agreement/attention+gradient on test")
    assert out.getvalue() == ""  # the bar replaces the log's lines


def test_on_a_terminal_the_family_bar_is_erased_when_the_family_ends(capsys):
    """The bar is drawn on stderr and taken away at the end (``leave=False``): the line is blanked and the cursor
    back at its start, no line of it left behind."""
    with Progress("agreement/attention+gradient on test", 4, interactive=True, stream=io.StringIO()) as bar:
        bar.update(4)
    err = capsys.readouterr().err
    assert "agreement/attention+gradient on test" in err  # it was drawn
    assert "\n" not in err and err.split("\r")[-1].strip() == ""


def test_each_step_adds_up_its_seconds_and_counts_each_batch_once():
    """A step's seconds add up over its runs; it counts a batch's instances the first time it ends on that batch
    (a method run under several models in one batch counts it once); a step before the first batch counts none."""
    clock = FakeClock()
    bar = Progress("sanity/cascading on test", 5, interactive=False, stream=io.StringIO(), clock=clock, steps=["a"])
    with bar.step("setup"):
        clock.now += 2.0
    for size in (3, 2):
        bar.begin_batch(size)
        for _ in range(2):  # the same step twice in one batch
            with bar.step("a"):
                clock.now += 1.5
        bar.update(size)
    assert bar.seconds == {"a": 6.0, "setup": 2.0}  # the declared steps first, in their order
    assert bar.step_done == {"a": 5, "setup": 0}


def test_in_a_log_the_line_names_the_step_under_way():
    clock, out = FakeClock(), io.StringIO()
    clock.now = 1000.0  # the clock's zero is not the start
    bar = Progress("faithfulness/removal on test", 10, interactive=False, stream=out, clock=clock, steps=["gradient"])
    bar.begin_batch(4)
    with bar.step("gradient"):
        with bar.step("removal"):
            clock.now = 1031.0
            bar.beat()  # the ticker's call while the inner step runs
        clock.now = 1062.0
        bar.beat()  # back in the outer step
    bar.update(4)
    clock.now = 1093.0
    bar.beat()  # between steps
    assert out.getvalue().splitlines() == [
        "analysis:  faithfulness/removal on test: 0/10 instances, 31.0 s; now removal",
        "analysis:  faithfulness/removal on test: 0/10 instances, 1 min 02 s; now gradient",
        "analysis:  faithfulness/removal on test: 4/10 instances, 1 min 33 s, about 1 min 02 s left",
    ]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_a_bar_per_method_and_sub_test(monkeypatch, tmp_path):
    """A family on a terminal draws, under its own bar, one bar per step (each method, each sub-test) counting
    the instances it has done, with the seconds it took."""
    from attn_study.families.faithfulness.callback import Faithfulness

    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    family = Faithfulness(methods=["attention", "gradient"], tests=["removal", "soft"], batch_size=2, soft_samples=2)
    batch = token_batch([[5, 6, 7, 8], [9, 10, 11], [4, 12, 13, 14, 15]], labels=[0, 1, 0])
    drawn = {}
    exit_bar = Progress.__exit__

    def keep(self, *exc):
        drawn.update({name.strip(): (bar.n, bar.total) for name, bar in ((b.desc, b) for b in self.step_bars.values())})
        return exit_bar(self, *exc)

    monkeypatch.setattr(Progress, "__exit__", keep)
    family.analyse(tiny_model(), StubData(batch), tmp_path)
    assert drawn == {step: (3, 3) for step in ("predict", "attention", "gradient", "removal", "soft")}
    assert "  removal" in terminal.getvalue()


def test_a_family_counts_its_instances_tokens_for_the_time_left(monkeypatch, tmp_path):
    """The family's progress knows the tokens of the instances it analyses (4 + 3 + 5) and is told each batch's;
    a family whose work per instance is quadratic in its length counts the squares."""
    seen = []
    exit_bar = Progress.__exit__

    def keep(self, *exc):
        seen.append((self.work, self.work_done))
        return exit_bar(self, *exc)

    monkeypatch.setattr(Progress, "__exit__", keep)
    batch = token_batch([[5, 6, 7, 8], [9, 10, 11], [4, 12, 13, 14, 15]], labels=[0, 1, 0])
    JainWallace(tests=["correlation"], batch_size=1).analyse(tiny_model(), StubData(batch), tmp_path)
    assert seen == [(12.0, 12.0)]
    # a family whose work per instance is T × T (the sparsity family's) counts Σ T²: 16 + 9 + 25
    quadratic = type("Quadratic", (JainWallace,), {"QUADRATIC": True})
    quadratic(tests=["correlation"], batch_size=1).analyse(tiny_model(), StubData(batch), tmp_path / "q")
    assert seen[1] == (50.0, 50.0)


def test_durations_read_as_a_person_says_them():
    assert [duration(s) for s in (4.24, 59.96, 65, 3599, 3725)] == [
        "4.2 s",
        "1 min 00 s",
        "1 min 05 s",
        "59 min 59 s",
        "1 h 02 min",
    ]
    assert seconds_lines("jw on test", 3, 125.0, {"predict": 1.0, "adversarial": 120.5}) == [
        "analysis:  jw on test: 3 instances in 2 min 05 s",
        "analysis:    predict      1.0 s",
        "analysis:    adversarial  2 min 00 s",
    ]


def test_a_family_reports_each_batch_in_a_log_and_each_sub_test_with_its_seconds(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(progress, "EVERY", 0.0)  # a line per batch
    family = JainWallace(tests=["correlation", "permutation"], batch_size=1, permutations=3)
    batch = token_batch([[5, 6, 7, 8], [9, 10, 11], [4, 12, 13, 14, 15]], labels=[0, 1, 0])
    family.analyse(tiny_model(), StubData(batch), tmp_path)
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("analysis:  jain_wallace on test: 1/3 instances, ") for line in lines), lines
    assert any(line.startswith("analysis:  jain_wallace on test: 2/3 instances, ") for line in lines), lines
    at = lines.index(next(line for line in lines if line.startswith("analysis:  jain_wallace on test: 3 instances in")))
    assert [line.split()[1] for line in lines[at + 1 : at + 4]] == ["predict", "correlation", "permutation"]


def test_the_training_bar_has_ended_when_the_analyses_start():
    """Rich's live display holds back what others write to the terminal (the analyses' bars appeared only once
    done): the training bar ends it with the test loop, before the callbacks after it — the analyses — run."""
    import lightning as L
    from lightning.pytorch.demos.boring_classes import BoringModel

    from attn_study.progress import training_bar

    bar, seen = training_bar(), {}
    if not hasattr(bar, "progress"):
        pytest.skip("Rich is not installed: Lightning's tqdm bar holds nothing back")

    class Analysis(L.Callback):
        def on_test_end(self, trainer, pl_module):
            seen["live"] = bar.progress is not None and bar.progress.live.is_started

    trainer = L.Trainer(
        max_epochs=1, limit_test_batches=1, callbacks=[bar, Analysis()], logger=False, enable_checkpointing=False
    )
    trainer.test(BoringModel(), verbose=False)
    assert seen == {"live": False}


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (0.0, "0.0 s"),
        (59.94, "59.9 s"),  # rounds to 59.9: still seconds
        (59.95001, "1 min 00 s"),  # would read "60.0 s": a minute is said in minutes
        (59.96, "1 min 00 s"),
        (60, "1 min 00 s"),
        (60.4, "1 min 00 s"),
        (60.6, "1 min 01 s"),
        (119.6, "2 min 00 s"),
        (3599.4, "59 min 59 s"),
        (3599.6, "1 h 00 min"),  # 3600 s once rounded: an hour
        (3600, "1 h 00 min"),
        (3659, "1 h 00 min"),
        (3661, "1 h 01 min"),
    ],
)
def test_a_duration_at_each_boundary_reads_in_the_larger_unit_once_it_rounds_to_it(seconds, said):
    """Below a minute one decimal of seconds, below an hour minutes and seconds, then hours and minutes — each unit
    chosen by the rounded value, so no duration reads "60.0 s" or "60 min 00 s"."""
    assert duration(seconds) == said


def test_the_time_left_counts_down_through_a_batch_and_reads_0_once_all_are_done():
    """Batches of 100 instances, 10 s each: while the next runs, the time left falls second by second from what the
    finished ones predict (it does not swell with time no finished batch has paid for: 90 s left at 10 s, not 180 s
    at 20 s); once the last is done it is 0, whatever the work announced."""
    clock = FakeClock()
    bar = Progress("faithfulness on test", 1000, interactive=False, stream=io.StringIO(), clock=clock, work=1000)
    clock.now = 10.0
    bar.update(100, work=100)
    assert bar.left(10.0) == pytest.approx(90.0)
    assert [bar.left(t) for t in (12.0, 15.0, 19.0)] == pytest.approx([88.0, 85.0, 81.0])
    clock.now = 20.0
    bar.update(100, work=100)
    assert bar.left(20.0) == pytest.approx(80.0)
    assert bar.left(500.0) == 0.0  # a batch far slower than the others: 0, never negative
    clock.now = 30.0
    bar.update(800, work=700)  # the last batch, its work short of the total: done is done
    assert bar.left(30.0) == 0.0 and bar.left(31.0) == 0.0


def test_the_family_bar_keeps_its_columns_beside_a_long_label_and_time_left():
    out = Terminal()
    bar = Progress("faithfulness/removal+rationale+soft on test", 10, interactive=True, stream=out)
    bar.bar.close()
    from tqdm import tqdm

    from attn_study.progress import BAR

    drawn = tqdm(total=10, desc=bar.label, file=out, ncols=120, bar_format=bar.bar.bar_format)
    drawn.set_postfix_str("about 3 min 10 s left, now integrated_gradients")
    drawn.update(5)
    drawn.refresh()
    line = out.getvalue().split("\r")[-1]
    assert BAR >= 20 and line.count("#") + line.count(" ") >= BAR and "|" in line
    cells = line.split("%|", 1)[1].split("|", 1)[0]
    assert len(cells) == BAR, line
