"""The gather and Numba kernels (closed-form backward) against the autograd reference."""

from __future__ import annotations

import pytest
import torch

import graphattn.nn.attention as attention_module
from graphattn.nn import GraphSelfAttention
from graphattn.ops.attention import reference_edge_attention
from graphattn.ops.compiled import numba_available
from graphattn.ops.gather import gather_edge_attention
from graphattn.ops.graph import prepare_edges
from graphattn.ops.numba_attention import numba_edge_attention
from tests.test_fused import GRAPHS, random_graph, random_inputs

KERNELS = {"gather": gather_edge_attention, "numba": numba_edge_attention}


@pytest.fixture(params=list(KERNELS))
def attend(request):
    """Each kernel function with the same signature: gather, and Numba where installed."""
    if request.param == "numba" and not numba_available():
        pytest.skip("Numba is not installed")
    return KERNELS[request.param]


def check_against_reference(attend, edges, inputs, weights_loss: bool) -> None:
    """Outputs, weights and every gradient (through out, and the weights if asked)."""
    q, k, v, ek, ev = inputs
    out, alpha = attend(q, k, v, edges, 0.7, ek, ev)
    ref_out, ref_alpha = reference_edge_attention(q, k, v, edges, 0.7, ek, ev)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(alpha, ref_alpha, atol=1e-5, rtol=1e-5)

    grad_out, grad_alpha = torch.randn_like(out), torch.randn_like(alpha)
    loss = (out * grad_out).sum() + (alpha * grad_alpha).sum() * weights_loss
    ref_loss = (ref_out * grad_out).sum() + (ref_alpha * grad_alpha).sum() * weights_loss
    leaves = [t for t in inputs if t is not None]
    grads = torch.autograd.grad(loss, leaves)
    ref_grads = torch.autograd.grad(ref_loss, leaves)
    names = ["q", "k", "v", "edge_key", "edge_value"]
    for name, g, r in zip(names, grads, ref_grads, strict=False):
        torch.testing.assert_close(g, r, atol=1e-4, rtol=1e-4, msg=f"d{name}")


@pytest.mark.parametrize("weights_loss", [False, True], ids=["out", "out_and_weights"])
@pytest.mark.parametrize("edge_features", [False, True], ids=["plain", "edge_features"])
@pytest.mark.parametrize("graph", list(GRAPHS))
def test_matches_reference(attend, graph: str, edge_features: bool, weights_loss: bool) -> None:
    torch.manual_seed(0)
    edges = random_graph(**GRAPHS[graph])
    inputs = random_inputs(edges, 3, 8, edge_features)
    check_against_reference(attend, edges, inputs, weights_loss)


def test_gradcheck_float64(attend) -> None:
    torch.manual_seed(0)
    edges = random_graph(8, 16, duplicates=4)
    assert bool((edges.in_degree() == 0).any())
    inputs = random_inputs(edges, 2, 2, True, dtype=torch.float64)

    def both_outputs(q, k, v, ek, ev):
        return attend(q, k, v, edges, None, ek, ev)

    assert torch.autograd.gradcheck(both_outputs, inputs)


def test_backward_leaves_saved_tensors_intact(attend) -> None:
    """The kernel reuses its own buffers in forward and backward, never the tensors it
    saves: a second backward through the same graph gives the same gradients, and only
    the gradients asked for (here the edge terms alone, then q alone) are right too."""
    torch.manual_seed(0)
    edges = random_graph(30, 90, duplicates=5)
    inputs = random_inputs(edges, 2, 4, True)
    out, alpha = attend(inputs[0], *inputs[1:3], edges, None, *inputs[3:])
    loss = (out * torch.randn_like(out)).sum() + (alpha * torch.randn_like(alpha)).sum()
    first = torch.autograd.grad(loss, inputs, retain_graph=True)
    second = torch.autograd.grad(loss, inputs, retain_graph=True)
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b)
    for subset in ([3, 4], [0]):
        partial = torch.autograd.grad(loss, [inputs[i] for i in subset], retain_graph=True)
        for i, g in zip(subset, partial, strict=True):
            assert torch.equal(g, first[i])


def test_weights_sum_to_one_and_isolated_nodes_get_zero(attend) -> None:
    torch.manual_seed(0)
    edges = random_graph(50, 60)
    q, k, v, _, _ = random_inputs(edges, 2, 4, False)
    out, alpha = attend(q, k, v, edges)
    sums = torch.zeros(50, 2).index_add_(0, edges.dst, alpha.detach())
    has_edges = edges.in_degree() > 0
    assert bool((~has_edges).any())
    torch.testing.assert_close(sums[has_edges], torch.ones_like(sums[has_edges]))
    assert bool((out[~has_edges] == 0).all())
    out.sum().backward()
    assert all(bool(torch.isfinite(t.grad).all()) for t in (q, k, v))


def test_only_needed_gradients_and_no_edges(attend) -> None:
    torch.manual_seed(0)
    edges = random_graph(20, 40)
    q, k, v, ek, ev = random_inputs(edges, 2, 4, True)
    frozen = [t.detach() for t in (k, v, ek, ev)]
    out, _ = attend(q, *frozen[:2], edges, None, *frozen[2:])
    (dq,) = torch.autograd.grad(out.sum(), q)
    ref, _ = reference_edge_attention(q, *frozen[:2], edges, None, *frozen[2:])
    torch.testing.assert_close(dq, torch.autograd.grad(ref.sum(), q)[0], atol=1e-5, rtol=1e-5)

    empty = prepare_edges(torch.zeros(2, 0, dtype=torch.long), 5, add_self_loops=False)
    x = torch.randn(5, 2, 4, requires_grad=True)
    out, alpha = attend(x, x, x, empty)
    assert bool((out == 0).all()) and alpha.shape == (0, 2)
    (dx,) = torch.autograd.grad(out.sum(), x)  # the zeros are still tied to the inputs
    assert bool((dx == 0).all())
    with pytest.raises(ValueError, match="edge_key"):
        attend(x, x, x, empty, edge_key=torch.randn(3, 2, 4))


def test_layer_kernels_agree_and_auto_picks_gather_for_molecule_sized_batches(
    monkeypatch,
) -> None:
    """Where the Numba kernel cannot run (here: as if Numba were missing)."""
    monkeypatch.setattr(attention_module, "numba_usable", lambda device, dtype: False)
    torch.manual_seed(0)
    edge_index = random_graph(30, 90).edge_index
    x = torch.randn(30, 16)
    edge_attr = torch.randn(edge_index.size(1), 5)
    outputs = {}
    for kernel in ("gather", "reference", "auto"):
        torch.manual_seed(1)
        layer = GraphSelfAttention(16, 16, heads=4, edge_dim=5, kernel=kernel)
        edges = layer.allowed_edges(edge_index, 30, None)
        outputs[kernel] = layer(x, edge_index, edge_attr, return_attention=True)
        assert layer.sparse_kernel(edges, True, x.device) == (
            "gather" if kernel == "auto" else kernel
        )
    for kernel in ("gather", "auto"):
        torch.testing.assert_close(outputs[kernel][0], outputs["reference"][0])
        torch.testing.assert_close(outputs[kernel][1][1], outputs["reference"][1][1])


def test_layer_refuses_gather_where_it_does_not_apply(monkeypatch) -> None:
    monkeypatch.setattr(attention_module, "numba_usable", lambda device, dtype: False)
    with pytest.raises(ValueError, match="kernel='gather'"):
        GraphSelfAttention(8, 8, heads=2, kernel="gather", score="additive")
    training = GraphSelfAttention(8, 8, heads=2, kernel="gather", dropout=0.5)
    with pytest.raises(ValueError, match="no attention dropout in training"):
        training(torch.randn(4, 8), torch.tensor([[0, 1], [1, 2]]))
    dropout = GraphSelfAttention(8, 8, heads=2, kernel="auto", dropout=0.5)
    edges = dropout.allowed_edges(torch.tensor([[0, 1], [1, 2]]), 4, None)
    assert dropout.sparse_kernel(edges, False, torch.device("cpu")) == "reference"
    dropout.eval()
    assert dropout.sparse_kernel(edges, False, torch.device("cpu")) == "gather"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_half_precision_on_cpu_matches_reference(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    edges = random_graph(30, 90)
    inputs = [t.detach().to(dtype).requires_grad_() for t in random_inputs(edges, 2, 8, True)]
    out, _ = gather_edge_attention(*inputs[:3], edges, None, *inputs[3:])
    ref, _ = reference_edge_attention(
        *(t.float() for t in inputs[:3]), edges, None, *(t.float() for t in inputs[3:])
    )
    assert out.dtype == dtype
    torch.testing.assert_close(out.float(), ref, atol=3e-2, rtol=3e-2)
    out.float().sum().backward()
    assert all(t.grad.dtype == dtype and bool(torch.isfinite(t.grad).all()) for t in inputs)
