"""Benchmark inputs: random graphs of a given in-degree and batches of ESOL molecules."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

__all__ = [
    "GraphInput",
    "MoleculeBatch",
    "esol_batches",
    "load_esol",
    "project_features",
    "random_graph",
]

ESOL_TARGET = "measured log solubility in mols per litre"


@dataclass
class GraphInput:
    """One graph (or batch of graphs) fed to an attention layer.

    Attributes:
        x: ``[N, F]`` node features.
        edge_index: ``[2, E]`` (sources, targets), sorted by target.
        batch: ``[N]`` graph of each node, or ``None`` for a single graph.
    """

    x: Tensor
    edge_index: Tensor
    batch: Tensor | None = None

    def to(self, device: torch.device | str) -> GraphInput:
        """The same graph on ``device``."""
        batch = None if self.batch is None else self.batch.to(device)
        return GraphInput(self.x.to(device), self.edge_index.to(device), batch)


@dataclass
class MoleculeBatch:
    """A batch of featurized molecules as plain tensors (cheap to send to a worker).

    Attributes:
        x: ``[N, atom_dim]`` atom features.
        edge_index: ``[2, E]`` bonds (both directions).
        edge_attr: ``[E, bond_dim]`` bond features.
        batch: ``[N]`` molecule of each atom.
        y: ``[B, 1]`` targets (ESOL's measured log solubility).
        num_graphs: B.
    """

    x: Tensor
    edge_index: Tensor
    edge_attr: Tensor
    batch: Tensor
    y: Tensor
    num_graphs: int


def random_graph(num_nodes: int, in_degree: int, seed: int = 0) -> Tensor:
    """``[2, N * in_degree]`` edges: each node gets ``in_degree`` distinct random sources.

    Sources never equal their target (no self-loops). Edges are sorted by target.
    """
    if not 0 < in_degree < num_nodes:
        raise ValueError(f"in_degree must be in [1, N-1], got {in_degree} for N={num_nodes}")
    generator = torch.Generator().manual_seed(seed)
    # Dense rows: a random permutation per node; sparse rows: redraw the rare repeats.
    if 4 * in_degree > num_nodes:
        offsets = _exact_offsets(num_nodes, in_degree, generator)
    else:
        offsets = _redrawn_offsets(num_nodes, in_degree, generator)
    target = torch.arange(num_nodes).repeat_interleave(in_degree)
    source = (target + offsets.reshape(-1)) % num_nodes
    return torch.stack([source, target])


def _exact_offsets(num_nodes: int, in_degree: int, generator: torch.Generator) -> Tensor:
    """``[N, d]`` distinct offsets in ``[1, N)`` per row, by sorting random keys."""
    keys = torch.rand(num_nodes, num_nodes - 1, generator=generator)
    return keys.argsort(dim=1)[:, :in_degree] + 1


def _redrawn_offsets(num_nodes: int, in_degree: int, generator: torch.Generator) -> Tensor:
    """``[N, d]`` distinct offsets in ``[1, N)`` per row, redrawing duplicates (d << N)."""
    offsets = torch.randint(1, num_nodes, (num_nodes, in_degree), generator=generator)
    while True:
        offsets = offsets.sort(dim=1).values
        repeated = torch.zeros_like(offsets, dtype=torch.bool)
        repeated[:, 1:] = offsets[:, 1:] == offsets[:, :-1]
        count = int(repeated.sum())
        if count == 0:
            return offsets
        offsets[repeated] = torch.randint(1, num_nodes, (count,), generator=generator)


def random_features(num_nodes: int, channels: int, seed: int = 0) -> Tensor:
    """``[N, F]`` standard normal node features."""
    generator = torch.Generator().manual_seed(seed + 1)
    return torch.randn(num_nodes, channels, generator=generator)


def project_features(x: Tensor, channels: int, seed: int = 0) -> Tensor:
    """Map atom features to ``channels`` columns with a fixed random projection.

    The projection ``W ~ N(0, 1/atom_dim)`` depends only on ``seed`` and the widths,
    so every implementation and every batch sees the same map.
    """
    generator = torch.Generator().manual_seed(seed + 2)
    weight = torch.randn(x.size(1), channels, generator=generator) / x.size(1) ** 0.5
    return x.float() @ weight


def load_esol(data_dir: str | Path | None, download: bool = True) -> tuple[list[str], list[float]]:
    """ESOL's SMILES and measured log solubilities.

    Raises:
        graphattn.datasets.files.DatasetUnavailableError: the file is not available.
    """
    from graphattn.datasets.files import resolve_file

    path = resolve_file("esol", "delaney-processed.csv", data_dir, download=download)
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return [r["smiles"].strip() for r in rows], [float(r.get(ESOL_TARGET) or 0.0) for r in rows]


def esol_batches(
    smiles: list[str],
    targets: list[float],
    batch_size: int,
    count: int,
    seed: int = 0,
) -> tuple[list[MoleculeBatch], int, int]:
    """``count`` batches of ``batch_size`` shuffled ESOL molecules (fewer if ESOL runs out).

    Returns:
        ``(batches, atom_dim, bond_dim)``.
    """
    from torch_geometric.data import Batch

    from graphattn.errors import GraphInputError
    from graphattn.featurize.molecule import MoleculeFeaturizer

    featurizer = MoleculeFeaturizer()
    order = torch.randperm(len(smiles), generator=torch.Generator().manual_seed(seed)).tolist()
    graphs = []
    for index in order:
        if len(graphs) == batch_size * count:
            break
        try:
            data = featurizer(smiles[index])
        except GraphInputError:
            continue
        if data.num_nodes:
            data.y = torch.tensor([[targets[index]]], dtype=torch.float32)
            graphs.append(data)
    batches = []
    for start in range(0, len(graphs) - batch_size + 1, batch_size):
        b = Batch.from_data_list(graphs[start : start + batch_size])
        batches.append(
            MoleculeBatch(b.x, b.edge_index, b.edge_attr, b.batch, b.y, int(b.num_graphs))
        )
    return batches, featurizer.atom_dim, featurizer.bond_dim
