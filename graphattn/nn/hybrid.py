r"""A GraphGPS-style layer: edge-restricted and global attention side by side, then an FFN.

.. math::
    h = x + \mathrm{Dropout}(\mathrm{Attn}_{edges}(\mathrm{Norm}_1(x)))
          + \mathrm{Dropout}(\mathrm{Attn}_{global}(\mathrm{Norm}_1(x)))

.. math::
    x' = h + \mathrm{Dropout}(\mathrm{FFN}(\mathrm{Norm}_2(h)))

The local branch sees the graph's edges (and edge features); the global branch lets
every node attend to every node of its own graph (never across graphs of a batch).
"""

from __future__ import annotations

from torch import Tensor, nn

from graphattn.errors import GraphInputError
from graphattn.nn.attention import PLAIN_SOFTMAX_KERNELS, GraphSelfAttention, check_heads_divide
from graphattn.nn.dropout import Dropout
from graphattn.nn.edge_features import LinearEdgeEncoding
from graphattn.nn.transformer import feed_forward, make_norm

__all__ = ["HybridLayer"]


class HybridLayer(nn.Module):
    """Sum of an edge-restricted and a global attention branch, with a feed-forward block.

    Args:
        channels: node width C (input and output).
        heads: attention heads of each branch.
        ffn_ratio: feed-forward hidden width as a multiple of C.
        dropout: dropout on the residual branches and inside the feed-forward block.
        attention_dropout: dropout on the attention weights of both branches.
        norm: ``"layer"``, ``"batch"`` or ``"none"``.
        edge_dim: edge feature width for the local branch.
        mode: attention mode of both branches.
        global_hop_bias: give the global branch a learned per-hop score bias, so it
            still knows which pairs are bonded (distance 1) and which are not.
        **attention_kwargs: passed to both :class:`GraphSelfAttention` branches, except
            ``attend`` and ``hop_bias``, which shape the local branch alone (the global
            branch attends globally, with ``global_hop_bias``).

    Shapes:
        - input: x ``[N, C]``, edge_index ``[2, E]``, edge_attr ``[E, edge_dim]``,
          batch ``[N]``
        - output: ``[N, C]``
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
        global_hop_bias: bool = True,
        attention_dropout: float = 0.0,
        **attention_kwargs,
    ) -> None:
        super().__init__()
        check_heads_divide("channels", channels, heads)
        kernel = attention_kwargs.get("kernel", "auto")
        if global_hop_bias and kernel in PLAIN_SOFTMAX_KERNELS and mode != "dense":
            raise GraphInputError(
                f"kernel={kernel!r} cannot add the global branch's hop bias: pass "
                "global_hop_bias=False, or kernel='auto' to run that branch on the reference "
                "kernel"
            )
        local_only = {
            key: attention_kwargs.pop(key)
            for key in ("attend", "hop_bias")
            if key in attention_kwargs
        }
        common = dict(heads=heads, mode=mode, dropout=attention_dropout, **attention_kwargs)
        self.local = GraphSelfAttention(
            channels, channels, edge_dim=edge_dim, **common, **local_only
        )
        self.global_ = GraphSelfAttention(
            channels, channels, attend="global", hop_bias=global_hop_bias, **common
        )
        self.ffn = feed_forward(channels, ffn_ratio, dropout)
        self.norm_attention = make_norm(norm, channels)
        self.norm_ffn = make_norm(norm, channels)
        self.dropout = Dropout(dropout)

    @property
    def mode(self) -> str:
        return self.local.mode

    @mode.setter
    def mode(self, value: str) -> None:
        self.local.mode = value
        self.global_.mode = value

    def forward(
        self,
        x: Tensor,
        edge_index: Tensor,
        edge_attr: Tensor | LinearEdgeEncoding | None = None,
        batch: Tensor | None = None,
        mode: str | None = None,
    ) -> Tensor:
        normed = self.norm_attention(x)
        local = self.local(normed, edge_index, edge_attr, batch, mode=mode)
        global_ = self.global_(normed, edge_index, None, batch, mode=mode)
        h = x + self.dropout(local) + self.dropout(global_)
        return h + self.dropout(self.ffn(self.norm_ffn(h)))
