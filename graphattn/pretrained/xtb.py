"""Computed hydration energies (GFN2-xTB, ALPB implicit water): pretraining labels.

Needs the optional ``tblite`` package (``pip install graphattn[xtb]``); only
rebuilding the shipped encoder uses it, never training or prediction.
"""

from __future__ import annotations

import numpy as np
from rdkit import Chem
from rdkit.Chem import AllChem

__all__ = ["HARTREE_TO_KCAL", "corpus_molecule_ok", "xtb_hydration_energy"]

HARTREE_TO_KCAL = 627.509474
_ANGSTROM_TO_BOHR = 1 / 0.52917721067
MAX_HEAVY_ATOMS = 40


def corpus_molecule_ok(mol: Chem.Mol) -> bool:
    """Like FreeSolv's molecules: one fragment, no net charge, at most 40 heavy atoms."""
    return (
        len(Chem.GetMolFrags(mol)) == 1
        and Chem.GetFormalCharge(mol) == 0
        and mol.GetNumHeavyAtoms() <= MAX_HEAVY_ATOMS
    )


def _conformer(mol: Chem.Mol, seed: int) -> Chem.Mol:
    mol = Chem.AddHs(mol)
    params = AllChem.ETKDGv3()
    params.randomSeed = seed
    if AllChem.EmbedMolecule(mol, params) != 0:
        params.useRandomCoords = True
        if AllChem.EmbedMolecule(mol, params) != 0:
            raise ValueError(f"RDKit could not embed {Chem.MolToSmiles(mol)} in 3D")
    AllChem.MMFFOptimizeMolecule(mol, maxIters=2000)
    return mol


def xtb_hydration_energy(mol: Chem.Mol, seed: int = 0) -> float:
    """GFN2-xTB energy in ALPB water minus in the gas phase, kcal/mol, on one conformer.

    Args:
        mol: the molecule (hydrogens implicit or explicit).
        seed: seed of the ETKDG embedding.

    Raises:
        ImportError: ``tblite`` is not installed.
        ValueError: no 3D embedding was found.
    """
    try:
        from tblite.interface import Calculator
    except ImportError as err:
        raise ImportError("xTB labels need tblite: pip install 'graphattn[xtb]'") from err
    mol = _conformer(mol, seed)
    numbers = np.array([atom.GetAtomicNum() for atom in mol.GetAtoms()])
    positions = mol.GetConformer().GetPositions() * _ANGSTROM_TO_BOHR
    energies = []
    for solvated in (False, True):
        calc = Calculator("GFN2-xTB", numbers, positions, charge=float(Chem.GetFormalCharge(mol)))
        calc.set("verbosity", 0)
        if solvated:
            calc.add("alpb-solvation", "water")
        energies.append(calc.singlepoint().get("energy"))
    return (energies[1] - energies[0]) * HARTREE_TO_KCAL
