"""Text normalisation and vocabulary, as in Jain & Wallace (2019).

Tokens come from spaCy's rule-based English tokenizer (``spacy.blank("en")``: no model download),
are lower-cased, and any token containing a digit becomes ``qqq`` — except the anonymised entity
markers of cloze QA (``@entity13``), which are kept as they are.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

PAD, UNK = "<pad>", "<unk>"
PAD_ID, UNK_ID = 0, 1
SOS, EOS = "<sos>", "<eos>"  # boundary tokens (Jain & Wallace's recipe: dataset.preprocessing.boundary_tokens)
DIGIT_TOKEN = "qqq"
_HAS_DIGIT = re.compile(r"\d")
_ENTITY = re.compile(r"@entity\d+")
_WHITESPACE = re.compile(r"\s+")


@lru_cache(maxsize=1)
def _spacy_tokenizer():
    import spacy

    return spacy.blank("en").tokenizer


_NON_WORD = re.compile(r"\W")
_KERAS_FILTERS = re.compile("[" + re.escape('!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n') + "]")
#: text cleanings applied before tokenising (``dataset.preprocessing.clean``)
CLEANINGS = (None, "remove_non_word", "keras")


def normalise(token: str, digits: bool = True) -> str:
    """Lower-case; with ``digits``, a token with any digit becomes ``qqq`` (entity markers
    ``@entityN`` excepted)."""
    if _ENTITY.fullmatch(token):
        return token
    return DIGIT_TOKEN if digits and _HAS_DIGIT.search(token) else token.lower()


def clean(text: str, how: str | None) -> str:
    """``remove_non_word``: every non-word character becomes a space (Jain & Wallace's SST: no punctuation
    tokens remain); ``keras``: lower-cased and Keras' ``text_to_word_sequence`` filter characters
    (punctuation, tab, newline) become spaces (the nearest to their pre-tokenised IMDB)."""
    if how == "remove_non_word":
        return _NON_WORD.sub(" ", text)
    if how == "keras":
        return _KERAS_FILTERS.sub(" ", text.lower())
    return text


def tokenize(text: str) -> list[str]:
    """spaCy tokens of ``text`` (whitespace runs collapsed, none kept as tokens), normalised."""
    text = _WHITESPACE.sub(" ", text).strip()
    return [normalise(t.text) for t in _spacy_tokenizer()(text) if not t.is_space]


def tokenize_many(
    texts: Iterable[str], batch_size: int = 1000, cleaning: str | None = None, digits: bool = True
) -> list[list[str]]:
    """``tokenize`` over many texts, using spaCy's batched ``pipe``; ``cleaning`` (see :func:`clean`)
    first, and ``digits=False`` keeps digits as they are (no ``qqq``). ``keras`` splits on whitespace
    instead of spaCy, as Keras does."""
    cleaned = (_WHITESPACE.sub(" ", clean(t, cleaning)).strip() for t in texts)
    if cleaning == "keras":
        return [[normalise(w, digits) for w in t.split(" ") if w] for t in cleaned]
    return [
        [normalise(t.text, digits) for t in doc if not t.is_space]
        for doc in _spacy_tokenizer().pipe(cleaned, batch_size=batch_size)
    ]


@lru_cache(maxsize=1)
def _spacy_sentencizer():
    """A blank English pipeline with spaCy's rule-based ``sentencizer`` (punctuation-based sentence
    boundaries; no model download). Its tokenizer is the same as ``_spacy_tokenizer``'s."""
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


def tokenize_sentences_many(texts: Iterable[str], batch_size: int = 1000) -> list[tuple[list[str], list[int]]]:
    """``tokenize_many`` plus sentence boundaries: per text (tokens, tokens per sentence).

    The tokens are exactly those of ``tokenize_many``; the sentence lengths are positive and sum to
    ``len(tokens)`` (sentences left empty once whitespace tokens are dropped are skipped; an empty
    text gives ``([], [])``).
    """
    cleaned = (_WHITESPACE.sub(" ", t).strip() for t in texts)
    out = []
    for doc in _spacy_sentencizer().pipe(cleaned, batch_size=batch_size):
        tokens, lengths = [], []
        for sent in doc.sents:
            words = [normalise(t.text) for t in sent if not t.is_space]
            if words:
                tokens += words
                lengths.append(len(words))
        out.append((tokens, lengths))
    return out


class Vocab:
    """Word ↔ id map with ``<pad>`` = 0 and ``<unk>`` = 1, built from training tokens."""

    def __init__(self, words: Iterable[str]):
        self.itos: list[str] = [PAD, UNK]
        self.itos += [w for w in words if w not in (PAD, UNK)]
        self.stoi: dict[str, int] = {w: i for i, w in enumerate(self.itos)}

    @classmethod
    def build(
        cls, token_lists: Iterable[list[str]], min_count: int = 1, keep: Iterable[str] = (), documents: bool = False
    ) -> Vocab:
        """Words seen at least ``min_count`` times — in that many documents with ``documents`` (a
        document frequency, as scikit-learn's ``min_df``) — most frequent first (ties alphabetical);
        the words in ``keep`` always (boundary tokens, injected markers)."""
        counts = Counter(t for tokens in token_lists for t in (set(tokens) if documents else tokens))
        keep = set(keep)
        words = sorted((w for w, c in counts.items() if c >= min_count or w in keep), key=lambda w: (-counts[w], w))
        return cls(words + sorted(keep - set(words)))

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, tokens: list[str]) -> list[int]:
        return [self.stoi.get(t, UNK_ID) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[i] for i in ids]
