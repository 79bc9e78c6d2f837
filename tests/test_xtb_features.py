"""Opt-in xTB hydration energies as whole-molecule inputs (``MoleculeFeaturizer(xtb=...)``,
``graphattn train --xtb-energies``): values, names, errors per molecule, train and predict."""

from __future__ import annotations

import csv
import sys

import numpy as np
import pytest
import torch
from rdkit import Chem

from graphattn.cli.main import main
from graphattn.datasets.molecules import MoleculeCSV
from graphattn.errors import GraphInputError
from graphattn.featurize.descriptors import DESCRIPTOR_NAMES
from graphattn.featurize.molecule import FeaturizationError, MoleculeFeaturizer
from graphattn.train.molecules import load_molecule_model, predict_molecules
from graphattn.train.transfer import load_pretrained_encoder

GFN1 = ("GFN1-xTB/alpb", "GFN1-xTB/gbsa")
ALCOHOLS = [f"{'C' * n}O" for n in range(1, 13)]


@pytest.mark.parametrize(
    ("models", "message"),
    [
        (("GFN3-xTB/alpb",), "unknown xTB model GFN3-xTB/alpb: methods are GFN2-xTB, GFN1-xTB"),
        (("GFN1-xTB/cosmo",), "unknown xTB model GFN1-xTB/cosmo"),
        (("GFN1-xTB",), "xTB model 'GFN1-xTB': expected METHOD/SOLVATION"),
        (("GFN1-xTB/alpb", "GFN1-xTB/alpb"), "a model is listed twice"),
    ],
)
def test_unknown_or_repeated_xtb_models_are_refused_by_name(models, message):
    with pytest.raises(GraphInputError, match=message):  # checked before tblite is needed
        MoleculeFeaturizer(xtb=models)


def test_missing_tblite_is_a_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "tblite.interface", None)  # import fails
    with pytest.raises(ImportError, match=r"need tblite: pip install 'graphattn\[xtb\]'"):
        MoleculeFeaturizer(xtb=GFN1)
    assert MoleculeFeaturizer().xtb == ()  # the default never needs it


def test_xtb_columns_follow_the_descriptors_with_the_computed_energies():
    pytest.importorskip("tblite")
    from graphattn.pretrained.xtb import xtb_hydration_energies

    featurizer = MoleculeFeaturizer(descriptors=True, xtb=GFN1)
    assert featurizer.mol_feature_names == [*DESCRIPTOR_NAMES, *(f"xtb:{m}" for m in GFN1)]
    data = featurizer("OCC")
    assert data.mol_x.shape == (1, featurizer.mol_dim) == (1, len(DESCRIPTOR_NAMES) + 2)
    descriptors_only = MoleculeFeaturizer(descriptors=True)("CCO").mol_x
    assert torch.equal(data.mol_x[:, : len(DESCRIPTOR_NAMES)], descriptors_only)
    # the conformer is embedded in canonical atom order: any SMILES of it gives the same
    assert torch.equal(featurizer("C(O)C").mol_x, data.mol_x)
    canonical = Chem.MolFromSmiles(Chem.CanonSmiles("OCC"))
    energies = xtb_hydration_energies(canonical, [("GFN1-xTB", "alpb"), ("GFN1-xTB", "gbsa")])
    expected = torch.tensor([list(energies.values())], dtype=torch.float32)
    torch.testing.assert_close(data.mol_x[:, -2:], expected, rtol=0, atol=1e-4)
    # ethanol is hydrophilic: negative hydration energies, a few kcal/mol
    assert bool(((expected > -8) & (expected < -2)).all())
    # xTB energies alone (no descriptors), and the settings survive a checkpoint
    alone = MoleculeFeaturizer(xtb=GFN1[:1])
    assert alone("CCO").mol_x.shape == (1, 1) and alone.mol_feature_names == ["xtb:GFN1-xTB/alpb"]
    assert MoleculeFeaturizer.from_dict(featurizer.to_dict()) == featurizer


def _failing_on(monkeypatch, bad_smiles: str, result: dict | None = None) -> None:
    """Make xTB fail (no embedding) on one molecule, or return ``result`` for it."""
    import graphattn.pretrained.xtb as xtb

    real = xtb.xtb_hydration_energies

    def energies(mol, models, seed=0):
        if Chem.MolToSmiles(mol) == Chem.CanonSmiles(bad_smiles):
            if result is not None:
                return result
            raise ValueError(f"RDKit could not embed {bad_smiles} in 3D")
        return real(mol, models, seed)

    monkeypatch.setattr(xtb, "xtb_hydration_energies", energies)


def test_a_failed_or_absurd_xtb_energy_is_an_error_naming_the_molecule(monkeypatch):
    pytest.importorskip("tblite")
    featurizer = MoleculeFeaturizer(xtb=GFN1[:1])
    _failing_on(monkeypatch, "CCCO")
    with pytest.raises(FeaturizationError, match=r"cannot featurize 'OCCC': xTB energies failed"):
        featurizer("OCCC")
    _failing_on(monkeypatch, "CCCCO", {("GFN1-xTB", "alpb"): 734.2})
    with pytest.raises(FeaturizationError, match=r"implausible .*GFN1-xTB/alpb 734\.2"):
        featurizer(Chem.MolFromSmiles("CCCCO"))  # a molecule is named by its SMILES
    assert isinstance(FeaturizationError("C", "x"), GraphInputError)  # predict's ValueError


def test_datasets_skip_and_report_molecules_xtb_fails_on(monkeypatch, tmp_path):
    pytest.importorskip("tblite")
    _failing_on(monkeypatch, "CCCO")
    source = tmp_path / "data.csv"
    source.write_text("smiles,y\nCO,1\nCCCO,2\nnot-a-smiles,3\nCCO,4\n")
    dataset = MoleculeCSV(source, target_cols="y", featurizer=MoleculeFeaturizer(xtb=GFN1[:1]))
    assert dataset.rows == [0, 3] and dataset.num_rows_read == 4
    skipped = {s.row: s for s in dataset.skipped}
    assert sorted(skipped) == [1, 2]
    assert skipped[1].smiles == "CCCO" and "xTB energies failed" in skipped[1].reason
    assert "could not embed" in skipped[1].reason


def test_train_and_predict_with_xtb_energies(monkeypatch, tmp_path):
    pytest.importorskip("tblite")
    _failing_on(monkeypatch, ALCOHOLS[5])
    source = tmp_path / "train.csv"
    source.write_text("smiles,y\n" + "".join(f"{s},{n * 0.5}\n" for n, s in enumerate(ALCOHOLS)))
    run = tmp_path / "run"
    args = ["train", "--csv", str(source), "--target-col", "y", "--xtb-energies", *GFN1]
    tiny = ["--epochs", "2", "--hidden", "16", "--layers", "1", "--no-progress"]
    assert main([*args, *tiny, "--no-descriptors", "--out", str(run)]) == 0
    with open(run / "skipped.csv", newline="") as handle:
        (skipped,) = list(csv.DictReader(handle))
    assert skipped["row"] == "5" and "xTB energies failed" in skipped["reason"]

    model, meta = load_molecule_model(run)
    assert meta["featurizer"]["xtb"] == list(GFN1) and model.config.mol_dim == 2
    # the head standardises the energies with the training molecules' mean
    featurizer = MoleculeFeaturizer(xtb=GFN1)
    kept = [s for s in ALCOHOLS if s != ALCOHOLS[5]]
    energies = torch.cat([featurizer(s).mol_x for s in kept])
    assert bool((model.mol_mean < energies.max(0).values).all())
    assert bool((model.mol_mean > energies.min(0).values).all())

    preds, errors = predict_molecules(run, ["CCO", ALCOHOLS[5], "CC(", "CCCCO"])
    assert errors[0] == errors[3] == ""
    assert "xTB energies failed" in errors[1] and "invalid SMILES" in errors[2]
    assert np.isfinite(preds[[0, 3]]).all() and np.isnan(preds[[1, 2]]).all()


def test_node_training_refuses_xtb_energies(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--dataset", "karate", "--xtb-energies", "GFN1-xTB/alpb"])
    assert "--xtb-energies applies to molecule training only" in capsys.readouterr().err


def test_a_pretrained_encoder_accepts_xtb_inputs_next_to_its_features():
    pytest.importorskip("tblite")
    encoder = load_pretrained_encoder("xtb-hydration")
    settings = {**encoder.featurizer, "descriptors": True, "xtb": list(GFN1)}
    encoder.check_featurizer(MoleculeFeaturizer.from_dict(settings).to_dict())  # no error
