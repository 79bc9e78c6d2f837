"""Model configs and inputs: round trips, option checks, dtypes."""

from __future__ import annotations

import re

import pytest
import torch
from torch_geometric.data import Batch

from graphattn.errors import GraphInputError
from graphattn.featurize import MoleculeFeaturizer
from graphattn.models import MoleculeModel, MoleculeModelConfig
from graphattn.models.node import NodeClassifier, NodeModelConfig

FEATURIZER = MoleculeFeaturizer()


def small_config(**changes) -> MoleculeModelConfig:
    return MoleculeModelConfig(
        FEATURIZER.atom_dim, FEATURIZER.bond_dim, hidden=16, layers=1, heads=2, **changes
    )


def test_a_config_dict_without_readout_keeps_the_default_architecture():
    source = MoleculeModel(small_config())
    saved = source.config.to_dict()
    del saved["readout"]
    rebuilt = MoleculeModel(MoleculeModelConfig.from_dict(saved))
    rebuilt.load_state_dict(source.state_dict())  # same shapes: mean + max
    assert rebuilt.config.readout == MoleculeModelConfig.readout


def test_an_unknown_task_is_refused_by_name():
    with pytest.raises(GraphInputError, match=r"task must be one of .* got 'regresion'"):
        small_config(task="regresion")


def test_a_positional_encoding_missing_from_the_data_is_named():
    model = MoleculeModel(small_config(pe="lap", pe_dim=4))
    batch = Batch.from_data_list([FEATURIZER("CCO"), FEATURIZER("c1ccccc1")])
    with pytest.raises(GraphInputError, match=r"pe='lap' needs data.lap_pe: apply"):
        model(batch)
    transform = model.pe_transform()
    batch = Batch.from_data_list([transform(FEATURIZER(s)) for s in ("CCO", "c1ccccc1")])
    assert model(batch).shape == (2, 1)


def test_label_inputs_follow_the_feature_dtype():
    config = NodeModelConfig(4, 3, hidden=8, heads=2, label_inputs=True)
    model = NodeClassifier(config).double()
    x = torch.randn(5, 4, dtype=torch.float64)
    edge_index = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]])
    out = model(x, edge_index, torch.tensor([0, -1, 2, -1, 1]))
    assert out.dtype == torch.float64 and out.shape == (5, 3)


def test_the_head_input_is_the_pooled_vector_next_to_the_scaled_descriptors():
    featurizer = MoleculeFeaturizer(descriptors=True)
    config = small_config(mol_dim=featurizer.mol_dim)
    model = MoleculeModel(config).eval()
    batch = Batch.from_data_list([featurizer(s) for s in ("CCO", "c1ccccc1O", "CC(=O)N")])
    model.fit_descriptor_scaler(batch.mol_x)
    head_input = model.head_input(batch)
    width = model.readout.out_channels
    assert head_input.shape == (3, width + featurizer.mol_dim)
    pooled = model.readout(model.node_embeddings(batch), batch.batch, 3)
    torch.testing.assert_close(head_input[:, :width], pooled)
    scaled = ((batch.mol_x - batch.mol_x.mean(0)) / batch.mol_x.std(0).clamp(min=1e-6)).clamp(-6, 6)
    torch.testing.assert_close(head_input[:, width:], scaled)
    torch.testing.assert_close(model(batch), model.head(head_input))


def test_a_single_molecule_is_predicted_without_changing_the_callers_data():
    featurizer = MoleculeFeaturizer()
    single, other = featurizer("CCO"), featurizer("c1ccccc1O")
    model = MoleculeModel(small_config()).eval()
    alone = model(single)
    assert single.batch is None  # it used to be set, and then Batch.from_data_list failed
    batched = model(Batch.from_data_list([single, other]))
    torch.testing.assert_close(batched[:1], alone)


def test_known_labels_are_refused_where_they_would_be_ignored_or_out_of_range():
    x, edge_index = torch.randn(6, 5), torch.tensor([[0, 1, 2, 3, 4], [1, 2, 3, 4, 5]])
    plain = NodeClassifier(NodeModelConfig(5, 3, hidden=8, heads=2)).eval()
    with pytest.raises(GraphInputError, match="built without label_inputs and would ignore"):
        plain(x, edge_index, known_labels=torch.zeros(6, dtype=torch.long))
    with_labels = NodeClassifier(NodeModelConfig(5, 3, hidden=8, heads=2, label_inputs=True))
    with pytest.raises(GraphInputError, match=r"class indices 0..2 or -1 .unknown., got values"):
        with_labels(x, edge_index, known_labels=torch.full((6,), 3))
    assert with_labels(x, edge_index, known_labels=torch.full((6,), -1)).shape == (6, 3)


@pytest.mark.parametrize(
    ("make", "taken"),
    [
        (lambda: small_config(attention={"dropout": 0.1}), "['dropout']"),
        (lambda: small_config(attention={"mode": "dense", "heads": 2}), "['heads', 'mode']"),
        (lambda: NodeModelConfig(5, 3, attention={"edge_dim": 4}), "['edge_dim']"),
    ],
)
def test_attention_options_that_the_config_sets_itself_are_refused(make, taken):
    with pytest.raises(GraphInputError, match=rf"sets {re.escape(taken)}, which \w+ sets itself"):
        make()
    assert NodeModelConfig(5, 3, attention={"ffn_ratio": 4.0}).attention == {"ffn_ratio": 4.0}


def test_a_model_with_bond_features_names_graphs_without_them():
    model = MoleculeModel(small_config()).eval()
    data = FEATURIZER("CCO")
    del data.edge_attr  # a graph built by hand without bond features
    with pytest.raises(GraphInputError, match=r"reads 7 bond features \(data.edge_attr\)"):
        model(data)  # was AttributeError: 'NoneType' object has no attribute 'dim'
    config = MoleculeModelConfig(FEATURIZER.atom_dim, FEATURIZER.bond_dim, layers=0)
    baseline = MoleculeModel(config).eval()
    with pytest.raises(GraphInputError, match=r"data.edge_attr"):
        baseline(data)


def test_descriptors_of_the_wrong_shape_are_named():
    featurizer = MoleculeFeaturizer(descriptors=True)
    model = MoleculeModel(small_config(mol_dim=featurizer.mol_dim)).eval()
    batch = Batch.from_data_list([featurizer(s) for s in ("CCO", "c1ccccc1O")])
    assert model(batch).shape == (2, 1)
    width = featurizer.mol_dim
    for mol_x in (batch.mol_x[:, :-2], batch.mol_x[:1], batch.mol_x.flatten()):
        batch.mol_x = mol_x  # another descriptor set, or one row for two graphs
        expected, got = f"data.mol_x must have shape [2, {width}]", f"got {list(mol_x.shape)}"
        with pytest.raises(GraphInputError, match=f"{re.escape(expected)}.*{re.escape(got)}"):
            model(batch)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool, torch.uint8, torch.int16])
def test_known_labels_that_are_not_integer_class_indices_are_named(dtype):
    x, edge_index = torch.randn(4, 5), torch.tensor([[0, 1, 2], [1, 2, 3]])
    model = NodeClassifier(NodeModelConfig(5, 3, hidden=8, heads=2, label_inputs=True))
    labels = torch.tensor([0, 1, 1, 2]).to(dtype)
    with pytest.raises(GraphInputError, match=rf"int64 \(or int32\) .* got {dtype}"):
        model(x, edge_index, known_labels=labels)  # was an IndexError from the indexing
    assert model(x, edge_index, known_labels=labels.long().int()).shape == (4, 3)


@pytest.mark.parametrize("ratio", [-1, 0, 0.01, "2", float("nan")])
def test_a_feed_forward_ratio_without_a_hidden_unit_is_named(ratio):
    from graphattn.nn import GraphTransformerLayer, HybridLayer
    from graphattn.train.molecules import MoleculeTrainConfig, check_train_config

    message = rf"ffn_ratio must be a number > 0 .*round\(ffn_ratio \* 16\) >= 1\), got {ratio!r}"
    for build in (
        lambda: small_config(ffn_ratio=ratio),
        lambda: GraphTransformerLayer(16, 2, ffn_ratio=ratio),
        lambda: HybridLayer(16, 2, ffn_ratio=ratio),
        lambda: check_train_config(MoleculeTrainConfig(model={"hidden": 16, "ffn_ratio": ratio})),
    ):  # -1 was a RuntimeError (negative dimension), 0 and 0.01 a zero-width block
        with pytest.raises(GraphInputError, match=message):
            build()
    assert GraphTransformerLayer(16, 2, ffn_ratio=0.04).ffn[0].out_features == 1
