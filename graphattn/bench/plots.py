"""The benchmark's PNG plots (files exist even without data).

Figures are built with :class:`matplotlib.figure.Figure` and rendered by the Agg
canvas directly, without pyplot, so the process's matplotlib backend is untouched.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from graphattn.bench.cases import LAYER_IMPLS, MODEL_IMPLS
from graphattn.train.plots import agg_figure

__all__ = ["PLOT_FILES", "left_out_note", "plot_points", "write_plots"]

PLOT_FILES = ("time_vs_n.png", "memory_vs_n.png", "time_vs_density.png", "molecules.png")
_STYLE = {
    "fused": {"color": "tab:blue", "marker": "o"},
    "reference": {"color": "tab:cyan", "marker": "s"},
    "dense": {"color": "tab:red", "marker": "^"},
    "auto": {"color": "black", "marker": "x", "linestyle": "--"},
    "pyg": {"color": "tab:orange", "marker": "D"},
}


def _ran(cases: list[dict], suite: str, impl: str) -> list[dict]:
    return [c for c in cases if c["suite"] == suite and c["impl"] == impl and c["status"] == "ok"]


def _plottable(value: float | None) -> bool:
    """Whether ``value`` can be drawn on a log axis as it is (finite and positive)."""
    return value is not None and math.isfinite(value) and value > 0


def plot_points(
    cases: list[dict], suite: str, y: Callable[[dict], float | None]
) -> tuple[list[dict], dict[str, int]]:
    """The cases of ``suite`` that can be drawn (ran, ``y`` finite and positive), and
    how many were left out by reason: ``skipped``, ``failed``, ``not positive``."""
    shown, left_out = [], {"skipped": 0, "failed": 0, "not positive": 0}
    for case in cases:
        if case["suite"] != suite:
            continue
        if case["status"] != "ok":
            left_out["failed" if case["status"] == "failed" else "skipped"] += 1
        elif not _plottable(y(case)):
            left_out["not positive"] += 1
        else:
            shown.append(case)
    return shown, {k: v for k, v in left_out.items() if v}


def left_out_note(left_out: dict[str, int]) -> str:
    """``"not shown: 2 skipped, 1 failed (see bench.md)"``, or ``""``."""
    if not left_out:
        return ""
    counts = ", ".join(f"{n} {why}" for why, n in left_out.items())
    return f"not shown: {counts} (see bench.md)"


def _titled(ax: Axes, title: str, note: str) -> None:
    ax.set_title(title + (f"\n{note}" if note else ""), fontsize=None if not note else 10)


def _lines(
    ax: Axes,
    cases: list[dict],
    suite: str,
    x: Callable[[dict], float],
    y: Callable[[dict], float | None],
) -> tuple[bool, str]:
    """One line per implementation (and per N of a density sweep) on log-log axes:
    ``(whether anything was drawn, a note on the cases left out)``."""
    drawn = False
    shown, left_out = plot_points(cases, suite, y)
    sweeps = sorted({c["num_nodes"] for c in cases if suite == "density" == c["suite"]})
    for impl in LAYER_IMPLS:
        ran = [c for c in shown if c["impl"] == impl]
        for i, n in enumerate(sweeps or [None]):
            points = sorted((x(c), y(c)) for c in ran if n in (None, c["num_nodes"]))
            if not points:
                continue
            xs, ys = zip(*points, strict=True)
            label = impl if len(sweeps) < 2 else f"{impl}, N={n}"
            style = dict(_STYLE[impl], alpha=0.5 if i < len(sweeps) - 1 else 1.0)  # largest N solid
            ax.plot(xs, ys, label=label, **style)
            drawn = True
    if drawn:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.legend()
        ax.grid(True, which="both", alpha=0.3)
    else:
        ax.text(0.5, 0.5, "no measured cases", ha="center", va="center", transform=ax.transAxes)
    return drawn, left_out_note(left_out)


def _time_vs_n(ax: Axes, result: dict) -> None:
    _, note = _lines(
        ax, result["cases"], "scaling", lambda c: c["num_nodes"], lambda c: c["median_seconds"]
    )
    ax.set_xlabel("nodes N (in-degree fixed)")
    ax.set_ylabel("forward + backward, median seconds")
    _titled(ax, "Time vs graph size", note)


def _mib(case: dict) -> float | None:
    nbytes = case.get("peak_extra_bytes")
    return None if nbytes is None else nbytes / 2.0**20


def _memory_vs_n(ax: Axes, result: dict) -> None:
    # a zero extra peak cannot go on the log axis: left out and counted, never drawn as 1 byte
    _, note = _lines(ax, result["cases"], "scaling", lambda c: c["num_nodes"], _mib)
    ax.set_xlabel("nodes N (in-degree fixed)")
    ax.set_ylabel("extra peak memory, MiB")
    _titled(ax, "Peak memory vs graph size", note)


def _time_vs_density(ax: Axes, result: dict) -> None:
    drawn, note = _lines(
        ax, result["cases"], "density", lambda c: c["density"], lambda c: c["median_seconds"]
    )
    crossover = result["derived"]["crossover_density"]
    if drawn and crossover.get("measured"):
        ax.axvline(crossover["measured"], color="green", label="measured crossover")
    if drawn and crossover.get("configured"):
        ax.axvline(crossover["configured"], color="gray", linestyle=":", label="configured")
    if drawn:
        ax.legend()
    ax.set_xlabel("density: allowed pairs / N² (self-loops included)")
    ax.set_ylabel("forward + backward, median seconds")
    _titled(ax, "Time vs density", note)


def _bars(ax: Axes, cases: list[dict], suite: str, impls: tuple[str, ...], title: str) -> None:
    shown, left_out = plot_points(cases, suite, lambda c: c["median_seconds"])
    ran = {c["impl"]: c for c in shown}
    names = [i for i in impls if i in ran]
    if not names:
        ax.text(0.5, 0.5, "no measured cases", ha="center", va="center", transform=ax.transAxes)
    else:
        colors = [_STYLE.get(i, _STYLE["fused"])["color"] for i in names]  # graphattn: blue
        ax.bar(names, [ran[i]["median_seconds"] * 1e3 for i in names], color=colors)
        ax.tick_params(axis="x", labelrotation=30)
    ax.set_ylabel("median ms")
    _titled(ax, title, left_out_note(left_out))


def _molecules(fig: Figure, result: dict) -> None:
    left, right = fig.subplots(1, 2)
    _bars(left, result["cases"], "molecules", LAYER_IMPLS, "one layer, ESOL batches")
    _bars(right, result["cases"], "training", MODEL_IMPLS, "molecule model training step")


def _save(path: Path, draw: Callable[[Figure], None], size: tuple[float, float] = (7, 5)) -> None:
    fig = agg_figure(size)
    draw(fig)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def write_plots(result: dict, out_dir: Path) -> list[Path]:
    """Write :data:`PLOT_FILES` into ``out_dir``; returns their paths."""
    single = {
        "time_vs_n.png": _time_vs_n,
        "memory_vs_n.png": _memory_vs_n,
        "time_vs_density.png": _time_vs_density,
    }
    paths = []
    for name, draw in single.items():
        _save(out_dir / name, lambda fig, draw=draw: draw(fig.add_subplot(), result))
        paths.append(out_dir / name)
    _save(out_dir / "molecules.png", lambda fig: _molecules(fig, result), size=(10, 4.5))
    paths.append(out_dir / "molecules.png")
    return paths
