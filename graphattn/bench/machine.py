"""A description of the machine and software a benchmark ran on."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
from pathlib import Path

import torch

import graphattn

__all__ = ["copy_bandwidth_gb_s", "cpu_model", "describe_machine", "git_commit", "usable_cores"]


def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo``, else the platform's processor string."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown"


_CHECKOUT = Path(__file__).resolve().parents[2]


def _git(root: Path, *args: str) -> str | None:
    """``git ARGS`` run in ``root``: its output, or None when git cannot answer."""
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _tracks_graphattn(root: Path) -> bool:
    """Whether ``root`` is a git checkout of graphattn: git tracks its ``graphattn/`` code.
    An installed copy is not, even in a virtual environment inside another repository
    (whose commit and status say nothing about graphattn's code)."""
    return bool((_git(root, "ls-files", "--", "graphattn") or "").strip())


def git_commit() -> str | None:
    """The commit of the graphattn checkout: ``$GRAPHATTN_COMMIT`` if set (for copies of a
    working tree whose git metadata is missing or stale), else ``git rev-parse HEAD``
    (``None`` outside a git checkout of graphattn, as for an installed package)."""
    if os.environ.get("GRAPHATTN_COMMIT"):
        return os.environ["GRAPHATTN_COMMIT"]
    if not _tracks_graphattn(_CHECKOUT):
        return None
    return (_git(_CHECKOUT, "rev-parse", "HEAD") or "").strip() or None


def git_uncommitted_changes(root: str | Path | None = None) -> bool | None:
    """Whether the ``graphattn/`` or ``benchmarks/`` code of the checkout at ``root``
    (default: this package's) differs from its commit (``git status``; ``None`` when git
    cannot tell, as outside a git checkout of graphattn): a result measured on such code
    did not run :func:`git_commit`'s code."""
    root = _CHECKOUT if root is None else Path(root)
    if not _tracks_graphattn(root):
        return None
    status = _git(root, "status", "--porcelain", "--", "graphattn", "benchmarks/*.py")
    return None if status is None else bool(status.strip())


def usable_cores() -> int | None:
    """CPU cores this process may run on: its affinity mask where the OS has one, else
    ``os.cpu_count()`` (None when unknown)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def copy_bandwidth_gb_s(device: torch.device | str = "cuda", size_bytes: int = 2**30) -> float:
    """Measured device-memory bandwidth: median of 10 device-to-device copies of
    ``size_bytes``, counting bytes read plus bytes written (the ceiling a memory-bound
    kernel can reach; datasheet peaks are rarely achieved)."""
    source = torch.empty(size_bytes // 4, dtype=torch.float32, device=device).uniform_()
    target = torch.empty_like(source)
    times = []
    for _ in range(12):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        target.copy_(source)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    del source, target
    torch.cuda.empty_cache()
    return 2 * size_bytes / statistics.median(times[2:]) / 1e9


def _cuda_description() -> dict | None:
    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {
        "name": props.name,
        "capability": f"{props.major}.{props.minor}",
        "total_memory_bytes": int(props.total_memory),
        "multiprocessors": int(props.multi_processor_count),
        "cuda_version": torch.version.cuda,
        "copy_bandwidth_gb_s": copy_bandwidth_gb_s(torch.cuda.current_device()),
    }


def _installed_version(package: str) -> str | None:
    """The installed version of ``package`` (from its metadata), or None."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def describe_machine() -> dict:
    """CPU, memory, load, library versions and the CUDA device (if any)."""
    import psutil
    import torch_geometric

    memory = psutil.virtual_memory()
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "cpu_model": cpu_model(),
        "logical_cores": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "usable_cores": usable_cores(),
        "torch_threads": torch.get_num_threads(),
        "memory_total_bytes": int(memory.total),
        "memory_available_bytes": int(memory.available),
        "load_average_1_5_15": list(load) if load else None,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_geometric": torch_geometric.__version__,
        **{package: _installed_version(package) for package in ("numba", "rdkit", "triton")},
        "mkl": torch.backends.mkl.is_available(),
        "cuda": _cuda_description(),
        "graphattn": graphattn.__version__,  # an installed copy has no commit
        "graphattn_commit": git_commit(),
        "graphattn_uncommitted_changes": git_uncommitted_changes(),
    }
