"""Models: graph-level molecule predictors and per-node classifiers."""

from graphattn.models.molecule import MoleculeEnsemble, MoleculeModel, MoleculeModelConfig
from graphattn.models.node import NodeClassifier, NodeModelConfig
from graphattn.models.readout import Readout

__all__ = [
    "MoleculeEnsemble",
    "MoleculeModel",
    "MoleculeModelConfig",
    "NodeClassifier",
    "NodeModelConfig",
    "Readout",
]
