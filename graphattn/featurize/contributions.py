"""Per-atom physico-chemical contributions, as extra continuous atom features.

Several classical molecular descriptors are sums of atom contributions; giving the
network the contributions themselves lets attention and a sum readout combine them
per substructure instead of only seeing the whole-molecule totals. The columns, each
divided by a fixed scale so that typical values are of order one:

- ``crippen_logp``: Wildman-Crippen logP contribution (scale 1);
- ``crippen_mr``: Wildman-Crippen molar refractivity contribution (scale 5);
- ``tpsa``: topological polar surface area contribution, Å² (Ertl; scale 20);
- ``labute_asa``: Labute approximate surface area contribution, Å² (scale 10);
- ``gasteiger_charge``: Gasteiger-Marsili partial charge of the atom and its implicit
  hydrogens (scale 0.5);
- ``estate``: electrotopological state index (Kier-Hall; scale 5).

Values RDKit cannot compute become 0. Note that one atom without Gasteiger parameters
(a metal such as tin, platinum or mercury) makes RDKit's Gasteiger charges NaN for its
whole connected fragment, so every atom of that fragment gets charge 0 (and so do the
partial-charge descriptors of ``mol_x``).

They are off by default: on ESOL and FreeSolv, where the model already gets RDKit's
whole-molecule descriptors, they gave no measured gain (`benchmarks/molecules.md`).
"""

from __future__ import annotations

import numpy as np
from rdkit import Chem
from rdkit.Chem import rdMolDescriptors, rdPartialCharges
from rdkit.Chem.EState import EStateIndices

__all__ = ["CONTRIBUTION_NAMES", "atom_contributions"]

CONTRIBUTION_NAMES: tuple[str, ...] = (
    "crippen_logp",
    "crippen_mr",
    "tpsa",
    "labute_asa",
    "gasteiger_charge",
    "estate",
)
_SCALES = np.array([1.0, 5.0, 20.0, 10.0, 0.5, 5.0])


def gasteiger_charges(mol: Chem.Mol) -> list[float]:
    """RDKit's Gasteiger-Marsili partial charge of each atom (NaN for a whole fragment
    with an atom that has no parameters), computed on a copy of ``mol``."""
    copy = Chem.Mol(mol)  # the charges are stored as atom properties: leave `mol` as it was
    rdPartialCharges.ComputeGasteigerCharges(copy)
    return [atom.GetDoubleProp("_GasteigerCharge") for atom in copy.GetAtoms()]


def _additive_columns(mol: Chem.Mol) -> np.ndarray:
    """``[num_atoms, 4]`` unscaled logP, MR, TPSA and charge contributions."""
    logp_mr = np.asarray(rdMolDescriptors._CalcCrippenContribs(mol), dtype=np.float64)
    return np.column_stack(
        [logp_mr.reshape(-1, 2), rdMolDescriptors._CalcTPSAContribs(mol), gasteiger_charges(mol)]
    )


def atom_contributions(mol: Chem.Mol) -> np.ndarray:
    """float32 ``[num_atoms, len(CONTRIBUTION_NAMES)]``, scaled (see the module docs).

    logP, MR, TPSA and charge are computed with every hydrogen explicit, and each
    implicit hydrogen's share is added to its heavy atom, so these columns sum over the
    atoms to the whole-molecule value (``Crippen.MolLogP``, ``Crippen.MolMR``,
    ``CalcTPSA``, the net formal charge). Surface area and E-state are computed on
    ``mol`` as given (for the surface area, RDKit keeps the implicit hydrogens' share
    as one separate whole-molecule term, which is left out).
    """
    num_atoms = mol.GetNumAtoms()
    with_hs = Chem.AddHs(mol)  # keeps atoms 0..num_atoms-1 and appends the hydrogens
    additive = _additive_columns(with_hs)
    per_atom = additive[:num_atoms].copy()
    for index in range(num_atoms, with_hs.GetNumAtoms()):
        heavy = with_hs.GetAtomWithIdx(index).GetNeighbors()[0].GetIdx()
        per_atom[heavy] += additive[index]
    surface = list(rdMolDescriptors._CalcLabuteASAContribs(mol)[0])
    raw = np.column_stack([per_atom[:, :3], surface, per_atom[:, 3], EStateIndices(mol)])
    raw = np.where(np.isfinite(raw), raw, 0.0)
    return (raw / _SCALES).astype(np.float32)
