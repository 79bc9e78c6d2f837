"""Molecules (SMILES or RDKit ``Mol``) to PyG graphs with one-hot atom and bond features.

Every atom becomes a node and every bond two directed edges. Atom features are
blocks of one-hot columns (element, degree, formal charge, hydrogen count,
hybridisation) followed by 0/1 flags (aromatic, in a ring); each categorical block
has an ``other`` column for values outside its list, so every block of a row sums
to exactly 1. Bond features are the one-hot bond type (single, double, triple,
aromatic, other) and the flags conjugated and in a ring.

The features are computed from one pass over the atoms and one over the bonds, then
encoded with small numpy lookup tables; no per-feature Python loop runs per atom.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from itertools import chain
from typing import Any

import numpy as np
import torch
from rdkit import Chem, rdBase
from torch_geometric.data import Data

from graphattn.errors import GraphInputError
from graphattn.featurize.contributions import CONTRIBUTION_NAMES, atom_contributions
from graphattn.featurize.descriptors import DESCRIPTOR_NAMES, molecule_descriptors

__all__ = [
    "DEFAULT_ELEMENTS",
    "FeaturizationError",
    "InvalidSmilesError",
    "MoleculeFeaturizer",
    "featurize_smiles",
    "parse_smiles",
    "rdkit_log_lines",
]

DEFAULT_ELEMENTS: tuple[str, ...] = (
    "H", "C", "N", "O", "F", "P", "S", "Cl", "Br", "I", "B", "Si", "Se",
)  # fmt: skip
_HYBRIDIZATION_CODES = {name: int(code) for name, code in Chem.HybridizationType.names.items()}
_BOND_TYPES = ("SINGLE", "DOUBLE", "TRIPLE", "AROMATIC")
_BOND_TYPE_CODES = [int(Chem.BondType.names[name]) for name in _BOND_TYPES]
_PERIODIC_TABLE = Chem.GetPeriodicTable()
_LOG_PREFIX = re.compile(r"^\[\d\d:\d\d:\d\d\]\s*")


class FeaturizationError(GraphInputError):
    """A molecule that could not be featurized (data sets skip it, predictions report it).

    Attributes:
        smiles: the offending input, as given (a molecule's SMILES).
        reason: why.
    """

    what = "cannot featurize"

    def __init__(self, smiles: str, reason: str) -> None:
        self.smiles = smiles
        self.reason = reason
        super().__init__(f"{self.what} {smiles!r}: {reason}")

    def __reduce__(self):
        # pickled (out of a worker process, say) with the arguments __init__ takes: the
        # default would call it with the message alone
        return type(self), (self.smiles, self.reason)


class InvalidSmilesError(FeaturizationError):
    """A SMILES string (or molecule) that RDKit cannot turn into a valid molecule.

    Attributes:
        smiles: the offending input, as given.
        reason: RDKit's explanation, when it gave one.
    """

    what = "invalid SMILES"


def rdkit_log_lines(messages: str, echo: str | None = None) -> list[str]:
    """The distinct messages of a captured RDKit log, without timestamps.

    Args:
        messages (str): the captured text (``rdBase.CaptureErrorLog().messages``).
        echo (str, optional): the input. RDKit repeats it several times (on a line of
            its own with a caret line below, after "while parsing:" and "for input:",
            and in a closing "Failed parsing SMILES" line); every repeat is dropped,
            since the caller's message names the input once.
    """
    lines = [_LOG_PREFIX.sub("", line).strip() for line in messages.splitlines()]
    lines = _without_invariant_details(lines)
    lines = [line.removeprefix("SMILES Parse Error: ").rstrip(":") for line in lines]
    lines = [line.removeprefix("ERROR: ") for line in lines]  # the SD reader's repeats
    if echo is not None:
        lines = [_drop_echo(line, echo) for line in lines]
    lines = [line for line in lines if line.strip("^~ ") and line != echo]
    return [line for i, line in enumerate(lines) if line not in lines[:i]]


def _without_invariant_details(lines: list[str]) -> list[str]:
    """``lines`` with RDKit's invariant reports (between two ``****`` lines) cut to their
    kind and message: the source location, failed expression and stack trace after them
    (dozens of lines of library paths in RDKit >= 2025.09) say nothing about the input."""
    kept, in_report, details = [], False, False
    for line in lines:
        if line == "****":
            in_report, details = not in_report, False
            continue
        details = details or (in_report and line.startswith("Violation occurred on line"))
        if not details:
            kept.append(line)
    return kept


def _drop_echo(line: str, echo: str) -> str:
    """``line`` without RDKit's repeats of the input ``echo`` ("" if it is only that)."""
    if line.startswith("Failed parsing SMILES"):
        return ""
    for suffix in (f" for input: '{echo}'", f" while parsing: {echo}"):
        line = line.removesuffix(suffix)
    return line


def _failure_reason(smiles: str) -> str:
    """Re-parse a SMILES that failed, this time capturing RDKit's error message."""
    capture_cls = getattr(rdBase, "CaptureErrorLog", None)  # RDKit >= 2025.09
    if capture_cls is not None:
        with rdBase.BlockLogs(), capture_cls() as capture:
            Chem.MolFromSmiles(smiles)
        lines = rdkit_log_lines(capture.messages, echo=smiles)
        if lines:
            return "; ".join(lines)
    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(smiles, sanitize=False)
        if mol is None:
            return "SMILES syntax error"
        try:
            Chem.SanitizeMol(mol)
        except Exception as err:  # RDKit raises several unrelated exception types here
            return str(err)
    return "RDKit could not parse it"


_WHITESPACE = re.compile(r"\s")


def _strip_invisible(text: str) -> str:
    """``text`` without whitespace and invisible format characters (a byte-order mark,
    a zero-width space: Unicode category Cf) at either end, as pasted from documents."""
    start, end = 0, len(text)
    while start < end and _invisible(text[start]):
        start += 1
    while end > start and _invisible(text[end - 1]):
        end -= 1
    return text[start:end]


def _invisible(char: str) -> bool:
    return char.isspace() or unicodedata.category(char) == "Cf"


def parse_smiles(smiles: str) -> Chem.Mol:
    """Parse and sanitise a SMILES string with RDKit's defaults, logging nothing.

    Surrounding whitespace and invisible format characters (a byte-order mark, a
    zero-width space) are ignored; whitespace inside is an error (RDKit would read
    only the text before it, taking the rest for a name), and so is a character that is
    not ASCII (such as an en dash pasted from a document: RDKit drops it at either end of
    the string, and elsewhere its error message could not be read). Hydrogens written
    in the SMILES are merged into their heavy atoms where RDKit does so by default.

    Args:
        smiles (str): the SMILES string.

    Returns:
        rdkit.Chem.Mol: the sanitised molecule.

    Raises:
        InvalidSmilesError: the string is empty, unparsable or chemically invalid;
            the message holds the string and RDKit's reason.
        TypeError: ``smiles`` is not a string.
    """
    if not isinstance(smiles, str):
        raise TypeError(f"expected a SMILES string, got {type(smiles).__name__}: {smiles!r}")
    text = _strip_invisible(smiles)
    if not text:
        raise InvalidSmilesError(smiles, "empty SMILES")
    if _WHITESPACE.search(text):
        raise InvalidSmilesError(
            smiles, f"whitespace inside the SMILES (RDKit would read only {text.split()[0]!r})"
        )
    if not text.isascii():  # RDKit drops such characters at either end ("CCé" is ethane)
        char = next(c for c in text if not c.isascii())
        raise InvalidSmilesError(
            smiles, f"{char!r} (U+{ord(char):04X}) is not a SMILES character: SMILES are ASCII"
        )
    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(text)
    if mol is None:
        raise InvalidSmilesError(smiles, _failure_reason(text))
    if mol.GetNumAtoms() == 0:
        raise InvalidSmilesError(smiles, "the molecule has no atoms")
    return mol


def _unsanitised_smiles(mol: Chem.Mol) -> str:
    """A SMILES of a molecule that failed sanitisation, for an error message."""
    try:
        return Chem.MolToSmiles(mol, canonical=False)
    except (RuntimeError, ValueError):
        return f"<a molecule of {mol.GetNumAtoms()} atoms that RDKit cannot write as SMILES>"


@dataclass(frozen=True)
class _OneHotEncoder:
    """Encodes rows of raw integer properties as one-hot blocks followed by 0/1 flags.

    Each block has a lookup table spanning ``min(codes) - 1 .. max(codes) + 1``; a raw
    value is shifted by the table's ``low``, clipped into the table, and read off. The
    table's first and last entries (and any gaps) point at the block's ``other``
    column, so no value falls outside its block. All tables are concatenated, so a
    whole molecule is encoded with a handful of numpy operations.
    """

    block_props: np.ndarray  # [B] column of the raw matrix read by each block
    low: np.ndarray  # [B] code at position 0 of each block's table
    last: np.ndarray  # [B] last position of each block's table
    base: np.ndarray  # [B] start of each block's table in ``table``
    table: np.ndarray  # concatenated tables, holding output columns
    flag_props: np.ndarray  # [F] columns of the raw matrix copied as 0/1 flags
    dim: int

    @classmethod
    def build(
        cls, blocks: list[tuple[int, Sequence[int]]], flag_props: list[int]
    ) -> _OneHotEncoder:
        """From ``(raw column, codes with their own output column)`` pairs and flag columns."""
        tables, low, last, base, width = [], [], [], [], 0
        for _, codes in blocks:
            lo, hi = min(codes) - 1, max(codes) + 1
            table = np.full(hi - lo + 1, width + len(codes), dtype=np.int64)
            table[np.asarray(codes) - lo] = width + np.arange(len(codes))
            base.append(sum(len(t) for t in tables))
            tables.append(table)
            low.append(lo)
            last.append(len(table) - 1)
            width += len(codes) + 1
        return cls(
            block_props=np.array([prop for prop, _ in blocks], dtype=np.int64),
            low=np.array(low, dtype=np.int64),
            last=np.array(last, dtype=np.int64),
            base=np.array(base, dtype=np.int64),
            table=np.concatenate(tables),
            flag_props=np.array(flag_props, dtype=np.int64),
            dim=width + len(flag_props),
        )

    def __call__(self, raw: np.ndarray) -> np.ndarray:
        """Features ``[N, dim]`` (float32) of raw properties ``[N, P]`` (int64)."""
        out = np.zeros((raw.shape[0], self.dim), dtype=np.float32)
        position = np.minimum(np.maximum(raw[:, self.block_props] - self.low, 0), self.last)
        out[np.arange(raw.shape[0])[:, None], self.table[position + self.base]] = 1.0
        if len(self.flag_props):
            out[:, self.dim - len(self.flag_props) :] = raw[:, self.flag_props]
        return out


def _atomic_number(symbol: str) -> int:
    """The atomic number of an element symbol, or an error naming the symbol."""
    try:
        with rdBase.BlockLogs():  # RDKit logs a C++ stack trace for an unknown symbol
            return _PERIODIC_TABLE.GetAtomicNumber(symbol)
    except RuntimeError as err:
        raise GraphInputError(f"elements: unknown element symbol {symbol!r}") from err


@dataclass(frozen=True)
class MoleculeFeaturizer:
    r"""Settings and code to turn a molecule into a :class:`~torch_geometric.data.Data`.

    Atom feature layout (each part present only when its flag is on, in this order):
    ``element=<symbol>`` for each of :attr:`elements` then ``element=other``;
    ``degree=<d>`` ... ``degree=other``; ``formal_charge=<c>`` ... ``formal_charge=other``;
    ``num_hs=<h>`` ... ``num_hs=other`` (hydrogens attached, implicit and explicit);
    ``hybridization=<name>`` ... ``hybridization=other``; ``aromatic``; ``in_ring``;
    then, with ``contributions``, the continuous columns of
    :data:`~graphattn.featurize.contributions.CONTRIBUTION_NAMES`.
    Bond feature layout: ``bond_type=SINGLE|DOUBLE|TRIPLE|AROMATIC|other``,
    ``conjugated``, ``in_ring``. Read the names from :attr:`atom_feature_names` and
    :attr:`bond_feature_names`.

    Args:
        elements (tuple[str, ...]): element symbols with their own column; any other
            element goes to ``element=other``. (default: :obj:`DEFAULT_ELEMENTS`)
        degree (bool): one-hot number of bonded neighbours. (default: :obj:`True`)
        formal_charge (bool): one-hot formal charge. (default: :obj:`True`)
        num_hs (bool): one-hot total number of attached hydrogens. (default: :obj:`True`)
        hybridization (bool): one-hot hybridisation. (default: :obj:`True`)
        aromatic (bool): atom aromaticity flag. (default: :obj:`True`)
        in_ring (bool): atom ring-membership flag. (default: :obj:`True`)
        bond_conjugated (bool): bond conjugation flag. (default: :obj:`True`)
        bond_in_ring (bool): bond ring-membership flag. (default: :obj:`True`)
        contributions (bool): append per-atom physico-chemical contributions (Crippen
            logP and molar refractivity, polar and approximate surface area, Gasteiger
            charge, E-state; :mod:`graphattn.featurize.contributions`) to ``x``.
            (default: :obj:`False`)
        descriptors (bool): also compute RDKit's whole-molecule descriptors
            (:mod:`graphattn.featurize.descriptors`) as ``mol_x [1, D]``.
            (default: :obj:`False`)
        xtb (tuple[str, ...]): xTB models, named ``METHOD/SOLVATION`` (e.g.
            ``"GFN1-xTB/alpb"``; :mod:`graphattn.pretrained.xtb`), whose hydration
            energies in kcal/mol (implicit water minus gas phase, on one ETKDG + MMFF
            conformer of seed 0, atoms in canonical order) become ``mol_x`` columns
            ``xtb:<model>`` after the descriptors. Needs ``tblite`` (``pip install
            'graphattn[xtb]'``) and costs about 0.1 s per molecule for three models. A
            molecule without a 3D embedding, or one xTB fails on, raises
            :class:`FeaturizationError`. (default: ``()``)
        add_hs (bool): add every hydrogen as an explicit node (``Chem.AddHs``). By
            default hydrogens stay implicit, except those RDKit keeps from the SMILES
            (e.g. isotopes such as ``[2H]``). (default: :obj:`False`)
        degrees (tuple[int, ...]): degree values with their own column.
        formal_charges (tuple[int, ...]): formal charges with their own column.
        num_hs_values (tuple[int, ...]): hydrogen counts with their own column.
        hybridizations (tuple[str, ...]): names of ``rdkit.Chem.HybridizationType``
            values with their own column.
    """

    elements: tuple[str, ...] = DEFAULT_ELEMENTS
    degree: bool = True
    formal_charge: bool = True
    num_hs: bool = True
    hybridization: bool = True
    aromatic: bool = True
    in_ring: bool = True
    bond_conjugated: bool = True
    bond_in_ring: bool = True
    add_hs: bool = False
    descriptors: bool = False
    contributions: bool = False
    xtb: tuple[str, ...] = ()
    degrees: tuple[int, ...] = (0, 1, 2, 3, 4, 5)
    formal_charges: tuple[int, ...] = (-2, -1, 0, 1, 2)
    num_hs_values: tuple[int, ...] = (0, 1, 2, 3, 4)
    hybridizations: tuple[str, ...] = ("SP", "SP2", "SP3", "SP3D", "SP3D2")
    _encoders: tuple[_OneHotEncoder, _OneHotEncoder] = field(init=False, repr=False, compare=False)
    _xtb_models: tuple[tuple[str, str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in (
            "elements",
            "degrees",
            "formal_charges",
            "num_hs_values",
            "hybridizations",
            "xtb",
        ):
            value = getattr(self, name)
            if isinstance(value, str):  # tuple("Cl") would be ('C', 'l')
                raise GraphInputError(f"{name} must be a list or tuple, got the string {value!r}")
            object.__setattr__(self, name, tuple(value))
            values = getattr(self, name)
            if name != "xtb" and (not values or len(set(values)) != len(values)):
                raise GraphInputError(f"{name} must be a non-empty list without repeats: {values}")
        if "other" in self.elements:
            raise GraphInputError("elements: do not list 'other', its column is always added")
        numbers = [_atomic_number(symbol) for symbol in self.elements]
        unknown = [name for name in self.hybridizations if name not in _HYBRIDIZATION_CODES]
        if unknown:
            raise GraphInputError(
                f"hybridizations: unknown names {unknown}; known: {sorted(_HYBRIDIZATION_CODES)}"
            )
        object.__setattr__(self, "_xtb_models", self._check_xtb())
        hybridization_codes = [_HYBRIDIZATION_CODES[name] for name in self.hybridizations]
        # (raw property column, on, codes): see _atom_properties and _bond_properties.
        blocks = [
            (0, True, numbers),
            (5, self.degree, self.degrees),
            (1, self.formal_charge, self.formal_charges),
            (2, self.num_hs, self.num_hs_values),
            (3, self.hybridization, hybridization_codes),
        ]
        atom_encoder = _OneHotEncoder.build(
            [(prop, codes) for prop, on, codes in blocks if on],
            [prop for prop, on in ((4, self.aromatic), (6, self.in_ring)) if on],
        )
        bond_encoder = _OneHotEncoder.build(
            [(2, _BOND_TYPE_CODES)],
            [prop for prop, on in ((3, self.bond_conjugated), (4, self.bond_in_ring)) if on],
        )
        object.__setattr__(self, "_encoders", (atom_encoder, bond_encoder))

    def _check_xtb(self) -> tuple[tuple[str, str], ...]:
        """The :attr:`xtb` models as ``(method, solvation)`` pairs, after refusing unknown
        or repeated ones, and xTB models without tblite."""
        if not self.xtb:  # a tuple already (__post_init__)
            return ()
        # imported here: graphattn.pretrained imports graphattn.datasets, which imports this
        from graphattn.pretrained.xtb import parse_xtb_model

        if len(set(self.xtb)) != len(self.xtb):
            raise GraphInputError(f"xtb: a model is listed twice: {self.xtb}")
        try:
            models = tuple(parse_xtb_model(name) for name in self.xtb)
        except ValueError as err:
            raise GraphInputError(f"xtb: {err}") from None
        try:
            import tblite.interface  # noqa: F401
        except ImportError as err:
            raise ImportError(
                f"the xTB features {', '.join(self.xtb)} need tblite: pip install 'graphattn[xtb]'"
            ) from err
        return models

    # ----------------------------------------------------------------- feature names
    @property
    def atom_feature_names(self) -> list[str]:
        """Names of the columns of ``x``, in order."""
        names = [f"element={e}" for e in self.elements] + ["element=other"]
        for flag, prefix, values in (
            (self.degree, "degree", self.degrees),
            (self.formal_charge, "formal_charge", self.formal_charges),
            (self.num_hs, "num_hs", self.num_hs_values),
            (self.hybridization, "hybridization", self.hybridizations),
        ):
            if flag:
                names += [f"{prefix}={v}" for v in values] + [f"{prefix}=other"]
        names += [name for name in ("aromatic", "in_ring") if getattr(self, name)]
        return names + (list(CONTRIBUTION_NAMES) if self.contributions else [])

    @property
    def bond_feature_names(self) -> list[str]:
        """Names of the columns of ``edge_attr``, in order."""
        names = [f"bond_type={t}" for t in _BOND_TYPES] + ["bond_type=other"]
        if self.bond_conjugated:
            names.append("conjugated")
        if self.bond_in_ring:
            names.append("in_ring")
        return names

    @property
    def atom_dim(self) -> int:
        """Number of atom features (columns of ``x``)."""
        return len(self.atom_feature_names)

    @property
    def bond_dim(self) -> int:
        """Number of bond features (columns of ``edge_attr``)."""
        return len(self.bond_feature_names)

    # ----------------------------------------------------------------- persistence
    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON-serialisable plain types (for checkpoints)."""
        settings = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        return {key: list(v) if isinstance(v, tuple) else v for key, v in settings.items()}

    @classmethod
    def from_dict(cls, settings: dict[str, Any]) -> MoleculeFeaturizer:
        """Rebuild a featurizer from :meth:`to_dict`'s output.

        Args:
            settings (dict): field name -> value; missing fields take their default.

        Raises:
            GraphInputError: an unknown setting name.
        """
        known = {f.name for f in fields(cls) if f.init}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise GraphInputError(f"unknown featurizer settings {unknown}; known: {sorted(known)}")
        return cls(**settings)

    # ----------------------------------------------------------------- featurizing
    def __call__(self, smiles_or_mol: str | Chem.Mol) -> Data:
        """Featurize one molecule.

        Args:
            smiles_or_mol (str or rdkit.Chem.Mol): a SMILES string or a sanitised molecule
                (explicit hydrogens are made implicit first, as a SMILES is parsed).

        Returns:
            torch_geometric.data.Data: with ``x`` float32 ``[num_atoms, atom_dim]``,
            ``edge_index`` long ``[2, 2 * num_bonds]`` (columns ``2k`` and ``2k + 1`` are
            the two directions of bond ``k``), ``edge_attr`` float32
            ``[2 * num_bonds, bond_dim]``, ``smiles`` (canonical SMILES, without the
            hydrogens added by ``add_hs``) and ``num_nodes``; with ``descriptors`` or
            ``xtb``, also ``mol_x`` float32 ``[1, mol_dim]`` (see :attr:`mol_feature_names`).

        Raises:
            InvalidSmilesError: empty, unparsable or invalid SMILES, a molecule that
                fails RDKit's sanitisation, or one without atoms.
            FeaturizationError: the xTB energies failed (no 3D embedding, xTB error).
            TypeError: neither a string nor an RDKit molecule.
        """
        if isinstance(smiles_or_mol, Chem.Mol):
            if smiles_or_mol.GetNumAtoms() == 0:
                raise InvalidSmilesError("", "the molecule has no atoms")
            # explicit hydrogens become implicit, as in a parsed SMILES: the same
            # molecule gives the same graph, SMILES and descriptors either way
            with rdBase.BlockLogs():  # RDKit notes the hydrogens it keeps (e.g. H2)
                try:  # RemoveHs sanitises: a molecule read with sanitize=False may fail
                    mol = Chem.RemoveHs(smiles_or_mol)
                except Chem.MolSanitizeException as err:
                    raise InvalidSmilesError(_unsanitised_smiles(smiles_or_mol), str(err)) from None
        else:
            mol = parse_smiles(smiles_or_mol)
        canonical = Chem.MolToSmiles(mol)
        heavy = mol
        if self.add_hs:
            mol = Chem.AddHs(mol)
        x, edge_index, edge_attr = self._features(mol)
        data = Data(
            x=torch.from_numpy(x),
            edge_index=torch.from_numpy(edge_index),
            edge_attr=torch.from_numpy(edge_attr),
            smiles=canonical,
            num_nodes=x.shape[0],
        )
        columns = [molecule_descriptors(heavy)] if self.descriptors else []
        if self.xtb:
            columns.append(self._xtb_energies(smiles_or_mol, canonical))
        if columns:
            data.mol_x = torch.from_numpy(np.concatenate(columns)).unsqueeze(0)
        return data

    def _xtb_energies(self, given: str | Chem.Mol, canonical: str) -> np.ndarray:
        """float32 ``[len(xtb)]`` hydration energies (kcal/mol) of the :attr:`xtb` models."""
        from graphattn.pretrained.xtb import PLAUSIBLE_KCAL, xtb_hydration_energies

        smiles = given if isinstance(given, str) else canonical
        models = self._xtb_models
        # The conformer depends on the atom order: embed in canonical order, so that
        # every way of writing a molecule gets the same energies.
        canonical_order = Chem.MolFromSmiles(canonical)
        try:
            energies = xtb_hydration_energies(canonical_order, models)
        except (ValueError, RuntimeError) as err:  # no 3D embedding; xTB did not converge
            raise FeaturizationError(smiles, f"xTB energies failed: {err}") from None
        values = np.array([energies[m] for m in models], dtype=np.float32)
        implausible = [
            f"{n} {v:.4g}" for n, v in zip(self.xtb, values, strict=True) if abs(v) > PLAUSIBLE_KCAL
        ]
        if implausible:
            raise FeaturizationError(
                smiles, f"xTB gave implausible hydration energies (kcal/mol): {implausible}"
            )
        return values

    @property
    def mol_feature_names(self) -> list[str]:
        """Names of the columns of ``mol_x``, in order: the RDKit descriptors (with
        ``descriptors``), then ``xtb:<model>`` for each :attr:`xtb` model."""
        names = list(DESCRIPTOR_NAMES) if self.descriptors else []
        return names + [f"xtb:{name}" for name in self.xtb]

    @property
    def mol_dim(self) -> int:
        """Width of ``mol_x`` (0 without descriptors and xTB energies)."""
        return len(self.mol_feature_names)

    def _features(self, mol: Chem.Mol) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``x`` float32 ``[num_atoms, atom_dim]``, ``edge_index`` int64 ``[2, 2 * num_bonds]``
        and ``edge_attr`` float32 ``[2 * num_bonds, bond_dim]`` of a molecule."""
        rings = mol.GetRingInfo()
        bonds = _bond_properties(mol, rings.BondRings())
        x = self._encoders[0](_atom_properties(mol, bonds, rings.AtomRings()))
        if self.contributions:
            x = np.concatenate([x, atom_contributions(mol)], axis=1)
        edge_index = np.empty((2, 2 * bonds.shape[0]), dtype=np.int64)
        edge_index[0, 0::2] = edge_index[1, 1::2] = bonds[:, 0]
        edge_index[0, 1::2] = edge_index[1, 0::2] = bonds[:, 1]
        return x, edge_index, np.repeat(self._encoders[1](bonds), 2, axis=0)


def _in_rings(size: int, rings: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """0/1 int64 ``[size]``: whether each atom (or bond) index occurs in ``rings``."""
    flags = np.zeros(size, dtype=np.int64)
    if rings:
        flags[list(chain.from_iterable(rings))] = 1
    return flags


def _atom_properties(
    mol: Chem.Mol, bonds: np.ndarray, rings: tuple[tuple[int, ...], ...]
) -> np.ndarray:
    """Raw integer properties ``[num_atoms, 7]``: atomic number, formal charge, attached
    hydrogens, hybridisation code, aromatic, degree, in a ring.

    Degree (explicit bonds) and ring membership come from ``bonds`` (see
    :func:`_bond_properties`) and the ring info's atom rings, not from one RDKit call
    per atom."""
    num_atoms = mol.GetNumAtoms()
    props = np.empty((num_atoms, 7), dtype=np.int64)
    props[:, :5] = np.array(
        [
            (
                atom.GetAtomicNum(),
                atom.GetFormalCharge(),
                atom.GetTotalNumHs(True),
                int(atom.GetHybridization()),
                atom.GetIsAromatic(),
            )
            for atom in map(mol.GetAtomWithIdx, range(num_atoms))
        ],
        dtype=np.int64,
    ).reshape(-1, 5)
    props[:, 5] = np.bincount(bonds[:, :2].ravel(), minlength=num_atoms)
    props[:, 6] = _in_rings(num_atoms, rings)
    return props


def _bond_properties(mol: Chem.Mol, rings: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """Raw integer properties ``[num_bonds, 5]``: begin atom, end atom, bond type code,
    conjugated, in a ring (from the ring info's bond rings)."""
    num_bonds = mol.GetNumBonds()
    props = np.empty((num_bonds, 5), dtype=np.int64)
    props[:, :4] = np.array(
        [
            (
                bond.GetBeginAtomIdx(),
                bond.GetEndAtomIdx(),
                int(bond.GetBondType()),
                bond.GetIsConjugated(),
            )
            for bond in map(mol.GetBondWithIdx, range(num_bonds))
        ],
        dtype=np.int64,
    ).reshape(-1, 4)
    props[:, 4] = _in_rings(num_bonds, rings)
    return props


def featurize_smiles(smiles: str | Chem.Mol, featurizer: MoleculeFeaturizer | None = None) -> Data:
    """Featurize one molecule with ``featurizer`` (default settings when ``None``).

    Args:
        smiles (str or rdkit.Chem.Mol): the molecule.
        featurizer (MoleculeFeaturizer, optional): the settings to use.

    Returns:
        torch_geometric.data.Data: see :meth:`MoleculeFeaturizer.__call__`.
    """
    return (featurizer if featurizer is not None else _DEFAULT)(smiles)


_DEFAULT = MoleculeFeaturizer()
