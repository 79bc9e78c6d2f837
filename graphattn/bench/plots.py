"""The benchmark's PNG plots (files exist even without data).

Figures are built with :class:`matplotlib.figure.Figure` and rendered by the Agg
canvas directly, without pyplot, so the process's matplotlib backend is untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from graphattn.bench.cases import LAYER_IMPLS, MODEL_IMPLS

__all__ = ["PLOT_FILES", "write_plots"]

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


def _lines(
    ax: Axes, cases: list[dict], suite: str, x: Callable[[dict], float], y: Callable[[dict], float]
) -> bool:
    """One line per implementation (and per N of a density sweep) on log-log axes;
    False when nothing ran."""
    drawn = False
    sweeps = sorted({c["num_nodes"] for c in cases if suite == "density" == c["suite"]})
    for impl in LAYER_IMPLS:
        ran = _ran(cases, suite, impl)
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
    return drawn


def _time_vs_n(ax: Axes, result: dict) -> None:
    _lines(ax, result["cases"], "scaling", lambda c: c["num_nodes"], lambda c: c["median_seconds"])
    ax.set_xlabel("nodes N (in-degree fixed)")
    ax.set_ylabel("forward + backward, median seconds")
    ax.set_title("Time vs graph size")


def _memory_vs_n(ax: Axes, result: dict) -> None:
    mib = 2.0**20
    _lines(
        ax,
        result["cases"],
        "scaling",
        lambda c: c["num_nodes"],
        lambda c: max(c["peak_extra_bytes"], 1) / mib,
    )
    ax.set_xlabel("nodes N (in-degree fixed)")
    ax.set_ylabel("extra peak memory, MiB")
    ax.set_title("Peak memory vs graph size")


def _time_vs_density(ax: Axes, result: dict) -> None:
    drawn = _lines(
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
    ax.set_title("Time vs density")


def _bars(ax: Axes, cases: list[dict], suite: str, impls: tuple[str, ...], title: str) -> None:
    ran = {c["impl"]: c for c in cases if c["suite"] == suite and c["status"] == "ok"}
    names = [i for i in impls if i in ran]
    if not names:
        ax.text(0.5, 0.5, "no measured cases", ha="center", va="center", transform=ax.transAxes)
    else:
        colors = [_STYLE.get(i, _STYLE["fused"])["color"] for i in names]  # graphattn: blue
        ax.bar(names, [ran[i]["median_seconds"] * 1e3 for i in names], color=colors)
        ax.tick_params(axis="x", labelrotation=30)
    ax.set_ylabel("median ms")
    ax.set_title(title)


def _molecules(fig: Figure, result: dict) -> None:
    left, right = fig.subplots(1, 2)
    _bars(left, result["cases"], "molecules", LAYER_IMPLS, "one layer, ESOL batches")
    _bars(right, result["cases"], "training", MODEL_IMPLS, "molecule model training step")


def _save(path: Path, draw: Callable[[Figure], None], size: tuple[float, float] = (7, 5)) -> None:
    fig = Figure(figsize=size)
    FigureCanvasAgg(fig)
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
