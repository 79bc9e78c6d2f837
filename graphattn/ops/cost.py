"""The cost models behind ``mode="auto"`` and ``kernel="auto"``.

``mode``: sparse (edge list) or dense (padded N×N)?

Sparse attention does work proportional to the number of allowed pairs E; dense
attention does work proportional to the padded pairs P = B·L² (B graphs, L the largest),
but with far better constants (one batched matrix product instead of gathers and
scatters). So dense wins once the *density* E / P passes a crossover that depends on
the device. The crossovers below were measured with ``graphattn bench`` (the density
sweeps); dense is never chosen when its estimated memory exceeds the budget.

On a GPU both modes also have a fixed cost per call (kernel launches and a few host
synchronisations) that hides the work of small graphs, and dense mode's is larger:
there dense is chosen only when the sparse work E·H·D is large enough for the
per-pair costs to decide (``DENSE_MIN_WORK``).

``kernel`` (sparse mode, CPU): the fused kernel loops over heads with a few sparse
products each, a fixed cost per call that pays off only on large edge sets; on small
ones (a batch of molecules) the gather kernel's ``[E, H, D]`` temporaries are small
and it is faster. Part of the fused kernel's cost grows with the nodes rather than the
edges, so between the two size thresholds it is chosen only for graphs of high average
in-degree. With edge features the fused CPU kernel gathers per head as well, so
its break-even size is larger. CUDA always gets the fused (Triton) kernel.

Where Numba is installed and the tensors are float32 or float64, the Numba kernel
(compiled loops over the CSR, no ``[E, H, D]`` temporaries) replaces the gather kernel,
and the fused one too except on large graphs without edge features
(``NUMBA_MAX_SIZE_CPU``): at N=100,000 (in-degree 10, 4 heads x 16) the fused kernel's
per-head sparse products took 310 ms forward + backward against the Numba loops' 453 ms,
whose gathers from random rows of 25 MB tensors miss the caches (2 threads); with edge
features the fused kernel gathers per head as well and took 2,896 ms against 390 ms.
"""

from __future__ import annotations

import torch

__all__ = [
    "CROSSOVER_DENSITY",
    "DENSE_MIN_WORK",
    "FUSED_MIN_DEGREE_CPU",
    "FUSED_MIN_SIZE_CPU",
    "NUMBA_MAX_SIZE_CPU",
    "choose_kernel",
    "choose_mode",
]

# Fraction of allowed pairs among padded pairs above which dense is faster.
# CPU: measured with `graphattn bench` on 2 cores (density sweep at N=2,000, 4 heads x 16:
# fused sparse 44 ms vs dense 59 ms at density 0.10, 83 ms vs 80 ms at 0.25).
# CUDA (H100, fp32, 4 heads x 16, forward + backward): the fused Triton kernel costs
# about 0.42-0.46 ns per allowed pair on dense graphs, dense mode about 0.17 ns per
# padded pair at N=8,000, so dense wins from a density of about 0.4 once fixed costs no
# longer dominate. `graphattn bench --device cuda`, sweep at N=8,000: fused 7.2 ms vs
# dense 12.4 ms at density 0.25, 13.5 ms vs 13.0 ms at 0.5; crossing interpolated at 0.44.
CROSSOVER_DENSITY = {"cpu": 0.25, "cuda": 0.45}

# Smallest sparse work E·H·D (allowed pairs x heads x head dim) for which mode="auto" may
# pick dense. CUDA (H100): sparse takes ~2 ms and dense ~4-6 ms per layer whatever the
# size up to E·H·D ≈ 5e8 (N=2,000 up to density 0.5: fused 1.7-2.4 ms, dense 4.1-5.8 ms;
# N=4,000 at 0.5, E·H·D = 5.1e8: fused 4.0 ms, dense 5.9 ms; at 1.0, 1.0e9: fused 7.9 ms,
# dense 5.9 ms). On CPU the fixed costs are small against the work: no minimum.
DENSE_MIN_WORK = {"cpu": 0, "cuda": 2**29}

# Smallest E·H·D (allowed pairs x heads x head dim) for which kernel="auto" runs the fused
# kernel on CPU; below it runs the gather kernel. benchmarks/kernel_crossover.py: forward +
# backward of one layer, F=64, 4 heads x 16, 1 thread; fused / gather time, the kernels
# interleaved call by call (benchmarks/results/kernels/):
# - no edge features: 1.58 at 0.08M (ESOL batches of 32), 1.04 at 0.34M (ESOL 128),
#   1.18 at 0.35M (random, in-degree 11), 0.97 at 0.70M, 0.71-0.79 at 1.3-1.4M, 0.56 at
#   3.5M, 0.25 at 14M. Before the gather kernel, fused / reference with 2 threads (paired
#   timing, benchmarks/auto_choice.py, five runs) was 0.64-1.04 (median 0.82) at 0.70M
#   with 11 pairs per node, but 0.99-1.38 (median 1.2) at 0.77M with 6, and 1.17-1.42 at
#   0.33M (ESOL batches of 128, 3 pairs per node): hence "dense_plain";
# - with edge features the fused CPU kernel is slower up to 1.4M (1.21-1.93), level at
#   3.5M (0.97) and a little faster at 14M (0.89): from 2^23 (32 MiB per [E, H, D] tensor)
#   it is chosen for memory, since the gather kernel keeps two [E, H, D] tensors for
#   backward.
FUSED_MIN_SIZE_CPU = {"plain": 2**20, "edge_terms": 2**23, "dense_plain": 2**19}
# Pairs per node from which "dense_plain" applies (no edge features).
FUSED_MIN_DEGREE_CPU = 8

# Largest E·H·D for which kernel="auto" runs the Numba kernel on CPU without edge features
# (with edge features: any size). benchmarks/kernel_crossover.py, 1 thread, numba / fused:
# 0.57-0.88 at 0.08-1.41M, 0.97 at 3.5M, 1.24 at 14M (N=20,000); with edge features
# 0.48-0.61 everywhere up to 14M. Ad hoc, 2 threads, the kernels alone: 0.51 at 3.5M,
# 0.82 at 14M, 1.46 at 70M (N=100,000); with edge features 0.17, 0.54 and 0.13.
NUMBA_MAX_SIZE_CPU = 2**22


def choose_kernel(
    num_edges: int,
    heads: int,
    head_dim: int,
    edge_terms: bool,
    device: torch.device | str,
    num_nodes: int | None = None,
    numba: bool = False,
) -> str:
    """Return ``"fused"``, ``"numba"`` or ``"gather"`` for one call of a sparse layer.

    On CPU where the Numba kernel can run (``numba``): numba with edge features, and
    without them below E'·H·D = ``NUMBA_MAX_SIZE_CPU``; else fused. Without Numba: fused
    from ``FUSED_MIN_SIZE_CPU["edge_terms"]`` with edge features; without, from
    ``FUSED_MIN_SIZE_CPU["plain"]``, or already from ``["dense_plain"]`` when there are
    at least ``FUSED_MIN_DEGREE_CPU`` pairs per node; below, gather.

    Args:
        num_edges: allowed (source, target) pairs E'.
        heads, head_dim: H and D.
        edge_terms: whether edge features are added to keys and values.
        device: where the computation runs (CUDA: always fused).
        num_nodes: N (unknown: the in-degree rule does not apply).
        numba: whether the Numba kernel can run on this call's tensors
            (:func:`graphattn.ops.numba_attention.usable`).
    """
    if torch.device(device).type != "cpu":
        return "fused"
    size = num_edges * heads * head_dim
    if numba:
        return "numba" if edge_terms or size < NUMBA_MAX_SIZE_CPU else "fused"
    if edge_terms:
        return "fused" if size >= FUSED_MIN_SIZE_CPU["edge_terms"] else "gather"
    if size >= FUSED_MIN_SIZE_CPU["plain"]:
        return "fused"
    dense = num_nodes is not None and num_edges >= FUSED_MIN_DEGREE_CPU * num_nodes
    return "fused" if dense and size >= FUSED_MIN_SIZE_CPU["dense_plain"] else "gather"


def choose_mode(
    num_edges: int,
    num_graphs: int,
    max_nodes: int,
    dense_bytes: int,
    max_dense_bytes: int,
    device: torch.device | str,
    channels: int = 1,
) -> str:
    """Return ``"dense"`` or ``"sparse"`` for one batch.

    Dense iff its estimated memory fits the budget, the density E / (B·L²) reaches
    ``CROSSOVER_DENSITY[device]`` and the sparse work E·C reaches ``DENSE_MIN_WORK[device]``.

    Args:
        num_edges: allowed (source, target) pairs E, self-loops included.
        num_graphs: B.
        max_nodes: L, the largest graph of the batch.
        dense_bytes: dense mode's estimated memory for this batch.
        max_dense_bytes: the memory budget for dense mode.
        device: where the computation runs.
        channels: C = heads x head_dim of the attention.
    """
    padded_pairs = num_graphs * max_nodes * max_nodes
    if padded_pairs == 0 or dense_bytes > max_dense_bytes:
        return "sparse"
    kind = torch.device(device).type
    kind = kind if kind in CROSSOVER_DENSITY else "cpu"
    if num_edges * channels < DENSE_MIN_WORK[kind]:
        return "sparse"
    return "dense" if num_edges / padded_pairs >= CROSSOVER_DENSITY[kind] else "sparse"
