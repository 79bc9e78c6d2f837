"""Where the trainers run: ``device="cpu" | "cuda" | "auto"``, and CPU checkpoints.

The CUDA runs skip without a GPU (CI has none); the device tool runs them on a lent one.
"""

from __future__ import annotations

import csv

import numpy as np
import pytest
import torch

from graphattn.cli.main import main
from graphattn.datasets.molecules import load_molecule_dataset
from graphattn.datasets.social import load_node_dataset
from graphattn.errors import GraphInputError
from graphattn.featurize.molecule import MoleculeFeaturizer
from graphattn.splits.nodes import fixed_train_masks
from graphattn.train.loop import training_device
from graphattn.train.molecules import MoleculeTrainConfig, predict_molecules, train_molecule_model
from graphattn.train.nodes import NodeTrainConfig, train_node_model

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
without_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA path")


def test_auto_is_the_cpu_without_a_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert training_device("auto") == torch.device("cpu")
    assert training_device("cpu") == torch.device("cpu")


@pytest.mark.parametrize("name", ["gpu", "tpu", "cuda:x", "meta"])
def test_unknown_device_names_are_refused(name):
    with pytest.raises(GraphInputError, match="device"):
        training_device(name)


@without_cuda
def test_a_cuda_request_without_cuda_says_so(tmp_path, capsys):
    with pytest.raises(GraphInputError, match="sees no CUDA device"):
        training_device("cuda")
    out = tmp_path / "run"
    code = main(["train", "--dataset", "karate", "--device", "cuda", "--out", str(out)])
    assert code == 2
    assert "sees no CUDA device" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.cuda
@needs_cuda
def test_molecule_training_on_cuda_saves_a_cpu_checkpoint(data_dir, tmp_path):
    dataset = load_molecule_dataset(
        "esol", data_dir=data_dir, featurizer=MoleculeFeaturizer(descriptors=True)
    )
    config = MoleculeTrainConfig(
        epochs=3, patience=3, seed=0, device="cuda", model={"hidden": 32, "layers": 2}
    )
    metrics = train_molecule_model(dataset, config, run_dir=tmp_path, progress=False)
    assert metrics["device"].startswith("cuda")
    assert np.isfinite(metrics["test"]["rmse"])
    # Saved as CPU tensors: loads without map_location on a machine without a GPU.
    checkpoint = torch.load(tmp_path / "model.pt", weights_only=True)
    assert all(t.device.type == "cpu" for t in checkpoint["state_dict"].values())

    with open(tmp_path / "predictions.csv") as handle:
        rows = list(csv.DictReader(handle))
    smiles = [r["smiles"] for r in rows]
    written = np.array([float(r[f"pred_{dataset.target_cols[0]}"]) for r in rows])
    on_cpu, errors = predict_molecules(tmp_path, smiles, device="cpu")
    on_gpu, _ = predict_molecules(tmp_path, smiles, device="cuda")
    assert not any(errors)
    np.testing.assert_allclose(on_cpu[:, 0], written, atol=1e-3)
    np.testing.assert_allclose(on_gpu[:, 0], on_cpu[:, 0], atol=1e-4)


@pytest.mark.cuda
@needs_cuda
def test_node_training_on_cuda_learns_karate(tmp_path):
    data = load_node_dataset("karate")
    parts = fixed_train_masks(data.y, data.default_train_nodes)
    masks = dict(zip(("train", "val", "test"), parts, strict=True))
    config = NodeTrainConfig(
        layers=3, hidden=32, dropout=0.5, input_dropout=0.0, epochs=100, device="cuda"
    )
    metrics = train_node_model(data, masks, config, run_dir=tmp_path, progress=False)
    assert metrics["device"].startswith("cuda")
    assert metrics["test"]["accuracy"] > 0.75  # the majority class is 0.5
    assert (tmp_path / "predictions.csv").is_file()
    checkpoint = torch.load(tmp_path / "model.pt", weights_only=True)
    assert all(t.device.type == "cpu" for t in checkpoint["state_dict"].values())


@pytest.mark.parametrize("source", ["csv", "edges", "esol", "facebook-pages"])
def test_a_device_this_machine_lacks_is_refused_before_the_data_is_read(
    source, tmp_path, monkeypatch, capsys
):
    import graphattn.datasets.molecules as molecules
    import graphattn.datasets.social as social
    import graphattn.train.nodes as nodes

    def read(*args, **kwargs):
        raise AssertionError("the data was read before the device was checked")

    monkeypatch.setattr(molecules, "MoleculeCSV", read)
    monkeypatch.setattr(molecules, "load_molecule_dataset", read)
    monkeypatch.setattr(social, "load_node_graph", read)
    monkeypatch.setattr(nodes, "train_node_model_cli", read)
    (tmp_path / "m.csv").write_text("smiles,y\nCCO,1\n")
    (tmp_path / "edges.txt").write_text("0 1\n")
    (tmp_path / "labels.txt").write_text("node,label\n0,a\n1,b\n")
    files = {
        "csv": ["--csv", str(tmp_path / "m.csv"), "--target-col", "y"],
        "edges": ["--edges", str(tmp_path / "edges.txt"), "--labels", str(tmp_path / "labels.txt")],
        "esol": ["--dataset", "esol"],
        "facebook-pages": ["--dataset", "facebook-pages"],
    }
    out = tmp_path / "run"
    for device, message in (
        ("tpu", "device must be 'cpu', 'cuda', 'cuda:N' or 'auto', got 'tpu'"),
        ("cuda:99", "device 'cuda:99' asked for, but"),  # well formed, not on this machine
    ):
        assert main(["train", *files[source], "--device", device, "--out", str(out)]) == 2
        assert message in capsys.readouterr().err
        assert not out.exists()
