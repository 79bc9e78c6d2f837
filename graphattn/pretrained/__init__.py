"""Graph encoders that ship with graphattn, for transfer learning (``init_from``).

Both are the default FreeSolv architecture (3 x 64-wide transformer layers, bond
features in attention, FreeSolv's atom and bond features, no descriptor inputs) trained
to predict the GFN2-xTB implicit-solvent hydration energy (ALPB water minus gas phase,
one ETKDG + MMFF conformer; :mod:`graphattn.pretrained.xtb`) of molecules with one
fragment and no net charge. Computed labels only, no experimental value of any
benchmark. ``benchmarks/pretraining.py --targets xtb`` rebuilds them;
``benchmarks/molecules.md`` has the figures.

- ``xtb-hydration-57k``: the FreeSolv default starts from it. 57,537 molecules: those
  of ``xtb-hydration`` and 42,975 FreeSolv-like ones (only C H N O S P F Cl Br I, at
  most 24 heavy atoms, none of FreeSolv's) from the PubChem identifier table of the
  ``chemicals`` package; 60 epochs (``--corpus rdkit+chemicals``).
- ``xtb-hydration``: 14,562 RDKit-shipped molecules (at most 40 heavy atoms), 60
  epochs; the FreeSolv default before ``xtb-hydration-57k``.
"""

from __future__ import annotations

from pathlib import Path

from graphattn.datasets.files import sha256sum
from graphattn.errors import GraphInputError

__all__ = ["PRETRAINED_ENCODERS", "pretrained_encoder_path"]

_HERE = Path(__file__).parent

# name -> (file in this folder, sha256 of the file)
PRETRAINED_ENCODERS: dict[str, tuple[str, str]] = {
    "xtb-hydration-57k": (
        "xtb_hydration_57k.pt",
        "fddadfd463bd37fd40aa598ae8abf3b97e8720d7df050b454a8ab8be878544b6",
    ),
    "xtb-hydration": (
        "xtb_hydration.pt",
        "1194991a22672af3bc4e3adfa9dcc6a7303354538bf51505a95a467404501766",
    ),
}


def pretrained_encoder_path(name: str) -> Path:
    """The checkpoint of a shipped encoder, its checksum verified.

    Raises:
        KeyError: ``name`` is not a shipped encoder (the message lists them).
        GraphInputError: the file does not match its checksum (a damaged install).
    """
    if name not in PRETRAINED_ENCODERS:
        raise KeyError(
            f"no shipped encoder named {name!r}; shipped: {', '.join(PRETRAINED_ENCODERS)}"
        )
    filename, sha256 = PRETRAINED_ENCODERS[name]
    path = _HERE / filename
    digest = sha256sum(path)
    if digest != sha256:
        raise GraphInputError(f"{path} has sha256 {digest}, expected {sha256}: reinstall graphattn")
    return path
