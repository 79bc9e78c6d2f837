"""How graphattn runs code compiled by Numba: availability, threads, fork safety.

Numba compiles a Python function of plain loops to machine code at its first call (with
the LLVM it ships; no compiler or build step on the user's machine) and caches the
result on disk, next to the module or in Numba's cache directory. graphattn uses it
where torch would need a separate pass over memory for every step of a small
computation: the attention loops of :mod:`graphattn.ops.numba_attention` and the
dropout masks of :mod:`graphattn.ops.dropout`. Without Numba those fall back to torch
operations.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import TypeVar

import torch

__all__ = ["DTYPES", "jit", "numba_available", "per_process"]

T = TypeVar("T")
DTYPES = (torch.float32, torch.float64)  # what the compiled code takes (NumPy has no bf16)
_PARALLEL_PID: int | None = None  # the process whose Numba threads have run


@functools.cache
def numba_available() -> bool:
    """Whether Numba imports (tried once)."""
    try:
        import numba  # noqa: F401
    except Exception:  # not installed, or broken against this NumPy: use torch instead
        return False
    return True


def jit(parallel: bool, **options) -> Callable:
    """``numba.njit`` with graphattn's settings: ``parallel``, and cached on disk where
    Numba finds a writable place (else compiled anew in each process)."""
    from numba import njit

    def decorate(function: Callable) -> Callable:
        try:
            return njit(parallel=parallel, cache=True, **options)(function)
        except RuntimeError:  # "cannot cache function": no writable cache directory
            return njit(parallel=parallel, **options)(function)

    return decorate


def _parallel() -> bool:
    """Whether this call may use Numba's threads, set to torch's thread count.

    Not with one torch thread, and not in a process forked after Numba's OpenMP threads
    ran in its parent: GNU OpenMP is not fork-safe, and Numba ends such a child with
    SIGTERM, so there the single-threaded versions run.
    """
    global _PARALLEL_PID
    threads = torch.get_num_threads()
    if threads == 1 or _PARALLEL_PID not in (None, os.getpid()):
        return False
    import numba

    _PARALLEL_PID = os.getpid()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    if torch.get_num_threads() != threads:
        # Numba's OpenMP layer shares torch's OpenMP runtime: with NUMBA_NUM_THREADS
        # below torch's count, the call above lowered torch's threads too.
        torch.set_num_threads(threads)
    return True


def per_process(build: Callable[[bool], T]) -> Callable[[], T]:
    """Turn ``build(parallel)``, which compiles some functions, into a getter that
    compiles each version once and returns the one this call may use.

    ``build`` must make the two versions differ in a value their code closes over (say
    ``loop = prange if parallel else range``): Numba's disk cache keys on the code and
    those values, not on the compiler flags.
    """
    cached = functools.cache(build)

    def get() -> T:
        return cached(_parallel())

    return get
