"""Tiny datasets in the canonical formats of every source (SST PTB trees, aclImdb, 20 Newsgroups
bydate, Zhang et al. CSV, bAbI, CNN .question, SNLI jsonl, user CSV) and the archives they ship in:
the constants and the writers; the pytest fixtures that use them are in conftest.py."""

from __future__ import annotations

import json
import tarfile
import zipfile
from pathlib import Path

# ---------------------------------------------------------------- SST (PTB trees) and aclImdb

SST_TREES = {
    "train": [
        "(3 (2 It) (3 (2 (2 's) (3 good)) (2 .)))",
        "(0 (0 Awful) (2 (2 -LRB-) (2 (2 really) (2 -RRB-))))",
        "(2 (2 Just) (2 (2 a) (2 film)))",
        "(4 (4 Brilliant) (3 (2 n't) (2 1\\/2)))",
        "(1 (2 -LSB-) (1 (1 dull) (2 -RSB-)))",
    ],
    "dev": [
        "(2 (2 So) (2 so))",
        "(1 (1 Bad) (2 \\*))",
        "(3 (2 -LCB-) (3 (3 fine) (2 -RCB-)))",
    ],
    "test": [
        "(4 Great)",
        "(0 (0 Terrible) (2 .))",
        "(2 (2 Meh) (2 .))",
    ],
}

# (split, polarity) -> review file names <id>_<rating>.txt
IMDB_FILES = {
    ("train", "pos"): ["0_9", "1_7", "2_10", "3_8", "10_9"],
    ("train", "neg"): ["0_3", "1_1", "2_4", "3_2", "11_1"],
    ("test", "pos"): ["0_10", "1_7", "2_8"],
    ("test", "neg"): ["0_1", "1_4", "2_2"],
}


def write_sst_trees(folder: Path) -> Path:
    """Write train.txt, dev.txt, test.txt of SST_TREES into ``folder``; return it."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, lines in SST_TREES.items():
        (folder / f"{split}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def write_tarball(root: Path, archive: Path, reverse: bool = False) -> Path:
    """Pack the ``aclImdb`` folder ``root`` into ``archive`` (gzip); members reversed if asked."""
    paths = sorted(root.rglob("*"), reverse=reverse)
    with tarfile.open(archive, "w:gz") as tar:
        for path in paths:
            tar.add(path, arcname=f"aclImdb/{path.relative_to(root).as_posix()}", recursive=False)
    return archive


# ---------------------------------------------------------------- 20 Newsgroups (bydate, latin-1)

NEWS_HEADER = "From: fan{n}@univ.edu (A Fan)\nSubject: Re: post {n}\nOrganization: Univ\nLines: 9\n"
# one post that exercises every cleaning rule: its expected cleaned text is NEWS_SPECIAL_CLEAN
NEWS_SPECIAL = (
    "From: fan@univ.edu (A Fan)\n"
    "Subject: Re: Best pitcher\n"
    "Lines: 14\n"
    "\n"
    "In article <1993Apr5.1@x.edu>, other@x.edu (Other) writes:\n"
    "> Who is the best pitcher?\n"
    "|> nested quote\n"
    "   > indented quote\n"
    "I think the best pitcher is Clemens, caf\xe9 owner.\n"
    "In article <abc@def.edu>, someone@somewhere.com (Some One)\n"
    "writes:\n"
    "Joe Smith wrote:\n"
    "A line -- with dashes -- inside.\n"
    "--\n"
    "not the signature yet\n"
    "-- \n"
    "A Fan  fan@univ.edu\n"
)
NEWS_SPECIAL_CLEAN = (
    "I think the best pitcher is Clemens, caf\xe9 owner.\n"
    "A line -- with dashes -- inside.\n"
    "--\n"  # only the last '--' line starts the signature
    "not the signature yet"
)
# (split, newsgroup) -> post ids; the special post is train/rec.sport.baseball/104 and a post without
# any blank line (all header) is train/rec.sport.hockey/207
NEWS_POSTS = {
    ("train", "rec.sport.baseball"): [101, 102, 103, 104, 105, 106],
    ("train", "rec.sport.hockey"): [201, 202, 203, 204, 205, 206, 207, 208],
    ("test", "rec.sport.baseball"): [301, 302],
    ("test", "rec.sport.hockey"): [401, 402, 403],
    ("train", "comp.graphics"): [501],
    ("test", "comp.graphics"): [601],
}


def news_body(split: str, group: str, n: int) -> str:
    """The cleaned text of an ordinary fixture post."""
    return f"Post {n} of {group} in {split} about the game."


def write_news_tree(root: Path) -> Path:
    """Write ``root/20news-bydate-{train,test}/<group>/<id>`` (latin-1, CRLF-free); return ``root``."""
    for (split, group), ids in NEWS_POSTS.items():
        folder = root / f"20news-bydate-{split}" / group
        folder.mkdir(parents=True, exist_ok=True)
        for n in ids:
            if n == 104:
                text = NEWS_SPECIAL
            elif n == 207:
                text = NEWS_HEADER.format(n=n) + "no blank line, so this is header too\n"
            else:
                text = (
                    NEWS_HEADER.format(n=n)
                    + "\n"
                    + f"> quoted {n}\n"
                    + news_body(split, group, n)
                    + "\n"
                    + "-- \n"
                    + f"sig {n}\n"
                )
            (folder / str(n)).write_bytes(text.encode("latin-1"))
    return root


def write_tree_tarball(root: Path, archive: Path, prefix: str = "") -> Path:
    """Pack every file below ``root`` into the .tar.gz ``archive``, member names ``<prefix><relative>``."""
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(root.rglob("*")):
            tar.add(path, arcname=f"{prefix}{path.relative_to(root).as_posix()}", recursive=False)
    return archive


# ---------------------------------------------------------------- Zhang et al. (2015) CSV

# hand-written AG News rows, exactly as the release writes them (every field quoted, "" inside)
AG_TRAIN_HEAD = [
    '"3","Wall St. Bears Claw Back Into the Black (Reuters)","Reuters - Short-sellers, Wall Street\'s '
    'dwindling\\band of ""ultra-cynics"", are seeing green again."',
    '"1","Iraq Says ""No"", Again","Baghdad - A line\\nanother line, with a comma."',
    '"2","Sox win","Boston, MA - ""Finally,"" said the fan."',
    '"4","New chip","A faster chip\\n\\nfor laptops"',
]
AG_TRAIN_HEAD_PARSED = [
    (
        3,
        "Wall St. Bears Claw Back Into the Black (Reuters) Reuters - Short-sellers, Wall Street's "
        'dwindling\\band of "ultra-cynics", are seeing green again.',
    ),
    (1, 'Iraq Says "No", Again Baghdad - A line another line, with a comma.'),
    (2, 'Sox win Boston, MA - "Finally," said the fan.'),
    (4, "New chip A faster chip  for laptops"),
]


def zhang_rows(classes: int, per_class: int, fields: int, tag: str) -> list[str]:
    """Generated rows ``"k","<tag> k i f",...`` cycling through classes 1..``classes``."""
    rows = []
    for i in range(per_class):
        for k in range(1, classes + 1):
            cells = [f'"{k}"'] + [f'"{tag} {k} {i} field{f}"' for f in range(fields)]
            rows.append(",".join(cells))
    return rows


def write_zhang_csv(folder: Path, train: list[str], test: list[str]) -> Path:
    """Write ``train.csv`` and ``test.csv`` (one row per line, LF endings) into ``folder``; return it."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train", train), ("test", test)):
        (folder / f"{name}.csv").write_text("".join(row + "\n" for row in rows), encoding="utf-8")
    (folder / "classes.txt").write_text("World\nSports\nBusiness\nSci/Tech\n", encoding="utf-8")
    (folder / "readme.txt").write_text("AG's News Topic Classification Dataset\n", encoding="utf-8")
    return folder


def write_ag_news(parent: Path, per_class: int = 6) -> Path:
    """``parent/ag_news_csv`` with AG_TRAIN_HEAD plus generated rows; return the ag_news_csv folder."""
    train = AG_TRAIN_HEAD + zhang_rows(4, per_class, 2, "train")
    test = ['"1","World, today","Text with ""quotes"" and\\na break"'] + zhang_rows(4, 2, 2, "test")
    return write_zhang_csv(parent / "ag_news_csv", train, test)


# ---------------------------------------------------------------- bAbI v1.2

BABI_TRAIN = """1 Mary moved to the bathroom.
2 John went to the hallway.
3 Where is Mary? \tbathroom\t1
4 Daniel went back to the hallway.
5 Sandra moved to the garden.
6 Where is Daniel? \thallway\t4
7 John moved to the office.
8 Sandra journeyed to the bathroom.
9 Where is Sandra? \tbathroom\t8
1 Sandra travelled to the office.
2 Mary went to the kitchen.
3 Where is Sandra? \toffice\t1
4 Mary moved to the garden.
5 Where is Mary? \tgarden\t4
6 John went to the kitchen.
7 Where is John? \tkitchen\t6
8 Daniel went to the garden.
9 Where is Daniel? \tgarden\t8
10 Mary went to the office.
11 Where is Mary? \toffice\t10
"""
BABI_TEST = """1 John travelled to the hallway.
2 Mary journeyed to the bathroom.
3 Where is John? \thallway\t1
4 Daniel went back to the bathroom.
5 John moved to the garden.
6 Where is John? \tgarden\t5
"""
BABI_TASK1 = "qa1_single-supporting-fact"


def write_babi(
    root: Path,
    variants: tuple[str, ...] = ("en", "en-10k"),
    train: str = BABI_TRAIN,
    test: str = BABI_TEST,
    tasks: tuple[str, ...] = (BABI_TASK1,),
) -> Path:
    """``root/tasks_1-20_v1-2/<variant>/<task>_{train,test}.txt`` (the same text for every task);
    return the tasks_1-20_v1-2 folder."""
    release = root / "tasks_1-20_v1-2"
    for variant in variants:
        folder = release / variant
        folder.mkdir(parents=True, exist_ok=True)
        for task in tasks:
            (folder / f"{task}_train.txt").write_text(train, encoding="utf-8")
            (folder / f"{task}_test.txt").write_text(test, encoding="utf-8")
    (release / "README").write_text("bAbI tasks v1.2\n", encoding="utf-8")
    return release


# ---------------------------------------------------------------- CNN .question files


def question_file(passage: str, question: str, answer: str, entities: dict[int, str]) -> str:
    """The text of one ``.question`` file (url, passage, question, answer, entity map)."""
    mapping = "".join(f"@entity{k}:{name}\n" for k, name in sorted(entities.items()))
    return (
        f"http://web.archive.org/web/20150101/http://www.cnn.com/2015/01/01/story.html\n\n{passage}\n\n"
        f"{question}\n\n{answer}\n\n{mapping}"
    )


# folder -> file stem -> (passage, question, answer); the entities' names are generated
CNN_FILES = {
    "training": {
        "0a1b": (
            "@entity0 , @entity1 ( @entity2 ) -- @entity1 police said @entity3 was arrested .",
            "@placeholder police arrested @entity3",
            "@entity1",
        ),
        "9f8e": ("@entity4 met @entity0 in @entity7 on friday .", "@entity4 met @placeholder on friday", "@entity0"),
        "5c5c": ("@entity2 won the final against @entity5 .", "@placeholder won the final", "@entity2"),
    },
    "validation": {"1111": ("@entity3 visited @entity9 and @entity1 .", "@entity3 visited @placeholder", "@entity1")},
    "test": {"2222": ("@entity6 beat @entity0 .", "@placeholder beat @entity0", "@entity6")},
}


def write_cnn(root: Path, files: dict[str, dict[str, tuple[str, str, str]]] | None = None) -> Path:
    """``root/cnn/questions/<folder>/<stem>.question``; return the cnn folder."""
    cnn = root / "cnn"
    for folder, stems in (CNN_FILES if files is None else files).items():
        (cnn / "questions" / folder).mkdir(parents=True, exist_ok=True)
        for stem, (passage, question, answer) in stems.items():
            numbers = {
                int(t.removeprefix("@entity"))
                for t in f"{passage} {question} {answer}".split()
                if t.startswith("@entity")
            }
            text = question_file(passage, question, answer, {k: f"Name {k}" for k in numbers})
            (cnn / "questions" / folder / f"{stem}.question").write_text(text, encoding="utf-8")
    return cnn


# ---------------------------------------------------------------- SNLI 1.0 jsonl


def snli_line(pair_id: str, premise: str, hypothesis: str, gold: str, votes: list[str]) -> str:
    """One line of snli_1.0_<split>.jsonl with all the fields the release has."""
    return json.dumps(
        {
            "annotator_labels": votes,
            "captionID": pair_id.split("#")[0] + "#0",
            "gold_label": gold,
            "pairID": pair_id,
            "sentence1": premise,
            "sentence1_binary_parse": "( " + " ".join(premise.split()) + " )",
            "sentence1_parse": "(ROOT (S " + premise + "))",
            "sentence2": hypothesis,
            "sentence2_binary_parse": "( " + " ".join(hypothesis.split()) + " )",
            "sentence2_parse": "(ROOT (S " + hypothesis + "))",
        }
    )


SNLI_ROWS = {
    "train": [
        (
            "3416050480.jpg#4r1n",
            "A person on a horse jumps over a broken down airplane.",
            "A person is training his horse for a competition.",
            "neutral",
            ["neutral"],
        ),
        (
            "3416050480.jpg#4r1c",
            "A person on a horse jumps over a broken down airplane.",
            "A person is at a diner, ordering an omelette.",
            "contradiction",
            ["contradiction"],
        ),
        (
            "3416050480.jpg#4r1e",
            "A person on a horse jumps over a broken down airplane.",
            "A person is outdoors, on a horse.",
            "entailment",
            ["entailment"],
        ),
        (
            "2267923837.jpg#2r1n",
            "Children smiling and waving at camera",
            "They are smiling at their parents",
            "-",
            ["neutral", "entailment", "contradiction", "neutral", "entailment"],
        ),
    ],
    "dev": [
        (
            "4705552913.jpg#2r1n",
            "Two women are embracing while holding to go packages.",
            "The sisters are hugging goodbye.",
            "neutral",
            ["neutral", "entailment", "neutral", "neutral", "neutral"],
        ),
        (
            "4705552913.jpg#2r1e",
            "Two women are embracing while holding to go packages.",
            "Two woman are holding packages.",
            "entailment",
            ["entailment"] * 5,
        ),
    ],
    "test": [
        (
            "2677109430.jpg#1r1n",
            "This church choir sings to the masses as they sing joyous songs.",
            "The church has cracks in the ceiling.",
            "neutral",
            ["neutral"] * 5,
        ),
        (
            "2677109430.jpg#1r1x",
            'A "quoted" premise, with unicode caf\u00e9.',
            "Nobody agrees.",
            "-",
            ["neutral", "contradiction", "entailment", "neutral", "contradiction"],
        ),
        (
            "2677109430.jpg#1r1c",
            "This church choir sings to the masses as they sing joyous songs.",
            "A choir singing at a baseball game.",
            "contradiction",
            ["contradiction"] * 5,
        ),
    ],
}


def write_snli(parent: Path) -> Path:
    """``parent/snli_1.0/snli_1.0_{train,dev,test}.jsonl`` (plus the .txt siblings); return snli_1.0."""
    folder = parent / "snli_1.0"
    folder.mkdir(parents=True, exist_ok=True)
    for split, rows in SNLI_ROWS.items():
        (folder / f"snli_1.0_{split}.jsonl").write_text(
            "".join(snli_line(*row) + "\n" for row in rows), encoding="utf-8"
        )
        (folder / f"snli_1.0_{split}.txt").write_text("gold_label\tsentence1\n", encoding="utf-8")
    (folder / "README.txt").write_text("SNLI 1.0\n", encoding="utf-8")
    return folder


def write_snli_zip(folder: Path, archive: Path) -> Path:
    """``snli_1.0.zip`` as Stanford ships it: ``snli_1.0/...`` members plus ``__MACOSX/`` debris."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        for path in sorted(folder.iterdir()):
            zipped.write(path, f"snli_1.0/{path.name}")
        zipped.writestr("__MACOSX/snli_1.0/._snli_1.0_train.jsonl", b"\x00\x05\x16\x07junk")
    return archive


# ---------------------------------------------------------------- user CSV (text,label,split)

USER_CSV = (
    "\ufeffid,text,label,split\n"
    '1,"i took DRUG and now my head hurts, badly",1,train\n'
    "2,feeling fine today,0,train\n"
    '3,"a ""quoted"" tweet\nover two lines",0,train\n'
    "4,DRUG gave me a rash,1,dev\n"
    "5,nothing to report,0,dev\n"
    "6,cannot sleep since DRUG,1,test\n"
    "7,lovely weather,0,test\n"
)


def write_user_csv(path: Path, text: str = USER_CSV) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
