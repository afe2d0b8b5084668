"""A run's peak memory: the largest resident set of the process (and the largest CUDA allocation), from a reset
at the run's start — jobs of one sweep process each get their own peak."""

from __future__ import annotations

import resource
from pathlib import Path

import torch

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def reset_peak() -> None:
    """Start counting the peak anew: Linux's ``VmHWM`` (``5`` to ``/proc/self/clear_refs``) and CUDA's
    peak statistics. Where the process's peak cannot be reset, :func:`peak_mib` reports the process's."""
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        pass
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def peak_mib() -> dict[str, float]:
    """``run/peak_memory_mib``: the peak resident set since :func:`reset_peak` (Linux's ``VmHWM``; elsewhere the
    process's ``ru_maxrss``); ``run/peak_gpu_memory_mib``: the peak CUDA allocation, where CUDA is used."""
    try:
        line = next(x for x in _STATUS.read_text().splitlines() if x.startswith("VmHWM:"))
        peak = float(line.split()[1]) / 1024  # kB
    except (OSError, StopIteration):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux (bytes on macOS: rare here)
    out = {"run/peak_memory_mib": peak}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["run/peak_gpu_memory_mib"] = torch.cuda.max_memory_allocated() / 2**20
    return out
