"""GraphSelfAttention: sparse and dense agree, invariants hold, bad input is refused."""

from __future__ import annotations

import copy
import gc
import itertools
import weakref

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from graphattn import GraphInputError
from graphattn.nn import DenseMemoryError, GraphSelfAttention, GraphTransformerLayer
from graphattn.ops import prepare_edges, reference_edge_attention
from graphattn.ops.compiled import numba_available
from graphattn.ops.dense import dense_layout, dense_memory_bytes, graph_sizes
from tests.graphs import random_batch, random_graph

SCORES = ["dot", "additive"]


def make_layer(score="dot", edge_dim=None, **kwargs) -> GraphSelfAttention:
    return GraphSelfAttention(8, 16, heads=4, score=score, edge_dim=edge_dim, **kwargs)


@pytest.mark.parametrize("score", SCORES)
@pytest.mark.parametrize("edge_dim", [None, 3])
@pytest.mark.parametrize("kernel", ["reference", "auto"])
def test_sparse_and_dense_agree_on_batches(score, edge_dim, kernel):
    edge_index, batch = random_batch([7, 1, 12, 5], seed=1)
    x = torch.randn(batch.numel(), 8, requires_grad=True)
    edge_attr = torch.randn(edge_index.size(1), 3) if edge_dim else None
    layer = make_layer(score, edge_dim, kernel=kernel)

    sparse = layer(x, edge_index, edge_attr, batch, mode="sparse")
    grads_sparse = torch.autograd.grad(sparse.square().sum(), [x, *layer.parameters()])
    dense = layer(x, edge_index, edge_attr, batch, mode="dense")
    grads_dense = torch.autograd.grad(dense.square().sum(), [x, *layer.parameters()])

    torch.testing.assert_close(sparse, dense, atol=1e-5, rtol=1e-5)
    for a, b in zip(grads_sparse, grads_dense, strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("kernel", ["reference", "gather", "fused", "numba"])
def test_saturated_attention_keeps_float32_gradients_exact(kernel):
    """Features of scale 1,000 make each softmax one-hot; every sparse kernel (and dense
    mode's explicit path) still matches float64. (PyTorch's fused attention, which dense
    mode uses otherwise, does not: README, "Both modes ... agree".)"""
    if kernel == "numba" and not numba_available():
        pytest.skip("Numba is not installed")
    torch.manual_seed(0)
    edge_index = torch.tensor([[0, 0, 1, 2, 3, 3, 4, 1], [1, 1, 2, 3, 4, 4, 0, 0]])
    layer = GraphSelfAttention(6, 8, heads=2, kernel=kernel)
    x = torch.randn(5, 6) * 1000

    def input_gradient(module, inputs, **kwargs):
        inputs = inputs.clone().requires_grad_()
        out = module(inputs, edge_index, **kwargs)
        out = out[0] if isinstance(out, tuple) else out
        weights = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)
        return torch.autograd.grad(out, inputs, weights)[0]

    exact = input_gradient(copy.deepcopy(layer).double(), x.double(), mode="sparse")
    assert float(exact.abs().max()) > 0.1
    for kwargs in (dict(mode="sparse"), dict(mode="dense", return_attention=True)):
        got = input_gradient(layer, x, **kwargs)
        torch.testing.assert_close(got.double(), exact, atol=1e-6, rtol=0)


def random_graph_cases(max_nodes: int, max_edges: int, examples: int):
    """Hypothesis cases ``(num_nodes, num_edges, loops, seed)`` of small random graphs."""

    def decorate(test):
        cases = given(
            num_nodes=st.integers(1, max_nodes),
            num_edges=st.integers(0, max_edges),
            loops=st.booleans(),
            seed=st.integers(0, 10_000),
        )
        return settings(max_examples=examples, deadline=None)(cases(test))

    return decorate


@random_graph_cases(max_nodes=16, max_edges=50, examples=25)
def test_sparse_equals_dense_on_random_graphs(num_nodes, num_edges, loops, seed):
    g = torch.Generator().manual_seed(seed)
    edge_index = random_graph(num_nodes, num_edges, g, isolated=min(2, num_nodes - 1))
    x = torch.randn(num_nodes, 8, generator=g)
    layer = make_layer(add_self_loops=loops)
    torch.testing.assert_close(
        layer(x, edge_index, mode="sparse"),
        layer(x, edge_index, mode="dense"),
        atol=1e-5,
        rtol=1e-5,
    )


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 9), min_size=1, max_size=4),
    score=st.sampled_from(SCORES),
    edge_dim=st.sampled_from([None, 3]),
    return_weights=st.booleans(),
    seed=st.integers(0, 10_000),
)
def test_sparse_equals_dense_on_random_batches(sizes, score, edge_dim, return_weights, seed):
    # dense mode's explicit path (edge features, additive scores, returned weights) as
    # well as its fused one, on batches of several graphs
    edge_index, batch = random_batch(sizes, edges_per_node=2, seed=seed)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch.numel(), 8, generator=g)
    edge_attr = torch.randn(edge_index.size(1), 3, generator=g) if edge_dim else None
    layer = make_layer(score, edge_dim)
    kwargs = dict(return_attention=return_weights)
    sparse = layer(x, edge_index, edge_attr, batch, mode="sparse", **kwargs)
    dense = layer(x, edge_index, edge_attr, batch, mode="dense", **kwargs)
    if return_weights:
        (sparse, (used_s, alpha_s)), (dense, (used_d, alpha_d)) = sparse, dense
        assert torch.equal(used_s, used_d)
        torch.testing.assert_close(alpha_s, alpha_d, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(sparse, dense, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode,score", list(itertools.product(["sparse", "dense"], SCORES)))
def test_gradcheck_float64(mode, score):
    edge_index = random_graph(6, 12, torch.Generator().manual_seed(3), isolated=1)
    layer = make_layer(score, edge_dim=2, kernel="reference").double()
    x = torch.randn(6, 8, dtype=torch.float64, requires_grad=True)
    edge_attr = torch.randn(edge_index.size(1), 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda x, e: layer(x, edge_index, e, mode=mode), (x, edge_attr), eps=1e-6, atol=1e-5
    )


@pytest.mark.parametrize("mode", ["sparse", "dense"])
@pytest.mark.parametrize("score", SCORES)
def test_attention_matrix_is_zero_off_edges_and_rows_sum_to_one(mode, score):
    edge_index, batch = random_batch([9, 6], seed=2)
    x = torch.randn(batch.numel(), 8)
    layer = make_layer(score)
    weights = layer.attention_matrix(x, edge_index, batch=batch, mode=mode)  # [B, H, L, L]
    assert weights.shape == (2, 4, 9, 9)

    allowed = torch.zeros(2, 9, 9, dtype=torch.bool)
    start = torch.tensor([0, 9])
    for j, i in edge_index.t().tolist():
        b = int(batch[i])
        allowed[b, i - start[b], j - start[b]] = True
    for b, n in enumerate([9, 6]):
        allowed[b, torch.arange(n), torch.arange(n)] = True  # self-loops
    assert torch.all(weights[~allowed.unsqueeze(1).expand_as(weights)] == 0)
    rows = weights.sum(-1)  # [B, H, L]; every real node has at least its self-loop
    real = torch.tensor([[True] * 9, [True] * 6 + [False] * 3]).unsqueeze(1).expand_as(rows)
    torch.testing.assert_close(rows[real], torch.ones(4 * 15))
    assert torch.all(rows[~real] == 0)


def test_weights_match_across_modes_and_return_attention_format():
    edge_index, batch = random_batch([5, 8], seed=4)
    x = torch.randn(batch.numel(), 8)
    layer = make_layer()
    _, (used_s, alpha_s) = layer(x, edge_index, batch=batch, return_attention=True)
    _, (used_d, alpha_d) = layer(x, edge_index, batch=batch, return_attention=True, mode="dense")
    assert torch.equal(used_s, used_d)
    assert alpha_s.shape == (used_s.size(1), 4)
    torch.testing.assert_close(alpha_s, alpha_d, atol=1e-6, rtol=1e-5)
    # duplicates merged, one self-loop per node: the used edge set is unique
    pairs = {tuple(p) for p in used_s.t().tolist()}
    assert len(pairs) == used_s.size(1)
    assert all((n, n) in pairs for n in range(batch.numel()))


def test_duplicate_edges_and_existing_self_loops_count_once():
    x = torch.randn(3, 8)
    once = torch.tensor([[0, 1, 2], [1, 1, 0]])  # includes the self-loop 1 -> 1
    twice = torch.cat([once, once, torch.tensor([[1], [1]])], dim=1)
    layer = make_layer()
    torch.testing.assert_close(layer(x, once), layer(x, twice))


@random_graph_cases(max_nodes=12, max_edges=40, examples=30)
def test_prepared_edges_structure(num_nodes, num_edges, loops, seed):
    """The sorted, deduplicated pair set, its CSR pointer, the merge counts and
    segment_counts (the bincount without a GPU sync) agree with a plain Python count."""
    from graphattn.ops.segment import segment_counts

    g = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=g)
    edges = prepare_edges(edge_index, num_nodes, add_self_loops=loops, cache=False)
    pairs = {(int(j), int(i)) for j, i in edge_index.t()}
    if loops:
        pairs |= {(i, i) for i in range(num_nodes)}
    expected = sorted(pairs, key=lambda p: (p[1], p[0]))
    assert [tuple(e) for e in edges.edge_index.t().tolist()] == expected
    in_degree = [sum(1 for _, i in expected if i == node) for node in range(num_nodes)]
    assert edges.in_degree().tolist() == in_degree
    inputs = [(int(j), int(i)) for j, i in edge_index.t()]
    assert edges.input_count.tolist() == [inputs.count(p) for p in expected]
    index = torch.randint(0, num_nodes, (num_edges,), generator=g)
    assert torch.equal(segment_counts(index, num_nodes), torch.bincount(index, minlength=num_nodes))


def test_segment_reductions_match_a_loop_over_segments():
    """segment_sum (any index order) and segment_reduce_csr (sorted, by row pointer)
    against a per-segment loop; empty segments give 0 and -inf."""
    from graphattn.ops.segment import csr_pointer, segment_reduce_csr, segment_sum

    torch.manual_seed(0)
    index = torch.tensor([0, 0, 0, 2, 2, 4, 4, 4, 4])  # segments 1, 3 and 5 are empty
    values = torch.randn(index.numel(), 3, 2)
    rowptr = csr_pointer(index, 6)
    loop_sum = torch.stack([values[index == s].sum(0) for s in range(6)])
    loop_max = torch.stack(
        [
            values[index == s].amax(0) if (index == s).any() else torch.full((3, 2), -torch.inf)
            for s in range(6)
        ]
    )
    torch.testing.assert_close(segment_reduce_csr(values, rowptr, "sum"), loop_sum)
    torch.testing.assert_close(segment_reduce_csr(values, rowptr, "max"), loop_max)
    shuffled = torch.randperm(index.numel())
    torch.testing.assert_close(segment_sum(values[shuffled], index[shuffled], 6), loop_sum)


@pytest.mark.parametrize("normalize", ["softmax", "relu", "sigmoid"])
@pytest.mark.parametrize("shape", [(), (3,), (3, 2)])
def test_segment_normalize_keeps_the_shape_of_the_scores(normalize, shape):
    """Scores ``[E, *]`` give weights ``[E, *]`` under every normaliser, each segment
    normalised by its own in-degree (relu and sigmoid turned ``[E]`` scores into
    ``[E, E]`` weights and refused ``[E, H, D]`` ones)."""
    from graphattn.ops.segment import segment_normalize

    index = torch.tensor([0, 0, 0, 2, 2, 3])
    scores = torch.randn(index.numel(), *shape)
    alpha = segment_normalize(scores, index, 4, normalize)
    assert alpha.shape == scores.shape
    degree = torch.tensor([3.0, 3.0, 3.0, 2.0, 2.0, 1.0]).view(-1, *[1] * len(shape))
    expected = {
        "relu": lambda: torch.relu(scores) / degree,
        "sigmoid": lambda: torch.sigmoid(scores - degree.log()),
        "softmax": lambda: torch.cat([scores[index == t].softmax(0) for t in (0, 2, 3)]),
    }[normalize]()
    torch.testing.assert_close(alpha, expected)


def test_by_source_is_the_transposed_csr():
    edge_index = torch.tensor([[2, 0, 2, 1, 0], [0, 1, 1, 2, 2]])
    edges = prepare_edges(edge_index, 4, add_self_loops=False, cache=False)
    perm, rowptr = edges.by_source()
    src, dst = edges.edge_index[:, perm]
    assert src.tolist() == [0, 0, 1, 2, 2] and dst.tolist() == [1, 2, 2, 0, 1]
    assert rowptr.tolist() == [0, 2, 3, 5, 5]  # node 3 sends nothing


def test_edge_terms_equal_projecting_the_merged_edge_features():
    # The layer projects the input edges and then merges them; that must equal
    # projecting the merged features (duplicates averaged, added self-loops zero).
    edge_index = torch.tensor([[0, 0, 1, 2, 3], [1, 1, 2, 0, 2]])  # 0 -> 1 twice
    edge_attr = torch.randn(5, 6)
    layer = make_layer(edge_dim=6)
    torch.nn.init.normal_(layer.lin_edge.bias)  # lin_edge(0) = bias must reach the loops
    edges = layer.allowed_edges(edge_index, 4, None)
    expected = layer.lin_edge(edges.merge_edge_features(edge_attr))
    got = layer._edge_terms(edges, edge_attr).reshape(edges.num_edges, -1)
    torch.testing.assert_close(got, expected)
    assert bool((edges.input_count == 0).any())  # the case includes added self-loops


def test_isolated_node_gets_zero_output_not_nan():
    edges = prepare_edges(torch.tensor([[0, 1], [1, 0]]), num_nodes=3, add_self_loops=False)
    q, k, v = torch.randn(3, 3, 2, 4).unbind(0)
    out, alpha = reference_edge_attention(q, k, v, edges)
    assert torch.equal(out[2], torch.zeros(2, 4))
    layer = make_layer(add_self_loops=False)
    x = torch.randn(3, 8)
    for mode in ("sparse", "dense"):
        y = layer(x, torch.tensor([[0, 1], [1, 0]]), mode=mode)
        assert torch.isfinite(y).all()
        torch.testing.assert_close(y[2], layer.lin_out.bias)  # W_O applied to a zero vector


@pytest.mark.parametrize("mode", ["sparse", "dense"])
def test_permuting_nodes_permutes_the_output(mode):
    edge_index = random_graph(10, 25, torch.Generator().manual_seed(5))
    x = torch.randn(10, 8)
    edge_attr = torch.randn(edge_index.size(1), 3)
    layer = make_layer(edge_dim=3)
    perm = torch.randperm(10)
    inverse = torch.empty_like(perm)
    inverse[perm] = torch.arange(10)
    out = layer(x, edge_index, edge_attr, mode=mode)
    out_perm = layer(x[perm], inverse[edge_index], edge_attr, mode=mode)
    torch.testing.assert_close(out_perm, out[perm], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", ["sparse", "dense"])
def test_batch_gives_the_same_output_as_each_graph_alone(mode):
    sizes = [4, 9, 6]
    edge_index, batch = random_batch(sizes, seed=6)
    x = torch.randn(batch.numel(), 8)
    layer = make_layer()
    together = layer(x, edge_index, batch=batch, mode=mode)
    offset = 0
    for b, n in enumerate(sizes):
        keep = batch[edge_index[1]] == b
        alone = layer(x[offset : offset + n], edge_index[:, keep] - offset, mode=mode)
        torch.testing.assert_close(together[offset : offset + n], alone, atol=1e-5, rtol=1e-5)
        offset += n


def test_mode_switch_keeps_the_weights():
    layer = make_layer(mode="dense")
    before = {k: v.clone() for k, v in layer.state_dict().items()}
    layer.mode = "sparse"
    assert layer.mode == "sparse"
    assert all(torch.equal(before[k], v) for k, v in layer.state_dict().items())
    with pytest.raises(GraphInputError, match="mode must be one of"):
        layer.mode = "fast"


def test_dense_mode_refuses_graphs_over_the_memory_budget():
    layer = make_layer(mode="dense", max_dense_bytes=10_000)
    x = torch.randn(200, 8)
    edge_index = random_graph(200, 400, torch.Generator().manual_seed(0))
    with pytest.raises(DenseMemoryError, match=r"N=200 .*4 heads.*mode='sparse'"):
        layer(x, edge_index)
    layer(x, edge_index, mode="sparse")  # the same graph works sparsely


def test_dense_mode_refuses_edges_across_graphs():
    batch = torch.tensor([0, 0, 1, 1])
    edge_index = torch.tensor([[0, 2], [1, 1]])  # 2 -> 1 crosses from graph 1 to graph 0
    with pytest.raises(GraphInputError, match="source 2 -> target 1 connects graphs 1 and 0"):
        make_layer()(torch.randn(4, 8), edge_index, batch=batch, mode="dense")


def test_prepared_edges_are_cached_per_graph_and_invalidated_by_edits():
    edge_index = random_graph(8, 20, torch.Generator().manual_seed(7))
    first = prepare_edges(edge_index, 8)
    assert prepare_edges(edge_index, 8) is first
    assert prepare_edges(edge_index.clone(), 8) is not first
    edge_index[0, 0] = (edge_index[0, 0] + 1) % 8  # in-place edit bumps the version
    assert prepare_edges(edge_index, 8) is not first


@pytest.mark.parametrize("edge_dim", [None, 3])
@pytest.mark.parametrize("kernel", ["auto", "reference", "numba", "gather", "fused"])
def test_training_after_an_inference_mode_pass_on_the_same_graph(kernel, edge_dim):
    """Full-graph training evaluates and trains on one edge_index: what the eval pass under
    inference_mode prepared must not reach autograd (inference tensors cannot be saved)."""
    if kernel == "numba" and not numba_available():
        pytest.skip("numba is not installed")
    layer = make_layer(edge_dim=edge_dim, kernel=kernel)
    edge_index = random_graph(10, 30, torch.Generator().manual_seed(3))
    x = torch.randn(10, 8)
    edge_attr = None if edge_dim is None else torch.randn(edge_index.size(1), edge_dim)
    for mode in ("sparse", "dense"):
        with torch.inference_mode():
            expected = layer(x, edge_index, edge_attr, mode=mode)
        out = layer(x, edge_index, edge_attr, mode=mode)
        out.sum().backward()
        torch.testing.assert_close(out.detach(), expected)


@pytest.mark.parametrize(
    "attention", [{}, {"hops": 2, "hop_bias": True}, {"attend": "global"}], ids=str
)
@pytest.mark.parametrize("kernel", ["auto", "reference", "numba", "gather", "fused"])
def test_graph_tensors_made_under_inference_mode(kernel, attention):
    """Inference tensors have no version counter, which the edge-set cache keys on: a
    graph loaded inside ``torch.inference_mode()`` must be attended over, not crash."""
    if kernel == "numba" and not numba_available():
        pytest.skip("numba is not installed")
    if kernel in ("numba", "gather", "fused") and attention.get("hop_bias"):
        kernel = "reference"  # hop bias runs on the reference kernel only
    layer = make_layer(edge_dim=3, kernel=kernel, **attention)
    edge_index, batch = random_batch([6, 4], seed=5)
    x = torch.randn(10, 8)
    edge_attr = torch.randn(edge_index.size(1), 3)
    for mode in ("sparse", "dense"):
        with torch.no_grad():
            expected = layer(x, edge_index, edge_attr, batch, mode=mode)
        with torch.inference_mode():
            graph = [t.clone() for t in (x, edge_index, edge_attr, batch)]
            assert all(t.is_inference() for t in graph)
            for _ in range(2):  # a second call on the same tensors: no stale cache
                torch.testing.assert_close(layer(*graph, mode=mode), expected)
            graph[1][0, 0] = (graph[1][0, 0] + 1) % 6  # an in-place edit is seen
            assert not torch.allclose(layer(*graph, mode=mode), expected)


def test_cached_edges_are_dropped_when_their_graph_is_freed():
    from graphattn.ops.graph import _CACHE

    before = len(_CACHE)
    batches = [random_graph(8, 20, torch.Generator().manual_seed(s)) for s in range(5)]
    edge_sets = [weakref.ref(prepare_edges(e, 8)) for e in batches]
    assert len(_CACHE) == before + 5
    del batches
    gc.collect()
    assert len(_CACHE) == before
    assert all(ref() is None for ref in edge_sets)  # nothing else kept them alive


BAD_INPUTS = [
    (dict(edge_index=torch.tensor([0, 1, 2])), r"edge_index must have shape \[2, E\], got \[3\]"),
    (dict(edge_index=torch.tensor([[0.0, 1.0], [1.0, 0.0]])), "edge_index must be int64"),
    (
        dict(edge_index=torch.tensor([[0, 7], [1, 0]])),
        r"out of range for 5 nodes: edge 1 is \(source 7",
    ),
    (dict(edge_index=torch.tensor([[0, -1], [1, 0]])), r"edge 1 is \(source -1"),
    (dict(x=torch.randn(5, 3)), r"x must have shape \[N, 8\].*got \[5, 3\]"),
    (dict(x=torch.tensor([[float("nan")] * 8] * 5)), r"non-finite values: x\[0, 0\] = nan"),
    (dict(x=torch.ones(5, 8, dtype=torch.long)), "floating-point"),
    (dict(edge_index=[[0, 1], [1, 0]]), "edge_index must be a torch.Tensor, got list"),
    (dict(edge_index=np.array([[0, 1], [1, 0]])), "edge_index must be a torch.Tensor, got ndarray"),
]


@pytest.mark.parametrize("override,message", BAD_INPUTS)
def test_bad_input_raises_a_clear_error(override, message):
    args = dict(x=torch.randn(5, 8), edge_index=torch.tensor([[0, 1], [1, 0]]))
    args.update(override)
    with pytest.raises(GraphInputError, match=message):
        make_layer()(args["x"], args["edge_index"])


def test_bad_constructor_arguments():
    multiple = r"out_channels \(10\) must be a multiple of heads \(4\)"
    with pytest.raises(GraphInputError, match=multiple):
        GraphSelfAttention(8, 10, heads=4)
    with pytest.raises(GraphInputError, match="score must be one of"):
        GraphSelfAttention(8, 16, score="cosine")
    with pytest.raises(GraphInputError, match="pass edge_attr"):
        make_layer(edge_dim=3)(torch.randn(2, 8), torch.tensor([[0], [1]]))
    with pytest.raises(GraphInputError, match=r"edge_attr must have shape \[E, 3\]"):
        make_layer(edge_dim=3)(torch.randn(2, 8), torch.tensor([[0], [1]]), torch.randn(1, 2))
    with pytest.raises(ValueError, match="norm must be one of"):
        GraphTransformerLayer(16, 4, norm="group")


@pytest.mark.parametrize("norm", ["layer", "batch", "none"])
def test_transformer_layers_stack_and_agree_across_modes(norm):
    edge_index, batch = random_batch([6, 10], seed=8)
    x = torch.randn(batch.numel(), 16)
    edge_attr = torch.randn(edge_index.size(1), 4)
    layers = torch.nn.ModuleList(
        GraphTransformerLayer(16, heads=4, norm=norm, edge_dim=4) for _ in range(3)
    ).eval()

    def run(mode):
        h = x
        for layer in layers:
            h = layer(h, edge_index, edge_attr, batch, mode=mode)
        return h

    sparse, dense = run("sparse"), run("dense")
    assert sparse.shape == (batch.numel(), 16)
    torch.testing.assert_close(sparse, dense, atol=1e-5, rtol=1e-5)
    out, (used, alpha) = layers[0](x, edge_index, edge_attr, batch, return_attention=True)
    assert alpha.shape == (used.size(1), 4)


def test_a_layer_learns_to_attend_to_the_informative_neighbour():
    """Each target has two sources; the label is the feature of the 'marked' one."""
    torch.manual_seed(0)
    n = 64
    x = torch.randn(3 * n, 8)
    x[:n, 0] = 1.0  # marked sources
    x[n : 2 * n, 0] = -1.0  # distractors
    targets = torch.arange(2 * n, 3 * n)
    edge_index = torch.cat(
        [torch.stack([torch.arange(n), targets]), torch.stack([torch.arange(n, 2 * n), targets])],
        dim=1,
    )
    y = x[:n, 1:2]
    layer = GraphSelfAttention(8, 8, heads=1, add_self_loops=False)
    head = torch.nn.Linear(8, 1)
    opt = torch.optim.Adam([*layer.parameters(), *head.parameters()], lr=0.03)
    for _ in range(150):
        opt.zero_grad()
        loss = (head(layer(x, edge_index)[targets]) - y).square().mean()
        loss.backward()
        opt.step()
    _, (used, alpha) = layer(x, edge_index, return_attention=True)
    marked = used[0] < n
    assert loss.item() < 0.05
    assert alpha[marked].mean() > 0.9


def test_auto_mode_picks_dense_for_a_small_complete_graph_and_sparse_for_a_large_sparse_one():
    from graphattn.ops.dense import dense_layout

    layer = make_layer(mode="auto")
    n = 12
    complete = torch.cartesian_prod(torch.arange(n), torch.arange(n)).t()
    small = dense_layout(n, None, torch.device("cpu"))
    complete_edges = layer.allowed_edges(complete, n, None)
    assert layer.resolve_mode(complete_edges, small, "cpu") == "dense"

    big = 20_000
    sparse = random_graph(big, 10 * big, torch.Generator().manual_seed(0))
    edges = layer.allowed_edges(sparse, big, None)
    layout = dense_layout(big, None, torch.device("cpu"))
    assert layer.resolve_mode(edges, layout, "cpu") == "sparse"
    # auto gives the same numbers as either explicit mode
    x = torch.randn(n, 8)
    torch.testing.assert_close(layer(x, complete), layer(x, complete, mode="sparse"))
    # the memory estimate follows the inputs' dtype: a budget between the float32 and
    # float64 estimates makes float64 inputs run sparse rather than fail the budget
    layer.max_dense_bytes = layer.dense_bytes(small, torch.float32)
    assert layer.dense_bytes(small, torch.float64) > layer.max_dense_bytes
    assert layer.resolve_mode(complete_edges, small, "cpu") == "dense"
    assert layer.resolve_mode(complete_edges, small, "cpu", torch.float64) == "sparse"
    wide = layer.double()
    torch.testing.assert_close(
        wide(x.double(), complete), wide(x.double(), complete, mode="sparse")
    )


def test_choose_mode_rule_per_device():
    """Dense needs the density crossover everywhere and, on a GPU, enough sparse work:
    small complete graphs stay sparse on CUDA (fixed costs decide there)."""
    from graphattn.ops.cost import CROSSOVER_DENSITY, DENSE_MIN_WORK, choose_mode

    def mode(edges, graphs, nodes, device, channels=64, dense_bytes=0):
        return choose_mode(edges, graphs, nodes, dense_bytes, 2**40, device, channels)

    complete_small = 12 * 12
    assert mode(complete_small, 1, 12, "cpu") == "dense"
    assert mode(complete_small, 1, 12, "cuda") == "sparse"
    n = 8_000  # E·C of a complete graph: 4.1e9, over the CUDA minimum
    assert n * n * 64 >= DENSE_MIN_WORK["cuda"]
    assert mode(n * n, 1, n, "cuda") == "dense"
    below = int(CROSSOVER_DENSITY["cuda"] * n * n) - 1
    assert mode(below, 1, n, "cuda") == "sparse"
    assert mode(below + 2, 1, n, "cuda") == "dense"
    assert mode(n * n, 1, n, "cuda", dense_bytes=2**41) == "sparse"  # over the budget
    assert mode(0, 0, 0, "cpu") == "sparse"


def test_graph_sizes_agree_with_the_dense_layout():
    from graphattn.ops.dense import dense_layout, graph_sizes

    cpu = torch.device("cpu")
    for num_nodes, batch in [
        (7, None),
        (0, None),
        (9, torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2])),
        (5, torch.tensor([0, 0, 2, 2, 2])),  # graph 1 has no nodes
    ]:
        layout = dense_layout(num_nodes, batch, cpu)
        assert graph_sizes(num_nodes, batch) == (layout.num_graphs, layout.max_nodes)
    with pytest.raises(GraphInputError, match="batch must have shape"):
        graph_sizes(3, torch.zeros(4, dtype=torch.long))


def test_a_batch_that_is_not_a_tensor_is_refused_by_name():
    layer = make_layer(attend="global")
    edge_index = torch.tensor([[0, 1], [1, 0]])
    with pytest.raises(GraphInputError, match="batch must be a torch.Tensor, got list"):
        layer(torch.randn(3, 8), edge_index, batch=[0, 0, 1])


def test_choose_kernel_thresholds():
    from graphattn.ops.cost import FUSED_MIN_SIZE_CPU, choose_kernel

    plain, with_edges = FUSED_MIN_SIZE_CPU["plain"], FUSED_MIN_SIZE_CPU["edge_terms"]
    assert plain < with_edges
    heads, head_dim = 4, 16
    small = plain // (heads * head_dim) - 1
    assert choose_kernel(small, heads, head_dim, False, "cpu") == "gather"
    assert choose_kernel(small + 1, heads, head_dim, False, "cpu") == "fused"
    assert choose_kernel(small + 1, heads, head_dim, True, "cpu") == "gather"
    assert choose_kernel(with_edges // 64, heads, head_dim, True, "cpu") == "fused"
    assert choose_kernel(1, heads, head_dim, True, "cuda") == "fused"
    # between the "dense_plain" and "plain" sizes: fused only with many pairs per node
    from graphattn.ops.cost import FUSED_MIN_DEGREE_CPU

    pairs = FUSED_MIN_SIZE_CPU["dense_plain"] // (heads * head_dim)
    many = pairs // FUSED_MIN_DEGREE_CPU
    assert choose_kernel(pairs, heads, head_dim, False, "cpu", num_nodes=many) == "fused"
    assert choose_kernel(pairs, heads, head_dim, False, "cpu", num_nodes=many + 1) == "gather"
    assert choose_kernel(pairs - 1, heads, head_dim, False, "cpu", num_nodes=1) == "gather"
    assert choose_kernel(pairs, heads, head_dim, True, "cpu", num_nodes=1) == "gather"
    assert choose_kernel(pairs, heads, head_dim, False, "cpu") == "gather"
    # where the Numba kernel can run: numba with edge features at any size, and without
    # them below NUMBA_MAX_SIZE_CPU; fused above it and on CUDA
    from graphattn.ops.cost import NUMBA_MAX_SIZE_CPU

    largest = NUMBA_MAX_SIZE_CPU // (heads * head_dim) - 1
    for num_pairs in (1, pairs, small + 1, largest):
        assert choose_kernel(num_pairs, heads, head_dim, False, "cpu", 1, True) == "numba"
    assert choose_kernel(largest + 1, heads, head_dim, False, "cpu", numba=True) == "fused"
    assert choose_kernel(with_edges, heads, head_dim, True, "cpu", numba=True) == "numba"
    assert choose_kernel(1, heads, head_dim, True, "cuda", numba=True) == "fused"


@pytest.mark.parametrize("num_nodes,expect_fused", [(40, False), (30_000, True)])
def test_auto_kernel_runs_fused_only_on_large_edge_sets(num_nodes, expect_fused):
    # The fused kernel keeps its CSR index in the edge set's cache: a visible trace of
    # which kernel ran. The results agree with the reference kernel either way.
    edge_index = random_graph(num_nodes, 10 * num_nodes, torch.Generator().manual_seed(0))
    x = torch.randn(num_nodes, 8)
    layer = make_layer()
    out = layer(x, edge_index)
    edges = layer.allowed_edges(edge_index, num_nodes, None)
    assert ("fused.csr" in edges.cache) == expect_fused
    reference = make_layer(kernel="reference")
    reference.load_state_dict(layer.state_dict())
    torch.testing.assert_close(out, reference(x, edge_index.clone()), atol=1e-5, rtol=1e-4)


def test_finite_check_names_the_entry_and_accepts_huge_finite_values():
    layer, edge_index = make_layer(), torch.tensor([[0, 1], [1, 0]])
    x = torch.zeros(2, 8)
    x[1, 3] = float("inf")
    with pytest.raises(GraphInputError, match=r"x\[1, 3\] = inf"):
        layer(x, edge_index)
    huge = torch.full((2, 8), 3e38)  # finite, but their sum overflows: still accepted
    assert layer(huge, edge_index).shape == (2, 16)  # no error (the output may overflow)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("score", SCORES)
def test_cuda_layer_matches_cpu_and_dense(score):
    """On CUDA the sparse layer (fused kernel by default) gives the CPU layer's result,
    and sparse and dense modes agree there too, gradients included."""
    edge_index, batch = random_batch([7, 1, 12, 5], seed=3)
    x = torch.randn(batch.numel(), 8)
    edge_attr = torch.randn(edge_index.size(1), 3)
    layer = make_layer(score, edge_dim=3)
    expected = layer(x, edge_index, edge_attr, batch, mode="sparse")

    gpu = make_layer(score, edge_dim=3).cuda()
    gpu.load_state_dict(layer.state_dict())
    inputs = [t.cuda() for t in (x, edge_index, edge_attr, batch)]
    x_gpu = inputs[0].requires_grad_()
    sparse = gpu(x_gpu, *inputs[1:], mode="sparse")
    torch.testing.assert_close(sparse.cpu(), expected, atol=1e-4, rtol=1e-4)
    grads_sparse = torch.autograd.grad(sparse.square().sum(), [x_gpu, *gpu.parameters()])
    dense = gpu(x_gpu, *inputs[1:], mode="dense")
    grads_dense = torch.autograd.grad(dense.square().sum(), [x_gpu, *gpu.parameters()])
    torch.testing.assert_close(sparse, dense, atol=1e-5, rtol=1e-5)
    for a, b in zip(grads_sparse, grads_dense, strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_edge_features_for_a_layer_without_edge_dim_are_refused():
    x, edge_index = torch.randn(5, 4), torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]])
    plain = GraphSelfAttention(4, 8, heads=2)
    with pytest.raises(GraphInputError, match="built without edge_dim and would ignore it"):
        plain(x, edge_index, torch.randn(4, 3))


def test_attention_matrix_takes_edge_features_and_batch_by_name():
    x, edge_index = torch.randn(5, 4), torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]])
    edge_attr = torch.randn(4, 3)
    layer = GraphSelfAttention(4, 8, heads=2, edge_dim=3)
    with pytest.raises(TypeError):  # positionally it was read as the batch vector
        layer.attention_matrix(x, edge_index, edge_attr)
    weights = layer.attention_matrix(x, edge_index, edge_attr=edge_attr)
    _, (used, alpha) = layer(x, edge_index, edge_attr, return_attention=True)
    source, target = used  # row 0 sources, row 1 targets
    torch.testing.assert_close(weights[0, :, target, source].T, alpha)


def test_dropout_out_of_range_is_refused_when_the_layer_is_built():
    with pytest.raises(GraphInputError, match="dropout must be at least 0 and below 1, got -0.2"):
        GraphSelfAttention(4, 8, heads=2, dropout=-0.2)


@pytest.mark.parametrize("kernel", ["auto", "numba", "gather", "fused"])
def test_gradients_of_gradients_name_the_kernel_that_supports_them(kernel):
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    edge_index = torch.tensor([[0, 1, 2, 3, 0], [1, 2, 3, 4, 2]])
    layer = GraphSelfAttention(3, 4, heads=2, kernel=kernel).double()
    with pytest.raises(GraphInputError, match="first-order gradients only; .* kernel='reference'"):
        torch.autograd.grad(layer(x, edge_index).square().sum(), x, create_graph=True)
    reference = GraphSelfAttention(3, 4, heads=2, kernel="reference").double()
    reference.load_state_dict(layer.state_dict())
    assert torch.autograd.gradgradcheck(lambda a: reference(a, edge_index), (x,))


@pytest.mark.parametrize("mode", ["dense", "auto"])
def test_the_reference_kernel_has_gradients_of_gradients_in_dense_mode(mode):
    # Dense mode's plain case ran torch's fused attention, which has no second
    # derivative on CPU, whatever the kernel; auto mode picks dense on this small graph.
    x = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    ring = torch.tensor([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]])
    layer = GraphSelfAttention(4, 4, heads=2, kernel="reference", mode=mode).double()
    assert (
        layer.resolve_mode(prepare_edges(ring, 6), graph_sizes(6, None), x.device, x.dtype, False)
        == "dense"
    )
    sparse = GraphSelfAttention(4, 4, heads=2, kernel="reference", mode="sparse").double()
    sparse.load_state_dict(layer.state_dict())
    assert torch.autograd.gradgradcheck(lambda a: layer(a, ring), (x,))
    (grad,) = torch.autograd.grad(layer(x, ring).square().sum(), x, create_graph=True)
    (want,) = torch.autograd.grad(sparse(x, ring).square().sum(), x, create_graph=True)
    torch.testing.assert_close(
        torch.autograd.grad(grad.square().sum(), x)[0],
        torch.autograd.grad(want.square().sum(), x)[0],
    )


def test_the_dense_budget_counts_the_explicit_path_that_the_reference_kernel_runs():
    layout = dense_layout(400, None, torch.device("cpu"))
    fused, explicit = (
        GraphSelfAttention(64, 64, heads=4, kernel=kernel, mode="dense").dense_bytes(layout)
        for kernel in ("auto", "reference")
    )
    assert explicit == dense_memory_bytes(1, 400, 4, 16, explicit=True, backward=True)
    assert explicit > 1.9 * fused  # the scores' gradients, which the fused path never stores


@pytest.mark.parametrize(
    "options",
    [
        dict(kernel="reference"),
        dict(kernel="auto"),
        dict(kernel="gather"),
        dict(kernel="fused"),
        dict(mode="dense"),
        dict(attend="khop", hops=2, hop_bias=True),
    ],
    ids=["reference", "auto", "gather", "fused", "dense", "hop-bias"],
)
def test_edge_features_run_under_autocast(options):
    # lin_edge's float32 bias made the edge terms float32 beside bfloat16 queries: the
    # reference kernel refused them, and the gather and fused kernels failed
    torch.manual_seed(0)
    x, edge_attr = torch.randn(6, 8), torch.randn(6, 3)
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]])
    layer = GraphSelfAttention(8, 8, heads=2, edge_dim=3, **options)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = layer(x, edge_index, edge_attr)
    out.float().square().sum().backward()
    assert out.dtype == torch.bfloat16
    assert all(p.grad is not None and bool(p.grad.isfinite().all()) for p in layer.parameters())
    with torch.no_grad():
        want = layer(x, edge_index, edge_attr)
    torch.testing.assert_close(out.float(), want, atol=0.05, rtol=0.05)


def test_attention_matrix_names_an_edge_between_graphs_that_sparse_mode_ran():
    x, batch = torch.randn(4, 8), torch.tensor([0, 0, 1, 1])
    edge_index = torch.tensor([[0, 1], [1, 2]])
    layer = GraphSelfAttention(8, 8, heads=2)
    layer(x, edge_index, batch=batch, mode="sparse")  # sparse mode runs it
    with pytest.raises(
        GraphInputError,
        match=r"one block per graph, and the edge source 1 -> target 2 connects graphs 0 and 1",
    ):
        layer.attention_matrix(x, edge_index, batch=batch, mode="sparse")


@pytest.mark.parametrize("hops", [1, 2])
def test_global_attention_refuses_an_input_edge_between_graphs(hops):
    # "global" never attends across graphs; with hops=1 an input edge between two
    # graphs was kept without a word, with hops=2 it was refused.
    x, batch = torch.randn(4, 8), torch.tensor([0, 0, 1, 1])
    layer = GraphSelfAttention(8, 8, heads=2, attend="global", hops=hops)
    with pytest.raises(
        GraphInputError, match=r"column 1, source 1 \(graph 0\) -> target 2 \(graph 1\)"
    ):
        layer(x, torch.tensor([[0, 1], [1, 2]]), batch=batch)
    out, (used, _) = layer(x, torch.tensor([[0, 2], [1, 3]]), batch=batch, return_attention=True)
    assert out.shape == (4, 8)
    assert bool((batch[used[0]] == batch[used[1]]).all())


def test_the_reference_kernel_checks_its_inputs_as_the_other_kernels_do():
    edges = prepare_edges(torch.tensor([[0, 1, 2], [1, 2, 3]]), 4)
    with pytest.raises(ValueError, match="q has 5 nodes but the edge set has 4"):
        reference_edge_attention(*(torch.randn(5, 2, 3),) * 3, edges)  # node 4 was dropped
    with pytest.raises(ValueError, match=r"must all have shape \[N, H, D\]"):
        reference_edge_attention(*(torch.randn(4, 6),) * 3, edges)
    with pytest.raises(ValueError, match="k is torch.float64"):
        q = torch.randn(4, 2, 3)
        reference_edge_attention(q, q.double(), q, edges)


@pytest.mark.parametrize(
    "options",
    [dict(kernel="reference"), dict(kernel="gather"), dict(kernel="fused"), dict(mode="dense")],
    ids=["reference", "gather", "fused", "dense"],
)
def test_float16_scores_that_fit_do_not_overflow(options):
    # |q . k| reaches ~1e5 (> float16's 65,504) while the scaled scores stay below 5e4:
    # every kernel must scale before the product, as the fused kernel (float32) does.
    torch.manual_seed(0)
    x = torch.randn(5, 8) * 120
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 0], [1, 2, 3, 4, 0, 2]])
    layer = GraphSelfAttention(8, 8, heads=1, bias=False, **options)
    with torch.no_grad():
        for lin in (layer.lin_query, layer.lin_key, layer.lin_value, layer.lin_out):
            lin.weight.copy_(torch.eye(8))
        q = x
        scores = (q[edge_index[1]] * q[edge_index[0]]).sum(-1)
    assert scores.abs().max() > 65504 > scores.abs().max() / 8**0.5
    with torch.no_grad():
        out, (_, alpha) = layer.half()(x.half(), edge_index, return_attention=True)
        want = layer.float()(x, edge_index)
    assert torch.isfinite(out).all() and torch.isfinite(alpha).all()
    torch.testing.assert_close(out.float(), want, atol=0.01 * float(want.abs().max()), rtol=0)


@pytest.mark.parametrize("kernel", ["auto", "gather", "fused", "reference"])
def test_a_graph_without_pairs_still_backpropagates_to_every_projection(kernel):
    x = torch.randn(4, 8, requires_grad=True)
    layer = GraphSelfAttention(8, 8, heads=2, add_self_loops=False, kernel=kernel)
    out = layer(x, torch.empty(2, 0, dtype=torch.long))
    torch.testing.assert_close(out, layer.lin_out.bias.expand(4, 8))
    out.sum().backward()
    assert torch.equal(x.grad, torch.zeros_like(x))
    for lin in (layer.lin_query, layer.lin_key, layer.lin_value):
        assert lin.weight.grad is not None and not lin.weight.grad.any()


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: GraphSelfAttention(8, 0, heads=1), r"out_channels must be an integer >= 1, got 0"),
        (lambda: GraphSelfAttention(8, 8, heads=0), r"heads must be an integer >= 1, got 0"),
        (lambda: GraphSelfAttention(8.5, 8), r"in_channels must be an integer >= 1, got 8.5"),
        (lambda: GraphSelfAttention(8, 8, edge_dim=-1), r"edge_dim must be an integer >= 1"),
        (lambda: GraphSelfAttention(8, 8, dropout="0.1"), r"dropout must be .*, got '0.1'"),
        (
            lambda: GraphSelfAttention(8, 8, max_dense_bytes="1GB"),
            r"max_dense_bytes must be a number >= 0, got '1GB'",
        ),
        (
            lambda: GraphSelfAttention(8, 8, max_dense_bytes=-1),
            r"max_dense_bytes must be a number >= 0, got -1",
        ),
        (lambda: GraphSelfAttention(8, 8, hops=True), r"hops must be an integer >= 1, got True"),
        # the layer's own argument, not its attention's out_channels
        (lambda: GraphTransformerLayer(8, 3), r"^channels \(8\) must be a multiple of heads \(3\)"),
        (lambda: GraphTransformerLayer(8, 0), r"heads must be an integer >= 1, got 0"),
    ],
)
def test_constructor_arguments_out_of_range_are_named(build, message):
    with pytest.raises(GraphInputError, match=message):
        build()


def test_edge_dim_0_means_no_edge_features_as_before():
    assert GraphSelfAttention(8, 8, edge_dim=0).lin_edge is None


def test_numpy_integers_are_accepted_for_counts():
    layer = GraphSelfAttention(np.int64(8), np.int64(8), heads=np.int64(2), hops=np.int64(2))
    assert (layer.out_channels, layer.heads, layer.hops) == (8, 2, 2)
    assert type(layer.hops) is int


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        (torch.tensor([0.0, 0.0, 1.0, 1.0]), r"batch must be an int64 \(or int32\) tensor"),
        (torch.tensor([True, True, False, False]), r"batch must be an int64 \(or int32\) tensor"),
        # torch cannot index with int16 (an IndexError) and reads uint8 as a mask
        (torch.tensor([0, 0, 1, 1], dtype=torch.int16), r"got torch.int16"),
        (torch.tensor([0, 0, 1, 1], dtype=torch.uint8), r"got torch.uint8"),
        (torch.tensor([-1, -1, 0, 0]), "batch must hold graph ids >= 0"),
    ],
)
@pytest.mark.parametrize("mode", ["dense", "auto"])
def test_a_bad_batch_vector_is_named_in_dense_and_auto_mode(mode, batch, message):
    x, edge_index = torch.randn(4, 8), torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]])
    with pytest.raises(GraphInputError, match=message):
        make_layer(mode=mode)(x, edge_index, batch=batch)


@pytest.mark.parametrize(
    "batch",
    [torch.tensor([0.0, 0.0, 1.0, 1.0]), torch.tensor([0, 0, 1, 1], dtype=torch.int16)],
)
def test_a_batch_vector_of_a_wrong_type_or_length_is_refused_in_sparse_mode_too(batch):
    # sparse mode does not read batch, and took any; auto and dense mode refused it
    x, edge_index = torch.randn(4, 8), torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]])
    layer = make_layer(mode="sparse")
    with pytest.raises(GraphInputError, match=r"batch must be an int64 \(or int32\) tensor"):
        layer(x, edge_index, batch=batch)
    with pytest.raises(GraphInputError, match=r"batch must have shape \[N=4\], got \[3\]"):
        layer(x, edge_index, batch=torch.tensor([0, 0, 1]))
    assert layer(x, edge_index, batch=torch.tensor([0, 0, 1, 1])).shape[0] == 4


def test_auto_mode_attends_over_edges_between_graphs_as_sparse_mode_does():
    x, batch = torch.randn(4, 8), torch.tensor([0, 0, 1, 1])
    edge_index = torch.tensor([[0, 1, 2, 3, 1], [1, 0, 3, 2, 2]])  # 1 -> 2 crosses graphs
    layer = make_layer(mode="auto")
    assert (
        layer.resolve_mode(
            layer.allowed_edges(edge_index, 4, batch), graph_sizes(4, batch), x.device
        )
        == "dense"
    )  # a small dense batch: auto would pick dense mode
    torch.testing.assert_close(
        layer(x, edge_index, batch=batch), layer(x, edge_index, mode="sparse")
    )
    with pytest.raises(GraphInputError, match="dense mode needs every edge inside one graph"):
        layer(x, edge_index, batch=batch, mode="dense")


def test_edge_features_must_be_two_dimensional_and_finite():
    x, edge_index = torch.randn(3, 8), torch.tensor([[0, 1], [1, 2]])
    layer = make_layer(edge_dim=3)
    with pytest.raises(
        GraphInputError, match=r"edge_attr must have shape \[E, 3\], got \[2, 2, 3\]"
    ):
        layer(x, edge_index, torch.randn(2, 2, 3))
    bad = torch.randn(2, 3)
    bad[1, 2] = float("nan")
    with pytest.raises(
        GraphInputError, match=r"edge_attr has non-finite values: edge_attr\[1, 2\]"
    ):
        layer(x, edge_index, bad)
    from graphattn.nn import LinearEdgeEncoding

    lazy = LinearEdgeEncoding(bad, torch.nn.Linear(3, 3))
    with pytest.raises(GraphInputError, match=r"edge_attr\[1, 2\] = nan"):
        layer(x, edge_index, lazy)


def test_attention_matrix_has_a_block_for_empty_graphs_at_the_end_of_a_batch():
    from torch_geometric.data import Batch, Data

    graphs = [Data(x=torch.randn(3, 8), edge_index=torch.tensor([[0, 1], [1, 2]]))]
    graphs.append(Data(x=torch.zeros(0, 8), edge_index=torch.zeros(2, 0, dtype=torch.long)))
    batch = Batch.from_data_list(graphs)
    layer = make_layer()
    weights = layer.attention_matrix(
        batch.x, batch.edge_index, batch=batch.batch, num_graphs=batch.num_graphs
    )
    assert weights.shape == (2, 4, 3, 3) and not weights[1].any()
    torch.testing.assert_close(
        weights[0], layer.attention_matrix(graphs[0].x, graphs[0].edge_index)[0]
    )
    with pytest.raises(GraphInputError, match="num_graphs=0, but batch holds graph id 0"):
        layer.attention_matrix(batch.x, batch.edge_index, batch=batch.batch, num_graphs=0)


def test_dense_memory_budget_counts_what_a_call_allocates():
    # returned weights and a backward pass each need more than a forward-only call on the
    # fused path: a budget that fits that call refuses the others, and the old budget
    # (before gradients were counted) let a training step through at up to twice it
    x, edge_index = torch.randn(10, 8), torch.tensor([[0, 1], [1, 2]])
    sizes = graph_sizes(10, None)
    layer = make_layer(mode="dense")
    with torch.no_grad():
        forward_only = layer.dense_bytes(sizes)
        weights_no_grad = layer.dense_bytes(sizes, need_weights=True)
    assert layer.dense_bytes(sizes) == forward_only  # fused path: no explicit gradients
    assert layer.dense_bytes(sizes, need_weights=True) > weights_no_grad > 0
    layer.max_dense_bytes = weights_no_grad
    with torch.no_grad():
        layer(x, edge_index, return_attention=True)  # fits
    with pytest.raises(DenseMemoryError):
        layer(x, edge_index, return_attention=True)  # with gradients it does not
    edges = make_layer(mode="dense", edge_dim=3)
    with torch.no_grad():
        inference = edges.dense_bytes(sizes)
    assert edges.dense_bytes(sizes) > inference  # edge features: the explicit path


def test_is_real_takes_python_and_numpy_numbers_but_not_bools_or_text():
    from graphattn.errors import is_real

    assert all(is_real(v) for v in (0, 0.5, np.float32(0.1), np.int64(2), float("nan")))
    assert not any(is_real(v) for v in (True, np.bool_(False), "0.1", None, [0.1]))


def test_check_count_takes_integers_of_at_least_its_bound():
    from graphattn.errors import check_count

    assert check_count("k", np.int64(3)) == 3 and type(check_count("k", np.int64(3))) is int
    assert check_count("k", 0, least=0) == 0
    for bad in (0, -1, 2.0, True, "3", None):
        with pytest.raises(GraphInputError, match=f"k must be an integer >= 1, got {bad!r}"):
            check_count("k", bad)


def test_dense_memory_bytes_counts_the_documented_tensors():
    from graphattn.ops.dense import dense_memory_bytes

    # B = 2 graphs of L = 3, H = 4 heads of D = 5, float32: the mask, [B, H, L, L] scores
    # and [B, H, L, L, D] per-pair vectors
    mask, scores, vectors = 2 * 3 * 3, 2 * 4 * 3 * 3 * 4, 2 * 4 * 3 * 3 * 5 * 4

    def count(**options):
        return dense_memory_bytes(2, 3, 4, 5, **options)

    for forward_only in ({}, {"explicit": True}, {"backward": True}):
        assert count(**forward_only) == mask + 3 * scores
        assert count(edge_features=True, **forward_only) == mask + 3 * scores + 2 * vectors
        assert count(additive=True, **forward_only) == mask + 3 * scores + 2 * vectors
    step = {"explicit": True, "backward": True}  # gradients of the explicit path too
    assert count(**step) == mask + 6 * scores
    assert count(edge_features=True, **step) == mask + 6 * scores + 4 * vectors
    assert count(additive=True, **step) == mask + 6 * scores + 3 * vectors
    assert count(edge_features=True, additive=True, **step) == mask + 6 * scores + 7 * vectors
    assert count(element_size=2) == mask + 3 * scores // 2


def test_a_dense_layout_checks_each_edge_set_for_edges_between_graphs():
    from graphattn.ops.dense import dense_layout

    layout = dense_layout(4, torch.tensor([0, 0, 1, 1]), torch.device("cpu"))
    inside = prepare_edges(torch.tensor([[0, 2], [1, 3]]), 4, cache=False)
    across = prepare_edges(torch.tensor([[0, 1], [1, 2]]), 4, cache=False)
    assert layout.crossing_edge(inside) is None
    assert layout.crossing_edge(across) == 3  # 1 -> 2, after 0 -> 0, 0 -> 1 and 1 -> 1
    with pytest.raises(GraphInputError, match="source 1 -> target 2 connects graphs 0 and 1"):
        layout.edge_mask(across)
    assert layout.crossing_edge(inside) is None
    assert int(layout.edge_mask(inside).sum()) == 6  # 2 edges and 4 self-loops


def test_dot_scores_take_any_scale():
    from graphattn.ops.attention import edge_scores

    q, k, v = torch.randn(4, 2, 3), torch.randn(4, 2, 3), torch.randn(4, 2, 3)
    for scale in (0.5, 1.0, 2.0, 3.0):
        torch.testing.assert_close(edge_scores(q, k, scale), (q * k).sum(-1) * scale)
    edges = prepare_edges(torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]), 4, cache=False)
    for scale in (0.5, 2.0):  # scale s on q . k is scale 1 on s q
        got = reference_edge_attention(q, k, v, edges, scale=scale)
        want = reference_edge_attention(scale * q, k, v, edges, scale=1.0)
        for a, b in zip(got, want, strict=True):
            torch.testing.assert_close(a, b)


def test_a_forced_kernel_is_refused_with_attention_dropout_in_training_only():
    x, edge_index = torch.randn(4, 8), torch.tensor([[0, 1, 2], [1, 2, 3]])
    kernels = ["fused", "gather"] + (["numba"] if numba_available() else [])
    for kernel in kernels:
        layer = make_layer(kernel=kernel, dropout=0.1)
        with pytest.raises(
            GraphInputError, match=rf"kernel='{kernel}' supports .*no attention dropout in training"
        ):
            layer(x, edge_index)  # the kernel would have left the weights undropped
        assert layer.eval()(x, edge_index).shape == (4, 16)


def test_torch_compile_traces_a_default_layer_with_dropout():
    # auto chose the Numba kernel and dropout drew its mask with Numba: dynamo failed
    # inside Numba's dispatcher ("exception table entry ... has no offset")
    from graphattn.nn import GraphTransformerLayer

    torch.manual_seed(0)
    x = torch.randn(10, 8)
    edge_index = torch.tensor([list(range(10)), [(i + 1) % 10 for i in range(10)]])
    layer = GraphTransformerLayer(8, heads=2, dropout=0.1)
    compiled = torch.compile(layer, backend="aot_eager")  # no C compiler needed
    compiled(x, edge_index).sum().backward()
    assert all(p.grad is not None for p in layer.parameters())
    layer.eval()
    torch.testing.assert_close(compiled(x, edge_index), layer(x, edge_index))


def test_auto_mode_runs_an_unsorted_batch_as_sparse_mode_does():
    # auto picked dense for these small graphs, whose layout refuses an unsorted batch
    from graphattn.nn import GraphSelfAttention

    torch.manual_seed(0)
    x = torch.randn(6, 4)
    batch = torch.tensor([0, 1, 0, 1, 0, 1])  # two triangles, nodes interleaved
    edge_index = torch.tensor([[0, 2, 4, 1, 3, 5], [2, 4, 0, 3, 5, 1]])
    layer = GraphSelfAttention(4, 4, heads=2, mode="auto")
    expected = layer(x, edge_index, batch=batch, mode="sparse")
    torch.testing.assert_close(layer(x, edge_index, batch=batch), expected)
    with pytest.raises(GraphInputError, match="batch must be sorted"):
        layer(x, edge_index, batch=batch, mode="dense")


def test_sparse_mode_checks_the_batch_but_leaves_its_ids_to_the_modes_that_read_them():
    # checking the ids costs a host synchronisation, and sparse mode never reads them
    x, edge_index = torch.randn(4, 8), torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2]])
    negative = torch.tensor([-1, -1, 0, 0])
    layer = GraphSelfAttention(8, 16, heads=4, mode="sparse")
    torch.testing.assert_close(layer(x, edge_index, batch=negative), layer(x, edge_index))
    with pytest.raises(GraphInputError, match="batch must have shape"):
        layer(x, edge_index, batch=negative[:3])
    with pytest.raises(GraphInputError, match="batch must hold graph ids >= 0"):
        layer(x, edge_index, batch=negative, mode="dense")


def test_a_given_scale_comes_back_as_a_python_float():
    # the fused kernel passes it to torch.sparse.sampled_addmm, which takes a Number only
    # (a tensor scale failed there with "alpha must be Number")
    from graphattn.ops.attention import default_scale

    for scale in (2, np.float32(0.5), torch.tensor(0.5)):
        assert type(default_scale(4, scale)) is float, type(scale)
