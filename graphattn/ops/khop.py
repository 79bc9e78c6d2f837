r"""K-hop neighbourhoods and all-pairs edge lists for truncated and global attention.

Convention (as in PyG): ``edge_index[0]`` holds the source :math:`j` and ``edge_index[1]`` the
target :math:`i` of an edge :math:`j \to i`; node :math:`i` attends to the sources of its
incoming edges. Every edge list returned here is deduplicated, free of self pairs (the attention
layer adds self-loops itself) and sorted by ``(target, source)``, so the functions are pure and
deterministic: the same input always gives the same tensors, which is what a cache needs.

The sparse work is done on the CPU with :mod:`scipy.sparse`; the results come back on the
device of the input.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

from graphattn.errors import GraphInputError, check_count
from graphattn.ops.graph import validate_batch, validate_edge_index

__all__ = ["global_edges", "khop_edges"]


def _target_source_matrix(edge_index: Tensor, num_nodes: int) -> sp.csr_matrix:
    """Boolean-valued CSR matrix ``A`` with ``A[i, j] = 1`` iff ``j -> i``, diagonal dropped."""
    src, dst = edge_index.detach().cpu().numpy().astype(np.int64)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    data = np.ones(src.size, dtype=np.int32)
    adj = sp.csr_matrix((data, (dst, src)), shape=(num_nodes, num_nodes))
    adj.sum_duplicates()
    adj.data[:] = 1
    return adj


def check_within_graphs(edge_index: Tensor, batch: Tensor) -> None:
    """Raise :class:`GraphInputError` naming the first edge that joins two graphs of
    ``batch``: pairs grown from it (k-hop or global) would cross graphs."""
    crossing = batch[edge_index[0]] != batch[edge_index[1]]
    if bool(crossing.any()):
        e = int(crossing.nonzero()[0])
        src, dst = int(edge_index[0, e]), int(edge_index[1, e])
        raise GraphInputError(
            f"edge_index has an edge between two different graphs of batch: column {e}, "
            f"source {src} (graph {int(batch[src])}) -> target {dst} (graph {int(batch[dst])})"
        )


def khop_edges(
    edge_index: Tensor,
    num_nodes: int,
    hops: int,
    batch: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    r"""All pairs :math:`j \to i` within ``hops`` directed steps, with their distance.

    With :math:`d(j, i)` the length of a shortest directed path from :math:`j` to :math:`i`
    (following edges :math:`j \to i` forwards), returns every pair with
    :math:`1 \le d(j, i) \le` ``hops``. Self pairs (:math:`d = 0`) are excluded; self-loops and
    duplicate edges of the input are ignored. For an undirected graph pass both directions of
    every edge (e.g. :func:`torch_geometric.utils.to_undirected`).

    The computation is a breadth-first frontier expansion with sparse matrices: with
    :math:`\mathbf{A}_{ij} = 1` iff :math:`j \to i`, the frontier at distance :math:`h+1` is
    the support of :math:`\mathbf{A} \mathbf{F}_h` minus every pair already reached, where
    :math:`\mathbf{F}_1 = \mathbf{A}`. Its cost is that of ``hops - 1`` sparse products whose
    size is the number of pairs within ``hops``.

    Args:
        edge_index (torch.Tensor): edges :math:`j \to i`, integer tensor of shape
            :math:`[2, |\mathcal{E}|]`.
        num_nodes (int): number of nodes :math:`N`.
        hops (int): largest distance kept, :math:`\ge 1`.
        batch (torch.Tensor, optional): graph id of every node, shape :math:`[N]`, for a
            mini-batch of graphs. Paths cannot leave a graph, so it is only used to check that
            no input edge joins two graphs (which would make pairs cross graphs).
            (default: :obj:`None`)

    Returns:
        (torch.Tensor, torch.Tensor): ``edge_index_k`` of shape :math:`[2, |\mathcal{E}_k|]`
        (row 0 source :math:`j`, row 1 target :math:`i`), sorted by ``(target, source)`` without
        duplicates, and ``hop_distance`` of shape :math:`[|\mathcal{E}_k|]` (long) with
        :math:`d(j, i) \in [1, \text{hops}]`; both on the device of ``edge_index``.
    """
    num_nodes = check_count("num_nodes", num_nodes, least=0)
    validate_edge_index(edge_index, num_nodes)
    hops = check_count("hops", hops)
    if batch is not None:
        validate_batch(batch, num_nodes)
        check_within_graphs(edge_index, batch)

    adj = _target_source_matrix(edge_index, num_nodes)
    reached = (adj + sp.identity(num_nodes, dtype=np.int32, format="csr")).tocsr()
    distance = adj.copy()  # distance[i, j] = d(j, i) on reached pairs, 0 elsewhere
    frontier = adj
    for hop in range(2, hops + 1):
        step = (adj @ frontier).tocsr()
        step.data[:] = 1
        frontier = (step - step.multiply(reached)).tocsr()
        frontier.eliminate_zeros()
        if frontier.nnz == 0:
            break
        distance = (distance + hop * frontier).tocsr()
        if hop < hops:
            reached = (reached + frontier).tocsr()

    distance.sort_indices()
    coo = distance.tocoo()  # row-major with sorted columns: ordered by (target, source)
    device = edge_index.device
    target = torch.from_numpy(coo.row.astype(np.int64))
    source = torch.from_numpy(coo.col.astype(np.int64))
    out_index = torch.stack([source, target]).to(device)
    hop_distance = torch.from_numpy(coo.data.astype(np.int64)).to(device)
    return out_index, hop_distance


def global_edges(
    num_nodes: int,
    batch: Tensor | None = None,
    device: torch.device | str | None = None,
) -> Tensor:
    r"""All ordered pairs :math:`j \to i`, :math:`j \ne i`, of nodes in the same graph.

    A graph with :math:`n_g` nodes contributes :math:`n_g (n_g - 1)` pairs, so the output has
    :math:`\sum_g n_g (n_g - 1)` columns; no pair joins two graphs. This is the edge list of
    full ("global") attention restricted to each graph of a mini-batch. Memory grows with
    :math:`n_g^2`: meant for small graphs such as molecules.

    Args:
        num_nodes (int): number of nodes :math:`N`.
        batch (torch.Tensor, optional): graph id of every node, shape :math:`[N]`; need not be
            sorted. :obj:`None` means one graph. (default: :obj:`None`)
        device (torch.device or str, optional): device of the output; defaults to the device
            of ``batch``, else the CPU. (default: :obj:`None`)

    Returns:
        torch.Tensor: ``edge_index`` of shape :math:`[2, \sum_g n_g (n_g - 1)]` (long; row 0
        source, row 1 target), sorted by ``(target, source)``.
    """
    num_nodes = check_count("num_nodes", num_nodes, least=0)
    if device is None:
        device = batch.device if batch is not None else torch.device("cpu")
    if batch is None:
        batch = torch.zeros(num_nodes, dtype=torch.long, device=device)
    validate_batch(batch, num_nodes)
    batch = batch.to(device=device, dtype=torch.long)

    # Members of each graph, contiguous and ascending: ``members[ptr[g]:ptr[g + 1]]``.
    members = torch.sort(batch, stable=True).indices
    sizes = torch.bincount(batch)
    ptr = torch.cumsum(sizes, 0) - sizes
    # Target i (ascending) is repeated once per member of its graph, self included.
    per_target = sizes[batch]
    target = torch.repeat_interleave(torch.arange(num_nodes, device=device), per_target)
    start = torch.repeat_interleave(ptr[batch], per_target)
    seg_start = torch.repeat_interleave(torch.cumsum(per_target, 0) - per_target, per_target)
    offset = torch.arange(target.numel(), device=device) - seg_start
    source = members[start + offset]
    keep = source != target
    return torch.stack([source[keep], target[keep]])
