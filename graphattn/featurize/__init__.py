"""From molecules and graphs to ``torch_geometric.data.Data``."""

from graphattn.featurize.graph import from_networkx, structural_features, text_features, to_networkx
from graphattn.featurize.molecule import (
    FeaturizationError,
    InvalidSmilesError,
    MoleculeFeaturizer,
    featurize_smiles,
)

__all__ = [
    "FeaturizationError",
    "InvalidSmilesError",
    "MoleculeFeaturizer",
    "featurize_smiles",
    "from_networkx",
    "structural_features",
    "text_features",
    "to_networkx",
]
