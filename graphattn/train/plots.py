"""Figures written into run folders (matplotlib, no display needed).

Figures are built with :class:`matplotlib.figure.Figure` and rendered by the Agg canvas
directly, without pyplot: the process's backend (a notebook's, say) is left alone, and
no figure stays registered with pyplot when a save fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["plot_confusion_matrix", "plot_graph", "plot_learning_curve"]


def agg_figure(size: tuple[float, float]) -> Figure:
    """A figure of ``size`` inches drawn by its own Agg canvas (no pyplot, no backend)."""
    fig = Figure(figsize=size)
    FigureCanvasAgg(fig)  # attaches itself to fig
    return fig


def plot_learning_curve(history: list[dict], metric: str, path: str | Path) -> Path:
    """Training loss and the validation metric per epoch, best epoch marked.

    Histories of several ensemble members (a ``member`` key) are drawn as one line each.
    """
    fig = agg_figure((10, 4))
    ax_loss, ax_val = fig.subplots(1, 2)
    members = sorted({h.get("member", 0) for h in history})
    for member in members:
        rows = [h for h in history if h.get("member", 0) == member]
        name = f" (model {member + 1})" if len(members) > 1 else ""
        epochs = [h["epoch"] for h in rows]
        marker = "o" if len(rows) == 1 else None  # a line through one point draws nothing
        losses = [h["train_loss"] for h in rows]
        ax_loss.plot(epochs, losses, marker=marker, label=f"train loss{name}")
        values = [h.get(f"val_{metric}", np.nan) for h in rows]
        line = ax_val.plot(epochs, values, marker=marker, label=f"validation {metric}{name}")[0]
        best = [h["epoch"] for h in rows if h.get("best")]
        if best:
            ax_val.axvline(best[-1], color=line.get_color(), linestyle="--", alpha=0.6)
    ax_loss.set_xlabel("epoch")
    ax_loss.set_ylabel("loss")
    ax_loss.set_yscale("log")
    ax_loss.legend(fontsize="small")
    ax_val.set_xlabel("epoch (dashed: best)")
    ax_val.set_ylabel(metric)
    ax_val.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return Path(path)


def plot_confusion_matrix(matrix: np.ndarray, labels: list[str], path: str | Path) -> Path:
    """Counts of (true, predicted) classes."""
    fig = agg_figure((1.2 * len(labels) + 3, 1.2 * len(labels) + 2))
    ax = fig.subplots()
    ax.imshow(matrix, cmap="Blues")
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    for (i, j), count in np.ndenumerate(matrix):
        colour = "white" if count > matrix.max() / 2 else "black"
        ax.text(j, i, str(count), ha="center", va="center", color=colour)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return Path(path)


def plot_graph(
    graph: nx.Graph, colours: list[int], labels: list[str], path: str | Path, title: str = ""
) -> Path:
    """Draw a networkx graph with nodes coloured by class index."""
    import networkx as nx

    fig = agg_figure((8, 8))
    ax = fig.subplots()
    layout = nx.spring_layout(graph, seed=0, iterations=50 if len(graph) < 500 else 20)
    cmap = matplotlib.colormaps["tab10"]
    nx.draw_networkx_edges(graph, layout, ax=ax, alpha=0.2, width=0.5)
    nx.draw_networkx_nodes(
        graph,
        layout,
        ax=ax,
        node_size=max(10, 3000 // max(len(graph), 1)),
        node_color=[cmap(c % 10) for c in colours],
    )
    for c, name in enumerate(labels):
        ax.scatter([], [], color=cmap(c % 10), label=name)
    ax.legend(loc="best")
    ax.set_title(title)
    ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return Path(path)
