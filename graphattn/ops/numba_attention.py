r"""Edge attention as compiled loops over the CSR structure (CPU, Numba).

For every target node i, head h and incoming edge e = (j -> i):

.. math::
    s_e = \text{scale} \cdot q_i \cdot (k_j + ek_e), \quad
    \alpha_e = \operatorname{softmax}_{e \to i}(s_e), \quad
    o_i = \sum_{e \to i} \alpha_e (v_j + ev_e)

the function the gather and reference kernels compute, written as three loops that
Numba compiles to machine code at first use (no build step at install time; the
compiled code is cached on disk):

- forward, per target node (in parallel): scores of its incoming edges, their
  softmax, the weighted sum of values. Keeps ``alpha [E, H]``, never an
  ``[E, H, D]`` tensor.
- backward, pass 1, per target node: :math:`\delta_i = dO_i \cdot o_i`,
  :math:`ds_e = \text{scale}\,\alpha_e (dO_i \cdot (v_j + ev_e) + d\alpha_e - \delta_i
  - \sum_{e' \to i} \alpha_{e'} d\alpha_{e'})`, ``dq``, and the edge terms' gradients
  (``[E, H, D]`` outputs, only when asked for).
- backward, pass 2, per source node over the edges sorted by source (the transposed
  CSR, cached in ``edges.cache``): ``dk_j`` and ``dv_j`` sum ``ds_e q_i`` and
  ``alpha_e dO_i``. Every loop owns the rows it writes, so no atomics and
  deterministic results.

Why it exists: with torch operations each step of the computation is a separate pass
over an ``[E, H, D]`` tensor (gather, product, reduction, scatter), and at molecule
size these passes, not the arithmetic, are the cost (the gather kernel: 1.3 ms forward +
backward per layer on an ESOL batch of 128 with bond features, against 0.54 ms here; 2
threads). A loop per node keeps each node's few rows in cache from start to end. torch
itself offers nothing equivalent on CPU: ``torch.compile`` needs a C++ compiler at run
time and recompiled for every new batch shape (see ``benchmarks/attention.md``).

Numba is imported on first use; without it (or for dtypes other than float32 and
float64, or tensors off the CPU) :func:`usable` says so and ``kernel="auto"`` runs the
gather or fused kernel instead (:func:`graphattn.ops.cost.choose_kernel`).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from graphattn.ops.attention import (
    check_edge_attention_inputs,
    default_scale,
    reference_edge_attention,
    refuse_double_backward,
)
from graphattn.ops.compiled import DTYPES, jit, numba_available, numba_problem, per_process
from graphattn.ops.graph import EdgeSet

__all__ = ["numba_edge_attention", "usable"]

_BY_SOURCE = "numba.by_source"


def usable(device: torch.device | str, dtype: torch.dtype) -> bool:
    """Whether the kernel can run on tensors of ``dtype`` on ``device``: Numba imports,
    the device is the CPU, the dtype float32 or float64."""
    return torch.device(device).type == "cpu" and dtype in DTYPES and numba_available()


@per_process
def _loops(parallel: bool):
    """The three loops, compiled (or loaded from Numba's disk cache) on first use."""
    from numba import prange

    # Reassociation lets LLVM vectorise the sums over D; no "fast" flag that assumes
    # finite values.
    jit_loops = jit(parallel, fastmath={"reassoc", "contract", "arcp", "nsz"})
    loop = prange if parallel else range

    # Every scalar stays in the inputs' dtype: NumPy's rules would turn a float32 mixed
    # with a Python int or float into float64 (hence zero = scale - scale, not 0).
    @jit_loops
    def forward(q, k, v, ek, ev, has_ek, has_ev, src, rowptr, scale, out, alpha):
        n, heads, dim = q.shape
        zero = scale - scale
        for i in loop(n):
            start, end = rowptr[i], rowptr[i + 1]
            for h in range(heads):
                peak = zero
                for e in range(start, end):  # scores
                    j = src[e]
                    s = zero
                    for d in range(dim):
                        key = k[j, h, d] + ek[e, h, d] if has_ek else k[j, h, d]
                        s += q[i, h, d] * key
                    s *= scale
                    alpha[e, h] = s
                    if e == start or s > peak:
                        peak = s
                total = zero
                for e in range(start, end):  # softmax numerators
                    a = math.exp(alpha[e, h] - peak)
                    alpha[e, h] = a
                    total += a
                for d in range(dim):
                    out[i, h, d] = zero
                for e in range(start, end):  # weights and weighted values
                    j = src[e]
                    a = alpha[e, h] / total
                    alpha[e, h] = a
                    for d in range(dim):
                        value = v[j, h, d] + ev[e, h, d] if has_ev else v[j, h, d]
                        out[i, h, d] += a * value

    @jit_loops
    def backward_by_target(
        q,
        k,
        v,
        ek,
        ev,
        has_ek,
        has_ev,
        src,
        rowptr,
        scale,
        out,
        alpha,
        grad_out,
        grad_alpha,
        has_ga,
        ds,
        dq,
        dek,
        dev,
        need_dek,
        need_dev,
        summed,
    ):
        # summed: ek and ev are one tensor; dek receives the gradient of both terms
        n, heads, dim = q.shape
        zero = scale - scale
        for i in loop(n):
            start, end = rowptr[i], rowptr[i + 1]
            for h in range(heads):
                delta = zero
                for d in range(dim):
                    delta += grad_out[i, h, d] * out[i, h, d]
                    dq[i, h, d] = zero
                if has_ga:
                    for e in range(start, end):
                        delta += alpha[e, h] * grad_alpha[e, h]
                for e in range(start, end):
                    j = src[e]
                    dp = grad_alpha[e, h] if has_ga else zero
                    for d in range(dim):
                        value = v[j, h, d] + ev[e, h, d] if has_ev else v[j, h, d]
                        dp += grad_out[i, h, d] * value
                    a = alpha[e, h]
                    s = a * (dp - delta) * scale
                    ds[e, h] = s
                    for d in range(dim):
                        key = k[j, h, d] + ek[e, h, d] if has_ek else k[j, h, d]
                        dq[i, h, d] += s * key
                    if summed:
                        for d in range(dim):
                            dek[e, h, d] = s * q[i, h, d] + a * grad_out[i, h, d]
                        continue
                    if need_dek:
                        for d in range(dim):
                            dek[e, h, d] = s * q[i, h, d]
                    if need_dev:
                        for d in range(dim):
                            dev[e, h, d] = a * grad_out[i, h, d]

    @jit_loops
    def backward_by_source(q, grad_out, dst, perm, colptr, alpha, ds, dk, dv, need_dk, need_dv):
        n, heads, dim = q.shape
        for j in loop(n):
            for h in range(heads):
                for d in range(dim):
                    if need_dk:
                        dk[j, h, d] = 0
                    if need_dv:
                        dv[j, h, d] = 0
            for p in range(colptr[j], colptr[j + 1]):
                e = perm[p]
                i = dst[e]
                for h in range(heads):
                    if need_dk:
                        s = ds[e, h]
                        for d in range(dim):
                            dk[j, h, d] += s * q[i, h, d]
                    if need_dv:
                        a = alpha[e, h]
                        for d in range(dim):
                            dv[j, h, d] += a * grad_out[i, h, d]

    return forward, backward_by_target, backward_by_source


def _array(t: Tensor | None, dtype: torch.dtype, dims: int) -> np.ndarray:
    """A NumPy view of ``t`` (made contiguous), or an empty stand-in for None."""
    if t is None:
        return torch.empty((0,) * dims, dtype=dtype).numpy()
    return t.detach().contiguous().numpy()


def _by_source(edges: EdgeSet) -> tuple[np.ndarray, np.ndarray]:
    """``(perm, colptr)`` of the edges sorted by source, kept in ``edges.cache``."""
    hit = edges.cache.get(_BY_SOURCE)
    if hit is None:
        perm, colptr = edges.by_source()
        hit = (perm.numpy(), colptr.numpy())
        edges.cache[_BY_SOURCE] = hit
    return hit


class _NumbaEdgeAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, edge_key, edge_value, edges, scale):
        forward, _, _ = _loops()
        out = torch.empty_like(q, memory_format=torch.contiguous_format)
        alpha = q.new_empty((edges.num_edges, q.size(1)))
        arrays = [_array(t, q.dtype, 3) for t in (q, k, v, edge_key, edge_value)]
        forward(
            *arrays,
            edge_key is not None,
            edge_value is not None,
            edges.src.numpy(),
            edges.rowptr.numpy(),
            arrays[0].dtype.type(scale),
            out.numpy(),
            alpha.numpy(),
        )
        ctx.save_for_backward(q, k, v, edge_key, edge_value, out, alpha)
        ctx.edges, ctx.scale = edges, scale
        ctx.same_edge_terms = edge_key is edge_value
        ctx.set_materialize_grads(False)
        return out, alpha

    @staticmethod
    def backward(ctx, grad_out, grad_alpha):
        refuse_double_backward("numba")
        _, by_target, by_source = _loops()
        q, k, v, edge_key, edge_value, out, alpha = ctx.saved_tensors
        edges, dt = ctx.edges, q.dtype
        need_q, need_k, need_v, need_ek, need_ev = ctx.needs_input_grad[:5]
        if grad_out is None:
            grad_out = torch.zeros_like(out)
        qa, ka, va, eka, eva, go = (
            _array(t, dt, 3) for t in (q, k, v, edge_key, edge_value, grad_out)
        )
        # One tensor feeding both edge terms: its whole gradient goes to one slot.
        summed = ctx.same_edge_terms and need_ek and need_ev
        need_dev = need_ev and not summed
        none = _array(None, dt, 3)
        ds = np.empty_like(alpha.numpy())
        dq = np.empty_like(qa)  # pass 1 computes it whether or not it is needed
        dek = np.empty_like(eka) if need_ek else none
        dev = np.empty_like(eva) if need_dev else none
        by_target(
            qa, ka, va, eka, eva,
            edge_key is not None,
            edge_value is not None,
            edges.src.numpy(),
            edges.rowptr.numpy(),
            qa.dtype.type(ctx.scale),
            out.numpy(),
            alpha.numpy(),
            go,
            _array(grad_alpha, dt, 2),
            grad_alpha is not None,
            ds, dq, dek, dev,
            need_ek,
            need_dev,
            summed,
        )  # fmt: skip
        dk = np.empty_like(qa) if need_k else none
        dv = np.empty_like(qa) if need_v else none
        if need_k or need_v:
            perm, colptr = _by_source(edges)
            by_source(
                qa, go, edges.dst.numpy(), perm, colptr, alpha.numpy(), ds, dk, dv,
                need_k, need_v,
            )  # fmt: skip

        def tensor(a: np.ndarray, needed: bool) -> Tensor | None:
            return torch.from_numpy(a) if needed else None

        return (
            tensor(dq, need_q),
            tensor(dk, need_k),
            tensor(dv, need_v),
            tensor(dek, need_ek),
            tensor(dev, need_dev),
            None,
            None,
        )


def numba_edge_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    edges: EdgeSet,
    scale: float | None = None,
    edge_key: Tensor | None = None,
    edge_value: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    r"""Softmax attention of each target over its incoming edges, as compiled CSR loops.

    The same function as :func:`graphattn.ops.gather.gather_edge_attention` (and the
    reference kernel with ``score="dot"``, ``normalize="softmax"``, no dropout or score
    bias), on CPU tensors of float32 or float64; needs Numba.

    Args:
        q, k, v: ``[N, H, D]`` queries, keys, values.
        edges: the prepared edge set (:func:`graphattn.ops.graph.prepare_edges`).
        scale: score scale; default :math:`1/\sqrt{D}`.
        edge_key: optional ``[E, H, D]`` added to the key of each edge.
        edge_value: optional ``[E, H, D]`` added to the value of each edge.

    Returns:
        ``(out [N, H, D], alpha [E, H])``; a node without incoming edges gets ``out = 0``.
        Both are differentiable.
    """
    check_edge_attention_inputs(q, k, v, edges, edge_key, edge_value)
    if not usable(q.device, q.dtype):
        problem = numba_problem()
        raise ValueError(
            "the numba kernel needs float32 or float64 CPU tensors and a usable Numba; "
            f"got {q.dtype} on {q.device}" + (f" ({problem})" if problem else "")
        )
    scale = default_scale(q.size(-1), scale)
    if edges.num_edges == 0:
        # All zeros, but tied to q, k and v so that backward reaches them.
        return reference_edge_attention(q, k, v, edges, scale, edge_key, edge_value)
    return _NumbaEdgeAttention.apply(q, k, v, edge_key, edge_value, edges, scale)
