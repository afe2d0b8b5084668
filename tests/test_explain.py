"""``attn-study-explain``: a text a researcher types is read as the run's dataset reads its texts, and scored as the
families score the test split — the same numbers, for a test instance typed back in, as the faithfulness family
recorded for it (tokens.parquet)."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from attn_study.cli import explain_main
from attn_study.errors import UserError
from attn_study.job.explain import Explained, explain, page, terminal
from tests.helpers import REPO, TINY, cli_env

METHODS = ["attention", "gradient", "loo", "integrated_gradients"]
EXPLAIN = [sys.executable, "-c", "from attn_study.cli import explain_main; explain_main()"]


@pytest.fixture(scope="module")
def trained(trained_runs):
    """A tiny BiLSTM run with the faithfulness family's per-token scores of every method explain shows (trained once
    for the whole pytest run: read, never changed)."""
    options = [
        "analysis=[faithfulness]",
        f"analysis.faithfulness.methods=[{','.join(METHODS)}]",
        "analysis.faithfulness.tests=[removal]",
        "analysis.faithfulness.max_instances=16",
        "analysis.faithfulness.ig_steps=4",  # few steps: another count gives other numbers
    ]
    trained = ["trainer.max_epochs=4", "trainer.limit_train_batches=null", "dataset.source.n_train=600"]
    return trained_runs.get(*TINY, *trained, "logger=none", "encoder=lstm", "encoder.hidden_size=8", *options)


def test_a_test_instance_typed_back_in_gets_the_scores_the_family_recorded(trained):
    tokens = pd.read_parquet(trained / "analysis" / "faithfulness" / "tokens.parquet")
    instances = pd.read_parquet(trained / "analysis" / "faithfulness" / "instances.parquet").set_index("uid")
    rows = tokens.to_dict("records")
    texts = [" ".join(row["tokens"]) for row in rows]
    explained = explain(trained, texts, METHODS, ig_steps=4)
    for row, e in zip(rows, explained):
        assert e.tokens == list(row["tokens"]) and e.unknown == 0
        for method in METHODS:
            np.testing.assert_allclose(e.scores[method], np.asarray(row[method], float), rtol=1e-5, atol=1e-7)
    labels = ["negative", "positive"]
    for row, e in zip(rows, explained):
        assert e.prediction == labels[int(instances.loc[row["uid"], "prediction"])]
        assert e.probability == pytest.approx(float(instances.loc[row["uid"], "probability"]), rel=1e-5)


def test_an_unknown_word_is_read_as_unk_and_counted(trained):
    (e,) = explain(trained, ["zzzqqx good"], ["attention"])
    assert e.tokens[0] == "<unk>" and e.unknown == 1
    assert "1 word not in the run's vocabulary" in terminal([e], colour=False)
    assert sum(e.scores["attention"]) == pytest.approx(1.0)  # α over the text's tokens


def test_a_run_that_wraps_its_texts_in_boundary_tokens_shows_the_typed_words_alone(trained_runs):
    """dataset.preprocessing.boundary_tokens=true: the model reads <sos> w₁ … wₙ <eos>; explain shows the n typed
    words, each with its score (an unknown word first and last: both ends are the text's own)."""
    run_dir = trained_runs.get(
        *TINY, "logger=none", "encoder.hidden_size=8", "dataset.preprocessing.boundary_tokens=true"
    )
    (e,) = explain(run_dir, ["zzzqqx good zzzqqx"], ["attention"])
    assert len(e.tokens) == 3 and e.tokens[0] == e.tokens[-1] == "<unk>" and e.unknown == 2
    assert len(e.scores["attention"]) == 3


def test_the_terminal_paints_each_token_the_colour_the_page_shows_over_white():
    """The page gives a token of shade s the background rgba(r, g, b, |s|) over white, i.e. c·|s| + 255·(1 − |s|) per
    channel (rounded): the terminal paints that colour. Scores 1, 0.6, 0, −0.2 (shades the same: the largest is 1);
    blue (31, 119, 180) for a positive score, orange (230, 97, 1) for a negative one."""
    e = Explained("a b c d", ["a", "b", "c", "d"], "positive", 0.9, {"attention": [1.0, 0.6, 0.0, -0.2]}, 0)
    line = terminal([e], colour=True).splitlines()[1]
    assert re.findall(r"48;2;(\d+);(\d+);(\d+)m(\w)", line) == [
        ("31", "119", "180", "a"),  # all of the colour
        ("121", "173", "210", "b"),  # 31·0.6 + 102 = 120.6, 119·0.6 + 102 = 173.4, 180·0.6 + 102 = 210
        ("255", "255", "255", "c"),  # none: white
        ("250", "223", "204", "d"),  # 230·0.2 + 204 = 250, 97·0.2 + 204 = 223.4, 1·0.2 + 204 = 204.2
    ]


def test_the_terminal_and_the_page_show_every_method_and_escape_the_text(trained):
    (e,) = explain(trained, ["good <b>bad</b>"], ["attention", "gradient"])
    plain = terminal([e], colour=False).splitlines()
    assert plain[0].startswith("'good <b>bad</b>': ") and [line.split()[0] for line in plain[1:]] == [
        "attention",
        "gradient",
    ]
    coloured = terminal([e], colour=True)
    assert "\x1b[" in coloured and "\x1b[0m" in coloured
    html = page([e], trained)
    assert "<b>bad</b>" not in html and "&lt;b&gt;" in html and html.count("full colour") == 2


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["good"], "--methods: unknown bogus"),
        ([], "no text given"),
    ],
)
def test_mistakes_are_one_line(trained, capsys, argv, says):
    with pytest.raises(SystemExit) as exit_:
        explain_main([str(trained), *argv, "--methods", "attention,bogus" if argv else "attention"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0]


def test_integrated_gradients_take_the_steps_given_from_one_up(trained, tmp_path, capsys, monkeypatch):
    """``--ig-steps`` reaches the method as given, 1 (the smallest) included: the terminal shows the scores of
    ``explain(…, ig_steps=1)``, which differ from 50 steps', the default; 0 is refused in one line."""
    with pytest.raises(SystemExit) as exit_:
        explain_main([str(trained), "good movie", "--ig-steps", "0"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip() == "attn-study-explain: error: --ig-steps=0: must be a whole number >= 1"
    page_at = ["--methods", "integrated_gradients", "--out", str(tmp_path / "one.html")]
    explain_main([str(trained), "good movie", "--ig-steps", "1", *page_at])
    shown = capsys.readouterr().out.splitlines()[:2]
    one = explain(trained, ["good movie"], ["integrated_gradients"], ig_steps=1)
    assert shown == terminal(one, colour=False).splitlines()
    fifty = explain(trained, ["good movie"], ["integrated_gradients"], ig_steps=50)
    assert not np.allclose(one[0].scores["integrated_gradients"], fifty[0].scores["integrated_gradients"])
    from attn_study.job import explain as module

    asked = []
    monkeypatch.setattr(module, "explain", lambda run, texts, methods, steps: asked.append(steps) or fifty)
    explain_main([str(trained), "good movie", *page_at[:2], "--out", str(tmp_path / "default.html")])
    assert asked == [50]  # the default


def test_the_page_never_overwrites_a_file(trained, tmp_path, capsys, monkeypatch):
    """A file at --out is refused before the run is loaded, and left as it was."""
    from attn_study.job import explain

    out = tmp_path / "mine.html"
    out.write_text("keep")
    with monkeypatch.context() as patched:
        patched.setattr(explain, "explain", lambda *a: pytest.fail("the run was explained before --out was checked"))
        with pytest.raises(SystemExit):
            explain_main([str(trained), "good", "--methods", "attention", "--out", str(out)])
    assert out.read_text() == "keep" and "the file exists" in capsys.readouterr().err
    explain_main([str(trained), "good", "--methods", "attention", "--out", str(tmp_path / "new.html")])
    assert "page: " in capsys.readouterr().out and (tmp_path / "new.html").is_file()


def test_the_console_entry_point_in_a_fresh_process_explains_and_writes_its_page(trained, tmp_path):
    """``attn-study-explain`` as a user runs it (its one fresh-process test; the others call it in this process): the
    prediction and the method's line on the terminal, the page where --out says, exit 0."""
    out = tmp_path / "page.html"
    done = subprocess.run(
        [*EXPLAIN, str(trained), "good", "--methods", "attention", "--out", str(out)],
        cwd=REPO,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("'good': ") and any(line.split()[:1] == ["attention"] for line in lines)
    assert f"page: {out}" in done.stdout and "good" in out.read_text()


def test_a_run_that_is_not_there_or_not_complete_is_one_line(tmp_path):
    with pytest.raises(UserError, match="run="):
        explain(tmp_path / "nothing", ["good"], ["attention"])
