"""Words and their word pieces (``encoder=pretrained``, docs/pretrained.md): a text split into words by the project's
pipeline is split again into pieces by the checkpoint's tokenizer, and each piece keeps the index of its word
(:data:`NOT_A_WORD` for the tokenizer's special tokens and a pair's second text). Every test scores pieces; a word's
score is read off its pieces by one of :data:`RULES`:

- ``sum``: the pieces' total. A distribution over pieces (α, a normalised importance) stays a distribution over
  words, and an additive attribution (gradient × input, integrated gradients: their sum over the inputs is the
  output's change) keeps the word's whole share — the default;
- ``max``: the piece of largest magnitude, with its sign. For attention-like weights, where a word is as salient as
  its most salient piece, and the word's score does not grow with the number of pieces it was split into;
- ``first``: the word's first piece, the convention of token-level tasks on word-piece models (Devlin et al. 2019,
  §5.3: NER labels and predicts on a word's first sub-token).

Nothing here imports torch: the report reads it.
"""

from __future__ import annotations

import numpy as np

NOT_A_WORD = -1
RULES = ("sum", "max", "first")
#: how tokenizers mark a piece: WordPiece's continuation (``##``), byte-level BPE's and SentencePiece's word start
CONTINUATION, WORD_STARTS = "##", ("Ġ", "▁")


def word_scores(scores, words, rule: str = "sum") -> np.ndarray:
    """One score per word (W = the number of words: the largest index + 1) from the pieces' ``scores`` (n,) and
    their word indices ``words`` (n,; pieces of :data:`NOT_A_WORD` left out) by ``rule`` (module docstring); a
    word without pieces gets NaN, and a NaN piece makes its word's score NaN under ``sum`` and ``max`` (under
    ``first`` only when it is the first)."""
    if rule not in RULES:
        raise ValueError(f"word rule {rule!r}: choose one of {list(RULES)}")
    scores, words = np.asarray(scores, dtype=np.float64), np.asarray(words, dtype=np.int64)
    if scores.shape != words.shape:
        raise ValueError(f"{scores.shape[0]} scores for {words.shape[0]} pieces")
    kept = words != NOT_A_WORD
    scores, words = scores[kept], words[kept]
    count = int(words.max()) + 1 if len(words) else 0
    out = np.full(count, np.nan)
    for word in range(count):
        own = scores[words == word]
        if not len(own):
            continue
        if rule == "sum":
            out[word] = own.sum()
        elif rule == "first":
            out[word] = own[0]
        else:
            out[word] = np.nan if np.isnan(own).any() else own[np.argmax(np.abs(own))]
    return out


def join_pieces(pieces) -> str:
    """A word's text from its pieces as the tokenizer wrote them: WordPiece's ``##`` taken off the pieces after the
    first, a word-start mark (``Ġ``, ``▁``) off the first (``["un", "##believ", "##able"]`` → ``unbelievable``)."""
    pieces = [str(p) for p in pieces]
    if not pieces:
        return ""
    first = next((pieces[0][len(m) :] for m in WORD_STARTS if pieces[0].startswith(m)), pieces[0])
    return first + "".join(p[len(CONTINUATION) :] if p.startswith(CONTINUATION) else p for p in pieces[1:])


def words_of(pieces, words) -> list[tuple[str, list[str]]]:
    """(word, its pieces) per word, in order, of a text's ``pieces`` and their word indices ``words``."""
    grouped: dict[int, list[str]] = {}
    for piece, word in zip(pieces, np.asarray(words, dtype=np.int64).tolist()):
        if word != NOT_A_WORD:
            grouped.setdefault(word, []).append(str(piece))
    return [(join_pieces(own), own) for _, own in sorted(grouped.items())]
