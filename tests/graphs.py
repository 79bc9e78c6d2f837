"""Random test graphs with the awkward cases: isolated nodes, self-loops, duplicates."""

from __future__ import annotations

import torch
from torch import Tensor


def random_graph(
    num_nodes: int,
    num_edges: int,
    generator: torch.Generator | None = None,
    isolated: int = 2,
    self_loops: int = 2,
    duplicates: int = 3,
) -> Tensor:
    """``[2, E]`` random edges; the last ``isolated`` nodes have no incoming edge."""
    g = generator
    reach = max(num_nodes - isolated, 1)
    src = torch.randint(0, num_nodes, (num_edges,), generator=g)
    dst = torch.randint(0, reach, (num_edges,), generator=g)
    loops = torch.randint(0, reach, (self_loops,), generator=g)
    edge_index = torch.cat([torch.stack([src, dst]), loops.repeat(2, 1)], dim=1)
    if duplicates and edge_index.size(1):
        pick = torch.randint(0, edge_index.size(1), (duplicates,), generator=g)
        edge_index = torch.cat([edge_index, edge_index[:, pick]], dim=1)
    return edge_index


def random_batch(sizes: list[int], edges_per_node: int = 3, seed: int = 0):
    """Concatenate random graphs of the given sizes: ``(edge_index, batch)``."""
    g = torch.Generator().manual_seed(seed)
    parts, batch, offset = [], [], 0
    for b, n in enumerate(sizes):
        parts.append(random_graph(n, edges_per_node * n, g, isolated=1) + offset)
        batch.append(torch.full((n,), b))
        offset += n
    return torch.cat(parts, dim=1), torch.cat(batch)
