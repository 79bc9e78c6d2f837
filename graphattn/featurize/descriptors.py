"""Whole-molecule RDKit descriptors, as extra inputs to graph-level models.

Chemprop's ``rdkit_2d`` features showed that a few hundred classical descriptors
(logP, polar surface area, ring counts, ...) next to the learned graph representation
help most on small data sets such as ESOL and FreeSolv. graphattn uses RDKit's own
list (``rdkit.Chem.Descriptors.descList``). Values are compressed with a signed
``log1p`` (some descriptors span many orders of magnitude); failed or non-finite
values become 0. Models standardise them with training-set statistics.
"""

from __future__ import annotations

import numpy as np
from rdkit import Chem, rdBase
from rdkit.Chem import Descriptors

__all__ = ["DESCRIPTOR_NAMES", "molecule_descriptors"]

DESCRIPTOR_NAMES: tuple[str, ...] = tuple(name for name, _ in Descriptors.descList)
_FUNCTIONS = tuple(fn for _, fn in Descriptors.descList)


def molecule_descriptors(mol: Chem.Mol) -> np.ndarray:
    """``[len(DESCRIPTOR_NAMES)]`` float32 descriptors of one molecule (signed log1p)."""
    values = np.empty(len(_FUNCTIONS), dtype=np.float64)
    with rdBase.BlockLogs():  # some descriptors note hydrogens they keep ([H+], H2)
        for i, fn in enumerate(_FUNCTIONS):
            try:
                values[i] = fn(mol)
            except (ValueError, RuntimeError, ZeroDivisionError, OverflowError):
                values[i] = np.nan
    values = np.where(np.isfinite(values), values, 0.0)
    return (np.sign(values) * np.log1p(np.abs(values))).astype(np.float32)
