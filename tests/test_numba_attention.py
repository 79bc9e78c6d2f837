"""The Numba kernel (compiled CSR loops): what tests/test_gather.py does not cover for it
(one tensor as both edge terms, threads, forked children, the layer's choice, fallbacks)."""

from __future__ import annotations

import multiprocessing
import sys

import pytest
import torch

import graphattn.nn.attention as attention_module
from graphattn.errors import GraphInputError
from graphattn.nn import GraphSelfAttention
from graphattn.ops.attention import reference_edge_attention
from graphattn.ops.compiled import numba_available
from graphattn.ops.numba_attention import numba_edge_attention, usable
from tests.test_fused import GRAPHS, random_graph, random_inputs

pytestmark = pytest.mark.skipif(not numba_available(), reason="Numba is not installed")


def gradients(out, alpha, leaves, weights_loss: bool, seed: int = 1):
    torch.manual_seed(seed)
    loss = (out * torch.randn_like(out)).sum()
    loss = loss + (alpha * torch.randn_like(alpha)).sum() * weights_loss
    return torch.autograd.grad(loss, leaves)


@pytest.mark.parametrize("weights_loss", [False, True], ids=["out", "out_and_weights"])
@pytest.mark.parametrize("graph", list(GRAPHS))
def test_one_tensor_as_both_edge_terms_matches_reference(graph: str, weights_loss: bool) -> None:
    """The layers pass one tensor as edge key and edge value; the kernel then returns its
    whole gradient in one slot. Values to 1e-5, gradients to 1e-4 (fp32)."""
    torch.manual_seed(0)
    edges = random_graph(**GRAPHS[graph])
    q, k, v, ek, _ = random_inputs(edges, 3, 8, True)
    out, alpha = numba_edge_attention(q, k, v, edges, 0.7, ek, ek)
    ref_out, ref_alpha = reference_edge_attention(q, k, v, edges, 0.7, ek, ek)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(alpha, ref_alpha, atol=1e-5, rtol=1e-5)
    grads = gradients(out, alpha, [q, k, v, ek], weights_loss)
    ref_grads = gradients(ref_out, ref_alpha, [q, k, v, ek], weights_loss)
    for name, g, r in zip(["q", "k", "v", "edge terms"], grads, ref_grads, strict=True):
        torch.testing.assert_close(g, r, atol=1e-4, rtol=1e-4, msg=f"d{name}")


def test_gradcheck_float64_with_one_tensor_as_both_edge_terms() -> None:
    torch.manual_seed(0)
    edges = random_graph(8, 16, duplicates=4)
    q, k, v, ek, _ = random_inputs(edges, 2, 2, True, dtype=torch.float64)

    def shared_terms(q, k, v, ek):
        return numba_edge_attention(q, k, v, edges, None, ek, ek)

    assert torch.autograd.gradcheck(shared_terms, (q, k, v, ek))


def test_values_only_gradient_and_bad_dtypes() -> None:
    torch.manual_seed(0)
    edges = random_graph(20, 40)
    q, k, v, _, _ = random_inputs(edges, 2, 4, False)
    (dv,) = torch.autograd.grad(numba_edge_attention(q, k, v, edges)[0].sum(), v)
    (ref_dv,) = torch.autograd.grad(reference_edge_attention(q, k, v, edges)[0].sum(), v)
    torch.testing.assert_close(dv, ref_dv, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="float32 or float64"):
        numba_edge_attention(*(t.bfloat16() for t in (q, k, v)), edges)
    assert usable("cpu", torch.float64) and not usable("cpu", torch.float16)
    assert not usable("cuda", torch.float32)


def test_one_thread_and_many_agree() -> None:
    """The single-threaded loops (one torch thread, or a forked child) and the parallel
    ones compute the same numbers: every loop owns the rows it writes."""
    torch.manual_seed(0)
    edges = random_graph(**GRAPHS["skewed"])
    inputs = random_inputs(edges, 2, 8, True)
    threads = torch.get_num_threads()
    results = []
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            out, alpha = numba_edge_attention(inputs[0], *inputs[1:3], edges, None, *inputs[3:])
            results.append((out, alpha, *gradients(out, alpha, inputs, True)))
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def _attend(queue=None) -> float:
    torch.manual_seed(0)
    edges = random_graph(40, 200)
    q = torch.randn(40, 2, 4)
    result = float(numba_edge_attention(q, q, q, edges)[0].sum())
    if queue is not None:
        queue.put(result)
    return result


@pytest.mark.skipif(sys.platform != "linux", reason="fork start method")
def test_runs_in_a_child_forked_after_the_parallel_loops_ran() -> None:
    """GNU OpenMP is not fork-safe: Numba ends a forked child that starts its threads
    again with SIGTERM. The kernel gives such a child the single-threaded loops."""
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        expected = _attend()  # the parallel loops run here
        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        child = context.Process(target=_attend, args=(queue,))
        child.start()
        child.join(timeout=120)
        assert child.exitcode == 0
        assert queue.get(timeout=5) == pytest.approx(expected)
    finally:
        torch.set_num_threads(threads)


def test_layer_auto_runs_it_at_molecule_size_and_falls_back_without_numba(monkeypatch) -> None:
    torch.manual_seed(0)
    edge_index = random_graph(30, 90).edge_index
    x = torch.randn(30, 16)
    edge_attr = torch.randn(edge_index.size(1), 5)
    outputs = {}
    for kernel in ("numba", "reference", "auto"):
        torch.manual_seed(1)
        layer = GraphSelfAttention(16, 16, heads=4, edge_dim=5, kernel=kernel)
        edges = layer.allowed_edges(edge_index, 30, None)
        assert layer.sparse_kernel(edges, True, x.device) == (
            "numba" if kernel == "auto" else kernel
        )
        outputs[kernel] = layer(x, edge_index, edge_attr, return_attention=True)
    for kernel in ("numba", "auto"):
        torch.testing.assert_close(outputs[kernel][0], outputs["reference"][0])
        torch.testing.assert_close(outputs[kernel][1][1], outputs["reference"][1][1])

    half = GraphSelfAttention(16, 16, heads=4, kernel="auto").bfloat16()
    assert half.sparse_kernel(edges, False, x.device, torch.bfloat16) == "gather"
    with pytest.raises(
        GraphInputError, match=r"kernel='numba' needs float32 or float64 .* got torch.bfloat16"
    ):
        GraphSelfAttention(16, 16, heads=4, kernel="numba").bfloat16()(x.bfloat16(), edge_index)
    monkeypatch.setattr(attention_module, "numba_usable", lambda device, dtype: False)
    missing = "Numba is not installed (pip install numba): No module named 'numba'"
    monkeypatch.setattr(attention_module, "numba_problem", lambda: missing)
    layer = GraphSelfAttention(16, 16, heads=4, kernel="auto")
    assert layer.sparse_kernel(edges, False, x.device) == "gather"
    with pytest.raises(GraphInputError, match=r"on cpu \(Numba is not installed \(pip install"):
        GraphSelfAttention(16, 16, heads=4, kernel="numba")(x, edge_index)
