"""Segment (per-target-node) reductions over an edge list.

Every edge e = (j -> i) belongs to the segment of its target i. These functions
normalise per-edge scores within each segment, so that a node's weights depend only
on its own incoming edges.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = [
    "NORMALIZERS",
    "csr_pointer",
    "segment_counts",
    "segment_max",
    "segment_normalize",
    "segment_reduce_csr",
    "segment_softmax",
    "segment_sum",
]

NORMALIZERS = ("softmax", "relu", "sigmoid")


def segment_counts(index: Tensor, num_segments: int) -> Tensor:
    """``[num_segments]`` long: how many entries of ``index`` fall in each segment.

    ``torch.bincount(index, minlength=num_segments)`` for valid indices, without the
    device-to-host synchronisation ``bincount`` makes on a GPU (it reads the max).
    """
    counts = torch.zeros(num_segments, dtype=torch.long, device=index.device)
    return counts.index_add_(0, index, torch.ones_like(index, dtype=torch.long))


def csr_pointer(index: Tensor, num_segments: int) -> Tensor:
    """``[num_segments + 1]`` CSR row pointer of ``index`` sorted by segment: the entries
    of segment s are ``pointer[s]:pointer[s + 1]``."""
    counts = segment_counts(index, num_segments)
    return torch.cat([counts.new_zeros(1), counts.cumsum(0)])


def segment_sum(values: Tensor, index: Tensor, num_segments: int) -> Tensor:
    """Sum ``values[e]`` into row ``index[e]``: ``[E, *] -> [num_segments, *]``.

    ``index_add_`` rather than ``segment_reduce``, even over a sorted index: for 3-d
    values it is several times faster on CPU.
    """
    out = values.new_zeros((num_segments, *values.shape[1:]))
    return out.index_add_(0, index, values)


def segment_reduce_csr(values: Tensor, rowptr: Tensor, reduce: str) -> Tensor:
    """``"sum"`` or ``"max"`` of ``values`` sorted by segment, whose segment s is
    ``values[rowptr[s]:rowptr[s + 1]]``: ``[E, *] -> [len(rowptr) - 1, *]`` (an empty
    segment gets 0 for sum, ``-inf`` for max)."""
    return torch.segment_reduce(values, reduce, offsets=rowptr, axis=0, unsafe=True)


def segment_max(values: Tensor, index: Tensor, num_segments: int) -> Tensor:
    """Per-segment maximum ``[num_segments, *]``; empty segments get ``-inf``."""
    shape = (num_segments, *values.shape[1:])
    out = values.new_full(shape, -math.inf)
    expanded = index.view(-1, *([1] * (values.dim() - 1))).expand_as(values)
    return out.scatter_reduce(0, expanded, values, reduce="amax", include_self=True)


def segment_softmax(scores: Tensor, index: Tensor, num_segments: int) -> Tensor:
    r"""Numerically stable softmax of ``scores`` within each segment.

    .. math::
        \alpha_e = \frac{\exp(s_e - m_i)}{\sum_{e' \to i} \exp(s_{e'} - m_i)},
        \qquad m_i = \max_{e' \to i} s_{e'}

    Args:
        scores: ``[E, H]`` per-edge, per-head scores.
        index: ``[E]`` target node of each edge.
        num_segments: N.

    Returns:
        ``[E, H]`` weights that sum to 1 over each non-empty segment.
    """
    peak = segment_max(scores, index, num_segments).detach()
    exp = (scores - peak.index_select(0, index)).exp()
    return exp / segment_sum(exp, index, num_segments).index_select(0, index)


def segment_normalize(
    scores: Tensor, index: Tensor, num_segments: int, normalize: str = "softmax"
) -> Tensor:
    r"""Turn per-edge scores into attention weights within each target's segment.

    - ``"softmax"``: :func:`segment_softmax`; weights sum to 1.
    - ``"relu"``: :math:`\alpha_e = \mathrm{relu}(s_e) / d_i`, with :math:`d_i` the
      number of incoming edges of target i; weights are non-negative, need not sum to 1.
    - ``"sigmoid"``: :math:`\alpha_e = \sigma(s_e - \log d_i)`, the sigmoid attention
      with a length-dependent bias so weights start near :math:`1/d_i`.

    Only edges carry weights: a pair without an edge has no entry, so its weight is 0
    under every normaliser.

    Args:
        scores: ``[E, *]`` per-edge scores (``[E, H]``: one column per head).
        index: ``[E]`` target node of each edge.
        num_segments: N.
        normalize: ``"softmax"``, ``"relu"`` or ``"sigmoid"``.

    Returns:
        ``[E, *]`` weights, the shape of ``scores``.
    """
    if normalize == "softmax":
        return segment_softmax(scores, index, num_segments)
    degree = segment_counts(index, num_segments).clamp(min=1).to(scores.dtype)
    degree = degree[index].view(-1, *([1] * (scores.dim() - 1)))  # broadcast over [E, *]
    if normalize == "relu":
        return torch.relu(scores) / degree
    if normalize == "sigmoid":
        return torch.sigmoid(scores - degree.log())
    raise ValueError(f"normalize must be one of {NORMALIZERS}, got {normalize!r}")
