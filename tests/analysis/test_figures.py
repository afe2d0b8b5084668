"""Jain & Wallace figures from a per-instance frame, and the self-contained attention heatmap page."""

from __future__ import annotations

import math
import re
import struct
import sys

import numpy as np
import pandas as pd
import pytest

from attn_study.families.jain_wallace.figures import FILENAMES, build_figures, jain_wallace_figures
from attn_study.figures import common
from attn_study.figures.heatmaps import attention_heatmaps_html

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ADV = ["adv_emax_jsd"]


def battery_frame(n: int, n_classes: int, seed: int = 0, nan_frac: float = 0.1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "uid": [f"test-{i}" for i in range(n)],
            "length": rng.integers(1, 60, n),
            "label": rng.integers(0, n_classes, n),
            "prediction": rng.integers(0, n_classes, n),
            "max_attention": rng.uniform(0.02, 1.0, n),
            "tau_grad": rng.uniform(-1, 1, n),
            "p_grad": rng.uniform(0, 1, n),
            "tau_loo": rng.uniform(-1, 1, n),
            "p_loo": rng.uniform(0, 1, n),
            "tau_grad_loo": rng.uniform(-1, 1, n),
            "p_grad_loo": rng.uniform(0, 1, n),
            "perm_median_tvd": rng.exponential(0.03, n),
            "adv_emax_jsd": rng.uniform(0, math.log(2), n),
        }
    )
    for col in ["tau_grad", "perm_median_tvd", "adv_emax_jsd", "max_attention"]:
        frame.loc[rng.random(n) < nan_frac, col] = np.nan
    return frame


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path.name} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def legend_texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]


@pytest.mark.parametrize(
    "n_classes,names", [(2, ["negative", "positive"]), (5, ["very neg", "neg", "neutral", "pos", "very pos"])]
)
def test_all_four_figures_written(tmp_path, n_classes, names):
    df = battery_frame(400, n_classes)
    out = jain_wallace_figures(df, tmp_path / "figs", names, title="SST (test)")
    assert set(out) == set(FILENAMES)
    for key, path in out.items():
        assert path == tmp_path / "figs" / FILENAMES[key] and path.is_file()
        width, height = png_size(path)
        assert width >= 500 and height >= 300
        assert path.stat().st_size > 10_000, f"{key} looks empty"
    assert not list((tmp_path / "figs").glob("*.tmp")), "temporary files left behind"


def test_figure_content_per_class():
    names = ["neg", "pos", "neutral"]
    df = battery_frame(300, 3, seed=1, nan_frac=0.0)
    figs = build_figures(df, names, title="t")
    # Fig. 2: one legend entry per predicted class, with its name and the mean τ of that class
    texts = legend_texts(figs["tau_grad_by_class"])
    assert len(texts) == 3
    for k, name in enumerate(names):
        mean = df.loc[df.prediction == k, "tau_grad"].mean()
        assert any(t.startswith(name) and f"{mean:.3f}" in t for t in texts), (name, mean, texts)
    ax = figs["tau_grad_by_class"].axes[0]
    assert ax.get_xlim() == (-1.0, 1.0)
    assert figs["adv_jsd_by_class"].axes[0].get_xlim() == pytest.approx((0.0, math.log(2)))
    # Figs. 6 and 8: one visible panel per predicted class, max attention on [0, 1]
    for key in ["perm_tvd_vs_max_attention", "adv_jsd_vs_max_attention"]:
        panels = [ax for ax in figs[key].axes if ax.get_visible() and ax.get_title()]
        assert [ax.get_title().split(" (")[0] for ax in panels] == [f"predicted {n}" for n in names]
        assert all(ax.get_ylim() == (0.0, 1.0) for ax in panels)
    assert figs["adv_jsd_vs_max_attention"].axes[0].get_xlim() == pytest.approx((0.0, math.log(2)))


def test_nan_rows_dropped_and_absent_class_skipped():
    df = battery_frame(200, 4, seed=2, nan_frac=0.0)
    df.loc[df.prediction == 2, "prediction"] = 1  # nobody is predicted class 2
    df.loc[:9, "tau_grad"] = np.nan
    figs = build_figures(df, ["a", "b", "c", "d"])
    texts = legend_texts(figs["tau_grad_by_class"])
    assert [t.split(" (")[0] for t in texts] == ["a", "b", "d"]
    counts = {t.split(" (")[0]: int(re.search(r"n=(\d+)", t).group(1)) for t in texts}
    assert sum(counts.values()) == 190
    panels = [ax for ax in figs["adv_jsd_vs_max_attention"].axes if ax.get_visible() and ax.get_title()]
    assert len(panels) == 3


@pytest.mark.parametrize("how", ["absent", "all_nan"])
def test_adversarial_figures_skipped_when_not_run(tmp_path, how):
    df = battery_frame(120, 2)
    if how == "absent":
        df = df.drop(columns=ADV)
    else:
        df[ADV] = np.nan
    out = jain_wallace_figures(df, tmp_path, ["neg", "pos"])
    assert set(out) == {"tau_grad_by_class", "perm_tvd_vs_max_attention"}
    assert not (tmp_path / FILENAMES["adv_jsd_by_class"]).exists()
    assert not (tmp_path / FILENAMES["adv_jsd_vs_max_attention"]).exists()
    for path in out.values():
        png_size(path)


def test_only_correlation_run(tmp_path):
    df = battery_frame(50, 2).drop(columns=["perm_median_tvd", "adv_emax_jsd"])
    assert set(jain_wallace_figures(df, tmp_path, ["neg", "pos"])) == {"tau_grad_by_class"}
    assert jain_wallace_figures(df.drop(columns=["prediction"]), tmp_path / "none", ["neg", "pos"]) == {}


def test_one_row_frame(tmp_path):
    df = battery_frame(1, 2, nan_frac=0.0)
    out = jain_wallace_figures(df, tmp_path, ["neg", "pos"])
    assert set(out) == set(FILENAMES)
    for path in out.values():
        png_size(path)


def test_ten_classes_and_unnamed_class(tmp_path):
    df = battery_frame(600, 10, seed=3)
    # 8, 9 have no name; the adversarial figures share the code of Figs. 2 and 6 (and are slow to draw)
    out = jain_wallace_figures(df.drop(columns=ADV), tmp_path, [f"topic {k}" for k in range(8)])
    assert set(out) == {"tau_grad_by_class", "perm_tvd_vs_max_attention"}
    width, height = png_size(out["perm_tvd_vs_max_attention"])
    assert width > 2 * height  # two rows of five panels
    texts = legend_texts(build_figures(df, [f"topic {k}" for k in range(8)])["tau_grad_by_class"])
    assert any(t.startswith("class 9") for t in texts)


def test_no_pyplot_figures_leak(tmp_path):
    before = len(sys.modules["matplotlib.pyplot"].get_fignums()) if "matplotlib.pyplot" in sys.modules else 0
    out = jain_wallace_figures(
        battery_frame(100, 2)[["prediction", "max_attention", "perm_median_tvd"]], tmp_path, ["neg", "pos"]
    )
    assert set(out) == {"perm_tvd_vs_max_attention"}
    after = len(sys.modules["matplotlib.pyplot"].get_fignums()) if "matplotlib.pyplot" in sys.modules else 0
    assert after == before


def test_class_colours_follow_the_paper_for_two_classes():
    assert common.class_color(0, 2) != common.class_color(1, 2)
    assert len({common.class_color(k, 10) for k in range(10)}) == 10


# ------------------------------------------------------------------------------------------------
# heatmaps
# ------------------------------------------------------------------------------------------------


def example(**over) -> dict:
    ex = {
        "uid": "sst-1",
        "tokens": ["a", "good", "film"],
        "label": "positive",
        "prediction": "positive",
        "probability": 0.973,
        "attention": [0.25, 0.5, 0.25],
        "adversarial": [0.0, 0.1, 0.9],
        "adv_tvd": 0.004,
        "adv_jsd": 0.612,
    }
    ex.update(over)
    return ex


STYLE = re.compile(
    r'<span class="tok[^"]*" style="background-color: rgba\((\d+), (\d+), (\d+), ([0-9.]+)\)" '
    r'title="([^"]*)">(.*?)</span>'
)


def token_rows(text: str) -> list[list[tuple[float, str, str]]]:
    rows = []
    for line in text.splitlines():
        if line.startswith('<div class="row">'):
            rows.append([(float(m.group(4)), m.group(5), m.group(6)) for m in STYLE.finditer(line)])
    return rows


def test_heatmap_escapes_all_text(tmp_path):
    ex = example(
        uid='id<"1">&x',
        tokens=["<script>", "a&b", 'say "hi"', "it's"],
        label="<b>gold</b>",
        prediction="p&q",
        attention=[0.1, 0.2, 0.3, 0.4],
        adversarial=[0.4, 0.3, 0.2, 0.1],
    )
    path = attention_heatmaps_html([ex], tmp_path / "h.html", title="<i>Title</i> & co")
    text = path.read_text(encoding="utf-8")
    for raw in ["<script>", "a&b", 'say "hi"', "<b>gold</b>", "p&q", "<i>Title</i>", 'id<"1">']:
        assert raw not in text, raw
    for escaped in [
        "&lt;script&gt;",
        "a&amp;b",
        "say &quot;hi&quot;",
        "it&#x27;s",
        "&lt;b&gt;gold&lt;/b&gt;",
        "p&amp;q",
        "&lt;i&gt;Title&lt;/i&gt; &amp; co",
        "id&lt;&quot;1&quot;&gt;&amp;x",
    ]:
        assert escaped in text, escaped
    assert [tok for _, _, tok in token_rows(text)[0]] == [
        "&lt;script&gt;",
        "a&amp;b",
        "say &quot;hi&quot;",
        "it&#x27;s",
    ]


def test_heatmap_shading_is_one_scale_for_every_row_of_the_page(tmp_path):
    """Opacity = weight / the page's largest weight (0.7 here), for original and adversarial rows alike."""
    ex = example(tokens=["w", "x", "y", "z"], attention=[0.0, 0.1, 0.2, 0.7], adversarial=[0.6, 0.3, 0.1, 0.0])
    text = attention_heatmaps_html([ex], tmp_path / "h.html", "t").read_text(encoding="utf-8")
    original, adversarial = token_rows(text)
    assert [a for a, _, _ in original] == pytest.approx([0.0, 0.1 / 0.7, 0.2 / 0.7, 1.0], abs=1e-3)
    assert [a for a, _, _ in adversarial] == pytest.approx([0.6 / 0.7, 0.3 / 0.7, 0.1 / 0.7, 0.0], abs=1e-3)
    # exact extremes: full colour for the page's max only, none for a zero weight
    assert text.count("rgba(31, 119, 180, 1.000)") == 1 and "rgba(31, 119, 180, 0.000)" in text
    assert "rgba(214, 39, 40, 1.000)" not in text and "rgba(214, 39, 40, 0.000)" in text
    # tooltips carry the raw weight; the caption names the scale
    assert [float(t) for _, t, _ in original] == pytest.approx([0.0, 0.1, 0.2, 0.7])
    assert "one scale for every row" in text and "largest weight shown here (0.7)" in text


def test_a_near_uniform_attention_is_pale_beside_a_peaked_one(tmp_path):
    """Shading each row to its own maximum showed every token of a near-uniform row dark; on one scale it is
    pale (0.26 / 0.9 of full colour) while the peaked row's top token is full colour."""
    flat = example(uid="flat", tokens=list("abcd"), attention=[0.24, 0.25, 0.25, 0.26], adversarial=None)
    peaked = example(uid="peak", tokens=list("abcd"), attention=[0.9, 0.05, 0.03, 0.02], adversarial=None)
    text = attention_heatmaps_html([flat, peaked], tmp_path / "h.html", "t", chosen="the first 2").read_text()
    first, second = token_rows(text)
    assert max(a for a, _, _ in first) == pytest.approx(0.26 / 0.9, abs=1e-3)
    assert max(a for a, _, _ in second) == 1.0
    assert "Examples: the first 2." in text


def test_heatmap_all_zero_row_has_no_shading(tmp_path):
    text = attention_heatmaps_html([example(attention=[0.0, 0.0, 0.0])], tmp_path / "h.html", "t").read_text()
    assert [a for a, _, _ in token_rows(text)[0]] == [0.0, 0.0, 0.0]


def test_heatmap_without_adversary(tmp_path):
    examples = [example(uid="has-adv"), example(uid="no-adv", adversarial=None, adv_tvd=None, adv_jsd=None)]
    text = attention_heatmaps_html(examples, tmp_path / "h.html", "t").read_text(encoding="utf-8")
    assert text.count("no adversary within ε") == 1
    assert len(token_rows(text)) == 3  # 2 rows + 1 row
    second = text[text.index("no-adv") :]
    assert "Adversarial" not in second and "no adversary within ε" in second


def test_heatmap_is_one_self_contained_document(tmp_path):
    path = attention_heatmaps_html([example(), example(uid="b", adversarial=None)], tmp_path / "sub" / "h.html", "t")
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    assert text.count("<html") == 1 and text.count("</body>") == 1 and "<style>" in text
    low = text.lower()
    for forbidden in ["http://", "https://", "src=", "<script", "<link", "url(", "@import"]:
        assert forbidden not in low, forbidden
    assert [p.name for p in path.parent.iterdir()] == ["h.html"], "temporary file left behind"


def test_heatmap_replaces_existing_file(tmp_path):
    path = tmp_path / "h.html"
    path.write_text("STALE CONTENT")
    attention_heatmaps_html([example(uid="fresh")], path, "t")
    assert "fresh" in path.read_text() and "STALE" not in path.read_text()


def test_heatmap_length_mismatch_is_visible(tmp_path):
    with pytest.warns(UserWarning, match="tokens"):
        text = attention_heatmaps_html([example(tokens=["a", "b", "c", "<eos>"])], tmp_path / "h.html", "t").read_text()
    assert 'class="warn"' in text and [len(r) for r in token_rows(text)] == [3, 3]


def _inside(fig, text) -> bool:
    box = text.get_window_extent(fig.canvas.get_renderer())
    return 0 <= box.x0 and box.x1 <= fig.bbox.width


def test_a_title_wider_than_its_figure_is_wrapped_inside_it(tmp_path):
    """J&W's Fig 4 lost its ')' and Meister's Fig 1 its end: an axes title centred over an axes that long tick
    labels push right, and a figure title longer than a narrow figure. Saved, each is wrapped inside the figure;
    a title that fits is left alone."""
    fig = common.new_figure((7, 2.5))
    ax = fig.add_subplot()
    ax.boxplot([np.arange(5.0), np.arange(3.0)], orientation="horizontal")
    ax.set_yticks([1, 2], ["synthetic / negative (mean +0.12, n=300)", "synthetic / positive (mean -0.05, n=290)"])
    title = "Fig 4: τ(grad, loo) − τ(attn, grad), BiLSTM + additive (softmax)"
    ax.set_title(title, fontsize=10)
    fig.canvas.draw()
    assert not _inside(fig, ax.title)  # as drawn before: the ')' past the edge
    seen = {}
    savefig = fig.savefig

    def capture(handle, **kwargs):
        fig.canvas.draw()
        seen.update(text=ax.title.get_text(), inside=_inside(fig, ax.title))
        savefig(handle, **kwargs)

    fig.savefig = capture
    common.save_png(fig, tmp_path / "fig4.png")
    assert seen["inside"] and seen["text"].replace("\n", " ") == title and "\n" in seen["text"]

    narrow = common.new_figure((5.1, 4.0))
    narrow.add_subplot().set_title("dataset", fontsize=10)
    narrow.suptitle("Fig 1: attention vs feature importance of inputs and of intermediate representations")
    common.fit_titles(narrow)
    narrow.canvas.draw()
    assert _inside(narrow, narrow._suptitle) and narrow.axes[0].title.get_text() == "dataset"


@pytest.mark.parametrize("rows", [1, 2])
def test_panel_rows_draws_two_panels_a_row_titled_by_its_row_with_the_legend_on_the_first(monkeypatch, tmp_path, rows):
    """``panel_rows``: ``rows`` rows of two panels, each drawn once with its own curves and label, in order; the
    legend on the first panel alone."""
    kept = {}

    def keep(fig, path):  # save_png clears the figure: look at it before
        kept["legends"] = [ax.get_legend() is not None for ax in fig.axes]
        kept["titles"] = [ax.get_title() for ax in fig.axes]
        return path

    monkeypatch.setattr(common, "save_png", keep)
    drawn = []

    def draw(ax, curves, xs, label):
        ax.plot(xs, curves, label=label)
        drawn.append((label, curves))

    panels = [(f"row {r}", [0, 1], [(f"left {r}", [r, 1]), (f"right {r}", [1, r])]) for r in range(rows)]
    common.panel_rows(panels, draw, "title", tmp_path / "rows.png")
    assert drawn == [(label, curves) for _, _, row in panels for label, curves in row]
    assert kept["titles"] == [f"row {r}" for r in range(rows) for _ in range(2)]
    assert kept["legends"] == [True] + [False] * (2 * rows - 1)
