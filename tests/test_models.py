"""Model configs and inputs: round trips, option checks, dtypes."""

from __future__ import annotations

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
