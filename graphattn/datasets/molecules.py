"""Molecular property data sets: molecules from CSV or SDF files as featurized graphs.

All loaders share :class:`MoleculeDataset`, which featurizes a stream of records
(data row, SMILES or molecule, targets) and keeps account of every row it drops:
rows whose molecule cannot be parsed and rows whose target is not a number are
listed in :attr:`MoleculeDataset.skipped` (and can be written to ``skipped.csv``),
never silently lost. Empty target cells are kept as ``NaN`` (a missing label, to be
masked in the loss).

Named data sets (:data:`MOLECULE_DATASETS`, loaded with :func:`load_molecule_dataset`):

* ``esol``: aqueous solubility, 1128 molecules (file found by
  :func:`graphattn.datasets.files.resolve_file`);
* ``freesolv``: hydration free energy, 642 molecules (same);
* ``nci-tpsa``: topological polar surface area of the first 5000 NCI molecules, read
  from the copy that ships inside RDKit (no download).

Cards with sources, citations and checksums are in the repository's ``datasets/``.
"""

from __future__ import annotations

import csv
import gzip
import logging
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from rdkit import Chem, RDConfig, rdBase
from torch.utils.data import Dataset
from torch_geometric.data import Data
from tqdm.auto import tqdm

from graphattn.datasets.csv_file import MISSING_TARGET_CELLS, CsvRows
from graphattn.datasets.files import resolve_file, sha256sum
from graphattn.errors import GraphInputError
from graphattn.featurize.molecule import (
    FeaturizationError,
    MoleculeFeaturizer,
    rdkit_log_lines,
)

__all__ = [
    "MISSING_TARGET_CELLS",
    "MOLECULE_DATASETS",
    "MoleculeCSV",
    "MoleculeDataset",
    "MoleculeDatasetInfo",
    "MoleculeRecord",
    "MoleculeSDF",
    "SkippedRow",
    "column_index",
    "dataset_featurizer",
    "describe_row",
    "graph_key",
    "write_skipped_rows",
    "load_molecule_dataset",
    "nci_tpsa_path",
    "parse_target",
]

logger = logging.getLogger(__name__)


def describe_row(row: int, detail: str) -> str:
    """How messages name a data row: ``"data row N, counted from 0: detail"``."""
    return f"data row {row}, counted from 0: {detail}"


@dataclass(frozen=True)
class SkippedRow:
    """A data row that was not turned into a graph.

    Attributes:
        row: 0-based index of the data row (header, comment and blank lines not counted).
        smiles: the row's SMILES as read ("" when there is none).
        reason: why it was skipped.
    """

    row: int
    smiles: str
    reason: str

    def __str__(self) -> str:
        return describe_row(self.row, self.reason)


@dataclass(frozen=True)
class MoleculeRecord:
    """One data row to featurize.

    Attributes:
        row: 0-based index of the data row.
        molecule: a SMILES string or an RDKit molecule (``None``: an unreadable entry).
        targets: one value per target column, ``NaN`` where missing.
    """

    row: int
    molecule: str | Chem.Mol | None
    targets: tuple[float, ...]


def write_skipped_rows(skipped: Iterable[SkippedRow], path: str | Path) -> Path:
    """Write ``skipped`` rows as CSV with columns ``row,smiles,reason`` (the header even
    when there are none) to ``path``, a file or an existing folder (``skipped.csv`` in
    it); returns the file written."""
    path = Path(path)
    if path.is_dir():
        path = path / "skipped.csv"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["row", "smiles", "reason"])
        writer.writerows((s.row, s.smiles, s.reason) for s in skipped)
    return path


class MoleculeDataset(Dataset):
    r"""Featurized molecules with their targets, built from a stream of records.

    Each item is a :class:`~torch_geometric.data.Data` as made by the featurizer
    (``x``, ``edge_index``, ``edge_attr``, ``smiles``, ``num_nodes``) plus ``y``
    (float32 ``[1, T]``, ``NaN`` = missing) and ``row`` (the 0-based data row it came
    from). Items are stored once; do not modify them in place.

    Args:
        records (Iterable[MoleculeRecord | SkippedRow]): the data rows in file order;
            a :class:`SkippedRow` is a row the reader already rejected. A record whose
            molecule is ``None`` (what RDKit's file readers give for an entry they
            cannot read) or fails featurization is skipped and counted.
        target_cols (Sequence[str]): names of the ``T`` targets.
        featurizer (MoleculeFeaturizer, optional): when ``None``, the default settings
            (``MoleculeFeaturizer()``: graph features only).
        name (str, optional): a name for messages. (default: ``"molecules"``)
        progress (bool): show a progress bar (rows read, and their rate) while
            featurizing. (default: ``False``)

    Attributes:
        skipped (list[SkippedRow]): rows that were dropped, with the reason.
        num_rows_read (int): data rows read (kept + skipped).
        smiles (list[str]): canonical SMILES of the kept rows.
        rows (list[int]): data row index of each kept item.
        duplicates (list[tuple[int, ...]]): the data rows of each molecule that occurs in
            more than one kept row (the same graph: canonical SMILES equal up to
            stereochemistry, see :func:`graph_key`), in file order; a warning names them.
            A random split can put copies of one molecule in training and test, a scaffold
            split cannot.
        targets (torch.Tensor): float32 ``[num_kept, T]``.
    """

    def __init__(
        self,
        records: Iterable[MoleculeRecord | SkippedRow],
        target_cols: Sequence[str],
        featurizer: MoleculeFeaturizer | None = None,
        name: str | None = None,
        progress: bool = False,
    ) -> None:
        self.featurizer = featurizer if featurizer is not None else MoleculeFeaturizer()
        self.target_cols = list(target_cols)
        self.name = name or "molecules"
        self.skipped: list[SkippedRow] = []
        self._items: list[Data] = []
        self.num_rows_read = 0
        given: list[tuple[float, ...]] = []  # the kept targets as read, in float64
        with tqdm(records, f"featurize {self.name}", unit=" rows", disable=not progress) as bar:
            for record in bar:
                self.num_rows_read += 1
                item = self._featurize(record)
                if item is not None:
                    self._items.append(item)
                    given.append(record.targets)
        self.smiles = [item.smiles for item in self._items]
        self.rows = [item.row for item in self._items]
        self.targets = (
            torch.cat([item.y for item in self._items])
            if self._items
            else torch.empty(0, len(self.target_cols))
        )
        if given:
            self._warn_float32_rounding(np.asarray(given, dtype=np.float64))
        groups = _repeated_graphs(self.smiles)
        self.duplicates = [tuple(self.rows[i] for i in group) for group in groups]
        if groups:
            logger.warning(
                "%s: %d %s in more than one row (%d rows; the same graph: SMILES equal up "
                "to stereochemistry, which the graph features do not encode; e.g. data rows "
                "%s: %s); a random split can put copies of one molecule in training and test "
                "(a scaffold split cannot); in Python: .duplicates",
                self.name,
                len(groups),
                "molecule occurs" if len(groups) == 1 else "molecules occur",
                sum(map(len, groups)),
                ", ".join(map(str, self.duplicates[0])),
                self.smiles[groups[0][0]],
            )
        if self.skipped:
            logger.warning(
                "%s: skipped %d of %d rows (e.g. %s); all of them are listed in skipped.csv "
                "(graphattn train run folder; in Python: .skipped, write_skipped())",
                self.name,
                len(self.skipped),
                self.num_rows_read,
                self.skipped[0],
            )

    def _featurize(self, record: MoleculeRecord | SkippedRow) -> Data | None:
        """The graph of one record, or ``None`` after recording why it was skipped."""
        if isinstance(record, SkippedRow):
            self.skipped.append(record)
            return None
        if len(record.targets) != len(self.target_cols):
            found = f"{len(record.targets)} targets, expected {len(self.target_cols)}"
            raise GraphInputError(
                f"{self.name}: {describe_row(record.row, f'{found} ({self.target_cols})')}"
            )
        if record.molecule is None:  # what RDKit's file readers give for an unreadable entry
            self.skipped.append(SkippedRow(record.row, "", "no molecule (None)"))
            return None
        try:
            data = self.featurizer(record.molecule)
        except FeaturizationError as err:  # invalid SMILES, failed xTB energies
            self.skipped.append(SkippedRow(record.row, _as_text(record.molecule), err.reason))
            return None
        data.y = torch.tensor(record.targets, dtype=torch.float32).reshape(1, -1)
        data.row = record.row
        return data

    def _warn_float32_rounding(self, given: np.ndarray) -> None:
        """Warn for each target whose values float32 (the precision of ``y`` and of
        training) rounds by more than 0.1% of their spread: values such as ``1e7 + x``
        lose ``x``'s digits, silently otherwise."""
        stored = self.targets.double().numpy()
        for t, column in enumerate(self.target_cols):
            known = ~np.isnan(given[:, t])
            if known.sum() < 2:
                continue
            spread = float(np.std(given[known, t]))
            rounding = float(np.max(np.abs(stored[known, t] - given[known, t])))
            size = float(np.max(np.abs(given[known, t])))
            if spread <= 1e-9 * size:  # a constant column (np.std of 0.1s is 1.4e-17)
                continue
            if rounding > 1e-3 * spread:
                tiny = size < _FLOAT32_TINY
                logger.warning(
                    "%s: target %r is stored in float32, which rounds its values by up "
                    "to %.3g against a spread (standard deviation) of %.3g: %s before "
                    "training",
                    self.name,
                    column,
                    rounding,
                    spread,
                    "rescale the column (multiply it by a power of ten)"
                    if tiny
                    else "subtract a constant (e.g. its mean) from the column",
                )

    @property
    def num_targets(self) -> int:
        """Number of targets ``T``."""
        return len(self.target_cols)

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: int) -> Data:
        """The ``index``-th kept molecule (negative indices count from the end)."""
        return self._items[index]

    def __iter__(self) -> Iterator[Data]:
        return iter(self._items)

    def write_skipped(self, path: str | Path) -> Path:
        """Write the skipped rows as CSV with columns ``row,smiles,reason``.

        The header is written even when nothing was skipped.

        Args:
            path (str or Path): the file, or an existing folder to write
                ``skipped.csv`` into.

        Returns:
            Path: the file written.
        """
        return write_skipped_rows(self.skipped, path)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.name!r}, {len(self)} molecules, "
            f"{len(self.skipped)} skipped, targets={self.target_cols})"
        )


def graph_key(smiles: str) -> str:
    """A canonical SMILES without its stereochemistry, which the graph features do not
    encode: stereoisomers give one key (``C/C=C/C=O`` and ``CC=CC=O``: ``CC=CC=O``).
    A SMILES without stereo marks is its own key."""
    if not any(mark in smiles for mark in "@/\\"):
        return smiles
    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        return smiles
    Chem.RemoveStereochemistry(mol)
    return Chem.MolToSmiles(mol)


def _repeated_graphs(smiles: Sequence[str]) -> list[list[int]]:
    """The positions of each graph (:func:`graph_key`) met more than once, in order."""
    positions: dict[str, list[int]] = {}
    for i, text in enumerate(smiles):
        positions.setdefault(graph_key(text), []).append(i)
    return [found for found in positions.values() if len(found) > 1]


def _as_text(molecule: str | Chem.Mol) -> str:
    """A molecule as text for a skip report: the SMILES as given, or a molecule's SMILES."""
    if isinstance(molecule, str):
        return molecule
    return Chem.MolToSmiles(molecule)


# A decimal number as CSV files write it; Python's float() also takes "1_000" and "inf".
_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


_FLOAT32_MAX = float(torch.finfo(torch.float32).max)
_FLOAT32_TINY = float(torch.finfo(torch.float32).tiny)  # smallest normal, 1.2e-38


def parse_target(text: str | None, column: str) -> float:
    """A target cell as a float: a :data:`MISSING_TARGET_CELLS` cell (empty, ``nan``,
    ``NA``, ``N/A``, ``#N/A``, ``<NA>``, ``null``, ``None``; any case) means missing
    (``NaN``).

    Raises:
        ValueError: the cell is neither missing nor a finite decimal number.
    """
    text = (text or "").strip()
    if text.lower() in MISSING_TARGET_CELLS:
        return math.nan
    if not _NUMBER.fullmatch(text):
        infinite = text.lstrip("+-").lower() in ("inf", "infinity")
        raise ValueError(
            f"target {column!r} is {'not finite' if infinite else 'not a number'}: {text!r}"
        )
    value = float(text)
    if math.isinf(value):  # 1e999
        raise ValueError(f"target {column!r} is not finite: {text!r}")
    if abs(value) > _FLOAT32_MAX:  # targets are stored as float32, where it is inf
        raise ValueError(f"target {column!r} is beyond float32's range (3.4e38): {text!r}")
    return value


def _target_list(target_cols: str | Sequence[str]) -> list[str]:
    """The target column names, stripped as columns are matched, each named once."""
    targets = [target_cols] if isinstance(target_cols, str) else list(target_cols)
    targets = [name.strip() for name in targets]
    repeated = sorted({name for name in targets if targets.count(name) > 1})
    if repeated:
        raise GraphInputError(f"target column(s) {repeated} named more than once")
    return targets


def column_index(header: list[str], column: str, path: str | Path) -> int:
    """Position of ``column`` in ``header``, ignoring surrounding whitespace.

    Raises:
        GraphInputError: the column is not there, or is there more than once.
    """
    matches = [i for i, name in enumerate(header) if name.strip() == column.strip()]
    if len(matches) == 1:
        return matches[0]
    problem = "not found" if not matches else "appears more than once"
    hint = ""
    if len(header) == 1 and any(sep in header[0] for sep in ";\t|"):
        hint = " (one column: files are read as comma-separated; is it ';', tab or '|'?)"
    raise GraphInputError(f"{path}: column {column!r} {problem}; available columns: {header}{hint}")


class MoleculeCSV(MoleculeDataset):
    r"""Molecules and targets from a CSV file (read with the standard ``csv`` module).

    SMILES are stripped of surrounding whitespace. A row is skipped (and listed in
    :attr:`skipped`) when its SMILES is empty or invalid, a target cell is not a
    number, or its number of fields differs from the header's. An empty target cell
    (or ``nan``, ``NA``, ``N/A``, ...: see :func:`parse_target`) is a missing value:
    ``NaN`` in ``y``. Blank lines and lines starting with
    ``comment`` are not data rows.

    Args:
        path (str or Path): the CSV file.
        smiles_col (str): the SMILES column. (default: ``"smiles"``)
        target_cols (str or Sequence[str]): the target column(s); may be empty for
            unlabelled molecules. (default: ``()``)
        featurizer (MoleculeFeaturizer, optional): when ``None``, the default settings
            with RDKit's whole-molecule descriptors, as ``graphattn train --csv`` uses
            (``MoleculeFeaturizer(descriptors=True)``; ``descriptors=False`` for graph
            features only).
        name (str, optional): a name for messages. (default: the file name)
        limit (int, optional): read at most this many data rows.
        fieldnames (Sequence[str], optional): column names of a file without a header
            row; the first row is then data.
        comment (str, optional): skip lines starting with this prefix.
        progress (bool): show a progress bar while featurizing. (default: ``False``)

    Raises:
        GraphInputError: a column is missing (the message lists those available) or
            the file is empty.
    """

    def __init__(
        self,
        path: str | Path,
        smiles_col: str = "smiles",
        target_cols: str | Sequence[str] = (),
        featurizer: MoleculeFeaturizer | None = None,
        name: str | None = None,
        limit: int | None = None,
        fieldnames: Sequence[str] | None = None,
        comment: str | None = None,
        progress: bool = False,
    ) -> None:
        self.path = Path(path)
        targets = _target_list(target_cols)
        with CsvRows(self.path, comment) as table:
            rows = iter(table)
            header = list(fieldnames) if fieldnames is not None else next(rows, None)
            if header is None:
                raise GraphInputError(f"{self.path}: empty file, expected a header row")
            columns = [column_index(header, col, self.path) for col in [smiles_col, *targets]]
            records = _csv_records(rows, header, columns, targets, limit)
            if featurizer is None:
                featurizer = MoleculeFeaturizer(descriptors=True)
            super().__init__(records, targets, featurizer, name or self.path.name, progress)


def _csv_records(
    rows: Iterable[list[str]],
    header: list[str],
    columns: list[int],
    target_cols: list[str],
    limit: int | None,
) -> Iterator[MoleculeRecord | SkippedRow]:
    """Records of CSV rows: ``columns`` holds the SMILES column, then the targets'."""
    for row, fields in enumerate(rows):
        if limit is not None and row >= limit:
            return
        smiles = fields[columns[0]].strip() if len(fields) > columns[0] else ""
        if len(fields) != len(header):
            reason = f"row has {len(fields)} fields, the header has {len(header)}"
            yield SkippedRow(row, smiles, reason)
            continue
        try:
            targets = tuple(
                parse_target(fields[i], col)
                for i, col in zip(columns[1:], target_cols, strict=True)
            )
        except ValueError as err:
            yield SkippedRow(row, smiles, str(err))
            continue
        yield MoleculeRecord(row, smiles, targets)


class MoleculeSDF(MoleculeDataset):
    r"""Molecules and targets from an SD file; targets are read from SD properties.

    Records RDKit cannot read are skipped with RDKit's reason; a missing or empty
    property is a missing target (``NaN``); a property that is not a number skips the
    record.

    Args:
        path (str or Path): the SD file, plain or gzip-compressed (``.sdf.gz``).
        target_cols (str or Sequence[str]): the target property name(s).
        featurizer (MoleculeFeaturizer, optional): when ``None``, the default settings
            with RDKit's whole-molecule descriptors, as ``graphattn train --csv`` uses
            (``MoleculeFeaturizer(descriptors=True)``; ``descriptors=False`` for graph
            features only).
        name (str, optional): a name for messages. (default: the file name)
        limit (int, optional): read at most this many records.
        progress (bool): show a progress bar while featurizing. (default: ``False``)
    """

    def __init__(
        self,
        path: str | Path,
        target_cols: str | Sequence[str] = (),
        featurizer: MoleculeFeaturizer | None = None,
        name: str | None = None,
        limit: int | None = None,
        progress: bool = False,
    ) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"SD file not found: {self.path}")
        targets = _target_list(target_cols)
        records = _sdf_records(self.path, targets, limit)
        if featurizer is None:
            featurizer = MoleculeFeaturizer(descriptors=True)
        super().__init__(records, targets, featurizer, name or self.path.name, progress)


def _sdf_records(
    path: Path, target_cols: list[str], limit: int | None
) -> Iterator[MoleculeRecord | SkippedRow]:
    """Records of an SD file's molecules, capturing RDKit's reason for bad ones."""
    capture_cls = getattr(rdBase, "CaptureErrorLog", None)  # RDKit >= 2025.09
    with (gzip.open if _is_gzip(path) else open)(path, "rb") as handle:
        supplier = Chem.ForwardSDMolSupplier(handle)
        row = 0
        while limit is None or row < limit:
            try:
                with rdBase.BlockLogs():
                    if capture_cls is None:
                        mol, log = next(supplier, False), ""
                    else:
                        with capture_cls() as capture:
                            mol = next(supplier, False)
                        log = _captured(capture)
            except SystemError as err:  # the file failed under RDKit: a truncated .gz
                cause = err.__cause__ or err
                raise GraphInputError(
                    f"{path}: cannot read record {row} (counted from 0): {cause}"
                ) from err
            if mol is False:
                return
            yield _sdf_record(row, mol, log, target_cols)
            row += 1


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(2) == b"\x1f\x8b"


def _captured(capture) -> str:
    """The messages of an ``rdBase.CaptureErrorLog``. RDKit quotes the file's own lines,
    which need not be UTF-8 (a Latin-1 file): such bytes become U+FFFD."""
    try:
        return capture.messages
    except UnicodeDecodeError as err:
        return bytes(err.object).decode("utf-8", errors="replace")


def _sdf_record(
    row: int, mol: Chem.Mol | None, log: str, target_cols: list[str]
) -> MoleculeRecord | SkippedRow:
    """The record of one SD entry, or why it is skipped."""
    if mol is None:
        reason = "; ".join(rdkit_log_lines(log)) or "RDKit could not read the record"
        return SkippedRow(row, "", reason)
    try:
        targets = tuple(parse_target(_property(mol, col), col) for col in target_cols)
    except ValueError as err:
        return SkippedRow(row, _as_text(mol), str(err))
    return MoleculeRecord(row, mol, targets)


def _property(mol: Chem.Mol, name: str) -> str:
    """An SD property's text ("" if absent), its name matched as CSV columns are:
    ignoring surrounding whitespace (target names are stored stripped)."""
    if mol.HasProp(name):
        return mol.GetProp(name)
    padded = [prop for prop in mol.GetPropNames() if prop.strip() == name]
    return mol.GetProp(padded[0]) if padded else ""


# --------------------------------------------------------------------- named data sets
@dataclass(frozen=True)
class MoleculeDatasetInfo:
    """What a named molecule data set holds.

    Attributes:
        name: registry name.
        filename: its data file.
        smiles_col: the SMILES column.
        target_cols: the target columns.
        units: the unit of each target.
        task: ``"regression"``.
        num_molecules: data rows in the file.
        description: one line on what the targets are.
        card: path of the data set card in the repository.
        descriptors: whether the default featurizer adds RDKit's whole-molecule
            descriptors (off for ``nci-tpsa``, whose target *is* an RDKit descriptor).
    """

    name: str
    filename: str
    smiles_col: str
    target_cols: tuple[str, ...]
    units: tuple[str, ...]
    task: str
    num_molecules: int
    description: str
    card: str
    descriptors: bool = True


MOLECULE_DATASETS: dict[str, MoleculeDatasetInfo] = {
    "esol": MoleculeDatasetInfo(
        name="esol",
        filename="delaney-processed.csv",
        smiles_col="smiles",
        target_cols=("measured log solubility in mols per litre",),
        units=("log10(mol/L)",),
        task="regression",
        num_molecules=1128,
        description="measured aqueous solubility (Delaney 2004)",
        card="datasets/esol.md",
    ),
    "freesolv": MoleculeDatasetInfo(
        name="freesolv",
        filename="SAMPL.csv",
        smiles_col="smiles",
        target_cols=("expt",),
        units=("kcal/mol",),
        task="regression",
        num_molecules=642,
        description="experimental hydration free energy (Mobley & Guthrie 2014)",
        card="datasets/freesolv.md",
    ),
    "nci-tpsa": MoleculeDatasetInfo(
        name="nci-tpsa",
        filename="first_5k.tpsa.csv",
        smiles_col="smiles",
        target_cols=("tpsa",),
        units=("Å^2",),
        task="regression",
        num_molecules=4999,
        description="topological polar surface area (Ertl 2000) of NCI molecules, "
        "shipped with RDKit (no download)",
        card="datasets/nci-tpsa.md",
        descriptors=False,
    ),
}

NCI_TPSA_SHA256 = "7c3dbaa546a317bcf8239e979d829b230b4d02b02cfe92ecffe5de2c8b222b7f"


def nci_tpsa_path() -> Path:
    """The NCI TPSA file inside the installed RDKit (``Data/NCI/first_5k.tpsa.csv``).

    Raises:
        FileNotFoundError: this RDKit installation does not ship the file.
    """
    path = Path(RDConfig.RDDataDir) / "NCI" / MOLECULE_DATASETS["nci-tpsa"].filename
    if not path.is_file():
        raise FileNotFoundError(
            f"data set 'nci-tpsa': {path} not found; this RDKit installation "
            f"({rdBase.rdkitVersion}) does not ship its NCI data files"
        )
    if sha256sum(path) != NCI_TPSA_SHA256:
        logger.warning("nci-tpsa: %s differs from the version described in the card", path)
    return path


def _dataset_info(name: str) -> MoleculeDatasetInfo:
    """The card of a named data set; a ``KeyError`` listing the known names otherwise."""
    if name not in MOLECULE_DATASETS:
        raise KeyError(f"unknown molecule data set {name!r}; known: {sorted(MOLECULE_DATASETS)}")
    return MOLECULE_DATASETS[name]


def dataset_featurizer(
    name: str,
    descriptors: bool = True,
    contributions: bool = False,
    xtb: Sequence[str] = (),
) -> MoleculeFeaturizer:
    """The default featurizer of a named data set, optionally with fewer or more features.

    Args:
        name (str): a key of :data:`MOLECULE_DATASETS`.
        descriptors (bool): keep RDKit's whole-molecule descriptors where the data set
            uses them (``False``: graph features only).
        contributions (bool): add the per-atom contributions
            (:mod:`graphattn.featurize.contributions`).
        xtb (Sequence[str]): add these xTB models' hydration energies to the
            whole-molecule inputs (``MoleculeFeaturizer.xtb``; needs ``tblite``).

    Raises:
        KeyError: unknown name.
    """
    return MoleculeFeaturizer(
        descriptors=_dataset_info(name).descriptors and descriptors,
        contributions=contributions,
        xtb=xtb,  # the featurizer refuses a single string (tuple() would split it)
    )


def load_molecule_dataset(
    name: str,
    data_dir: str | Path | None = None,
    featurizer: MoleculeFeaturizer | None = None,
    limit: int | None = None,
    progress: bool = False,
) -> MoleculeCSV:
    """Load a named data set of :data:`MOLECULE_DATASETS`.

    Args:
        name (str): ``"esol"``, ``"freesolv"`` or ``"nci-tpsa"``.
        data_dir (str or Path, optional): folder with the files of ``esol`` and
            ``freesolv`` (see :func:`~graphattn.datasets.files.resolve_file`); unused
            for ``nci-tpsa``, which ships with RDKit.
        featurizer (MoleculeFeaturizer, optional): when ``None``,
            :func:`dataset_featurizer` (the data set's ``descriptors`` choice, see
            :class:`MoleculeDatasetInfo`).
        limit (int, optional): read at most this many data rows.
        progress (bool): show a progress bar while featurizing. (default: ``False``)

    Raises:
        KeyError: unknown name.
        graphattn.datasets.files.DatasetUnavailableError: the file is not available.
    """
    info = _dataset_info(name)
    if featurizer is None:
        featurizer = dataset_featurizer(name)
    if name == "nci-tpsa":
        path = nci_tpsa_path()
        options = {"fieldnames": ("smiles", "tpsa"), "comment": "#"}
    else:
        path = resolve_file(name, info.filename, data_dir)
        options = {}
    return MoleculeCSV(
        path,
        smiles_col=info.smiles_col,
        target_cols=info.target_cols,
        featurizer=featurizer,
        name=name,
        limit=limit,
        progress=progress,
        **options,
    )
