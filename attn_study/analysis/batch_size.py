"""How many instances a family analyses at a time when its ``batch_size`` is null: as many as a token budget holds,
the longest analysed text deciding (its square where the work per instance is T × T), the budget fixed on a CPU and
half the free memory on a GPU."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class TokenBudget:
    """A family's budget (its callback's ``CPU_TOKENS``, ``CPU_MAX_BATCH``, ``GPU_BYTES_PER_TOKEN``,
    ``GPU_MAX_BATCH``, ``QUADRATIC``)."""

    cpu_tokens: int
    cpu_max_batch: int
    gpu_bytes_per_token: int
    gpu_max_batch: int
    quadratic: bool

    def batch_size(self, lengths: np.ndarray, device: torch.device) -> tuple[int, str]:
        """(size, how it was chosen) for texts of ``lengths`` on ``device``: the budget's tokens (on a GPU, half the
        free memory at ``gpu_bytes_per_token`` a token) over the longest text T — over T² when ``quadratic`` —, at
        least 1 and at most the device's cap; no text, or texts of one token, count as T = 1."""
        longest = max(int(lengths.max()) if len(lengths) else 1, 1)
        if device.type == "cuda":
            free = torch.cuda.mem_get_info(device)[0]
            tokens, cap = free // 2 // self.gpu_bytes_per_token, self.gpu_max_batch
            where = f"half of {free / 2**30:.0f} GiB free"
        else:
            tokens, cap, where = self.cpu_tokens, self.cpu_max_batch, "CPU"
        size = max(1, min(cap, int(tokens // (longest * longest if self.quadratic else longest))))
        return size, f"auto: {where}, {tokens} tokens, longest text {longest}{'²' if self.quadratic else ''}"
