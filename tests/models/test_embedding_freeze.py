"""``model.embeddings.freeze`` (conf/model/*.yaml; attn_study/job/components.py → models/classifier.py's embedding table
→ models/module.py's optimiser): frozen, the pretrained vectors a run reads are the table it tests, bit for bit, after
any number of training steps; not frozen, training moves them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attn_study.job.components import build_datamodule, build_model
from tests.helpers import TINY, compose_config, quiet_trainer


def trained_table(tmp_path, *overrides: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(the embedding table as built, the table after 6 training steps) of the run ``TINY + overrides``."""
    cfg = compose_config(*TINY, "logger=none", "encoder.hidden_size=8", *overrides)
    datamodule = build_datamodule(cfg)
    datamodule.setup()
    module = build_model(cfg, datamodule)
    before = module.model.embedding.weight.detach().clone()
    trainer = quiet_trainer(tmp_path, max_steps=6, limit_val_batches=0)
    trainer.fit(module, datamodule=datamodule)
    assert trainer.global_step == 6
    return before, module.model.embedding.weight.detach()


def vectors_for_every_word(tmp_path, dim: int = 16) -> tuple[str, dict[str, np.ndarray], list[str]]:
    """A vectors file (GloVe's text format) with a vector for every word of the TINY run's vocabulary but the
    special tokens: the file's path, its vectors and the vocabulary (id → word)."""
    cfg = compose_config(*TINY)
    datamodule = build_datamodule(cfg)
    datamodule.setup()
    rng = np.random.default_rng(5)
    vectors = {w: rng.uniform(-1, 1, dim).astype(np.float32) for w in datamodule.vocab.itos if not w.startswith("<")}
    path = tmp_path / "vectors.txt"
    path.write_text("".join(f"{w} {' '.join(repr(float(x)) for x in v)}\n" for w, v in vectors.items()))
    return str(path), vectors, datamodule.vocab.itos


@pytest.mark.parametrize("freeze", [True, False])
def test_frozen_pretrained_embeddings_are_the_files_vectors_after_training(tmp_path, freeze):
    path, vectors, itos = vectors_for_every_word(tmp_path)
    before, after = trained_table(tmp_path, f"model.embeddings.path={path}", f"model.embeddings.freeze={freeze}")
    rows = [i for i, w in enumerate(itos) if w in vectors]
    expected = torch.as_tensor(np.stack([vectors[itos[i]] for i in rows]))
    assert torch.equal(before[rows], expected)  # the table starts as the file's vectors
    if freeze:
        assert torch.equal(after, before)  # every row, the pretrained and the drawn ones, bit for bit
    else:
        assert not torch.equal(after[rows], expected)


def test_frozen_drawn_embeddings_stay_as_drawn(tmp_path):
    """Without a vectors file the table is drawn (N(0, 1)); frozen, it is still the drawn table after training."""
    before, after = trained_table(tmp_path, "model.embeddings.freeze=true")
    assert before.abs().sum() > 0 and torch.equal(after, before)
