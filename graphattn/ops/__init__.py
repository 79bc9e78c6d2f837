"""Attention kernels and the scatter/segment primitives they are built from."""

from graphattn.ops.attention import dense_attention, edge_scores, reference_edge_attention
from graphattn.ops.fused import edge_attention_weights, fused_edge_attention
from graphattn.ops.gather import gather_edge_attention
from graphattn.ops.graph import EdgeSet, prepare_edges, validate_edge_index
from graphattn.ops.numba_attention import numba_edge_attention
from graphattn.ops.segment import segment_max, segment_normalize, segment_softmax, segment_sum

__all__ = [
    "EdgeSet",
    "dense_attention",
    "edge_attention_weights",
    "edge_scores",
    "fused_edge_attention",
    "gather_edge_attention",
    "numba_edge_attention",
    "prepare_edges",
    "reference_edge_attention",
    "segment_max",
    "segment_normalize",
    "segment_softmax",
    "segment_sum",
    "validate_edge_index",
]
