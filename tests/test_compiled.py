"""How graphattn runs Numba code: the disk cache fallback, one thread vs many."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch

from graphattn.ops.compiled import jit, numba_available, per_process

pytestmark = pytest.mark.skipif(not numba_available(), reason="Numba is not installed")


def add_one(x):
    return x + 1


def run_python(script: str, **env: str) -> str:
    """The stdout of ``script`` run in a new interpreter with ``env`` added."""
    result = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture
def full_cache_disk(monkeypatch) -> None:
    """Numba's disk cache misses, and saving raises ENOSPC (a full disk or a quota)."""
    import errno

    import numba.core.caching as caching

    def no_space(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(caching.Cache, "load_overload", lambda self, *args, **kwargs: None)
    monkeypatch.setattr(caching.Cache, "save_overload", no_space)


def test_jit_compiles_without_a_writable_cache(monkeypatch) -> None:
    import numba

    real = numba.njit

    def njit_without_cache(*args, cache=False, **kwargs):
        if cache:
            raise RuntimeError("cannot cache function 'add_one': no locator available")
        return real(*args, **kwargs)

    monkeypatch.setattr(numba, "njit", njit_without_cache)
    assert jit(False)(add_one)(1) == 2


def test_per_process_follows_torch_threads() -> None:
    built = []

    @per_process
    def versions(parallel: bool) -> bool:
        built.append(parallel)
        return parallel

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert versions() is False
        torch.set_num_threads(2)
        assert versions() is True
        assert versions() is True
    finally:
        torch.set_num_threads(threads)
    assert built == [False, True]  # each version built once


def test_numba_capped_below_torch_leaves_torch_threads_alone() -> None:
    # With NUMBA_NUM_THREADS=1, numba.set_num_threads(1) also lowers torch's thread
    # count (one OpenMP runtime); the cap applies at Numba's start, hence a new process.
    script = (
        "import torch\n"
        "from graphattn.ops.compiled import per_process\n"
        "versions = per_process(lambda parallel: parallel)\n"
        "torch.set_num_threads(1)\n"
        "torch.set_num_threads(2)\n"
        "assert versions() is True\n"
        "print(torch.get_num_threads())\n"
    )
    assert run_python(script, NUMBA_NUM_THREADS="1").split() == ["2"]


def test_a_second_process_reuses_the_disk_cache(tmp_path) -> None:
    # Numba keys its cache on the pickled closure; a compiled helper in the dropout
    # loop's closure pickled differently in each process, so every process compiled
    # the loop again and added a file to the cache (hundreds after a day of tests).
    script = (
        "import torch\n"
        "from graphattn.ops import numba_edge_attention, prepare_edges\n"
        "from graphattn.ops.dropout import keep_mask\n"
        "torch.set_num_threads(1)\n"
        "edges = prepare_edges(torch.tensor([[0, 1, 2], [1, 2, 0]]), 3)\n"
        "for dtype in (torch.float32, torch.float64):\n"
        "    keep_mask((3, 5), 0.5, dtype)\n"
        "    q = torch.randn(3, 2, 4, dtype=dtype, requires_grad=True)\n"
        "    numba_edge_attention(q, q, q, edges)[0].sum().backward()\n"
    )
    cached = []
    for _ in range(2):
        run_python(script, NUMBA_CACHE_DIR=str(tmp_path))
        cached.append(sorted(p.name for p in tmp_path.rglob("*.nbc")))
    assert cached[0], "nothing was cached"
    assert cached[1] == cached[0]


def test_a_disk_cache_that_fails_while_compiling_is_left_out_with_one_warning(
    full_cache_disk, caplog
) -> None:
    # Numba writes its cache as the function first compiles, and raises there on a full
    # disk or a quota (ENOSPC, EDQUOT): the first training step ended with "No space
    # left on device", which pointed at the run folder's disk
    add = jit(False)(add_one)
    with caplog.at_level("WARNING", logger="graphattn.ops.compiled"):
        assert add(1) == 2 and add(2.5) == 3.5  # the second signature compiles uncached
    assert [r.getMessage() for r in caplog.records] == [
        "Numba's disk cache failed for add_one ([Errno 28] No space left on device): "
        "compiling it without the cache"
    ]


def test_numba_with_its_jit_disabled_counts_as_unavailable() -> None:
    # NUMBA_DISABLE_JIT=1 ran the kernels as Python loops: 25 times slower, and the
    # dropout generator's wrapping arithmetic warned of overflows
    script = (
        "import torch\n"
        "from graphattn.ops import numba_edge_attention, prepare_edges\n"
        "from graphattn.ops.compiled import numba_available\n"
        "print(numba_available())\n"
        "q = torch.randn(3, 1, 2)\n"
        "try:\n"
        "    numba_edge_attention(q, q, q, prepare_edges(torch.tensor([[0], [1]]), 3))\n"
        "except ValueError as error:\n"
        "    print(error)\n"
    )
    available, message = run_python(script, NUMBA_DISABLE_JIT="1").splitlines()
    assert available == "False"
    assert message.endswith("got torch.float32 on cpu (NUMBA_DISABLE_JIT is set)")


def test_numba_that_does_not_import_is_not_called_missing(monkeypatch) -> None:
    # a Numba too old for the installed NumPy raises ImportError, which was reported as
    # "Numba is not installed (pip install numba)": the user would install it again
    import builtins

    from graphattn.ops.compiled import numba_problem

    real_import = builtins.__import__

    def importing(error: Exception):
        def fake(name, *args, **kwargs):
            if name == "numba":
                raise error
            return real_import(name, *args, **kwargs)

        return fake

    cases = {
        ImportError("Numba needs NumPy 2.2 or less. Got NumPy 2.3."): (
            "Numba does not import: ImportError: Numba needs NumPy 2.2 or less. Got NumPy 2.3."
        ),
        ModuleNotFoundError("No module named 'llvmlite'", name="llvmlite"): (
            "Numba does not import: ModuleNotFoundError: No module named 'llvmlite'"
        ),
        ModuleNotFoundError("No module named 'numba'", name="numba"): (
            "Numba is not installed (pip install numba): No module named 'numba'"
        ),
        # not only ImportError: a Numba built against another NumPy can fail otherwise
        AttributeError("module 'numpy' has no attribute 'long'"): (
            "Numba does not import: AttributeError: module 'numpy' has no attribute 'long'"
        ),
        SystemError("initialization failed"): (
            "Numba does not import: SystemError: initialization failed"
        ),
    }
    try:
        for error, reason in cases.items():
            numba_problem.cache_clear()
            with monkeypatch.context() as patch:
                patch.setattr(builtins, "__import__", importing(error))
                assert numba_problem() == reason
    finally:
        numba_problem.cache_clear()
    assert numba_problem() is None


def test_a_threading_layer_that_cannot_load_leaves_the_serial_loops(monkeypatch, caplog) -> None:
    # NUMBA_THREADING_LAYER=tbb without TBB: "No threading layer could be loaded" ended
    # the run at the first parallel loop
    import numba

    from graphattn.ops import compiled

    def no_layer(count: int) -> None:
        raise ValueError("No threading layer could be loaded.")

    monkeypatch.setattr(numba, "set_num_threads", no_layer)
    monkeypatch.setattr(compiled, "_PARALLEL_PID", None)
    monkeypatch.setattr(compiled, "_NO_THREADS", False)
    versions = per_process(lambda parallel: parallel)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with caplog.at_level("WARNING", logger="graphattn.ops.compiled"):
            assert versions() is False and versions() is False
    finally:
        torch.set_num_threads(threads)
    assert len(caplog.records) == 1 and "run on one thread" in caplog.records[0].getMessage()


def test_two_threads_that_meet_a_failing_cache_both_get_their_results(full_cache_disk) -> None:
    # the second thread's cache error, met after the first had swapped in the uncached
    # copy, was raised as it was
    import threading

    add = jit(False)(add_one)
    start, results = threading.Barrier(2), {}

    def call(value) -> None:
        start.wait()
        try:
            results[value] = add(value)
        except OSError as error:
            results[value] = error

    threads = [threading.Thread(target=call, args=(value,)) for value in (1, 2.5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {1: 2, 2.5: 3.5}


@pytest.mark.parametrize(
    "error",
    [EOFError("Ran out of input"), pickle.UnpicklingError("invalid load key, '\\x00'.")],
    ids=["truncated", "overwritten"],
)
def test_a_damaged_disk_cache_index_is_left_out(monkeypatch, error) -> None:
    # a truncated or overwritten index file raises these, not OSError, as it is read
    import numba.core.caching as caching

    def damaged(self, *args, **kwargs):
        raise error

    monkeypatch.setattr(caching.Cache, "load_overload", damaged)
    assert jit(False)(add_one)(1) == 2


def count_and_fail(calls):
    calls[0] += 1
    raise OSError("not a cache error")


def test_an_error_of_the_uncached_copy_is_raised_without_running_it_again(full_cache_disk):
    fail, calls = jit(False)(count_and_fail), np.zeros(1)
    with pytest.raises(OSError):
        fail(calls)  # the cached copy fails on the full disk; the uncached one runs
    with pytest.raises(OSError, match="not a cache error"):
        fail(calls)
    assert calls[0] == 2  # once per call: a function's own error is not retried
