"""Tests of graphattn.featurize.molecule: graphs and one-hot features of known molecules."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from rdkit import Chem, rdBase

from graphattn.errors import GraphInputError
from graphattn.featurize.molecule import (
    FeaturizationError,
    InvalidSmilesError,
    MoleculeFeaturizer,
    featurize_smiles,
    parse_smiles,
)

CAFFEINE = "Cn1cnc2c1c(=O)n(C)c(=O)n2C"
GLYCINE_ZWITTERION = "[NH3+]CC(=O)[O-]"
MOLECULES = ["CCO", CAFFEINE, "c1ccccc1", GLYCINE_ZWITTERION, "C#CC(=O)N", "FS(F)(F)(F)(F)F"]
ATOM_FLAGS = ["degree", "formal_charge", "num_hs", "hybridization", "aromatic", "in_ring"]
BOND_FLAGS = ["bond_conjugated", "bond_in_ring"]
UNCLOSED_RING = "unclosed ring" if hasattr(rdBase, "CaptureErrorLog") else "syntax error"


def column(featurizer: MoleculeFeaturizer, name: str) -> int:
    return featurizer.atom_feature_names.index(name)


def one_hot_blocks(names: list[str]) -> dict[str, list[int]]:
    """Column indices of each one-hot block (names ``prefix=value``)."""
    blocks: dict[str, list[int]] = {}
    for j, name in enumerate(names):
        if "=" in name:
            blocks.setdefault(name.split("=")[0], []).append(j)
    return blocks


@pytest.mark.parametrize(
    ("smiles", "num_atoms", "num_bonds"),
    [("CCO", 3, 2), (CAFFEINE, 14, 15), ("c1ccccc1", 6, 6), ("C", 1, 0)],
)
def test_sizes_shapes_and_dtypes(smiles: str, num_atoms: int, num_bonds: int) -> None:
    featurizer = MoleculeFeaturizer()
    data = featurizer(smiles)
    assert data.num_nodes == num_atoms
    assert data.x.shape == (num_atoms, featurizer.atom_dim)
    assert data.x.dtype == torch.float32
    assert data.edge_index.shape == (2, 2 * num_bonds)
    assert data.edge_index.dtype == torch.long
    assert data.edge_attr.shape == (2 * num_bonds, featurizer.bond_dim)
    assert data.edge_attr.dtype == torch.float32


def test_single_atom_has_empty_edges() -> None:
    featurizer = MoleculeFeaturizer()
    data = featurizer("[Na+]")
    assert data.edge_index.shape == (2, 0)
    assert data.edge_attr.shape == (0, featurizer.bond_dim)


@pytest.mark.parametrize("smiles", MOLECULES)
def test_each_one_hot_block_sums_to_one(smiles: str) -> None:
    featurizer = MoleculeFeaturizer()
    data = featurizer(smiles)
    for prefix, cols in one_hot_blocks(featurizer.atom_feature_names).items():
        assert torch.equal(data.x[:, cols].sum(1), torch.ones(data.num_nodes)), prefix
    for prefix, cols in one_hot_blocks(featurizer.bond_feature_names).items():
        assert torch.all(data.edge_attr[:, cols].sum(1) == 1), prefix
    assert set(data.x.unique().tolist()) <= {0.0, 1.0}


def test_element_columns_match_rdkit_atoms() -> None:
    featurizer = MoleculeFeaturizer()
    data = featurizer(CAFFEINE)
    symbols = [atom.GetSymbol() for atom in Chem.MolFromSmiles(CAFFEINE).GetAtoms()]
    assert set(symbols) == {"C", "N", "O"}
    for i, symbol in enumerate(symbols):
        assert data.x[i, column(featurizer, f"element={symbol}")] == 1
    counts = {s: int(data.x[:, column(featurizer, f"element={s}")].sum()) for s in "CNO"}
    assert counts == {"C": 8, "N": 4, "O": 2}


def test_degree_hydrogens_and_hybridisation() -> None:
    featurizer = MoleculeFeaturizer()
    data = featurizer("C#CC(=O)N")  # propiolamide: atoms C C C O N
    expected = [
        ("degree=1", "num_hs=1", "hybridization=SP"),
        ("degree=2", "num_hs=0", "hybridization=SP"),
        ("degree=3", "num_hs=0", "hybridization=SP2"),
        ("degree=1", "num_hs=0", "hybridization=SP2"),
        ("degree=1", "num_hs=2", "hybridization=SP2"),
    ]
    for i, names in enumerate(expected):
        for name in names:
            assert data.x[i, column(featurizer, name)] == 1, (i, name)
    assert data.x[:, column(featurizer, "aromatic")].sum() == 0


def test_degree_outside_list_goes_to_other() -> None:
    featurizer = MoleculeFeaturizer()
    data = featurizer("FS(F)(F)(F)(F)F")
    sulfur = column(featurizer, "element=S")
    (row,) = torch.nonzero(data.x[:, sulfur]).flatten().tolist()
    assert data.x[row, column(featurizer, "degree=other")] == 1


def test_values_below_a_listed_range_go_to_other_too() -> None:
    featurizer = MoleculeFeaturizer()
    nitride = featurizer("[N-3]")  # charge -3, below the listed -2..2
    assert nitride.x[0, column(featurizer, "formal_charge=other")] == 1
    assert nitride.x[0, column(featurizer, "formal_charge=-2")] == 0
    with_hs = MoleculeFeaturizer(add_hs=True)
    methane = with_hs("C")  # RDKit gives hydrogen atoms no hybridisation (below SP)
    hydrogens = methane.x[:, column(with_hs, "element=H")] == 1
    assert hydrogens.sum() == 4
    assert (methane.x[hydrogens, column(with_hs, "hybridization=other")] == 1).all()
    assert (methane.x[hydrogens, column(with_hs, "hybridization=SP")] == 0).all()


def test_benzene_bonds_are_aromatic_both_directions() -> None:
    featurizer = MoleculeFeaturizer()
    data = featurizer("c1ccccc1")
    assert data.edge_index.shape[1] == 12
    names = featurizer.bond_feature_names
    assert torch.all(data.edge_attr[:, names.index("bond_type=AROMATIC")] == 1)
    assert torch.all(data.edge_attr[:, names.index("in_ring")] == 1)
    assert torch.all(data.x[:, column(featurizer, "aromatic")] == 1)
    assert torch.all(data.x[:, column(featurizer, "in_ring")] == 1)
    assert torch.all(torch.bincount(data.edge_index[0], minlength=6) == 2)


def test_bond_types_of_a_chain() -> None:
    featurizer = MoleculeFeaturizer()
    data = featurizer("C=CC#N")
    names = featurizer.bond_feature_names
    per_bond = data.edge_attr[0::2]
    kinds = [names[j] for j in per_bond[:, :5].argmax(1).tolist()]
    assert kinds == ["bond_type=DOUBLE", "bond_type=SINGLE", "bond_type=TRIPLE"]
    assert torch.all(per_bond[:, names.index("conjugated")] == 1)
    assert torch.all(per_bond[:, names.index("in_ring")] == 0)


def test_zwitterion_charges() -> None:
    featurizer = MoleculeFeaturizer()
    data = featurizer(GLYCINE_ZWITTERION)
    plus = data.x[:, column(featurizer, "formal_charge=1")]
    minus = data.x[:, column(featurizer, "formal_charge=-1")]
    assert plus.sum() == 1 and minus.sum() == 1
    nitrogen = data.x[:, column(featurizer, "element=N")]
    assert torch.equal(plus, nitrogen)
    assert data.x[minus.argmax(), column(featurizer, "element=O")] == 1
    assert data.x[plus.argmax(), column(featurizer, "num_hs=3")] == 1


@pytest.mark.parametrize("smiles", MOLECULES)
def test_every_edge_has_its_reverse_with_same_attributes(smiles: str) -> None:
    data = MoleculeFeaturizer()(smiles)
    attrs = {(i, j): data.edge_attr[k] for k, (i, j) in enumerate(data.edge_index.t().tolist())}
    assert len(attrs) == data.edge_index.shape[1]  # no duplicate edges
    for (i, j), attr in attrs.items():
        assert i != j
        assert torch.equal(attrs[(j, i)], attr)
    bonds = {tuple(sorted((b.GetBeginAtomIdx(), b.GetEndAtomIdx())))
             for b in Chem.MolFromSmiles(smiles).GetBonds()}  # fmt: skip
    assert {tuple(sorted(pair)) for pair in attrs} == bonds


@pytest.mark.parametrize(("smiles", "symbol"), [("[Na+].[Cl-]", "Na"), ("C[Ge](C)(C)C", "Ge")])
def test_element_outside_vocabulary_goes_to_other(smiles: str, symbol: str) -> None:
    featurizer = MoleculeFeaturizer()
    data = featurizer(smiles)
    symbols = [atom.GetSymbol() for atom in Chem.MolFromSmiles(smiles).GetAtoms()]
    other = data.x[:, column(featurizer, "element=other")]
    assert other.tolist() == [float(s == symbol) for s in symbols]


def test_custom_vocabulary() -> None:
    featurizer = MoleculeFeaturizer(elements=("C", "N"))
    assert featurizer.atom_feature_names[:3] == ["element=C", "element=N", "element=other"]
    data = featurizer("CCO")
    assert data.x[:, :3].tolist() == [[1, 0, 0], [1, 0, 0], [0, 0, 1]]


@pytest.mark.parametrize("flag", ATOM_FLAGS + BOND_FLAGS)
def test_switching_a_feature_off_drops_exactly_its_columns(flag: str) -> None:
    full = MoleculeFeaturizer()
    reduced = MoleculeFeaturizer(**{flag: False})
    is_atom = flag in ATOM_FLAGS
    names = full.atom_feature_names if is_atom else full.bond_feature_names
    kept = reduced.atom_feature_names if is_atom else reduced.bond_feature_names
    feature = flag.removeprefix("bond_")
    dropped = [n for n in names if n == feature or n.startswith(feature + "=")]
    assert dropped and kept == [n for n in names if n not in dropped]
    assert (reduced.atom_dim, reduced.bond_dim) == (
        (full.atom_dim - len(dropped), full.bond_dim)
        if is_atom
        else (full.atom_dim, full.bond_dim - len(dropped))
    )
    for smiles in MOLECULES:
        a, b = full(smiles), reduced(smiles)
        if is_atom:
            assert b.x.shape[1] == reduced.atom_dim
            assert torch.equal(b.x, a.x[:, [names.index(n) for n in kept]])
        else:
            assert b.edge_attr.shape[1] == reduced.bond_dim
            assert torch.equal(b.edge_attr, a.edge_attr[:, [names.index(n) for n in kept]])


def test_settings_round_trip_through_json() -> None:
    featurizer = MoleculeFeaturizer(elements=("C", "O", "Br"), num_hs=False, add_hs=True)
    settings = json.loads(json.dumps(featurizer.to_dict()))
    restored = MoleculeFeaturizer.from_dict(settings)
    assert restored == featurizer
    assert restored.atom_feature_names == featurizer.atom_feature_names
    assert torch.equal(restored(CAFFEINE).x, featurizer(CAFFEINE).x)
    assert MoleculeFeaturizer.from_dict(settings) != MoleculeFeaturizer()


def test_unknown_settings_are_rejected() -> None:
    with pytest.raises(GraphInputError, match="colour"):
        MoleculeFeaturizer.from_dict({"colour": "blue"})
    with pytest.raises(GraphInputError, match="unknown element symbol 'Xx'"):
        MoleculeFeaturizer(elements=("C", "Xx"))
    # one string is not split into characters ('Cl' into C and l, an xTB model into letters)
    with pytest.raises(GraphInputError, match="elements must be a list or tuple, got the string"):
        MoleculeFeaturizer(elements="Cl")
    with pytest.raises(GraphInputError, match="xtb must be a list or tuple, got the string"):
        MoleculeFeaturizer(xtb="GFN2-xTB/alpb")
    with pytest.raises(GraphInputError, match="repeats"):
        MoleculeFeaturizer(elements=("C", "C"))
    with pytest.raises(GraphInputError, match="SP9"):
        MoleculeFeaturizer(hybridizations=("SP", "SP9"))


@pytest.mark.parametrize("smiles", ["C1CC", "xyz", "C(C)(C)(C)(C)C", "CC(", "c1cccc1"])
def test_invalid_smiles_raise_with_the_string(smiles: str) -> None:
    with pytest.raises(InvalidSmilesError) as info:
        MoleculeFeaturizer()(smiles)
    assert repr(smiles) in str(info.value)
    assert info.value.smiles == smiles and info.value.reason
    assert isinstance(info.value, GraphInputError) and isinstance(info.value, ValueError)


def test_a_molecule_that_fails_sanitisation_raises_with_its_smiles() -> None:
    pentavalent = Chem.MolFromSmiles("C(C)(C)(C)(C)C", sanitize=False)
    with pytest.raises(InvalidSmilesError, match="valence") as info:
        MoleculeFeaturizer()(pentavalent)
    assert info.value.smiles == "C(C)(C)(C)(C)C"


def test_featurization_errors_survive_pickling() -> None:
    # a worker process (DataLoader workers, an ensemble member's process) hands its error
    # to the parent pickled: it must come back whole, not as a TypeError from __init__
    import pickle

    with pytest.raises(InvalidSmilesError) as info:
        MoleculeFeaturizer()("C1CC")
    back = pickle.loads(pickle.dumps(info.value))
    assert type(back) is InvalidSmilesError and str(back) == str(info.value)
    assert (back.smiles, back.reason) == ("C1CC", info.value.reason)
    plain = pickle.loads(pickle.dumps(FeaturizationError("[Fe]", "no bonds")))
    assert type(plain) is FeaturizationError and str(plain) == "cannot featurize '[Fe]': no bonds"


def test_invalid_smiles_reason_is_captured_and_not_printed(capfd: pytest.CaptureFixture) -> None:
    # RDKit's own message needs rdBase.CaptureErrorLog (RDKit >= 2025.09)
    with pytest.raises(InvalidSmilesError, match=UNCLOSED_RING):
        parse_smiles("C1CC")
    with pytest.raises(InvalidSmilesError, match="valence"):
        parse_smiles("C(C)(C)(C)(C)C")
    captured = capfd.readouterr()
    assert "C1CC" not in captured.err and "valence" not in captured.err


@pytest.mark.skipif(not hasattr(rdBase, "CaptureErrorLog"), reason="needs RDKit >= 2025.09")
@pytest.mark.parametrize(
    ("smiles", "reason"),
    [
        ("CC(C", "extra open parentheses; check for mistakes around position 3"),
        ("[Na+].[Cl-]x", "syntax error; check for mistakes around position 12"),
        ("C1CC", "unclosed ring"),
    ],
)
def test_invalid_smiles_message_names_the_input_once(smiles: str, reason: str) -> None:
    # RDKit echoes the input up to four times; the message keeps RDKit's reason only
    with pytest.raises(InvalidSmilesError) as info:
        parse_smiles(smiles)
    assert info.value.reason == reason
    assert str(info.value).count(smiles) == 1


@pytest.mark.parametrize("smiles", ["", "   "])
def test_empty_smiles_raises(smiles: str) -> None:
    with pytest.raises(InvalidSmilesError, match="empty") as info:
        featurize_smiles(smiles)
    assert repr(smiles) in str(info.value)


@pytest.mark.parametrize(("smiles", "first"), [("C C", "C"), ("CCO x", "CCO"), ("CC\nO", "CC")])
def test_whitespace_inside_a_smiles_is_an_error_not_a_name(smiles: str, first: str) -> None:
    # RDKit alone would parse the text before the whitespace and drop the rest
    with pytest.raises(InvalidSmilesError, match=f"would read only {first!r}") as info:
        parse_smiles(smiles)
    assert info.value.smiles == smiles
    assert parse_smiles(" CCO\t").GetNumAtoms() == 3  # surrounding whitespace is fine


def test_non_string_input_raises_type_error() -> None:
    with pytest.raises(TypeError, match="float"):
        MoleculeFeaturizer()(float("nan"))  # type: ignore[arg-type]


def test_smiles_is_canonical_and_molecules_are_accepted() -> None:
    featurizer = MoleculeFeaturizer()
    canonical = Chem.MolToSmiles(Chem.MolFromSmiles("OCC"))
    assert featurizer("OCC").smiles == featurizer(" CCO ").smiles == canonical
    from_mol = featurizer(Chem.MolFromSmiles(CAFFEINE))
    from_smiles = featurize_smiles(CAFFEINE)
    assert torch.equal(from_mol.x, from_smiles.x)
    assert torch.equal(from_mol.edge_index, from_smiles.edge_index)


def test_hydrogens_implicit_unless_asked() -> None:
    implicit = MoleculeFeaturizer()("CCO")
    explicit_featurizer = MoleculeFeaturizer(add_hs=True)
    explicit = explicit_featurizer("CCO")
    assert implicit.num_nodes == 3
    assert explicit.num_nodes == 9 and explicit.edge_index.shape[1] == 16
    assert explicit.smiles == implicit.smiles
    hydrogen = explicit.x[:, column(explicit_featurizer, "element=H")]
    assert hydrogen.sum() == 6
    # hydrogens attached are counted the same way whether implicit or explicit
    hs_cols = [column(explicit_featurizer, f"num_hs={h}") for h in range(5)]
    assert torch.equal(explicit.x[:3, hs_cols], implicit.x[:, hs_cols])
    assert MoleculeFeaturizer()("[2H]OC").num_nodes == 3  # kept as RDKit keeps it


def test_reason_without_rdkit_log_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(rdBase, "CaptureErrorLog", raising=False)
    with pytest.raises(InvalidSmilesError, match="syntax error"):
        parse_smiles("C1CC")
    with pytest.raises(InvalidSmilesError, match="valence"):
        parse_smiles("C(C)(C)(C)(C)C")


def test_descriptors_are_optional_and_match_rdkit() -> None:
    import numpy as np
    from rdkit.Chem import Crippen

    from graphattn.featurize.descriptors import DESCRIPTOR_NAMES

    plain = MoleculeFeaturizer()
    assert plain.mol_dim == 0 and not hasattr(plain("CCO"), "mol_x")
    featurizer = MoleculeFeaturizer(descriptors=True)
    data = featurizer("CCO")
    assert data.mol_x.shape == (1, len(DESCRIPTOR_NAMES)) == (1, featurizer.mol_dim)
    assert torch.isfinite(data.mol_x).all()
    logp = Crippen.MolLogP(Chem.MolFromSmiles("CCO"))
    column = DESCRIPTOR_NAMES.index("MolLogP")
    expected = np.sign(logp) * np.log1p(abs(logp))
    assert abs(float(data.mol_x[0, column]) - expected) < 1e-5
    assert MoleculeFeaturizer.from_dict(featurizer.to_dict()).descriptors is True


def test_information_content_descriptors_equal_rdkits() -> None:
    """graphattn computes Ipc and AvgIpc itself (once, with a sparse product)."""
    from rdkit.Chem import GraphDescriptors

    from graphattn.featurize.descriptors import DESCRIPTOR_NAMES, molecule_descriptors

    peptide = Chem.MolToSmiles(Chem.MolFromSequence("ACDEFGHI"))  # 62 atoms
    for smiles in ["C", "CCO", "c1ccccc1O", "C1CC2CCC1C2", "OC(=O)C12CC3CC(CC(C3)C1)C2", peptide]:
        mol = Chem.MolFromSmiles(smiles)
        got = molecule_descriptors(mol)
        for name in ("Ipc", "AvgIpc"):
            value = getattr(GraphDescriptors, name)(Chem.MolFromSmiles(smiles))
            expected = np.float32(np.sign(value) * np.log1p(abs(value)))
            assert got[DESCRIPTOR_NAMES.index(name)] == expected, (smiles, name)


def test_partial_charge_descriptors_do_not_depend_on_the_atom_order() -> None:
    # RDKit folds min/max over the atoms in order, and a tin fragment's NaN charges gave
    # 0 written one way and the ethanol's extremes the other: predictions 0.014 apart
    from rdkit.Chem import Descriptors

    from graphattn.featurize.descriptors import DESCRIPTOR_NAMES, molecule_descriptors

    names = ["MaxPartialCharge", "MinPartialCharge", "MaxAbsPartialCharge", "MinAbsPartialCharge"]
    columns = [DESCRIPTOR_NAMES.index(name) for name in names]
    tin_first = molecule_descriptors(Chem.MolFromSmiles("C[Sn](C)(C)C.CCO"))
    tin_last = molecule_descriptors(Chem.MolFromSmiles("CCO.C[Sn](C)(C)C"))
    assert np.array_equal(tin_first, tin_last)
    assert not tin_first[columns].any()  # a NaN charge anywhere: 0, as documented
    for smiles in ("OC(=O)c1ccccc1N", "O", "[Na+]"):  # finite charges: RDKit's values
        one = Chem.MolFromSmiles(smiles)  # (one atom: its charge is both extremes)
        for name, column in zip(names, columns, strict=True):
            value = getattr(Descriptors, name)(Chem.Mol(one))
            expected = np.float32(np.sign(value) * np.log1p(abs(value)))
            assert expected != 0 and molecule_descriptors(one)[column] == expected, (smiles, name)
    mol = Chem.MolFromSmiles("OC(=O)c1ccccc1N")
    renumbered = Chem.RenumberAtoms(mol, list(range(mol.GetNumAtoms()))[::-1])
    reversed_order = molecule_descriptors(renumbered)[columns]
    assert np.array_equal(reversed_order, molecule_descriptors(mol)[columns])


def test_descriptor_columns_are_none_where_rdkit_lacks_any_of_them(monkeypatch) -> None:
    # an RDKit without one of the names computed together (Ipc and AvgIpc, say) leaves
    # RDKit's own function for both, not an error at import
    from graphattn.featurize import descriptors

    monkeypatch.setattr(descriptors, "DESCRIPTOR_NAMES", ("Ipc", "MolWt", "MaxPartialCharge"))
    assert descriptors._columns(("Ipc", "AvgIpc")) is None
    assert descriptors._columns(("AvgIpc", "Foo")) is None
    assert descriptors._columns(("MaxPartialCharge", "Ipc")) == (2, 0)  # in the given order


def test_descriptors_of_a_large_molecule_are_finite_and_warn_nothing() -> None:
    import warnings

    from graphattn.featurize.descriptors import molecule_descriptors

    peptide = Chem.MolFromSequence("ACDEFGHIKLMNPQRSTVWY" * 2)  # 336 atoms
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isfinite(molecule_descriptors(peptide)).all()


@pytest.mark.parametrize("smiles", ["NCC(=O)O", "[NH3+]CC(=O)[O-]", "CC(=O)[O-]", "c1ccccc1O"])
def test_atom_contributions_sum_to_the_rdkit_molecule_values(smiles: str) -> None:
    from rdkit.Chem import Crippen, rdMolDescriptors

    from graphattn.featurize.contributions import CONTRIBUTION_NAMES

    plain = MoleculeFeaturizer()
    featurizer = MoleculeFeaturizer(contributions=True)
    assert featurizer.atom_feature_names == plain.atom_feature_names + list(CONTRIBUTION_NAMES)
    data = featurizer(smiles)
    assert data.x.shape == (data.num_nodes, featurizer.atom_dim)
    assert torch.equal(data.x[:, : plain.atom_dim], plain(smiles).x)  # appended, not mixed in
    mol = Chem.MolFromSmiles(smiles)
    totals = data.x[:, plain.atom_dim :].double().sum(0).tolist()
    sums = dict(zip(CONTRIBUTION_NAMES, totals, strict=True))
    atom_area, hydrogen_area = rdMolDescriptors._CalcLabuteASAContribs(mol)
    assert sums["crippen_logp"] == pytest.approx(Crippen.MolLogP(mol), abs=1e-4)
    assert sums["crippen_mr"] * 5 == pytest.approx(Crippen.MolMR(mol), abs=1e-3)
    assert sums["tpsa"] * 20 == pytest.approx(rdMolDescriptors.CalcTPSA(mol), abs=1e-3)
    assert sums["labute_asa"] * 10 + hydrogen_area == pytest.approx(
        rdMolDescriptors.CalcLabuteASA(mol), abs=1e-3
    )
    # group charges (atom + its hydrogens) add up to the net formal charge
    assert sums["gasteiger_charge"] * 0.5 == pytest.approx(Chem.GetFormalCharge(mol), abs=1e-4)
    assert MoleculeFeaturizer.from_dict(featurizer.to_dict()).contributions is True


def test_atom_contributions_are_finite_where_rdkit_has_no_value() -> None:
    featurizer = MoleculeFeaturizer(contributions=True)
    x = featurizer("C[Sn](C)(C)C").x  # RDKit has no Gasteiger parameters for tin
    assert torch.isfinite(x).all()
    charge = featurizer.atom_feature_names.index("gasteiger_charge")
    assert torch.equal(x[:, charge], torch.zeros(5))
    # with explicit hydrogens each H keeps its own share; the molecule's total is the same
    explicit = MoleculeFeaturizer(contributions=True, add_hs=True)("CO")
    assert explicit.x.shape == (6, featurizer.atom_dim)
    logp = featurizer.atom_feature_names.index("crippen_logp")
    hydrogen_rows = explicit.x[2:, logp]
    assert (hydrogen_rows != 0).all()
    assert float(explicit.x[:, logp].sum()) == pytest.approx(
        float(featurizer("CO").x[:, logp].sum()), abs=1e-5
    )


@pytest.mark.parametrize("add_hs", [False, True])
def test_a_molecule_with_explicit_hydrogens_featurizes_like_its_smiles(add_hs: bool) -> None:
    featurizer = MoleculeFeaturizer(add_hs=add_hs, descriptors=True, contributions=True)
    for smiles in ("CCO", "c1ccccc1O", "[NH4+]", "N[C@@H](C)C(=O)O", "[H][H]"):
        from_smiles, from_mol = (
            featurizer(smiles),
            featurizer(Chem.AddHs(Chem.MolFromSmiles(smiles))),
        )
        assert from_mol.smiles == from_smiles.smiles
        for name in ("x", "edge_index", "edge_attr", "mol_x"):
            assert torch.equal(getattr(from_mol, name), getattr(from_smiles, name)), (smiles, name)


def test_descriptors_of_a_lone_hydrogen_log_nothing(capfd) -> None:
    data = MoleculeFeaturizer(descriptors=True)("[H+]")
    assert data.num_nodes == 1 and data.mol_x.shape[0] == 1
    captured = capfd.readouterr()
    assert "hydrogen" not in captured.err + captured.out


def test_an_unknown_element_symbol_prints_no_rdkit_stack_trace(capfd) -> None:
    with pytest.raises(GraphInputError, match="'Qq'"):
        MoleculeFeaturizer(elements=("C", "Qq"))
    assert "Violation" not in capfd.readouterr().err  # RDKit's C++ trace, ~55 lines


def test_descriptor_values_are_signed_log1p_and_unusable_ones_zero(monkeypatch) -> None:
    import math

    import numpy as np

    import graphattn.featurize.descriptors as descriptors

    def raises(mol):
        return 1 / 0

    functions = (
        lambda mol: float("inf"),
        lambda mol: float("nan"),
        raises,
        lambda mol: -(math.e - 1),
        lambda mol: math.e**2 - 1,
    )
    # no Ipc, AvgIpc or partial charges, which have functions of their own
    monkeypatch.setattr(descriptors, "DESCRIPTOR_NAMES", tuple("abcde"))
    monkeypatch.setattr(descriptors, "_OTHERS", tuple(enumerate(functions)))
    monkeypatch.setattr(descriptors, "_IPC_COLUMNS", None)
    monkeypatch.setattr(descriptors, "_CHARGE_COLUMNS", None)
    values = descriptors.molecule_descriptors(Chem.MolFromSmiles("CCO"))
    assert values.dtype == np.float32
    np.testing.assert_allclose(values, [0.0, 0.0, 0.0, -1.0, 2.0], rtol=1e-6)


def test_atom_contributions_are_scaled_as_documented() -> None:
    import numpy as np
    from rdkit.Chem import rdMolDescriptors
    from rdkit.Chem.EState import EStateIndices

    from graphattn.featurize.contributions import CONTRIBUTION_NAMES, atom_contributions

    mol = Chem.MolFromSmiles("OCC(=O)N")
    columns = dict(zip(CONTRIBUTION_NAMES, atom_contributions(mol).T, strict=True))
    np.testing.assert_allclose(columns["estate"] * 5, EStateIndices(mol), rtol=1e-5)
    surface = rdMolDescriptors._CalcLabuteASAContribs(mol)[0]
    np.testing.assert_allclose(columns["labute_asa"] * 10, list(surface), rtol=1e-5)
