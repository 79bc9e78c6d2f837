r"""Fused edge attention: softmax attention over the edge list without ``[E, H, D]`` state.

For every target node i, head h and incoming edge e = (j -> i):

.. math::
    s_e = \text{scale} \cdot q_i \cdot (k_j + ek_e), \qquad
    \ell_i = \log \sum_{e \to i} \exp s_e, \qquad
    \alpha_e = \exp(s_e - \ell_i), \qquad
    o_i = \sum_{e \to i} \alpha_e (v_j + ev_e)

(``ek``/``ev`` are the optional edge key/value terms). A node without incoming edges
gets :math:`o_i = 0` and :math:`\ell_i = -\infty`.

The forward returns ``(out, lse)`` and saves only node-sized tensors (plus the edge
terms, which are inputs anyway). The backward recomputes the weights from the scores,
as FlashAttention does (see below for how), and then:

.. math::
    dp_e = dO_i \cdot (v_j + ev_e), \quad
    \delta_i = \sum_{e \to i} \alpha_e dp_e - d\ell_i \;(= dO_i \cdot o_i - d\ell_i), \quad
    ds_e = \alpha_e (dp_e - \delta_i)

    dq_i = \text{scale} \sum_{e \to i} ds_e (k_j + ek_e), \quad
    dk_j = \text{scale} \sum_{e = j \to i} ds_e q_i, \quad
    dv_j = \sum_{e = j \to i} \alpha_e dO_i, \quad
    dek_e = \text{scale}\, ds_e q_i, \quad
    dev_e = \alpha_e dO_i

Two backends:

- ``"cpu"`` (for CPU tensors, and float64 ones on CUDA; device-generic torch ops, but
  only tested on CPU): sparse matrix products from ``torch.sparse``, one head at a
  time. Per head, one SDDMM (``torch.sparse.sampled_addmm`` on the CSR pattern, in
  place) gives the scores and one SpMM (``torch.sparse.mm``, MKL on CPU) each weighted
  neighbour sum; sums over a source's targets (``dk``, ``dv``) use the CSR of the
  transpose, whose values are a fixed permutation of the edge values. Softmax
  statistics use ``torch.segment_reduce`` over the CSR row pointer (much faster than
  ``scatter_reduce``). The index structures are built once per edge set and kept in
  ``edges.cache``. Looping over heads keeps every temporary at ``[E]`` or ``[N, D]``
  and costs no speed: a block-diagonal ``[H N, H N]`` batching of the heads measured
  the same time and needed ~1.5x the memory.
- ``"triton"`` (CUDA): the kernels of :mod:`graphattn.ops.triton_attention`. They
  compute in float32 (half-precision inputs too), so float64 inputs go to ``"cpu"``.

Recomputed as :math:`\exp(s_e - \ell_i)`, the weights would sum to 1 only up to
``lse``'s rounding, which at sharp scores is far larger than their own (1 + 6e-5 at
scores near 2,000 in float32), and every gradient is linear in them: the CPU backward
recomputes the forward's softmax from the scores and the forward's largest score
:math:`m_i` (the same exponentials, sums and weights), and the Triton backward divides
:math:`\exp(s_e - m_i)` by the forward's running sum :math:`l_i`. The Triton backward
takes :math:`\delta_i` as FlashAttention does, from :math:`dO_i \cdot o_i`; the CPU
backend sums it from the same :math:`dp_e` that :math:`ds_e` subtracts it from: its
:math:`dp_e` comes in two parts, ``v`` and ``ev``, which round otherwise than
:math:`o_i`, and :math:`dp_e - \delta_i` must cancel where one edge takes nearly all the
weight, or where tied edges share it.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
import warnings
from dataclasses import dataclass

import torch
from torch import Tensor

from graphattn.ops.attention import (
    check_edge_attention_inputs,
    default_scale,
    reference_edge_attention,
    refuse_double_backward,
)
from graphattn.ops.graph import EdgeSet
from graphattn.ops.segment import segment_reduce_csr, segment_softmax

__all__ = ["BACKENDS", "edge_attention_weights", "fused_edge_attention"]

BACKENDS = ("auto", "cpu", "triton")

Grads = tuple[Tensor | None, Tensor | None, Tensor | None, Tensor | None, Tensor | None]


# --------------------------------------------------------------------------- CSR layout


@dataclass
class _GraphCSR:
    """CSR index of the attention pattern ``A`` (rows targets, columns sources), its
    transpose (``crow_t``/``col_t``, rows sources), and ``perm``: the edge behind each
    entry of the transpose, so its values are ``values[perm]``."""

    crow: Tensor
    col: Tensor
    crow_t: Tensor
    col_t: Tensor
    perm: Tensor
    rowptr: Tensor
    dst: Tensor

    @property
    def size(self) -> tuple[int, int]:
        n = self.rowptr.numel() - 1
        return (n, n)


def _graph_csr(edges: EdgeSet) -> _GraphCSR:
    """The CSR structures of ``edges``, built once and kept in ``edges.cache``."""
    hit = edges.cache.get("fused.csr")
    if hit is not None:
        return hit
    src, dst = edges.edge_index
    n = edges.num_nodes
    # MKL's SpMM is markedly faster with 32-bit indices.
    index = torch.int32 if max(n, edges.num_edges) < 2**31 - 1 else torch.int64
    perm, rowptr_t = edges.by_source()
    csr = _GraphCSR(
        crow=edges.rowptr.to(index),
        col=src.to(index),
        crow_t=rowptr_t.to(index),
        col_t=dst[perm].to(index),
        perm=perm,
        rowptr=edges.rowptr,
        dst=dst,
    )
    edges.cache["fused.csr"] = csr
    return csr


def _csr(crow: Tensor, col: Tensor, values: Tensor, size: tuple[int, int]) -> Tensor:
    """A CSR tensor over indices built (and checked) by :func:`_graph_csr`."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Sparse CSR tensor support is in beta")
        warnings.filterwarnings("ignore", "Sparse invariant checks are implicitly disabled")
        return torch.sparse_csr_tensor(crow, col, values, size, check_invariants=False)


class _HeadOps:
    """The sparse products of one head, in a few scratch buffers reused across heads.

    glibc keeps freed heap memory inside the process, so fresh ``[E]`` and ``[N, D]``
    temporaries for every head and product fragment the heap and raise the peak RSS.
    ``edge_scratch`` extra ``[E]`` buffers are for the caller. A result returned in a
    buffer (:meth:`spmm`, :meth:`at_targets`) is valid until the next call of any method.
    """

    def __init__(self, csr: _GraphCSR, like: Tensor, edge_scratch: int) -> None:
        n, _, d = like.shape
        self.csr = csr
        self.nodes = [like.new_empty(n, d) for _ in range(2)]
        num_edges = csr.col.numel()
        self.edges, *self.scratch = (like.new_empty(num_edges) for _ in range(1 + edge_scratch))

    def sddmm(self, out: Tensor, a: Tensor, b: Tensor, scale: float = 1.0) -> Tensor:
        """``out[e] = scale * a[dst_e] . b[src_e]``: ``[N, D]`` inputs into ``[E]`` out."""
        csr = self.csr
        # In place (out=mask): ~5x faster and no index copies. The mask's values must be
        # zeros, not garbage: sampled_addmm propagates NaN from them even with beta=0.
        mask = _csr(csr.crow, csr.col, out.zero_(), csr.size)
        a, b = (buffer.copy_(x) for buffer, x in zip(self.nodes, (a, b), strict=True))
        torch.sparse.sampled_addmm(mask, a, b.t(), beta=0.0, alpha=scale, out=mask)
        return out

    def spmm(self, weights: Tensor, x: Tensor, transpose: bool = False) -> Tensor:
        """Weighted neighbour sums, ``[E]`` weights and ``[N, D]`` features -> ``[N, D]``.

        ``transpose=False``: ``y_i = sum_{e=j->i} w_e x_j`` (over a target's sources);
        ``transpose=True``: ``y_j = sum_{e=j->i} w_e x_i`` (over a source's targets).
        """
        csr = self.csr
        if transpose:
            values = torch.index_select(weights, 0, csr.perm, out=self.edges)
            matrix = _csr(csr.crow_t, csr.col_t, values, csr.size)
        else:
            matrix = _csr(csr.crow, csr.col, weights, csr.size)
        # addmm(out=, beta=0) rather than mm(out=): the latter leaves a fresh [N, D]
        # temporary on the heap at every call (RSS grew by ~7 of them).
        x, out = self.nodes[0].copy_(x), self.nodes[1]  # contiguous: better locality
        return torch.addmm(out, matrix, x, beta=0.0, out=out)

    def at_targets(self, stats: Tensor) -> Tensor:
        """Node statistics ``[N]`` at each edge's target: ``[E]``."""
        return torch.index_select(stats, 0, self.csr.dst, out=self.edges)

    def segment(self, x: Tensor, reduce: str) -> Tensor:
        """Reduce ``[E, ...]`` per target: ``[N, ...]`` (empty: -inf for max, 0 for sum)."""
        return segment_reduce_csr(x, self.csr.rowptr, reduce)

    def edge_dot(self, nodes: Tensor, edge_terms: Tensor) -> Tensor:
        """``[E]`` dot products ``nodes[dst_e] . edge_terms[e]`` (``[N, D]``, ``[E, D]``)."""
        return torch.linalg.vecdot(nodes.index_select(0, self.csr.dst), edge_terms)


# --------------------------------------------------------------------------- CPU backend
# One head at a time: the temporaries are [E] and [N, D], never [E, H] or [N, H, D].


def _head(t: Tensor | None, h: int) -> Tensor | None:
    return None if t is None else t[:, h]


def _scores(ops: _HeadOps, out: Tensor, q, k, edge_key, scale: float) -> Tensor:
    """``[E]`` scores ``scale * q_i . (k_j + ek_e)`` of one head, into ``out``."""
    ops.sddmm(out, q, k, scale)
    if edge_key is not None:
        out += scale * ops.edge_dot(q, edge_key)
    return out


def _softmax_(ops: _HeadOps, scores: Tensor, peak: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Turn ``[E]`` scores into each target's softmax weights, in place; return the
    targets' ``[N]`` largest score and sum of exponentials (``-inf`` and 0 for a node
    without edges). Given the forward's ``peak``, the same weights come back exactly."""
    if peak is None:
        peak = ops.segment(scores, "max")
    scores.sub_(ops.at_targets(peak)).exp_()
    total = ops.segment(scores, "sum")
    scores.div_(ops.at_targets(total))
    return peak, total


def _forward_head(ops: _HeadOps, weights: Tensor, q, k, v, edge_key, edge_value, scale):
    """``(out [N, D], lse [N], peak [N])`` of one head; ``weights`` is ``[E]`` scratch."""
    peak, total = _softmax_(ops, _scores(ops, weights, q, k, edge_key, scale))
    out = ops.spmm(weights, v)
    if edge_value is not None:
        out += ops.segment(weights.unsqueeze(1) * edge_value, "sum")
    return out, peak + total.log_(), peak  # -inf + log(0) = -inf for nodes without edges


def _cpu_forward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    edge_key: Tensor | None,
    edge_value: Tensor | None,
    edges: EdgeSet,
    scale: float,
) -> tuple[Tensor, Tensor, Tensor]:
    """``(out, lse, peak)``: ``peak`` ``[N, H]`` is each softmax's largest score, from
    which the backward recomputes the weights."""
    ops = _HeadOps(_graph_csr(edges), q, edge_scratch=1)
    (weights,) = ops.scratch
    out = torch.empty_like(q)
    lse, peak = q.new_empty(q.shape[:2]), q.new_empty(q.shape[:2])
    for h in range(q.size(1)):
        heads = (_head(t, h) for t in (q, k, v, edge_key, edge_value))
        out[:, h], lse[:, h], peak[:, h] = _forward_head(ops, weights, *heads, scale)
    return out, lse, peak


def _backward_head(
    ops: _HeadOps, alpha: Tensor, ds: Tensor, inputs, grads, grad_out, peak, grad_lse, scale
) -> None:
    """Write one head's gradients into ``grads`` (views, or None where not needed).

    ``inputs``/``grads`` are that head's ``(q, k, v, edge_key, edge_value)`` and their
    gradients; ``alpha`` and ``ds`` are ``[E]`` scratch.
    """
    q, k, v, edge_key, edge_value = inputs
    dq, dk, dv, dek, dev = grads
    _softmax_(ops, _scores(ops, alpha, q, k, edge_key, scale), peak)  # the forward's weights
    ops.sddmm(ds, grad_out, v)  # dp, turned into ds in place
    if edge_value is not None:
        ds += ops.edge_dot(grad_out, edge_value)
    weighted = torch.mul(alpha, ds, out=ops.edges)
    delta = ops.segment(weighted, "sum").sub_(grad_lse)
    ds.sub_(ops.at_targets(delta)).mul_(alpha)

    if dv is not None:
        dv.copy_(ops.spmm(alpha, grad_out, transpose=True))
    if dev is not None:
        dev.copy_(alpha.unsqueeze(1) * grad_out.index_select(0, ops.csr.dst))
    ds.mul_(scale)  # every remaining gradient is linear in scale * ds
    if dq is not None:
        dq.copy_(ops.spmm(ds, k))
        if edge_key is not None:
            dq += ops.segment(ds.unsqueeze(1) * edge_key, "sum")
    if dk is not None:
        dk.copy_(ops.spmm(ds, q, transpose=True))
    if dek is not None:
        dek.copy_(ds.unsqueeze(1) * q.index_select(0, ops.csr.dst))


def _cpu_backward(
    saved: tuple[Tensor | None, ...],
    grad_out: Tensor,
    grad_lse: Tensor,
    edges: EdgeSet,
    scale: float,
    needs: tuple[bool, ...],
) -> Grads:
    q, k, v, edge_key, edge_value, _out, peak = saved
    ops = _HeadOps(_graph_csr(edges), q, edge_scratch=2)
    alpha, ds = ops.scratch
    inputs = (q, k, v, edge_key, edge_value)
    grads = [torch.empty_like(t) if need else None for t, need in zip(inputs, needs, strict=True)]
    for h in range(q.size(1)):
        head_inputs, head_grads = [_head(t, h) for t in inputs], [_head(t, h) for t in grads]
        args = (grad_out[:, h], peak[:, h], grad_lse[:, h], scale)
        _backward_head(ops, alpha, ds, head_inputs, head_grads, *args)
    return tuple(grads)


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """torch.sparse has no half-precision CPU kernels: compute those in float32."""
    return dtype if dtype in (torch.float32, torch.float64) else torch.float32


def _cpu_forward_cast(q, k, v, edge_key, edge_value, edges, scale):
    dtype = _compute_dtype(q.dtype)
    cast = [None if t is None else t.to(dtype) for t in (q, k, v, edge_key, edge_value)]
    # autocast would run vecdot in half precision, and the backward (outside autocast)
    # would recompute other scores than the saved peak: exp overflowed to NaN gradients
    with torch.autocast(q.device.type, enabled=False):
        out, lse, peak = _cpu_forward(*cast, edges, scale)
    return out.to(q.dtype), lse, peak


def _cpu_backward_cast(saved, grad_out, grad_lse, edges, scale, needs) -> Grads:
    dtype = _compute_dtype(saved[0].dtype)
    cast = tuple(None if t is None else t.to(dtype) for t in saved)
    with torch.autocast(saved[0].device.type, enabled=False):
        grads = _cpu_backward(cast, grad_out.to(dtype), grad_lse.to(dtype), edges, scale, needs)
    inputs = saved[:5]
    return tuple(None if g is None else g.to(x.dtype) for g, x in zip(grads, inputs, strict=True))


# --------------------------------------------------------------------------- dispatch


def _triton_interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@functools.cache
def _has_triton() -> bool:
    # Checked without importing: importing triton costs ~1 s and ~90 MB on CPU.
    return importlib.util.find_spec("triton") is not None


def _triton_kernels():
    from graphattn.ops import triton_attention

    return triton_attention


def _select_backend(backend: str, device: torch.device, dtype: torch.dtype) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    wide = dtype == torch.float64  # the Triton kernels compute in float32
    if backend == "auto":
        return "triton" if device.type == "cuda" and _has_triton() and not wide else "cpu"
    if backend == "triton":
        if wide:
            raise ValueError(
                "backend='triton' computes in float32 and would round float64 inputs; "
                "use backend='auto' or 'cpu' (torch operations, on any device)"
            )
        if not _has_triton():
            raise RuntimeError(
                "backend='triton' needs the triton package: pip install 'graphattn[cuda]'"
            )
        if device.type != "cuda" and not _triton_interpreted():
            raise RuntimeError(
                f"backend='triton' needs CUDA tensors (got {device.type}); on CPU set "
                "TRITON_INTERPRET=1 before importing triton to run the kernels interpreted"
            )
    return backend


class _FusedEdgeAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, edge_key, edge_value, edges, scale, backend):
        if backend == "triton":  # its backward reads the softmax's max and sum, not lse
            kernels = _triton_kernels()
            out, lse, softmax = kernels.forward(q, k, v, edge_key, edge_value, edges, scale)
        else:  # its backward recomputes the weights from the forward's largest scores
            out, lse, softmax = _cpu_forward_cast(q, k, v, edge_key, edge_value, edges, scale)
        kept_out = out if backend == "triton" else None  # the CPU backward never reads it
        ctx.save_for_backward(q, k, v, edge_key, edge_value, kept_out, softmax)
        ctx.edges, ctx.scale, ctx.backend = edges, scale, backend
        return out, lse

    @staticmethod
    def backward(ctx, grad_out, grad_lse):
        refuse_double_backward("fused")
        args = (ctx.saved_tensors, grad_out, grad_lse, ctx.edges, ctx.scale)
        needs = tuple(ctx.needs_input_grad[:5])
        if ctx.backend == "triton":
            grads = _triton_kernels().backward(*args, needs)
        else:
            grads = _cpu_backward_cast(*args, needs)
        return (*grads, None, None, None)


def fused_edge_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    edges: EdgeSet,
    scale: float | None = None,
    edge_key: Tensor | None = None,
    edge_value: Tensor | None = None,
    backend: str = "auto",
) -> tuple[Tensor, Tensor]:
    r"""Softmax attention of each target over its incoming edges, fused and memory-lean.

    Args:
        q, k, v: ``[N, H, D]`` queries, keys, values.
        edges: prepared edge set (:func:`graphattn.ops.graph.prepare_edges`), on q's device.
        scale: score scale; default :math:`1/\sqrt{D}`.
        edge_key: optional ``[E, H, D]`` added to the key of each edge.
        edge_value: optional ``[E, H, D]`` added to the value of each edge.
        backend: ``"auto"`` (Triton for CUDA tensors of at most 32 bits when available,
            else ``"cpu"``), ``"cpu"`` (torch.sparse, one head at a time, on any device)
            or ``"triton"`` (CUDA, or CPU under ``TRITON_INTERPRET=1``; computes in
            float32, so float64 inputs are refused).

    Returns:
        ``(out [N, H, D], lse [N, H])``: the attention output and the log-sum-exp of each
        node's scores (``-inf``, with ``out = 0``, for a node without incoming edges).
        ``lse`` is float32 for half-precision inputs. Both are differentiable.
    """
    check_edge_attention_inputs(q, k, v, edges, edge_key, edge_value)
    scale = default_scale(q.size(-1), scale)
    backend = _select_backend(backend, q.device, q.dtype)
    if edges.num_edges == 0:
        # All zeros, but tied to q, k and v so that backward reaches them.
        out, _ = reference_edge_attention(q, k, v, edges, scale, edge_key, edge_value)
        lse = torch.full(q.shape[:2], -math.inf, dtype=_compute_dtype(q.dtype), device=q.device)
        return out, lse
    return _FusedEdgeAttention.apply(q, k, v, edge_key, edge_value, edges, scale, backend)


def edge_attention_weights(
    q: Tensor,
    k: Tensor,
    edges: EdgeSet,
    lse: Tensor,
    scale: float | None = None,
    edge_key: Tensor | None = None,
) -> Tensor:
    r"""Recompute the attention weights :math:`\alpha_e` of :func:`fused_edge_attention`.

    Args:
        q, k: ``[N, H, D]`` as given to :func:`fused_edge_attention`.
        edges: the same edge set.
        lse: ``[N, H]`` the log-sum-exp returned by :func:`fused_edge_attention`. Only
            its shape is used, and its dtype on the differentiable path (the dtype of the
            scores there): both paths normalise the scores they compute afresh (their
            rounding differs from the kernel's, and at scores of 100 and more
            :math:`\exp(s_e - \ell_i)` missed a row sum of 1 by 1e-4 to 10%).
        scale, edge_key: as given to :func:`fused_edge_attention`.

    Returns:
        ``[E, H]`` weights, summing to 1 over each node's incoming edges. Differentiable
        (through a gather of ``[E, H, D]`` keys and a segment softmax, which does not
        use ``lse``) when any input requires grad, and so computed off CPU; otherwise
        with the memory-lean SDDMM, one head at a time.

    Raises:
        ValueError: the inputs do not match each other or the edge set, or ``lse`` is
            not ``[N, H]``.
    """
    check_edge_attention_inputs(q, k, k, edges, edge_key, None)
    if lse.shape != q.shape[:2]:
        raise ValueError(f"lse must have shape {list(q.shape[:2])}, got {list(lse.shape)}")
    scale = default_scale(q.size(-1), scale)
    if edges.num_edges == 0:
        return q.new_zeros((0, q.size(1)))
    with torch.autocast(q.device.type, enabled=False):  # scores in the kernel's dtype
        return _edge_weights(q, k, edge_key, edges, lse, scale)


def _edge_weights(q, k, edge_key, edges: EdgeSet, lse: Tensor, scale: float) -> Tensor:
    src, dst = edges.edge_index
    inputs = (q, k, edge_key)  # lse's value is not used: no gradient reaches it
    needs_grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in inputs)
    if needs_grad or q.device.type != "cpu":
        # Scores in lse's dtype (float32 for half inputs), as the kernel computed them:
        # half-precision scores minus a float32 lse leave weights that sum far from 1.
        wide = lse.dtype
        keys = k[src].to(wide)
        if edge_key is not None:
            keys = keys + edge_key.to(wide)
        scores = torch.linalg.vecdot(q[dst].to(wide) * scale, keys)
        return segment_softmax(scores, dst, edges.num_nodes).to(q.dtype)
    dtype, heads = _compute_dtype(q.dtype), q.size(1)
    cast = [None if t is None else t.to(dtype) for t in (q, k, edge_key)]
    ops = _HeadOps(_graph_csr(edges), cast[0], edge_scratch=0)
    weights = cast[0].new_empty((heads, edges.num_edges))
    for h in range(heads):
        q_h, k_h, edge_key_h = (_head(t, h) for t in cast)
        _softmax_(ops, _scores(ops, weights[h], q_h, k_h, edge_key_h, scale))
    return weights.t().contiguous().to(q.dtype)
