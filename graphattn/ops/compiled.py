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
import logging
import os
import pickle
import threading
from collections.abc import Callable
from typing import TypeVar

import torch

__all__ = ["DTYPES", "jit", "numba_available", "numba_problem", "per_process"]

log = logging.getLogger(__name__)

T = TypeVar("T")
DTYPES = (torch.float32, torch.float64)  # what the compiled code takes (NumPy has no bf16)
_PARALLEL_PID: int | None = None  # the process whose Numba threads have run
_NO_THREADS = False  # Numba's threading layer could not be loaded: serial versions only
# What a disk cache that cannot be written or read raises while Numba compiles: a full
# disk or a quota (OSError), a damaged index (pickle errors, EOFError).
_CACHE_ERRORS = (OSError, pickle.UnpicklingError, EOFError)


@functools.cache
def numba_problem() -> str | None:
    """Why graphattn's compiled code cannot run (tried once), else ``None``.
    ``NUMBA_DISABLE_JIT=1`` counts: its plain-Python loops would be about 25 times
    slower than torch's operations, which run instead."""
    try:
        import numba
    except ModuleNotFoundError as error:
        if error.name != "numba":  # numba is there, a module it needs is not
            return f"Numba does not import: {type(error).__name__}: {error}"
        return f"Numba is not installed (pip install numba): {error}"
    except Exception as error:  # an ImportError from a NumPy it does not support, say
        return f"Numba does not import: {type(error).__name__}: {error}"
    return "NUMBA_DISABLE_JIT is set" if numba.config.DISABLE_JIT else None


def numba_available() -> bool:
    """Whether graphattn's compiled code runs (:func:`numba_problem` says why not)."""
    return numba_problem() is None


def jit(parallel: bool, **options) -> Callable:
    """``numba.njit`` with graphattn's settings: ``parallel``, and cached on disk where
    Numba finds a writable place (else compiled anew in each process). Where the cache
    fails when the function compiles (a full disk, a quota, a damaged cache file), the
    function is compiled without it, with one warning. The result is then a plain
    callable, not a Numba dispatcher: other compiled code cannot call it, and it does not
    pickle (graphattn's kernels need neither)."""
    from numba import njit

    def decorate(function: Callable) -> Callable:
        uncached = functools.partial(njit(parallel=parallel, **options), function)
        try:
            cached = njit(parallel=parallel, cache=True, **options)(function)
        except RuntimeError:  # "cannot cache function": no writable cache directory
            return uncached()
        return _CacheTolerant(cached, uncached)

    return decorate


class _CacheTolerant:
    """A cached compiled function that falls back to an uncached copy when Numba's disk
    cache raises while it compiles or loads (Numba guards only Windows' spurious errors).

    The cache is read or written before the compiled code runs, so the retry repeats
    no work on the caller's arrays.
    """

    def __init__(self, cached: Callable, uncached: Callable[[], Callable]) -> None:
        self._cached, self._function, self._uncached = cached, cached, uncached
        self._swap = threading.Lock()  # two threads may meet the failure at once
        functools.update_wrapper(self, cached.py_func)

    def __call__(self, *args):
        function = self._function
        try:
            return function(*args)
        except _CACHE_ERRORS as error:
            if function is not self._cached:  # the uncached copy failed: a real error
                raise
            with self._swap:
                if self._function is self._cached:
                    log.warning(
                        "Numba's disk cache failed for %s (%s): compiling it without the cache",
                        self.__qualname__,
                        error,
                    )
                    self._function = self._uncached()
            return self._function(*args)


def _parallel() -> bool:
    """Whether this call may use Numba's threads, set to torch's thread count.

    Not with one torch thread, and not in a process forked after Numba's OpenMP threads
    ran in its parent: GNU OpenMP is not fork-safe, and Numba ends such a child with
    SIGTERM, so there the single-threaded versions run.
    """
    global _PARALLEL_PID, _NO_THREADS
    threads = torch.get_num_threads()
    if threads == 1 or _NO_THREADS or _PARALLEL_PID not in (None, os.getpid()):
        return False
    import numba

    try:  # loads Numba's threading layer on first use
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    except ValueError as error:  # e.g. NUMBA_THREADING_LAYER=tbb without TBB installed
        log.warning("Numba's threads are not usable (%s): its loops run on one thread", error)
        _NO_THREADS = True
        return False
    _PARALLEL_PID = os.getpid()
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
