"""Pretrained word vectors in the GloVe / fastText text format (plain or gzip).

One word per line followed by its vector; a fastText header line ``<count> <dim>`` is skipped.
Rows of the embedding matrix: the vector for words found, zeros for ``<pad>``, and for words missing
(``<unk>``, ``<sos>``, ``<eos>`` included) ``missing``: ``normal`` draws N(0, 1) from the seed, ``zero`` leaves
them 0 — what Jain & Wallace's code gives (torchtext's ``Vectors[word]`` returns a zero vector for a word
fastText or GloVe 840B lacks; their N(0, 1) draw is only on the gensim path, for MIMIC's vectors).
"""

from __future__ import annotations

import gzip
import logging
from pathlib import Path

import numpy as np

from attn_study.data.text import PAD_ID, Vocab
from attn_study.errors import DataError, UserError

log = logging.getLogger(__name__)

#: how the rows of words without a vector start (``model.embeddings.missing``)
MISSING = ("normal", "zero")


def _open_text(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def load_embeddings(
    path: str | Path, vocab: Vocab, dim: int, seed: int = 0, missing: str = "normal"
) -> tuple[np.ndarray, float]:
    """Embedding matrix (len(vocab), dim) for ``vocab`` and the fraction of vocabulary words found; the rows of
    words the file lacks are N(0, 1) draws from ``seed`` (``missing='normal'``) or 0 (``'zero'``).

    Raises DataError when the file is missing, empty of vectors, its vectors are not ``dim`` wide, or the vector of
    a vocabulary word holds a NaN or an infinity (training would diverge on it).
    """
    if missing not in MISSING:
        raise UserError(f"model.embeddings.missing={missing}: choose one of {', '.join(MISSING)}")
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"model.embeddings.path={path}: file not found; give a GloVe/fastText .txt or .txt.gz file")
    rng = np.random.default_rng(seed)
    shape = (len(vocab), dim)
    matrix = rng.standard_normal(shape).astype(np.float32) if missing == "normal" else np.zeros(shape, np.float32)
    found = np.zeros(len(vocab), dtype=bool)
    n_vectors = 0
    try:
        with _open_text(path) as handle:
            for line_no, line in enumerate(handle, 1):
                parts = line.rstrip().split(" ")
                if line_no == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                    continue  # fastText header: "<count> <dim>"
                if len(parts) < 2:
                    continue
                if len(parts) - 1 != dim:
                    raise DataError(
                        f"{path}:{line_no}: vector has {len(parts) - 1} values but model.network.embedding_dim={dim}; "
                        f"set model.network.embedding_dim={len(parts) - 1} or use a {dim}-d file"
                    )
                n_vectors += 1
                idx = vocab.stoi.get(parts[0])
                if idx is not None and not found[idx]:
                    try:
                        vector = np.asarray(parts[1:], dtype=np.float32)
                    except ValueError as err:
                        raise DataError(f"{path}:{line_no}: not a number in the vector ({err})") from None
                    if not np.isfinite(vector).all():
                        first = int(np.flatnonzero(~np.isfinite(vector))[0])
                        raise DataError(
                            f"{path}:{line_no}: the vector of {parts[0]!r} holds {parts[1 + first]} (its value "
                            f"{first + 1}), which training cannot use; fix or delete that line"
                        )
                    matrix[idx] = vector
                    found[idx] = True
    except (OSError, EOFError, UnicodeDecodeError) as err:
        raise DataError(
            f"{path}: cannot read embeddings ({err}); check the file is a complete GloVe/fastText text file"
        ) from None
    if n_vectors == 0:
        raise DataError(f"{path}: no vectors found; expected lines '<word> <v1> ... <v{dim}>'")
    matrix[PAD_ID] = 0.0
    words = len(vocab) - 2
    coverage = float(found[2:].sum() / words) if words else 0.0
    if coverage == 0.0:
        raise DataError(
            f"{path}: none of the {words} vocabulary words has a vector (model.embeddings.path); check the "
            "file is for this language and lower-cased like the tokens, or set model.embeddings.path=null"
        )
    log.info(
        "embeddings %s: %d vectors read, %.1f%% of %d vocabulary words found", path, n_vectors, 100 * coverage, words
    )
    return matrix, coverage
