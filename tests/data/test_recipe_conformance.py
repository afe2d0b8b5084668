"""``recipe=jain_wallace`` against Jain & Wallace's released code (github.com/successar/AttentionExplanation), one
dataset at a time: a handful of raw texts, written here in the dataset's canonical file format, go through the
recipe (``build_datamodule``, as a run builds its data) and come out as the tokens, ids and splits that the authors'
steps give.

Each expected value is written twice: by hand, for a few instances, with the authors' step that produces each token
named beside it; and by :class:`TheirCode` below, a re-implementation of their steps written from their files
(independent of ``attn_study``): spaCy's English tokenizer for their ``nlp``, scikit-learn's own
``fetch_20newsgroups``, ``train_test_split`` and ``CountVectorizer`` where their code called them.

Their files, and the steps each one does:

- ``preprocess/vectorizer.py``: ``cleaner`` (whitespace collapsed, spaCy tokens lower-cased, a token holding a
  character that ``str.isdigit()`` accepts → ``qqq``, joined by spaces); ``Vectorizer.fit`` (``CountVectorizer(
  tokenizer=split on " ", min_df=…, lowercase=False)`` on the training texts, ids = its column + 4 after ``<0>`` 0,
  ``<UNK>`` 1, ``<SOS>`` 2, ``<EOS>`` 3); ``texts_to_sequences`` (``<SOS> … <EOS>``, unknown words ``<UNK>``).
- ``preprocess/preprocess_data_BC.py`` / ``preprocess_data_QA.py``: the vocabulary fitted on every training text
  (and question), before any length filter.
- ``Trainers/DatasetBC.py``: ``filterbylength`` (min_length < n < max_length, a bound not given being the split's
  own shortest / longest length).
- ``preprocess/20News/20News.ipynb``: ``fetch_20newsgroups(subset='all', shuffle=True, remove=('headers',
  'footers', 'quotes'))``; the baseball then the hockey posts; ``cleaner_20``; empty texts dropped; two
  stratified ``train_test_split(test_size=0.2, random_state=13478)``.
- ``preprocess/SST/SST.ipynb``: ``tokenize`` (leaves joined; ``-LRB-`` removed, ``-RRB-`` → space; ``\\W`` →
  space; spaCy tokens lower-cased; no ``qqq``); neutral dropped, label = score ≥ 3.
- ``preprocess/IMDB/IMDB.ipynb``: reviews of < 400 tokens; ``train_test_split(train_size=0.8, random_state=1378)``
  of train, the train part of ``train_test_split(train_size=0.2, random_state=1378)`` of test.
- ``preprocess/ag_news/AGNews.ipynb``: classes 1 and 3, the description column, ``cleaner``; dev =
  ``train_test_split(train rows, test_size=0.15, random_state=16377)``.
- ``preprocess/Babi/Babi.ipynb``: ``_parse`` (statements without their final ".", joined by " . "; the question
  without "?"; no cleaner); dev = ``train_test_split(test_size=0.15, random_state=16377)``.
- ``preprocess/SNLI/SNLI.ipynb``: ``cleaner`` on premise and hypothesis, pairs with gold label "-" dropped.
"""

from __future__ import annotations

import codecs
import json
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import spacy
from sklearn.datasets import fetch_20newsgroups, load_files
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.model_selection import train_test_split

from attn_study.data.processed import ProcessedDataset
from attn_study.data.text import collapse_nonword_runs
from attn_study.data.twenty_news import fetch_order, strip_post
from attn_study.job.components import build_datamodule
from tests.data.canonical_files import write_cnn
from tests.helpers import compose_config

NLP = spacy.blank("en")


class TheirCode:
    """The authors' steps, re-implemented from their files (module docstring)."""

    @staticmethod
    def cleaner(text: str) -> str:
        """``preprocess/vectorizer.py``: ``cleaner``."""
        text = re.sub(r"\s+", " ", text.strip())
        words = [t.text.lower() for t in NLP(text)]
        return " ".join("qqq" if any(ch.isdigit() for ch in w) else w for w in words)

    @classmethod
    def cleaner_20(cls, text: str) -> str:
        """``preprocess/20News/20News.ipynb``: ``cleaner_20``."""
        text = re.sub(r"(\W)+", r" \1 ", cls.cleaner(text))
        return re.sub(r"\s+", " ", text).strip()

    @staticmethod
    def sst_tokenize(leaves: list[str]) -> str:
        """``preprocess/SST/SST.ipynb``: ``tokenize``."""
        text = " ".join(leaves).replace("-LRB-", "").replace("-RRB-", " ")
        text = re.sub(r"\s+", " ", re.sub(r"\W", " ", text)).strip()
        return " ".join(t.text.lower() for t in NLP(text))

    @staticmethod
    def vocabulary(train_texts: list[str], min_df: int) -> list[str]:
        """``Vectorizer.fit``: the words by id (``<0>``, ``<UNK>``, ``<SOS>``, ``<EOS>`` first, as ours spell them)."""
        vectorizer = CountVectorizer(
            tokenizer=lambda t: t.split(" "), token_pattern=None, min_df=min_df, lowercase=False
        )
        vectorizer.fit(train_texts)
        by_id = sorted(vectorizer.vocabulary_, key=vectorizer.vocabulary_.get)
        return ["<pad>", "<unk>", "<sos>", "<eos>", *by_id]

    @staticmethod
    def sequence(text: str, vocabulary: list[str]) -> list[int]:
        """``Vectorizer.texts_to_sequences``: ``<SOS>`` words ``<EOS>`` as ids."""
        ids = {w: i for i, w in enumerate(vocabulary)}
        return [2, *(ids.get(w, 1) for w in text.split(" ")), 3]

    @staticmethod
    def keep_by_length(sequences: dict[str, list[int]], min_length=None, max_length=None) -> set[str]:
        """``Trainers/DatasetBC.py``: ``filterbylength`` (lengths without the two boundary tokens)."""
        lengths = {uid: len(s) - 2 for uid, s in sequences.items()}
        low = min(lengths.values()) if min_length is None else min_length
        high = max(lengths.values()) if max_length is None else max_length
        return {uid for uid, n in lengths.items() if low < n < high}


def recipe_data(dataset: str, path: Path, cache: Path, *overrides: str) -> ProcessedDataset:
    """The processed dataset a ``recipe=jain_wallace`` run of ``dataset`` on ``path`` trains and tests on."""
    config = compose_config(
        "recipe=jain_wallace", f"dataset={dataset}", f"dataset.path={path}", f"paths.cache_dir={cache}", *overrides
    )
    data = build_datamodule(config)
    data.setup()
    return data.data


def split_ids(data: ProcessedDataset, split: str) -> dict[str, list[int]]:
    return {uid: ids.tolist() for uid, ids in zip(data.splits[split].uids, data.splits[split].ids)}


def tokens_of(data: ProcessedDataset, split: str, uid: str) -> list[str]:
    """The words of one instance, without ``<sos>`` and ``<eos>``."""
    return data.vocab.decode(split_ids(data, split)[uid][1:-1])


def their_splits_match(data: ProcessedDataset, texts: dict[str, dict[str, str]], min_df: int, **bounds) -> None:
    """Our vocabulary is theirs (fitted on every training text ``texts['train']``), and each split holds exactly the
    instances their length filter keeps, each as their ids."""
    vocabulary = TheirCode.vocabulary(list(texts["train"].values()), min_df)
    assert data.vocab.itos == vocabulary
    for split, by_uid in texts.items():
        sequences = {uid: TheirCode.sequence(text, vocabulary) for uid, text in by_uid.items()}
        kept = TheirCode.keep_by_length(sequences, **bounds)
        assert split_ids(data, split) == {uid: sequences[uid] for uid in kept}, split


# ------------------------------------------------------------------------------------------------ 20 Newsgroups

HEADER = "From: {who}@{where}.edu ({who})\nSubject: {subject}\nOrganization: {where}\nLines: {lines}\n\n"
# baseball: headers, an attribution and a quoted line, contractions, numbers, a URL, punctuation runs, a signature
# paragraph after a blank line
CLEMENS = HEADER.format(who="fan", where="univ", subject="Re: Clemens' ERA", lines=8) + (
    "In article <1993Apr5.1@x.edu>, other@x.edu (Other) writes:\n"
    "> Who's the best pitcher?\n"
    "I'd say Clemens -- his ERA was 2.41 in '92!!! See http://www.mlb.com/stats.\n"
    "He's 10x better, isn't he?\n"
    "\n"
    "Go Sox.\n"
)
# hockey: a 'Quoted from' line, a '|' quote, a footer after a line of dashes, a superscript digit, an e-mail
LEAFS = HEADER.format(who="puck", where="ice", subject="Playoffs", lines=7) + (
    "Quoted from the Globe:\n"
    "The Leafs' goalie made 35 saves (a record?) -- wow.\n"
    "| some quoted line\n"
    "Their rink is 2,000 ft\xb2 bigger; e-mail me at puck@ice.org ...\n"
    "--------\n"
    "Joe Puck, Toronto\n"
)
ONLY_QUOTES = HEADER.format(who="q", where="x", subject="Re: x", lines=2) + (
    "In article <a@b.edu>, c@d.edu (C) writes:\n> a quoted reply, nothing else\n"
)
BASEBALL_WORDS = "pitcher inning bullpen homer catcher shortstop dugout umpire".split()
HOCKEY_WORDS = "goalie puck rink slapshot defenseman powerplay faceoff zamboni".split()


def ordinary_post(n: int, words: list[str], length: int) -> str:
    """A post of ``length`` body words, with a header and a signature paragraph (which scikit-learn's footer rule
    removes); post ``n`` uses the words in its own order, so the texts differ."""
    body = " ".join(words[(n * 3 + i) % len(words)] for i in range(length))
    return HEADER.format(who=f"u{n}", where="site", subject=f"post {n}", lines=3) + f"{body}.\n\n-- \nuser {n}\n"


def write_bydate(root: Path) -> dict[str, str]:
    """A 20news-bydate tree of four newsgroups (the authors' order depends on all of them); returns
    ``{uid: post}`` of the baseball and hockey posts. File names mix lengths, so string order differs from
    numeric order, as in the release."""
    posts: dict[str, str] = {}
    plan = {
        ("train", "rec.sport.baseball"): 16,
        ("test", "rec.sport.baseball"): 6,
        ("train", "rec.sport.hockey"): 16,
        ("test", "rec.sport.hockey"): 6,
        ("train", "alt.atheism"): 3,
        ("test", "alt.atheism"): 2,
        ("train", "sci.med"): 4,
        ("test", "sci.med"): 1,
    }
    for (split, group), count in plan.items():
        folder = root / f"20news-bydate-{split}" / group
        folder.mkdir(parents=True)
        words = HOCKEY_WORDS if "hockey" in group else BASEBALL_WORDS
        for i in range(count):
            name = str(9990 + 7 * i + (1000 if split == "test" else 0))  # 9990 ... 10095: string order differs
            n = len(posts) + i
            length = (3, 520)[i % 2] if i in (1, 2) else 8 + i  # a post too short, one too long, the rest kept
            text = ordinary_post(n, words, length)
            if (split, group, i) == ("train", "rec.sport.baseball", 0):
                text = CLEMENS
            elif (split, group, i) == ("train", "rec.sport.hockey", 0):
                text = LEAFS
            elif (split, group, i) == ("train", "rec.sport.hockey", 3):
                text = ONLY_QUOTES
            elif (split, group) == ("train", "rec.sport.hockey") and i >= 12:
                text = HEADER.format(who="z", where="rink", subject="z", lines=1) + "The zamboni broke.\n"
            (folder / name).write_bytes(text.encode("latin-1"))
            if group in ("rec.sport.baseball", "rec.sport.hockey"):
                posts[f"{split}/{group}/{name}"] = text
    return posts


def their_20news(root: Path, data_home: Path) -> dict[str, dict[str, str]]:
    """``preprocess/20News/20News.ipynb`` on the tree at ``root``, scikit-learn doing its own part: the cleaned
    texts of each split by uid."""
    data_home.mkdir()
    cache = {half: load_files(root / f"20news-bydate-{half}", encoding="latin1") for half in ("train", "test")}
    (data_home / "20news-bydate_py3.pkz").write_bytes(codecs.encode(pickle.dumps(cache), "zlib_codec"))
    data20 = fetch_20newsgroups(
        data_home=str(data_home),
        subset="all",
        shuffle=True,
        remove=("headers", "footers", "quotes"),
        download_if_missing=False,
    )
    baseball = np.where(data20.target == data20.target_names.index("rec.sport.baseball"))[0]
    hockey = np.where(data20.target == data20.target_names.index("rec.sport.hockey"))[0]
    order = list(baseball) + list(hockey)
    uids = ["/".join(Path(data20.filenames[i]).parts[-3:]).replace("20news-bydate-", "") for i in order]
    strings = [TheirCode.cleaner_20(data20.data[i]) for i in order]
    target = [0 if i in set(baseball) else 1 for i in order]
    kept = [(u, s, t) for u, s, t in zip(uids, strings, target) if len(s) != 0]
    uids, strings, target = (list(x) for x in zip(*kept))
    train_idx, test_idx = train_test_split(range(len(strings)), stratify=target, test_size=0.2, random_state=13478)
    train_idx, dev_idx = train_test_split(
        train_idx, stratify=[target[i] for i in train_idx], test_size=0.2, random_state=13478
    )
    return {
        split: {uids[i]: strings[i] for i in idx}
        for split, idx in (("train", train_idx), ("dev", dev_idx), ("test", test_idx))
    }


@pytest.fixture(scope="module")
def news(tmp_path_factory) -> tuple[ProcessedDataset, ProcessedDataset, dict[str, dict[str, str]]]:
    """(the recipe's processed 20News, the same with every word in the vocabulary (min_df 1) to read the tokens,
    the authors' texts by split) on one bydate tree."""
    tmp = tmp_path_factory.mktemp("news")
    write_bydate(tmp / "bydate")
    every_word = recipe_data("twenty_news", tmp / "bydate", tmp / "cache", "dataset.preprocessing.min_count=1")
    theirs = their_20news(tmp / "bydate", tmp / "sklearn")
    return recipe_data("twenty_news", tmp / "bydate", tmp / "cache"), every_word, theirs


def find_split(data: ProcessedDataset, uid: str) -> str:
    return next(split for split in data.splits if uid in data.splits[split].uids)


def test_20news_a_post_is_their_tokens_step_by_step(news):
    _, data, _ = news
    uid = "train/rec.sport.baseball/9990"  # CLEMENS
    assert tokens_of(data, find_split(data, uid), uid) == [
        # scikit-learn's rules: the header, the 'In article ... writes:' and '> ...' lines and the signature
        # paragraph after the last blank line ('Go Sox.') are gone; cleaner: spaCy's tokens, lower-cased, each
        # with a digit (2.41, 92, 10x) qqq; cleaner_20: every stand-alone punctuation token (--, the ' before 92,
        # ! ! !, the . after the URL, ,) deleted, punctuation inside a token split off as its last character
        # ('d, 's, n't, ://), the text-final ? kept
        *("i", "'", "d", "say", "clemens", "his", "era", "was", "qqq", "in", "qqq", "see"),
        *("http", "/", "www", ".", "mlb", ".", "com", "/", "stats"),
        *("he", "'", "s", "qqq", "better", "is", "n", "'", "t", "he", "?"),
    ]
    uid = "train/rec.sport.hockey/9990"  # LEAFS
    assert tokens_of(data, find_split(data, uid), uid) == [
        # 'Quoted from' and '|' lines gone, the footer from the dashes line on gone; ft² is qqq (str.isdigit);
        # spaCy splits e-mail into e - mail, so its - stands alone and goes; the final '...' leaves one '.'
        *("the", "leafs", "goalie", "made", "qqq", "saves", "a", "record", "wow", "their", "rink", "is"),
        *("qqq", "qqq", "bigger", "e", "mail", "me", "at", "puck", "@", "ice", ".", "org", "."),
    ]


def test_20news_splits_vocabulary_and_ids_are_theirs(news):
    data, _, theirs = news
    assert "train/rec.sport.hockey/10011" not in theirs["train"] | theirs["dev"] | theirs["test"]  # ONLY_QUOTES
    their_splits_match(data, theirs, min_df=2, min_length=6, max_length=500)
    for split in ("dev", "test"):  # each split in the order scikit-learn's draws give (their CSV's order)
        kept = [u for u in theirs[split] if u in data.splits[split].uids]
        assert data.splits[split].uids == kept


def test_20news_vocabulary_counts_the_texts_the_length_filter_drops(news):
    """The premise that makes the vocabulary test able to fail: on this tree, the words of the training posts that
    the filter drops (the four 'The zamboni broke.' posts) change the vocabulary: 'broke' is in no other post."""
    data, _, theirs = news
    kept = [text for uid, text in theirs["train"].items() if 6 < len(text.split(" ")) < 500]
    assert "broke" in data.vocab.itos and "broke" not in TheirCode.vocabulary(kept, min_df=2)


# ------------------------------------------------------------------------------------------------ SST


def tree(label: int, words: list[str]) -> str:
    """A PTB tree of ``words`` (two or more) with root ``label``, branching right, the leaves labelled 2."""
    node = f"(2 {words[-1]})"
    for word in reversed(words[:-1]):
        node = f"({label} (2 {word}) {node})"
    return node


SST_FILES = {
    "train": [
        tree(4, "It 's a -LRB- well-made , -RRB- 2\\/3 brilliant film .".split()),
        tree(1, "The plot does n't work at all ...".split()),
        tree(2, "A neutral one that is dropped".split()),
        tree(3, "Short good".split()),
        tree(0, "Not a single good moment in this mess".split()),
        tree(3, "A long sentence that is the longest one of this split".split()),
    ],
    "dev": [
        tree(3, "A film that works -LRB- mostly -RRB-".split()),
        tree(1, "It is n't worth the time .".split()),
        tree(4, "An utterly charming and funny little movie for kids".split()),
    ],
    "test": [
        tree(0, "The worst film of the year !".split()),
        tree(4, "A must-see for every fan of the genre".split()),
        tree(3, "Fine and warm -LRB- mostly -RRB- .".split()),
    ],
}


def write_sst(folder: Path) -> Path:
    folder.mkdir()
    for split, lines in SST_FILES.items():
        (folder / f"{split}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def their_sst() -> dict[str, dict[str, str]]:
    """``preprocess/SST/SST.ipynb`` on the three files: the non-neutral sentences' texts by our uid
    (``<split>-<line>``)."""
    out = {}
    for split, lines in SST_FILES.items():
        out[split] = {}
        for number, line in enumerate(lines, start=1):
            if line[1] != "2":  # the root's label
                leaves = re.findall(r"\(\d ([^()\s]+)\)", line)  # a leaf: a label and a word in brackets
                out[split][f"{split}-{number}"] = TheirCode.sst_tokenize(leaves)
    return out


def test_sst_is_their_tokens_vocabulary_filter_and_ids(tmp_path):
    data = recipe_data("sst", write_sst(tmp_path / "sst"), tmp_path / "cache")
    # tokenize: -LRB- removed, -RRB- a space, every \W a space (the hyphen of well-made, the , . ' and 2\/3's
    # slashes), spaCy's tokens lower-cased, digits kept
    assert tokens_of(data, "train", "train-1") == ["it", "s", "a", "well", "made", "2", "3", "brilliant", "film"]
    assert tokens_of(data, "dev", "dev-2") == ["it", "is", "n", "t", "<unk>", "the", "<unk>"]  # not in train
    # filterbylength(min_length=5): n > 5, and n below each split's longest (no max_length given):
    # train-4 (2 words) and the longest of each split (train-6, dev-3, test-2) go; dev-1 and test-3 have 5 and 4
    assert data.splits["train"].uids == ["train-1", "train-2", "train-5"]
    assert (data.splits["dev"].uids, data.splits["test"].uids) == (["dev-2"], ["test-1"])
    their_splits_match(data, their_sst(), min_df=1, min_length=5)


def test_sst_a_filtered_sentence_still_counts_in_the_vocabulary(tmp_path):
    """'Short good' (2 words) fails n > 5, yet CountVectorizer saw it: 'short' is a word of the vocabulary."""
    data = recipe_data("sst", write_sst(tmp_path / "sst"), tmp_path / "cache")
    assert "train-4" not in data.splits["train"].uids and "short" in data.vocab.itos


# ------------------------------------------------------------------------------------------------ IMDB

REVIEWS = {
    ("train", "pos", "0_9"): "Bromwell High's satire is great!<br /><br />I'd watch it again: 10/10.",
    ("train", "pos", "1_8"): "A fine, warm film; the cast is superb and the story moves.",
    ("train", "pos", "2_10"): "Loved it.",
    ("train", "neg", "0_2"): "The plot was a mess -- and the acting? Worse.<br />Skip it, really.",
    ("train", "neg", "1_1"): "Boring boring boring film, the worst I've seen this year by far.",
    ("train", "neg", "2_3"): " ".join(["long"] * 400),
    **{
        ("train", "pos" if i % 2 else "neg", f"{i}_{8 if i % 2 else 3}"): f"Film {i}: the cast and the story "
        + " ".join(["fine" if i % 2 else "dull"] * i)
        + "."
        for i in range(3, 9)
    },
    **{
        ("test", "pos" if i % 2 else "neg", f"{i}_{7 if i % 2 else 2}"): f"Review {i} of the film: "
        + " ".join(["good" if i % 2 else "bad"] * (6 + i))
        + ".<br />The end."
        for i in range(10)
    },
}


def keras_words(review: str) -> list[str]:
    """Keras' ``text_to_word_sequence`` (lower-cased, its punctuation filter, split on spaces): the words of
    Keras' ``imdb_full.pkl``, their input, whose ``<br />`` breaks are left as the word ``br``."""
    filtered = review.lower().translate({ord(c): " " for c in '!"#$%&()*+,-./:;<=>?@[\\]^_`{|}~\t\n'})
    return [w for w in filtered.split(" ") if w]


def test_imdb_is_their_filter_split_vocabulary_and_ids(tmp_path):
    for (split, polarity, name), review in REVIEWS.items():
        folder = tmp_path / "aclImdb" / split / polarity
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.txt").write_text(review, encoding="utf-8")
    # min_df 2 instead of their 10, so that the six training reviews leave words in the vocabulary
    data = recipe_data("imdb", tmp_path / "aclImdb", tmp_path / "cache", "dataset.preprocessing.min_count=2")
    # Keras' words: each break the word br, the apostrophes kept, the digits kept (no qqq); 'bromwell', 'satire',
    # 'watch', 'again', '10' occur in no other training review (min_df 2)
    assert tokens_of(data, "train", "train/pos/0_9") == [
        *("<unk>", "<unk>", "<unk>", "is", "<unk>", "br", "br", "<unk>", "<unk>", "it", "<unk>", "<unk>", "<unk>"),
    ]
    # IMDB.ipynb: the reviews of < 400 words, in uid order; train_test_split(train_size=0.8, random_state=1378)
    # gives train and dev, the train part of train_test_split(train_size=0.2, random_state=1378) is test
    short = {
        split: sorted(f"{s}/{p}/{n}" for (s, p, n), r in REVIEWS.items() if s == split and len(keras_words(r)) < 400)
        for split in ("train", "test")
    }
    train, dev = train_test_split(short["train"], train_size=0.8, random_state=1378)
    test, _ = train_test_split(short["test"], train_size=0.2, random_state=1378)
    words = {f"{s}/{p}/{n}": " ".join(keras_words(r)) for (s, p, n), r in REVIEWS.items()}
    theirs = {name: {u: words[u] for u in part} for name, part in (("train", train), ("dev", dev), ("test", test))}
    their_splits_match(data, theirs, min_df=2, min_length=6)  # IMDB_dataset: min_length=6, no max_length


# ------------------------------------------------------------------------------------------------ AG News

AG_ROWS = {  # Zhang et al.'s CSV: "class","title","description"; a newline is written backslash, n
    "train": [
        '"1","Iraq talks resume","Baghdad (Reuters) - Talks resume in the capital today, officials said; 3 sides '
        'attend the first round."',
        '"3","Stocks rally","NEW YORK - Stocks rose 2% on Monday\\nas oil fell to $40 a barrel."',
        '"2","Sox win","Boston - Sports rows are dropped."',
        '"3","Oil slips","Oil slips as supply fears ease, traders said on Monday."',
        '"1","Summit ends","Leaders said the summit ends today with a deal on trade."',
        '"4","New chip","Sci/Tech rows are dropped too."',
        '"3","Tiny","Short."',
        *(
            f'"{(1, 3)[i % 2]}","Title {i}","Officials said the markets and talks went on as planned today, {i}."'
            for i in range(14)
        ),
    ],
    "test": [
        '"1","Vote count","Officials said the vote count goes on today."',
        '"3","Profit up","Profit rose 5% on strong sales, the company said."',
        '"1","Peace deal","A peace deal was signed today, officials said, after talks on the border and trade."',
        '"3","Tiny","Up."',
    ],
}


def test_ag_news_is_their_rows_text_dev_split_vocabulary_and_ids(tmp_path):
    folder = tmp_path / "ag_news_csv"
    folder.mkdir()
    for split, rows in AG_ROWS.items():
        (folder / f"{split}.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    data = recipe_data("ag_news", folder, tmp_path / "cache", "dataset.source.dev_size=3")
    # AGNews.ipynb: classes 1 and 3 only, the description alone (its \n as written), cleaner
    rows = {split: [r.split('","') for r in AG_ROWS[split]] for split in AG_ROWS}
    kept = {split: [(i + 1, r) for i, r in enumerate(rows[split]) if r[0] in ('"1', '"3')] for split in rows}
    texts = {split: {f"{split}-{n}": TheirCode.cleaner(r[2].rstrip('"')) for n, r in kept[split]} for split in kept}
    # dev: train_test_split(the train rows, test_size=0.15, random_state=16377), here test_size=3 (dev_size)
    train_rows, dev_rows = train_test_split(list(texts["train"]), test_size=3, random_state=16377)
    theirs = {
        "train": {u: texts["train"][u] for u in train_rows},
        "dev": {u: texts["train"][u] for u in dev_rows},
        "test": texts["test"],
    }
    their_splits_match(data, theirs, min_df=5)  # AGNews_dataset: no bounds (each split's shortest and longest go)
    every_word = recipe_data(
        "ag_news", folder, tmp_path / "cache", "dataset.source.dev_size=3", "dataset.preprocessing.min_count=1"
    )
    # cleaner on the description alone (not the title 'Stocks rally'): spaCy's tokens lower-cased, punctuation kept,
    # 2% and $40 split and their digits qqq, the escaped newline kept inside a token, as pandas reads it
    assert tokens_of(every_word, "train", "train-2") == [
        *("new", "york", "-", "stocks", "rose", "qqq", "%", "on", "monday\\nas", "oil", "fell", "to", "$"),
        *("qqq", "a", "barrel", "."),
    ]
    # 'Short.' (train-7, 2 tokens) is dev's shortest and 'Up.' test's: filterbylength without bounds drops them
    assert "train-7" in theirs["dev"] and "train-7" not in data.splits["dev"].uids
    assert "test-4" not in data.splits["test"].uids


# ------------------------------------------------------------------------------------------------ bAbI

BABI = """1 Mary moved to the bathroom.
2 John went to the hallway.
3 Where is Mary? \tbathroom\t1
4 Daniel went back to the hallway.
5 Where is Daniel? \thallway\t4
1 Sandra journeyed to the garden.
2 Mary travelled to the office.
3 Where is Sandra? \tgarden\t1
4 John moved to the kitchen.
5 Where is John? \tkitchen\t4
1 Daniel went to the kitchen.
2 Where is Daniel? \tkitchen\t1
3 Sandra moved to the office.
4 Where is Sandra? \toffice\t3
"""
BABI_TASKS = ("qa1_single-supporting-fact", "qa2_two-supporting-facts", "qa3_three-supporting-facts")


def their_babi_parse(text: str) -> list[tuple[str, str, str]]:
    """``preprocess/Babi/Babi.ipynb``: ``_parse``, then the passage joined by " . ": (passage, question, answer)."""
    data, story = [], []
    for line in text.strip("\n").split("\n"):
        tid, rest = line.split(" ", 1)
        if tid == "1":
            story = []
        if rest.endswith("."):
            story.append(rest[:-1])
        else:
            query, answer, _ = (x.strip() for x in rest.split("\t"))
            data.append((" . ".join(x for x in story if x), query[:-1], answer))
            story.append("")
    return data


def test_babi_is_their_passages_questions_dev_split_vocabulary_and_ids(tmp_path):
    for variant in ("en", "en-10k"):
        folder = tmp_path / "tasks_1-20_v1-2" / variant
        folder.mkdir(parents=True)
        for task in BABI_TASKS:
            for split in ("train", "test"):
                (folder / f"{task}_{split}.txt").write_text(BABI, encoding="utf-8")
    data = recipe_data("babi1", tmp_path / "tasks_1-20_v1-2", tmp_path / "cache", "dataset.source.variant=en")
    # no cleaner: the words keep their case; the statements lose their '.', joined by ' . '; the '?' goes
    questions = their_babi_parse(BABI)
    passage = tokens_of(data, "test", "test-10")  # line 10: the second story's 'Where is John?'
    assert passage == [
        *("Sandra", "journeyed", "to", "the", "garden", ".", "Mary", "travelled", "to", "the", "office", "."),
        *("John", "moved", "to", "the", "kitchen"),
    ]
    assert passage == questions[3][0].split(" ")
    query = data.splits["test"].query_ids[data.splits["test"].uids.index("test-10")].tolist()
    assert data.vocab.decode(query) == ["Where", "is", "John"]
    # dev: train_test_split(the train file's questions, test_size=0.15, random_state=16377), file order kept
    lines = [f"train-{n}" for n, line in enumerate(BABI.strip("\n").split("\n"), start=1) if "\t" in line]
    train_rows, dev_rows = train_test_split(range(len(lines)), test_size=0.15, random_state=16377)
    assert data.splits["dev"].uids == [lines[i] for i in sorted(dev_rows)]
    assert data.splits["train"].uids == [lines[i] for i in sorted(train_rows)]
    # preprocess_data_QA.py: CountVectorizer(min_df=1) on the training passages and questions
    train_texts = [questions[i][0] for i in train_rows] + [questions[i][1] for i in train_rows]
    assert data.vocab.itos == TheirCode.vocabulary(train_texts, min_df=1)


# ------------------------------------------------------------------------------------------------ SNLI

SNLI = {
    "train": [
        ("A man in 2 red shirts plays guitar.", "A man plays music.", "entailment"),
        ("Two dogs run through a field!", "The dogs are asleep.", "contradiction"),
        ("A woman's bike is parked outside.", "A bike is outside.", "-"),
        ("Kids play soccer in the park.", "Children are playing.", "entailment"),
        ("A man sleeps on 2 benches.", "A man is outside.", "neutral"),
    ],
    "dev": [("A man plays guitar.", "A man plays.", "entailment")],
    "test": [("Two men play guitar in the park.", "Men sleep.", "contradiction")],
}


def test_snli_is_their_cleaner_on_both_sentences_and_their_vocabulary(tmp_path):
    folder = tmp_path / "snli_1.0"
    folder.mkdir()
    for split, rows in SNLI.items():
        lines = [
            json.dumps(
                {"pairID": f"{split}{i}", "sentence1": p, "sentence2": h, "gold_label": g, "annotator_labels": [g]}
            )
            for i, (p, h, g) in enumerate(rows)
        ]
        (folder / f"snli_1.0_{split}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = recipe_data("snli", folder, tmp_path / "cache", "dataset.preprocessing.min_count=2")
    # cleaner: spaCy's tokens lower-cased, 2 -> qqq, punctuation kept; the pair without a gold label dropped;
    # red, shirts, guitar are in one training sentence only (min_df 2)
    assert tokens_of(data, "train", "train0") == ["a", "man", "in", "qqq", "<unk>", "<unk>", "plays", "<unk>", "."]
    assert "train2" not in data.splits["train"].uids
    # preprocess_data_QA.py: CountVectorizer(min_df=...) on every training premise and hypothesis
    kept = [(p, h) for p, h, g in SNLI["train"] if g != "-"]
    texts = [TheirCode.cleaner(p) for p, _ in kept] + [TheirCode.cleaner(h) for _, h in kept]
    assert data.vocab.itos == TheirCode.vocabulary(texts, min_df=2)


# ------------------------------------------------------------------------------------------------ 20News pieces


def test_20news_post_order_is_fetch_20newsgroups_order(tmp_path):
    """:func:`fetch_order` on the tree's listing equals the order of scikit-learn's own ``fetch_20newsgroups(
    subset='all', shuffle=True)`` on the same tree (``load_files`` and both shuffles), all four newsgroups."""
    root = tmp_path / "bydate"
    write_bydate(root)
    listing = [(p.parts[-3].removeprefix("20news-bydate-"), p.parts[-2], p.name) for p in root.glob("*/*/*")]
    ours = ["/".join(post) for post in fetch_order(listing)]
    (tmp_path / "sklearn").mkdir()
    cache = {half: load_files(root / f"20news-bydate-{half}", encoding="latin1") for half in ("train", "test")}
    (tmp_path / "sklearn" / "20news-bydate_py3.pkz").write_bytes(codecs.encode(pickle.dumps(cache), "zlib_codec"))
    data20 = fetch_20newsgroups(data_home=str(tmp_path / "sklearn"), subset="all", download_if_missing=False)
    theirs = ["/".join(Path(f).parts[-3:]).replace("20news-bydate-", "") for f in data20.filenames]
    assert ours == theirs and ours != sorted(ours)


@pytest.mark.parametrize(
    "post",
    [
        CLEMENS,
        LEAFS,
        ONLY_QUOTES,
        "Subject: no body\nLines: 0\n",  # no blank line: all header
        "H: 1\n\nfirst\n\n\nsecond\n  --  \nthird\n",  # the last separator, with spaces around its dashes
        "H: 1\n\n\nonly line after blank lines\n\n",  # one line: nothing cut
        "H: 1\n\n--\nbody after a dashes line\n",  # the only separator is the first line: nothing cut
        "H: 1\n\nhe said: yes\nthey wrote:\n  > indented, kept\n|bar\nQuoted from x\nsays: a\nwrites in b\n",
        "H: 1\n\nIn article <x> y writes:\nIn article at the start\n In article not at the start\n",
        "H: 1\r\n\r\nCRLF lines\r\n\r\nsig\r\n",  # scikit-learn splits on \n only
    ],
)
def test_20news_strip_rules_are_scikit_learns(post):
    from sklearn.datasets import _twenty_newsgroups as sk

    expected = sk.strip_newsgroup_quoting(sk.strip_newsgroup_footer(sk.strip_newsgroup_header(post)))
    assert strip_post(post, "scikit_learn") == expected


def test_cleaner_20_by_hand():
    """``cleaner_20``'s rule on tokens: stand-alone punctuation goes, inner punctuation splits off as the run's last
    character, a final mark stays — and a text made of punctuation keeps its last character."""
    assert collapse_nonword_runs(["a", ",", "b", "--", "!", "c"]) == ["a", "b", "c"]
    assert collapse_nonword_runs(["it's", "e-mail", "a.b.c"]) == [
        "it",
        "'",
        "s",
        "e",
        "-",
        "mail",
        "a",
        ".",
        "b",
        ".",
        "c",
    ]
    assert collapse_nonword_runs(["end", "?", "!"]) == ["end", "!"]
    assert collapse_nonword_runs(["http://x.com"]) == ["http", "/", "x", ".", "com"]
    assert collapse_nonword_runs(["..."]) == ["."] and collapse_nonword_runs([]) == []
    assert collapse_nonword_runs(["under_score", "ok"]) == ["under_score", "ok"]  # _ is a word character


# ------------------------------------------------------------------------------------------------ split seeds


def test_every_split_the_recipe_draws_takes_dataset_source_split_seed_with_their_seed_by_default():
    seeds = {"twenty_news": 13478, "imdb": 1378, "ag_news": 16377, "babi1": 16377, "babi2": 16377, "babi3": 16377}
    for dataset, seed in seeds.items():
        assert compose_config("recipe=jain_wallace", f"dataset={dataset}").dataset.source.split_seed == seed, dataset


def test_a_split_seed_moves_the_20news_split_and_only_it(news, tmp_path):
    _, _, theirs = news
    root = tmp_path / "bydate"
    write_bydate(root)
    moved = recipe_data("twenty_news", root, tmp_path / "cache", "dataset.source.split_seed=7")
    assert set(moved.splits["test"].uids) != set(theirs["test"])
    every = {u for split in moved.splits.values() for u in split.uids}
    assert every == {
        u for split in recipe_data("twenty_news", root, tmp_path / "c2").splits.values() for u in split.uids
    }


# ------------------------------------------------------------------------------------------------ pair tasks


@pytest.mark.parametrize(
    ("dataset", "epochs", "batch"),
    [("snli", 25, 128), ("cnn_qa", 25, 90), ("babi1", 100, 50), ("babi2", 100, 50), ("babi3", 100, 50)],
)
def test_pair_tasks_train_as_their_qa_code(dataset, epochs, batch):
    """ExperimentsQA.py: 25 epochs unless the dataset sets n_iters (bAbI: 100); DatasetQA.py: bsize 128 (SNLI),
    90 (CNN), 50 (bAbI), save_on_metric 'accuracy'; Question_Answering.py: one Adam, weight decay 1e-5 on every
    parameter, the attention's included."""
    cfg = compose_config("recipe=jain_wallace", f"dataset={dataset}")
    assert (cfg.trainer.max_epochs, cfg.dataset.batch_size, cfg.callbacks.model_checkpoint.monitor) == (
        epochs,
        batch,
        "val/acc",
    )
    assert cfg.model.optimizer.weight_decay == cfg.model.optimizer.attention_weight_decay == 1e-5
    flat = compose_config("recipe=jain_wallace", "dataset=sst").model.optimizer  # Binary_Classification.py: exempt
    assert (flat.weight_decay, flat.attention_weight_decay) == (1e-5, 0.0)


def test_the_pair_models_optimiser_decays_the_attention_too(tmp_path):
    from attn_study.job.components import build_model

    folder = tmp_path / "tasks_1-20_v1-2" / "en"
    folder.mkdir(parents=True)
    for task in BABI_TASKS:
        for split in ("train", "test"):
            (folder / f"{task}_{split}.txt").write_text(BABI, encoding="utf-8")
    cfg = compose_config(
        "recipe=jain_wallace",
        "dataset=babi1",
        f"dataset.path={tmp_path / 'tasks_1-20_v1-2'}",
        "dataset.source.variant=en",
        f"paths.cache_dir={tmp_path / 'cache'}",
    )
    data = build_datamodule(cfg)
    data.setup()
    module = build_model(cfg, data)
    groups = module.configure_optimizers().param_groups
    scorer = {id(p) for n, p in module.model.named_parameters() if n.startswith("scorer.")}
    assert scorer and [g["weight_decay"] for g in groups if {id(p) for p in g["params"]} == scorer] == [1e-5]


# ------------------------------------------------------------------------------------------------ CNN and ADR


def test_cnn_vocabulary_counts_passages_and_questions_as_their_qa_preprocessing(tmp_path):
    """preprocess_data_QA.py: CountVectorizer(min_df=8) fitted on the training passages and the training
    questions, each a document, numbered after <0> <UNK> <SOS> <EOS>. (Their notebook reads Danqi Chen's
    preprocessed files, which this project does not; the .question texts here are already lower-cased tokens, on
    which spaCy's tokens are the space-separated words.) With min_df 2 on three stories, a word is kept when two
    passages or questions hold it."""
    files = {
        "training": {
            "a": ("@entity0 met @entity1 in paris .", "@placeholder met @entity1", "@entity0"),
            "b": ("@entity1 won in paris on friday .", "@placeholder won on friday", "@entity1"),
            "c": ("@entity2 lost on friday .", "@placeholder lost", "@entity2"),
        },
        "validation": {"d": ("@entity0 met @entity2 .", "@entity0 met @placeholder", "@entity2")},
        "test": {"e": ("@entity1 lost in paris .", "@placeholder lost", "@entity1")},
    }
    cnn = write_cnn(tmp_path, files)
    data = recipe_data("cnn_qa", cnn, tmp_path / "cache", "dataset.preprocessing.min_count=2")
    texts = [p for p, _, _ in files["training"].values()] + [q for _, q, _ in files["training"].values()]
    assert data.vocab.itos == TheirCode.vocabulary(texts, min_df=2)
    # @entity0 is in one training passage only (theirs would add it back: --add_answers_to_vocab, not reproduced)
    assert tokens_of(data, "train", "training/a") == ["<unk>", "met", "@entity1", "in", "paris", "."]


def test_adr_is_their_csv_text_split_on_spaces_with_their_vocabulary_and_bounds(tmp_path):
    """Their ADR CSV holds texts their cleaner already produced (qqq, lower case, spaCy's tokens joined by
    spaces), which the recipe's tokens reproduce; CountVectorizer(min_df=2) on every training text, the short one
    included; ADR_dataset: 5 < n < 100."""
    rows = [
        ("i took qqq mg of cymbalta and felt dizzy", "train"),
        ("cymbalta made me dizzy all day !", "train"),
        ("short : one dizzy day", "train"),
        ("felt fine on cymbalta today , no issues", "train"),
        ("dizzy again after the cymbalta dose", "dev"),
        ("no side effects from cymbalta at all", "test"),
        ("tiny", "test"),
    ]
    lines = ["text,label,split", *(f'"{text}",{n % 2},{split}' for n, (text, split) in enumerate(rows))]
    (tmp_path / "adr.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = recipe_data("adr", tmp_path / "adr.csv", tmp_path / "cache")
    theirs = {split: {} for split in ("train", "dev", "test")}
    for n, (text, split) in enumerate(rows, start=1):
        theirs[split][f"{split}-{n}"] = TheirCode.cleaner(text)
    assert all(TheirCode.cleaner(text) == text for text, _ in rows)  # the CSV is their cleaner's output
    their_splits_match(data, theirs, min_df=2, min_length=5, max_length=100)
    # 'day' is in two training texts, one of them (5 words) filtered out
    assert "day" in data.vocab.itos and "train-3" not in data.splits["train"].uids
