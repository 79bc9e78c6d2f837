"""Shared fixtures: the real data sets in ../shared/datasets (or $GRAPHATTN_DATA)."""

from __future__ import annotations

import logging
import os
import random
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path | None:
    """The folder of real data sets, or None when it is absent."""
    for candidate in (os.environ.get("GRAPHATTN_DATA"), REPO.parent / "shared" / "datasets"):
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None


def data_dir_unless_absent_outside_ci() -> Path | None:
    """The real data sets, or None when absent outside CI (a test then covers the
    no-data path); under CI=true their absence fails the test."""
    path = shared_data_dir()
    if path is None and os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail("CI=true but ../shared/datasets (or $GRAPHATTN_DATA) is missing")
    return path


@pytest.fixture
def sigint_as_in_a_terminal() -> Iterator[None]:
    """Python's own SIGINT handler during the test. A shell that starts the tests in the
    background (`make test &` in a script) makes this process ignore SIGINT, and the
    processes it starts too: then neither `_thread.interrupt_main()` nor a SIGINT sent to
    a child does anything, and tests of Ctrl-C failed that way in background runs."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """Real data sets; skip outside CI when absent, fail under CI=true."""
    path = data_dir_unless_absent_outside_ci()
    if path is None:
        pytest.skip("real data sets not found: set GRAPHATTN_DATA or put ../shared/datasets")
    return path


@pytest.fixture
def offline(monkeypatch, tmp_path) -> None:
    """No data folder from the environment (CI sets GRAPHATTN_DATA), an empty cache and
    no network: a data set comes only from the folder a test names."""
    monkeypatch.delenv("GRAPHATTN_DATA", raising=False)
    monkeypatch.setenv("GRAPHATTN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("graphattn.datasets.files._download", _no_download)


def _no_download(card, timeout):
    raise OSError("no network in this test")


def draws_after_seeding(seed: int, between: Callable[[], object] = lambda: None) -> tuple:
    """Seed the global generators of Python, NumPy and torch with ``seed``, call
    ``between``, then draw a number from each: the draws are those without ``between``
    when it gives the generators back as it found them."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    between()
    return torch.rand(1).item(), np.random.rand(), random.random()


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _graphattn_log_level():
    """Benchmark scripts run in-process (``setup()``) quiet the ``graphattn`` logger;
    restore its level so that later tests see the library's warnings."""
    logger = logging.getLogger("graphattn")
    level = logger.level
    yield
    logger.setLevel(level)


@pytest.fixture
def script_time_pass(monkeypatch):
    """``script(module, seconds)``: ``module.time_pass`` (the benchmarks' timer) still runs
    each step, but reports the next of ``seconds``."""

    def script(module, seconds: list[float]) -> None:
        times = iter(seconds)

        def scripted(step, device) -> float:
            step()
            return next(times)

        monkeypatch.setattr(module, "time_pass", scripted)

    return script
