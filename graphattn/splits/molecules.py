"""Train / validation / test splits of molecule data sets: random and scaffold splits.

A split is a dict ``{"train": idx, "val": idx, "test": idx}`` of sorted int64 index
arrays that are disjoint and together cover ``0 .. n - 1``. Splits are saved as JSON
index lists with :func:`save_split` and read back (and checked) with :func:`load_split`.

Scaffold split rule (:func:`scaffold_split`): molecules are grouped by their
Bemis–Murcko scaffold (acyclic molecules share the empty scaffold). Groups larger
than half the validation size or half the test size are "large": they come first,
largest first (ties broken by scaffold SMILES). The remaining groups follow in an
order shuffled with ``seed``. Each group in turn goes whole into train if train
stays within its target size, else into val if val stays within its size, else into
test; the first (largest) group goes into train even when it alone is larger than
train's target. So a scaffold never appears in two parts, and the big common scaffolds
land in train, leaving rarer scaffolds for evaluation. A data set dominated by one
scaffold can leave val or test empty; the trainer then says so.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from rdkit.Chem.Scaffolds import MurckoScaffold

from graphattn.errors import GraphInputError, check_seed, whole_number
from graphattn.featurize.molecule import parse_smiles

__all__ = [
    "SPLIT_NAMES",
    "check_split",
    "load_split",
    "murcko_scaffold",
    "random_split",
    "save_split",
    "scaffold_split",
    "split_sizes",
]

SPLIT_NAMES = ("train", "val", "test")


def _check_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    """``fractions`` as a 3-tuple, after checking they are positive and sum to 1."""
    try:
        values = tuple(float(f) for f in fractions)
    except (TypeError, ValueError):  # "a", None, or not a sequence at all
        raise GraphInputError(
            f"fractions must be 3 numbers (train, val, test), got {fractions!r}"
        ) from None
    if len(values) != 3:
        raise GraphInputError(f"fractions must be 3 numbers (train, val, test), got {fractions}")
    if not all(math.isfinite(f) and f > 0 for f in values):
        raise GraphInputError(f"fractions must all be positive, got {fractions}")
    total = sum(values)
    if abs(total - 1.0) > 1e-6:
        raise GraphInputError(f"fractions must sum to 1 (within 1e-6), got sum {total}")
    return values  # type: ignore[return-value]


def _floors(n: int, fractions: Sequence[float]) -> tuple[list[int], list[float]]:
    exact = [f * n for f in fractions]
    return [math.floor(e) for e in exact], exact


def split_sizes(n: int, fractions: Sequence[float] = (0.8, 0.1, 0.1)) -> tuple[int, int, int]:
    """Part sizes for ``n`` items: floors of ``fraction * n``, the remainder going one
    by one to the parts with the largest fractional parts (train first on ties).

    Args:
        n (int): number of items.
        fractions (Sequence[float]): train, val, test fractions (positive, sum 1).
    """
    count = whole_number(n)
    if count is None or not 0 <= count <= 2**50:  # beyond, float products fail a size
        raise GraphInputError(f"n must be a whole number from 0 to 2**50, got {n!r}")
    n = count
    values = _check_fractions(fractions)
    sizes, exact = _floors(n, values)
    if not 0 <= n - sum(sizes) <= 2:
        # fractions a hair off 1 (within the accepted 1e-6) on a large n: the floors
        # miss n by more than the three parts can make up, so the fractions are scaled
        # to sum to 1 (only then: sums like 0.7 + 0.2 + 0.1 = 0.9999999999999999 keep
        # their sizes)
        sizes, exact = _floors(n, [f / sum(values) for f in values])
    train, val, test = largest_remainder(exact, n)
    return train, val, test


def largest_remainder(exact: Sequence[float], total: int) -> list[int]:
    """Whole numbers near ``exact`` that sum to ``total``: the floors, plus one each for
    the entries with the largest fractional parts (the first on ties) until they do.

    Args:
        exact (Sequence[float]): the unrounded sizes, summing to ``total`` up to rounding.
        total (int): what the sizes must sum to.
    """
    sizes = [math.floor(e) for e in exact]
    by_remainder = sorted(range(len(exact)), key=lambda i: (-(exact[i] - sizes[i]), i))
    for i in by_remainder[: max(0, total - sum(sizes))]:
        sizes[i] += 1
    return sizes


def random_split(
    n: int, fractions: Sequence[float] = (0.8, 0.1, 0.1), seed: int = 0
) -> dict[str, np.ndarray]:
    """A uniformly random split of ``n`` items, the same for the same ``seed``.

    Args:
        n (int): number of items.
        fractions (Sequence[float]): train, val, test fractions (positive, sum 1).
        seed (int): seed of the permutation.

    Returns:
        dict[str, np.ndarray]: ``"train"``, ``"val"``, ``"test"`` -> sorted int64 indices.
    """
    n_train, n_val, n_test = split_sizes(n, fractions)  # checks n (maybe a 0-d array)
    order = np.random.default_rng(check_seed(seed)).permutation(n_train + n_val + n_test)
    parts = np.split(order, [n_train, n_train + n_val])
    return {
        name: np.sort(part).astype(np.int64) for name, part in zip(SPLIT_NAMES, parts, strict=True)
    }


def murcko_scaffold(smiles: str) -> str:
    """Canonical SMILES of the Bemis–Murcko scaffold, without stereochemistry ("" for an
    acyclic molecule).

    Args:
        smiles (str): the molecule.

    Raises:
        graphattn.featurize.molecule.InvalidSmilesError: invalid SMILES.
    """
    return MurckoScaffold.MurckoScaffoldSmiles(mol=parse_smiles(smiles), includeChirality=False)


def scaffold_split(
    smiles: Sequence[str], fractions: Sequence[float] = (0.8, 0.1, 0.1), seed: int = 0
) -> dict[str, np.ndarray]:
    """A split that keeps every Bemis–Murcko scaffold within one part.

    See the module docstring for the rule. The part sizes are targets: whole groups
    are placed, so actual sizes can differ from ``fractions`` by a group's size.

    Args:
        smiles (Sequence[str]): the molecules, in data set order.
        fractions (Sequence[float]): train, val, test fractions (positive, sum 1).
        seed (int): seed of the order of the small scaffold groups.

    Returns:
        dict[str, np.ndarray]: ``"train"``, ``"val"``, ``"test"`` -> sorted int64 indices.

    Raises:
        GraphInputError: invalid fractions or seed, or an invalid SMILES or an entry
            that is not a string (its index is named).
    """
    n_train, n_val, n_test = split_sizes(len(smiles), fractions)
    seed = check_seed(seed)
    groups: dict[str, list[int]] = {}
    for index, text in enumerate(smiles):
        try:
            scaffold = murcko_scaffold(text)
        except (GraphInputError, TypeError) as err:  # TypeError: not a string (None, NaN)
            raise GraphInputError(f"scaffold_split: molecule {index}: {err}") from err
        groups.setdefault(scaffold, []).append(index)

    is_large = {key: len(g) > n_val / 2 or len(g) > n_test / 2 for key, g in groups.items()}
    large = sorted((k for k in groups if is_large[k]), key=lambda k: (-len(groups[k]), k))
    small = sorted(k for k in groups if not is_large[k])
    order = np.random.default_rng(seed).permutation(len(small))
    parts: dict[str, list[int]] = {name: [] for name in SPLIT_NAMES}
    for key in large + [small[i] for i in order]:
        group = groups[key]
        if not parts["train"] or len(parts["train"]) + len(group) <= n_train:
            parts["train"] += group
        elif len(parts["val"]) + len(group) <= n_val:
            parts["val"] += group
        else:
            parts["test"] += group
    return {name: np.array(sorted(parts[name]), dtype=np.int64) for name in SPLIT_NAMES}


def check_split(split: dict[str, Sequence[int]], n: int | None = None) -> None:
    """Check a split: keys train/val/test, non-negative integer indices, disjoint parts,
    and, when ``n`` is given, covering exactly ``0 .. n - 1``.

    Args:
        split (dict): part name -> indices.
        n (int, optional): the data set size.

    Raises:
        GraphInputError: naming the first problem found.
    """
    if sorted(split) != sorted(SPLIT_NAMES):
        raise GraphInputError(f"split must have the keys {SPLIT_NAMES}, got {sorted(split)}")
    seen: dict[int, str] = {}
    for name in SPLIT_NAMES:
        part = split[name]
        if isinstance(part, str | bytes) or not isinstance(part, Sequence | np.ndarray):
            raise GraphInputError(f"split[{name!r}] must be a list of indices, got {part!r}")
        for index in part:
            if isinstance(index, bool) or not isinstance(index, int | np.integer) or index < 0:
                raise GraphInputError(f"split[{name!r}]: {index!r} is not a valid index")
            if int(index) in seen:
                raise GraphInputError(f"index {index} is in both {seen[int(index)]!r} and {name!r}")
            seen[int(index)] = name
    if n is not None and sorted(seen) != list(range(n)):
        missing = sorted(set(range(n)) - set(seen))[:5]
        extra = sorted(set(seen) - set(range(n)))[:5]
        raise GraphInputError(
            f"split does not cover 0..{n - 1} exactly: missing e.g. {missing}, "
            f"out of range e.g. {extra}"
        )


def save_split(
    split: dict[str, Sequence[int]], path: str | Path, rows: Sequence[int] | None = None
) -> Path:
    """Write a split as JSON ``{"train": [...], "val": [...], "test": [...]}``.

    Args:
        split (dict): part name -> indices (arrays or lists) into the data set.
        path (str or Path): the file to write.
        rows (Sequence[int], optional): the source data row of each data set item
            (``MoleculeDataset.rows``; they differ from the indices once rows were
            skipped). Written as ``"rows": {"train": [...], ...}``, the numbering of
            ``skipped.csv`` and ``predictions.csv``.

    Returns:
        Path: the file written.
    """
    check_split(split)
    path = Path(path)
    payload: dict = {name: [int(i) for i in split[name]] for name in SPLIT_NAMES}
    if rows is not None:
        payload["rows"] = {name: [int(rows[i]) for i in payload[name]] for name in SPLIT_NAMES}
    path.write_text(json.dumps(payload) + "\n", encoding="utf-8")
    return path


def load_split(path: str | Path, n: int | None = None) -> dict[str, np.ndarray]:
    """Read a split written by :func:`save_split` and check it.

    Args:
        path (str or Path): the JSON file.
        n (int, optional): the data set size the split must cover exactly.

    Returns:
        dict[str, np.ndarray]: part name -> int64 indices.

    Raises:
        GraphInputError: the file is not a valid split (the message names the file).
    """
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(payload, dict):
            raise GraphInputError("expected a JSON object of index lists")
        payload.pop("rows", None)  # the source data rows, for people reading the file
        check_split(payload, n)
    except (json.JSONDecodeError, UnicodeDecodeError, GraphInputError) as err:
        raise GraphInputError(f"{path}: not a valid split: {err}") from err
    return {name: np.asarray(payload[name], dtype=np.int64) for name in SPLIT_NAMES}
