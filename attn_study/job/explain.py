"""``attn-study-explain <run> "a text" …``: a trained run's prediction for texts a researcher types, and each text
coloured by each importance method — on the terminal and as one self-contained HTML page.

A text goes through the run's own pipeline (``data.processed``: the dataset's cleaning, tokeniser, lower-casing,
digits, boundary tokens, vocabulary — an unknown word becomes ``<unk>``, and the page says how many did), then
through the run's best model; each method is one of ``analysis.importance.METHODS`` (its formula is its record's
docstring), computed on the text as a family computes it on the test split. Each copy of the text is shaded on its
own scale, as the instance explorer shades it (``figures.tokens``): blue where a token speaks for the predicted
class, orange against, the full-colour value beside the method's name.
"""

from __future__ import annotations

import html
import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from attn_study.analysis.importance import METHODS, ImportanceOptions, importance, predict
from attn_study.analysis.protocol import staged_model
from attn_study.data.datamodule import collate
from attn_study.data.processed import tokenize_texts
from attn_study.data.text import EOS, SOS, UNK_ID
from attn_study.errors import UserError
from attn_study.figures.tokens import coloured_text_html, shades
from attn_study.io import write_text_atomic
from attn_study.job.plan import load_run
from attn_study.models.selector import soft_token_attention

#: the methods shown when none is asked for: the model's attention beside a gradient, a deletion and a path integral
DEFAULT_METHODS = ("attention", "gradient", "loo", "integrated_gradients")


@dataclass
class Explained:
    """One text: its tokens as the model read them (boundary tokens left out), the predicted class and its
    probability, the scores per method (one per token), and how many of its words the vocabulary lacks."""

    text: str
    tokens: list[str]
    prediction: str
    probability: float
    scores: dict[str, list[float]]
    unknown: int


def explain(run: str | Path, texts: list[str], methods=DEFAULT_METHODS, ig_steps: int = 50) -> list[Explained]:
    """The run at ``run`` (its directory; complete), each of ``texts`` predicted and scored by each of ``methods``."""
    if not texts:
        raise UserError("attn-study-explain: no text given; give one or more texts, or --file with one text a line")
    unknown = [m for m in methods if m not in METHODS or m == "random"]
    if unknown:
        choices = ", ".join(m for m in METHODS if m != "random")
        raise UserError(f"--methods: unknown {', '.join(unknown)}; choose from {choices}")
    loaded = load_run(run, option="run")
    model = staged_model(loaded.module)
    if not soft_token_attention(model):
        raise UserError(
            f"run {loaded.path}: {type(model).__name__} has no attention over the text's tokens to colour it by; "
            "explain a run of model=flat"
        )
    if loaded.datamodule.split("test").query_ids is not None:
        raise UserError(f"run {loaded.path}: a pair task (a passage and its question); explain runs of one text")
    data = loaded.datamodule
    prep, vocab, names = data.preprocessing, data.vocab, [str(n) for n in data.data.label_names]
    tokenized = tokenize_texts(texts, prep)
    items = []
    for i, tokens in enumerate(tokenized):
        if not tokens:
            raise UserError(f"text {i + 1} ({texts[i][:40]!r}): no token left once the run's pipeline cleaned it")
        tokens = tokens[: prep.truncate] if prep.truncate else tokens
        ids = vocab.encode([SOS, *tokens, EOS] if prep.boundary_tokens else tokens)
        items.append({"index": i, "ids": torch.tensor(ids), "label": 0, "boundary": prep.boundary_tokens})
    batch = collate(items, data.num_classes)
    options = ImportanceOptions(ig_steps=ig_steps)
    with torch.inference_mode(False), torch.enable_grad():
        model.eval()
        _, alpha, probs = predict(model, batch)
        scored = {m: importance(m, model, batch, alpha, probs, options)[0].detach().double() for m in methods}
    inner = slice(1, -1) if prep.boundary_tokens else slice(None)
    out = []
    for r, text in enumerate(texts):
        length = int(batch["lengths"][r])
        ids = batch["ids"][r, :length][inner]
        k = int(probs[r].argmax())
        out.append(
            Explained(
                text=text,
                tokens=vocab.decode(ids.tolist()),
                prediction=names[k] if k < len(names) else str(k),
                probability=float(probs[r, k]),
                scores={m: values[r, :length][inner].tolist() for m, values in scored.items()},
                unknown=int((ids == UNK_ID).sum()),
            )
        )
    return out


def terminal(explained: list[Explained], colour: bool) -> str:
    """The explanations as lines for the terminal: per text its prediction, then per method the tokens — on a
    colour terminal shaded as the page shades them (24-bit backgrounds), else each with its score."""
    lines = []
    for e in explained:
        lines.append(f"{e.text!r}: {e.prediction} ({e.probability:.3f})" + _unknown_note(e))
        for method, values in e.scores.items():
            if colour:
                cells = [_ansi(token, shade) for token, shade in zip(e.tokens, shades(values))]
            else:
                cells = [f"{token}({_number(v)})" for token, v in zip(e.tokens, values)]
            lines.append(f"  {method:<22} " + " ".join(cells))
    return "\n".join(lines)


def page(explained: list[Explained], run: Path) -> str:
    """One self-contained HTML page: per text its prediction and its copies coloured per method (each method's
    formula on hover), the run it comes from."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>attn-study-explain</title></head>"
        "<body style='font: 14px sans-serif; max-width: 60em; margin: 2em auto'>",
        f"<h1 style='font-size: 18px'>{html.escape(str(run))}</h1>",
        "<p style='color: #555'>Each copy is shaded on its own scale: blue where a token speaks for the predicted "
        "class, orange against; a token's score is its tooltip.</p>",
    ]
    for e in explained:
        parts.append(
            f"<h2 style='font-size: 15px'>{html.escape(e.prediction)} ({e.probability:.3f})"
            f"<span style='font-weight: 400; color: #777'>{html.escape(_unknown_note(e))}</span></h2>"
            f"<p style='color: #555'>{html.escape(e.text)}</p>"
        )
        for method, values in e.scores.items():
            formula = html.escape(METHODS[method].formula.splitlines()[0] if METHODS[method].formula else method)
            parts.append(f"<div title='{formula}'>{coloured_text_html(e.tokens, {method: values})}</div>")
    parts.append("</body></html>")
    return "".join(parts)


def page_path(run: Path, out: Path | None) -> Path:
    """Where the page goes: ``out``, by default ``<run>/explain/<time>.html``; a file that exists is refused (nothing
    is overwritten) — asked before any work."""
    path = Path(out) if out else Path(run) / "explain" / f"{time.strftime('%Y-%m-%d_%H-%M-%S')}.html"
    if path.exists():
        raise UserError(f"--out {path}: the file exists; give a new name (nothing was overwritten)")
    return path


def write_page(explained: list[Explained], run: Path, path: Path) -> Path:
    """The page at ``path`` (:func:`page_path`), written whole or not at all."""
    try:
        return write_text_atomic(path, page(explained, Path(run)))
    except OSError as err:
        raise UserError(f"--out {path}: cannot write there ({err.strerror or err}); give another file") from None


def _unknown_note(e: Explained) -> str:
    return f" — {e.unknown} word{'s' * (e.unknown != 1)} not in the run's vocabulary (<unk>)" if e.unknown else ""


def _number(value: float) -> str:
    return f"{value:.3g}" if math.isfinite(value) else "n/a"


def _ansi(token: str, shade: float) -> str:
    """``token`` on the page's colour at |shade| (blended with a white background), as a 24-bit ANSI background."""
    if not math.isfinite(shade):
        return token
    from attn_study.figures.tokens import NEGATIVE, POSITIVE

    base = POSITIVE if shade >= 0 else NEGATIVE
    r, g, b = (round(255 + (c - 255) * abs(shade)) for c in base)
    ink = "38;2;255;255;255" if abs(shade) > 0.55 else "38;2;0;0;0"
    return f"\x1b[{ink};48;2;{r};{g};{b}m{token}\x1b[0m"
