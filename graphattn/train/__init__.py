"""Training, prediction and evaluation (the CLI is a thin layer over these)."""

from graphattn.train.molecule_inference import (
    TargetScaler,
    evaluate_molecules,
    load_molecule_model,
    predict_molecules,
)
from graphattn.train.molecules import (
    MoleculeTrainConfig,
    WorkerProcessDied,
    train_molecule_model,
)
from graphattn.train.nodes import NodeTrainConfig, train_node_model
from graphattn.train.transfer import load_pretrained_encoder

__all__ = [
    "MoleculeTrainConfig",
    "NodeTrainConfig",
    "TargetScaler",
    "WorkerProcessDied",
    "evaluate_molecules",
    "load_molecule_model",
    "load_pretrained_encoder",
    "predict_molecules",
    "train_molecule_model",
    "train_node_model",
]
