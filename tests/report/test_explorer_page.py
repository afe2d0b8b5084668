"""The instance explorer on runs written by hand (each file as a family writes it, every number chosen here): rows
paired by uid *and* text across runs, labels and predictions that disagree kept apart, the text column, the
columns shown at first, the methods' page names and definitions, hostile text (a ``</script>`` token, a title
with markup, a right-to-left override) and a 1,000,000-token instance, in headless Chromium where a browser
draws it."""

from __future__ import annotations

import json
import re
import time

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

from attn_study import layout
from attn_study.families import REGISTRY
from attn_study.io import write_json_atomic
from attn_study.report import explorer
from attn_study.report.runs import collect
from tests.browser import browser_page

LABELS = ["negative", "positive"]


def written_run(root, name, texts, *, seed=1, dataset="synthetic", families=None):
    """A complete run directory ``root/name`` analysed by the families in ``families`` (name → {"columns":
    per-instance columns beyond the base ones, "scores": method → per-uid scores, "labels", "predictions"}); the
    texts: uid → tokens, or (tokens, query)."""
    run = root / name
    (run / layout.RECORD).mkdir(parents=True)
    names = dict(dataset=dataset, model="flat", encoder="lstm", attention="additive", projection="softmax")
    config = {k: {"name": v} for k, v in names.items()} | {"seed": seed, "analysis": {f: {} for f in families}}
    OmegaConf.save(OmegaConf.create(config), layout.config_file(run))
    write_json_atomic(run / layout.STATUS, {"state": "complete", "finished": 1.0, "labels": LABELS})
    write_json_atomic(run / layout.SUMMARY, {"test/acc": 0.5})
    uids = list(texts)
    words = {u: t[0] if isinstance(t, tuple) else t for u, t in texts.items()}
    for family, parts in families.items():
        folder = layout.family_dir(run, family)
        folder.mkdir(parents=True)
        n = len(uids)
        frame = {
            "index": np.arange(n),
            "uid": uids,
            "label": parts.get("labels", [k % 2 for k in range(n)]),
            "prediction": parts.get("predictions", [0] * n),
            "probability": np.linspace(0.6, 0.9, n),
            "length": [len(words[u]) for u in uids],
        }
        pd.DataFrame(frame | parts.get("columns", {})).to_parquet(folder / layout.INSTANCES)
        table = {"uid": uids, "tokens": [list(words[u]) for u in uids]}
        if any(isinstance(t, tuple) for t in texts.values()):
            table["query"] = [list(t[1]) if isinstance(t, tuple) else None for t in texts.values()]
        scores = parts.get("scores", {"attention": {u: np.full(len(words[u]), 1 / len(words[u])) for u in uids}})
        table |= {m: [np.asarray(by_uid[u], np.float32) for u in uids] for m, by_uid in scores.items()}
        pd.DataFrame(table).to_parquet(folder / layout.TOKENS)
    return run


def runs_of(*paths):
    return [collect(path)[0][0] for path in paths]


def open_page(page, path):
    """Go to ``path`` refusing every other request (no network, no other file)."""
    page.route("**/*", lambda route: route.continue_() if route.request.url == path.as_uri() else route.abort())
    page.goto(path.as_uri())


def cells(page, key):
    return page.eval_on_selector_all(f"tbody tr.row td[data-key='{key}']", "tds => tds.map(t => t.textContent)")


def shown_keys(page):
    return page.eval_on_selector_all("thead tr.names th", "ths => ths.map(t => t.dataset.key)")


COPIES = """() => [...document.querySelectorAll('#instance .copy')].map(c => ({
    method: c.dataset.method, run: c.dataset.run, definition: c.querySelector('.copy-head b').title,
    tokens: [...c.querySelectorAll('.tok')].map(t => t.textContent)}))"""


# -- across runs: an instance is its uid and its text ------------------------------------------------------------


def test_a_uid_whose_text_differs_between_runs_is_never_paired(tmp_path):
    """Two seeds of synthetic data: u0 and u3 hold the same text in both runs, u1 the same tokens with another query,
    u2 another text. Expected rows, by hand: u0 (both), u1 (r1), u1 (r2), u2 (r1), u2 (r2), u3 (both)."""
    first = {"u0": (["a", "b"], ["q"]), "u1": (["c", "d"], ["q"]), "u2": (["e", "f", "g"], ["q"]), "u3": (["h"], ["q"])}
    second = first | {"u1": (["c", "d"], ["r"]), "u2": (["x", "y"], ["q"])}
    one = written_run(tmp_path / "runs", "seed-1", first, families={"jain_wallace": {"predictions": [1, 1, 0, 1]}})
    two = written_run(
        tmp_path / "runs", "seed-2", second, seed=2, families={"jain_wallace": {"predictions": [0, 1, 0, 0]}}
    )
    runs = runs_of(one, two)
    (section,) = explorer.sections(runs, tmp_path / "report")
    assert "synthetic: 2 runs, 2 uids with different texts (not paired)" in section[1]
    assert "the same instances" not in section[1]
    path = tmp_path / "report" / "explorer" / "across-synthetic.html"
    with browser_page(width=1280) as page:
        open_page(page, path)
        count = page.text_content("#count")
        notice = page.text_content("#differ") if page.is_visible("#differ") else None
        uids, held, texts = cells(page, "uid"), cells(page, "runs"), cells(page, "text")
        predicted = {k: cells(page, f"r{k}:prediction") for k in (1, 2)}
        page.fill("thead input[data-key='text']", "F G")  # the text column filters by what it contains
        found = (page.text_content("#count"), cells(page, "runs"))
        page.click("#reset")
        shown = {}
        for row in range(6):
            page.click(f"tbody tr.row >> nth={row}")
            names = page.eval_on_selector_all("#instance h3", "hs => hs.map(h => h.textContent)")
            query = page.text_content("#instance .query")
            shown[row] = (names, query, {c["run"]: c["tokens"] for c in page.evaluate(COPIES)})
    assert page.console_errors == []
    assert count == "6 of 6 instances"
    assert notice is not None and notice.startswith("2 of 4 uids hold different texts")
    assert uids == ["u0", "u1", "u1", "u2", "u2", "u3"]
    assert held == ["r1, r2", "r1", "r2", "r1", "r2", "r1, r2"]
    assert texts == ["a b", "c d", "c d", "e f g", "x y", "h"]
    assert found == ("1 of 6 instances", ["r1"])
    # each run's predictions (as class names) on the rows it holds; empty on the rows it does not
    assert predicted[1] == ["positive", "positive", "—", "negative", "—", "positive"]
    assert predicted[2] == ["negative", "—", "positive", "—", "negative", "negative"]
    name = {str(k): run.name for k, run in enumerate(runs)}
    both = [name["0"], name["1"]]
    assert shown[0] == (both, "query: q", {"0": ["a", "b"], "1": ["a", "b"]})
    assert shown[1] == ([name["0"]], "query: q", {"0": ["c", "d"]})
    assert shown[2] == ([name["1"]], "query: r", {"1": ["c", "d"]})
    assert shown[3] == ([name["0"]], "query: q", {"0": ["e", "f", "g"]})
    assert shown[4] == ([name["1"]], "query: q", {"1": ["x", "y"]})
    assert shown[5] == (both, "query: q", {"0": ["h"], "1": ["h"]})


def test_a_run_without_text_joins_the_text_the_others_agree_on(tmp_path):
    """A run analysed before tokens.parquet existed holds no text: it shares the row of a uid whose text the other
    runs agree on, and gets its own row where they do not."""
    texts = {"u0": ["a"], "u1": ["b"]}
    one = written_run(tmp_path, "one", texts, families={"jain_wallace": {}})
    two = written_run(tmp_path, "two", texts, seed=2, families={"jain_wallace": {}})
    three = written_run(tmp_path, "three", texts | {"u1": ["c"]}, seed=3, families={"jain_wallace": {}})
    (layout.family_dir(one, "jain_wallace") / layout.TOKENS).unlink()
    data = explorer.page_data([explorer.RunInstances.read(r) for r in runs_of(one, two, three)])
    assert (data["uids"], data["members"]) == (["u0", "u1", "u1", "u1"], [[0, 1, 2], [1], [2], [0]])
    assert data["differing"] == 1


def test_the_line_above_the_table_names_each_run_by_the_prefix_of_its_columns(tmp_path):
    """With two runs or more, "rK = <run>" tells which run the columns prefixed "rK:" are (K counted from 1, in the
    order the runs are given), with the families each run holds; one run needs no prefix."""
    texts = {"u0": ["a"], "u1": ["b"]}
    one = written_run(tmp_path, "one", texts, families={"jain_wallace": {}})
    two = written_run(tmp_path, "two", texts, seed=2, families={"jain_wallace": {}, "sparsity": {}})
    three = written_run(tmp_path, "three", texts, seed=3, families={})
    star = ". ★ marks the column by which a family's instances disagree most: clicking it sorts the most disagreeing "
    star += "first."
    name = "synthetic flat-lstm-additive-softmax s{}".format
    data = explorer.page_data([explorer.RunInstances.read(r) for r in runs_of(one, two, three)])
    runs = f"r1 = {name(1)}: jain_wallace; r2 = {name(2)}: jain_wallace, sparsity; r3 = {name(3)}: no families"
    assert data["about"] == "2 instances. " + runs + star
    assert [m["prediction"] for m in data["runs"]] == ["r1:prediction", "r2:prediction", None]
    pair = explorer.page_data([explorer.RunInstances.read(r) for r in runs_of(one, two)])
    assert pair["about"] == f"2 instances. r1 = {name(1)}: jain_wallace; r2 = {name(2)}: jain_wallace, sparsity" + star
    alone = explorer.page_data([explorer.RunInstances.read(r) for r in runs_of(two)])
    assert alone["about"] == f"2 instances. {name(2)}: jain_wallace, sparsity" + star


def test_labels_and_predictions_that_disagree_are_never_one_column(tmp_path):
    """Run 2's gold label differs on u1 and its predictions differ: each run keeps its own label and prediction
    columns, with its own values. Where the labels agree they are one column."""
    texts = {f"u{k}": ["w", str(k)] for k in range(4)}
    mine = {"labels": [0, 1, 0, 1], "predictions": [0, 0, 1, 0]}
    theirs = {"labels": [0, 0, 0, 1], "predictions": [1, 0, 1, 0]}
    one = written_run(tmp_path, "one", texts, families={"jain_wallace": mine})
    two = written_run(tmp_path, "two", texts, seed=2, families={"jain_wallace": theirs})
    agreeing = written_run(
        tmp_path, "three", texts, seed=3, families={"jain_wallace": mine | {"predictions": [1, 1, 0, 1]}}
    )
    path = tmp_path / "disagree.html"
    explorer.write_page(runs_of(one, two), path, "disagree")
    with browser_page(width=1280) as page:
        open_page(page, path)
        keys = shown_keys(page)
        values = {key: cells(page, key) for key in ("r1:label", "r2:label", "r1:prediction", "r2:prediction")}
    assert page.console_errors == []
    assert "label" not in keys and {"r1:label", "r2:label", "r1:prediction", "r2:prediction"} <= set(keys)
    assert values == {
        "r1:label": ["negative", "positive", "negative", "positive"],
        "r2:label": ["negative", "negative", "negative", "positive"],
        "r1:prediction": ["negative", "negative", "positive", "negative"],
        "r2:prediction": ["positive", "negative", "positive", "negative"],
    }
    data = explorer.page_data([explorer.RunInstances.read(r) for r in runs_of(one, agreeing)])
    columns = {c["key"]: c for c in data["columns"]}
    assert "label" in columns and "r1:label" not in columns and "r2:label" not in columns
    assert columns["label"]["values"] == [0, 1, 0, 1]
    assert (columns["r1:prediction"]["values"], columns["r2:prediction"]["values"]) == ([0, 0, 1, 0], [1, 1, 0, 1])
    assert (columns["r1:correct"]["values"], columns["r2:correct"]["values"]) == (
        [True, False, False, False],
        [False, True, True, True],
    )


# -- reading: the text column, the columns shown at first, the methods' names -------------------------------------


def test_the_text_preview_is_the_first_80_characters_without_boundary_markers():
    assert explorer._preview(("<sos>", "the", "film", "was", "good", "<eos>")) == "the film was good"
    words = tuple(f"word{k:02d}" for k in range(30))  # 7 characters a word with its space
    # 79 characters: 11 words (76 with their spaces between) and " wo", then the ellipsis
    assert explorer._preview(words) == " ".join(words[:11]) + " wo…"
    assert len(explorer._preview(words)) == 80
    exactly = ("x" * 39, "y" * 40)  # 39 + 1 + 40 = 80 characters: kept whole
    assert explorer._preview(exactly) == "x" * 39 + " " + "y" * 40
    assert explorer._preview(("x" * 81,)) == "x" * 79 + "…"
    assert explorer._preview(None) is None


def test_the_columns_shown_at_first_are_the_familys_measures_that_vary(tmp_path):
    """Jain & Wallace's and faithfulness's columns as they write them, some empty or constant: shown at first are the
    base columns, the ★ columns and the INSTANCE_HEADLINE columns of the keys.py of each family, never one that is
    empty or holds one value. Expected, by hand, from the columns below."""
    n = 4
    varying = np.array([0.1, -0.2, 0.3, 0.4])
    jw = {
        "tau_grad": varying,  # ★ and headline
        "tau_loo": varying + 1,  # headline
        "p_grad": varying,  # neither
        "tau_grad_dropped": [None] * n,  # empty
        "perm_median_tvd": [0.5] * n,  # headline, constant
        "adv_feasible": [2] * n,  # constant, neither
    }
    ff = {
        "attention_constant": [0.0] * n,  # constant
        "gradient_tau_attention": varying,  # ★
        "attention_comp_aopc": varying,  # headline
        "attention_suff_aopc": varying * 2,  # headline
        "loo_comp_aopc": varying * 3,  # headline
        "loo_suff_aopc": [np.nan] * n,  # headline, empty
        "attention_comp_k1": varying,  # neither
    }
    texts = {f"u{k}": ["a", "b"] for k in range(n)}
    families = {"jain_wallace": {"columns": jw, "predictions": [0, 1, 1, 0]}, "faithfulness": {"columns": ff}}
    run = written_run(tmp_path, "run", texts, families=families)
    path = tmp_path / "page.html"
    explorer.write_page(runs_of(run), path, "columns")
    with browser_page(width=1280) as page:
        open_page(page, path)
        keys = shown_keys(page)
        headers = page.eval_on_selector_all("thead tr.names th .name", "s => s.map(t => t.textContent)")
        page.click("#chooser summary")
        chooser = page.eval_on_selector_all("#column-list label", "ls => ls.map(l => l.textContent.trim())")
    assert page.console_errors == []
    assert keys == [
        "uid",
        "text",
        "label",
        "prediction",
        "probability",
        "correct",
        "jain_wallace/tau_grad",
        "jain_wallace/tau_loo",
        "faithfulness/gradient_tau_attention",
        "faithfulness/attention_comp_aopc",
        "faithfulness/attention_suff_aopc",
        "faithfulness/loo_comp_aopc",
    ]  # length is 2 throughout: constant
    assert headers[6:] == [
        "τ(attention, gradient)",
        "τ(attention, loo TVD)",
        "gradient_tau_attention",
        "attention · comp AOPC ↑",
        "attention · suff AOPC ↓",
        "loo Δp · comp AOPC ↑",
    ]
    assert "tau_grad_dropped — empty" in chooser and "attention_constant — constant: 0" in chooser
    assert "permutation: median TVD (perm_median_tvd) — constant: 0.5" in chooser
    assert "length — constant: 2" in chooser


def test_one_stored_name_of_two_meanings_gets_two_page_names_and_definitions(tmp_path):
    """J&W's loo (the output's TVD, ≥ 0) and faithfulness's loo (the signed drop of p(ŷ)) on the same text: two
    copies, each named and defined as its family declares; attention, the same scores in both, is shown once."""
    texts = {"u0": ["good", "not", "bad"]}
    attention = {"u0": [0.5, 0.2, 0.3]}
    jw = {"scores": {"attention": attention, "loo": {"u0": [0.3, 0.1, 0.05]}}}
    ff = {"scores": {"attention": attention, "loo": {"u0": [0.3, -0.1, -0.05]}}}
    run = written_run(tmp_path, "run", texts, families={"jain_wallace": jw, "faithfulness": ff})
    path = tmp_path / "page.html"
    explorer.write_page(runs_of(run), path, "names")
    with browser_page(width=1280) as page:
        open_page(page, path)
        page.click("tbody tr.row >> nth=0")
        copies = {c["method"]: c for c in page.evaluate(COPIES)}
    assert page.console_errors == []
    assert set(copies) == {"attention", "loo TVD", "loo Δp"}
    tvd, drop = copies["loo TVD"]["definition"], copies["loo Δp"]["definition"]
    assert "TVD" in tvd and "unsigned" in tvd
    assert "p(ŷ|x) − p(ŷ|x₋ₜ)" in drop and "signed" in drop
    assert copies["attention"]["definition"] == explorer.ATTENTION[1]


def test_the_families_give_one_page_name_one_meaning():
    """Over the registry: a page name is declared with one definition only (two methods of one stored name but
    different meanings, e.g. J&W's and faithfulness's loo, are named apart), and none but α is named attention."""
    meaning: dict[str, set[str]] = {}
    for family in REGISTRY.values():
        for stored, (name, definition) in getattr(family.module("keys"), "TOKEN_METHODS", {}).items():
            assert stored != "attention" and name != explorer.ATTENTION[0], (family.name, stored)
            meaning.setdefault(name, set()).add(definition)
    assert {name: found for name, found in meaning.items() if len(found) > 1} == {}
    jw, ff = (REGISTRY[f].module("keys").TOKEN_METHODS for f in ("jain_wallace", "faithfulness"))
    assert jw["loo"][0] != ff["loo"][0] and jw["gradient"][0] != ff["gradient"][0]


def test_a_method_its_family_does_not_declare_is_named_after_the_family(tmp_path):
    texts = {"u0": ["a", "b"]}
    scores = {"attention": {"u0": [0.5, 0.5]}, "mystery": {"u0": [1.0, -1.0]}}
    run = written_run(tmp_path, "run", texts, families={"shortcuts": {"scores": scores}})
    data = explorer.page_data([explorer.RunInstances.read(r) for r in runs_of(run)])
    assert [m["label"] for m in data["methods"]] == ["attention", "mystery · shortcuts"]


# -- hostile text ----------------------------------------------------------------------------------------------

HOSTILE = "</script><script>window.pwned = 1</script>"


def test_a_script_closing_token_stays_text(tmp_path):
    run = written_run(tmp_path, "run", {"u0": ["fine", HOSTILE, "<!--"]}, families={"jain_wallace": {}})
    path = tmp_path / "page.html"
    explorer.write_page(runs_of(run), path, "script")
    text = path.read_text()
    # the data's script element and the page's own: each closed once, the page's script last
    assert len(re.findall(r"</script", text, re.I)) == 2
    assert text.rstrip().endswith("})();\n</script>\n</body>\n</html>".rstrip())
    with browser_page(width=1280) as page:
        open_page(page, path)
        count = page.text_content("#count")
        page.click("tbody tr.row >> nth=0")
        shown = page.evaluate(COPIES)
        pwned = page.evaluate("window.pwned")
    assert page.console_errors == []
    assert count == "1 of 1 instances" and pwned is None
    assert shown[0]["tokens"] == ["fine", HOSTILE, "<!--"]


def test_the_title_is_text_whatever_the_run_is_named(tmp_path):
    dataset = '<img src=x onerror="window.pwned = 1"></title><b>&amp;'
    run = written_run(tmp_path, "run", {"u0": ["a"]}, dataset=dataset, families={"jain_wallace": {}})
    (found,) = runs_of(run)
    explorer.sections([found], tmp_path / "report")
    path = tmp_path / "report" / "explorer.html"
    with browser_page(width=1280) as page:
        open_page(page, path)
        title, heading = page.title(), page.text_content("h1")
        elements = page.eval_on_selector_all("h1 *, head img, head b", "es => es.length")
        count, pwned = page.text_content("#count"), page.evaluate("window.pwned")
    assert page.console_errors == []
    expected = f"{found.name} — instances"
    assert found.name.startswith(dataset) and title == expected and heading == expected
    assert elements == 0 and pwned is None and count == "1 of 1 instances"


def test_a_right_to_left_override_in_a_token_reorders_no_other_token(tmp_path):
    """U+202E (right-to-left override) unclosed in the second token: the tokens after it are still drawn left to
    right, in the copies and in the table's text column."""
    words = ["one", "\u202etwo", "three", "four", "five"]
    run = written_run(tmp_path, "run", {"u0": words}, families={"jain_wallace": {}})
    path = tmp_path / "page.html"
    explorer.write_page(runs_of(run), path, "bidi")
    lefts = "(nodes) => nodes.map(n => [Math.round(n.getBoundingClientRect().top), n.getBoundingClientRect().left])"
    with browser_page(width=1280) as page:
        open_page(page, path)
        in_table = page.eval_on_selector_all("tbody tr.row td[data-key='text'] .piece", lefts)
        page.click("tbody tr.row >> nth=0")
        in_copy = page.eval_on_selector_all("#instance .copy .tok", lefts)
    assert page.console_errors == []
    for drawn in (in_table, in_copy):
        assert len(drawn) == len(words) and len({top for top, _ in drawn}) == 1  # one line
        assert all(a < b for (_, a), (_, b) in zip(drawn, drawn[1:])), drawn


# -- a long instance -------------------------------------------------------------------------------------------

LONG = 1_000_000


def test_a_million_token_instance_shows_its_first_tokens_at_once(tmp_path):
    """Selecting a 1,000,000-token instance draws each copy's first CHUNK tokens (bounded: CHUNK spans a copy),
    within 2 s on a loaded 2-core machine (it drew nothing in 240 s when every token was drawn at once); "show
    more" draws the next CHUNK."""
    words = [f"w{k % 5000}" for k in range(LONG)]
    rising = np.arange(LONG, dtype=float) / LONG
    scores = {"attention": {"long": rising}, "loo": {"long": -rising}}
    texts = {"short": ["a", "b"], "long": words}
    scores = {m: by_uid | {"short": [0.5, 0.5]} for m, by_uid in scores.items()}
    run = written_run(tmp_path, "run", texts, families={"jain_wallace": {"scores": scores}})
    path = tmp_path / "page.html"
    explorer.write_page(runs_of(run), path, "long")
    chunk = explorer.CHUNK
    with browser_page(width=1280) as page:
        page.set_default_timeout(30_000)
        open_page(page, path)
        started = time.perf_counter()
        page.click("tbody tr.row[data-uid='long']")
        page.wait_for_selector("#instance .copy .tok", state="visible")
        seconds = time.perf_counter() - started
        drawn = page.evaluate(COPIES)
        spans = page.eval_on_selector_all("#instance .tok", "ts => ts.length")
        button = page.text_content("#instance .copy >> nth=0 >> button.more")
        page.click("#instance .copy >> nth=0 >> button.more")
        more = page.evaluate(COPIES)
        after = page.text_content("#instance .copy >> nth=0 >> button.more")
    assert page.console_errors == []
    assert seconds < 2, seconds
    assert [len(c["tokens"]) for c in drawn] == [chunk, chunk] and spans == 2 * chunk + 5  # + the legend's 5
    assert all(c["tokens"] == words[:chunk] for c in drawn)
    assert button == f"show {chunk} more tokens ({LONG - chunk} not shown)"
    assert more[0]["tokens"] == words[: 2 * chunk] and len(more[1]["tokens"]) == chunk
    assert after == f"show {chunk} more tokens ({LONG - 2 * chunk} not shown)"


def test_the_page_data_is_strict_json_with_every_lt_escaped(tmp_path):
    run = written_run(tmp_path, "run", {"u0": ["<b>", "a"]}, families={"jain_wallace": {}})
    html = explorer.render("t", explorer.page_data([explorer.RunInstances.read(r) for r in runs_of(run)]))
    payload = re.search(r'<script type="application/json" id="explorer-data">(.*?)</script>', html, re.S).group(1)
    assert "<" not in payload and "<b>" in json.loads(payload)["vocab"]
