"""Graph-level readouts: pool node vectors ``[N, C]`` into graph vectors ``[B, C']``."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch_geometric.nn import AttentionalAggregation
from torch_geometric.nn.pool import global_add_pool, global_max_pool, global_mean_pool

from graphattn.errors import GraphInputError

__all__ = ["READOUTS", "Readout"]

READOUTS = ("mean", "sum", "max", "attention")


class Readout(nn.Module):
    """Concatenate one or more poolings of the node vectors of each graph.

    Args:
        channels: node width C.
        kinds: pooling names from ``("mean", "sum", "max", "attention")``; the output
            width is ``len(kinds) * C``. ``"attention"`` is a learned softmax gate over
            each graph's nodes (PyG's ``AttentionalAggregation``).

    Shapes:
        - input: x ``[N, C]``, batch ``[N]`` (graph of each node), num_graphs B (an int;
          a graph without nodes gets a row of zeros)
        - output: ``[B, len(kinds) * C]``, the poolings side by side in ``kinds`` order
    """

    def __init__(self, channels: int, kinds: tuple[str, ...] | list[str] = ("mean",)) -> None:
        super().__init__()
        unknown = [k for k in kinds if k not in READOUTS]
        if unknown or not kinds:
            raise GraphInputError(f"readout must be a non-empty subset of {READOUTS}, got {kinds}")
        self.kinds = tuple(kinds)
        self.attention = (
            AttentionalAggregation(
                nn.Sequential(nn.Linear(channels, channels), nn.GELU(), nn.Linear(channels, 1))
            )
            if "attention" in kinds
            else None
        )
        self.out_channels = channels * len(self.kinds)

    def forward(self, x: Tensor, batch: Tensor, num_graphs: int) -> Tensor:
        pools = {
            "mean": lambda: global_mean_pool(x, batch, num_graphs),
            "sum": lambda: global_add_pool(x, batch, num_graphs),
            "max": lambda: global_max_pool(x, batch, num_graphs),
            "attention": lambda: self.attention(x, batch, dim_size=num_graphs),
        }
        return torch.cat([pools[k]() for k in self.kinds], dim=-1)
