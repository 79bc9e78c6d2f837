r"""Edge-restricted attention: the reference scatter kernel and the dense masked kernel.

Both compute, for every target node i and head h, over the allowed sources
:math:`j \in \mathcal{N}(i)` (the sources of i's incoming edges):

.. math::
    s_{ij} = \frac{q_i \cdot (k_j + e_{ij})}{\sqrt{d}}, \qquad
    \alpha_{ij} = \operatorname{softmax}_{j \in \mathcal{N}(i)}(s_{ij}), \qquad
    o_i = \sum_{j \in \mathcal{N}(i)} \alpha_{ij} (v_j + e_{ij})

(:math:`e_{ij}` is the optional projected edge feature). Pairs without an edge get
exactly zero weight, and a node with no allowed source gets a zero output.

The sparse kernel works on the edge list (memory grows with E); the dense kernel
works on padded ``[B, L, L]`` score matrices with a boolean adjacency mask (memory
grows with :math:`\sum_b L^2`). They mean the same thing and agree numerically.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from graphattn.errors import GraphInputError
from graphattn.ops.dropout import dropout as drop_elements
from graphattn.ops.graph import EdgeSet
from graphattn.ops.segment import NORMALIZERS, segment_normalize, segment_sum

__all__ = [
    "SCORES",
    "check_edge_attention_inputs",
    "refuse_double_backward",
    "dense_attention",
    "edge_scores",
    "reference_edge_attention",
]

SCORES = ("dot", "additive")


def refuse_double_backward(kernel: str) -> None:
    """Called first in a compiled kernel's backward: under ``create_graph=True`` (grad mode
    on during backward) its hand-written gradient cannot be differentiated again."""
    if torch.is_grad_enabled():
        raise GraphInputError(
            f"the {kernel} attention kernel has first-order gradients only; for gradients "
            "of gradients (create_graph=True) build the layer with kernel='reference'"
        )


def default_scale(head_dim: int, scale: float | None) -> float:
    """The score scale: ``scale`` if given, else :math:`1/\\sqrt{d}` (``ValueError`` for
    ``d < 1`` either way: queries and keys without features have no scores)."""
    if head_dim < 1:
        raise ValueError(f"queries and keys need a head dimension of at least 1, got {head_dim}")
    return 1.0 / math.sqrt(head_dim) if scale is None else float(scale)


def check_edge_attention_inputs(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    edges: EdgeSet,
    edge_key: Tensor | None,
    edge_value: Tensor | None,
) -> None:
    """Raise ValueError unless q, k, v are ``[N, H, D]`` on the edge set's N nodes and
    the edge terms ``[E, H, D]``, all of one dtype and device."""
    if q.dim() != 3 or k.shape != q.shape or v.shape != q.shape:
        raise ValueError(
            f"q, k, v must all have shape [N, H, D], got {list(q.shape)}, "
            f"{list(k.shape)}, {list(v.shape)}"
        )
    if q.size(0) != edges.num_nodes:
        raise ValueError(f"q has {q.size(0)} nodes but the edge set has {edges.num_nodes}")
    expected = [edges.num_edges, *q.shape[1:]]
    for name, t in (("edge_key", edge_key), ("edge_value", edge_value)):
        if t is not None and list(t.shape) != expected:
            raise ValueError(f"{name} must have shape {expected}, got {list(t.shape)}")
    for name, t in (("k", k), ("v", v), ("edge_key", edge_key), ("edge_value", edge_value)):
        if t is not None and (t.dtype != q.dtype or t.device != q.device):
            raise ValueError(f"{name} is {t.dtype} on {t.device} but q is {q.dtype} on {q.device}")
    if edges.edge_index.device != q.device:
        raise ValueError(f"edges are on {edges.edge_index.device} but q is on {q.device}")


def edge_scores(
    q_dst: Tensor,
    k_src: Tensor,
    scale: float,
    score: str = "dot",
    score_vector: Tensor | None = None,
) -> Tensor:
    r"""Scores of query/key pairs, ``[..., H, D] x [..., H, D] -> [..., H]``.

    - ``"dot"``: :math:`s = \text{scale} \cdot q \cdot k`.
    - ``"additive"``: :math:`s = a_h \cdot \tanh(q + k)` with the learned
      ``score_vector`` :math:`a` of shape ``[H, D]`` (additive attention, as in GAT).
    """
    if score == "dot":
        dot = (q_dst * k_src).sum(-1)
        return dot if scale == 1.0 else dot * scale
    if score == "additive":
        if score_vector is None:
            raise ValueError("score='additive' needs a score_vector of shape [H, D]")
        return (torch.tanh(q_dst + k_src) * score_vector).sum(-1)
    raise ValueError(f"score must be one of {SCORES}, got {score!r}")


def reference_edge_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    edges: EdgeSet,
    scale: float | None = None,
    edge_key: Tensor | None = None,
    edge_value: Tensor | None = None,
    score: str = "dot",
    score_vector: Tensor | None = None,
    score_bias: Tensor | None = None,
    normalize: str = "softmax",
    dropout: float = 0.0,
    training: bool = False,
) -> tuple[Tensor, Tensor]:
    """Attention over the edge list by gather, segment softmax and scatter-add.

    Args:
        q, k, v: ``[N, H, D]`` queries, keys, values.
        edges: the prepared edge set (see :func:`graphattn.ops.graph.prepare_edges`).
        scale: score scale for ``"dot"``; default :math:`1/\\sqrt{D}`.
        edge_key: optional ``[E, H, D]`` added to the key of each edge.
        edge_value: optional ``[E, H, D]`` added to the value of each edge.
        score: ``"dot"`` or ``"additive"``.
        score_vector: ``[H, D]`` learned vector for ``"additive"``.
        score_bias: optional ``[E, H]`` added to the scores (e.g. a hop-distance bias).
        normalize: ``"softmax"``, ``"relu"`` or ``"sigmoid"`` (see
            :func:`graphattn.ops.segment.segment_normalize`).
        dropout: dropout probability on the attention weights (when ``training``).
        training: whether dropout is active.

    Returns:
        ``(out [N, H, D], alpha [E, H])``.

    Raises:
        ValueError: q, k, v or the edge terms do not match each other or the edge set
            in shape, dtype or device (as the other kernels check).
    """
    check_edge_attention_inputs(q, k, v, edges, edge_key, edge_value)
    src, dst = edges.edge_index
    # index_select, not k[src]: its backward is an index_add, several times faster on
    # CPU than the accumulating index_put behind advanced indexing.
    keys = k.index_select(0, src)
    if edge_key is not None:
        keys = keys + edge_key
    scale = default_scale(q.size(-1), scale)
    if score == "dot":
        # Scale the queries, not the scores: in float16 (max 65,504) an unscaled q . k
        # can overflow to inf, and the softmax to NaN, where the scaled score fits.
        q, scale = q * scale, 1.0
    scores = edge_scores(q.index_select(0, dst), keys, scale, score, score_vector)
    if score_bias is not None:
        scores = scores + score_bias
    alpha = segment_normalize(scores, dst, edges.num_nodes, normalize)
    weights = drop_elements(alpha, dropout, training)
    values = v.index_select(0, src)
    if edge_value is not None:
        values = values + edge_value
    out = segment_sum(weights.unsqueeze(-1) * values, dst, edges.num_nodes)
    return out, alpha


def _dense_normalize(scores: Tensor, mask: Tensor, normalize: str) -> Tensor:
    """Normalise ``[B, H, L, L]`` scores over the allowed keys of each query row."""
    row_has_key = mask.any(-1, keepdim=True)
    if normalize == "softmax":
        weights = scores.masked_fill(~mask, -math.inf)
        # A query with no allowed key would be a row of -inf (NaN after softmax).
        weights = torch.softmax(weights.masked_fill(~row_has_key, 0.0), dim=-1)
        return weights.masked_fill(~mask, 0.0)
    degree = mask.sum(-1, keepdim=True).clamp(min=1).to(scores.dtype)
    if normalize == "relu":
        weights = torch.relu(scores) / degree
    elif normalize == "sigmoid":
        weights = torch.sigmoid(scores - degree.log())
    else:
        raise ValueError(f"normalize must be one of {NORMALIZERS}, got {normalize!r}")
    return weights.masked_fill(~mask, 0.0)


def _can_use_sdpa(**options) -> bool:
    return (
        options["score"] == "dot"
        and options["normalize"] == "softmax"
        and options["edge_key"] is None
        and options["edge_value"] is None
        and options["score_bias"] is None
        and not options["need_weights"]
    )


def dense_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor,
    scale: float | None = None,
    edge_key: Tensor | None = None,
    edge_value: Tensor | None = None,
    score: str = "dot",
    score_vector: Tensor | None = None,
    score_bias: Tensor | None = None,
    normalize: str = "softmax",
    dropout: float = 0.0,
    training: bool = False,
    need_weights: bool = False,
    allow_fused: bool = True,
) -> tuple[Tensor, Tensor | None]:
    """Masked attention on padded dense tensors.

    Uses :func:`torch.nn.functional.scaled_dot_product_attention` for the plain case
    (dot score, softmax, no edge features, no bias, weights not requested), and an
    explicit ``[B, H, L, L]`` computation otherwise. The fused function's float32
    backward loses accuracy when attention saturates (large scores); the explicit path
    and the sparse kernels do not.

    Args:
        q, k, v: ``[B, H, L, D]``.
        mask: ``[B, L, L]`` bool; ``mask[b, i, j]`` is True when j -> i is allowed.
        scale: score scale for ``"dot"``; default :math:`1/\\sqrt{D}`.
        edge_key, edge_value: optional ``[B, H, L, L, D]`` edge terms (zero off the edges).
        score, score_vector, score_bias, normalize, dropout, training: as in
            :func:`reference_edge_attention`; ``score_bias`` is ``[B, H, L, L]``.
        need_weights: also return the ``[B, H, L, L]`` weights.
        allow_fused: False runs the explicit computation in the plain case too: it has
            gradients of gradients, the fused function has none on CPU.

    Returns:
        ``(out [B, H, L, D], weights [B, H, L, L] or None)``; rows without an allowed
        key are zero.
    """
    scale = default_scale(q.size(-1), scale)
    head_mask = mask.unsqueeze(1)
    row_has_key = head_mask.any(-1, keepdim=True)
    if allow_fused and _can_use_sdpa(
        score=score,
        normalize=normalize,
        edge_key=edge_key,
        edge_value=edge_value,
        score_bias=score_bias,
        need_weights=need_weights,
    ):
        safe_mask = head_mask | ~row_has_key
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=safe_mask, dropout_p=dropout if training else 0.0, scale=scale
        )
        return out.masked_fill(~row_has_key, 0.0), None

    if score == "dot":
        q = q * scale  # before the product, as in reference_edge_attention (float16)
        scores = q @ k.transpose(-1, -2)
        if edge_key is not None:
            scores = scores + torch.einsum("bhid,bhijd->bhij", q, edge_key)
    else:
        keys = k.unsqueeze(2) if edge_key is None else k.unsqueeze(2) + edge_key
        scores = _additive_dense(q, keys, score_vector)
    if score_bias is not None:
        scores = scores + score_bias
    weights = _dense_normalize(scores, head_mask, normalize)
    dropped = drop_elements(weights, dropout, training)
    out = dropped @ v
    if edge_value is not None:
        out = out + torch.einsum("bhij,bhijd->bhid", dropped, edge_value)
    return out, (weights if need_weights else None)


def _additive_dense(q: Tensor, keys: Tensor, score_vector: Tensor | None) -> Tensor:
    """``[B,H,L,D]`` queries and ``[B,H,L|1,L,D]`` keys -> ``[B,H,L,L]`` additive scores."""
    if score_vector is None:
        raise ValueError("score='additive' needs a score_vector of shape [H, D]")
    combined = torch.tanh(q.unsqueeze(3) + keys)
    return (combined * score_vector.view(1, -1, 1, 1, q.size(-1))).sum(-1)
