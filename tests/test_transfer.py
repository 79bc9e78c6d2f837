"""Transfer learning: ``init_from`` starts a molecule model from another run's encoder."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from graphattn.cli.main import main
from graphattn.datasets.molecules import MoleculeCSV
from graphattn.errors import GraphInputError
from graphattn.featurize.molecule import MoleculeFeaturizer
from graphattn.train.checkpoint import load_checkpoint
from graphattn.train.molecules import MoleculeTrainConfig, train_molecule_model
from graphattn.train.transfer import load_pretrained_encoder

TINY = {"hidden": 16, "layers": 1, "heads": 2}


def write_csv(path, column: str, scale: float):
    lines = [f"smiles,{column}"] + [f"{'C' * n}O,{n * scale}" for n in range(1, 15)]
    lines += [f"{'C' * n}N,{n * scale + 1}" for n in range(1, 9)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def source_run(tmp_path_factory):
    """A trained 'pretraining' run on two targets, with RDKit descriptors."""
    folder = tmp_path_factory.mktemp("transfer")
    source = write_csv(folder / "source.csv", "a", 0.5)
    dataset = MoleculeCSV(source, target_cols=["a"], featurizer=MoleculeFeaturizer())
    config = MoleculeTrainConfig(epochs=2, model={**TINY, "readout": ("sum",)})
    train_molecule_model(dataset, config, run_dir=folder / "run", progress=False)
    return folder


def encoder_tensors(state: dict) -> dict:
    return {k: v for k, v in state.items() if not k.startswith(("head.", "mol_"))}


def test_fine_tuning_starts_from_the_encoder_and_inherits_its_architecture(source_run):
    target = write_csv(source_run / "target.csv", "b", -0.3)
    # no descriptors here: only the head reads them, so the encoder still fits
    dataset = MoleculeCSV(
        target, target_cols=["b"], featurizer=MoleculeFeaturizer(descriptors=False)
    )
    # lr=0 (and so no weight decay either): the weights stay as initialised
    config = MoleculeTrainConfig(epochs=1, lr=0.0, init_from=str(source_run / "run"))
    metrics = train_molecule_model(dataset, config, run_dir=source_run / "ft", progress=False)

    model_config = metrics["config"]["model"]
    assert {key: model_config[key] for key in TINY} == TINY  # not the 64 x 3 defaults
    assert model_config["readout"] == ["mean", "max"]  # not an encoder field: own default
    assert metrics["config"]["init_from"] == str(source_run / "run")
    pretrained = encoder_tensors(load_checkpoint(source_run / "run")["state_dict"])
    tuned = metrics["model"].state_dict()
    assert set(encoder_tensors(tuned)) == set(pretrained)
    for key, value in pretrained.items():
        assert torch.equal(tuned[key], value), key
    source_head = load_checkpoint(source_run / "run")["state_dict"]["head.3.weight"]
    assert not torch.equal(tuned["head.3.weight"], source_head)  # the head starts fresh


def test_a_different_featurizer_is_refused_with_the_difference_named(source_run):
    target = write_csv(source_run / "other.csv", "b", 1.0)
    dataset = MoleculeCSV(
        target, target_cols=["b"], featurizer=MoleculeFeaturizer(contributions=True)
    )
    config = MoleculeTrainConfig(epochs=1, init_from=str(source_run / "run"))
    with pytest.raises(GraphInputError, match="contributions: False there, True here"):
        train_molecule_model(dataset, config, progress=False)


def test_a_conflicting_architecture_names_the_misshapen_tensors(source_run):
    encoder = load_pretrained_encoder(source_run / "run")
    from graphattn.models.molecule import MoleculeModel, MoleculeModelConfig

    featurizer = MoleculeFeaturizer()
    config = MoleculeModelConfig(
        atom_dim=featurizer.atom_dim, bond_dim=featurizer.bond_dim, **{**TINY, "hidden": 32}
    )
    with pytest.raises(GraphInputError, match=r"shape: atom_encoder.bias \[16\] there, \[32\]"):
        encoder.load_into(MoleculeModel(config))
    deeper = MoleculeModelConfig(
        atom_dim=featurizer.atom_dim, bond_dim=featurizer.bond_dim, **{**TINY, "layers": 2}
    )
    with pytest.raises(GraphInputError, match=r"missing: layers\.1\."):
        encoder.load_into(MoleculeModel(deeper))


def test_an_ensemble_gives_its_first_model_and_missing_runs_are_refused(tmp_path, caplog):
    from graphattn.models.molecule import MoleculeModel, MoleculeModelConfig

    dataset = MoleculeCSV(write_csv(tmp_path / "e.csv", "a", 0.5), target_cols=["a"])
    config = MoleculeTrainConfig(epochs=1, ensemble=2, model=TINY)
    ensemble = train_molecule_model(dataset, config, run_dir=tmp_path / "ensemble", progress=False)[
        "model"
    ]
    with caplog.at_level("WARNING"):
        encoder = load_pretrained_encoder(tmp_path / "ensemble")
    assert "ensemble of 2 models: initialising from its first" in caplog.text
    target = MoleculeModel(MoleculeModelConfig(**ensemble.members[0].config.to_dict()))
    encoder.load_into(target)
    first = ensemble.members[0].state_dict()
    for name, value in target.state_dict().items():
        if name in encoder.state_dict:
            torch.testing.assert_close(value, first[name])
    assert encoder.state_dict
    assert not any(name.startswith("members.") for name in encoder.state_dict)
    with pytest.raises(FileNotFoundError, match="no run folder or checkpoint at .*nowhere"):
        load_pretrained_encoder(tmp_path / "nowhere")


def test_cli_init_from(source_run, tmp_path, capsys):
    target = write_csv(tmp_path / "t.csv", "y", 0.2)
    out = tmp_path / "run"
    args = ["train", "--csv", str(target), "--target-col", "y", "--epochs", "1"]
    code = main([*args, "--init-from", str(source_run / "run"), "--out", str(out), "--no-progress"])
    assert code == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["config"]["init_from"] == str(source_run / "run")
    assert metrics["config"]["model"]["hidden"] == TINY["hidden"]
    with pytest.raises(SystemExit):
        main(["train", "--dataset", "karate", "--init-from", str(out), "--out", str(tmp_path)])
    assert "--init-from applies to molecule training only" in capsys.readouterr().err


# ----------------------------------------------------------- the shipped xTB encoders


def test_freesolv_starts_from_the_larger_corpus_encoder():
    from graphattn.train.molecules import DATASET_DEFAULTS

    assert DATASET_DEFAULTS["freesolv"]["init_from"] == "xtb-hydration-57k"


@pytest.mark.parametrize("name", ["xtb-hydration-57k", "xtb-hydration"])
def test_the_shipped_encoders_fit_freesolv(name):
    from graphattn.datasets.molecules import dataset_featurizer
    from graphattn.pretrained import pretrained_encoder_path

    encoder = load_pretrained_encoder(name)
    assert encoder.source == name  # errors name it as the user did
    assert encoder.architecture["layers"] == 3 and encoder.architecture["hidden"] == 64
    encoder.check_featurizer(dataset_featurizer("freesolv").to_dict())  # raises if not
    checkpoint = load_checkpoint(pretrained_encoder_path(name))
    assert checkpoint["target_cols"] == ["xtb_hydration"]


def test_a_damaged_or_unknown_shipped_encoder_is_named(monkeypatch):
    import graphattn.pretrained as pretrained

    shipped = "shipped: xtb-hydration-57k, xtb-hydration"
    with pytest.raises(KeyError, match=f"no shipped encoder named 'nope'; {shipped}"):
        pretrained.pretrained_encoder_path("nope")
    with pytest.raises(FileNotFoundError, match="no shipped encoder of that name .shipped: xtb-h"):
        load_pretrained_encoder("xtb_hydration")  # a typo
    monkeypatch.setitem(pretrained.PRETRAINED_ENCODERS, "xtb-hydration", ("xtb_hydration.pt", "0"))
    with pytest.raises(GraphInputError, match="expected 0: reinstall graphattn"):
        load_pretrained_encoder("xtb-hydration")


def test_freesolv_defaults_start_from_the_shipped_encoder(tmp_path):
    from graphattn.datasets.molecules import dataset_featurizer
    from graphattn.pretrained import pretrained_encoder_path
    from graphattn.train.molecules import DATASET_DEFAULTS, dataset_train_settings

    dataset = MoleculeCSV(
        write_csv(tmp_path / "f.csv", "y", 0.5),
        target_cols=["y"],
        featurizer=dataset_featurizer("freesolv"),
    )
    settings = {**dataset_train_settings("freesolv"), "epochs": 1, "lr": 0.0, "ensemble": 1}
    metrics = train_molecule_model(dataset, MoleculeTrainConfig(**settings), progress=False)
    default = DATASET_DEFAULTS["freesolv"]["init_from"]
    shipped = encoder_tensors(load_checkpoint(pretrained_encoder_path(default))["state_dict"])
    tuned = metrics["model"].state_dict()
    assert set(encoder_tensors(tuned)) == set(shipped)
    for key, value in shipped.items():
        assert torch.equal(tuned[key], value), key


def test_changing_the_encoder_drops_the_default_encoder_with_a_warning(caplog):
    from graphattn.train.molecules import dataset_train_settings

    def start(model=None, contributions=False):
        return dataset_train_settings("freesolv", model, contributions)["init_from"]

    assert start({"readout": ["sum"], "hidden": 64, "layers": 3}) == "xtb-hydration-57k"  # fits
    with caplog.at_level("WARNING"):
        assert start({"layers": 4}) is None
    assert "layers differ from the pretrained 'xtb-hydration-57k' encoder of freesolv" in (
        caplog.text
    )
    assert start({"readout": ["mean", "attention"]}) is None  # pooling with weights
    assert start({"pe": "rw"}) is None
    assert start(contributions=True) is None
    assert "init_from" not in dataset_train_settings("esol", {"layers": 4})


def test_fine_tuning_without_dropout_and_the_refit_go_with_the_pretrained_start_only():
    from graphattn.models.molecule import MoleculeModelConfig
    from graphattn.train.molecules import MoleculeTrainConfig, dataset_train_settings

    default = dataset_train_settings("freesolv")
    assert default["init_from"] == "xtb-hydration-57k" and default["model"]["dropout"] == 0.0
    assert default["refit"] is True
    generic = MoleculeModelConfig(atom_dim=1, bond_dim=1).dropout
    assert generic > 0 and MoleculeTrainConfig().refit is False
    for scratch in (
        dataset_train_settings("freesolv", scratch=True),
        dataset_train_settings("freesolv", {"layers": 4}),  # the encoder no longer fits
    ):
        assert scratch["init_from"] is None and "dropout" not in scratch["model"]
        assert "refit" not in scratch
    again = dataset_train_settings("freesolv")  # the defaults themselves unchanged
    assert again["model"]["dropout"] == 0.0 and again["refit"] is True
    assert dataset_train_settings("esol", scratch=True) == dataset_train_settings("esol")


def test_a_shipped_name_means_the_shipped_encoder_even_beside_a_folder_of_that_name(
    source_run, tmp_path, monkeypatch
):
    import shutil

    monkeypatch.chdir(tmp_path)
    shutil.copytree(source_run / "run", tmp_path / "xtb-hydration")
    assert load_pretrained_encoder("xtb-hydration").architecture["hidden"] == 64
    assert load_pretrained_encoder("./xtb-hydration").architecture == {
        **load_pretrained_encoder(source_run / "run").architecture
    }
    with pytest.raises(FileNotFoundError, match="no run folder or checkpoint at ./none"):
        load_pretrained_encoder("./none")  # a path, not the word for "from scratch"


def test_cli_freesolv_uses_the_shipped_encoder_unless_told_otherwise(data_dir, tmp_path, caplog):
    base = ["train", "--dataset", "freesolv", "--data-dir", str(data_dir), "--epochs", "1"]
    base += ["--ensemble", "1", "--no-progress"]
    runs = {
        "default": [],
        "none": ["--init-from", "none"],
        "layers": ["--layers", "2"],
        "same": ["--layers", "3"],  # the encoder's own value: it still fits
    }
    found = {}
    for name, extra in runs.items():
        assert main([*base, *extra, "--out", str(tmp_path / name)]) == 0
        found[name] = json.loads((tmp_path / name / "metrics.json").read_text())["config"]
    assert found["default"]["init_from"] == "xtb-hydration-57k"
    assert found["none"]["init_from"] is None
    assert found["layers"]["init_from"] is None and found["layers"]["model"]["layers"] == 2
    assert found["same"]["init_from"] == "xtb-hydration-57k"
    dropout = {name: config["model"]["dropout"] for name, config in found.items()}
    assert dropout == {"default": 0.0, "none": 0.1, "layers": 0.1, "same": 0.0}
    caplog.clear()
    with caplog.at_level("WARNING"):  # told where to start: no word about the default
        assert (
            main([*base, "--init-from", "none", "--layers", "2", "--out", str(tmp_path / "n2")])
            == 0
        )
    assert "training from scratch" not in caplog.text
    code = main([*base, "--init-from", "./none", "--out", str(tmp_path / "path")])
    assert code == 2  # ./none is a folder name (missing here), not "from scratch"


# ------------------------------------------------------------------ its labels (GFN2-xTB)


def test_corpus_molecules_are_like_freesolv_ones():
    from rdkit import Chem

    from graphattn.pretrained.xtb import corpus_molecule_ok

    def ok(smiles: str) -> bool:
        return corpus_molecule_ok(Chem.MolFromSmiles(smiles))

    assert ok("CCO") and ok("C[N+](=O)[O-]")  # nitro: charged atoms, no net charge
    assert not ok("CC(=O)[O-]") and not ok("CCO.O") and not ok("C" * 41)
    assert ok("C" * 40)


def test_xtb_hydration_energies_order_polar_before_apolar():
    pytest.importorskip("tblite")
    from rdkit import Chem

    from graphattn.pretrained.xtb import xtb_hydration_energy

    methane, ethanol, acetamide = (
        xtb_hydration_energy(Chem.MolFromSmiles(s)) for s in ("C", "CCO", "CC(N)=O")
    )
    # experiment (FreeSolv): 2.00, -5.00, -9.71 kcal/mol; xTB: about 0.2, -4.1, ...
    assert -1 < methane < 1.5
    assert -7 < ethanol < -2
    assert acetamide < ethanol < methane


def test_xtb_models_match_one_model_at_a_time_and_unknown_ones_are_named():
    from rdkit import Chem

    from graphattn.pretrained.xtb import xtb_hydration_energies, xtb_hydration_energy

    ethanol = Chem.MolFromSmiles("CCO")
    with pytest.raises(ValueError, match="unknown xTB model GFN2-xTB/cosmo: methods are GFN2"):
        xtb_hydration_energies(ethanol, [("GFN2-xTB", "cosmo")])  # checked before tblite
    pytest.importorskip("tblite")
    models = [("GFN2-xTB", "alpb"), ("GFN1-xTB", "alpb"), ("GFN1-xTB", "gbsa")]
    energies = xtb_hydration_energies(ethanol, models)
    assert list(energies) == models and all(-8 < e < -2 for e in energies.values())
    assert len(set(energies.values())) == 3  # the methods and solvation models differ
    # one model alone (the default is the shipped encoder's) gives the same number;
    # tblite's threads may change the last digits
    same = pytest.approx(energies[("GFN2-xTB", "alpb")], rel=0, abs=1e-8)
    assert xtb_hydration_energy(ethanol) == same
    gfn1 = xtb_hydration_energy(ethanol, method="GFN1-xTB", solvation="gbsa")
    assert gfn1 == pytest.approx(energies[("GFN1-xTB", "gbsa")], rel=0, abs=1e-8)


# Predictions (xTB hydration energies, kcal/mol) of the shipped checkpoints, computed at
# 47ad41a. They pin the forward computation: a change to the attention, the readout or
# the featurizer that the other tests cannot see (they compare modes and kernels with
# each other) moves them.
SHIPPED_PREDICTIONS = {
    "xtb-hydration-57k": [-4.95227, -3.82360, -8.37176, -0.54414],
    "xtb-hydration": [-6.06288, -4.54071, -8.89349, -4.23982],
}


@pytest.mark.parametrize("name", list(SHIPPED_PREDICTIONS))
@pytest.mark.parametrize("mode", ["sparse", "dense"])
def test_shipped_checkpoints_predict_what_they_predicted_when_shipped(name, mode):
    from graphattn.pretrained import pretrained_encoder_path
    from graphattn.train.molecules import predict_molecules

    smiles = ["CCO", "c1ccccc1O", "CC(=O)N", "ClC(Cl)Cl"]
    preds, errors = predict_molecules(pretrained_encoder_path(name), smiles, mode=mode)
    assert errors == [""] * 4
    np.testing.assert_allclose(preds.ravel(), SHIPPED_PREDICTIONS[name], rtol=1e-4, atol=1e-4)


def test_an_attention_readout_is_inherited_with_its_weights(tmp_path):
    source = write_csv(tmp_path / "source.csv", "a", 0.5)
    dataset = MoleculeCSV(source, target_cols=["a"], featurizer=MoleculeFeaturizer())
    readout = ["attention", "sum"]
    config = MoleculeTrainConfig(epochs=1, model={**TINY, "readout": readout})
    train_molecule_model(dataset, config, run_dir=tmp_path / "pre", progress=False)
    assert load_pretrained_encoder(tmp_path / "pre").architecture["readout"] == readout
    tuned = train_molecule_model(
        dataset,
        MoleculeTrainConfig(epochs=1, init_from=str(tmp_path / "pre")),
        run_dir=tmp_path / "tuned",
        progress=False,
    )
    assert list(tuned["model"].config.readout) == readout
    gate = encoder_tensors(load_checkpoint(tmp_path / "pre")["state_dict"])
    assert any(key.startswith("readout.attention") for key in gate)


def test_encoder_changes_flags_a_readout_whose_pooling_weights_differ_either_way():
    # an attention-pooled encoder under a weightless readout would not load: flagged, so
    # that a data set's default encoder is dropped instead of failing the run
    from graphattn.train.transfer import PretrainedEncoder, encoder_changes

    def encoder(gate: bool) -> PretrainedEncoder:
        state = {"atom_encoder.weight": torch.zeros(1)}
        state.update({"readout.attention.weight": torch.zeros(1)} if gate else {})
        return PretrainedEncoder("pre", state, {"hidden": 16}, {})

    gated, plain = encoder(True), encoder(False)
    assert encoder_changes(gated, {"readout": ["mean", "max"]}) == ["readout"]
    assert encoder_changes(gated, {"readout": ["attention", "sum"]}) == []
    assert encoder_changes(plain, {"readout": ["mean", "attention"]}) == ["readout"]
    assert encoder_changes(plain, {"readout": ["sum"]}) == []
    assert encoder_changes(gated, {"hidden": 32, "readout": ["sum"]}) == ["hidden", "readout"]
    assert encoder_changes(plain, {"hidden": 16, "layers": 2}) == ["layers"]
