"""The cost models behind ``mode="auto"`` and ``kernel="auto"``.

``mode``: sparse (edge list) or dense (padded N×N)?

Sparse attention does work proportional to the number of allowed pairs E; dense
attention does work proportional to the padded pairs P = B·L² (B graphs, L the largest),
but with far better constants (one batched matrix product instead of gathers and
scatters). So dense wins once the *density* E / P passes a crossover that depends on
the device. The crossovers below were measured with ``graphattn bench`` (the density
sweep at N=2,000); dense is never chosen when its estimated memory exceeds the budget.

``kernel`` (sparse mode, CPU): the fused kernel loops over heads with a few sparse
products each, a fixed cost per call that pays off only on large edge sets; on small
ones (a batch of molecules) the reference kernel's ``[E, H, D]`` temporaries are small
and it is faster. With edge features the fused CPU kernel gathers per head as well, so
its break-even size is larger. CUDA always gets the fused (Triton) kernel.
"""

from __future__ import annotations

import torch

__all__ = ["CROSSOVER_DENSITY", "FUSED_MIN_SIZE_CPU", "choose_kernel", "choose_mode"]

# Fraction of allowed pairs among padded pairs above which dense is faster.
# CPU: measured with `graphattn bench` on 2 cores (density sweep at N=2,000, 4 heads x 16:
# fused sparse 44 ms vs dense 59 ms at density 0.10, 83 ms vs 80 ms at 0.25).
# CUDA: not measured yet (no GPU was available); a conservative placeholder.
CROSSOVER_DENSITY = {"cpu": 0.25, "cuda": 0.1}

# Smallest E·H·D (allowed pairs x heads x head dim) for which kernel="auto" runs the fused
# kernel on CPU (benchmarks/kernel_crossover.py: forward + backward of one layer, F=64,
# 4 heads x 16, 1 thread; fused / reference time, two runs):
# - no edge features: 1.6-1.7 at 0.08M (ESOL batches of 32), 1.0-1.2 at 0.34M, 0.8-1.3 at
#   0.70M, 1.07 at 1.3M, 0.4-0.6 at 1.4M, 0.5-0.6 at 3.5M, 0.26 at 14M;
# - with edge features the fused CPU kernel is never clearly faster (1.0-2.4 up to 3.5M,
#   0.9-1.0 at 14M): from 2^23 (32 MiB per [E, H, D] tensor) it is chosen for memory,
#   since the reference kernel keeps about three more [E, H, D] tensors for backward.
FUSED_MIN_SIZE_CPU = {"plain": 2**20, "edge_terms": 2**23}


def choose_kernel(num_edges: int, heads: int, head_dim: int, edge_terms: bool, device) -> str:
    """Return ``"fused"`` or ``"reference"`` for one call of a sparse layer.

    Args:
        num_edges: allowed (source, target) pairs E'.
        heads, head_dim: H and D.
        edge_terms: whether edge features are added to keys and values.
        device: where the computation runs (CUDA: always fused).
    """
    if torch.device(device).type != "cpu":
        return "fused"
    threshold = FUSED_MIN_SIZE_CPU["edge_terms" if edge_terms else "plain"]
    return "fused" if num_edges * heads * head_dim >= threshold else "reference"


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
