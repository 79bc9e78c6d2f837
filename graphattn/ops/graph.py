"""Edge-list preparation shared by every attention kernel.

Attention is defined by the *set* of allowed (source j -> target i) pairs. Before any
kernel runs, the edge list is validated, duplicates are merged (their edge features
averaged), self-loops are added where asked and missing, and the edges are sorted by
(target, source). The sorted list doubles as a CSR structure over targets
(``rowptr``), which the fused kernels walk node by node.

Preparation is cached per ``edge_index`` tensor (identity plus in-place version
counter), so a stack of layers called on the same graph prepares it once.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass, field

import torch
from torch import Tensor

from graphattn.errors import GraphInputError

__all__ = ["EdgeSet", "prepare_edges", "validate_edge_index", "validate_node_features"]


@dataclass
class EdgeSet:
    """A validated, deduplicated edge list sorted by (target, source).

    Attributes:
        edge_index: ``[2, E]`` long; row 0 sources j, row 1 targets i.
        num_nodes: N.
        rowptr: ``[N + 1]`` CSR pointer over targets: the incoming edges of node i
            are ``edge_index[:, rowptr[i]:rowptr[i + 1]]``.
        input_to_edge: ``[E_in]`` position in ``edge_index`` of each input edge
            (duplicates share a position).
        input_count: ``[E]`` how many input edges were merged into each edge
            (0 for an added self-loop).
        cache: scratch space for kernels to keep derived structures (transposes,
            sparse tensors) alive as long as this edge set.
    """

    edge_index: Tensor
    num_nodes: int
    rowptr: Tensor
    input_to_edge: Tensor
    input_count: Tensor
    cache: dict = field(default_factory=dict, repr=False)

    @property
    def src(self) -> Tensor:
        return self.edge_index[0]

    @property
    def dst(self) -> Tensor:
        return self.edge_index[1]

    @property
    def num_edges(self) -> int:
        return self.edge_index.size(1)

    def in_degree(self) -> Tensor:
        """``[N]`` number of allowed sources per target."""
        return self.rowptr.diff()

    def merge_edge_features(self, edge_attr: Tensor) -> Tensor:
        """Carry ``[E_in, ...]`` input edge features onto the prepared edges.

        Duplicate input edges are averaged; added self-loops get zeros. Differentiable.
        """
        if edge_attr.size(0) != self.input_to_edge.numel():
            raise GraphInputError(
                f"edge_attr has {edge_attr.size(0)} rows but edge_index has "
                f"{self.input_to_edge.numel()} edges"
            )
        total = edge_attr.new_zeros((self.num_edges, *edge_attr.shape[1:]))
        total = total.index_add(0, self.input_to_edge, edge_attr)
        count = self.input_count.clamp(min=1).to(edge_attr.dtype)
        return total / count.view(-1, *([1] * (edge_attr.dim() - 1)))


def validate_edge_index(edge_index: Tensor, num_nodes: int) -> None:
    """Raise :class:`GraphInputError` unless ``edge_index`` is a valid ``[2, E]`` index."""
    if not isinstance(edge_index, Tensor):
        raise GraphInputError(f"edge_index must be a torch.Tensor, got {type(edge_index).__name__}")
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise GraphInputError(
            f"edge_index must have shape [2, E], got {list(edge_index.shape)}"
        )
    if edge_index.dtype not in (torch.int64, torch.int32):
        raise GraphInputError(f"edge_index must be int64 (or int32), got {edge_index.dtype}")
    if edge_index.numel() == 0:
        return
    bad = (edge_index < 0) | (edge_index >= num_nodes)
    if bool(bad.any()):
        column = int(bad.any(dim=0).nonzero()[0])
        pair = edge_index[:, column].tolist()
        count = int(bad.any(dim=0).sum())
        raise GraphInputError(
            f"edge_index out of range for {num_nodes} nodes: edge {column} is "
            f"(source {pair[0]} -> target {pair[1]}); {count} edge(s) in all are out of range"
        )


def validate_node_features(x: Tensor, in_channels: int) -> None:
    """Raise :class:`GraphInputError` unless ``x`` is a finite ``[N, in_channels]`` tensor."""
    if not isinstance(x, Tensor):
        raise GraphInputError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2 or x.size(1) != in_channels:
        raise GraphInputError(
            f"x must have shape [N, {in_channels}] (in_channels={in_channels}), "
            f"got {list(x.shape)}"
        )
    if not x.is_floating_point():
        raise GraphInputError(f"x must be a floating-point tensor, got {x.dtype}")
    finite = torch.isfinite(x)
    if not bool(finite.all()):
        row, col = (~finite).nonzero()[0].tolist()
        raise GraphInputError(
            f"x has non-finite values: x[{row}, {col}] = {x[row, col].item()} "
            f"({int((~finite).sum())} non-finite entries in all)"
        )


def _missing_self_loops(edge_index: Tensor, num_nodes: int) -> Tensor:
    """``[2, M]`` the loops (i, i) for every node that has none yet."""
    src, dst = edge_index
    has_loop = torch.zeros(num_nodes, dtype=torch.bool, device=edge_index.device)
    has_loop[src[src == dst]] = True
    return (~has_loop).nonzero().view(-1).repeat(2, 1)


def _build(edge_index: Tensor, num_nodes: int, add_self_loops: bool) -> EdgeSet:
    edge_index = edge_index.long()
    num_input = edge_index.size(1)
    if add_self_loops:
        edge_index = torch.cat([edge_index, _missing_self_loops(edge_index, num_nodes)], dim=1)
    src, dst = edge_index
    unique_key, inverse = torch.unique(dst * num_nodes + src, sorted=True, return_inverse=True)
    edges = torch.stack([unique_key % num_nodes, unique_key // num_nodes])
    input_to_edge = inverse[:num_input]
    input_count = torch.bincount(input_to_edge, minlength=unique_key.numel())
    counts = torch.bincount(edges[1], minlength=num_nodes)
    rowptr = torch.cat([counts.new_zeros(1), counts.cumsum(0)])
    return EdgeSet(edges, num_nodes, rowptr, input_to_edge, input_count)


class _EdgeSetCache:
    """A small LRU cache keyed by tensor identity and in-place version counter.

    A weak reference confirms that the tensor behind an ``id`` is still the same
    object (ids are reused after garbage collection).
    """

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[tuple, tuple[weakref.ref, EdgeSet]] = OrderedDict()

    def get(self, key: tuple, tensor: Tensor) -> EdgeSet | None:
        hit = self._entries.get(key)
        if hit is None:
            return None
        ref, value = hit
        if ref() is not tensor:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    def put(self, key: tuple, tensor: Tensor, value: EdgeSet) -> None:
        self._entries[key] = (weakref.ref(tensor), value)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)


_CACHE = _EdgeSetCache()


def prepare_edges(
    edge_index: Tensor, num_nodes: int, add_self_loops: bool = True, cache: bool = True
) -> EdgeSet:
    """Validate, deduplicate, add self-loops and sort an edge list (cached).

    Args:
        edge_index: ``[2, E]`` long; ``edge_index[0]`` sources j, ``edge_index[1]`` targets i.
        num_nodes: N; every index must lie in ``[0, N)``.
        add_self_loops: give every node an edge to itself (not doubled if present).
        cache: reuse the result for the same (unchanged) ``edge_index`` tensor, so
            stacked layers prepare a graph once.

    Returns:
        An :class:`EdgeSet`; use :meth:`EdgeSet.merge_edge_features` for edge features.
    """
    validate_edge_index(edge_index, num_nodes)
    if not cache:
        return _build(edge_index, num_nodes, add_self_loops)
    key = (id(edge_index), edge_index._version, num_nodes, add_self_loops, edge_index.device)
    hit = _CACHE.get(key, edge_index)
    if hit is None:
        hit = _build(edge_index, num_nodes, add_self_loops)
        _CACHE.put(key, edge_index, hit)
    return hit
