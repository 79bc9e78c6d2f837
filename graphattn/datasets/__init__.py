"""Data sets: molecule CSV/SDF files, named sets, edge lists and label files."""

from graphattn.datasets.files import DatasetUnavailableError, resolve_file
from graphattn.datasets.molecules import (
    MOLECULE_DATASETS,
    MoleculeCSV,
    MoleculeDataset,
    MoleculeSDF,
    dataset_featurizer,
    load_molecule_dataset,
)
from graphattn.datasets.social import (
    NODE_DATASETS,
    load_node_dataset,
    load_node_graph,
    read_edge_list,
    read_labels,
)

__all__ = [
    "MOLECULE_DATASETS",
    "NODE_DATASETS",
    "DatasetUnavailableError",
    "MoleculeCSV",
    "MoleculeDataset",
    "MoleculeSDF",
    "dataset_featurizer",
    "load_molecule_dataset",
    "load_node_dataset",
    "load_node_graph",
    "read_edge_list",
    "read_labels",
    "resolve_file",
]
