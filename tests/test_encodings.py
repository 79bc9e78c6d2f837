"""Positional / structural encodings: graphattn.transforms and graphattn.nn.encodings."""

from __future__ import annotations

import math
import re

import networkx as nx
import numpy as np
import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader
from torch_geometric.transforms import Compose

import graphattn.transforms as tf
from graphattn.errors import GraphInputError
from graphattn.nn.encodings import PositionalEncoder
from graphattn.transforms import (
    AddLaplacianPE,
    AddRandomWalkPE,
    AddSinusoidalPE,
    laplacian_eigenpairs,
    laplacian_pe,
    random_walk_pe,
    sinusoidal_encoding,
)


def undirected(edges: list[tuple[int, int]]) -> torch.Tensor:
    """Both directions of every edge, shape [2, 2E]."""
    ei = torch.tensor(edges, dtype=torch.long).t()
    return torch.cat([ei, ei.flip(0)], dim=1)


def nx_edges(graph: nx.Graph) -> torch.Tensor:
    edges = list(graph.edges())
    if not edges:
        return torch.empty(2, 0, dtype=torch.long)
    if graph.is_directed():
        return torch.tensor(edges, dtype=torch.long).t()
    return undirected(edges)


def connected_graph(n: int, seed: int) -> nx.Graph:
    graph = nx.connected_watts_strogatz_graph(n, 4, 0.3, seed=seed)
    assert nx.is_connected(graph)
    return graph


def nx_laplacian(graph: nx.Graph) -> np.ndarray:
    return nx.normalized_laplacian_matrix(graph, nodelist=range(graph.number_of_nodes())).toarray()


TRIANGLE = undirected([(0, 1), (1, 2), (2, 0)])
PATH3 = undirected([(0, 1), (1, 2)])
STAR = undirected([(0, 1), (0, 2), (0, 3)])


# --------------------------------------------------------------------------- Laplacian PE


@pytest.mark.parametrize("dense_max_nodes", [2000, 0], ids=["eigh", "eigsh"])
def test_lap_pe_eigenpairs_match_networkx_laplacian(dense_max_nodes: int) -> None:
    graph = connected_graph(60, seed=1)
    k = 6
    vals, vecs = laplacian_eigenpairs(nx_edges(graph), 60, k, dense_max_nodes=dense_max_nodes)
    lap = nx_laplacian(graph)
    expected = np.linalg.eigvalsh(lap)[1 : k + 1]
    np.testing.assert_allclose(vals.numpy(), expected, atol=1e-5)
    v = vecs.double().numpy()
    np.testing.assert_allclose(lap @ v, v * vals.double().numpy(), atol=1e-5)  # L v = lambda v
    np.testing.assert_allclose(v.T @ v, np.eye(k), atol=1e-5)  # orthonormal columns


def test_lap_pe_is_orthogonal_to_trivial_eigenvector() -> None:
    graph = connected_graph(40, seed=2)
    pe = laplacian_pe(nx_edges(graph), 40, 5).double().numpy()
    deg = np.array([graph.degree(i) for i in range(40)], dtype=float)
    trivial = np.sqrt(deg) / np.linalg.norm(np.sqrt(deg))  # eigenvector of lambda_0 = 0
    np.testing.assert_allclose(trivial @ pe, np.zeros(5), atol=1e-5)


def test_lap_pe_ignores_edge_direction_duplicates_and_self_loops() -> None:
    graph = connected_graph(30, seed=3)
    one_way = torch.tensor(list(graph.edges()), dtype=torch.long).t()
    noisy = torch.cat([one_way, one_way, torch.tensor([[4, 7], [4, 7]])], dim=1)
    expected = laplacian_pe(nx_edges(graph), 30, 4)
    torch.testing.assert_close(laplacian_pe(one_way, 30, 4), expected)
    torch.testing.assert_close(laplacian_pe(noisy, 30, 4), expected)


def test_lap_pe_pads_small_graphs_with_zero_columns() -> None:
    vals, vecs = laplacian_eigenpairs(TRIANGLE, 3, 5)
    assert vecs.shape == (3, 5) and vals.shape == (5,)
    assert torch.all(vecs[:, 2:] == 0) and torch.all(vals[2:] == 0)
    torch.testing.assert_close(vals[:2], torch.tensor([1.5, 1.5]))  # triangle: 0, 3/2, 3/2
    torch.testing.assert_close(vecs[:, :2].t() @ vecs[:, :2], torch.eye(2), atol=1e-6, rtol=0)
    assert torch.all(laplacian_pe(torch.empty(2, 0, dtype=torch.long), 1, 3) == 0)
    assert laplacian_pe(torch.empty(2, 0, dtype=torch.long), 0, 3).shape == (0, 3)


def test_lap_pe_disconnected_graph_drops_only_one_eigenvector() -> None:
    # Two triangles: eigenvalue 0 twice; only one is dropped, so column 0 has eigenvalue 0:
    # a unit vector constant on each component (which basis of that null space is arbitrary).
    edges = undirected([(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3)])
    vals, vecs = laplacian_eigenpairs(edges, 6, 3)
    assert abs(float(vals[0])) < 1e-6
    torch.testing.assert_close(vals[1:], torch.tensor([1.5, 1.5]))
    first = vecs[:, 0]
    torch.testing.assert_close(first[:3], first[0].expand(3))
    torch.testing.assert_close(first[3:], first[3].expand(3))
    torch.testing.assert_close(first.norm(), torch.tensor(1.0))


def test_lap_pe_of_a_large_disconnected_graph_matches_the_dense_solver() -> None:
    # Lanczos (the sparse path) finds one vector per repeated eigenvalue; identical
    # components repeat every eigenvalue, and each component adds a zero
    cycles = [nx.cycle_graph(range(s, s + 30)) for s in range(0, 90, 30)]
    graph = nx.union_all([*cycles, nx.path_graph(range(90, 100))])
    graph.add_nodes_from(range(100, 103))  # isolated: eigenvalue 1
    edges, n, k = nx_edges(graph), 103, 12
    dense_vals, _ = laplacian_eigenpairs(edges, n, k, dense_max_nodes=10**4)
    vals, vecs = laplacian_eigenpairs(edges, n, k, dense_max_nodes=20)
    np.testing.assert_allclose(vals.numpy(), dense_vals.numpy(), atol=1e-6)
    assert int((vals.abs() < 1e-6).sum()) == 3  # 4 components with edges, one zero dropped
    lap = nx_laplacian(graph)
    v = vecs.double().numpy()
    np.testing.assert_allclose(lap @ v, v * vals.double().numpy(), atol=1e-5)
    np.testing.assert_allclose(v.T @ v, np.eye(k), atol=1e-5)


def test_lap_pe_isolated_nodes_have_eigenvalue_one() -> None:
    edges = undirected([(0, 1)])  # node 2 isolated: row of L is e_2
    vals, vecs = laplacian_eigenpairs(edges, 3, 2)
    torch.testing.assert_close(vals, torch.tensor([1.0, 2.0]))
    torch.testing.assert_close(vecs[:, 0].abs(), torch.tensor([0.0, 0.0, 1.0]))


def test_lap_pe_sign_convention_and_determinism() -> None:
    graph = connected_graph(50, seed=4)
    pe = laplacian_pe(nx_edges(graph), 50, 6)
    torch.testing.assert_close(laplacian_pe(nx_edges(graph), 50, 6), pe, rtol=0, atol=0)
    rows = pe.abs().argmax(dim=0)
    assert torch.all(pe[rows, torch.arange(6)] > 0)


@pytest.mark.parametrize(
    "graph", [nx.path_graph(5), nx.path_graph(6), nx.cycle_graph(6), nx.star_graph(4)]
)
def test_lap_pe_sign_rule_takes_the_first_of_tied_entries(graph: nx.Graph) -> None:
    # symmetric nodes tie in magnitude up to rounding: the first of them is made positive
    # (with argmax alone, rounding picked a later, negative one on these graphs)
    n = graph.number_of_nodes()
    pe = laplacian_pe(nx_edges(graph), n, n - 1).double()
    for column in pe.T:
        top = column.abs().max()
        if top < 1e-6:  # padding
            continue
        first = int(torch.nonzero(column.abs() >= top - 1e-6)[0])
        assert column[first] > 0, column


def test_lap_pe_abs_is_permutation_equivariant() -> None:
    # |PE| does not depend on eigenvector signs: relabelling nodes permutes its rows, as long
    # as the eigenvalues are simple (checked).
    graph = connected_graph(40, seed=5)
    k = 5
    vals, pe = laplacian_eigenpairs(nx_edges(graph), 40, k)
    spectrum = np.linalg.eigvalsh(nx_laplacian(graph))[: k + 2]
    assert np.diff(spectrum).min() > 1e-3
    perm = torch.randperm(40)  # new label of old node i is perm[i]
    relabelled = perm[nx_edges(graph)]
    vals_p, pe_p = laplacian_eigenpairs(relabelled, 40, k)
    torch.testing.assert_close(vals_p, vals)
    torch.testing.assert_close(pe_p[perm].abs(), pe.abs(), atol=1e-5, rtol=0)


def test_lap_pe_eigenvalues_unchanged_by_sign_flip() -> None:
    # A sign flip of an eigenvector is still an eigenvector with the same eigenvalue.
    graph = connected_graph(30, seed=6)
    vals, vecs = laplacian_eigenpairs(nx_edges(graph), 30, 4)
    lap = torch.from_numpy(nx_laplacian(graph)).float()
    flipped = vecs * torch.tensor([-1.0, 1.0, -1.0, -1.0])
    rayleigh = torch.einsum("nk,nm,mk->k", flipped, lap, flipped)
    torch.testing.assert_close(rayleigh, vals, atol=1e-5, rtol=0)


def test_lap_pe_rejects_bad_input() -> None:
    with pytest.raises(GraphInputError):
        laplacian_pe(TRIANGLE, 2, 2)  # index 2 out of range
    with pytest.raises(GraphInputError):
        laplacian_pe(TRIANGLE, 3, 0)
    with pytest.raises(GraphInputError):
        laplacian_pe(TRIANGLE.float(), 3, 2)


def test_sizes_may_be_numpy_integers() -> None:
    # as everywhere else in graphattn (e.g. a k read from a NumPy config array)
    k = np.int64(2)
    torch.testing.assert_close(laplacian_pe(TRIANGLE, 3, k), laplacian_pe(TRIANGLE, 3, 2))
    torch.testing.assert_close(random_walk_pe(TRIANGLE, 3, k), random_walk_pe(TRIANGLE, 3, 2))
    assert AddLaplacianPE(k).k == 2 and type(AddLaplacianPE(k).k) is int
    assert AddRandomWalkPE(k).k == 2 and AddSinusoidalPE(np.int32(4)).dim == 4
    for make in (AddLaplacianPE, AddRandomWalkPE, AddSinusoidalPE):
        with pytest.raises(GraphInputError, match=r"must be an integer >= 1, got 2.0"):
            make(2.0)
    for encode in (
        lambda k: random_walk_pe(TRIANGLE, 3, k),
        lambda k: laplacian_pe(TRIANGLE, 3, k),
        lambda k: sinusoidal_encoding(torch.tensor([0, 1]), k),
    ):
        for bad in (0, 2.0):
            with pytest.raises(GraphInputError, match=rf"must be an integer >= 1, got {bad!r}"):
                encode(bad)


# --------------------------------------------------------------------------- random-walk PE


def test_rw_pe_triangle() -> None:
    # Return probability of a triangle: (1 + 2 (-1/2)^t) / 3.
    expected = torch.tensor([[0.0, 0.5, 0.25, 0.375]]).expand(3, 4)
    torch.testing.assert_close(random_walk_pe(TRIANGLE, 3, 4), expected)


def test_rw_pe_path_and_star() -> None:
    path = random_walk_pe(PATH3, 3, 4)
    torch.testing.assert_close(path[0], torch.tensor([0.0, 0.5, 0.0, 0.5]))
    torch.testing.assert_close(path[1], torch.tensor([0.0, 1.0, 0.0, 1.0]))
    torch.testing.assert_close(path[2], path[0])
    star = random_walk_pe(STAR, 4, 4)
    torch.testing.assert_close(star[0], torch.tensor([0.0, 1.0, 0.0, 1.0]))
    for leaf in (1, 2, 3):
        torch.testing.assert_close(star[leaf], torch.tensor([0.0, 1 / 3, 0.0, 1 / 3]))


def test_rw_pe_isolated_sink_and_self_loop() -> None:
    # Directed 3-cycle 0 -> 1 -> 2 -> 0, a sink 3 (edge 0 -> 3 only), isolated node 4 and a
    # node 5 with a self-loop and one neighbour 6.
    ei = torch.tensor([[0, 1, 2, 0, 5, 5, 6], [1, 2, 0, 3, 5, 6, 5]])
    pe = random_walk_pe(ei, 7, 3)
    for node in (0, 1, 2):  # around the cycle, except when 0 steps to 3 (w.p. 1/2)
        torch.testing.assert_close(pe[node], torch.tensor([0.0, 0.0, 0.5]))
    assert torch.all(pe[3] == 0) and torch.all(pe[4] == 0)
    torch.testing.assert_close(pe[5, :2], torch.tensor([0.5, 0.75]))


@pytest.mark.parametrize("densify_at", [0.0, 0.1, 2.0], ids=["dense", "mixed", "sparse"])
@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_rw_pe_matches_dense_matrix_powers(
    directed: bool, seed: int, densify_at: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tf, "_RW_BLOCK_ENTRIES", 7 * 30)  # several column blocks
    monkeypatch.setattr(tf, "_RW_DENSIFY_AT", densify_at)  # when walks switch to dense
    graph = nx.gnp_random_graph(30, 0.12, seed=seed, directed=directed)
    ei = nx_edges(graph)
    adj = np.zeros((30, 30))
    adj[ei[0].numpy(), ei[1].numpy()] = 1.0
    deg = adj.sum(axis=1, keepdims=True)
    trans = np.divide(adj, deg, out=np.zeros_like(adj), where=deg > 0)
    expected = np.stack([np.diag(np.linalg.matrix_power(trans, t)) for t in range(1, 8)], 1)
    np.testing.assert_allclose(random_walk_pe(ei, 30, 7).numpy(), expected, atol=1e-6)


def test_rw_pe_empty_graph() -> None:
    assert torch.all(random_walk_pe(torch.empty(2, 0, dtype=torch.long), 3, 2) == 0)
    assert random_walk_pe(torch.empty(2, 0, dtype=torch.long), 0, 2).shape == (0, 2)


# --------------------------------------------------------------------------- sinusoidal


def test_sinusoidal_encoding_known_values() -> None:
    pe = sinusoidal_encoding(torch.tensor([0, 1, 7]), 4)
    torch.testing.assert_close(pe[0], torch.tensor([0.0, 1.0, 0.0, 1.0]))
    for row, p in ((1, 1.0), (2, 7.0)):
        expected = [math.sin(p), math.cos(p), math.sin(p / 100), math.cos(p / 100)]
        torch.testing.assert_close(pe[row], torch.tensor(expected))
    odd = sinusoidal_encoding(torch.tensor([3]), 5)
    assert odd.shape == (1, 5)
    torch.testing.assert_close(odd[0, 4], torch.tensor(math.sin(3 / 10000 ** (4 / 5))))
    with pytest.raises(GraphInputError):
        sinusoidal_encoding(torch.tensor([0.5]), 4)


# --------------------------------------------------------------------------- transforms


def small_dataset() -> list[Data]:
    graphs = [connected_graph(12, seed=7), nx.path_graph(3), connected_graph(9, seed=8)]
    return [
        Data(
            x=torch.randn(g.number_of_nodes(), 2),
            edge_index=nx_edges(g),
            order=torch.arange(g.number_of_nodes()).flip(0) * 3,
        )
        for g in graphs
    ]


def test_transforms_concatenate_along_nodes_in_data_loader() -> None:
    transform = Compose([AddLaplacianPE(4), AddRandomWalkPE(5), AddSinusoidalPE(6)])
    dataset = [transform(data) for data in small_dataset()]
    batch = next(iter(DataLoader(dataset, batch_size=3)))
    sizes = [data.num_nodes for data in dataset]
    assert batch.lap_pe.shape == (sum(sizes), 4)
    assert batch.rw_pe.shape == (sum(sizes), 5)
    assert batch.sin_pe.shape == (sum(sizes), 6)
    for g, data in enumerate(dataset):
        nodes = batch.batch == g
        ei = data.edge_index
        torch.testing.assert_close(batch.lap_pe[nodes], laplacian_pe(ei, sizes[g], 4))
        torch.testing.assert_close(batch.rw_pe[nodes], random_walk_pe(ei, sizes[g], 5))
        positions = torch.arange(sizes[g])  # restart at 0 in every graph
        torch.testing.assert_close(batch.sin_pe[nodes], sinusoidal_encoding(positions, 6))
    assert torch.all(batch.lap_pe[batch.batch == 1][:, 2:] == 0)  # 3 nodes: padded


def test_transforms_attribute_names_positions_and_no_mutation() -> None:
    data = small_dataset()[0]
    out = Compose(
        [AddLaplacianPE(3, attr_name="eig"), AddSinusoidalPE(4, "pos", position_attr="order")]
    )(data)
    assert "eig" in out and "pos" in out and "eig" not in data and "lap_pe" not in out
    torch.testing.assert_close(out.pos, sinusoidal_encoding(data.order, 4))
    with pytest.raises(GraphInputError):
        AddSinusoidalPE(4, position_attr="missing")(data)
    with pytest.raises(GraphInputError):
        AddRandomWalkPE(0)


def test_transforms_graph_without_edges() -> None:
    data = AddRandomWalkPE(3)(AddLaplacianPE(2)(Data(num_nodes=4)))
    assert data.lap_pe.shape == (4, 2) and data.rw_pe.shape == (4, 3)
    assert torch.all(data.rw_pe == 0)


# --------------------------------------------------------------------------- PositionalEncoder


def identity_encoder(channels: int, sign_flip: bool = True) -> PositionalEncoder:
    """x + pe exactly (projection = identity), to observe the sign flips."""
    enc = PositionalEncoder(channels, channels, sign_flip=sign_flip)
    with torch.no_grad():
        enc.proj.weight.copy_(torch.eye(channels))
        enc.proj.bias.zero_()
    return enc


def test_encoder_add_and_concat() -> None:
    x, pe = torch.randn(7, 8), torch.randn(7, 3)
    add = PositionalEncoder(8, 3).eval()
    torch.testing.assert_close(add(x, pe), x + add.proj(pe))
    cat = PositionalEncoder(8, 3, out_channels=12, mode="concat").eval()
    out = cat(x, pe)
    assert out.shape == (7, 12)
    torch.testing.assert_close(out[:, :8], x)
    torch.testing.assert_close(out[:, 8:], cat.proj(pe))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"out_channels": 9},
        {"mode": "concat"},
        {"mode": "concat", "out_channels": 8},
        {"mode": "sum"},
    ],
)
def test_encoder_rejects_bad_config(kwargs: dict) -> None:
    with pytest.raises(GraphInputError):
        PositionalEncoder(8, 3, **kwargs)


def test_encoder_rejects_bad_shapes() -> None:
    enc = PositionalEncoder(8, 3)
    with pytest.raises(GraphInputError):
        enc(torch.randn(5, 8), torch.randn(5, 4))
    with pytest.raises(GraphInputError):
        enc(torch.randn(5, 7), torch.randn(5, 3))


def test_encoder_sign_flips_per_graph_in_training_only() -> None:
    pe = torch.rand(9, 4) + 0.5  # strictly positive: the sign of the output is the flip
    x = torch.zeros(9, 4)
    batch = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2])
    enc = identity_encoder(4)
    patterns = set()
    for _ in range(40):
        out = enc(x, pe, batch)
        torch.testing.assert_close(out.abs(), pe)  # |PE| is invariant
        signs = torch.sign(out)
        for g in range(3):
            block = signs[batch == g]
            assert torch.all(block == block[0])  # one sign per graph and column
        patterns.add(tuple(signs[[0, 3, 5]].flatten().tolist()))
    assert len(patterns) > 10  # random, independent per graph and column
    enc.eval()
    torch.testing.assert_close(enc(x, pe, batch), pe, rtol=0, atol=0)
    no_flip = identity_encoder(4, sign_flip=False)
    torch.testing.assert_close(no_flip(x, pe, batch), pe, rtol=0, atol=0)


def test_encoder_sign_flip_without_batch_and_with_num_graphs() -> None:
    pe, x = torch.rand(6, 3) + 0.5, torch.zeros(6, 3)
    enc = identity_encoder(3)
    signs = torch.sign(enc(x, pe))
    assert torch.all(signs == signs[0])  # one graph
    batch = torch.tensor([0, 0, 1, 1, 1, 1])
    out = enc(x, pe, batch, num_graphs=2)
    assert out.shape == (6, 3)
    torch.testing.assert_close(out.abs(), pe)


def test_encoder_gradients_reach_projection() -> None:
    enc = PositionalEncoder(4, 2, out_channels=6, mode="concat")
    enc(torch.randn(5, 4), torch.randn(5, 2)).sum().backward()
    assert enc.proj.weight.grad is not None and enc.proj.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("graph", [nx.path_graph(300), nx.cycle_graph(200)], ids=["path", "cycle"])
def test_lanczos_finds_the_bottom_of_a_clustered_spectrum(graph: nx.Graph) -> None:
    # Lanczos alone returned lambda_1..lambda_5 without the 0 here, so the first real
    # eigenpair was dropped as the trivial one (cycle: both copies of lambda_1)
    edges, n = nx_edges(graph), graph.number_of_nodes()
    lanczos, _ = laplacian_eigenpairs(edges, n, 4, dense_max_nodes=0)
    dense, _ = laplacian_eigenpairs(edges, n, 4, dense_max_nodes=10**6)
    torch.testing.assert_close(lanczos, dense, rtol=1e-5, atol=1e-9)


def test_sign_flips_are_drawn_per_graph():
    encoder = PositionalEncoder(4, 4)
    with torch.no_grad():
        encoder.proj.weight.copy_(torch.eye(4))
        encoder.proj.bias.zero_()
    pe, x = torch.rand(4, 4) + 0.5, torch.zeros(4, 4)
    batch = torch.tensor([0, 0, 1, 1])
    signs = [torch.sign(encoder(x, pe, batch)) for _ in range(20)]
    # nodes 0 and 2 (graphs 0 and 1) get one sign per column each; they must differ sometimes
    assert any(bool((s[0] != s[2]).any()) for s in signs)


PATH3 = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: laplacian_pe(PATH3, 3.0, 2), "num_nodes must be an integer >= 0, got 3.0"),
        (lambda: random_walk_pe(PATH3, None, 2), "num_nodes must be an integer >= 0, got None"),
        (lambda: laplacian_pe(PATH3[:, :0], -1, 2), "num_nodes must be an integer >= 0, got -1"),
        (lambda: laplacian_pe(PATH3, 3, 1, dense_max_nodes=None), "dense_max_nodes must be"),
        (lambda: AddLaplacianPE(2, dense_max_nodes=-5), "dense_max_nodes must be a number >= 0"),
        (lambda: PositionalEncoder(4, 2, 8.5, "concat"), "out_channels must be an integer"),
        (lambda: AddLaplacianPE(2, dense_max_nodes=math.nan), "a number >= 0, got nan"),
        (lambda: laplacian_pe(PATH3, 3, 1, dense_max_nodes=True), "a number >= 0, got True"),
        (lambda: PositionalEncoder(4, 2.5), "pe_dim must be an integer >= 1, got 2.5"),
        (lambda: PositionalEncoder(0, 2), "in_channels must be an integer >= 1, got 0"),
    ],
)
def test_encoding_sizes_are_checked_by_name(call, named) -> None:
    with pytest.raises(GraphInputError, match=re.escape(named)):
        call()


@pytest.mark.parametrize(
    ("batch", "num_graphs", "named"),
    [
        ([0], None, "batch must have shape [N=5], got [1]"),  # broadcast to one sign before
        ([0, 0, -1, -1, -1], None, "graph ids >= 0"),  # -1 took the last graph's signs
        ([0, 0, 1, 1, 2], 2, "batch holds graph id 2, but num_graphs=2"),
        ([0.0, 0.0, 1.0, 1.0, 1.0], None, "int64 (or int32)"),
        ([0, 0, 0, 0, 0], 2.0, "num_graphs must be an integer >= 0, got 2.0"),
    ],
)
def test_sign_flips_refuse_a_batch_that_does_not_fit(batch, num_graphs, named) -> None:
    encoder = PositionalEncoder(4, 2)  # training mode, sign flips on
    with pytest.raises(GraphInputError, match=re.escape(named)):
        encoder(torch.zeros(5, 4), torch.ones(5, 2), torch.tensor(batch), num_graphs=num_graphs)


def test_an_empty_batch_checks_num_graphs_too() -> None:
    encoder = PositionalEncoder(4, 2)
    empty = torch.zeros(0, dtype=torch.long)
    with pytest.raises(GraphInputError, match="num_graphs must be an integer >= 0, got -1"):
        encoder(torch.zeros(0, 4), torch.zeros(0, 2), empty, num_graphs=-1)
    assert encoder(torch.zeros(0, 4), torch.zeros(0, 2), empty, num_graphs=3).shape == (0, 4)


def test_dense_max_nodes_takes_infinity_for_always_dense() -> None:
    torus = nx.convert_node_labels_to_integers(nx.grid_2d_graph(5, 5, periodic=True))
    edges = nx_edges(torus)
    exact, _ = laplacian_eigenpairs(edges, 25, 4, dense_max_nodes=math.inf)
    dense, _ = laplacian_eigenpairs(edges, 25, 4, dense_max_nodes=25)
    torch.testing.assert_close(exact, dense, rtol=0, atol=0)
    assert AddLaplacianPE(2, dense_max_nodes=1e4).dense_max_nodes == 1e4


@pytest.mark.parametrize(
    "encoder", [PositionalEncoder(4, 2).eval(), PositionalEncoder(4, 2, sign_flip=False)]
)
def test_a_batch_that_does_not_fit_is_refused_without_sign_flips_too(encoder) -> None:
    with pytest.raises(GraphInputError, match=re.escape("batch must have shape [N=5], got [1]")):
        encoder(torch.zeros(5, 4), torch.ones(5, 2), torch.tensor([0]))


@pytest.mark.parametrize("smiles", ["CCCC(=O)CC", "Brc1cccc2ccccc12"])
def test_lap_pe_of_a_molecule_without_symmetry_does_not_depend_on_the_atom_order(smiles):
    # an eigenvector's largest entries tied at +0.5164 (the O) and -0.5164 (a terminal
    # C), and its sign followed whichever atom came first: 58 of ESOL's 193 molecules
    # without symmetry; the sum of cubes decides such ties now
    import random

    from rdkit import Chem

    from graphattn.featurize.molecule import MoleculeFeaturizer

    featurizer, transform = MoleculeFeaturizer(), AddLaplacianPE(8, attr_name="lap_pe")
    mol = Chem.MolFromSmiles(smiles)
    expected = transform(featurizer(mol)).lap_pe
    rng = random.Random(0)
    for _ in range(20):
        order = list(range(mol.GetNumAtoms()))
        rng.shuffle(order)
        pe = transform(featurizer(Chem.RenumberAtoms(mol, order))).lap_pe
        back = torch.empty_like(pe)
        back[torch.tensor(order)] = pe  # row i of pe is atom order[i] of mol
        torch.testing.assert_close(back, expected, atol=1e-6, rtol=0)


def test_fix_signs_follows_the_largest_entry_then_the_sum_of_cubes() -> None:
    from graphattn.transforms import _fix_signs

    columns_and_signs = [
        ([0.6, -0.5, -0.5, -0.3, 0.0], 1.0),  # one largest entry decides (sum of cubes < 0)
        ([-0.6, 0.5, 0.5, 0.3, 0.0], -1.0),
        ([-0.5, 0.5, 0.3, -0.2, -0.2], 1.0),  # largest tied with opposite signs: the sum
        ([0.5, -0.5, -0.3, 0.2, 0.2], -1.0),  # of cubes (+-0.011) decides, not the first
        # tied entry nor the plain sum (-+0.1)
        ([-0.5, 0.5, 0.001, 0.0, 0.0], -1.0),  # sum of cubes 1e-9, within 1e-6 of 0: the
        # first tied entry decides
    ]
    vecs = np.array([column for column, _ in columns_and_signs]).T
    signs = np.array([sign for _, sign in columns_and_signs])
    fixed = _fix_signs(vecs)
    np.testing.assert_array_equal(fixed, vecs * signs)
    for i in range(len(signs)):  # the rule is per column
        np.testing.assert_array_equal(_fix_signs(vecs[:, [i]])[:, 0], fixed[:, i])
