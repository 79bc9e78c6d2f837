"""Tests of graphattn.splits.molecules: random and scaffold splits, their files, checks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from rdkit import Chem
from rdkit.Chem.Scaffolds import MurckoScaffold

from graphattn.datasets.molecules import load_molecule_dataset
from graphattn.errors import GraphInputError
from graphattn.featurize.molecule import MoleculeFeaturizer
from graphattn.splits.molecules import (
    SPLIT_NAMES,
    load_split,
    murcko_scaffold,
    random_split,
    save_split,
    scaffold_split,
    split_sizes,
)

# 12 benzene, 6 cyclohexane, 4 pyridine, 3 naphthalene, 3 acyclic and 2 singleton scaffolds
MOLECULES = (
    ["c1ccccc1" + r for r in ["C", "O", "N", "Cl", "F", "Br", "CC", "CO", "CN", "C=O", "OC", "I"]]
    + ["C1CCCCC1" + r for r in ["C", "O", "N", "Cl", "F", "CC"]]
    + ["c1ccncc1" + r for r in ["C", "O", "N", "Cl"]]
    + ["c1ccc2ccccc2c1" + r for r in ["C", "O", "N"]]
    + ["CCO", "CCCC", "CC(=O)O"]
    + ["C1CC1C", "C1CCOC1"]
)

# graph features only: these tests are about rows and targets, not descriptors
PLAIN = MoleculeFeaturizer()


def scaffold_of(smiles: str) -> str:
    mol = Chem.MolFromSmiles(smiles)
    return Chem.MolToSmiles(MurckoScaffold.GetScaffoldForMol(mol), isomericSmiles=False)


def assert_partition(split: dict[str, np.ndarray], n: int) -> None:
    assert set(split) == set(SPLIT_NAMES)
    joined = np.concatenate([split[name] for name in SPLIT_NAMES])
    assert len(joined) == n  # disjoint ...
    assert np.array_equal(np.sort(joined), np.arange(n))  # ... and covering
    for part in split.values():
        assert part.dtype == np.int64 and np.all(np.diff(part) > 0)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 300),
    seed=st.integers(0, 2**31),
    train=st.floats(0.05, 0.9),
    val_share=st.floats(0.01, 0.95),
)
def test_random_split_is_a_partition_with_the_right_sizes(
    n: int, seed: int, train: float, val_share: float
) -> None:
    val = val_share * (1.0 - train)  # a share of what train leaves, so every draw counts
    fractions = (train, val, 1.0 - train - val)
    split = random_split(n, fractions, seed)
    assert_partition(split, n)
    for name, fraction in zip(SPLIT_NAMES, fractions, strict=True):
        assert abs(len(split[name]) - fraction * n) < 1


def test_random_split_deterministic_per_seed() -> None:
    first, again = random_split(100, seed=3), random_split(100, seed=3)
    other = random_split(100, seed=4)
    for name in SPLIT_NAMES:
        assert np.array_equal(first[name], again[name])
    assert not np.array_equal(first["test"], other["test"])


def test_split_sizes_distribute_the_remainder() -> None:
    assert sum(split_sizes(7, (0.5, 0.25, 0.25))) == 7
    assert split_sizes(10, (0.8, 0.1, 0.1)) == (8, 1, 1)
    assert split_sizes(5, (0.8, 0.1, 0.1)) == (4, 1, 0)  # a tie: the earlier part first
    assert split_sizes(2, (1 / 3, 1 / 3, 1 / 3)) == (1, 1, 0)
    assert split_sizes(0) == (0, 0, 0)
    # fractions a hair off 1 (within the 1e-6 accepted) still give sizes that add up to
    # n: the floors overshot n by 3 here, and the remainder step added instead of removing
    for fractions in [(0.8, 0.1, 0.1000005), (0.8, 0.1, 0.0999995)]:
        assert sum(split_sizes(3_000_000, fractions)) == 3_000_000
        assert sum(split_sizes(300_000_000, fractions)) == 300_000_000
    # while fractions whose float sum is 0.9999999999999999 keep their sizes (a first
    # fix scaled them and moved FreeSolv's 0.7/0.2/0.1 split to 450/128/64)
    assert split_sizes(642, (0.7, 0.2, 0.1)) == (449, 129, 64)
    assert split_sizes(8, (0.7, 0.2, 0.1)) == (5, 2, 1)
    assert split_sizes(2, (0.7, 0.2, 0.1)) == (1, 1, 0)
    assert split_sizes(1_000_001, (0.6, 0.3, 0.1)) == (600_001, 300_000, 100_000)


@pytest.mark.parametrize(
    ("fractions", "problem"),
    [
        ((0.8, 0.2), "3 numbers"),
        ((0.9, 0.2, -0.1), "positive"),
        ((1.0, 0.0, 0.0), "positive"),
        ((0.8, 0.1, float("nan")), "positive"),
        ((0.8, 0.1, 0.2), "sum to 1"),
        ((0.8, 0.1, 0.1 + 2e-6), "sum to 1"),
    ],
)
def test_fractions_are_validated(fractions: tuple[float, ...], problem: str) -> None:
    with pytest.raises(GraphInputError, match=problem):
        random_split(10, fractions)
    with pytest.raises(GraphInputError, match=problem):
        scaffold_split(MOLECULES, fractions)


def test_fractions_within_tolerance_are_accepted() -> None:
    assert_partition(random_split(10, (0.8, 0.1, 0.1 + 5e-7)), 10)


def test_negative_n_is_rejected() -> None:
    with pytest.raises(
        GraphInputError, match=r"n must be a whole number from 0 to 2\*\*50, got -1"
    ):
        random_split(-1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scaffold_split_keeps_each_scaffold_in_one_part(seed: int) -> None:
    split = scaffold_split(MOLECULES, (0.6, 0.2, 0.2), seed=seed)
    assert_partition(split, len(MOLECULES))
    part_of: dict[str, set[str]] = {}
    for name, indices in split.items():
        for i in indices:
            part_of.setdefault(scaffold_of(MOLECULES[i]), set()).add(name)
    assert all(len(parts) == 1 for parts in part_of.values()), part_of
    assert part_of[scaffold_of("c1ccccc1C")] == {"train"}  # the largest group
    assert len(split["train"]) <= split_sizes(len(MOLECULES), (0.6, 0.2, 0.2))[0]


def test_scaffold_split_seed_shuffles_small_groups() -> None:
    # 36 distinct scaffolds: a benzene linked by k carbons to a ring of a atoms
    many = [f"c1ccccc1{'C' * k}C1{'C' * (a - 1)}1" for a in range(3, 9) for k in range(6)]
    assert len({scaffold_of(s) for s in many}) == len(many)
    splits = [scaffold_split(many, seed=seed) for seed in range(5)]
    assert len({tuple(s["test"]) for s in splits}) > 1
    again = scaffold_split(many, seed=2)
    assert all(np.array_equal(again[name], splits[2][name]) for name in SPLIT_NAMES)


def test_scaffold_split_names_an_invalid_molecule() -> None:
    with pytest.raises(GraphInputError, match=r"molecule 2: invalid SMILES 'C1CC'"):
        scaffold_split(["CCO", "c1ccccc1", "C1CC"])


def test_scaffold_split_of_esol(data_dir: Path) -> None:
    smiles = load_molecule_dataset("esol", data_dir=data_dir, featurizer=PLAIN).smiles
    split = scaffold_split(smiles)
    assert_partition(split, len(smiles))
    scaffolds = [scaffold_of(s) for s in smiles]
    parts = {name: {scaffolds[i] for i in idx} for name, idx in split.items()}
    assert not parts["train"] & parts["val"]
    assert not parts["train"] & parts["test"]
    assert not parts["val"] & parts["test"]
    assert abs(len(split["train"]) - 0.8 * len(smiles)) < 0.05 * len(smiles)


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    split = random_split(50, seed=1)
    path = save_split(split, tmp_path / "split.json")
    assert set(json.loads(path.read_text())) == set(SPLIT_NAMES)
    loaded = load_split(path, n=50)
    for name in SPLIT_NAMES:
        assert np.array_equal(loaded[name], split[name])
    rows = [2 * i for i in range(50)]  # e.g. every other source row skipped
    path = save_split(split, tmp_path / "with_rows.json", rows)
    assert json.loads(path.read_text())["rows"]["test"] == [2 * i for i in split["test"]]
    loaded = load_split(path, n=50)
    for name in SPLIT_NAMES:
        assert np.array_equal(loaded[name], split[name])


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        ({"train": [0, 1], "val": [1], "test": [2]}, "both"),
        ({"train": [0, 1], "val": [2]}, "keys"),
        ({"train": [0, 1], "val": [2], "test": [-3]}, "not a valid index"),
        ({"train": [0, 1], "val": ["2"], "test": [3]}, "not a valid index"),
        ({"train": [0, 1], "val": [2], "test": [4]}, "cover"),
        ({"train": None, "val": [], "test": []}, r"split\['train'\] must be a list"),
        ({"train": 5, "val": [0], "test": [1]}, r"split\['train'\] must be a list"),
        ({"train": "01", "val": [2], "test": [3]}, r"split\['train'\] must be a list"),
    ],
)
def test_load_rejects_invalid_splits(tmp_path: Path, payload: dict, problem: str) -> None:
    path = tmp_path / "split.json"
    path.write_text(json.dumps(payload))
    with pytest.raises(GraphInputError, match=problem) as info:
        load_split(path, n=4 if problem == "cover" else None)
    assert "split.json" in str(info.value)


def test_load_rejects_broken_json(tmp_path: Path) -> None:
    path = tmp_path / "split.json"
    path.write_text("{not json")
    with pytest.raises(GraphInputError, match="not a valid split"):
        load_split(path)
    path.write_bytes(b'{"train": [0], "val": [1], "test": [2], "note": "\xff"}')
    with pytest.raises(GraphInputError, match="split.json: not a valid split"):
        load_split(path)  # not UTF-8


def test_scaffold_split_puts_an_oversized_largest_group_in_train() -> None:
    acyclic = ["C" * n + "O" for n in range(1, 51)]  # 50 molecules, one (empty) scaffold
    rings = [f"C1{'C' * (a - 1)}1{'C' * k}" for a in range(3, 8) for k in range(2)]
    split = scaffold_split(acyclic + rings, (0.8, 0.1, 0.1), seed=0)
    assert_partition(split, 60)
    assert set(range(50)) <= set(split["train"].tolist())  # not the test part
    assert len(split["val"]) > 0 and len(split["test"]) > 0


def test_stereoisomers_share_a_scaffold_and_a_part() -> None:
    # cis- and trans-decalinols: one ring system, so one scaffold, whatever the stereo
    cis, trans = "O[C@H]1CC[C@@H]2CCCC[C@H]2C1", "O[C@H]1CC[C@@H]2CCCC[C@@H]2C1"
    assert murcko_scaffold(cis) == murcko_scaffold(trans)
    molecules = [cis, trans, "c1ccccc1O", "c1ccccc1N", "C1CCCCC1O", "CCO", "CCCO"]
    for seed in range(5):
        split = scaffold_split(molecules, (0.5, 0.25, 0.25), seed=seed)
        part_of = {i: name for name, rows in split.items() for i in rows}
        assert part_of[0] == part_of[1], seed


def test_split_sizes_of_a_0d_tensor_or_array_are_those_of_the_int():
    # a 0-d tensor was computed in float32: 123456789 split into sizes summing to 123456790
    n = 123456789
    assert split_sizes(torch.tensor(n)) == split_sizes(np.array(n)) == split_sizes(n)

    def parts(count) -> dict:
        return {name: part.tolist() for name, part in random_split(count, seed=3).items()}

    assert parts(np.array(10)) == parts(torch.tensor(10)) == parts(10)
