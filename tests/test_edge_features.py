"""LinearEdgeEncoding: composing the bond encoder with each layer's edge map changes no value."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch_geometric.data import Batch

from graphattn.errors import GraphInputError
from graphattn.featurize import MoleculeFeaturizer
from graphattn.models import MoleculeModel, MoleculeModelConfig
from graphattn.nn import GraphSelfAttention, HybridLayer, LinearEdgeEncoding
from graphattn.ops.graph import prepare_edges
from tests.graphs import random_batch, random_graph

RAW, CHANNELS = 5, 8


def inputs(seed: int = 0, encoder_bias: bool = True):
    """A batch with duplicates, input self-loops and isolated nodes, in float64."""
    torch.manual_seed(seed)
    edge_index, batch = random_batch([7, 5, 9], edges_per_node=2, seed=seed)
    x = torch.randn(batch.numel(), CHANNELS, dtype=torch.float64, requires_grad=True)
    raw = torch.rand(edge_index.size(1), RAW, dtype=torch.float64)
    encoder = nn.Linear(RAW, CHANNELS, bias=encoder_bias).double()
    return x, edge_index, batch, raw, encoder


def outputs_and_grads(layer: nn.Module, x, edge_index, batch, edge_attr, params) -> list:
    out = layer(x, edge_index, edge_attr, batch)
    weights = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(1))
    grads = torch.autograd.grad((out * weights).sum(), [x, *params])
    return [out, *grads]


LAYERS = {
    "gather": dict(kernel="gather"),
    "fused": dict(kernel="fused"),
    "reference": dict(kernel="reference"),
    "dense": dict(mode="dense"),
    "khop": dict(hops=2),  # prepared pairs without an input edge get lin_edge(0)
    "no_self_loops": dict(add_self_loops=False),
    "no_bias": dict(bias=False),
}


@pytest.mark.parametrize("encoder_bias", [True, False], ids=["encoder_bias", "no_encoder_bias"])
@pytest.mark.parametrize("options", list(LAYERS))
def test_same_values_and_gradients_as_the_encoded_features(options, encoder_bias) -> None:
    x, edge_index, batch, raw, encoder = inputs(encoder_bias=encoder_bias)
    torch.manual_seed(2)
    layer = GraphSelfAttention(CHANNELS, CHANNELS, heads=2, edge_dim=CHANNELS, **LAYERS[options])
    layer.double()
    params = [*encoder.parameters(), *layer.parameters()]
    lazy = LinearEdgeEncoding(raw, encoder)
    got = outputs_and_grads(layer, x, edge_index, batch, lazy, params)
    want = outputs_and_grads(layer, x, edge_index, batch, encoder(raw), params)
    assert len(got) == len(want) == 2 + len(params)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, atol=1e-10, rtol=1e-10)


def test_gradient_reaches_raw_features_that_need_one() -> None:
    x, edge_index, batch, raw, encoder = inputs()
    raw.requires_grad_(True)
    layer = GraphSelfAttention(CHANNELS, CHANNELS, heads=2, edge_dim=CHANNELS).double()
    for _ in range(2):  # nothing cached across calls: the second backward works too
        (g_lazy,) = torch.autograd.grad(
            layer(x, edge_index, LinearEdgeEncoding(raw, encoder), batch).sum(), raw
        )
    (g_plain,) = torch.autograd.grad(layer(x, edge_index, encoder(raw), batch).sum(), raw)
    torch.testing.assert_close(g_lazy, g_plain, atol=1e-10, rtol=1e-10)


def test_gradient_reaches_raw_features_after_a_pass_without_one() -> None:
    # an inference pass caches the prepared inputs; once raw needs a gradient (e.g. to
    # attribute a prediction to bond features) the cached copy must not be served
    x, edge_index, batch, raw, encoder = inputs()
    layer = GraphSelfAttention(CHANNELS, CHANNELS, heads=2, edge_dim=CHANNELS).double()
    with torch.no_grad():
        layer(x, edge_index, LinearEdgeEncoding(raw, encoder), batch)
    raw.requires_grad_(True)
    (g_lazy,) = torch.autograd.grad(
        layer(x, edge_index, LinearEdgeEncoding(raw, encoder), batch).sum(), raw
    )
    (g_plain,) = torch.autograd.grad(layer(x, edge_index, encoder(raw), batch).sum(), raw)
    torch.testing.assert_close(g_lazy, g_plain, atol=1e-10, rtol=1e-10)
    assert g_plain.abs().sum() > 0


def test_molecule_model_bond_gradients_after_a_prediction() -> None:
    featurizer = MoleculeFeaturizer()
    batch = Batch.from_data_list([featurizer(s) for s in ("CCO", "c1ccccc1N")])
    torch.manual_seed(0)
    model = MoleculeModel(
        MoleculeModelConfig(atom_dim=featurizer.atom_dim, bond_dim=featurizer.bond_dim)
    ).eval()
    with torch.no_grad():
        before = model(batch)
    batch.edge_attr.requires_grad_(True)
    after = model(batch)
    torch.testing.assert_close(after.detach(), before)
    (grad,) = torch.autograd.grad(after.sum(), batch.edge_attr)
    assert grad.abs().sum() > 0


def test_molecule_model_predicts_a_batch_made_under_inference_mode() -> None:
    # inference tensors have no version counter, which both caches (prepared edges,
    # prepared raw bond features) key on: such a batch is prepared anew, not a crash
    featurizer = MoleculeFeaturizer()
    smiles = ("CCO", "c1ccccc1N", "CC(=O)O")
    torch.manual_seed(0)
    model = MoleculeModel(
        MoleculeModelConfig(atom_dim=featurizer.atom_dim, bond_dim=featurizer.bond_dim)
    ).eval()
    with torch.no_grad():
        expected = model(Batch.from_data_list([featurizer(s) for s in smiles]))
    with torch.inference_mode():
        batch = Batch.from_data_list([featurizer(s) for s in smiles])
        assert batch.edge_index.is_inference() and batch.edge_attr.is_inference()
        torch.testing.assert_close(model(batch), expected)
        batch.edge_attr.mul_(2.0)  # an in-place edit of the bond features is seen
        assert not torch.allclose(model(batch), expected)


def test_prepared_inputs_are_built_once_per_graph_and_follow_in_place_changes() -> None:
    x, edge_index, batch, raw, encoder = inputs()
    layer = GraphSelfAttention(CHANNELS, CHANNELS, heads=2, edge_dim=CHANNELS).double()
    edges = layer.allowed_edges(edge_index, x.size(0), batch)
    lazy = LinearEdgeEncoding(raw, encoder)
    first = lazy._prepared_inputs(edges, torch.float64)
    assert lazy._prepared_inputs(edges, torch.float64) is first
    assert first.shape == (edges.num_edges, RAW + 2)
    # the indicator column: 1 on prepared edges with an input edge, 0 on added loops
    torch.testing.assert_close(first[:, RAW], (edges.input_count > 0).double())

    raw.mul_(2.0)  # an in-place change must not serve the stale cache
    with torch.no_grad():
        got = layer(x, edge_index, lazy, batch)
        want = layer(x, edge_index, encoder(raw), batch)
    torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-10)


def test_hybrid_layer_and_materialize() -> None:
    x, edge_index, batch, raw, encoder = inputs()
    torch.manual_seed(3)
    layer = HybridLayer(CHANNELS, 2, edge_dim=CHANNELS).double().eval()
    lazy = LinearEdgeEncoding(raw, encoder)
    torch.testing.assert_close(lazy.materialize(), encoder(raw))
    with torch.no_grad():
        got = layer(x, edge_index, lazy, batch)
        want = layer(x, edge_index, encoder(raw), batch)
    torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-10)


def test_molecule_model_matches_the_layers_fed_encoded_bonds() -> None:
    featurizer = MoleculeFeaturizer()
    smiles = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", "C#N", "O"]  # "O": no bonds
    data = Batch.from_data_list([featurizer(s) for s in smiles])
    torch.manual_seed(0)
    config = MoleculeModelConfig(atom_dim=data.x.size(1), bond_dim=data.edge_attr.size(1))
    model = MoleculeModel(config).eval()
    with torch.no_grad():
        h = model.atom_encoder(data.x)
        encoded = model.bond_encoder(data.edge_attr.float())
        for layer in model.layers:
            h = layer(h, data.edge_index, encoded, data.batch)
        want = model.head(model.readout(model.final_norm(h), data.batch, int(data.num_graphs)))
        got = model(data)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_bad_shapes_name_the_problem() -> None:
    x, edge_index, batch, raw, encoder = inputs()
    with pytest.raises(GraphInputError, match=r"shape \[E, 5\]"):
        LinearEdgeEncoding(raw[:, :3], encoder)
    layer = GraphSelfAttention(CHANNELS, CHANNELS, heads=2, edge_dim=4).double()
    with pytest.raises(GraphInputError, match="encodes 8 features but this layer has edge_dim=4"):
        layer(x, edge_index, LinearEdgeEncoding(raw, encoder), batch)
    layer = GraphSelfAttention(CHANNELS, CHANNELS, heads=2, edge_dim=CHANNELS).double()
    with pytest.raises(GraphInputError, match=r"has \d+ rows but edge_index has \d+ edges"):
        layer(x, edge_index, LinearEdgeEncoding(raw[:-1], encoder), batch)


def test_edges_without_input_edges_get_only_the_layer_bias() -> None:
    """Added self-loops carry lin_edge(0): the encoder's bias must not reach them."""
    edge_index = random_graph(6, 8, torch.Generator().manual_seed(0), self_loops=0)
    raw = torch.rand(edge_index.size(1), RAW, dtype=torch.float64)
    encoder = nn.Linear(RAW, CHANNELS).double()
    linear = nn.Linear(CHANNELS, CHANNELS).double()
    edges = prepare_edges(edge_index, 6)
    terms = LinearEdgeEncoding(raw, encoder).project(edges, linear)
    loops = edges.input_count == 0
    assert bool(loops.any())
    torch.testing.assert_close(terms[loops], linear.bias.expand(int(loops.sum()), -1))
    want = linear(edges.merge_edge_features(encoder(raw)))[~loops]
    torch.testing.assert_close(terms[~loops], want, atol=1e-12, rtol=1e-12)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu() -> None:
    """On CUDA (the Triton kernel by default) the encoding gives the CPU result."""
    x, edge_index, batch, raw, encoder = inputs()
    layer = GraphSelfAttention(CHANNELS, CHANNELS, heads=2, edge_dim=CHANNELS).double()
    with torch.no_grad():
        expected = layer(x, edge_index, LinearEdgeEncoding(raw, encoder), batch)
    layer, encoder = layer.float().cuda(), encoder.float().cuda()
    lazy = LinearEdgeEncoding(raw.float().cuda(), encoder)
    cuda_inputs = [t.cuda() for t in (x.detach().float(), edge_index, batch)]
    got = layer(cuda_inputs[0], cuda_inputs[1], lazy, cuda_inputs[2])
    want = layer(cuda_inputs[0], cuda_inputs[1], encoder(lazy.raw), cuda_inputs[2])
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got.double().cpu(), expected, atol=1e-4, rtol=1e-4)
