"""Edge-restricted attention in a few lines: sparse and dense modes, attention weights.

Run: python examples/quickstart_attention.py
"""

import torch

from graphattn.nn import GraphSelfAttention, GraphTransformerLayer

torch.manual_seed(0)
x = torch.randn(5, 16)  # 5 nodes with 16 features
edge_index = torch.tensor([[0, 1, 2, 3, 4], [1, 2, 3, 4, 0]])  # a directed 5-cycle

attention = GraphSelfAttention(16, 32, heads=4)
sparse = attention(x, edge_index)  # [5, 32], scatter/segment kernels on the edge list
dense = attention(x, edge_index, mode="dense")  # the same weights, N x N scores + mask
print("sparse == dense:", torch.allclose(sparse, dense, atol=1e-5))

weights = attention.attention_matrix(x, edge_index)[0, 0]  # graph 0, head 0: [5, 5]
print("head 0 weights (row = target, column = source):")
print(weights.round(decimals=3))  # zero wherever there is no edge; rows sum to 1

block = GraphTransformerLayer(32, heads=4)  # attention + feed-forward, residuals, norms
print("transformer block output:", tuple(block(sparse, edge_index).shape))
