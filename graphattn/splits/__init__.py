"""Seeded splits: random and scaffold splits of molecules, node masks of a graph."""

from graphattn.splits.molecules import load_split, random_split, save_split, scaffold_split
from graphattn.splits.nodes import fixed_train_masks, node_split_masks

__all__ = [
    "fixed_train_masks",
    "load_split",
    "node_split_masks",
    "random_split",
    "save_split",
    "scaffold_split",
]
