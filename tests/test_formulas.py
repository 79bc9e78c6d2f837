"""The layers against their formulas written out by hand, node by node.

The other tests compare kernels and modes with each other; all of them share the score
scale, the projections, the head concatenation, the residual paths and the readouts, so
a change to any of these would move every side at once. Here each is computed from
the weights with plain loops over nodes and heads.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from graphattn.models.readout import Readout
from graphattn.nn import GraphSelfAttention, GraphTransformerLayer

# 5 nodes; node 4 has no incoming edge; 0 -> 1 is given twice (the edge set counts once)
EDGE_INDEX = torch.tensor([[0, 0, 1, 2, 3, 0, 2], [1, 1, 2, 1, 1, 2, 0]])
EDGE_ATTR = torch.tensor(
    [[1.0, 0.0], [1.0, 0.0], [0.5, 2.0], [0.0, 1.0], [-1.0, 0.5], [0.3, 0.3], [2.0, -1.0]],
    dtype=torch.float64,
)


def by_hand(layer: GraphSelfAttention, x: torch.Tensor, edge_attr=None) -> torch.Tensor:
    """``W_O [head_1 | ... | head_H] + b_O`` with ``head_h(i) = sum_j alpha_ij (v_j + e_ij)``
    and ``alpha_ij = softmax_j((q_i . (k_j + e_ij)) / sqrt(d))`` over the sources of i
    (without self-loops: the layer is built with ``add_self_loops=False``)."""
    heads, d = layer.heads, layer.head_dim
    q, k, v = (lin(x) for lin in (layer.lin_query, layer.lin_key, layer.lin_value))
    edges = {}  # (source, target) -> edge feature, duplicates averaged
    for e, (j, i) in enumerate(EDGE_INDEX.t().tolist()):
        edges.setdefault((j, i), []).append(e)
    rows = []
    for i in range(x.size(0)):
        sources = sorted(j for (j, t) in edges if t == i)
        head_outputs = []
        for h in range(heads):
            cols = slice(h * d, (h + 1) * d)
            terms = []
            for j in sources:
                e = torch.zeros(layer.out_channels, dtype=x.dtype)
                if edge_attr is not None:
                    e = layer.lin_edge(edge_attr[edges[(j, i)]].mean(0))
                terms.append(
                    (q[i, cols] @ (k[j, cols] + e[cols]) / math.sqrt(d), v[j, cols] + e[cols])
                )
            if not terms:
                head_outputs.append(torch.zeros(d, dtype=x.dtype))
                continue
            weights = torch.softmax(torch.stack([s for s, _ in terms]), 0)
            head_outputs.append(
                sum(w * value for w, (_, value) in zip(weights, terms, strict=True))
            )
        rows.append(layer.lin_out(torch.cat(head_outputs)))  # heads in order, then W_O
    return torch.stack(rows)


@pytest.mark.parametrize("mode", ["sparse", "dense"])
@pytest.mark.parametrize("edge_dim", [None, 2])
def test_layer_matches_its_formula(mode, edge_dim):
    torch.manual_seed(0)
    x = torch.randn(5, 6, dtype=torch.float64)
    layer = GraphSelfAttention(6, 8, heads=2, edge_dim=edge_dim, add_self_loops=False)
    layer.double()
    edge_attr = EDGE_ATTR if edge_dim else None
    with torch.no_grad():
        got = layer(x, EDGE_INDEX, edge_attr, mode=mode)
        want = by_hand(layer, x, edge_attr)
    torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-12)


def test_transformer_block_is_two_pre_norm_residual_branches():
    torch.manual_seed(1)
    x = torch.randn(5, 8, dtype=torch.float64)
    block = GraphTransformerLayer(8, 2, ffn_ratio=2, add_self_loops=False).double().eval()
    with torch.no_grad():
        attended = by_hand(block.attention, block.norm_attention(x))
        h = x + attended
        ffn = block.ffn
        want = h + ffn[3](nn.functional.gelu(ffn[0](block.norm_ffn(h))))
        torch.testing.assert_close(block(x, EDGE_INDEX), want, atol=1e-12, rtol=1e-12)


def test_readouts_pool_each_graph_by_hand():
    x = torch.tensor([[1.0, -2.0], [3.0, 0.0], [-1.0, 5.0], [2.0, 2.0], [0.0, -1.0]])
    batch = torch.tensor([0, 0, 0, 1, 1])
    pooled = Readout(2, ("mean", "sum", "max"))(x, batch, num_graphs=3)  # graph 2 is empty
    for b in range(2):
        members = x[batch == b]
        want = torch.cat([members.mean(0), members.sum(0), members.amax(0)])
        torch.testing.assert_close(pooled[b], want)
    assert pooled.shape == (3, 6) and not pooled[2].any()


@pytest.mark.parametrize("kernel", ["reference", "gather", "fused", "auto"])
def test_scores_in_the_thousands_stay_finite(kernel):
    # exp(1000) overflows float64: the segment softmax must subtract each node's maximum
    torch.manual_seed(2)
    x = 200 * torch.randn(5, 6, dtype=torch.float64)
    layer = GraphSelfAttention(6, 8, heads=2, add_self_loops=False, kernel=kernel).double()
    with torch.no_grad():
        q, k = layer.lin_query(x), layer.lin_key(x)
        assert (q @ k.T).abs().max() / math.sqrt(4) > 1000
        got = layer(x, EDGE_INDEX)
        torch.testing.assert_close(got, by_hand(layer, x), atol=1e-9, rtol=1e-9)
