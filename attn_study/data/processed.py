"""Tokenise, filter, build the vocabulary and encode a dataset source — cached on disk.

The cache key is a hash of the source's fingerprint (a digest of its files' contents, or its generator
settings) and the preprocessing options, so every job of a sweep that shares them tokenises once. A
cache entry is written to a temporary file and renamed into place, then a marker records its size and
checksum; an entry whose marker is missing or disagrees, or that fails to load, is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import pickle
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attn_study import ranges
from attn_study.data.example import SPLITS, RawExample
from attn_study.data.markers import Injection
from attn_study.data.text import (
    CLEANINGS,
    DIGIT_RULES,
    EOS,
    NONWORD_RUNS,
    SOS,
    Vocab,
    tokenize_many,
    tokenize_sentences_many,
)
from attn_study.errors import DataError
from attn_study.io import atomic_open, write_text_atomic

log = logging.getLogger(__name__)
CACHE_FORMAT = 9  # bump when the processed layout, the tokenisation or the marker draws change


@dataclass
class ProcessedSplit:
    """Encoded instances of one split: token ids per instance and aligned metadata."""

    ids: list[np.ndarray]
    labels: np.ndarray
    uids: list[str]
    query_ids: list[np.ndarray] | None = None
    rationales: list[tuple[int, ...] | None] | None = None
    sentence_lengths: list[np.ndarray] | None = None  # tokens per sentence, for hierarchical models
    candidates: list[tuple[int, ...]] | None = None  # allowed answers per instance (QA)
    markers: list[tuple[int, ...]] | None = None  # positions of injected marker tokens (dataset.inject)
    boundary: bool = False  # every sequence is <sos> … <eos> (the model sees them, the statistics do not)
    fixed_attention: list[np.ndarray] | None = None  # another run's α per instance (attention=preloaded, W&P)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def lengths(self) -> np.ndarray:
        return np.fromiter((len(x) for x in self.ids), dtype=np.int64, count=len(self.ids))


@dataclass
class ProcessedDataset:
    """All splits, the vocabulary, and what preprocessing did (counts kept and filtered per split)."""

    name: str
    num_classes: int
    label_names: list[str]
    vocab: Vocab
    splits: dict[str, ProcessedSplit]
    stats: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Preprocessing:
    """Options applied to every split. Length bounds are inclusive and count passage tokens.

    ``min_length``/``max_length``: instances outside [min_length, max_length] are dropped (counted
    and logged per split). ``truncate``: passages longer than this are cut to their first
    ``truncate`` tokens (applied after the length filter). ``min_count``: vocabulary words must occur
    at least this often in the training split; rarer words map to ``<unk>``. ``sentences``: also
    record the sentence boundaries of each passage (spaCy's rule-based sentencizer) in
    ``ProcessedSplit.sentence_lengths``, for hierarchical models; truncation cuts the last sentences.
    ``inject``: label-independent marker tokens added to every instance after the filter and the
    truncation (``attn_study.data.markers``; the bounds count the text without them).
    ``clean``: ``remove_non_word`` or ``keras`` cleaning before tokenising (``text.clean``);
    ``digits``: ``qqq`` (a token with a decimal digit becomes ``qqq``), ``qqq_isdigit`` (one with a character
    whose ``str.isdigit()`` holds, as Jain & Wallace's ``cleaner``) or ``keep``; ``lowercase``: lower-case every
    token (their bAbI keeps the case); ``nonword_runs``: ``last_char`` re-splits the tokens by their 20News
    ``cleaner_20`` (``text.collapse_nonword_runs``: stand-alone punctuation deleted); ``vocab_count``: ``total``
    (``min_count`` counts occurrences) or ``documents`` (documents, as scikit-learn's ``min_df``);
    ``vocab_texts``: the vocabulary is counted over the ``kept`` training instances (after the length filter
    and truncation) or over ``all`` of them (their ``CountVectorizer``, fitted before ``DatasetBC``'s filter);
    ``vocab_order``: ids by ``frequency`` or ``alphabetical`` (theirs: ``<sos>`` 2, ``<eos>`` 3, then the words
    sorted; ``text.Vocab.build``); ``boundary_tokens``: wrap every passage as ``<sos> … <eos>`` (after the
    filter: the bounds count the text without them). ``drop_longest`` / ``drop_shortest``: also drop the longest /
    shortest instances of each split — Jain & Wallace's ``filterbylength`` keeps min_length < n < max_length with
    a bound it is not given set to the split's own shortest or longest length, so it loses them (their SST Table 1
    counts, 6355 / 1725, need ``drop_longest``; their AG News, given neither, both). These are their pipeline
    (``recipe=jain_wallace``).
    """

    min_count: int = 1
    min_length: int = 1
    max_length: int | None = None
    truncate: int | None = None
    sentences: bool = False
    inject: dict | None = None
    clean: str | None = None
    digits: str = "qqq"
    lowercase: bool = True
    nonword_runs: str | None = None
    vocab_count: str = "total"
    vocab_texts: str = "kept"
    vocab_order: str = "frequency"
    boundary_tokens: bool = False
    drop_longest: bool = False
    drop_shortest: bool = False

    def __post_init__(self):
        for option in ("min_count", "min_length", "max_length", "truncate"):
            ranges.require(f"dataset.preprocessing.{option}", getattr(self, option), DataError)
        if self.max_length is not None and self.max_length < self.min_length:
            raise DataError(f"dataset.preprocessing.max_length={self.max_length} is below min_length={self.min_length}")
        for option, value, allowed in (
            ("clean", self.clean, CLEANINGS),
            ("digits", self.digits, DIGIT_RULES),
            ("nonword_runs", self.nonword_runs, NONWORD_RUNS),
            ("vocab_count", self.vocab_count, ("total", "documents")),
            ("vocab_texts", self.vocab_texts, ("kept", "all")),
            ("vocab_order", self.vocab_order, ("frequency", "alphabetical")),
        ):
            if value not in allowed:
                raise DataError(f"dataset.preprocessing.{option}={value}: choose from {list(allowed)}")
        for option, value, default in (
            ("boundary_tokens", self.boundary_tokens, False),
            ("nonword_runs", self.nonword_runs, None),
            ("lowercase", self.lowercase, True),
        ):
            if self.sentences and value != default:
                raise DataError(
                    f"dataset.preprocessing.{option}={value} does not work with sentence-level models (model=han)"
                )
        if self.inject and self.sentences:
            raise DataError("dataset.inject does not work with sentence-level models (model=han); use model=flat")
        Injection.from_config(self.inject)  # a bad option fails here, before anything is read


def cache_key(source, prep: Preprocessing) -> str:
    blob = json.dumps(
        {"format": CACHE_FORMAT, "source": source.fingerprint(), "prep": prep.__dict__}, sort_keys=True, default=str
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def load_or_build(source, prep: Preprocessing, cache_dir: str | Path | None) -> ProcessedDataset:
    """The processed dataset from the cache when a complete, intact entry exists, else built and cached.

    The entry's key is a digest of the source's *content* (``attn_study.data.digest``) and the
    options; its marker ``COMPLETE`` records the size and BLAKE2b digest of ``dataset.pkl``, checked
    on every load, so a damaged entry (flipped bits, a truncated copy) is rebuilt, never used."""
    if cache_dir is None:
        return build(source, prep)
    entry = Path(cache_dir).expanduser() / f"{source.name}-{cache_key(source, prep)}"
    data, marker = entry / "dataset.pkl", entry / "COMPLETE"
    if marker.is_file() and data.is_file():
        try:
            expected = json.loads(marker.read_text())
            blob = data.read_bytes()
            if expected == _checksum(blob):
                dataset = pickle.loads(blob)
                log.info("processed %s loaded from cache %s", source.name, entry)
                return dataset
            log.warning("cache entry %s does not match its checksum (damaged or incomplete); rebuilding it", entry)
        except (ValueError, OSError, EOFError, pickle.UnpicklingError, AttributeError, TypeError) as err:
            log.warning("cache entry %s is unreadable (%s); rebuilding it", entry, err)
    dataset = build(source, prep)
    try:
        _write_atomic(entry, dataset)
    except OSError as err:  # a read-only (or full) cache: the run goes on with the dataset built in memory
        log.warning(
            "cache %s cannot be written (%s): the processed dataset is not cached, every run builds it "
            "again; set ATTN_STUDY_CACHE or paths.cache_dir to a writable folder",
            cache_dir,
            err.strerror or err,
        )
    return dataset


def _checksum(blob: bytes) -> dict:
    return {"size": len(blob), "blake2b": hashlib.blake2b(blob, digest_size=20).hexdigest()}


def _write_atomic(entry: Path, dataset: ProcessedDataset) -> None:
    entry.mkdir(parents=True, exist_ok=True)
    (entry / "COMPLETE").unlink(missing_ok=True)
    blob = pickle.dumps(dataset, protocol=pickle.HIGHEST_PROTOCOL)
    with atomic_open(entry / "dataset.pkl", "wb") as handle:
        handle.write(blob)
    write_text_atomic(entry / "COMPLETE", json.dumps(_checksum(blob)))


Kept = list[tuple[RawExample, list[str], list[str] | None]]  # (example, passage tokens, query tokens) per instance


def build(source, prep: Preprocessing) -> ProcessedDataset:
    """Read the source, tokenise, filter by length, build the vocabulary, encode."""
    tokenized, sentence_lengths, stats, train_tokens = _tokenize_and_filter(source, source.load(), prep)
    rationales = _clip_rationales(tokenized)
    injection = Injection.from_config(prep.inject)
    markers = _inject(injection, tokenized, rationales, source, stats)
    if prep.boundary_tokens:
        _add_boundaries(tokenized, rationales, markers)
    keep = ((SOS, EOS) if prep.boundary_tokens else ()) + (injection.tokens if prep.inject else ())
    vocab = _build_vocab(train_tokens if prep.vocab_texts == "all" else _kept_tokens(tokenized["train"]), prep, keep)
    stats["vocab_size"] = len(vocab)
    splits = {
        split: _encode(
            source,
            split,
            kept,
            vocab,
            rationales[split],
            sentence_lengths.get(split),
            markers.get(split),
            prep.boundary_tokens,
        )
        for split, kept in tokenized.items()
    }
    return ProcessedDataset(
        name=source.name,
        num_classes=source.num_classes,
        label_names=list(source.label_names),
        vocab=vocab,
        splits=splits,
        stats=stats,
    )


def _tokenize_and_filter(
    source, raw: dict[str, list[RawExample]], prep: Preprocessing
) -> tuple[dict[str, Kept], dict[str, list[np.ndarray]], dict, list[list[str]]]:
    """Tokenise and length-filter every split, in ``SPLITS`` order: (kept instances per split, their sentence
    lengths per split when ``prep.sentences``, ``stats`` with the read/kept/dropped counts per split, the token
    lists of every training instance before the filter — its passages, then its queries when it has any).

    Raises DataError when a split is empty, or when the filter removes all of one; logs the counts."""
    tokenized: dict[str, Kept] = {}
    sentence_lengths: dict[str, list[np.ndarray]] = {}
    stats: dict = {}
    train_tokens: list[list[str]] = []
    for split in SPLITS:
        examples = raw.get(split) or []
        if not examples:
            raise DataError(f"dataset {source.name}: the {split} split is empty; check dataset.path")
        texts, sentences, queries = _tokenize(examples, prep)
        if split == "train":
            train_tokens = texts + (queries or [])
        kept, kept_sentences, too_short, too_long = _length_filter(examples, texts, sentences, queries, prep)
        extremes = {"longest": (0, None), "shortest": (0, None)}
        for extreme in extremes:
            if getattr(prep, f"drop_{extreme}") and kept:
                kept, kept_sentences, dropped, length = _drop_extreme(kept, kept_sentences, extreme)
                extremes[extreme] = (dropped, length)
        stats[split] = {
            "read": len(examples),
            "kept": len(kept),
            "too_short": too_short,
            "too_long": too_long,
            "longest": extremes["longest"][0],
            **({"shortest": extremes["shortest"][0]} if prep.drop_shortest else {}),
        }
        lengths = {extreme: length for extreme, (_, length) in extremes.items()}
        log.info("%s/%s: %s", source.name, split, filter_counts(stats[split], prep, lengths))
        if not kept:
            raise DataError(
                f"dataset {source.name}: the length filter [{prep.min_length}, {prep.max_length}] removes every "
                f"{split} instance; relax dataset.preprocessing.min_length / max_length"
            )
        tokenized[split] = kept
        if sentences is not None:
            sentence_lengths[split] = kept_sentences
    return tokenized, sentence_lengths, stats, train_tokens


def _tokenize(
    examples: list[RawExample], prep: Preprocessing
) -> tuple[list[list[str]], list | None, list[list[str]] | None]:
    """(passage tokens, sentence lengths per passage or None, query tokens or None) of one split's examples.

    With ``prep.sentences`` passages are tokenised with their sentence boundaries and ``prep.clean`` and
    ``prep.digits`` do not apply to them; otherwise they do, with ``prep.lowercase`` and ``prep.nonword_runs``.
    Queries (pair tasks: when the first example has one) are tokenised as passages are without sentences."""
    options = {
        "cleaning": prep.clean,
        "digits": prep.digits,
        "lowercase": prep.lowercase,
        "nonword_runs": prep.nonword_runs,
    }
    if prep.sentences:
        texts, sentences = map(list, zip(*tokenize_sentences_many(e.text for e in examples)))
    else:
        texts, sentences = tokenize_many((e.text for e in examples), **options), None
    queries = tokenize_many((e.query or "" for e in examples), **options) if examples[0].query is not None else None
    return texts, sentences, queries


def tokenize_texts(texts: list[str], prep: Preprocessing) -> list[list[str]]:
    """Texts a user types, tokenised as ``prep`` tokenises a dataset's passages (cleaning, tokeniser, case, digits;
    no length filter, no boundary tokens): what ``attn-study-explain`` shows a trained run."""
    return _tokenize([RawExample(uid=str(i), text=t, label=0) for i, t in enumerate(texts)], prep)[0]


def _length_filter(
    examples: list[RawExample],
    texts: list[list[str]],
    sentences: list | None,
    queries: list[list[str]] | None,
    prep: Preprocessing,
) -> tuple[Kept, list[np.ndarray], int, int]:
    """Keep the instances whose passage has ``prep.min_length``..``prep.max_length`` tokens (inclusive),
    cut to their first ``prep.truncate`` tokens (and their sentences with them): (kept instances, their
    sentence lengths — empty without ``sentences`` —, number dropped too short, number dropped too long)."""
    kept: Kept = []
    kept_sentences: list[np.ndarray] = []
    too_short, too_long = 0, 0
    for i, (example, tokens) in enumerate(zip(examples, texts)):
        if len(tokens) < prep.min_length:
            too_short += 1
        elif prep.max_length is not None and len(tokens) > prep.max_length:
            too_long += 1
        else:
            if prep.truncate is not None:
                tokens = tokens[: prep.truncate]
            kept.append((example, tokens, queries[i] if queries is not None else None))
            if sentences is not None:
                kept_sentences.append(_cut_sentences(sentences[i], len(tokens)))
    return kept, kept_sentences, too_short, too_long


def _drop_extreme(
    kept: Kept, kept_sentences: list[np.ndarray], extreme: str
) -> tuple[Kept, list[np.ndarray], int, int]:
    """Drop every instance of the split's ``longest`` or ``shortest`` passage length (Jain & Wallace's
    ``n < max_length`` or ``n > min_length`` with the split's own bound) with its sentence lengths: (kept
    instances, their sentence lengths, number dropped, that length)."""
    pick = max if extreme == "longest" else min
    bound = pick(len(tokens) for _, tokens, _ in kept)
    dropped = {i for i, (_, tokens, _) in enumerate(kept) if len(tokens) == bound}
    kept = [k for i, k in enumerate(kept) if i not in dropped]
    kept_sentences = [k for i, k in enumerate(kept_sentences) if i not in dropped]
    return kept, kept_sentences, len(dropped), bound


def filter_counts(counts: dict, prep: Preprocessing, lengths: dict[str, int | None] | None = None) -> str:
    """``3000 read, 2990 kept; dropped: 4 shorter than 2 tokens, 5 longer than 50 tokens, 1 of the split's
    longest length 61 (drop_longest)`` — each drop with its reason, a reason that dropped nothing left out;
    ``lengths``: the split's longest and shortest length that ``drop_longest`` / ``drop_shortest`` dropped."""
    lengths = lengths or {}
    reasons = [
        (counts["too_short"], f"shorter than {prep.min_length} token{'s' if prep.min_length != 1 else ''}"),
        (counts["too_long"], f"longer than {prep.max_length} tokens"),
        *(
            (counts.get(extreme, 0), f"of the split's {extreme} length {lengths.get(extreme)} (drop_{extreme})")
            for extreme in ("longest", "shortest")
        ),
    ]
    dropped = [f"{n} {reason}" for n, reason in reasons if n]
    return f"{counts['read']} read, {counts['kept']} kept" + (f"; dropped: {', '.join(dropped)}" if dropped else "")


def _clip_rationales(tokenized: dict[str, Kept]) -> dict[str, list[tuple[int, ...] | None]]:
    """Per split, each kept instance's rationale without the positions that truncation cut off (None: none)."""
    return {
        split: [None if e.rationale is None else tuple(i for i in e.rationale if i < len(t)) for e, t, _ in kept]
        for split, kept in tokenized.items()
    }


def _kept_tokens(train: Kept) -> list[list[str]]:
    """The token lists of the kept training instances: their passages, then their queries (pair tasks)."""
    return [t for _, t, _ in train] + [q for _, _, q in train if q is not None]


def _build_vocab(token_lists: list[list[str]], prep: Preprocessing, keep: tuple[str, ...]) -> Vocab:
    """The vocabulary of the training passages and queries ``token_lists`` (pair tasks: the query words share
    the passage's vocabulary and embedding table; ``prep.vocab_texts`` says which instances), counted per
    ``prep.vocab_count``, cut at ``prep.min_count`` and numbered per ``prep.vocab_order``; the ``keep`` tokens
    (boundary tokens, markers) are always in it."""
    return Vocab.build(
        token_lists,
        min_count=prep.min_count,
        keep=keep,
        documents=prep.vocab_count == "documents",
        order=prep.vocab_order,
    )


def _encode(
    source,
    split: str,
    kept: Kept,
    vocab: Vocab,
    rationales: list,
    sentence_lengths: list | None,
    markers: list | None,
    boundary: bool,
) -> ProcessedSplit:
    """One split's kept instances as token ids with their labels and metadata (queries, rationales and
    candidates when its first instance has them). Raises DataError on a label outside ``source.num_classes``."""
    has_query = kept[0][2] is not None
    has_rationale = kept[0][0].rationale is not None
    has_candidates = kept[0][0].candidates is not None
    encoded = ProcessedSplit(
        ids=[np.asarray(vocab.encode(tokens), dtype=np.int64) for _, tokens, _ in kept],
        labels=np.asarray([e.label for e, _, _ in kept], dtype=np.int64),
        uids=[e.uid for e, _, _ in kept],
        query_ids=[np.asarray(vocab.encode(q), dtype=np.int64) for _, _, q in kept] if has_query else None,
        rationales=rationales if has_rationale else None,
        candidates=[tuple(e.candidates) for e, _, _ in kept] if has_candidates else None,
        sentence_lengths=sentence_lengths,
        markers=markers,
        boundary=boundary,
    )
    labels = encoded.labels
    if labels.min() < 0 or labels.max() >= source.num_classes:
        raise DataError(f"dataset {source.name}/{split}: labels outside 0..{source.num_classes - 1}")
    return encoded


def _add_boundaries(tokenized: dict, rationales: dict, markers: dict) -> None:
    """Wrap every passage as ``<sos> … <eos>`` (in place); positions of rationales and markers move by one."""
    for split, kept in tokenized.items():
        for n, (example, tokens, query) in enumerate(kept):
            kept[n] = (example, [SOS, *tokens, EOS], query)
            if rationales[split][n] is not None:
                rationales[split][n] = tuple(i + 1 for i in rationales[split][n])
        if split in markers:
            markers[split] = [tuple(i + 1 for i in m) for m in markers[split]]


def _inject(injection: Injection | None, tokenized: dict, rationales: dict, source, stats: dict) -> dict:
    """Insert the markers into every kept instance (in place); per split the marker positions. The
    counts of each marker token per class go to ``stats[split]['markers']`` and the log."""
    if injection is None:
        return {}
    out = {}
    markers = set(injection.tokens)
    in_text = sum(1 for kept in tokenized.values() for _, tokens, _ in kept if markers.intersection(tokens))
    stats["markers_in_text"] = in_text  # texts that already hold a marker token: not label-independent markers
    for split, kept in tokenized.items():
        counts = {t: dict.fromkeys(source.label_names, 0) for t in injection.tokens}
        positions = []
        for n, (example, tokens, query) in enumerate(kept):
            tokens, slots, rationales[split][n] = injection.apply(tokens, rationales[split][n], split, example.uid)
            kept[n] = (example, tokens, query)
            positions.append(slots)
            for slot in slots:
                counts[tokens[slot]][source.label_names[example.label]] += 1
        out[split] = positions
        stats[split]["markers"] = counts
        log.info(
            "%s/%s: %d markers per instance injected, by token and class: %s",
            source.name,
            split,
            injection.count,
            counts,
        )
    return out


def _cut_sentences(lengths: list[int], total: int) -> np.ndarray:
    """Sentence lengths of a passage cut to its first ``total`` tokens: the sentences past the cut
    are dropped and the one it falls in is shortened, so the result sums to ``total``."""
    lengths = np.asarray(lengths, dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    keep = starts < total
    return np.minimum(lengths[keep], total - starts[keep]).astype(np.int64)
