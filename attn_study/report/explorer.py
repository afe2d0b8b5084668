"""The instance explorer: ``explorer.html``, one self-contained static page per run — and one per group of runs
on the same data, the same instance across them — where every analysed test instance is a row of a table that
sorts and filters by any per-instance column of every family that ran, and selecting an instance shows its text
once per importance method the run computed, each copy coloured by that method (``attn_study.figures.tokens``:
s_t = v_t / max_u |v_u| on the copy's own scale), with the instance's numbers beside it.

What it reads of a run: each family's ``analysis/<family>/instances.parquet`` (its per-instance columns) and
``tokens.parquet`` (each instance's text and per-token scores: ``attn_study/analysis/token_scores.py``).

The rows: an instance is its uid *and its text* (with its query). Runs that recorded the same text under a uid share
a row; where runs recorded different texts under one uid (synthetic data of another seed, another vocabulary),
each text is a row of its own, holding only the runs that recorded it, and the page says how many uids differ. A
run that recorded no text for a uid joins the uid's row when the other runs agree on its text. Rows come in split
order.

The table: ``uid``; ``text``, the first :data:`PREVIEW` characters of the instance's text (no ``<sos>``/``<eos>``);
across runs, ``runs``, the runs a row holds; the columns ``label``, ``prediction``, ``probability``, ``correct`` and
``length`` of each run (the first family's that has them; ``correct`` = prediction == label where no family wrote
it); then each family's own columns (★: its ``keys.DISAGREEMENT`` column, by which its instances disagree most).
Across runs, ``label`` and ``length`` are one column where every run's values agree on every row they share —
and each run's columns are named ``r<k> · <family>``. Shown at first: the uid, the text, the base columns, each
family's ★ column and, on a one-run page, the columns its ``keys.INSTANCE_HEADLINE`` names (its headline measures,
per instance; under the header it gives them) — or, for a family that names none, its first :data:`FIRST_COLUMNS`
— but never a column that is empty or holds one value in this page (unless the page has one row). The others are
under "Columns", which marks the empty and constant ones.

The copies: a method's page name and one-line definition come from its family's ``keys.TOKEN_METHODS`` (stored
name → (page name, definition)); ``attention`` is α everywhere (:data:`ATTENTION`); a method a family does not
declare is named ``<method> · <family>``. Families give one page name one definition (tested over the registry), so
that two methods of one stored name but different meanings (J&W's ``loo``, the output's TVD; faithfulness's ``loo``,
the signed drop of p(ŷ)) never share a name. A method computed by several families of a run with the same page
name and the same scores (attention, mostly) is shown once, naming them all. Each copy draws its first
:data:`CHUNK` tokens, then :data:`CHUNK` more per click, so that a text of any length shows at once.

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
from attn_study.data.pieces import RULES, words_of
from attn_study.data.text import EOS, SOS
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
FIRST_COLUMNS = 6  # the columns shown at first of a family whose keys.py names no INSTANCE_HEADLINE
PREVIEW = 80  # characters of an instance's text in the table's text column
CHUNK = 1000  # tokens a copy draws at first, and per "show more"
#: the page name and definition of the per-token score every family records as ``attention``
ATTENTION = ("attention", "α_t: the model's attention weight on token t (a selector's: its selection)")


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

    def texts(self) -> dict:
        """uid → (tokens, query, words) as the run recorded them (the first family's that did; query None for a
        flat task; words, each piece's word, None but for word pieces: ``encoder=pretrained``), as tuples."""
        out: dict = {}
        for table in self.tokens.values():
            queries = table["query"] if "query" in table else None
            pieces = table["words"] if "words" in table else None
            for uid, tokens in table["tokens"].items():
                if uid not in out and tokens is not None:
                    query = None if queries is None or queries[uid] is None else tuple(queries[uid])
                    words = None if pieces is None or pieces[uid] is None else tuple(int(w) for w in pieces[uid])
                    out[uid] = (tuple(tokens), query, words)
        return out


def _with_uid(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows by ``uid``; a frame written without one (an old run) named by position in the split (``#<index>``)."""
    if "uid" not in frame:
        where = frame["index"] if "index" in frame else pd.Series(range(len(frame)), index=frame.index)
        frame = frame.assign(uid=[f"#{int(i)}" for i in where])
    return frame.drop_duplicates("uid")


def _declared(family: str, name: str, default):
    """What ``family``'s ``keys.py`` declares as ``name`` (``default`` where it declares nothing)."""
    known = families.REGISTRY.get(family)
    return getattr(known.module("keys"), name, default) if known else default


# -- the rows: one per uid and text ------------------------------------------------------------------------------


@dataclass
class Row:
    """One row of the page: an instance as the runs in ``runs`` recorded it (``tokens`` None: none recorded it;
    ``words``: each token's word where the tokens are word pieces)."""

    uid: str
    runs: list[int]
    tokens: tuple | None
    query: tuple | None
    words: tuple | None = None


def _rows(runs: list[RunInstances], texts: list[dict]) -> tuple[list[Row], int]:
    """(the page's rows in split order — a uid's runs grouped by the text they recorded —, how many uids hold
    different texts in different runs)."""
    frames = [frame for data in runs for frame in data.frames.values()]
    order = pd.concat(
        [f[["uid"]].assign(index=f["index"] if "index" in f else np.nan) for f in frames], ignore_index=True
    )
    order = order.groupby("uid", sort=False)["index"].min().reset_index()
    uids = order.sort_values(["index", "uid"], kind="stable")["uid"].tolist()
    held = [set().union(*(set(f["uid"]) for f in data.frames.values())) for data in runs]
    rows, differ = [], 0
    for uid in uids:
        groups: dict[tuple, list[int]] = {}
        unknown = []
        for k in range(len(runs)):
            if uid in held[k]:
                text = texts[k].get(uid)
                if text is None:
                    unknown.append(k)
                else:
                    groups.setdefault(text, []).append(k)
        if len(groups) > 1:
            differ += 1
            rows += [Row(str(uid), holding, *text) for text, holding in groups.items()]
            if unknown:
                rows.append(Row(str(uid), unknown, None, None, None))
        else:
            ((text, holding),) = groups.items() if groups else [((None, None, None), [])]
            rows.append(Row(str(uid), sorted(holding + unknown), *text))
    return rows, differ


def _held_by(rows: list[Row], k: int) -> pd.Series:
    """Run ``k``'s uid at each row that holds it (index: the row's position)."""
    where = [i for i, row in enumerate(rows) if k in row.runs]
    return pd.Series([rows[i].uid for i in where], index=where, dtype=object)


def _at_rows(table: pd.DataFrame | pd.Series, where: pd.Series, n: int):
    """``table`` (indexed by uid) at the page's ``n`` rows: a row's values where ``where`` holds it, else missing."""
    out = table.reindex(where.to_numpy())
    out.index = where.index
    return out.reindex(range(n))


def _preview(tokens: tuple | None, words: tuple | None = None) -> str | None:
    """The first :data:`PREVIEW` characters of a text's tokens — its words, where the tokens are word pieces
    (``words``) — joined by spaces, boundary markers left out; cut with "…" where longer."""
    if tokens is None:
        return None
    if words is not None:
        tokens = [word for word, _ in words_of(tokens, words)]
    kept, size = [], 0
    for word in tokens:
        if word in (SOS, EOS):
            continue
        kept.append(word)
        size += len(word) + 1
        if size > PREVIEW + 1:
            break
    text = " ".join(kept)
    return text if len(text) <= PREVIEW else text[: PREVIEW - 1] + "…"


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


def _uninformative(values: list) -> str | None:
    """Why a column is not worth showing at first: ``empty`` (missing throughout), ``constant`` (one value where
    present, on a page of two rows or more); None when it is."""
    present = {v for v in values if v is not None}
    if not present:
        return "empty"
    return "constant" if len(present) == 1 and len(values) > 1 else None


# -- the table's columns ---------------------------------------------------------------------------------------


def _base(data: RunInstances, where: pd.Series, n: int) -> dict[str, pd.Series]:
    """The run's :data:`BASE` columns at the rows, each the first family's value (``correct`` derived where
    missing)."""
    out: dict[str, pd.Series] = {}
    for frame in data.frames.values():
        frame = _at_rows(frame.set_index("uid"), where, n)
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


def _entry(key, name, group, series, wanted, labels=(), main=None, header=None) -> dict:
    """A column of the page: shown at first when ``wanted`` and informative (:func:`_uninformative`); ``header``:
    what its header says in place of its name."""
    kind, values = _column(series)
    why = _uninformative(values)
    entry = {"key": key, "name": header or name, "group": group, "type": kind, "values": values}
    entry["visible"] = bool(wanted) and why is None
    if header and header != name:
        entry["column"] = name
    if why:
        entry["note"] = why
    if name in ("label", "prediction") and labels and kind == "number":
        entry.update(type="class", names=list(labels))
    if main:
        entry["main"] = main
    return entry


def _family_columns(family, frame, prefix, group, several) -> list[dict]:
    """A family's own columns: its ★ column and (one run) its ``INSTANCE_HEADLINE`` columns shown at first."""
    main = families.disagreement(family, frame.columns)
    own = [c for c in frame.columns if c not in BASE]
    headers = _declared(family, "INSTANCE_HEADLINE", None)
    entries = []
    for name in own:
        star = main[1] if main and main[0] == name else None
        wanted = bool(star) or (not several and headers is not None and name in headers)
        header = (headers or {}).get(name)
        entries.append(_entry(f"{prefix}{family}/{name}", name, group, frame[name], wanted, main=star, header=header))
    if headers is None and not several:
        for entry in [e for e in entries if "note" not in e][:FIRST_COLUMNS]:
            entry["visible"] = True
    return entries


def _columns(runs: list[RunInstances], rows: list[Row]) -> tuple[list[dict], list[dict]]:
    """(the table's columns, per run its name and the keys of its label, prediction, probability, correct)."""
    n, several = len(rows), len(runs) > 1
    columns = [
        _entry("uid", "uid", "", pd.Series([row.uid for row in rows], dtype=object), True),
        _entry("text", "text", "", pd.Series([_preview(row.tokens, row.words) for row in rows], dtype=object), True),
    ]
    columns[0]["visible"] = columns[1]["visible"] = True  # always, even where no run recorded a text
    columns[1]["tokens"] = True  # drawn token by token (each isolated: bidirectional text)
    if several:
        held = pd.Series([", ".join(f"r{k + 1}" for k in row.runs) for row in rows], dtype=object)
        columns.append(_entry("runs", "runs", "", held, True))
    where = [_held_by(rows, k) for k in range(len(runs))]
    bases = [_base(data, at, n) for data, at in zip(runs, where)]
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
                wanted = not several or name in ("prediction", "correct", *SHARED)  # the runs' labels, unmerged
                columns.append(_entry(prefix + name, name, group, series, wanted, data.run.labels))
        meta.append({"name": data.run.name} | {name: keys.get(name) for name in BASE if name != "length"})
        for family, frame in data.frames.items():
            frame = _at_rows(frame.set_index("uid").drop(columns="index", errors="ignore"), where[k], n)
            where_shown = f"{group} · {family}" if several else family
            columns += _family_columns(family, frame, prefix, where_shown, several)
    return columns, meta


def _agree(a: pd.Series, b: pd.Series) -> bool:
    """Whether two runs' values agree on every row both hold."""
    both = a.notna() & b.notna()
    return bool((a[both].astype(float) == b[both].astype(float)).all())


# -- texts and scores ----------------------------------------------------------------------------------------


def _same_scores(a: pd.Series, b: pd.Series) -> bool:
    """Whether two methods' per-row scores are the same (to float32 rounding across batch sizes)."""
    for x, y in zip(a, b):
        if (x is None) != (y is None):
            return False
        if x is not None and (len(x) != len(y) or not np.allclose(x, y, rtol=1e-4, atol=1e-7, equal_nan=True)):
            return False
    return True


def _scores(table: pd.DataFrame, method: str) -> pd.Series:
    """A method's scores by uid, each an array (None where it has none)."""
    return table[method].map(lambda v: None if v is None or (isinstance(v, float) and np.isnan(v)) else np.asarray(v))


def _named(family: str, method: str) -> tuple[str, str]:
    """(page name, one-line definition) of ``family``'s per-token ``method``."""
    if method == "attention":
        return ATTENTION
    declared = _declared(family, "TOKEN_METHODS", {})
    fallback = (f"{method} · {family}", f"{family}'s {method} (its keys.py gives it no TOKEN_METHODS definition)")
    return declared.get(method, fallback)


def _methods(runs: list[RunInstances], rows: list[Row], texts: list[dict]) -> list[dict]:
    """Every run's methods, each with its page name, definition, families and scores at the rows."""
    methods = []
    for k, data in enumerate(runs):
        where, own = _held_by(rows, k), []
        for family, table in data.tokens.items():
            for method in layout.token_methods(table.columns):
                by_uid = _scores(table, method)
                for uid, values in by_uid.items():
                    text = texts[k].get(uid)
                    if values is not None and text is not None and len(values) != len(text[0]):
                        raise UserError(
                            f"{data.run.path / layout.ANALYSIS}/{family}/{layout.TOKENS}: {uid} has {len(text[0])} "
                            f"tokens but {len(values)} {method} scores; analyse the run again"
                        )
                scores = _at_rows(by_uid, where, len(rows))
                scores = scores.astype(object).where(scores.notna(), None)
                name, definition = _named(family, method)
                same = next((m for m in own if m["name"] == name and _same_scores(m["scores"], scores)), None)
                if same is not None:
                    same["families"].append(family)
                else:
                    entry = {"name": name, "definition": definition, "families": [family], "scores": scores}
                    own.append(entry | {"run": k})
        names = Counter(m["name"] for m in own)
        for m in own:
            m["label"] = m["name"] if names[m["name"]] == 1 else f"{m['name']} · {m['families'][0]}"
        methods += own
    return methods


def _b64(array: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(array).tobytes()).decode("ascii")


def _encoded_methods(methods: list[dict]) -> list[dict]:
    out = []
    for m in methods:
        scales, codes = [], []
        for values in m["scores"]:
            values = None if values is None else np.asarray(values, float)
            if values is None or not np.isfinite(values).any():  # not computed, or missing throughout (no adversary)
                scales.append(None)
                codes.append(None)
                continue
            shade = shades(values)
            q = np.where(np.isnan(shade), MISSING_SHADE, np.rint(np.nan_to_num(shade) * LEVELS)).astype("<i1")
            scales.append(_number(scale(values)))
            codes.append(_b64(q))
        kept = {k: m[k] for k in ("label", "definition", "families", "run")}
        out.append(kept | {"scales": scales, "codes": codes})
    return out


def _encoded_texts(texts: list) -> tuple[list[str], int, list]:
    """(the page's vocabulary, most frequent first; bytes per id; per text its ids in base64, None for None)."""
    counts = Counter(word for words in texts if words is not None for word in words)
    vocab = [word for word, _ in counts.most_common()]
    width = 2 if len(vocab) <= 2**16 else 4
    dtype = "<u2" if width == 2 else "<u4"
    index = {word: i for i, word in enumerate(vocab)}
    encoded = [
        None if words is None else _b64(np.fromiter((index[w] for w in words), dtype=dtype, count=len(words)))
        for words in texts
    ]
    return vocab, width, encoded


def _word_pieces(rows: list[Row], named: list) -> dict:
    """Where the texts are word pieces (``encoder=pretrained``): per row its pieces' words (``words``: each piece's
    word, numbered 0, 1, … in the text, base64 of uint16: a text has fewer words than a checkpoint has positions),
    the words' own texts (``word_texts``: ids into the
    page's vocabulary) and how a word's score is read off its pieces (``word_rules``, the first shown at first:
    ``data/pieces.py``); nothing otherwise."""
    if all(row.words is None for row in rows):
        return {}
    words = [
        None if row.words is None else _b64(np.unique(row.words, return_inverse=True)[1].astype("<u2")) for row in rows
    ]
    return {"words": words, "word_texts": named, "word_rules": list(RULES)}


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
    """What the page's script reads (see the module docstring); ``differing``: how many uids hold different texts
    in different runs (not read by the script)."""
    page = {"scale": SCALE, "levels": LEVELS, "nothing": None, "differing": 0}
    if not any(data.frames for data in runs):
        return page | {"nothing": _nothing(runs), "about": ""}
    texts = [data.texts() for data in runs]
    rows, differing = _rows(runs, texts)
    columns, meta = _columns(runs, rows)
    methods = _methods(runs, rows, texts)
    n = len(rows)
    named = [None if r.words is None else tuple(w for w, _ in words_of(r.tokens, r.words)) for r in rows]
    vocab, width, encoded = _encoded_texts([r.tokens for r in rows] + [r.query for r in rows] + named)  # one vocabulary
    uids = len({row.uid for row in rows})
    who = [
        f"{'r' + str(k + 1) + ' = ' if len(runs) > 1 else ''}{d.run.name}: {', '.join(d.frames) or 'no families'}"
        for k, d in enumerate(runs)
    ]
    about = (
        f"{uids} instances. " + "; ".join(who) + ". ★ marks the column by which a family's instances disagree "
        "most: clicking it sorts the most disagreeing first."
    )
    differ = None
    if differing:
        differ = (
            f"{differing} of {uids} uids hold different texts in different runs (other data: e.g. a synthetic "
            f"dataset drawn with another seed), so they are not paired: each text is a row of its own, and the column "
            f"runs says which runs recorded it ({n} rows)."
        )
    no_text = (
        "No text recorded for this instance: its run has no tokens.parquet (analysed before attn_study recorded "
        "per-token scores); attn-study-analyze analyses it again."
    )
    return page | {
        "about": about,
        "differ": differ,
        "differing": differing,
        "n": n,
        "uids": [row.uid for row in rows],
        "members": [row.runs for row in rows] if len(runs) > 1 else None,
        "columns": columns,
        "runs": meta,
        "vocab": vocab,
        "width": width,
        "texts": encoded[:n],
        "queries": encoded[n : 2 * n],
        **_word_pieces(rows, encoded[2 * n :]),
        "methods": _encoded_methods(methods),
        "chunk": CHUNK,
        "no_text": no_text,
    }


def render(title: str, data: dict) -> str:
    """The page: the template with its title (escaped), style, script and data (JSON, every ``<`` escaped, so that no
    text of the data closes the script element that holds it) inline."""
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


def _across(dataset: str, group: list[Run], data: dict) -> str:
    """What an across-runs page is: the same instances, unless some uids hold different texts in different runs."""
    if data["differing"]:
        return f"{dataset}: {len(group)} runs, {data['differing']} uids with different texts (not paired)"
    return f"{dataset}: the same instances across {len(group)} runs"


def sections(runs: list[Run], work: Path) -> list[tuple[str, str]]:
    """Write the explorer pages into ``work`` (one run: ``explorer.html``; several: ``explorer/<run>.html`` each and
    ``explorer/across-<dataset>.html`` for each dataset with two or more analysed runs) and return the report's
    section linking them."""
    if not runs:
        return []
    pages = []  # (what, relative path, runs, across: the dataset)
    if len(runs) == 1:
        pages.append((runs[0].name, "explorer.html", runs, None))
    else:
        for run, name in zip(runs, _names(runs)):
            pages.append((run.name, f"explorer/{name}.html", [run], None))
        datasets: dict[str, list[Run]] = {}
        for run in runs:
            if _has_instances(run):
                datasets.setdefault(str(run.config.get("dataset")), []).append(run)
        for dataset, group in sorted(datasets.items()):
            if len(group) > 1:
                pages.append((None, f"explorer/across-{_slug(dataset)}.html", group, dataset))
    items = []
    for what, relative, group, dataset in pages:
        data = page_data([RunInstances.read(r) for r in group])
        what = what if dataset is None else _across(dataset, group, data)
        path = write_text_atomic(work / relative, render(f"{what} — instances", data))
        size = path.stat().st_size / 2**20
        items.append(f"<li><a href='{html.escape(relative)}'>{html.escape(what)}</a> ({size:.1f} MB)</li>")
    body = (
        "<p>Every analysed test instance, one row each, sortable and filterable by every family's per-instance "
        "columns; select one to see its text once per importance method, coloured by that method. Each page is "
        "self-contained (no server, no network: open it from anywhere, copy it anywhere).</p>"
        f"<ul>{''.join(items)}</ul>"
    )
    return [("Instances", body)]
