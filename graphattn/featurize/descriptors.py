"""Whole-molecule RDKit descriptors, as extra inputs to graph-level models.

Chemprop's ``rdkit_2d`` features showed that a few hundred classical descriptors
(logP, polar surface area, ring counts, ...) next to the learned graph representation
help most on small data sets such as ESOL and FreeSolv. graphattn uses RDKit's own
list (``rdkit.Chem.Descriptors.descList``). Values are compressed with a signed
``log1p`` (some descriptors span many orders of magnitude); failed or non-finite
values become 0. Models standardise them with training-set statistics. ``Ipc`` and
``AvgIpc`` come from :func:`_information_content`, which is faster than RDKit's on large
molecules, and the four partial-charge descriptors from :func:`_partial_charge_extremes`,
which do not depend on the atom order.
"""

from __future__ import annotations

import contextlib

import numpy as np
from rdkit import Chem, rdBase
from rdkit.Chem import Descriptors
from rdkit.ML.InfoTheory import entropy
from scipy import sparse

from graphattn.featurize.contributions import gasteiger_charges

__all__ = ["DESCRIPTOR_NAMES", "molecule_descriptors"]

DESCRIPTOR_NAMES: tuple[str, ...] = tuple(name for name, _ in Descriptors.descList)
# Ipc and AvgIpc are computed together, by _information_content.
_INFORMATION_CONTENT = ("Ipc", "AvgIpc")
# Computed together, by _partial_charge_extremes, in this order.
_PARTIAL_CHARGES = (
    "MaxPartialCharge",
    "MinPartialCharge",
    "MaxAbsPartialCharge",
    "MinAbsPartialCharge",
)
_OTHERS = tuple(
    (i, fn)
    for i, (name, fn) in enumerate(Descriptors.descList)
    if name not in _INFORMATION_CONTENT + _PARTIAL_CHARGES
)


def _columns(names: tuple[str, ...]) -> tuple[int, ...] | None:
    """The columns of ``names``, or None in an RDKit whose list lacks one of them."""
    if not set(names) <= set(DESCRIPTOR_NAMES):
        return None
    return tuple(DESCRIPTOR_NAMES.index(name) for name in names)


_IPC_COLUMNS = _columns(_INFORMATION_CONTENT)
_CHARGE_COLUMNS = _columns(_PARTIAL_CHARGES)
_ERRORS = (ValueError, RuntimeError, ZeroDivisionError, OverflowError)


def molecule_descriptors(mol: Chem.Mol) -> np.ndarray:
    """``[len(DESCRIPTOR_NAMES)]`` float32 descriptors of one molecule (signed log1p)."""
    values = np.full(len(DESCRIPTOR_NAMES), np.nan)
    # BlockLogs: some descriptors note hydrogens they keep ([H+], H2). errstate: the
    # large values of very large molecules overflow, and are replaced by 0 below.
    with rdBase.BlockLogs(), np.errstate(all="ignore"):
        for i, fn in _OTHERS:
            with contextlib.suppress(_ERRORS):
                values[i] = fn(mol)
        if _IPC_COLUMNS is not None:
            with contextlib.suppress(_ERRORS):
                values[list(_IPC_COLUMNS)] = _information_content(mol)
        if _CHARGE_COLUMNS is not None:
            with contextlib.suppress(_ERRORS):
                values[list(_CHARGE_COLUMNS)] = _partial_charge_extremes(mol)
    values = np.where(np.isfinite(values), values, 0.0)
    return (np.sign(values) * np.log1p(np.abs(values))).astype(np.float32)


def _partial_charge_extremes(mol: Chem.Mol) -> tuple[float, float, float, float]:
    """RDKit's ``MaxPartialCharge``, ``MinPartialCharge``, ``MaxAbsPartialCharge`` and
    ``MinAbsPartialCharge``, from the Gasteiger charges, whatever the atom order.

    RDKit folds Python's ``min``/``max`` over the atoms in order; an atom without
    Gasteiger parameters (a metal) makes its fragment's charges NaN, and the result was
    then NaN or the extreme of the atoms after the last NaN one: ``CCO.C[Sn](C)(C)C`` and
    ``C[Sn](C)(C)C.CCO`` differed. Here any NaN charge makes all four NaN (0 in the
    features), as RDKit gives when a NaN atom comes last.
    """
    charges = np.array(gasteiger_charges(mol))
    if charges.size == 0 or not np.isfinite(charges).all():
        return (np.nan,) * 4
    low, high = float(charges.min()), float(charges.max())
    return high, low, max(abs(low), abs(high)), min(abs(low), abs(high))


def _information_content(mol: Chem.Mol) -> tuple[float, float]:
    """RDKit's ``Ipc`` and ``AvgIpc``, from one characteristic polynomial.

    Both are the information content of the coefficients of the characteristic polynomial
    of the adjacency matrix (Bonchev and Trinajstic, 1977). RDKit computes the polynomial
    once for each, by the Le Verrier-Faddeev recurrence with n dense n x n products:
    O(n^4), 28 of the 37 s that all descriptors took for an 836-atom peptide. Here the
    same recurrence multiplies by the sparse adjacency matrix (O(n^3)), once: 1.5 s. The
    float32 descriptors equal RDKit's on every ESOL and FreeSolv molecule and the first
    3,000 of RDKit's NCI set. Above about 80 atoms the float64 recurrence is dominated by
    rounding in either implementation, and the two differ by up to a few percent.
    """
    n = mol.GetNumAtoms()
    adjacency = sparse.csr_matrix(Chem.GetAdjacencyMatrix(mol).astype(np.float64))
    coefficients = np.zeros(n + 1)
    coefficients[0] = 1.0
    product = adjacency.toarray()  # A B_{k-1}, with B_0 = I
    diagonal = np.diag_indices(n)
    for k in range(1, n + 1):
        coefficients[k] = np.trace(product) / k
        product[diagonal] -= coefficients[k]  # B_k = A B_{k-1} - c_k I
        product = adjacency @ product
    magnitudes = np.abs(coefficients)  # the recurrence's sign flips do not matter here
    information = entropy.InfoEntropy(magnitudes)
    return sum(magnitudes) * information, information
