"""Transfer learning: ``init_from`` starts a molecule model from another run's encoder."""

from __future__ import annotations

import json

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
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_pretrained_encoder(tmp_path / "nowhere")


def test_cli_init_from(source_run, tmp_path):
    target = write_csv(tmp_path / "t.csv", "y", 0.2)
    out = tmp_path / "run"
    args = ["train", "--csv", str(target), "--target-col", "y", "--epochs", "1"]
    code = main([*args, "--init-from", str(source_run / "run"), "--out", str(out), "--no-progress"])
    assert code == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["config"]["init_from"] == str(source_run / "run")
    assert metrics["config"]["model"]["hidden"] == TINY["hidden"]
    with pytest.raises(SystemExit, match="molecule training only"):
        main(["train", "--dataset", "karate", "--init-from", str(out), "--out", str(tmp_path)])
