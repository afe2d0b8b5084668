"""The instance explorer: each family's ``tokens.parquet`` (the text and per-token scores it computed), the page
``attn-study-report`` writes (driven in headless Chromium: sorting, filtering, an instance's coloured copies, a
run moved elsewhere, a run with nothing per instance, runs side by side), its encoding, and the coloured cells of
the W&B table (read back from the real offline W&B run)."""

from __future__ import annotations

import base64
import json
import re
import shutil
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from omegaconf import OmegaConf

from attn_study.analysis import token_scores
from attn_study.analysis.token_scores import TokenScores, wandb_rows
from attn_study.families.jain_wallace.callback import JainWallace
from attn_study.figures.tokens import NEGATIVE, POSITIVE, colour, coloured_text_html, shades
from attn_study.io import write_json_atomic
from attn_study.job.run import run as run_job
from attn_study.report import explorer
from attn_study.report.cli import build_report
from attn_study.report.runs import collect
from tests.browser import browser_page
from tests.helpers import TINY, compose_config
from tests.wandb_records import offline_runs, run_tables

ANALYSED = [
    *TINY,
    "logger=[wandb,csv]",
    "encoder=average",
    "encoder.hidden_size=8",
    "analysis=[jain_wallace,serrano_smith,sparsity]",
    "analysis.jain_wallace.steps=30",
    "analysis.jain_wallace.permutations=10",
]
FAMILIES = ("jain_wallace", "serrano_smith", "sparsity")
#: (family, method recorded in its tokens.parquet) → the copy's name on the page (the families' keys.TOKEN_METHODS)
PAGE_NAMES = {
    **{(family, "attention"): "attention" for family in FAMILIES},
    ("jain_wallace", "gradient"): "gradient (J&W)",
    ("jain_wallace", "loo"): "loo TVD",
    ("jain_wallace", "adversarial"): "adversarial",
    ("serrano_smith", "gradient"): "∂d/∂α",
    ("serrano_smith", "grad_attention"): "α · ∂d/∂α",
    **{("sparsity", m): m for m in ("g_input", "loo_input", "g_intermediate", "loo_intermediate")},
}
#: the W&B table's coloured rows in the tiny run: the 3 most disagreeing and 2 drawn (of 32)
MOST, RANDOM = 3, 2


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    """One tiny run analysed by three families, logged to W&B (offline) and CSV, and its report."""
    run_dir = tmp_path_factory.mktemp("explorer") / "run"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(token_scores, "WANDB_MOST", MOST)
        patch.setattr(token_scores, "WANDB_RANDOM", RANDOM)
        run_job(compose_config(*ANALYSED), run_dir)
    build_report(run_dir)
    return run_dir


def instances(run_dir, family="jain_wallace") -> pd.DataFrame:
    return pd.read_parquet(run_dir / "analysis" / family / "instances.parquet")


def tokens(run_dir, family="jain_wallace") -> pd.DataFrame:
    return pd.read_parquet(run_dir / "analysis" / family / "tokens.parquet").set_index("uid")


# -- in the browser --------------------------------------------------------------------------------------------


def open_page(page, path) -> list[str]:
    """Go to ``path``, refusing every request but the page's own; returns the list the requests are recorded in."""
    requests = []

    def route(request_route):
        requests.append(request_route.request.url)
        if request_route.request.url == path.as_uri():
            request_route.continue_()
        else:
            request_route.abort()

    page.route("**/*", route)
    page.goto(path.as_uri())
    return requests


def cells(page, key: str) -> list[str]:
    return page.eval_on_selector_all(f"tbody tr.row td[data-key='{key}']", "tds => tds.map(t => t.textContent)")


def count(page) -> str:
    return page.text_content("#count")


def as_number(text: str) -> float:
    return float("nan") if text == "—" else float(text)


def rgba(css: str) -> tuple[tuple[int, int, int], float]:
    """``rgb(r, g, b)`` / ``rgba(r, g, b, a)`` → ((r, g, b), a)."""
    parts = [float(p) for p in re.findall(r"[\d.]+", css)]
    return tuple(int(p) for p in parts[:3]), parts[3] if len(parts) == 4 else 1.0


COPIES = """() => [...document.querySelectorAll('#instance .copy')].map(c => ({
    method: c.dataset.method, run: c.dataset.run, source: c.querySelector('.src').textContent,
    tokens: [...c.querySelectorAll('.tok')].map(t => t.textContent),
    colours: [...c.querySelectorAll('.tok')].map(t => getComputedStyle(t).backgroundColor)}))"""


def assert_coloured(copy: dict, values) -> None:
    """Each token's background: opacity |v_t| / max |v| (to the page's 1/254 and the browser's 1/255: Chromium
    keeps an 8-bit alpha), blue when v_t > 0, orange when v_t < 0."""
    expected = shades(values)
    assert len(copy["colours"]) == len(expected)
    for css, shade in zip(copy["colours"], expected):
        rgb, alpha = rgba(css)
        assert alpha == pytest.approx(abs(shade), abs=1 / 254 + 1 / 255 + 1e-3), (copy["method"], css, shade)
        if abs(shade) > 0.01:
            assert rgb == (POSITIVE if shade > 0 else NEGATIVE), (copy["method"], css, shade)


def test_the_page_sorts_filters_and_colours_each_method_on_its_own_scale(analysed):
    path = analysed / "report" / "explorer.html"
    jw = instances(analysed)
    n, wrong = len(jw), jw.loc[jw["prediction"] != jw["label"], "uid"]
    assert 0 < len(wrong) < n
    with browser_page(width=1280) as page:
        requests = open_page(page, path)
        assert count(page) == f"{n} of {n} instances"

        # by τ_g up and down; by ΔJS (negative, and small enough to be written 1.2e-6); by the fraction of a random
        # ranking removed to flip (missing where it never flips; a column shown from the chooser): as numbers,
        # missing last
        ss = instances(analysed, "serrano_smith")
        assert ss["random_frac"].isna().any() and not page.is_visible("th[data-key='serrano_smith/random_frac']")
        page.click("#chooser summary")
        page.check("#column-list input[data-key='serrano_smith/random_frac']")
        page.click("#chooser summary")
        for key, values, descending in (
            ("jain_wallace/tau_grad", jw["tau_grad"], False),
            ("jain_wallace/tau_grad", jw["tau_grad"], True),
            ("serrano_smith/delta_js", ss["delta_js"], False),
            ("serrano_smith/random_frac", ss["random_frac"], False),
        ):
            page.click(f"thead tr.names th[data-key='{key}']")
            shown = [as_number(t) for t in cells(page, key)]
            expected = sorted(values, key=lambda v: (np.isnan(v), -v if descending else v))
            assert len(shown) >= 20
            np.testing.assert_allclose(shown, expected[: len(shown)], rtol=1e-3, err_msg=key)  # the page: 4 digits

        page.select_option("select[data-key='correct']", "0")
        assert count(page) == f"{len(wrong)} of {n} instances"
        assert set(cells(page, "correct")) == {"✗"}
        assert set(cells(page, "uid")) == set(wrong)
        page.fill("thead input[data-key='jain_wallace/tau_grad']", ">0")
        assert set(cells(page, "uid")) == set(jw.loc[(jw["prediction"] != jw["label"]) & (jw["tau_grad"] > 0), "uid"])
        page.click("#reset")
        assert count(page) == f"{n} of {n} instances"

        uid = cells(page, "uid")[0]
        page.click("tbody tr.row >> nth=0")
        assert page.get_attribute("#instance", "data-uid") == uid
        copies = {c["method"]: c for c in page.evaluate(COPIES)}
    assert page.console_errors == []
    assert requests == [path.as_uri()]  # nothing but the file itself: no network, no other file

    # the same attention from three families is shown once; each other method under the name its family gives it
    assert set(copies) == set(PAGE_NAMES.values())
    assert copies["attention"]["source"] == "from jain_wallace, serrano_smith, sparsity"
    for family in FAMILIES:
        recorded = tokens(analysed, family).loc[uid]
        for method in [c for c in recorded.index if c != "tokens"]:
            label = PAGE_NAMES[family, method]
            assert copies[label]["tokens"] == list(recorded["tokens"])
            assert_coloured(copies[label], recorded[method])


def test_the_columns_shown_at_first_are_each_familys_measures_that_vary(analysed):
    """On the trained run: shown at first are the uid, the text, the base columns and, per family, its ★ column and
    its keys.INSTANCE_HEADLINE columns — each only where its values in instances.parquet are not all one value (nor
    all missing)."""
    from attn_study.families import REGISTRY

    def varies(values: pd.Series) -> bool:
        return values.dropna().nunique() > 1

    jw = instances(analysed)  # the first family: the base columns' values
    expected = ["uid", "text"]
    expected += [c for c in ("label", "prediction", "probability") if varies(jw[c])]
    expected += ["correct"] if varies(jw["prediction"] == jw["label"]) else []
    expected += ["length"] if varies(jw["length"]) else []
    for family in FAMILIES:
        frame, keys = instances(analysed, family), REGISTRY[family].module("keys")
        star = next(c for c, _ in keys.DISAGREEMENT if c in frame)
        expected += [
            f"{family}/{c}"
            for c in frame.columns
            if (c == star or c in keys.INSTANCE_HEADLINE) and c not in explorer.BASE and varies(frame[c])
        ]
    with browser_page(width=1280) as page:
        open_page(page, analysed / "report" / "explorer.html")
        shown = page.eval_on_selector_all("thead tr.names th", "ths => ths.map(t => t.dataset.key)")
        uids, texts = cells(page, "uid"), cells(page, "text")
    assert page.console_errors == []
    assert shown == expected
    assert any("sparsity/entropy_" in key for key in shown)  # a family's headline columns are there
    recorded = tokens(analysed)
    assert len(texts) >= 20
    for uid, text in zip(uids, texts):
        whole = " ".join(recorded.loc[uid, "tokens"])
        assert text == (whole if len(whole) <= 80 else whole[:79] + "…")


def test_the_page_opens_from_a_copy_of_the_run_elsewhere(analysed, tmp_path):
    copy = tmp_path / "elsewhere" / "moved-run"
    shutil.copytree(analysed, copy)
    text = (copy / "report" / "explorer.html").read_text()
    assert str(analysed) not in text and str(analysed.parent) not in text  # no absolute path to the run
    away = analysed.with_name(analysed.name + "-away")
    analysed.rename(away)  # the original is gone while the copy is open
    try:
        with browser_page(width=1280) as page:
            path = copy / "report" / "explorer.html"
            requests = open_page(page, path)
            page.click("tbody tr.row >> nth=0")
            uid = page.get_attribute("#instance", "data-uid")
            copies = page.evaluate(COPIES)
        assert page.console_errors == []
        assert requests == [path.as_uri()]
    finally:
        away.rename(analysed)
    assert uid == instances(analysed)["uid"].iloc[0]  # split order
    assert len(copies) == 10 and all(c["tokens"] == list(tokens(analysed).loc[uid, "tokens"]) for c in copies)


def empty_run(root, name="empty", dataset="synthetic"):
    """A complete run directory of a model trained and tested with analysis=[]: no per-instance rows."""
    run = root / name
    (run / ".hydra").mkdir(parents=True)
    names = dict(dataset=dataset, model="flat", encoder="lstm", attention="additive", projection="softmax")
    OmegaConf.save(
        OmegaConf.create({k: {"name": v} for k, v in names.items()} | {"seed": 1, "analysis": {}}),
        run / ".hydra" / "config.yaml",
    )
    write_json_atomic(run / "status.json", {"state": "complete", "finished": 1.0, "labels": ["neg", "pos"]})
    write_json_atomic(run / "summary.json", {"test/acc": 0.5})
    return run


def test_a_run_without_families_says_there_is_nothing_per_instance(tmp_path):
    run = empty_run(tmp_path)
    out = build_report(run)
    with browser_page(width=1280) as page:
        page.goto((out / "explorer.html").as_uri())
        assert page.is_visible("#nothing") and not page.is_visible("#explorer")
        message = page.text_content("#nothing")
    assert page.console_errors == []
    assert "Nothing per instance" in message and "analysis=[]" in message


def second_run(analysed, root):
    """A copy of ``analysed`` with another seed whose τ_g is 1 higher and whose attention is squared (renormalised)."""
    other = root / "seed-2"
    shutil.copytree(analysed, other, ignore=shutil.ignore_patterns("report", "wandb"))
    config = OmegaConf.load(other / ".hydra" / "config.yaml")
    config.seed = 2
    OmegaConf.save(config, other / ".hydra" / "config.yaml")
    jw = instances(other)
    jw["tau_grad"] += 1
    jw.to_parquet(other / "analysis" / "jain_wallace" / "instances.parquet")
    for family in FAMILIES:
        table = tokens(other, family)
        table["attention"] = [np.square(a) / np.square(a).sum() for a in table["attention"]]
        table.reset_index().to_parquet(other / "analysis" / family / "tokens.parquet")
    return other


def test_the_same_instance_across_runs_side_by_side(analysed, tmp_path):
    other = second_run(analysed, tmp_path)
    runs = [collect(analysed)[0][0], collect(other)[0][0]]
    written = dict(explorer.sections(runs, tmp_path / "report"))
    pages = sorted(p.relative_to(tmp_path / "report").as_posix() for p in (tmp_path / "report").rglob("*.html"))
    assert len(pages) == 3 and "explorer/across-synthetic.html" in pages  # and a page per run
    assert all(f"href='{p}'" in written["Instances"] for p in pages)
    path = tmp_path / "report" / "explorer" / "across-synthetic.html"
    jw = instances(analysed)
    with browser_page(width=1280) as page:
        open_page(page, path)
        keys = page.eval_on_selector_all("thead tr.names th", "ths => ths.map(t => t.dataset.key)")
        assert {
            "label",
            "r1:prediction",
            "r2:prediction",
            "r1:jain_wallace/tau_grad",
            "r2:jain_wallace/tau_grad",
        } <= set(keys)
        first = jw["uid"].iloc[0]
        page.click(f"tbody tr.row[data-uid='{first}']")
        runs_shown = page.eval_on_selector_all("#instance h3", "hs => hs.map(h => h.textContent)")
        numbers = {
            key: page.text_content(f"#instance .numbers td[data-key='{key}']")
            for key in ("r1:jain_wallace/tau_grad", "r2:jain_wallace/tau_grad")
        }
        copies = page.evaluate(COPIES)
    assert page.console_errors == []
    assert runs_shown == [r.name for r in runs]
    second = float(numbers["r1:jain_wallace/tau_grad"]) + 1  # to the page's 4 digits
    assert float(numbers["r2:jain_wallace/tau_grad"]) == pytest.approx(second, rel=1e-3)
    attention = {c["run"]: c for c in copies if c["method"] == "attention"}
    assert_coloured(attention["0"], tokens(analysed).loc[first, "attention"])
    assert_coloured(attention["1"], tokens(other).loc[first, "attention"])


# -- the page's data -------------------------------------------------------------------------------------------


def page_data(path) -> dict:
    text = path.read_text()
    found = re.search(r'<script type="application/json" id="explorer-data">(.*?)</script>', text, re.S)
    return json.loads(found.group(1))


def decoded(data: dict, method: dict, i: int) -> np.ndarray:
    """Scores of ``method`` for instance ``i`` as the page holds them: shade · full-colour value (NaN: missing)."""
    q = np.frombuffer(base64.b64decode(method["codes"][i]), dtype="<i1").astype(float)
    return np.where(q == explorer.MISSING_SHADE, np.nan, q / data["levels"] * method["scales"][i])


def test_the_page_holds_texts_as_ids_and_scores_to_a_254th_of_their_largest(analysed):
    data = page_data(analysed / "report" / "explorer.html")
    recorded = tokens(analysed)
    (adversarial,) = [m for m in data["methods"] if m["label"] == "adversarial"]
    for i, uid in enumerate(data["uids"]):
        ids = np.frombuffer(base64.b64decode(data["texts"][i]), dtype="<u2")
        assert [data["vocab"][k] for k in ids] == list(recorded.loc[uid, "tokens"])
        truth = recorded.loc[uid, "adversarial"]
        if np.isnan(truth).all():  # no adversary within ε
            assert adversarial["codes"][i] is None
            continue
        top = np.nanmax(np.abs(truth))
        np.testing.assert_allclose(decoded(data, adversarial, i), truth, atol=top / 254 + 1e-3 * top)


def test_more_than_65536_distinct_tokens_take_four_bytes_each():
    words = [f"w{k}" for k in range(70_000)]
    vocab, width, encoded = explorer._encoded_texts([words[:3], words, None])
    assert width == 4 and len(vocab) == 70_000 and encoded[2] is None
    ids = np.frombuffer(base64.b64decode(encoded[1]), dtype="<u4")
    assert [vocab[k] for k in ids] == words


def test_a_missing_score_and_a_missing_method_stay_missing(tmp_path):
    scores = pd.Series([np.array([1.0, np.nan, -4.0]), None, np.array([np.nan, np.nan])])
    method = {"label": "m", "definition": "d", "families": ["f"], "run": 0, "scores": scores}
    shade = explorer._encoded_methods([method])[0]
    q = np.frombuffer(base64.b64decode(shade["codes"][0]), dtype="<i1").tolist()
    assert q == [32, explorer.MISSING_SHADE, -127] and shade["scales"] == [4, None, None]
    assert shade["codes"][1:] == [None, None]  # not computed; missing throughout (no adversary within ε)


# -- what the families record ------------------------------------------------------------------------------------


def test_the_families_record_their_scores_on_the_text_they_measured(analysed):
    """tokens.parquet's scores are the ones each family measured with: attention sums to 1 over the text and its
    largest weight is max_attention; the chosen adversary is missing exactly where none was within ε."""
    jw, recorded = instances(analysed).set_index("uid"), tokens(analysed)
    assert list(recorded.index) == list(jw.index)
    for uid, row in recorded.iterrows():
        assert len(row["tokens"]) == jw.at[uid, "length"]
        assert sum(row["attention"]) == pytest.approx(1, abs=1e-5)
        assert max(row["attention"]) == pytest.approx(jw.at[uid, "max_attention"], rel=1e-5)
        assert np.isnan(row["adversarial"]).all() == (jw.at[uid, "adv_feasible"] == 0)


class Words:
    def decode(self, ids):
        return [f"t{i}" for i in ids]


def test_token_scores_keep_the_texts_tokens_a_sentences_score_and_a_query():
    batch = {
        "ids": torch.tensor([[1, 5, 6, 7, 2, 0], [1, 8, 2, 0, 0, 0]]),
        "mask": torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]], dtype=torch.bool),
        "token_mask": torch.tensor([[0, 1, 1, 1, 0, 0], [0, 1, 0, 0, 0, 0]], dtype=torch.bool),
        "index": torch.tensor([3, 0]),
        "query_ids": torch.tensor([[9, 9], [4, 0]]),
        "query_mask": torch.tensor([[1, 1], [1, 0]], dtype=torch.bool),
        "sentence_ids": torch.tensor([[0, 0, 1, 1, 1, -1], [0, 0, 0, -1, -1, -1]]),
    }
    kept = TokenScores()
    kept.add(batch, a=torch.tensor([[9.0, 1, 2, 3, 9, 0], [9, 4, 9, 0, 0, 0]]), skipped=None)
    kept.add(batch, sentences=True, s=torch.tensor([[0.25, 0.75], [1.0, 0.0]]))
    assert kept.ids[3].tolist() == [5, 6, 7] and kept.ids[0].tolist() == [8]
    assert kept.scores["a"][3].tolist() == [1, 2, 3] and kept.scores["a"][0].tolist() == [4]
    assert kept.scores["s"][3].tolist() == [0.25, 0.75, 0.75] and "skipped" not in kept.scores
    assert kept.query[0].tolist() == [4]
    frame = pd.DataFrame({"index": [0, 3, 7], "uid": ["u0", "u3", "u7"]})
    data = type("Data", (), {"vocab": Words()})()
    table = kept.table(frame, data)
    assert table["tokens"].tolist() == [["t8"], ["t5", "t6", "t7"], None]
    assert table["query"].tolist() == [["t4"], ["t9", "t9"], None]
    assert table["a"].iloc[2] is None and table["a"].iloc[1].tolist() == [1, 2, 3]
    with pytest.raises(ValueError, match="shape"):
        kept.add(batch, wrong=torch.zeros(2, 5))
    with pytest.raises(ValueError, match="named"):
        kept.add(batch, tokens=torch.zeros(2, 6))


# -- the colour scale, and W&B ---------------------------------------------------------------------------------


def test_each_copy_is_shaded_by_its_largest_absolute_score():
    np.testing.assert_allclose(shades([1.0, -2.0, 0.5, np.nan]), [0.5, -1.0, 0.25, np.nan])
    np.testing.assert_allclose(shades([0.0, 0.0]), [0.0, 0.0])
    assert colour(0.25) == f"rgba({POSITIVE[0]}, {POSITIVE[1]}, {POSITIVE[2]}, 0.250)"
    assert colour(-1.0) == f"rgba({NEGATIVE[0]}, {NEGATIVE[1]}, {NEGATIVE[2]}, 1.000)"
    assert colour(float("nan")) == "transparent"
    cell = coloured_text_html(["<b>", "ok"], {"attention": [0.2, 0.8]})
    assert "&lt;b&gt;" in cell and "<b>" not in cell
    assert f"background-color: {colour(0.25)}" in cell and f"background-color: {colour(1.0)}" in cell
    with pytest.raises(ValueError, match="2 tokens"):
        coloured_text_html(["a", "b"], {"attention": [1.0]})


def test_wandb_colours_the_most_disagreeing_first_then_a_seeded_sample():
    frame = pd.DataFrame({"uid": list("abcdef"), "tau_grad": [0.5, np.nan, -0.9, 0.1, -0.2, 0.7]})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(token_scores, "WANDB_MOST", 2)
        patch.setattr(token_scores, "WANDB_RANDOM", 2)
        pairs = JainWallace.DISAGREEMENT
        chosen = wandb_rows(frame, pairs)
        assert chosen[:2] == [2, 4] and len(chosen) == 4 and set(chosen[2:]) <= {0, 1, 3, 5}
        assert wandb_rows(frame, pairs) == chosen
        high = wandb_rows(frame.rename(columns={"tau_grad": "adv_emax_jsd"}), pairs)
        assert high[:2] == [5, 0]
        assert wandb_rows(frame, ()) == sorted(wandb_rows(frame, ()))  # no measure: only the seeded sample


def test_a_large_wandb_table_colours_the_20_most_disagreeing_and_20_more_as_the_docs_say():
    """docs/explorer.md: the 20 most disagreeing by the family's ★ column, then 20 drawn at random: of 100 rows whose
    τ_g is its position, rows 0–19 first, then 20 others."""
    frame = pd.DataFrame({"uid": [f"u{i}" for i in range(100)], "tau_grad": np.arange(100.0)})
    chosen = wandb_rows(frame, JainWallace.DISAGREEMENT)
    assert chosen[:20] == list(range(20)) and len(chosen) == 40 and len(set(chosen[20:]) - set(range(20))) == 20


def test_a_table_smaller_than_the_sample_colours_each_row_once():
    """Fewer rows than the most-disagreeing plus the random sample: every row is chosen, none twice."""
    frame = pd.DataFrame({"uid": list("abcd"), "tau_grad": [0.5, -0.9, 0.1, 0.3]})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(token_scores, "WANDB_MOST", 1)
        patch.setattr(token_scores, "WANDB_RANDOM", 10)
        chosen = wandb_rows(frame, JainWallace.DISAGREEMENT)
    assert chosen[0] == 1 and sorted(chosen) == [0, 1, 2, 3]


def test_the_wandb_table_carries_coloured_text_for_a_bounded_sample(analysed):
    (wandb_run,) = offline_runs(analysed)
    tables = run_tables(wandb_run)
    (name,) = [k for k in tables if "-jwinstances" in k]  # run-<id>-jwinstances-<suffix>
    table, files = tables[name]
    rows = [dict(zip(table["columns"], row)) for row in table["data"]]
    coloured = [r for r in rows if r["explanations"] is not None]
    assert len(rows) == 32 and len(coloured) == MOST + RANDOM
    jw = instances(analysed)
    lowest = jw.nsmallest(MOST, "tau_grad")["uid"]
    assert set(lowest) <= {r["uid"] for r in coloured}
    recorded = tokens(analysed)
    for row in coloured:
        cell = files[row["explanations"]["path"]].read_text()
        expected = coloured_text_html(
            list(recorded.loc[row["uid"], "tokens"]),
            {m: recorded.loc[row["uid"], m] for m in ("attention", "gradient", "loo", "adversarial")},
        )
        assert expected in cell


def test_a_runs_base_column_missing_in_its_first_family_is_the_next_familys():
    """Instance b has no prediction in the first family's rows (NaN) but has one (1) in the next family's: the page
    shows 1 and derives ``correct`` from it — the first family's gap is neither a value nor a false."""
    first = pd.DataFrame({"uid": ["a", "b"], "label": [0, 1], "prediction": [1.0, np.nan]})
    second = pd.DataFrame({"uid": ["a", "b"], "prediction": [1, 1], "probability": [0.7, 0.6]})
    data = SimpleNamespace(frames={"jain_wallace": first, "sanity": second})
    base = explorer._base(data, pd.Series(["a", "b"]), 2)
    assert {name: column.tolist() for name, column in base.items()} == {
        "label": [0, 1],
        "prediction": [1, 1],
        "probability": [0.7, 0.6],
        "correct": [False, True],
    }


def test_each_runs_file_name_is_its_path_below_the_runs_common_folder_in_safe_characters(tmp_path):
    paths = [tmp_path / "sweep a" / "run 1", tmp_path / "sweep b" / "run/2", tmp_path / "sweep a" / "run 1"]
    runs = [SimpleNamespace(path=path) for path in paths]
    assert explorer._names(runs) == ["sweep_a__run_1", "sweep_b__run__2", "sweep_a__run_1_2"]


def test_across_runs_a_column_the_runs_disagree_on_stays_one_per_run():
    """Two runs of the same instances: their lengths agree (one shared column); their labels differ on b (1 and
    0), so each run keeps its own label column — a shared one would show one run's labels for both."""

    def run(name, labels):
        frame = pd.DataFrame({"uid": ["a", "b"], "label": labels, "prediction": [0, 1], "length": [3, 4]})
        return SimpleNamespace(run=SimpleNamespace(labels=["neg", "pos"], name=name), frames={"jain_wallace": frame})

    rows = [explorer.Row("a", [0, 1], None, None), explorer.Row("b", [0, 1], None, None)]
    columns, meta = explorer._columns([run("one", [0, 1]), run("two", [0, 0])], rows)
    keys = {column["key"] for column in columns}
    assert {"r1:label", "r2:label", "length"} <= keys and not {"label", "r1:length", "r2:length"} & keys
    assert [m["label"] for m in meta] == ["r1:label", "r2:label"]
