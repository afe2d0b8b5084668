"""Text normalisation and vocabulary, as in Jain & Wallace (2019).

Tokens come from spaCy's rule-based English tokenizer (``spacy.blank("en")``: no model download),
are lower-cased, and any token containing a digit becomes ``qqq`` — except the anonymised entity
markers of cloze QA (``@entity13``), which are kept as they are.

Jain & Wallace's ``preprocess/vectorizer.py`` (``cleaner``) does the same: whitespace runs collapsed, spaCy's
English tokens, each lower-cased, a token holding a character for which ``str.isdigit()`` is true replaced by
``qqq`` (``digits="qqq_isdigit"``: that test also counts superscripts such as ``²``, which the default ``\\d``
does not), re-joined with single spaces; their 20News notebook then runs ``cleaner_20``
(:func:`collapse_nonword_runs`). Their vectorizer later splits the text on single spaces.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache

PAD, UNK = "<pad>", "<unk>"
PAD_ID, UNK_ID = 0, 1
SOS, EOS = "<sos>", "<eos>"  # boundary tokens (Jain & Wallace's recipe: dataset.preprocessing.boundary_tokens)
DIGIT_TOKEN = "qqq"
_HAS_DIGIT = re.compile(r"\d")
_ENTITY = re.compile(r"@entity\d+")
_WHITESPACE = re.compile(r"\s+")
_NONWORD_RUN = re.compile(r"(\W)+")


@lru_cache(maxsize=1)
def _spacy_tokenizer():
    import spacy

    return spacy.blank("en").tokenizer


_NON_WORD = re.compile(r"\W")
_KERAS_FILTERS = re.compile("[" + re.escape('!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n') + "]")
#: text cleanings applied before tokenising (``dataset.preprocessing.clean``)
CLEANINGS = (None, "remove_non_word", "keras")
#: what becomes of a token holding a digit (``dataset.preprocessing.digits``): ``qqq`` when it holds a decimal
#: digit (regex ``\d``), ``qqq`` when ``str.isdigit()`` holds for one of its characters (Jain & Wallace's
#: ``cleaner``), or kept
DIGIT_RULES = ("qqq", "qqq_isdigit", "keep")
#: re-splitting the tokens (``dataset.preprocessing.nonword_runs``): none, or Jain & Wallace's ``cleaner_20``
NONWORD_RUNS = (None, "last_char")


def _has_digit(token: str, digits: str) -> bool:
    if digits == "qqq":
        return _HAS_DIGIT.search(token) is not None
    return digits == "qqq_isdigit" and any(ch.isdigit() for ch in token)


def normalise(token: str, digits: str = "qqq", lowercase: bool = True) -> str:
    """Lower-cased (unless ``lowercase`` is false); a token holding a digit becomes ``qqq`` by the rule ``digits``
    (:data:`DIGIT_RULES`); entity markers ``@entityN`` are kept as they are."""
    if _ENTITY.fullmatch(token):
        return token
    if _has_digit(token, digits):
        return DIGIT_TOKEN
    return token.lower() if lowercase else token


def collapse_nonword_runs(tokens: list[str]) -> list[str]:
    """Jain & Wallace's ``cleaner_20`` (``preprocess/20News/20News.ipynb``) on already cleaned tokens: the tokens
    joined by single spaces, every maximal run of non-word characters (``\\W``, spaces included) replaced by its
    last character with a space on each side, whitespace collapsed, the text split on spaces again.

    Since the tokens are space-separated, a run that ends between two tokens ends in a space and so vanishes:
    every stand-alone punctuation token is deleted (``a , b`` → ``a b``; ``-- !`` between words likewise). A run
    inside a token is split off as its last character (``it's`` → ``it ' s``, ``http://x.com`` → ``http / x . com``),
    and a run at the very end of the text keeps its last character (``end .`` → ``end .``)."""
    text = _WHITESPACE.sub(" ", _NONWORD_RUN.sub(r" \1 ", " ".join(tokens))).strip()
    return text.split(" ") if text else []


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
    texts: Iterable[str],
    batch_size: int = 1000,
    cleaning: str | None = None,
    digits: str = "qqq",
    lowercase: bool = True,
    nonword_runs: str | None = None,
) -> list[list[str]]:
    """``tokenize`` over many texts, using spaCy's batched ``pipe``; ``cleaning`` (see :func:`clean`)
    first, then each token normalised (:func:`normalise` with ``digits`` and ``lowercase``), then, with
    ``nonword_runs="last_char"``, :func:`collapse_nonword_runs`. ``keras`` splits on whitespace
    instead of spaCy, as Keras does."""
    cleaned = (_WHITESPACE.sub(" ", clean(t, cleaning)).strip() for t in texts)
    if cleaning == "keras":
        docs = [[normalise(w, digits, lowercase) for w in t.split(" ") if w] for t in cleaned]
    else:
        docs = [
            [normalise(t.text, digits, lowercase) for t in doc if not t.is_space]
            for doc in _spacy_tokenizer().pipe(cleaned, batch_size=batch_size)
        ]
    return [collapse_nonword_runs(tokens) for tokens in docs] if nonword_runs == "last_char" else docs


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
    """Word ↔ id map with ``<pad>`` = 0 and ``<unk>`` = 1 (``unk_id``), built from training tokens."""

    unk_id = UNK_ID

    def __init__(self, words: Iterable[str]):
        self.itos: list[str] = [PAD, UNK]
        self.itos += [w for w in words if w not in (PAD, UNK)]
        self.stoi: dict[str, int] = {w: i for i, w in enumerate(self.itos)}

    @classmethod
    def build(
        cls,
        token_lists: Iterable[list[str]],
        min_count: int = 1,
        keep: Sequence[str] = (),
        documents: bool = False,
        order: str = "frequency",
    ) -> Vocab:
        """Words seen at least ``min_count`` times — in that many documents with ``documents`` (a
        document frequency, as scikit-learn's ``min_df``) — and the words in ``keep`` always (boundary tokens,
        injected markers).

        ``order="frequency"``: most frequent first (ties alphabetical), a ``keep`` word too rare to be placed
        so after them (sorted). ``order="alphabetical"``: the ``keep`` words first, in the order given, then the
        other words sorted by code point — scikit-learn's ``CountVectorizer`` numbers its vocabulary so, and
        Jain & Wallace's ``Vectorizer`` adds 4 to it after ``<0>`` 0, ``<UNK>`` 1, ``<SOS>`` 2, ``<EOS>`` 3."""
        counts = Counter(t for tokens in token_lists for t in (set(tokens) if documents else tokens))
        if order == "alphabetical":
            return cls(list(keep) + sorted(w for w, c in counts.items() if c >= min_count and w not in keep))
        kept = set(keep)
        words = sorted((w for w, c in counts.items() if c >= min_count or w in kept), key=lambda w: (-counts[w], w))
        return cls(words + sorted(kept - set(words)))

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, tokens: list[str]) -> list[int]:
        return [self.stoi.get(t, UNK_ID) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[i] for i in ids]
