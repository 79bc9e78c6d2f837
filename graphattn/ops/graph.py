"""Edge-list preparation shared by every attention kernel.

Attention is defined by the *set* of allowed (source j -> target i) pairs. Before any
kernel runs, the edge list is validated, duplicates are merged (their edge features
averaged), self-loops are added where asked and missing, and the edges are sorted by
(target, source). The sorted list doubles as a CSR structure over targets
(``rowptr``), which the fused kernels walk node by node.

Preparation is cached per ``edge_index`` tensor (identity plus in-place version
counter), so a stack of layers called on the same graph prepares it once. Edits that
bypass the version counter (through ``edge_index.data`` or a NumPy view) are not seen:
pass a new tensor, or ``cache=False``, after such an edit. Edge sets prepared under
``torch.inference_mode()`` are kept apart from the others, whose tensors autograd may
need to save for a backward pass. Tensors created under inference mode carry no version
counter and are not cached.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass, field

import torch
from torch import Tensor

from graphattn.errors import GraphInputError, NonFiniteError
from graphattn.ops.segment import csr_pointer, segment_counts

__all__ = [
    "EdgeSet",
    "check_finite",
    "prepare_edges",
    "validate_batch",
    "validate_edge_index",
    "validate_node_features",
]


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
        hop_distance: ``[E]`` long: 0 for self-loops, 1 for input edges, d for pairs
            added by k-hop attention, ``hops + 1`` for farther pairs of global attention.
        cache: scratch space for kernels to keep derived structures (transposes,
            sparse tensors) alive as long as this edge set.
    """

    edge_index: Tensor
    num_nodes: int
    rowptr: Tensor
    input_to_edge: Tensor
    input_count: Tensor
    hop_distance: Tensor
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

    def by_source(self) -> tuple[Tensor, Tensor]:
        """The transposed CSR: ``(perm, rowptr_by_source)``, where ``perm`` sorts the edges
        by (source, target) and ``rowptr_by_source`` points into that order. Not cached
        here; the kernels keep what they build from it in :attr:`cache`."""
        src, dst = self.edge_index
        perm = torch.argsort(src * self.num_nodes + dst)
        return perm, csr_pointer(src, self.num_nodes)

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
        # Always divide: testing for duplicates first would cost a GPU synchronisation.
        count = self.input_count.clamp(min=1).to(edge_attr.dtype)
        return total / count.view(-1, *([1] * (edge_attr.dim() - 1)))


def validate_edge_index(edge_index: Tensor, num_nodes: int) -> None:
    """Raise :class:`GraphInputError` unless ``edge_index`` is a valid ``[2, E]`` index."""
    if not isinstance(edge_index, Tensor):
        raise GraphInputError(f"edge_index must be a torch.Tensor, got {type(edge_index).__name__}")
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise GraphInputError(f"edge_index must have shape [2, E], got {list(edge_index.shape)}")
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


NEGATIVE_GRAPH_ID = "batch must hold graph ids >= 0"


def validate_batch(batch: Tensor, num_nodes: int, check_ids: bool = True) -> None:
    """Raise :class:`GraphInputError` unless ``batch`` is a ``[num_nodes]`` int64 (or
    int32) tensor of graph ids >= 0 (``check_ids=False`` leaves the ids to the caller,
    which can check them without a host synchronisation of its own). Other integer
    types are refused: torch cannot index with int16, and reads uint8 as a mask."""
    if not isinstance(batch, Tensor):
        raise GraphInputError(f"batch must be a torch.Tensor, got {type(batch).__name__}")
    if batch.dim() != 1 or batch.numel() != num_nodes:
        raise GraphInputError(f"batch must have shape [N={num_nodes}], got {list(batch.shape)}")
    if batch.dtype not in (torch.int64, torch.int32):
        raise GraphInputError(
            f"batch must be an int64 (or int32) tensor of graph ids, got {batch.dtype}"
        )
    if check_ids and batch.numel() > 0 and int(batch.min()) < 0:
        raise GraphInputError(NEGATIVE_GRAPH_ID)


def validate_node_features(x: Tensor, in_channels: int, edge_attr: Tensor | None = None) -> None:
    """Raise :class:`GraphInputError` unless ``x`` is a finite ``[N, in_channels]`` tensor
    (and ``edge_attr``, if given, finite: both are checked in one host synchronisation)."""
    if not isinstance(x, Tensor):
        raise GraphInputError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2 or x.size(1) != in_channels:
        raise GraphInputError(
            f"x must have shape [N, {in_channels}] (in_channels={in_channels}), got {list(x.shape)}"
        )
    if not x.is_floating_point():
        raise GraphInputError(f"x must be a floating-point tensor, got {x.dtype}")
    check_finite(x=x, edge_attr=edge_attr)


def check_finite(**named: Tensor | None) -> None:
    """Raise :class:`~graphattn.errors.NonFiniteError` (a :class:`GraphInputError`)
    naming the first NaN or inf entry of the given
    floating-point tensors (``check_finite(x=x, edge_attr=edge_attr)``; None is skipped),
    with one host synchronisation when all are finite."""
    named = {k: v for k, v in named.items() if v is not None and v.is_floating_point()}
    if not named:
        return
    # One reduction per tensor is far cheaper than a full mask; a NaN or inf anywhere
    # makes a sum non-finite (an overflowing sum of finite values only costs the full
    # check below).
    sums = [v.detach().sum() for v in named.values()]
    total = sums[0] if len(sums) == 1 else torch.stack([t.double() for t in sums]).sum()
    if bool(torch.isfinite(total)):
        return
    for name, values in named.items():
        finite = torch.isfinite(values)
        if not bool(finite.all()):
            where = (~finite).nonzero()[0].tolist()
            index = ", ".join(map(str, where))
            raise NonFiniteError(
                f"{name} has non-finite values: {name}[{index}] = "
                f"{values[tuple(where)].item()} ({int((~finite).sum())} non-finite entries "
                "in all)"
            )


def _build(
    edge_index: Tensor,
    num_nodes: int,
    add_self_loops: bool,
    extra: tuple[Tensor, Tensor] | None = None,
) -> EdgeSet:
    """Coalesce input edges (+ extra pairs with their hop distances) into an EdgeSet."""
    edge_index = edge_index.long()
    num_input = edge_index.size(1)
    distance = torch.ones(num_input, dtype=torch.long, device=edge_index.device)
    if extra is not None:
        edge_index = torch.cat([edge_index, extra[0].long()], dim=1)
        distance = torch.cat([distance, extra[1].long()])
    if add_self_loops:
        # Every loop (i, i); the unique below merges those already present. (Finding the
        # missing ones instead would cost a device-to-host synchronisation on a GPU.)
        loops = torch.arange(num_nodes, device=edge_index.device).repeat(2, 1)
        edge_index = torch.cat([edge_index, loops], dim=1)
        distance = torch.cat([distance, distance.new_zeros(loops.size(1))])
    src, dst = edge_index
    distance = distance.masked_fill(src == dst, 0)
    unique_key, inverse = torch.unique(dst * num_nodes + src, sorted=True, return_inverse=True)
    edges = torch.stack([unique_key % num_nodes, unique_key // num_nodes])
    hop_distance = distance.new_full((unique_key.numel(),), torch.iinfo(torch.long).max)
    hop_distance = hop_distance.scatter_reduce(0, inverse, distance, reduce="amin")
    input_to_edge = inverse[:num_input]
    input_count = segment_counts(input_to_edge, unique_key.numel())
    rowptr = csr_pointer(edges[1], num_nodes)
    return EdgeSet(edges, num_nodes, rowptr, input_to_edge, input_count, hop_distance)


def _extra_pairs(
    edge_index: Tensor, num_nodes: int, attend: str, hops: int, batch: Tensor | None
) -> tuple[Tensor, Tensor] | None:
    """Pairs beyond the input edges that ``attend``/``hops`` allow, with hop distances."""
    from graphattn.ops.khop import check_within_graphs, global_edges, khop_edges

    if attend == "edges" or (attend == "khop" and hops == 1):
        return None
    if hops > 1:  # khop_edges refuses an input edge that joins two graphs
        pairs, distance = khop_edges(edge_index, num_nodes, hops, batch)
        far = distance >= 2
        pairs, distance = pairs[:, far], distance[far]
    else:
        pairs = distance = None
    if attend == "global":
        everything = global_edges(num_nodes, batch).to(edge_index.device)  # checks batch
        if batch is not None and hops == 1:  # no pair crosses graphs: nor may an input edge
            check_within_graphs(edge_index, batch)
        farther = torch.full((everything.size(1),), hops + 1, device=edge_index.device)
        if pairs is None:
            return everything, farther
        return torch.cat([pairs, everything], dim=1), torch.cat([distance, farther])
    return pairs, distance


class _EdgeSetCache:
    """A small LRU cache keyed by tensor identity and in-place version counter.

    Weak references confirm that the tensors behind the ids are still the same
    objects (ids are reused after garbage collection), and drop an entry as soon as
    one of its tensors is freed: training on a stream of batches would otherwise keep
    the last ``capacity`` batches' edge sets (and their cached tensors) alive.
    """

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[tuple, tuple[list, EdgeSet]] = OrderedDict()

    @staticmethod
    def stamp(t: Tensor | None) -> tuple:
        return (None,) if t is None else (id(t), t._version, t.device)

    def get(self, key: tuple, tensors: list[Tensor | None]) -> EdgeSet | None:
        hit = self._entries.get(key)
        if hit is None:
            return None
        refs, value = hit
        alive = [None if r is None else r() for r in refs]
        if any(a is not t for a, t in zip(alive, tensors, strict=True)):
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, key: tuple, tensors: list[Tensor | None], value: EdgeSet) -> None:
        entries = self._entries

        def forget(_: weakref.ref) -> None:
            entries.pop(key, None)

        refs = [None if t is None else weakref.ref(t, forget) for t in tensors]
        self._entries[key] = (refs, value)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)


_CACHE = _EdgeSetCache()


ATTEND = ("edges", "khop", "global")


def prepare_edges(
    edge_index: Tensor,
    num_nodes: int,
    add_self_loops: bool = True,
    cache: bool = True,
    attend: str = "edges",
    hops: int = 1,
    batch: Tensor | None = None,
) -> EdgeSet:
    """Validate, deduplicate, add self-loops and sort the allowed pairs (cached).

    Args:
        edge_index: ``[2, E]`` long; ``edge_index[0]`` sources j, ``edge_index[1]`` targets i.
        num_nodes: N; every index must lie in ``[0, N)``.
        add_self_loops: give every node an edge to itself (not doubled if present).
        cache: reuse the result for the same (unchanged) ``edge_index`` (and ``batch``)
            tensors, so stacked layers prepare a graph once. "Unchanged" is judged by
            the tensors' in-place version counters, which edits through ``.data`` or
            NumPy views do not advance.
        attend: ``"edges"`` (the input edges), ``"khop"`` (all pairs within ``hops``
            directed steps) or ``"global"`` (all pairs inside each graph of ``batch``).
        hops: largest hop distance for ``"khop"``; for ``"global"`` the distances up
            to ``hops`` are recorded (farther pairs get ``hops + 1``).
        batch: ``[N]`` graph of each node; global attention never crosses graphs.

    Returns:
        An :class:`EdgeSet`; use :meth:`EdgeSet.merge_edge_features` for edge features.
    """
    if attend not in ATTEND:
        raise GraphInputError(f"attend must be one of {ATTEND}, got {attend!r}")
    if hops < 1:
        raise GraphInputError(f"hops must be at least 1, got {hops}")

    def build() -> EdgeSet:
        validate_edge_index(edge_index, num_nodes)
        extra = _extra_pairs(edge_index, num_nodes, attend, hops, batch)
        return _build(edge_index, num_nodes, add_self_loops, extra)

    needs_batch = attend != "edges" and batch is not None
    tensors = [edge_index, batch if needs_batch else None]
    # The cache key reads tensor attributes: refuse a list or array here, by name.
    if not isinstance(edge_index, Tensor):
        validate_edge_index(edge_index, num_nodes)
    if needs_batch and not isinstance(batch, Tensor):
        validate_batch(batch, num_nodes)
    # Tensors made under inference mode have no version counter, so an in-place edit
    # could not be told apart from the cached graph: they are prepared every call.
    if not cache or any(t is not None and t.is_inference() for t in tensors):
        return build()
    key = (
        *(_EdgeSetCache.stamp(t) for t in tensors),
        num_nodes,
        add_self_loops,
        attend,
        hops,
        # Inference tensors cannot be saved for backward: an edge set (and what kernels
        # cache in it) made under inference mode must not serve a later training step.
        torch.is_inference_mode_enabled(),
    )
    hit = _CACHE.get(key, tensors)
    if hit is None:
        hit = build()
        _CACHE.put(key, tensors, hit)
    return hit
