"""Computed hydration energies (GFN2-xTB or GFN1-xTB, implicit water).

They are the labels of the shipped pretrained encoders and, opt-in, whole-molecule
inputs (``MoleculeFeaturizer(xtb=...)``). Needs the optional ``tblite`` package
(``pip install graphattn[xtb]``); the default featurizers and models never use it.
A model is named ``METHOD/SOLVATION``, e.g. ``GFN1-xTB/alpb``
(:func:`parse_xtb_model`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rdkit import Chem
from rdkit.Chem import AllChem

__all__ = [
    "HARTREE_TO_KCAL",
    "PLAUSIBLE_KCAL",
    "SOLVATION_MODELS",
    "XTB_METHODS",
    "check_xtb_models",
    "parse_xtb_model",
    "conformer_seeds",
    "corpus_molecule_ok",
    "xtb_hydration_energies",
    "xtb_hydration_energy",
]

HARTREE_TO_KCAL = 627.509474
_ANGSTROM_TO_BOHR = 1 / 0.52917721067
MAX_HEAVY_ATOMS = 40
# no hydration energy comes near this (FreeSolv spans -26 to +4 kcal/mol); a failed
# SCF can end with such an energy instead of an error
PLAUSIBLE_KCAL = 200.0
XTB_METHODS = ("GFN2-xTB", "GFN1-xTB")
# tblite's implicit-solvent models with parameters for water (per method)
SOLVATION_MODELS = ("alpb", "gbsa")


def corpus_molecule_ok(mol: Chem.Mol) -> bool:
    """Like FreeSolv's molecules: one fragment, no net charge, at most 40 heavy atoms."""
    return (
        len(Chem.GetMolFrags(mol)) == 1
        and Chem.GetFormalCharge(mol) == 0
        and mol.GetNumHeavyAtoms() <= MAX_HEAVY_ATOMS
    )


def conformer_seeds(count: int) -> list[int]:
    """Seeds of ``count`` different conformers, 0 (the pretraining labels') first.

    RDKit's ETKDG embeds seeds 0 and 1 alike, so 1 is left out.
    """
    return [0, *range(2, count + 1)]


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


def check_xtb_models(models: Sequence[tuple[str, str]]) -> None:
    """Raise ``ValueError`` naming the first ``(method, solvation)`` pair tblite lacks."""
    for method, solvation in models:
        if method not in XTB_METHODS or solvation not in SOLVATION_MODELS:
            raise ValueError(
                f"unknown xTB model {method}/{solvation}: methods are {', '.join(XTB_METHODS)}, "
                f"solvation models {', '.join(SOLVATION_MODELS)}"
            )


def parse_xtb_model(name: str) -> tuple[str, str]:
    """``"METHOD/SOLVATION"`` (e.g. ``"GFN1-xTB/alpb"``) as a ``(method, solvation)`` pair.

    Raises:
        ValueError: not of that form, or a method or solvation model tblite lacks.
    """
    method, slash, solvation = name.partition("/")
    if not slash:
        raise ValueError(f"xTB model {name!r}: expected METHOD/SOLVATION, e.g. GFN1-xTB/alpb")
    check_xtb_models([(method, solvation)])
    return method, solvation


def xtb_hydration_energies(
    mol: Chem.Mol, models: Sequence[tuple[str, str]], seed: int = 0
) -> dict[tuple[str, str], float]:
    """Energy in implicit water minus in the gas phase, kcal/mol, of each
    ``(method, solvation)`` in ``models``, all on one conformer (ETKDG, then MMFF).

    Args:
        mol: the molecule (hydrogens implicit or explicit).
        models: pairs of an :data:`XTB_METHODS` and a :data:`SOLVATION_MODELS` entry.
        seed: seed of the ETKDG embedding (0 and 1 give the same conformer; see
            :func:`conformer_seeds`).

    Raises:
        ImportError: ``tblite`` is not installed.
        ValueError: an unknown method or solvation model; no 3D embedding was found.
    """
    check_xtb_models(models)
    try:
        from tblite.interface import Calculator
    except ImportError as err:
        raise ImportError("xTB labels need tblite: pip install 'graphattn[xtb]'") from err
    mol = _conformer(mol, seed)
    numbers = np.array([atom.GetAtomicNum() for atom in mol.GetAtoms()])
    positions = mol.GetConformer().GetPositions() * _ANGSTROM_TO_BOHR
    charge = float(Chem.GetFormalCharge(mol))

    def energy(method: str, solvation: str | None) -> float:
        calc = Calculator(method, numbers, positions, charge=charge)
        calc.set("verbosity", 0)
        if solvation is not None:
            calc.add(f"{solvation}-solvation", "water")
        return calc.singlepoint().get("energy")

    gas = {method: energy(method, None) for method in dict.fromkeys(m for m, _ in models)}
    return {
        (method, solvation): float((energy(method, solvation) - gas[method]) * HARTREE_TO_KCAL)
        for method, solvation in models
    }


def xtb_hydration_energy(
    mol: Chem.Mol, seed: int = 0, method: str = "GFN2-xTB", solvation: str = "alpb"
) -> float:
    """One model's hydration energy, kcal/mol (:func:`xtb_hydration_energies`).

    The defaults, GFN2-xTB in ALPB water, made the labels of the shipped
    ``xtb-hydration`` encoder.
    """
    return xtb_hydration_energies(mol, [(method, solvation)], seed)[(method, solvation)]
