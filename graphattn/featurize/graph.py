"""General graphs to PyG ``Data`` and back, plus structural and text node features.

Edge convention (the one the attention layers use): ``edge_index[0]`` holds sources
j and ``edge_index[1]`` targets i, so node i attends over the edges j -> i. An
undirected edge {u, v} becomes the two directed edges u -> v and v -> u; an
undirected self-loop {u, u} becomes the single edge u -> u.

Nothing is dropped or merged on the way in: self-loops and duplicate edges are kept
as given (the attention layers merge duplicates and add missing self-loops
themselves) and counted in a :class:`GraphReport`, and a warning is logged.
"""

from __future__ import annotations

import array
import logging
import math
import numbers
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor
from torch_geometric.data import Data

from graphattn.errors import GraphInputError, check_count, check_seed
from graphattn.ops.graph import validate_edge_index

__all__ = [
    "GraphReport",
    "edges_from_pairs",
    "encode_labels",
    "from_networkx",
    "is_missing_label",
    "structural_features",
    "text_features",
    "to_networkx",
]

log = logging.getLogger(__name__)

_FLOAT32_MAX = float(np.finfo(np.float32).max)


@dataclass
class GraphReport:
    """What was found while building a graph; nothing listed here was dropped.

    Attributes:
        num_nodes: N, nodes in the graph (isolated ones included).
        num_input_edges: edges as given (file lines, networkx edges).
        num_edges: directed edges in ``edge_index`` (an undirected non-loop edge
            counts twice, a self-loop once).
        num_self_loops: input edges u -> u (kept).
        num_duplicate_edges: input edges that repeat an earlier one (kept). For an
            undirected graph ``u v`` and ``v u`` are the same edge.
        num_isolated_nodes: nodes that no input edge touches.
        directed: whether the input was read as directed.
        source: where the edges came from (a path, ``"networkx"``).
        notes: every warning and remark issued while building, in order.
    """

    num_nodes: int = 0
    num_input_edges: int = 0
    num_edges: int = 0
    num_self_loops: int = 0
    num_duplicate_edges: int = 0
    num_isolated_nodes: int = 0
    directed: bool = False
    source: str = ""
    notes: list[str] = field(default_factory=list)

    def note(self, message: str, level: int = logging.WARNING) -> None:
        """Record ``message`` in :attr:`notes` and log it at ``level``."""
        self.notes.append(message)
        log.log(level, message)

    def summary(self) -> str:
        """One line: nodes, edges, self-loops, duplicates, isolated nodes."""
        kind = "directed" if self.directed else "undirected"
        return (
            f"{self.source or 'graph'}: {self.num_nodes} nodes, {self.num_input_edges} "
            f"{kind} input edges -> {self.num_edges} directed edges; "
            f"{self.num_self_loops} self-loops, {self.num_duplicate_edges} duplicates, "
            f"{self.num_isolated_nodes} isolated nodes"
        )


def edges_from_pairs(
    src: Tensor,
    dst: Tensor,
    num_nodes: int,
    directed: bool = False,
    source: str = "",
    describe: Callable[[int], str] | None = None,
) -> tuple[Tensor, GraphReport]:
    """Build ``edge_index`` from input edges and report self-loops and duplicates.

    Args:
        src: ``[E_in]`` long, first endpoint of each input edge (0..N-1).
        dst: ``[E_in]`` long, second endpoint.
        num_nodes: N.
        directed: keep direction; otherwise add the reverse of every non-loop edge.
        source: name of the input, used in messages.
        describe: maps an input edge position to a location for messages
            (``"line 12"``); defaults to ``"edge <position>"``.

    Returns:
        ``edge_index`` ``[2, E]`` long (input edges first, then the reversed copies
        for an undirected graph) and a :class:`GraphReport`.

    Raises:
        GraphInputError: ``src`` and ``dst`` are not integer tensors of one length, or
            an id is outside 0..N-1 (the message names the first such edge).
    """
    num_nodes = check_count("num_nodes", num_nodes, least=0)
    describe = describe or (lambda k: f"edge {k}")
    _check_pairs(src, dst, num_nodes, describe)
    src, dst = src.long(), dst.long()
    report = GraphReport(
        num_nodes=num_nodes, num_input_edges=int(src.numel()), directed=directed, source=source
    )
    loop = src == dst
    if directed:
        edge_index = torch.stack([src, dst])
    else:
        edge_index = torch.stack([torch.cat([src, dst[~loop]]), torch.cat([dst, src[~loop]])])
    report.num_edges = int(edge_index.size(1))
    touched = torch.zeros(num_nodes, dtype=torch.bool)
    touched[src] = True
    touched[dst] = True
    report.num_isolated_nodes = int((~touched).sum())
    _report_loops_and_duplicates(report, src, dst, loop, describe)
    return edge_index, report


def _integer(t: Tensor) -> bool:
    return not (t.is_floating_point() or t.is_complex() or t.dtype == torch.bool)


def _check_pairs(src: Tensor, dst: Tensor, num_nodes: int, describe: Callable) -> None:
    for name, ids in (("src", src), ("dst", dst)):
        if not isinstance(ids, Tensor) or ids.dim() != 1 or not _integer(ids):
            raise GraphInputError(f"{name} must be a 1-D integer tensor of node ids")
    if src.numel() != dst.numel():
        raise GraphInputError(f"src has {src.numel()} ids but dst has {dst.numel()}")
    outside = (src < 0) | (src >= num_nodes) | (dst < 0) | (dst >= num_nodes)
    if bool(outside.any()):
        k = int(outside.nonzero()[0])
        raise GraphInputError(
            f"{describe(k)}: {int(src[k])} -> {int(dst[k])} is not an edge between node ids "
            f"0..{num_nodes - 1}"
        )


def _report_loops_and_duplicates(
    report: GraphReport, src: Tensor, dst: Tensor, loop: Tensor, describe: Callable[[int], str]
) -> None:
    where = report.source + ": " if report.source else ""
    report.num_self_loops = int(loop.sum())
    if report.num_self_loops:
        first = int(loop.nonzero()[0])
        report.note(
            f"{where}{report.num_self_loops} self-loop(s) kept (first at {describe(first)})"
        )
    a, b = src.numpy(), dst.numpy()
    if not report.directed:
        a, b = np.minimum(a, b), np.maximum(a, b)
    keys = a * max(report.num_nodes, 1) + b
    _, first_seen = np.unique(keys, return_index=True)
    repeat = np.ones(keys.size, dtype=bool)
    repeat[first_seen] = False
    report.num_duplicate_edges = int(repeat.sum())
    if report.num_duplicate_edges:
        first = int(np.flatnonzero(repeat)[0])
        report.note(
            f"{where}{report.num_duplicate_edges} duplicate edge(s) kept "
            f"(first at {describe(first)})"
        )


def encode_labels(
    labels: Sequence[Hashable | None], node_ids: Sequence | None = None
) -> tuple[Tensor, list]:
    """Encode class labels as 0..C-1 in sorted order; missing labels become -1.

    Args:
        labels: one label (any hashable; a one-value tensor is read as its value) per
            node, or, for an unlabelled node, a missing one (:func:`is_missing_label`:
            ``None``, ``""``, a NaN).
        node_ids: the nodes' ids, for error messages (default: their positions).

    Returns:
        ``y`` ``[N]`` long and the sorted class names (``label_names[c]`` is class c).
        Labels of mixed types that cannot be compared are sorted by
        (type name, string form).
    """
    labels = [_label_value(v, k, node_ids) for k, v in enumerate(labels)]
    labels = [None if is_missing_label(v) else v for v in labels]
    classes = {v for v in labels if v is not None}
    try:
        names = sorted(classes)
    except TypeError:
        names = sorted(classes, key=lambda v: (type(v).__name__, str(v)))
    _check_distinct_names(names, labels, node_ids)
    index = {name: c for c, name in enumerate(names)}
    y = torch.tensor([-1 if v is None else index[v] for v in labels], dtype=torch.long)
    return y, names


def _label_value(label: Hashable | None, position: int, node_ids: Sequence | None) -> Hashable:
    """A one-value tensor as its number: tensors hash by identity, so each node's
    ``tensor(0)`` would be a class of its own."""
    if not isinstance(label, Tensor):
        return label
    if label.numel() != 1:
        where = f"position {position}" if node_ids is None else f"node {node_ids[position]!r}"
        raise GraphInputError(
            f"{where}: the label is a tensor of shape {list(label.shape)}, not one class"
        )
    return label.item()


def _check_distinct_names(names: list, labels: list, node_ids: Sequence | None) -> None:
    """Two classes written the same (``1`` and ``"1"``) would share one name in the
    checkpoint and the ``prob_<class>`` columns of ``predictions.csv``."""
    by_text: dict[str, Hashable] = {}
    for name in names:
        other = by_text.setdefault(str(name), name)
        if other is not name:
            first, again = labels.index(other), labels.index(name)
            if node_ids is None:
                where = f"positions {first} and {again}"
            else:
                where = f"nodes {node_ids[first]!r} and {node_ids[again]!r}"
            raise GraphInputError(
                f"labels {other!r} ({type(other).__name__}) and {name!r} "
                f"({type(name).__name__}), first at {where}, are two classes written "
                f"{str(name)!r}; give the labels one type"
            )


def is_missing_label(label: Hashable | None) -> bool:
    """Whether a label marks an unlabelled node: ``None``, an empty or blank string, or
    a NaN of any float type (how pandas and NumPy mark a missing value)."""
    if label is None:
        return True
    if isinstance(label, str):
        return not label.strip()
    # NaN != NaN, so NaN labels would each become a class of their own.
    return isinstance(label, numbers.Real) and math.isnan(label)


def ordered_names(what: str, names: Sequence | None) -> list | None:
    """``names`` (attribute names or columns) as a list, in their order, which becomes
    ``x``'s column order; ``GraphInputError`` for a string, a bytes-like value or an
    ``array.array`` (its letters, bytes or numbers would be read as names), a set (its
    order changes from one process to the next) or a value that is not a sequence."""
    if names is None:
        return None
    refused = str | bytes | bytearray | memoryview | array.array | set | frozenset
    if not isinstance(names, refused):
        try:
            return list(names)
        except TypeError:
            pass
    kind_name = type(names).__name__
    article = "an" if kind_name[:1].lower() in ("a", "e", "i", "o") else "a"  # a uint8
    kind = "the string" if isinstance(names, str) else f"{article} {kind_name}:"
    raise GraphInputError(
        f"{what} must be an ordered sequence of names (a list or tuple; their order is "
        f"x's column order), got {kind} {names!r}"
    )


def from_networkx(
    G: nx.Graph, node_attrs: Sequence[str] | None = None, label_attr: str | None = None
) -> Data:
    """Convert a networkx graph to ``Data``, keeping the original node keys.

    Nodes are numbered 0..N-1 in ``G.nodes`` order. Edge attributes are not carried
    over (a note in the report names them).

    Args:
        G: a ``Graph``, ``DiGraph``, ``MultiGraph`` or ``MultiDiGraph``. Undirected
            graphs get both edge directions, directed graphs keep theirs; parallel
            edges of multigraphs are kept and counted as duplicates.
        node_attrs: numeric node attribute names (scalars or 1-D sequences), their
            values concatenated in this order into ``x`` ``[N, F]`` float32.
        label_attr: node attribute holding a class label (any hashable). Classes are
            numbered in sorted order; nodes without the attribute, or whose value is
            ``None`` or NaN, get -1.

    Returns:
        ``Data`` with ``edge_index`` ``[2, E]``, ``num_nodes``, ``node_ids`` (list, the
        original key of each node), ``graph_report`` (:class:`GraphReport`), and
        ``x`` when ``node_attrs`` is given, ``y`` ``[N]`` long and ``label_names``
        when ``label_attr`` is given.

    Raises:
        GraphInputError: ``node_attrs`` is a string or a set, or holds ``label_attr``;
            the graph has no nodes; a node lacks one of ``node_attrs`` or has a
            non-numeric value, one that is not a finite float32 number (``None``, NaN,
            infinite, ``1e39``), or one of another length than the first node's; a
            node's ``label_attr`` is not hashable, or is a tensor of more than one value.
    """
    node_attrs = ordered_names("node_attrs", node_attrs)
    if label_attr is not None and label_attr in (node_attrs or ()):
        raise GraphInputError(
            f"label_attr {label_attr!r} is also in node_attrs, and a label is never an "
            "input (each node's class would be read from its features)"
        )
    node_ids = list(G.nodes)
    if not node_ids:
        raise GraphInputError("the networkx graph has no nodes")
    index = {key: i for i, key in enumerate(node_ids)}
    pairs = list(G.edges())
    src = torch.tensor([index[u] for u, _ in pairs], dtype=torch.long)
    dst = torch.tensor([index[v] for _, v in pairs], dtype=torch.long)
    edge_index, report = edges_from_pairs(
        src,
        dst,
        len(node_ids),
        directed=G.is_directed(),
        source="networkx",
        describe=lambda k: f"edge {pairs[k][0]!r} -> {pairs[k][1]!r}",
    )
    _note_edge_attributes(G, report)
    data = Data(edge_index=edge_index, num_nodes=len(node_ids))
    data.node_ids = node_ids
    data.graph_report = report
    if node_attrs:
        data.x = _node_attribute_matrix(G, node_ids, node_attrs)
    if label_attr is not None:
        labels = _node_labels(G, node_ids, label_attr)
        data.y, data.label_names = encode_labels(labels, node_ids)
    return data


def _node_labels(G: nx.Graph, node_ids: list, label_attr: str) -> list:
    """The ``label_attr`` of each node; an unhashable one is an error naming the node."""
    labels = [G.nodes[key].get(label_attr) for key in node_ids]
    for key, label in zip(node_ids, labels, strict=True):
        try:
            hash(label)
        except TypeError:
            raise GraphInputError(
                f"node {key!r}: label attribute {label_attr!r} = {label!r} is not hashable, "
                "so it cannot be a class (use a string, number or tuple)"
            ) from None
    return labels


def _note_edge_attributes(G: nx.Graph, report: GraphReport) -> None:
    names = sorted({name for *_, attrs in G.edges(data=True) for name in attrs}, key=str)
    if names:
        report.note(f"networkx edge attributes {names} are not carried over", logging.INFO)


def _node_attribute_matrix(G: nx.Graph, node_ids: list, names: Sequence[str]) -> Tensor:
    rows = []
    widths: dict[str, int] = {}  # each attribute's length at the first node
    for key in node_ids:
        attrs = G.nodes[key]
        row = []
        for name in names:
            if name not in attrs:
                raise GraphInputError(f"node {key!r} has no attribute {name!r}")
            try:
                values = np.asarray(attrs[name], dtype=np.float64).reshape(-1)
            except (TypeError, ValueError, OverflowError) as err:  # OverflowError: 10**400
                raise GraphInputError(
                    f"node {key!r}: attribute {name!r} = {attrs[name]!r} is not numeric"
                ) from err
            # None converts to NaN; x is float32, so 1e39 would become inf
            if not (np.abs(values) <= _FLOAT32_MAX).all():
                raise GraphInputError(
                    f"node {key!r}: attribute {name!r} = {attrs[name]!r} is not a finite "
                    "float32 number"
                )
            width = widths.setdefault(name, values.size)
            if values.size != width:  # a column would hold another attribute's values
                raise GraphInputError(
                    f"node attribute {name!r} has different lengths: {width} values at "
                    f"node {node_ids[0]!r}, {values.size} at node {key!r}"
                )
            row.extend(values.tolist())
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float32).reshape(len(node_ids), -1)


def to_networkx(
    data: Data,
    predictions: Tensor | None = None,
    attention: tuple[Tensor, Tensor] | None = None,
    directed: bool | None = None,
) -> nx.Graph:
    """Convert ``Data`` back to networkx with the original node keys.

    Args:
        data: ``Data`` with ``edge_index`` and optionally ``node_ids``, ``y``,
            ``label_names`` and ``graph_report``.
        predictions: ``[N]`` integer (or bool) class indices or ``[N, C]`` scores (argmax taken);
            stored as node attribute ``prediction`` (class name when ``label_names``
            exists).
        attention: ``(edge_index [2, E'], alpha [E'] or [E', heads])`` from an
            attention layer, in the same node numbering. Each graph edge gets
            ``attention`` (mean over heads) and ``attention_heads`` (list). In an
            undirected graph the two directions share one edge, so both attributes
            are averaged over the directions present (pass ``directed=True`` for
            per-direction values). Attention on self-loops that are not graph edges
            goes to node attribute ``self_attention``; other non-edges are left out
            with a warning.
        directed: return a ``DiGraph``; default from ``graph_report.directed`` or,
            without a report, whether ``edge_index`` is asymmetric.

    Returns:
        ``nx.Graph`` or ``nx.DiGraph``; labelled nodes carry ``label`` (class name
        when ``label_names`` exists, else the class index). Duplicate edges collapse
        into one networkx edge (a warning says how many).
    """
    directed = _is_directed(data) if directed is None else directed
    G = nx.DiGraph() if directed else nx.Graph()
    keys = _node_keys(data)
    G.add_nodes_from(keys)
    edges = data.edge_index.tolist()
    G.add_edges_from(zip([keys[j] for j in edges[0]], [keys[i] for i in edges[1]], strict=True))
    _warn_collapsed(data, G, directed)
    names = list(getattr(data, "label_names", None) or [])
    y = getattr(data, "y", None)
    if y is not None:
        if y.numel() != len(keys):
            raise GraphInputError(
                f"data.y must hold one class per node ({len(keys)}), got shape {list(y.shape)}"
            )
        for key, c in zip(keys, y.view(-1).tolist(), strict=True):
            if c >= 0:  # False for the NaN of a float y's unlabelled node
                G.nodes[key]["label"] = names[int(c)] if names else int(c)
    if predictions is not None:
        if predictions.dim() not in (1, 2) or predictions.size(0) != len(keys):
            raise GraphInputError(
                f"predictions must be [{len(keys)}] classes or [{len(keys)}, C] scores, one "
                f"row per node, got {list(predictions.shape)}"
            )
        pred = predictions.argmax(-1) if predictions.dim() == 2 else predictions
        pred = _class_indices(pred, len(names))
        for key, c in zip(keys, pred.view(-1).tolist(), strict=True):
            G.nodes[key]["prediction"] = names[c] if names else c
    if attention is not None:
        if not (
            isinstance(attention, tuple | list)
            and len(attention) == 2
            and all(isinstance(t, Tensor) for t in attention)
        ):
            raise GraphInputError(
                "attention must be one layer's (edge_index, alpha) pair of tensors (of a "
                "model's list of layers, pick one, e.g. the last)"
            )
        _attach_attention(G, keys, *attention)
    return G


def _class_indices(pred: Tensor, num_names: int) -> Tensor:
    """``[N]`` predictions as class indices (a bool is class 0 or 1), of ``label_names``
    when given."""
    if pred.dtype == torch.bool:
        pred = pred.long()
    if not _integer(pred):
        raise GraphInputError(
            f"predictions of shape [N] must be integer class indices, got {pred.dtype} "
            "(pass [N, C] scores to take their argmax)"
        )
    if num_names and pred.numel() and not 0 <= int(pred.min()) <= int(pred.max()) < num_names:
        raise GraphInputError(
            f"predictions hold classes {int(pred.min())}..{int(pred.max())}, but "
            f"data.label_names has classes 0..{num_names - 1}"
        )
    return pred


def _is_directed(data: Data) -> bool:
    report = getattr(data, "graph_report", None)
    if report is not None:
        return bool(report.directed)
    from torch_geometric.utils import is_undirected

    return not is_undirected(data.edge_index, num_nodes=data.num_nodes)


def _node_keys(data: Data) -> list:
    keys = getattr(data, "node_ids", None)
    keys = list(range(data.num_nodes)) if keys is None else list(keys)
    if len(keys) != data.num_nodes or len(set(keys)) != len(keys):
        raise GraphInputError(
            f"data.node_ids must hold {data.num_nodes} distinct keys, got {len(keys)} "
            f"({len(set(keys))} distinct)"
        )
    return keys


def _warn_collapsed(data: Data, G: nx.Graph, directed: bool) -> None:
    src, dst = data.edge_index
    loops = int((src == dst).sum())
    total = data.edge_index.size(1)
    expected = total if directed else (total - loops) / 2 + loops
    if G.number_of_edges() < expected:
        log.warning(
            "to_networkx: %d duplicate edge(s) collapsed into single networkx edges",
            int(expected - G.number_of_edges()),
        )


def _attach_attention(G: nx.Graph, keys: list, edge_index: Tensor, alpha: Tensor) -> None:
    alpha = alpha.detach().float().cpu()
    alpha = alpha.view(-1, 1) if alpha.dim() == 1 else alpha
    if alpha.size(0) != edge_index.size(1):
        raise GraphInputError(
            f"attention: alpha has {alpha.size(0)} rows but edge_index has "
            f"{edge_index.size(1)} edges"
        )
    collected: dict[tuple, list[list[float]]] = {}
    self_attention: dict[Any, list[list[float]]] = {}
    missing = 0
    for (j, i), heads in zip(edge_index.t().tolist(), alpha.tolist(), strict=True):
        u, v = keys[j], keys[i]
        if G.has_edge(u, v):
            edge = (v, u) if not G.is_directed() and (v, u) in collected else (u, v)
            collected.setdefault(edge, []).append(heads)
        elif u == v:
            self_attention.setdefault(u, []).append(heads)
        else:
            missing += 1
    for (u, v), rows in collected.items():
        heads = np.mean(rows, axis=0)
        G.edges[u, v]["attention_heads"] = heads.tolist()
        G.edges[u, v]["attention"] = float(heads.mean())
    for u, rows in self_attention.items():
        G.nodes[u]["self_attention"] = float(np.mean(rows))
    if missing:
        log.warning("to_networkx: attention on %d non-edge(s) left out", missing)


def structural_features(
    edge_index: Tensor,
    num_nodes: int,
    walk_length: int = 8,
    exact_budget: int = 30_000_000,
    num_probes: int = 128,
    seed: int = 0,
) -> Tensor:
    """Log-degree and random-walk return probabilities of every node.

    Column 0 is ``log(1 + in-degree)``, the in-degree being the number of edges
    j -> i into node i (for an undirected graph, its degree; duplicates count, and a
    self-loop counts once, where networkx's degree counts it twice). Column t
    (1..walk_length) is the probability that a random walk started at i is back at i
    after t steps, ``diag((D^-1 A)^t)``, with ``A[j, i]`` the number of edges j -> i
    and D the out-degrees; a walk reaching a node without out-edges stops.

    The diagonal is computed from sparse matrix powers, splitting ``t = a + b`` so
    only powers up to ``ceil(walk_length / 2)`` are needed. Powers are formed exactly
    while each sparse product costs at most ``exact_budget`` multiply-adds; return
    probabilities beyond what those powers give are estimated from a random
    projection with ``num_probes`` seeded +-1 vectors (relative error about
    ``sqrt(2 / num_probes)`` for even t, larger for odd t; estimates are clipped to
    [0, 1]). On small graphs every column is exact; on the Facebook page graph
    (22,470 nodes, 341,825 edges) steps 1-4 are exact and 5-8 estimated.

    Args:
        edge_index: ``[2, E]`` long, sources in row 0 and targets in row 1.
        num_nodes: N.
        walk_length: number of return-probability columns k (>= 0).
        exact_budget: most multiply-adds (and stored entries) per exact product.
        num_probes: random vectors for the estimated columns (>= 1).
        seed: seed of the random vectors (the result is deterministic).

    Raises:
        GraphInputError: a bad ``edge_index``, or a setting that is not a whole number
            in its range.

    Returns:
        ``[N, 1 + walk_length]`` float32.
    """
    validate_edge_index(edge_index, num_nodes)
    walk_length = check_count("walk_length", walk_length, least=0)
    exact_budget = check_count("exact_budget", exact_budget, least=0)
    num_probes = check_count("num_probes", num_probes)
    seed = check_seed(seed)
    src, dst = edge_index.long().numpy()
    in_degree = np.bincount(dst, minlength=num_nodes)
    columns = [np.log1p(in_degree)]
    if walk_length:
        adjacency = sp.csr_matrix((np.ones(src.size), (src, dst)), shape=(num_nodes, num_nodes))
        columns += _return_probabilities(adjacency, walk_length, exact_budget, num_probes, seed)
    return torch.tensor(np.stack(columns, axis=1), dtype=torch.float32)


def _return_probabilities(
    adjacency: sp.csr_matrix, k: int, budget: int, num_probes: int, seed: int
) -> list[np.ndarray]:
    # diag(P^t) = diag(S^t) for S = D^-1/2 A D^-1/2 (a similarity transform), and S
    # is symmetric for an undirected graph, which saves the transposes.
    out_degree = np.asarray(adjacency.sum(axis=1)).ravel()
    scale = np.zeros_like(out_degree)
    np.divide(1.0, np.sqrt(out_degree), out=scale, where=out_degree > 0)
    S = (sp.diags(scale) @ adjacency @ sp.diags(scale)).tocsr()
    symmetric = (S != S.T).nnz == 0
    powers = _exact_powers(S, math.ceil(k / 2), budget)
    exact_upto = min(k, 2 * len(powers))
    result = []
    for t in range(1, exact_upto + 1):
        a, b = math.ceil(t / 2), t // 2
        right = powers[b - 1] if b else None
        result.append(_diag_of_product(powers[a - 1], right, symmetric))
    if exact_upto < k:
        log.info(
            "structural_features: return probabilities after %d..%d steps estimated "
            "with %d random probes (exact products would exceed %d multiply-adds)",
            exact_upto + 1,
            k,
            num_probes,
            budget,
        )
        result += _estimated_diagonals(S, symmetric, exact_upto + 1, k, num_probes, seed)
    return result


def _exact_powers(S: sp.csr_matrix, highest: int, budget: int) -> list[sp.csr_matrix]:
    """``[S, S^2, ...]`` up to ``S^highest``, stopping before a product over budget."""
    powers = [S]
    row_counts = np.diff(S.indptr)
    while len(powers) < highest:
        last = powers[-1]
        col_counts = np.bincount(last.indices, minlength=S.shape[1])
        if int(col_counts @ row_counts) > budget:
            break
        powers.append((last @ S).tocsr())
    return powers


def _diag_of_product(
    left: sp.csr_matrix, right: sp.csr_matrix | None, symmetric: bool
) -> np.ndarray:
    """``diag(left @ right)`` without forming the product (``right=None``: identity)."""
    if right is None:
        return left.diagonal()
    right_t = right if symmetric else right.T
    return np.asarray(left.multiply(right_t).sum(axis=1)).ravel()


def _estimated_diagonals(
    S: sp.csr_matrix, symmetric: bool, first: int, last: int, num_probes: int, seed: int
) -> list[np.ndarray]:
    """Estimate ``diag(S^t)`` for t in first..last as ``<row i of S^a Z, row i of S'^b Z>``.

    With Z ``[N, m]`` random +-1 entries, ``E[Z Z^T] / m = I``, so the row inner
    product of ``S^a Z`` and ``(S^T)^b Z`` divided by m estimates
    ``e_i^T S^a (S^b) e_i``.
    """
    generator = np.random.default_rng(seed)
    probes = generator.choice(np.array([-1.0, 1.0], dtype=np.float32), (S.shape[0], num_probes))
    S32 = S.astype(np.float32)
    forward = _power_chain(S32, probes, math.ceil(last / 2))
    backward = forward if symmetric else _power_chain(S32.T.tocsr(), probes, last // 2)
    estimates = []
    for t in range(first, last + 1):
        a, b = math.ceil(t / 2), t // 2
        value = np.einsum("ij,ij->i", forward[a], backward[b]) / num_probes
        estimates.append(np.clip(value, 0.0, 1.0))
    return estimates


def _power_chain(M: sp.csr_matrix, start: np.ndarray, steps: int) -> list[np.ndarray]:
    chain = [start]
    for _ in range(steps):
        chain.append(M @ chain[-1])
    return chain


def text_features(texts: Sequence[str], n_features: int = 1024, method: str = "hashing") -> Tensor:
    """Bag-of-words features of short texts (page names, titles), deterministic.

    ``"hashing"`` (default) uses scikit-learn's ``HashingVectorizer``: lower-cased
    word unigrams and bigrams (words of 2+ word characters, any script) hashed into
    ``n_features`` columns, counts not signed (``alternate_sign=False``), each row
    scaled to unit L2 norm. It needs no vocabulary, so the same text always gives the
    same row. ``"tfidf"`` uses ``TfidfVectorizer`` with the same tokens, keeping the
    ``n_features`` most frequent terms of ``texts`` (L2-normalised tf-idf; zero
    columns pad a smaller vocabulary to ``n_features``). An empty text gives a zero
    row, and so does a missing one (``None``, a NaN: :func:`is_missing_label`).

    Args:
        texts: N strings (a sequence; a lone string is refused).
        n_features: F, number of columns.
        method: ``"hashing"`` or ``"tfidf"``.

    Returns:
        ``[N, F]`` float32.
    """
    from sklearn.feature_extraction.text import HashingVectorizer, TfidfVectorizer

    if n_features < 1:
        raise GraphInputError(f"n_features must be >= 1, got {n_features}")
    if isinstance(texts, str):  # its characters would be read as N one-letter texts
        raise GraphInputError(f"texts must be a sequence of strings, got the string {texts!r}")
    texts = ["" if is_missing_label(t) else str(t) for t in texts]
    if method == "hashing":
        vectorizer = HashingVectorizer(
            n_features=n_features, ngram_range=(1, 2), alternate_sign=False, norm="l2"
        )
        matrix = vectorizer.transform(texts)
    elif method == "tfidf":
        vectorizer = TfidfVectorizer(ngram_range=(1, 2), max_features=n_features, norm="l2")
        try:
            matrix = vectorizer.fit_transform(texts)
        except ValueError:  # no text has a single token: an empty vocabulary
            return torch.zeros(len(texts), n_features)
        matrix = sp.hstack([matrix, sp.csr_matrix((len(texts), n_features - matrix.shape[1]))])
    else:
        raise GraphInputError(f"text method must be 'hashing' or 'tfidf', got {method!r}")
    return torch.from_numpy(matrix.astype(np.float32).toarray())
