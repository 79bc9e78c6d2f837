"""Layers built on edge-restricted self-attention."""

from graphattn.nn.attention import DenseMemoryError, GraphSelfAttention
from graphattn.nn.dropout import Dropout
from graphattn.nn.edge_features import LinearEdgeEncoding
from graphattn.nn.encodings import PositionalEncoder
from graphattn.nn.hybrid import HybridLayer
from graphattn.nn.transformer import GraphTransformerLayer

__all__ = [
    "DenseMemoryError",
    "Dropout",
    "GraphSelfAttention",
    "GraphTransformerLayer",
    "HybridLayer",
    "LinearEdgeEncoding",
    "PositionalEncoder",
]
