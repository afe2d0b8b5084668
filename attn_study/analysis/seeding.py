"""Random numbers that belong to an instance, not to a batch.

Every random choice of the analyses (permutations, adversary initialisations, random items and rankings,
tie-breaking keys) is drawn from (seed, instance index, stream) alone, so the batch size, the device, the
tests that run beside it and a resumed run never change an instance's numbers: results on a GPU with
large batches equal those of a CPU with small ones (up to floating-point rounding of the models).

A stream is a number, one per use. The shared code's are named here (:data:`SHARED_STREAMS`); a family names its
own in its callback's ``STREAMS`` (``AnalysisCallback.draws``), so a family that draws random numbers, or a copy of
one, changes nothing outside its folder. Never renumber a stream: it would change published results.
"""

from __future__ import annotations

import numpy as np
import torch

#: the shared code's streams, name → number (a family's own streams take other numbers): the importance method
#: ``random``'s ranking (``importance.methods``)
SHARED_STREAMS = {"random_importance": 1}


def instance_draws(
    index: torch.Tensor,
    mask: torch.Tensor,
    seed: int,
    stream: int,
    leading: tuple[int, ...] = (),
    normal: bool = False,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """(B, *leading, T) draws, uniform on [0, 1) or standard normal (``normal``), on ``mask``'s device:
    row r, instance ``index[r]``, gets ``leading × n`` values from ``numpy.random.default_rng([seed,
    index, stream])`` at its n real items (``mask`` (B, T) True: tokens, or sentences of a HAN), 0 elsewhere."""
    out = torch.zeros((mask.shape[0], *leading, mask.shape[1]), dtype=torch.float64)
    real = mask.cpu()
    for row, instance in enumerate(index.tolist()):
        rng = np.random.default_rng([seed, instance, int(stream)])
        shape = (*leading, int(real[row].sum()))
        out[row, ..., real[row]] = torch.from_numpy(rng.standard_normal(shape) if normal else rng.random(shape))
    return out.to(device=mask.device, dtype=dtype)
