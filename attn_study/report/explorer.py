"""The instance explorer: ``explorer.html``, one self-contained static page per run — and one per group of runs
on the same data, the same instance across them — where every analysed test instance is a row of a table that
sorts and filters by any per-instance column of every family that ran, and selecting an instance shows its text
once per importance method the run computed, each copy coloured by that method (``attn_study.figures.tokens``:
s_t = v_t / max_u |v_u| on the copy's own scale), with the instance's numbers beside it.

What it reads of a run: each family's ``analysis/<family>/instances.parquet`` (its per-instance columns) and
``tokens.parquet`` (each instance's text and per-token scores: ``attn_study/analysis/token_scores.py``).

The table: one row per uid (the union over families and runs, in split order); the columns ``label``,
``prediction``, ``probability``, ``correct`` and ``length`` of each run (the first family's that has them;
``correct`` = prediction == label where no family wrote it), then each family's own columns (★: its
``keys.DISAGREEMENT`` column, by which its instances disagree most). Shown at first: those, the ★ columns and
the first :data:`FIRST_COLUMNS` of each family's; the others under "Columns". Across runs, ``label`` and
``length`` are one column where every run agrees, and each run's columns are named ``r<k> · <family>``.

A method computed by several families with the same scores (attention, mostly) is shown once, naming them all.

Everything is inline — the data as JSON, the script, the style — so the page opens from any folder, copied
anywhere, with no server and no network. It is kept small: numbers to :data:`DIGITS` significant digits; the
texts as ids into a vocabulary of the page's own tokens (base64 of little-endian uint16; uint32 past 65,536
tokens); each method's scores as shades q_t = round(127 s_t) (int8, base64; −128 where a score is missing) with
the copy's full-colour value, so a score read off the page is within 1/254 of the copy's largest |score|. The
browser decodes an instance's text only when it is selected, and draws only the rows in view.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from attn_study import families, layout
from attn_study.errors import UserError
from attn_study.figures.tokens import SCALE, scale, shades
from attn_study.io import write_text_atomic
from attn_study.report.runs import Run

PAGE = Path(__file__).with_name("explorer_page")  # index.html (the template), explorer.css, explorer.js
#: each run's columns that every family may write (the first family's value is shown)
BASE = ("label", "prediction", "probability", "correct", "length")
#: across runs: one column, not one per run, where every run agrees
SHARED = ("label", "length")
LEVELS = 127  # a shade s ∈ [−1, 1] is stored as round(127 s)
MISSING_SHADE = -128
DIGITS = 4
FIRST_COLUMNS = 12  # each family's columns shown at first (besides its ★ columns)


@dataclass
class RunInstances:
    """What the explorer reads of one run: its families' per-instance rows and token tables, in registry order."""

    run: Run
    frames: dict[str, pd.DataFrame]
    tokens: dict[str, pd.DataFrame]

    @classmethod
    def read(cls, run: Run) -> RunInstances:
        frames, tokens = {}, {}
        for family in families.REGISTRY:
            folder = layout.family_dir(run.path, family)
            if (folder / layout.INSTANCES).is_file():
                frames[family] = _with_uid(pd.read_parquet(folder / layout.INSTANCES))
            if (folder / layout.TOKENS).is_file():
                tokens[family] = pd.read_parquet(folder / layout.TOKENS).drop_duplicates("uid").set_index("uid")
        return cls(run, frames, tokens)


def _with_uid(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows by ``uid``; a frame written without one (an old run) named by position in the split (``#<index>``)."""
    if "uid" not in frame:
        where = frame["index"] if "index" in frame else pd.Series(range(len(frame)), index=frame.index)
        frame = frame.assign(uid=[f"#{int(i)}" for i in where])
    return frame.drop_duplicates("uid")


# -- numbers as the page holds them --------------------------------------------------------------------------


def _number(value):
    """A finite number to :data:`DIGITS` significant digits (integers as integers), ±inf as the string JavaScript's
    ``Number`` reads, NaN as None."""
    value = float(value)
    if np.isnan(value):
        return None
    if np.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value.is_integer() and abs(value) < 1e15:
        return int(value)
    return float(f"{value:.{DIGITS}g}")


def _column(series: pd.Series) -> tuple[str, list]:
    """(type, values) of a per-instance column: ``bool``, ``number`` or ``text``; None where missing."""
    present = series.dropna()
    if len(present) and all(isinstance(v, (bool, np.bool_)) for v in present):
        return "bool", [None if pd.isna(v) else bool(v) for v in series]
    if pd.api.types.is_numeric_dtype(series) or (
        len(present) and all(isinstance(v, (int, float, np.integer, np.floating)) for v in present)
    ):
        return "number", [_number(v) for v in series.to_numpy(float)]
    return "text", [None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v) for v in series]


def _aligned(frame: pd.DataFrame, uids: list) -> pd.DataFrame:
    return frame.set_index("uid").reindex(uids)


# -- the table's columns ---------------------------------------------------------------------------------------


def _base(data: RunInstances, uids: list) -> dict[str, pd.Series]:
    """The run's :data:`BASE` columns, each the first family's value per uid (``correct`` derived where missing)."""
    out: dict[str, pd.Series] = {}
    for frame in data.frames.values():
        frame = _aligned(frame, uids)
        for name in BASE:
            if name in frame:
                column = frame[name].astype(object).where(frame[name].notna(), None)
                out[name] = column if name not in out else out[name].where(out[name].notna(), column)
    if "label" in out and "prediction" in out:
        pairs = zip(out["label"], out["prediction"])
        derived = pd.Series(
            [None if a is None or b is None else bool(int(a) == int(b)) for a, b in pairs],
            index=out["label"].index,
            dtype=object,
        )
        out["correct"] = derived if "correct" not in out else out["correct"].where(out["correct"].notna(), derived)
        out["correct"] = out["correct"].map(lambda v: None if v is None else bool(v))
    return {name: out[name] for name in BASE if name in out}


def _entry(key, name, group, series, visible, labels=(), main=None) -> dict:
    kind, values = _column(series)
    entry = {"key": key, "name": name, "group": group, "type": kind, "values": values, "visible": bool(visible)}
    if name in ("label", "prediction") and labels and kind == "number":
        entry.update(type="class", names=list(labels))
    if main:
        entry["main"] = main
    return entry


def _columns(runs: list[RunInstances], uids: list) -> tuple[list[dict], list[dict]]:
    """(the table's columns, per run its name and the keys of its label, prediction, probability, correct)."""
    columns = [_entry("uid", "uid", "", pd.Series([str(u) for u in uids], dtype=object), True)]
    several = len(runs) > 1
    bases = [_base(data, uids) for data in runs]
    shared = set()
    if several:
        for name in SHARED:
            found = [b[name] for b in bases if name in b]
            if found and all(_agree(found[0], other) for other in found[1:]):
                shared.add(name)
                merged = found[0]
                for other in found[1:]:
                    merged = merged.where(merged.notna(), other)
                columns.append(_entry(name, name, "", merged, True, runs[0].run.labels))
    meta = []
    for k, (data, base) in enumerate(zip(runs, bases)):
        prefix, group = (f"r{k + 1}:", f"r{k + 1}") if several else ("", "")
        keys = {}
        for name, series in base.items():
            keys[name] = name if name in shared else prefix + name
            if name not in shared:
                visible = not several or name in ("prediction", "correct")
                columns.append(_entry(prefix + name, name, group, series, visible, data.run.labels))
        meta.append({"name": data.run.name} | {name: keys.get(name) for name in BASE if name != "length"})
        for family, frame in data.frames.items():
            main = families.disagreement(family, frame.columns)
            own = [c for c in frame.columns if c not in ("index", "uid", *BASE)]
            first = set(own[:FIRST_COLUMNS])
            frame = _aligned(frame, uids)
            where = f"{group} · {family}" if several else family
            for name in own:
                star = main[1] if main and main[0] == name else None
                visible = bool(star) or (not several and name in first)
                columns.append(_entry(f"{prefix}{family}/{name}", name, where, frame[name], visible, main=star))
    return columns, meta


def _agree(a: pd.Series, b: pd.Series) -> bool:
    both = a.notna() & b.notna()
    return bool((a[both].astype(float) == b[both].astype(float)).all())


# -- texts and scores ----------------------------------------------------------------------------------------


def _same_scores(a: pd.Series, b: pd.Series) -> bool:
    """Whether two methods' per-uid scores are the same (to float32 rounding across batch sizes)."""
    for x, y in zip(a, b):
        if (x is None) != (y is None):
            return False
        if x is not None and (len(x) != len(y) or not np.allclose(x, y, rtol=1e-4, atol=1e-7, equal_nan=True)):
            return False
    return True


def _scores(table: pd.DataFrame, method: str, uids: list) -> pd.Series:
    values = table[method].reindex(uids)
    return values.map(lambda v: None if v is None or (isinstance(v, float) and np.isnan(v)) else np.asarray(v, float))


def _text_of(data: RunInstances, uids: list, field: str) -> dict:
    """uid → the run's tokens (or query) as a list, from the first family that recorded it."""
    out: dict = {}
    for table in data.tokens.values():
        if field in table:
            for uid, words in table[field].items():
                if uid not in out and words is not None:
                    out[uid] = list(words)
    return {uid: out[uid] for uid in uids if uid in out}


def _text_set(sets: list[dict], text: dict) -> int:
    """The index in ``sets`` of a text set that agrees with ``text`` on every uid both hold (merged into it), else
    a new one's."""
    for k, known in enumerate(sets):
        if all(known[uid] == words for uid, words in text.items() if uid in known):
            for uid, words in text.items():
                known.setdefault(uid, words)
            return k
    sets.append(dict(text))
    return len(sets) - 1


def _methods(runs: list[RunInstances], uids: list) -> tuple[list[dict], list[dict], list[dict]]:
    """(the methods — per run, each with its families and per-uid scores —, the text sets, the query sets)."""
    methods, texts, queries = [], [], []
    for k, data in enumerate(runs):
        text = _text_of(data, uids, "tokens")
        if not text:
            continue
        at = _text_set(texts, text)
        query = _text_of(data, uids, "query")
        while len(queries) <= at:
            queries.append({})
        queries[at].update(query)
        own: list[dict] = []
        for family, table in data.tokens.items():
            for method in layout.token_methods(table.columns):
                scores = _scores(table, method, uids)
                same = next((m for m in own if m["name"] == method and _same_scores(m["scores"], scores)), None)
                if same is not None:
                    same["families"].append(family)
                else:
                    own.append({"name": method, "families": [family], "scores": scores, "run": k, "text": at})
        names = Counter(m["name"] for m in own)
        for m in own:
            m["label"] = m["name"] if names[m["name"]] == 1 else f"{m['name']} · {m['families'][0]}"
            for uid, values in m["scores"].items():
                if values is not None and uid in text and len(values) != len(text[uid]):
                    raise UserError(
                        f"{data.run.path / layout.ANALYSIS}/{m['families'][0]}/{layout.TOKENS}: {uid} has "
                        f"{len(text[uid])} tokens but {len(values)} {m['name']} scores; analyse the run again"
                    )
        methods += own
    return methods, texts, queries


def _b64(array: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(array).tobytes()).decode("ascii")


def _encoded_methods(methods: list[dict], uids: list) -> list[dict]:
    out = []
    for m in methods:
        scales, codes = [], []
        for values in m["scores"]:
            if values is None or not np.isfinite(values).any():  # not computed, or missing throughout (no adversary)
                scales.append(None)
                codes.append(None)
                continue
            shade = shades(values)
            q = np.where(np.isnan(shade), MISSING_SHADE, np.rint(np.nan_to_num(shade) * LEVELS)).astype("<i1")
            scales.append(_number(scale(values)))
            codes.append(_b64(q))
        out.append({k: m[k] for k in ("label", "families", "run", "text")} | {"scales": scales, "codes": codes})
    return out


def _encoded_texts(sets: list[dict], uids: list) -> tuple[list[str], int, list[list]]:
    """(the page's vocabulary, most frequent first; bytes per id; per set, per uid, its ids in base64 or None)."""
    counts = Counter(word for known in sets for words in known.values() for word in words)
    vocab = [word for word, _ in counts.most_common()]
    width = 2 if len(vocab) <= 2**16 else 4
    dtype = "<u2" if width == 2 else "<u4"
    index = {word: i for i, word in enumerate(vocab)}
    encoded = [
        [_b64(np.fromiter((index[w] for w in known[uid]), dtype=dtype)) if uid in known else None for uid in uids]
        for known in sets
    ]
    return vocab, width, encoded


# -- the page --------------------------------------------------------------------------------------------------


def _nothing(runs: list[RunInstances]) -> str:
    if len(runs) == 1:
        run = runs[0].run
        if run.config.get("analysis") in (None, "none", ""):
            why = "it ran no test family (analysis=[])"
        else:
            why = f"its test families ({run.config.get('analysis')}) wrote no per-instance rows"
        return (
            f"Nothing per instance: {run.name} has no analysed instances — {why}. "
            "attn-study-analyze ckpt_path=<this run> analysis=[<families>] analyses its saved model."
        )
    return "Nothing per instance: none of these runs has analysed instances (each ran analysis=[])."


def page_data(runs: list[RunInstances]) -> dict:
    """What the page's script reads (see the module docstring)."""
    frames = [frame for data in runs for frame in data.frames.values()]
    page = {"scale": SCALE, "levels": LEVELS, "nothing": None}
    if not frames:
        return page | {"nothing": _nothing(runs), "about": ""}
    order = pd.concat(
        [f[["uid"]].assign(index=f["index"] if "index" in f else np.nan) for f in frames], ignore_index=True
    )
    order = order.groupby("uid", sort=False)["index"].min().reset_index()
    uids = order.sort_values(["index", "uid"], kind="stable")["uid"].tolist()
    columns, meta = _columns(runs, uids)
    methods, texts, queries = _methods(runs, uids)
    vocab, width, encoded = _encoded_texts(texts + queries, uids)  # one vocabulary for texts and queries
    who = [
        f"{'r' + str(k + 1) + ' = ' if len(runs) > 1 else ''}{d.run.name}: {', '.join(d.frames) or 'no families'}"
        for k, d in enumerate(runs)
    ]
    about = (
        f"{len(uids)} instances. " + "; ".join(who) + ". ★ marks the column by which a family's instances disagree "
        "most: clicking it sorts the most disagreeing first."
    )
    no_text = (
        "No text recorded for this instance: its run has no tokens.parquet (analysed before attn_study recorded "
        "per-token scores); attn-study-analyze analyses it again."
    )
    return page | {
        "about": about,
        "n": len(uids),
        "uids": [str(u) for u in uids],
        "columns": columns,
        "runs": meta,
        "vocab": vocab,
        "width": width,
        "texts": encoded[: len(texts)],
        "queries": encoded[len(texts) :],
        "methods": _encoded_methods(methods, uids),
        "no_text": no_text,
    }


def render(title: str, data: dict) -> str:
    """The page: the template with its title, style, script and data (JSON, every ``<`` escaped) inline."""
    template = (PAGE / "index.html").read_text(encoding="utf-8")
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    parts = {
        "TITLE": html.escape(title),
        "CSS": (PAGE / "explorer.css").read_text(encoding="utf-8"),
        "JS": (PAGE / "explorer.js").read_text(encoding="utf-8"),
        "DATA": payload,
    }
    pieces = re.split(r"__(TITLE|CSS|JS|DATA)__", template)  # one pass: nothing inserted is read again
    return "".join(parts[p] if k % 2 else p for k, p in enumerate(pieces))


def write_page(runs: list[Run], path: Path, title: str) -> Path:
    """``path``: the explorer of ``runs`` (one run, or runs on the same data)."""
    return write_text_atomic(Path(path), render(title, page_data([RunInstances.read(r) for r in runs])))


# -- the report's section ----------------------------------------------------------------------------------------


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "run"


def _names(runs: list[Run]) -> list[str]:
    """A file name per run, from its path below the runs' common folder, unique."""
    root = Path(os.path.commonpath([str(r.path) for r in runs]))
    out, seen = [], Counter()
    for run in runs:
        name = _slug("__".join(run.path.relative_to(root).parts) or run.path.name)
        seen[name] += 1
        out.append(name if seen[name] == 1 else f"{name}_{seen[name]}")
    return out


def _has_instances(run: Run) -> bool:
    return any((layout.family_dir(run.path, f) / layout.INSTANCES).is_file() for f in families.REGISTRY)


def sections(runs: list[Run], work: Path) -> list[tuple[str, str]]:
    """Write the explorer pages into ``work`` (one run: ``explorer.html``; several: ``explorer/<run>.html`` each and
    ``explorer/across-<dataset>.html`` for each dataset with two or more analysed runs) and return the report's
    section linking them."""
    if not runs:
        return []
    pages = []  # (what, relative path, runs)
    if len(runs) == 1:
        pages.append((runs[0].name, "explorer.html", runs))
    else:
        for run, name in zip(runs, _names(runs)):
            pages.append((run.name, f"explorer/{name}.html", [run]))
        datasets: dict[str, list[Run]] = {}
        for run in runs:
            if _has_instances(run):
                datasets.setdefault(str(run.config.get("dataset")), []).append(run)
        for dataset, group in sorted(datasets.items()):
            if len(group) > 1:
                what = f"{dataset}: the same instances across {len(group)} runs"
                pages.append((what, f"explorer/across-{_slug(dataset)}.html", group))
    items = []
    for what, relative, group in pages:
        path = write_page(group, work / relative, f"{what} — instances")
        size = path.stat().st_size / 2**20
        items.append(f"<li><a href='{html.escape(relative)}'>{html.escape(what)}</a> ({size:.1f} MB)</li>")
    body = (
        "<p>Every analysed test instance, one row each, sortable and filterable by every family's per-instance "
        "columns; select one to see its text once per importance method, coloured by that method. Each page is "
        "self-contained (no server, no network: open it from anywhere, copy it anywhere).</p>"
        f"<ul>{''.join(items)}</ul>"
    )
    return [("Instances", body)]
