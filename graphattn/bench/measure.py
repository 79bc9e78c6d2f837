"""Timing and peak-memory probes for one benchmark process.

Time: ``time.perf_counter`` on CPU; CUDA events around the pass (plus a synchronize)
on CUDA.

Memory is the *extra* peak of one pass: the high-water mark during the pass minus
the usage right before it.

- CUDA: ``torch.cuda.reset_peak_memory_stats`` then ``max_memory_allocated``
  minus ``memory_allocated`` at the start.
- CPU: resident set size (RSS) of the process, which must be a fresh one per case.
  Before the pass, freed heap memory goes back to the OS (``malloc_trim``) so that
  reusing it during the pass counts, the baseline RSS is read, and Linux's RSS
  high-water mark is reset (``/proc/self/clear_refs``); after the pass the new
  high-water mark (``VmHWM``) is read. Where the reset is impossible the probe falls
  back to ``getrusage``'s ``ru_maxrss``: the process's peak over its whole life, which
  includes the warm-up passes and anything freed before :meth:`CpuMemoryProbe.start`.
  When that peak is already above the baseline, ``ru_maxrss - baseline`` can exceed the
  pass's extra peak: an *upper bound* (``"ru_maxrss (upper bound)"``); otherwise it is
  exact (``"ru_maxrss"``). Each result says which method was used.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

__all__ = [
    "CPU_EXACT_METHOD",
    "CPU_UPPER_BOUND_METHOD",
    "CpuMemoryProbe",
    "CudaMemoryProbe",
    "memory_probe",
    "time_pass",
]

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")
CPU_EXACT_METHOD = "VmHWM after clear_refs"
CPU_UPPER_BOUND_METHOD = "ru_maxrss (upper bound)"


def time_pass(step: Callable[[], None], device: torch.device) -> float:
    """Seconds one call of ``step`` takes on ``device``."""
    if device.type == "cuda":
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        start.record()
        step()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000.0
    begin = time.perf_counter()
    step()
    return time.perf_counter() - begin


def _status_bytes(field: str) -> int | None:
    """A ``kB`` field of ``/proc/self/status`` in bytes (``None`` off Linux)."""
    try:
        for line in _STATUS.read_text(encoding="utf-8").splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _max_rss_bytes() -> int:
    """``ru_maxrss`` in bytes (kilobytes on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _current_rss() -> int:
    rss = _status_bytes("VmRSS")
    if rss is not None:
        return rss
    import psutil

    return int(psutil.Process().memory_info().rss)


def _release_free_memory() -> None:
    """Collect garbage and hand glibc's free heap pages back to the OS (if glibc)."""
    gc.collect()
    name = ctypes.util.find_library("c")
    if not name:
        return
    try:
        libc = ctypes.CDLL(name)
        libc.malloc_trim(ctypes.c_size_t(0))
    except (OSError, AttributeError):
        return


def _reset_high_water_mark() -> bool:
    """Reset Linux's RSS high-water mark; False where that is not possible."""
    try:
        _CLEAR_REFS.write_text("5", encoding="utf-8")
    except OSError:
        return False
    return _status_bytes("VmHWM") is not None


class CpuMemoryProbe:
    """Extra peak RSS of the code run between :meth:`start` and :meth:`extra_peak`."""

    def __init__(self) -> None:
        self.baseline = 0
        self.method = "none"

    def start(self) -> None:
        """Record the baseline right before the measured pass."""
        _release_free_memory()
        self.baseline = _current_rss()
        if _reset_high_water_mark():
            self.method = CPU_EXACT_METHOD
        elif _max_rss_bytes() > self.baseline:
            # the lifetime peak (warm-up, memory freed before now) is already higher:
            # peak - baseline may exceed the pass's own extra peak
            self.method = CPU_UPPER_BOUND_METHOD
        else:
            self.method = "ru_maxrss"

    def extra_peak(self) -> int:
        """Bytes above the baseline at the highest point since :meth:`start`."""
        hwm = self.method.startswith("VmHWM")
        peak = (_status_bytes("VmHWM") or 0) if hwm else _max_rss_bytes()
        return max(0, peak - self.baseline)


class CudaMemoryProbe:
    """Extra peak of PyTorch's CUDA allocations between :meth:`start` and :meth:`extra_peak`."""

    method = "torch.cuda.max_memory_allocated"

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.baseline = 0

    def start(self) -> None:
        """Record the baseline right before the measured pass."""
        gc.collect()
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        self.baseline = torch.cuda.memory_allocated(self.device)

    def extra_peak(self) -> int:
        """Bytes above the baseline at the highest point since :meth:`start`."""
        torch.cuda.synchronize(self.device)
        return max(0, torch.cuda.max_memory_allocated(self.device) - self.baseline)


def memory_probe(device: torch.device) -> CpuMemoryProbe | CudaMemoryProbe:
    """The probe that fits ``device``."""
    return CudaMemoryProbe(device) if device.type == "cuda" else CpuMemoryProbe()
