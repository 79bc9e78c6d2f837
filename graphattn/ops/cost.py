"""The cost model behind ``mode="auto"``: sparse (edge list) or dense (padded N×N)?

Sparse attention does work proportional to the number of allowed pairs E; dense
attention does work proportional to the padded pairs P = B·L² (B graphs, L the largest),
but with far better constants (one batched matrix product instead of gathers and
scatters). So dense wins once the *density* E / P passes a crossover that depends on
the device. The crossovers below were measured with ``graphattn bench`` (the density
sweep at N=2,000); dense is never chosen when its estimated memory exceeds the budget.
"""

from __future__ import annotations

import torch

__all__ = ["CROSSOVER_DENSITY", "choose_mode"]

# Fraction of allowed pairs among padded pairs above which dense is faster.
# CPU: measured with `graphattn bench` on 2 cores (density sweep at N=2,000, 4 heads x 16:
# fused sparse 44 ms vs dense 59 ms at density 0.10, 83 ms vs 80 ms at 0.25).
# CUDA: not measured yet (no GPU was available); a conservative placeholder.
CROSSOVER_DENSITY = {"cpu": 0.25, "cuda": 0.1}


def choose_mode(
    num_edges: int,
    num_graphs: int,
    max_nodes: int,
    dense_bytes: int,
    max_dense_bytes: int,
    device: torch.device | str,
) -> str:
    """Return ``"dense"`` or ``"sparse"`` for one batch.

    Args:
        num_edges: allowed (source, target) pairs, self-loops included.
        num_graphs: B.
        max_nodes: L, the largest graph of the batch.
        dense_bytes: dense mode's estimated memory for this batch.
        max_dense_bytes: the memory budget for dense mode.
        device: where the computation runs.
    """
    padded_pairs = num_graphs * max_nodes * max_nodes
    if padded_pairs == 0 or dense_bytes > max_dense_bytes:
        return "sparse"
    kind = torch.device(device).type
    crossover = CROSSOVER_DENSITY.get(kind, CROSSOVER_DENSITY["cpu"])
    return "dense" if num_edges / padded_pairs >= crossover else "sparse"
