r"""A Transformer block whose self-attention is restricted to a graph's edges.

.. math::
    h = x + \mathrm{Dropout}(\mathrm{Attn}(\mathrm{Norm}_1(x)))

.. math::
    x' = h + \mathrm{Dropout}(W_2\, \mathrm{GELU}(W_1\, \mathrm{Norm}_2(h)))

(pre-normalisation, as in most modern Transformers: it trains stably without warm-up
tricks when layers are stacked).
"""

from __future__ import annotations

import math

from torch import Tensor, nn

from graphattn.errors import GraphInputError, is_real
from graphattn.nn.attention import GraphSelfAttention, check_heads_divide
from graphattn.nn.dropout import Dropout
from graphattn.nn.edge_features import LinearEdgeEncoding

__all__ = ["GraphTransformerLayer"]

NORMS = ("layer", "batch", "none")


def make_norm(norm: str, channels: int) -> nn.Module:
    """``"layer"`` (per node), ``"batch"`` (over the nodes of a batch) or ``"none"``."""
    if norm == "layer":
        return nn.LayerNorm(channels)
    if norm == "batch":
        return nn.BatchNorm1d(channels)
    if norm == "none":
        return nn.Identity()
    raise GraphInputError(f"norm must be one of {NORMS}, got {norm!r}")


def ffn_width(channels: int, ratio: float) -> int:
    """The feed-forward hidden width ``round(ratio * channels)``; raise
    :class:`GraphInputError` unless ``ratio`` is a real number that makes it at least 1."""
    width = ratio * channels if is_real(ratio) and math.isfinite(ratio) else 0
    if round(width) < 1:
        raise GraphInputError(
            f"ffn_ratio must be a number > 0 that gives the feed-forward block at least one "
            f"unit (round(ffn_ratio * {channels}) >= 1), got {ratio!r}"
        )
    return int(round(width))


def feed_forward(channels: int, ratio: float, dropout: float) -> nn.Sequential:
    """Position-wise ``Linear -> GELU -> Dropout -> Linear`` with hidden width ``ratio * C``."""
    hidden = ffn_width(channels, ratio)
    return nn.Sequential(
        nn.Linear(channels, hidden), nn.GELU(), Dropout(dropout), nn.Linear(hidden, channels)
    )


class GraphTransformerLayer(nn.Module):
    """Edge-restricted self-attention + position-wise feed-forward, with residuals.

    Args:
        channels: node feature width C (input and output).
        heads: attention heads; must divide ``channels``.
        ffn_ratio: hidden width of the feed-forward block is ``ffn_ratio * channels``.
        dropout: dropout on both residual branches and inside the feed-forward block.
        norm: ``"layer"``, ``"batch"`` or ``"none"``.
        edge_dim: edge feature width, used by the attention (added to keys and values).
        mode: attention mode, ``"sparse"``, ``"dense"`` or ``"auto"``.
        attention_dropout: dropout on the attention weights (0 keeps the fused sparse
            kernel usable in training).
        **attention_kwargs: passed to :class:`GraphSelfAttention` (``score``,
            ``kernel``, ``normalize``, ``add_self_loops``, ...).

    Shapes:
        - input: x ``[N, C]``, edge_index ``[2, E]``, edge_attr ``[E, edge_dim]``,
          batch ``[N]``
        - output: ``[N, C]`` (or ``(out, attention)`` with ``return_attention=True``)
    """

    def __init__(
        self,
        channels: int,
        heads: int,
        ffn_ratio: float = 2,
        dropout: float = 0.0,
        norm: str = "layer",
        edge_dim: int | None = None,
        mode: str = "sparse",
        attention_dropout: float = 0.0,
        **attention_kwargs,
    ) -> None:
        super().__init__()
        check_heads_divide("channels", channels, heads)
        self.attention = GraphSelfAttention(
            channels,
            channels,
            heads=heads,
            mode=mode,
            dropout=attention_dropout,
            edge_dim=edge_dim,
            **attention_kwargs,
        )
        self.ffn = feed_forward(channels, ffn_ratio, dropout)
        self.norm_attention = make_norm(norm, channels)
        self.norm_ffn = make_norm(norm, channels)
        self.dropout = Dropout(dropout)

    @property
    def mode(self) -> str:
        return self.attention.mode

    @mode.setter
    def mode(self, value: str) -> None:
        self.attention.mode = value

    def forward(
        self,
        x: Tensor,
        edge_index: Tensor,
        edge_attr: Tensor | LinearEdgeEncoding | None = None,
        batch: Tensor | None = None,
        return_attention: bool = False,
        mode: str | None = None,
    ) -> Tensor | tuple[Tensor, tuple[Tensor, Tensor]]:
        attended = self.attention(
            self.norm_attention(x),
            edge_index,
            edge_attr,
            batch,
            return_attention=return_attention,
            mode=mode,
        )
        if return_attention:
            attended, attention = attended
        h = x + self.dropout(attended)
        out = h + self.dropout(self.ffn(self.norm_ffn(h)))
        return (out, attention) if return_attention else out
