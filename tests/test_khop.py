"""K-hop and global edge lists: graphattn.ops.khop."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_geometric.data import Batch, Data

from graphattn.errors import GraphInputError
from graphattn.ops.khop import global_edges, khop_edges


def networkx_pairs(num_nodes: int, edge_index: torch.Tensor, hops: int, directed: bool):
    """Sorted (target, source, distance) for 1 <= d(source -> target) <= hops."""
    graph = nx.DiGraph() if directed else nx.Graph()
    graph.add_nodes_from(range(num_nodes))
    graph.add_edges_from(edge_index.t().tolist())
    return sorted(
        (target, source, dist)
        for source, lengths in nx.shortest_path_length(graph)
        for target, dist in lengths.items()
        if 1 <= dist <= hops
    )


def as_triples(edge_index: torch.Tensor, distance: torch.Tensor) -> list[tuple[int, int, int]]:
    return [(int(i), int(j), int(d)) for (j, i), d in zip(edge_index.t(), distance, strict=True)]


def assert_sorted_unique(edge_index: torch.Tensor) -> None:
    key = edge_index[1] * (int(edge_index.max()) + 1 if edge_index.numel() else 1) + edge_index[0]
    assert torch.all(key[1:] > key[:-1]), "not strictly sorted by (target, source)"


@st.composite
def random_graphs(draw):
    n = draw(st.integers(1, 12))
    pairs = st.tuples(st.integers(0, n - 1), st.integers(0, n - 1))
    edges = draw(st.lists(pairs, max_size=3 * n))  # duplicates and self-loops allowed
    edge_index = torch.tensor(edges, dtype=torch.long).reshape(-1, 2).t()
    return n, edge_index


@settings(max_examples=60, deadline=None)
@given(graph=random_graphs(), hops=st.integers(1, 3), directed=st.booleans())
def test_khop_matches_networkx_shortest_paths(graph, hops: int, directed: bool) -> None:
    n, edge_index = graph
    if not directed:
        edge_index = torch.cat([edge_index, edge_index.flip(0)], dim=1)
    out, dist = khop_edges(edge_index, n, hops)
    assert out.dtype == dist.dtype == torch.long
    assert as_triples(out, dist) == networkx_pairs(n, edge_index, hops, directed)


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("hops", [1, 2, 3])
def test_khop_on_larger_random_graphs(directed: bool, hops: int) -> None:
    for seed in range(3):
        graph = nx.gnp_random_graph(80, 0.04, seed=seed, directed=directed)
        edge_index = torch.tensor(list(graph.edges()), dtype=torch.long).t()
        if not directed:
            edge_index = torch.cat([edge_index, edge_index.flip(0)], dim=1)
        out, dist = khop_edges(edge_index, 80, hops)
        assert_sorted_unique(out)
        assert as_triples(out, dist) == networkx_pairs(80, edge_index, hops, directed)


def test_khop_hand_example() -> None:
    # Directed path 0 -> 1 -> 2 -> 3 plus shortcut 0 -> 2.
    edge_index = torch.tensor([[0, 1, 2, 0], [1, 2, 3, 2]])
    out, dist = khop_edges(edge_index, 4, 2)
    assert out.tolist() == [[0, 0, 1, 0, 1, 2], [1, 2, 2, 3, 3, 3]]
    assert dist.tolist() == [1, 1, 1, 2, 2, 1]


def molecule_like_batch(seed: int) -> Batch:
    graphs = []
    for g, n in enumerate([5, 1, 8, 6]):
        graph = nx.gnp_random_graph(n, 0.5, seed=seed + g)
        ei = torch.tensor(list(graph.edges()), dtype=torch.long).reshape(-1, 2).t()
        graphs.append(Data(edge_index=torch.cat([ei, ei.flip(0)], dim=1), num_nodes=n))
    return Batch.from_data_list(graphs)


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_khop_batch_stays_inside_graphs_and_matches_per_graph(hops: int) -> None:
    batch = molecule_like_batch(seed=3)
    out, dist = khop_edges(batch.edge_index, batch.num_nodes, hops, batch=batch.batch)
    assert torch.equal(batch.batch[out[0]], batch.batch[out[1]])
    expected_index, expected_dist = [], []
    for g, data in enumerate(batch.to_data_list()):
        part, part_dist = khop_edges(data.edge_index, data.num_nodes, hops)
        expected_index.append(part + int(batch.ptr[g]))
        expected_dist.append(part_dist)
    assert torch.equal(out, torch.cat(expected_index, dim=1))
    assert torch.equal(dist, torch.cat(expected_dist))


def test_khop_rejects_bad_input() -> None:
    edge_index = torch.tensor([[0, 1], [1, 2]])
    with pytest.raises(GraphInputError):
        khop_edges(edge_index, 3, 0)
    with pytest.raises(GraphInputError):
        khop_edges(edge_index, 2, 1)  # node 2 out of range
    with pytest.raises(GraphInputError):
        khop_edges(edge_index[0], 3, 1)
    with pytest.raises(GraphInputError):  # edge 1 -> 2 joins graphs 0 and 1
        khop_edges(edge_index, 3, 1, batch=torch.tensor([0, 0, 1]))
    with pytest.raises(GraphInputError, match="batch must hold graph ids >= 0"):
        khop_edges(edge_index, 3, 1, batch=torch.tensor([-1, -1, -1]))


def test_khop_and_global_take_numpy_integers() -> None:
    edge_index = torch.tensor([[0, 1], [1, 2]])
    got, want = khop_edges(edge_index, 3, np.int64(2)), khop_edges(edge_index, 3, 2)
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    assert torch.equal(global_edges(np.int64(3)), global_edges(3))
    with pytest.raises(GraphInputError, match=r"hops must be an integer >= 1, got 1.5"):
        khop_edges(edge_index, 3, 1.5)
    with pytest.raises(GraphInputError, match=r"num_nodes must be an integer >= 0, got -1"):
        global_edges(-1)


def test_khop_empty_graph() -> None:
    out, dist = khop_edges(torch.empty(2, 0, dtype=torch.long), 4, 2)
    assert out.shape == (2, 0) and dist.shape == (0,)


def check_global(num_nodes: int, batch: torch.Tensor | None) -> torch.Tensor:
    edge_index = global_edges(num_nodes, batch)
    graph_of = torch.zeros(num_nodes, dtype=torch.long) if batch is None else batch
    sizes = torch.bincount(graph_of, minlength=1)
    assert edge_index.shape == (2, int((sizes * (sizes - 1)).sum()))
    assert torch.all(edge_index[0] != edge_index[1])
    assert torch.equal(graph_of[edge_index[0]], graph_of[edge_index[1]])
    if edge_index.numel():
        assert_sorted_unique(edge_index)
    return edge_index


def test_global_edges_single_graph() -> None:
    edge_index = check_global(3, None)
    assert edge_index.tolist() == [[1, 2, 0, 2, 0, 1], [0, 0, 1, 1, 2, 2]]
    assert check_global(1, None).shape == (2, 0)
    assert check_global(0, None).shape == (2, 0)


def test_global_edges_batch_sorted_and_unsorted() -> None:
    batch = molecule_like_batch(seed=0)
    check_global(batch.num_nodes, batch.batch)
    unsorted = torch.tensor([1, 0, 1, 1, 0, 2, 3, 3])
    edge_index = check_global(8, unsorted)
    pairs = set(map(tuple, edge_index.t().tolist()))
    expected = {(j, i) for i in range(8) for j in range(8) if i != j and unsorted[i] == unsorted[j]}
    assert pairs == expected


def test_global_edges_is_khop_with_enough_hops_on_complete_graphs() -> None:
    # Within a complete graph every pair is at distance 1: khop(1) equals global_edges.
    sizes = [4, 1, 3]
    batch = torch.repeat_interleave(torch.arange(3), torch.tensor(sizes))
    edge_index = global_edges(8, batch)
    out, dist = khop_edges(edge_index, 8, 3, batch=batch)
    assert torch.equal(out, edge_index) and torch.all(dist == 1)


def test_global_edges_rejects_bad_batch() -> None:
    with pytest.raises(GraphInputError):
        global_edges(3, torch.tensor([0, 1]))
    with pytest.raises(GraphInputError):
        global_edges(2, torch.tensor([0.0, 1.0]))
    for batch in (torch.tensor([-1, 0]), torch.tensor([-1, -1])):
        with pytest.raises(GraphInputError, match="batch must hold graph ids >= 0"):
            global_edges(2, batch)


@pytest.mark.parametrize("num_nodes", [True, 3.0, -1, None])
def test_khop_edges_names_a_bad_node_count(num_nodes) -> None:
    with pytest.raises(GraphInputError, match="num_nodes must be an integer >= 0"):
        khop_edges(torch.empty(2, 0, dtype=torch.long), num_nodes, 2)
