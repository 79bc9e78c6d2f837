"""Attention variants: k-hop (truncated), global, hybrid, hop bias, normalisers."""

from __future__ import annotations

import itertools

import networkx as nx
import pytest
import torch

from graphattn import GraphInputError
from graphattn.nn import GraphSelfAttention, HybridLayer
from graphattn.ops import prepare_edges
from tests.graphs import random_batch, random_graph


def layer(**kwargs) -> GraphSelfAttention:
    return GraphSelfAttention(8, 16, heads=4, **kwargs)


def test_hops_one_equals_the_plain_layer():
    edge_index, batch = random_batch([7, 5], seed=0)
    x = torch.randn(batch.numel(), 8)
    plain = layer()
    one_hop = layer(hops=1, attend="khop")
    one_hop.load_state_dict(plain.state_dict())
    torch.testing.assert_close(
        one_hop(x, edge_index, batch=batch), plain(x, edge_index, batch=batch)
    )


@pytest.mark.parametrize("hops", [2, 3])
def test_khop_layer_attends_exactly_within_k_hops(hops):
    edge_index = random_graph(12, 14, torch.Generator().manual_seed(hops), isolated=0)
    x = torch.randn(12, 8)
    m = layer(hops=hops)
    assert m.attend == "khop"
    _, (used, alpha) = m(x, edge_index, return_attention=True)
    graph = nx.DiGraph(edge_index.t().tolist())
    graph.add_nodes_from(range(12))
    expected = {
        (j, i) for j, reach in nx.all_pairs_shortest_path_length(graph, cutoff=hops) for i in reach
    }  # includes (i, i) at distance 0, i.e. the self-loops
    assert {tuple(p) for p in used.t().tolist()} == expected
    assert torch.all(alpha > 0)
    torch.testing.assert_close(
        m(x, edge_index, mode="sparse"), m(x, edge_index, mode="dense"), atol=1e-5, rtol=1e-5
    )


def test_global_attention_never_crosses_graphs():
    edge_index, batch = random_batch([4, 6, 3], seed=1)
    x = torch.randn(batch.numel(), 8)
    m = layer(attend="global")
    _, (used, alpha) = m(x, edge_index, batch=batch, return_attention=True)
    assert torch.equal(batch[used[0]], batch[used[1]])
    assert used.size(1) == 4 * 4 + 6 * 6 + 3 * 3  # every ordered pair, self included
    # changing another graph's features leaves a graph's output unchanged
    y = x.clone()
    y[batch == 1] = torch.randn(int((batch == 1).sum()), 8)
    keep = batch != 1
    torch.testing.assert_close(
        m(x, edge_index, batch=batch)[keep], m(y, edge_index, batch=batch)[keep]
    )
    torch.testing.assert_close(
        m(x, edge_index, batch=batch),
        m(x, edge_index, batch=batch, mode="dense"),
        atol=1e-5,
        rtol=1e-5,
    )


def test_hop_bias_uses_the_hop_distance():
    path = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])  # 0 - 1 - 2 - 3
    edges = prepare_edges(path, 4, attend="global", hops=2)
    distance = {
        tuple(p): int(d)
        for p, d in zip(edges.edge_index.t().tolist(), edges.hop_distance, strict=True)
    }
    assert distance[(0, 0)] == 0 and distance[(0, 1)] == 1 and distance[(0, 2)] == 2
    assert distance[(0, 3)] == 3  # farther than hops: the "farther" bucket hops + 1
    m = layer(attend="global", hops=2, hop_bias=True)
    with torch.no_grad():
        m.hop_embedding.weight[3] = -1e4  # forbid the farther bucket
    weights = m.attention_matrix(torch.randn(4, 8), path)
    assert torch.all(weights[0, :, 0, 3] < 1e-6) and torch.all(weights[0, :, 3, 0] < 1e-6)


@pytest.mark.parametrize("normalize", ["softmax", "relu", "sigmoid"])
@pytest.mark.parametrize("mode", ["sparse", "dense"])
def test_every_normaliser_gives_zero_weight_off_the_allowed_pairs(normalize, mode):
    edge_index, batch = random_batch([8, 5], seed=2)
    x = torch.randn(batch.numel(), 8)
    m = layer(normalize=normalize)
    weights = m.attention_matrix(x, edge_index, batch=batch, mode=mode)
    allowed = torch.zeros_like(weights, dtype=torch.bool)
    edges = prepare_edges(edge_index, batch.numel())
    start = torch.tensor([0, 8])
    for j, i in edges.edge_index.t().tolist():
        b = int(batch[i])
        allowed[b, :, i - start[b], j - start[b]] = True
    assert torch.all(weights[~allowed] == 0)
    assert torch.all(weights[allowed] >= 0)
    torch.testing.assert_close(
        m(x, edge_index, batch=batch, mode="sparse"),
        m(x, edge_index, batch=batch, mode="dense"),
        atol=1e-5,
        rtol=1e-5,
    )
    if normalize == "softmax":
        sums = weights.sum(-1)
        torch.testing.assert_close(sums[sums > 0], torch.ones_like(sums[sums > 0]))


def test_hybrid_layer_runs_in_both_modes_and_keeps_graphs_apart():
    edge_index, batch = random_batch([5, 7], seed=3)
    x = torch.randn(batch.numel(), 16)
    edge_attr = torch.randn(edge_index.size(1), 3)
    hybrid = HybridLayer(16, heads=4, edge_dim=3).eval()
    sparse = hybrid(x, edge_index, edge_attr, batch)
    dense = hybrid(x, edge_index, edge_attr, batch, mode="dense")
    assert sparse.shape == x.shape
    torch.testing.assert_close(sparse, dense, atol=1e-5, rtol=1e-5)
    y = x.clone()  # new features for graph 0 (not a constant shift, which the norm removes)
    y[batch == 0] = 3 * torch.randn(int((batch == 0).sum()), 16)
    torch.testing.assert_close(
        hybrid(y, edge_index, edge_attr, batch)[batch == 1], sparse[batch == 1]
    )


def test_hybrid_layer_is_its_formula():
    # h = x + local(norm(x)) + global(norm(x)); out = h + ffn(norm(h)), in eval mode
    torch.manual_seed(0)
    x = 3 * torch.randn(6, 8) + 1
    edge_index = torch.tensor([[0, 1, 2, 3, 4], [1, 2, 3, 4, 5]])
    layer = HybridLayer(8, heads=2).eval()
    with torch.no_grad():
        normed = layer.norm_attention(x)
        h = x + layer.local(normed, edge_index) + layer.global_(normed, edge_index)
        torch.testing.assert_close(layer(x, edge_index), h + layer.ffn(layer.norm_ffn(h)))


def test_hybrid_layer_gives_attend_and_hop_bias_to_its_local_branch():
    hybrid = HybridLayer(16, heads=4, attend="khop", hops=2, hop_bias=True)
    assert (hybrid.local.attend, hybrid.local.hops) == ("khop", 2)
    assert hybrid.local.hop_embedding is not None
    assert hybrid.global_.attend == "global" and hybrid.global_.hop_embedding is not None
    edge_index, batch = random_batch([5, 7], seed=4)
    x = torch.randn(batch.numel(), 16)
    hybrid.eval()
    torch.testing.assert_close(
        hybrid(x, edge_index, batch=batch),
        hybrid(x, edge_index, batch=batch, mode="dense"),
        atol=1e-5,
        rtol=1e-5,
    )


def test_bad_variant_arguments():
    with pytest.raises(GraphInputError, match="attend must be one of"):
        layer(attend="everything")
    for hops in (0, 2.0, True):
        with pytest.raises(GraphInputError, match=r"hops must be an integer >= 1, got"):
            layer(hops=hops, hop_bias=True)
    # a forced kernel that cannot compute the asked attention is refused when built,
    # naming the setting; a setting changed afterwards is refused at the call
    for kernel, setting in itertools.product(
        ("fused", "gather", "numba"),
        ({"hop_bias": True}, {"score": "additive"}, {"normalize": "relu"}),
    ):
        name, value = next(iter(setting.items()))
        with pytest.raises(
            GraphInputError, match=rf"kernel='{kernel}' supports .* {name}={value!r}"
        ):
            GraphSelfAttention(8, 8, heads=2, kernel=kernel, **setting)
    x, edge_index = torch.randn(4, 8), torch.tensor([[0, 1, 2], [1, 2, 3]])
    # dense mode does not use the kernel: such a layer is built and runs (as before the
    # check moved to construction), and is refused only when called in sparse mode
    dense = GraphSelfAttention(8, 8, heads=2, mode="dense", kernel="gather", hop_bias=True)
    assert dense(x, edge_index).shape == (4, 8)
    with pytest.raises(GraphInputError, match=r"kernel='gather' supports"):
        dense(x, edge_index, mode="sparse")
    assert GraphSelfAttention(8, 8, heads=2, kernel="fused", hop_bias=None).hop_embedding is None


def test_hybrid_layer_argument_errors_name_its_own_arguments():
    # the layer's own argument, not its attention's out_channels
    with pytest.raises(GraphInputError, match=r"^channels \(6\) must be a multiple of heads"):
        HybridLayer(6, 4)
    with pytest.raises(GraphInputError, match="pass global_hop_bias=False"):
        HybridLayer(8, 2, kernel="fused")
    hybrid = HybridLayer(8, 2, kernel="fused", global_hop_bias=False)
    assert hybrid(torch.randn(4, 8), torch.tensor([[0, 1, 2], [1, 2, 3]])).shape == (4, 8)
    dense = HybridLayer(8, 2, mode="dense", kernel="fused")  # the kernel is unused
    assert dense(torch.randn(4, 8), torch.tensor([[0, 1, 2], [1, 2, 3]])).shape == (4, 8)
