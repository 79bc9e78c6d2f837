"""End-to-end molecule runs on real data: training, checkpoints, predict and evaluate."""

from __future__ import annotations

import contextlib
import csv
import json
import re
import resource
from collections.abc import Callable
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from graphattn.cli.main import main
from graphattn.datasets.molecules import MoleculeCSV, load_molecule_dataset
from graphattn.errors import GraphInputError
from graphattn.featurize.molecule import MoleculeFeaturizer
from graphattn.models.molecule import MoleculeModel, MoleculeModelConfig
from graphattn.splits.molecules import random_split
from graphattn.train.checkpoint import load_checkpoint
from graphattn.train.molecules import (
    MoleculeTrainConfig,
    default_workers,
    load_molecule_model,
    member_seed,
    predict_molecules,
    train_molecule_model,
)

SMALL = {"hidden": 32, "layers": 2, "heads": 4}


@pytest.fixture(scope="module")
def esol_run(tmp_path_factory, data_dir):
    """A short real training run on ESOL (shared by the tests below)."""
    torch.set_num_threads(1)
    dataset = load_molecule_dataset(
        "esol", data_dir=data_dir, featurizer=MoleculeFeaturizer(descriptors=True)
    )
    run_dir = tmp_path_factory.mktemp("esol_run")
    config = MoleculeTrainConfig(epochs=10, patience=10, model=SMALL, seed=0)
    metrics = train_molecule_model(dataset, config, run_dir=run_dir, progress=False)
    return dataset, run_dir, metrics


def test_short_esol_run_beats_predicting_the_mean(esol_run):
    dataset, run_dir, metrics = esol_run
    split = json.loads((run_dir / "split.json").read_text())
    y = dataset.targets.numpy()[:, 0]
    mean_rmse = float(np.sqrt(np.mean((y[split["val"]] - y[split["train"]].mean()) ** 2)))
    assert metrics["val"]["rmse"] < 0.8 * mean_rmse
    assert metrics["test"]["r2"] > 0.3


def test_run_folder_has_every_file_and_a_complete_metrics_json(esol_run):
    dataset, run_dir, _ = esol_run
    for name in (
        "model.pt",
        "metrics.json",
        "predictions.csv",
        "learning_curve.png",
        "split.json",
        "skipped.csv",
        "history.json",
    ):
        assert (run_dir / name).is_file(), name
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["task"] == "regression" and metrics["split"] == "random"
    assert set(metrics["test"]) >= {"rmse", "mae", "r2"} and set(metrics["val"]) >= {"rmse"}
    assert metrics["epochs_run"] >= 1 and metrics["train_seconds"] > 0
    assert metrics["device"] == "cpu"  # the default
    with open(run_dir / "predictions.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == metrics["num_molecules"]["test"]
    (target,) = dataset.target_cols
    with open(dataset.path, newline="") as handle:
        measured = [r[target] for r in csv.DictReader(handle)]
    # the measured values as the data set writes them, not float32's -5.449999809265137
    assert [r[target] for r in rows] == [f"{float(measured[int(r['row'])]):g}" for r in rows]
    assert (run_dir / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("split", ["random", "scaffold"])
def test_metrics_count_the_held_out_copies_of_training_molecules(tmp_path, split):
    # each of 12 ring systems twice (its own scaffold), the second time written otherwise
    rings = ["c1ccccc1", "C1CCCCC1", "C1CCCC1", "c1ccncc1", "C1CC1", "C1CCC1", "c1ccoc1"]
    rings += ["c1ccsc1", "C1CCNCC1", "C1CCOC1", "c1cnccn1", "c1ccc2ccccc2c1"]
    spelled = [s for ring in rings for s in (ring, ring.replace("1", "9"))]
    source = tmp_path / "twice.csv"
    source.write_text("smiles,y\n" + "".join(f"{s},{len(s)}\n" for s in spelled))
    dataset = MoleculeCSV(source, target_cols="y")
    assert len(dataset.duplicates) == 12
    config = MoleculeTrainConfig(epochs=1, model=SMALL, split=split, seed=3, refit=True)
    metrics = train_molecule_model(dataset, config, run_dir=tmp_path / "run", progress=False)
    parts = json.loads((tmp_path / "run" / "split.json").read_text())
    in_train = {dataset.smiles[i] for i in parts["train"]}
    expected = {p: sum(dataset.smiles[i] in in_train for i in parts[p]) for p in ("val", "test")}
    assert metrics["num_also_in_train"] == expected
    written = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert written["num_also_in_train"] == expected
    # the refitted models, which make the test metrics, trained on the validation part too
    seen = in_train | {dataset.smiles[i] for i in parts["val"]}
    in_refit = sum(dataset.smiles[i] in seen for i in parts["test"])
    assert written["refit"]["num_test_also_in_train_or_val"] == in_refit >= expected["test"]
    if split == "random":
        assert sum(expected.values()) > 0  # seed 3 parts some pairs
    else:
        assert expected == {"val": 0, "test": 0}  # copies share a scaffold group


def test_held_out_copies_count_stereoisomers_and_are_unknown_without_smiles(tmp_path):
    # the graph features do not encode stereochemistry: these are one input twice each
    pairs = [("C/C=C/C=O", "CC=CC=O"), ("Cl/C=C/Cl", "Cl/C=C\\Cl"), ("C[C@H](N)O", "CC(N)O")]
    pairs += [("C" * n + "O", "C" * n + "O") for n in range(1, 6)]
    source = tmp_path / "stereo.csv"
    source.write_text("smiles,y\n" + "".join(f"{a},1\n{b},2\n" for a, b in pairs))
    dataset = MoleculeCSV(source, target_cols=["y"])
    assert dataset.duplicates == [(2 * i, 2 * i + 1) for i in range(len(pairs))]
    config = MoleculeTrainConfig(epochs=1, model=SMALL, seed=3, fractions=(0.5, 0.25, 0.25))
    metrics = train_molecule_model(dataset, config, run_dir=tmp_path / "run", progress=False)
    parts = json.loads((tmp_path / "run" / "split.json").read_text())
    pair_of = {i: i // 2 for i in range(len(dataset))}
    in_train = {pair_of[i] for i in parts["train"]}
    expected = {p: sum(pair_of[i] in in_train for i in parts[p]) for p in ("val", "test")}
    assert metrics["num_also_in_train"] == expected and sum(expected.values()) > 0
    for item in dataset:
        del item.smiles
    unknown = train_molecule_model(dataset, config, progress=False)["num_also_in_train"]
    assert unknown is None  # not 0, which would say there are no copies


def test_checkpoint_loads_safely_and_reproduces_the_predictions(esol_run):
    dataset, run_dir, metrics = esol_run
    checkpoint = torch.load(run_dir / "model.pt", weights_only=True)
    assert checkpoint["kind"] == "molecule" and checkpoint["target_cols"] == dataset.target_cols
    smiles = dataset.smiles[:20]
    model = metrics["model"].eval()
    batch = next(iter(torch_geometric_loader([dataset[i] for i in range(20)])))
    with torch.no_grad():
        direct = model(batch)
    mean, std = (torch.tensor(checkpoint["scaler"][k]) for k in ("mean", "std"))
    loaded, _ = predict_molecules(run_dir, smiles)
    np.testing.assert_allclose(loaded, (direct * std + mean).numpy(), rtol=1e-5, atol=1e-5)
    # without a run folder, the returned scaler gives the same target units
    in_units = metrics["scaler"].inverse(direct)
    np.testing.assert_allclose(loaded, in_units.numpy(), rtol=1e-5, atol=1e-5)
    again, _ = load_molecule_model(run_dir)
    assert all(
        torch.equal(a, b)
        for a, b in zip(again.state_dict().values(), model.state_dict().values(), strict=True)
    )


def torch_geometric_loader(items):
    from torch_geometric.loader import DataLoader

    return DataLoader(items, batch_size=len(items))


def test_predict_keeps_row_order_and_reports_bad_rows(esol_run, tmp_path):
    _, run_dir, _ = esol_run
    source = tmp_path / "in.csv"
    smiles = ["CCO", "not a smiles", "c1ccccc1O", "", "C1CC", "CC(=O)O"]
    with open(source, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "smiles"])
        writer.writerows([[f"m{i}", s] for i, s in enumerate(smiles)])
    out = tmp_path / "out.csv"
    assert main(["predict", "--model", str(run_dir), "--csv", str(source), "--out", str(out)]) == 0
    with open(out) as handle:
        rows = list(csv.DictReader(handle))
    assert [r["id"] for r in rows] == [f"m{i}" for i in range(len(smiles))]
    pred_col = [c for c in rows[0] if c.startswith("pred_")][0]
    bad = {1, 3, 4}
    for i, row in enumerate(rows):
        if i in bad:
            assert row[pred_col] == "" and row["error"], row
        else:
            assert row["error"] == "" and np.isfinite(float(row[pred_col]))
    assert "not a smiles" in rows[1]["error"]
    # the direct API agrees with the CLI output
    preds, errors = predict_molecules(run_dir, smiles)
    assert [bool(e) for e in errors] == [i in bad for i in range(len(smiles))]
    np.testing.assert_allclose(float(rows[0][pred_col]), preds[0, 0], rtol=1e-4)


def test_evaluate_reports_metrics_on_a_labelled_file(esol_run, tmp_path, capsys):
    dataset, run_dir, _ = esol_run
    target = dataset.target_cols[0]
    source = tmp_path / "labelled.csv"
    with open(source, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["smiles", target])
        for i in range(40):
            writer.writerow([dataset.smiles[i], float(dataset.targets[i, 0])])
        writer.writerow(["xyz", 1.0])
    out = tmp_path / "eval.json"
    code = main(["evaluate", "--model", str(run_dir), "--csv", str(source), "--out", str(out)])
    assert code == 0
    result = json.loads(out.read_text())
    assert result["num_rows"] == 41 and result["num_failed"] == 1
    assert 0 < result["metrics"]["rmse"] < 3


def test_cli_train_on_a_csv_writes_skipped_rows(tmp_path):
    source = tmp_path / "mols.csv"
    rows = [
        ("CCO", 1.0),
        ("CCCO", 1.5),
        ("bad(", 2.0),
        ("CCCCO", 2.0),
        ("c1ccccc1", 3.0),
        ("CC(C)O", 1.2),
        ("CCN", 0.8),
        ("CCCN", 1.1),
        ("OCCO", 0.5),
        ("CCOC", 1.7),
        ("C1CCCCC1", 3.1),
        ("CC(=O)O", 0.3),
    ]
    with open(source, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["smi", "logp"])
        writer.writerows(rows)
    out = tmp_path / "run"
    code = main(
        [
            "train",
            "--csv",
            str(source),
            "--smiles-col",
            "smi",
            "--target-col",
            "logp",
            "--epochs",
            "2",
            "--hidden",
            "16",
            "--layers",
            "1",
            "--heads",
            "2",
            "--out",
            str(out),
            "--no-progress",
            "--atom-contributions",
        ]
    )
    assert code == 0
    with open(out / "skipped.csv") as handle:
        skipped = list(csv.DictReader(handle))
    assert [(r["row"], r["smiles"]) for r in skipped] == [("2", "bad(")]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["num_skipped"] == 1 and sum(metrics["num_molecules"].values()) == 11
    split = json.loads((out / "split.json").read_text())
    for part in ("train", "val", "test"):  # data rows: past the skipped row 2, one more
        assert split["rows"][part] == [i + (i >= 2) for i in split[part]]
    with open(out / "predictions.csv") as handle:
        test_rows = [int(r["row"]) for r in csv.DictReader(handle)]
    assert sorted(test_rows) == sorted(split["rows"]["test"])
    checkpoint = load_checkpoint(out)
    assert checkpoint["target_cols"] == ["logp"]
    featurizer = MoleculeFeaturizer.from_dict(checkpoint["featurizer"])
    assert featurizer.contributions and featurizer.descriptors
    assert checkpoint["model_config"]["atom_dim"] == featurizer.atom_dim
    predictions = tmp_path / "pred.csv"
    assert main(["predict", "--model", str(out), "--csv", str(source), "--smiles-col", "smi",
                 "--out", str(predictions)]) == 0  # fmt: skip
    with open(predictions) as handle:
        assert len(list(csv.DictReader(handle))) == len(rows)


def test_cli_reports_a_missing_target_column(tmp_path, capsys):
    source = tmp_path / "mols.csv"
    source.write_text("smiles,y\nCCO,1\n")
    code = main(
        [
            "train",
            "--csv",
            str(source),
            "--target-col",
            "logS",
            "--out",
            str(tmp_path / "r"),
            "--no-progress",
        ]
    )
    assert code == 2
    assert "logS" in capsys.readouterr().err


def test_molecule_csv_api_roundtrip(tmp_path):
    source = tmp_path / "m.csv"
    source.write_text("smiles,a,b\nCCO,1,\nCCN,,2\n")
    dataset = MoleculeCSV(source, smiles_col="smiles", target_cols=["a", "b"])
    assert dataset[0].y.shape == (1, 2) and torch.isnan(dataset[0].y[0, 1])


def write_alcohols(path):
    """Twelve linear alcohols C1..C12 with a made-up target ``y``, as a CSV."""
    path.write_text("smiles,y\n" + "".join(f"{'C' * n}O,{n * 0.5}\n" for n in range(1, 13)))
    return path


def test_an_ensemble_averages_its_members_and_round_trips(tmp_path):
    from graphattn.models.molecule import MoleculeEnsemble

    source = write_alcohols(tmp_path / "m.csv")
    dataset = MoleculeCSV(source, target_cols=["y"])
    config = MoleculeTrainConfig(epochs=2, ensemble=2, model={"hidden": 16, "layers": 1})
    metrics = train_molecule_model(dataset, config, run_dir=tmp_path / "run", progress=False)
    ensemble = metrics["model"]
    assert isinstance(ensemble, MoleculeEnsemble) and metrics["ensemble_size"] == 2
    batch = next(iter(torch_geometric_loader([dataset[i] for i in range(4)])))
    with torch.no_grad():
        members = [m(batch) for m in ensemble.members]
        torch.testing.assert_close(ensemble(batch), (members[0] + members[1]) / 2)
        assert not torch.allclose(members[0], members[1])  # different initialisations
    loaded, _ = load_molecule_model(tmp_path / "run")
    assert isinstance(loaded, MoleculeEnsemble) and len(loaded.members) == 2
    with torch.no_grad():
        torch.testing.assert_close(loaded(batch), ensemble(batch))


def write_chains(path):
    """36 chains: alcohols, amines and chlorides of 1 to 12 carbons, with a made-up ``y``."""
    groups = {"O": 0.0, "N": 1.0, "Cl": -2.0}
    rows = [
        f"{'C' * n}{end},{n * 0.5 + shift}\n" for end, shift in groups.items() for n in range(1, 13)
    ]
    path.write_text("smiles,y\n" + "".join(rows))
    return path


def test_an_ensembles_spread_is_its_members_std_and_reaches_every_output(tmp_path, capsys):
    from scipy.stats import spearmanr

    from graphattn.train.molecules import TargetScaler

    source = write_chains(tmp_path / "m.csv")
    dataset = MoleculeCSV(source, target_cols=["y"])
    config = MoleculeTrainConfig(epochs=3, ensemble=3, model={"hidden": 16, "layers": 1})
    run = tmp_path / "run"
    metrics = train_molecule_model(dataset, config, run_dir=run, progress=False)

    smiles = [dataset.smiles[i] for i in range(6)]
    preds, errors, std = predict_molecules(run, [*smiles, "C1CC"], return_std=True)
    model, meta = load_molecule_model(run)
    scaler = TargetScaler(**meta["scaler"])
    batch = next(iter(torch_geometric_loader([dataset[i] for i in range(6)])))
    with torch.no_grad():
        members = np.stack([scaler.inverse(m(batch)).numpy() for m in model.members])
    np.testing.assert_allclose(std[:6], members.std(0, ddof=1), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(preds[:6], members.mean(0), rtol=1e-4, atol=1e-6)
    assert (std[:6] > 0).all() and np.isnan(std[6]).all() and errors[6]
    np.testing.assert_array_equal(predict_molecules(run, smiles)[0], preds[:6])

    # the test set's std in predictions.csv, summarised in metrics.json
    table = list(csv.DictReader((run / "predictions.csv").read_text().splitlines()))
    test_std = np.array([float(r["std_y"]) for r in table])
    errors_abs = np.abs(np.array([float(r["pred_y"]) - float(r["y"]) for r in table]))
    spread = json.loads((run / "metrics.json").read_text())["ensemble_spread"]
    assert set(spread) == {"val", "test"} and spread == metrics["ensemble_spread"]
    assert spread["test"]["mean_std"] == pytest.approx(test_std.mean(), rel=1e-4)
    rho = spearmanr(test_std, errors_abs).statistic
    assert spread["test"]["spearman_std_abs_error"] == pytest.approx(rho, abs=1e-6)

    # `predict` writes std_y (empty for a bad row), `evaluate` the same summary
    (tmp_path / "in.csv").write_text("smiles\n" + "\n".join([*smiles, "C1CC"]) + "\n")
    out = tmp_path / "out.csv"
    assert main(["predict", "--model", str(run), "--csv", str(tmp_path / "in.csv"),
                 "--out", str(out)]) == 0  # fmt: skip
    written = list(csv.DictReader(out.read_text().splitlines()))
    assert [float(r["std_y"]) for r in written[:6]] == pytest.approx(std[:6, 0].tolist(), rel=1e-5)
    assert written[6]["std_y"] == "" and written[6]["error"]
    capsys.readouterr()
    assert main(["evaluate", "--model", str(run), "--csv", str(source)]) == 0
    evaluated = json.loads(capsys.readouterr().out)
    assert evaluated["ensemble_spread"]["mean_std"] > 0


def test_a_single_model_reports_no_spread(tmp_path):
    source = write_chains(tmp_path / "m.csv")
    dataset = MoleculeCSV(source, target_cols=["y"])
    config = MoleculeTrainConfig(epochs=1, model={"hidden": 16, "layers": 1})
    run = tmp_path / "run"
    metrics = train_molecule_model(dataset, config, run_dir=run, progress=False)
    assert "ensemble_spread" not in metrics
    _, _, std = predict_molecules(run, ["CCO", "CCN"], return_std=True)
    assert np.isnan(std).all()
    header = (run / "predictions.csv").read_text().splitlines()[0].split(",")
    assert not [c for c in header if c.startswith("std_")]
    (tmp_path / "in.csv").write_text("smiles\nCCO\n")
    assert main(["predict", "--model", str(run), "--csv", str(tmp_path / "in.csv"),
                 "--out", str(tmp_path / "out.csv")]) == 0  # fmt: skip
    assert (tmp_path / "out.csv").read_text().splitlines()[0] == "smiles,pred_y,error"


def trained_with_one_thread(dataset, config: MoleculeTrainConfig) -> dict:
    """``train_molecule_model`` with one torch thread, as each worker process has."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return train_molecule_model(dataset, config, progress=False)
    finally:
        torch.set_num_threads(threads)


def assert_same_weights(model: torch.nn.Module, other: torch.nn.Module) -> None:
    pairs = zip(model.state_dict().items(), other.state_dict().items(), strict=True)
    for (name, a), (_, b) in pairs:
        assert torch.equal(a, b), name


def test_members_trained_in_processes_equal_those_trained_alone_with_one_thread(tmp_path, capsys):
    graph_only = MoleculeFeaturizer()  # early stopping within 6 epochs is part of the check
    dataset = MoleculeCSV(
        write_alcohols(tmp_path / "m.csv"), target_cols=["y"], featurizer=graph_only
    )
    config = MoleculeTrainConfig(
        epochs=6, patience=1, ensemble=3, model={"hidden": 16, "layers": 1}
    )
    in_processes = train_molecule_model(dataset, replace(config, workers=2), progress=True)
    # one bar over all members' epochs; its total shrinks to what early stopping left
    epochs_run = in_processes["epochs_run"]
    assert epochs_run < 3 * 6
    assert f"{epochs_run}/{epochs_run}" in capsys.readouterr().err.split("\r")[-1]
    alone = trained_with_one_thread(dataset, config)
    assert in_processes["ensemble_size"] == 3 and in_processes["config"]["workers"] == 2
    assert in_processes["best_epoch"] == alone["best_epoch"]
    for parallel, sequential in zip(
        in_processes["model"].members, alone["model"].members, strict=True
    ):
        assert_same_weights(parallel, sequential)


def test_an_error_in_a_worker_process_reaches_the_caller(tmp_path):
    # 1,200 molecules: enough tensors that sending them one file descriptor each (what
    # torch's multiprocessing pickler does) would exceed the usual limit of 1,024
    rows = "".join(f"{'C' * (i % 12 + 1)}O,{i}\n" for i in range(1200))
    (tmp_path / "m.csv").write_text("smiles,y\n" + rows)
    featurizer = MoleculeFeaturizer(descriptors=False)
    dataset = MoleculeCSV(tmp_path / "m.csv", target_cols=["y"], featurizer=featurizer)
    # an attention option that only the models, built in the workers, check
    model = {"attention": {"normalize": "bogus"}}
    config = MoleculeTrainConfig(epochs=1, ensemble=2, workers=2, model=model)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, soft), hard))  # workers inherit it
    try:
        with pytest.raises(ValueError, match="normalize must be one of .* got 'bogus'"):
            train_molecule_model(dataset, config, progress=False)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _two_members_training_a_minute(tmp_path) -> tuple[MoleculeCSV, MoleculeTrainConfig]:
    """Twelve alcohols, and an ensemble of 2 members in 2 worker processes that would
    each train for a minute."""
    dataset = MoleculeCSV(
        write_alcohols(tmp_path / "m.csv"), target_cols=["y"], featurizer=MoleculeFeaturizer()
    )
    long = {"epochs": 10**6, "patience": 10**6, "max_seconds": 60.0}
    config = MoleculeTrainConfig(ensemble=2, workers=2, model={"hidden": 16, "layers": 1}, **long)
    return dataset, config


def _once_both_members_train(act: Callable[[list], None]) -> list[float]:
    """Call ``act(worker processes)`` from a thread a second after both members' workers
    have started; the list returned gets the time, just before the call. If they have not
    started within 30 s the thread gives up: the test fails, and nothing reaches a later
    test."""
    import multiprocessing
    import threading
    import time

    acted: list[float] = []

    def wait_then_act() -> None:
        deadline = time.monotonic() + 30
        while len(multiprocessing.active_children()) < 2:
            if time.monotonic() > deadline:
                return
            time.sleep(0.1)  # a loaded machine starts them slowly
        time.sleep(1)
        acted.append(time.perf_counter())  # first: the main thread may read it at once
        act(multiprocessing.active_children())

    threading.Thread(target=wait_then_act, daemon=True).start()
    return acted


def test_an_interrupt_ends_the_members_processes_at_once(tmp_path, sigint_as_in_a_terminal):
    import _thread
    import multiprocessing
    import time

    # the members would train for a minute each: leaving the pool used to wait for them
    dataset, config = _two_members_training_a_minute(tmp_path)
    # a Ctrl-C that reaches this process only, not its workers
    interrupted = _once_both_members_train(lambda workers: _thread.interrupt_main())
    with pytest.raises(KeyboardInterrupt):
        train_molecule_model(dataset, config, progress=False)
    assert time.perf_counter() - interrupted[0] < 20
    assert multiprocessing.active_children() == []


def test_a_killed_worker_is_named_and_ends_the_others(tmp_path, capsys, monkeypatch):
    import multiprocessing
    import os
    import signal
    import time

    from graphattn.cli.main import main
    from graphattn.train import molecules
    from graphattn.train.molecules import WorkerProcessDied

    dataset, config = _two_members_training_a_minute(tmp_path)

    def kill_the_last_started(workers: list) -> None:  # as the out-of-memory killer would
        last = max(workers, key=lambda worker: int(worker.name.rsplit("-", 1)[1]))
        os.kill(last.pid, signal.SIGKILL)  # SpawnProcess-N: N counts the starts

    killed = _once_both_members_train(kill_the_last_started)
    # the worker started last: the pool itself often missed its death (CPython 3.11)
    expected = r"ended abruptly: killed by SIGKILL \(as the out-of-memory .* --workers 1"
    with pytest.raises(WorkerProcessDied, match=expected) as died:
        train_molecule_model(dataset, config, progress=False)
    assert died.value.exitcode == -signal.SIGKILL
    assert killed and time.perf_counter() - killed[0] < 20
    assert multiprocessing.active_children() == []

    # the CLI says so in one line
    def dies(*args, **kwargs):
        raise WorkerProcessDied()

    monkeypatch.setattr(molecules, "train_molecule_model", dies)
    argv = ["train", "--csv", str(tmp_path / "m.csv"), "--target-col", "y", "--ensemble", "2"]
    assert main([*argv, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "graphattn train: error: a worker process training ensemble members ended" in err


def test_a_queue_feeder_stuck_sending_to_no_reader_is_let_go():
    """What a pool's thread waits for after a worker died before reading its member;
    Pythons without CPython's fix of issue 94777 (3.10) waited there 60 s."""
    import multiprocessing
    import threading

    from graphattn.train.molecules import _unblock_feeder

    queue = multiprocessing.get_context("spawn").Queue()
    queue.put(b"x" * 2**20)  # beyond a pipe's buffer, and nobody reads it
    queue.close()
    joined = threading.Thread(target=queue.join_thread, daemon=True)
    joined.start()
    joined.join(1)
    assert joined.is_alive()  # the feeder is stuck in its send
    _unblock_feeder(queue)
    joined.join(10)
    assert not joined.is_alive()
    _unblock_feeder(queue)  # a second call finds the reader closed and does nothing


def test_ctrl_c_ends_the_cli_with_one_line_and_status_130(tmp_path, capsys, monkeypatch):
    from graphattn.train import molecules

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(molecules, "train_molecule_model", interrupted)
    argv = ["train", "--csv", str(write_alcohols(tmp_path / "m.csv")), "--target-col", "y"]
    assert main([*argv, "--out", str(tmp_path / "run")]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == "graphattn train: interrupted"
    (tmp_path / "run").mkdir()  # a run folder begun: the message warns of it
    assert main([*argv, "--out", str(tmp_path / "run")]) == 130
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == f"graphattn train: interrupted ({tmp_path / 'run'} may hold a partial run)"


def test_ctrl_c_ends_the_command_by_sigint_so_a_shell_loop_stops_too(
    tmp_path, sigint_as_in_a_terminal
):
    # exiting with status 130 instead would make bash run the next command of a loop
    import os
    import signal
    import subprocess
    import sys
    import threading
    import time

    source = write_alcohols(tmp_path / "m.csv")
    long = ["--epochs", "1000000", "--patience", "1000000", "--out", str(tmp_path / "run")]
    command = ["-m", "graphattn.cli.main", "train", "--csv", str(source), "--target-col", "y"]
    # faulthandler: a run that outlives its Ctrl-C is sent SIGABRT below, to show where
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "PYTHONFAULTHANDLER": "1"}
    # the child starts with SIGINT not ignored (sigint_as_in_a_terminal)
    process = subprocess.Popen([sys.executable, *command, *long], env=env, stderr=subprocess.PIPE)
    err = bytearray()

    def read_stderr() -> None:
        for chunk in iter(process.stderr.read1, b""):  # as it comes: tqdm ends no lines
            err.extend(chunk)

    reader = threading.Thread(target=read_stderr)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        # after the first epoch's loss: a SIGINT while Numba compiles the kernel, in the
        # first epoch, is delivered too (tests/test_interrupts.py), but llvmlite may then
        # print an error of its own from a half-built object
        while b"loss=" not in err and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert b"loss=" in err, "training did not start"
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack
            process.wait(timeout=10)
            reader.join(timeout=10)
            pytest.fail("still running 60 s after Ctrl-C; its stderr:\n" + err.decode()[-8000:])
    finally:
        process.kill()
        reader.join(timeout=10)
    assert process.returncode == -signal.SIGINT  # the shell reports 130, and stops a loop
    text = err.decode()
    assert text.rstrip().endswith("graphattn train: interrupted") and "Traceback" not in text


def test_diverged_training_is_named_as_such_not_as_bad_input(tmp_path):
    # lr 1e6 turned the weights non-finite, and the layers' input check then reported
    # "x has non-finite values" as if the user's features held NaN
    import pickle

    from graphattn import TrainingDiverged

    dataset = MoleculeCSV(write_alcohols(tmp_path / "m.csv"), "smiles", ["y"])
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_text("{}")  # an earlier run: kept
    config = MoleculeTrainConfig(epochs=3, lr=1e6, model={"hidden": 8, "layers": 1})
    with pytest.raises(TrainingDiverged, match=r"training diverged in epoch \d") as caught:
        train_molecule_model(dataset, config, run_dir=run, progress=False)
    assert "lower the learning rate (lr = 1e+06; CLI --lr)" in str(caught.value)
    assert (run / "metrics.json").read_text() == "{}"
    copy = pickle.loads(pickle.dumps(caught.value))  # as a worker process hands it over
    assert (type(copy), str(copy)) == (TrainingDiverged, str(caught.value))


def test_a_nan_input_met_after_updates_is_still_an_input_error(tmp_path):
    # drop_last and reshuffling leave a molecule unseen until epoch 2: its NaN was taken
    # for divergence there (one from a custom featurizer, say)
    import math

    from graphattn import GraphInputError, TrainingDiverged

    dataset = MoleculeCSV(write_alcohols(tmp_path / "m.csv"), "smiles", ["y"])
    for item in dataset._items:
        item.x = item.x.clone()
        item.x[0, 0] = math.nan if item.row == 1 else item.x[0, 0]
    config = MoleculeTrainConfig(epochs=3, batch_size=4, seed=1, model={"hidden": 8, "layers": 1})
    with pytest.raises(GraphInputError, match="x has non-finite values") as caught:
        train_molecule_model(dataset, config, progress=False)
    assert not isinstance(caught.value, TrainingDiverged)
    # a descriptor reaches the loss without a layer's check: its NaN made the loss NaN,
    # which was taken for divergence
    featurizer = MoleculeFeaturizer(descriptors=True)
    dataset = MoleculeCSV(tmp_path / "m.csv", "smiles", ["y"], featurizer=featurizer)
    for item in dataset._items:
        item.mol_x = item.mol_x.clone()
        item.mol_x[0, 0] = math.nan if item.row == 1 else item.mol_x[0, 0]
    named = r"data row 1, counted from 0: 'CCO': descriptor 0 \(mol_x\) is nan"
    with pytest.raises(GraphInputError, match=named) as caught:
        train_molecule_model(dataset, config, progress=False)
    assert not isinstance(caught.value, TrainingDiverged)


def test_a_dead_worker_is_told_by_its_exit_code():
    import pickle
    import signal

    from graphattn.train.molecules import WorkerProcessDied

    assert re.search(r"killed by SIGKILL \(as the out-of-memory", str(WorkerProcessDied(-9)))
    assert "killed by SIGTERM. With --workers 1" in str(WorkerProcessDied(-signal.SIGTERM))
    assert "killed by signal 200." in str(WorkerProcessDied(-200))  # no such signal
    crashed = WorkerProcessDied(1)
    assert crashed.exitcode == 1
    assert "exited with code 1 " in str(crashed) and "__name__ ==" in str(crashed)
    set_up_failed = str(WorkerProcessDied(0))  # the pool's initializer raised
    assert "exited with code 0 before training" in set_up_failed
    assert "__name__" not in set_up_failed
    unknown = WorkerProcessDied()
    assert unknown.exitcode is None and "killed (by the out-of-memory" in str(unknown)
    back = pickle.loads(pickle.dumps(crashed))  # whole, not a TypeError from __init__
    assert type(back) is WorkerProcessDied and (back.exitcode, str(back)) == (1, str(crashed))


def _pool_with_workers(*exitcodes):
    """A stand-in for a process pool whose workers have these exit codes (None: running)."""
    workers = {pid: SimpleNamespace(exitcode=code) for pid, code in enumerate(exitcodes)}
    return SimpleNamespace(_processes=workers)


def test_the_worker_reported_dead_is_not_one_the_pool_ended():
    """Once the pool sees a worker gone it terminates the others (SIGTERM): the one that
    ended first, by a kill or a crash, is the one to report."""
    import signal

    from graphattn.train.molecules import _ended_worker

    assert _ended_worker(_pool_with_workers(None, None)) is None
    assert _ended_worker(SimpleNamespace(_processes=None)) is None  # shut down
    killed = _pool_with_workers(None, -signal.SIGTERM, -signal.SIGKILL)
    assert _ended_worker(killed).exitcode == -signal.SIGKILL
    assert _ended_worker(_pool_with_workers(-signal.SIGTERM, None, 1)).exitcode == 1
    only_terminated = _pool_with_workers(None, -signal.SIGTERM)
    assert _ended_worker(only_terminated).exitcode == -signal.SIGTERM


def test_member_errors_come_first_then_the_worker_that_died():
    import signal
    from concurrent.futures import Future
    from concurrent.futures.process import BrokenProcessPool

    from graphattn.train.molecules import WorkerProcessDied, _raise_member_errors

    def futures(*errors):
        made = []
        for error in errors:
            made.append(Future())
            if error is not None:
                made[-1].set_exception(error)
        return made

    def broken():
        return BrokenProcessPool("A process in the process pool was terminated abruptly")

    sigkill, sigterm = -signal.SIGKILL, -signal.SIGTERM
    # nothing wrong yet
    assert _raise_member_errors(futures(None, None), _pool_with_workers(None, None)) is None
    # a member's own error, even once a worker has ended
    member_error = futures(ValueError("normalize must be one of"), broken())
    with pytest.raises(ValueError, match="normalize must be one of"):
        _raise_member_errors(member_error, _pool_with_workers(None, sigkill))
    # a killed worker the pool has not noticed yet
    with pytest.raises(WorkerProcessDied) as died:
        _raise_member_errors(futures(None, None), _pool_with_workers(sigkill, None))
    assert died.value.exitcode == sigkill and died.value.__cause__ is None
    # the pool noticed, and ended the other worker itself: the first one is told
    with pytest.raises(WorkerProcessDied) as died:
        _raise_member_errors(futures(broken(), broken()), _pool_with_workers(sigterm, sigkill))
    assert died.value.exitcode == sigkill
    assert isinstance(died.value.__cause__, BrokenProcessPool)
    # broken with only the pool's own SIGTERMs (say, an error it could not unpickle, which
    # the BrokenProcessPool's cause holds): no exit code to tell
    for workers in [(sigterm, sigterm), (None, None)]:
        with pytest.raises(WorkerProcessDied) as died:
            _raise_member_errors(futures(broken(), None), _pool_with_workers(*workers))
        assert died.value.exitcode is None
        assert isinstance(died.value.__cause__, BrokenProcessPool)


def test_stopped_workers_leave_no_queued_member_to_wait_for(monkeypatch):
    """More members than workers: one member waits in the pool's queue, its payload
    half-written to a pipe no process reads once the workers are stopped. The pool's
    thread must not wait for it (on Python 3.10, which leaves the pipe open, it waited
    forever, and so did the exit after an interrupt or a member's error)."""
    import multiprocessing
    import time
    from concurrent.futures import ProcessPoolExecutor

    from graphattn.train.molecules import _stop_workers

    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    payload = b"x" * (4 << 20)  # a member's job: far more than a pipe holds
    futures = [pool.submit(time.sleep, 600), *(pool.submit(len, payload) for _ in range(2))]
    deadline = time.monotonic() + 60
    while not futures[1].running() and time.monotonic() < deadline:
        time.sleep(0.05)  # until the second member is in the queue for the worker
    manager, reader = pool._executor_manager_thread, pool._call_queue._reader
    monkeypatch.setattr(reader, "close", lambda: None)  # as Python 3.10 leaves it open
    try:
        _stop_workers(pool)
        manager.join(timeout=30)
        assert not manager.is_alive(), "the pool's thread waits to send a queued member"
    finally:
        type(reader).close(reader)  # frees the queue's thread
        manager.join(timeout=30)
    assert all(f.done() for f in futures)
    assert multiprocessing.active_children() == []


class FiveEpochJob(SimpleNamespace):
    """A stand-in for ``_MembersJob`` that ``_collect_members`` can pickle."""

    def epochs_of(self, member: int) -> int:
        return self.config.epochs


def test_a_members_error_is_raised_while_the_others_still_train():
    # the error must not wait for the other members' epochs (a minute each, or hours)
    import threading
    from concurrent.futures import Future

    from graphattn.train.molecules import _collect_members

    futures = [Future(), Future()]
    futures[0].set_exception(ValueError("member 0 failed"))

    class Pool:  # member 1 trains on: its future completes only when the test says so
        _processes: dict = {}  # workers, none of which has ended

        def submit(self, fn, payload, member):
            return futures[member]

    class NoReports:
        def empty(self) -> bool:
            return True

    job = FiveEpochJob(config=SimpleNamespace(ensemble=2, epochs=5), metric="rmse")
    raised = []

    def collect() -> None:
        try:
            _collect_members(Pool(), job, NoReports(), "", False)
        except ValueError as err:
            raised.append(err)

    thread = threading.Thread(target=collect, daemon=True)
    thread.start()
    thread.join(timeout=10)
    finished_alone = not thread.is_alive()
    futures[1].set_result(None)  # ends a collector that waited for every member
    thread.join(timeout=10)
    assert finished_alone, "the error waited for the member still training"
    assert [str(err) for err in raised] == ["member 0 failed"]


def test_an_error_before_any_worker_starts_is_raised_not_waited_on(monkeypatch):
    # an error (or Ctrl-C) while the job is serialised, before the pool starts a process:
    # stopping the workers waited on no process at all, which never returns
    import threading

    import graphattn.train.molecules as molecules

    def unserialisable(job):
        raise MemoryError("the job does not fit")

    monkeypatch.setattr(molecules, "_to_bytes", unserialisable)
    raised = []

    def fit() -> None:
        try:
            molecules._fit_members_in_processes(None, 2, "", False)
        except MemoryError as err:
            raised.append(err)

    thread = threading.Thread(target=fit, daemon=True)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive(), "the error waited forever for workers that never started"
    assert [str(err) for err in raised] == ["the job does not fit"]


def test_an_interrupt_stops_a_worker_the_pool_has_not_listed_yet(monkeypatch):
    import multiprocessing
    import time

    import graphattn.train.molecules as molecules

    started = []

    def interrupted_while_starting(pool, job, reports, label, progress):
        process = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(600,))
        process.start()  # a worker started, not yet in the pool's list of its processes
        started.append(process)
        raise KeyboardInterrupt

    monkeypatch.setattr(molecules, "_collect_members", interrupted_while_starting)
    try:
        with pytest.raises(KeyboardInterrupt):
            molecules._fit_members_in_processes(None, 2, "", False)
        started[0].join(timeout=30)  # ended (the sentinel can come just before its exit)
        assert started[0].exitcode is not None, "the unlisted worker runs on"
    finally:
        for process in started:
            process.kill()
            process.join()


def test_a_single_model_trains_in_this_process_whatever_the_workers(tmp_path, monkeypatch):
    # workers is ignored for a single model: no process (10 s to start) for one member
    import graphattn.train.molecules as molecules

    def no_processes(*args, **kwargs):
        raise AssertionError("a single model was sent to a worker process")

    monkeypatch.setattr(molecules, "_fit_members_in_processes", no_processes)
    dataset = MoleculeCSV(write_alcohols(tmp_path / "m.csv"), target_cols=["y"])
    config = MoleculeTrainConfig(epochs=1, workers=4, model={"hidden": 16, "layers": 1})
    metrics = train_molecule_model(dataset, config, progress=False)
    assert metrics["ensemble_size"] == 1 and metrics["config"]["workers"] == 4


PARENT_OF_WORKERS = """
import sys
from graphattn.datasets.molecules import MoleculeCSV
from graphattn.train.molecules import MoleculeTrainConfig, train_molecule_model

if __name__ == "__main__":
    dataset = MoleculeCSV(sys.argv[1], target_cols=["y"])
    long = {"epochs": 10**6, "patience": 10**6, "max_seconds": 120.0}
    config = MoleculeTrainConfig(ensemble=2, workers=2, model={"hidden": 16, "layers": 1}, **long)
    train_molecule_model(dataset, config, progress=False)
"""


def test_a_script_without_the_main_guard_is_told_to_add_it(tmp_path):
    # spawn runs the script again in each worker, where starting processes fails: the
    # worker exits with code 1, which used to read as "killed or crashed"
    import os
    import subprocess
    import sys

    unguarded = PARENT_OF_WORKERS.replace('if __name__ == "__main__":\n', "if True:\n")
    (tmp_path / "unguarded.py").write_text(unguarded)
    source = write_alcohols(tmp_path / "m.csv")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    ran = subprocess.run(
        [sys.executable, str(tmp_path / "unguarded.py"), str(source)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 1
    error = "graphattn.train.molecules.WorkerProcessDied: "
    # not always the last line: a worker ended mid-start can leave a resource warning after
    told = [line for line in ran.stderr.splitlines() if line.startswith(error)]
    assert len(told) == 1, ran.stderr[-3000:]
    assert "exited with code 1" in told[0] and 'if __name__ == "__main__":' in told[0]


def test_worker_processes_end_with_a_killed_parent(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    import psutil

    (tmp_path / "parent.py").write_text(PARENT_OF_WORKERS)
    source = write_alcohols(tmp_path / "m.csv")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    parent = subprocess.Popen(
        [sys.executable, str(tmp_path / "parent.py"), str(source)], env=env, cwd=tmp_path
    )
    workers = []
    try:
        deadline = time.monotonic() + 120
        while len(workers) < 2 and parent.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
            children = psutil.Process(parent.pid).children()
            workers = [p for p in children if "spawn_main" in " ".join(p.cmdline())]
        assert len(workers) >= 2, "the parent did not start its two workers"
        time.sleep(3)
        workers = psutil.Process(parent.pid).children()  # every process the run started
        parent.send_signal(signal.SIGKILL)  # as the OOM killer or `kill -9` would
        parent.wait()
        deadline = time.monotonic() + 30
        while any(_running(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not any(_running(p) for p in workers), "workers outlived their parent"
    finally:
        for process in [parent, *workers]:
            with contextlib.suppress(psutil.Error, ProcessLookupError):
                process.kill()


def _running(process) -> bool:
    import psutil

    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_cli_ensemble_flag_and_its_checks(tmp_path, capsys):
    source = write_alcohols(tmp_path / "m.csv")
    out = tmp_path / "run"
    args = ["train", "--csv", str(source), "--target-col", "y", "--epochs", "1"]
    tiny = ["--hidden", "16", "--layers", "1", "--no-progress"]
    assert main([*args, *tiny, "--ensemble", "2", "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["ensemble_size"] == 2 and metrics["config"]["ensemble"] == 2
    assert metrics["config"]["workers"] == default_workers(2)  # one process per member
    assert main([*args, *tiny, "--ensemble", "0", "--out", str(tmp_path / "zero")]) != 0
    assert "ensemble must be at least 1 model, got 0" in capsys.readouterr().err
    assert main([*args, *tiny, "--workers", "0", "--out", str(tmp_path / "w0")]) != 0
    assert "workers must be at least 1, got 0" in capsys.readouterr().err
    for flag in ("--ensemble", "--workers"):
        with pytest.raises(SystemExit):
            main(["train", "--dataset", "karate", flag, "2", "--out", str(tmp_path / "k")])
        assert f"{flag} applies to molecule training only" in capsys.readouterr().err


def test_default_workers_is_one_per_member_up_to_twice_the_cores(monkeypatch):
    import graphattn.train.molecules as molecules

    for cores, ensemble, expected in ((2, 1, 1), (2, 3, 3), (2, 10, 4), (1, 3, 1), (8, 3, 3)):
        monkeypatch.setattr(molecules, "usable_cores", lambda cores=cores: cores)
        assert default_workers(ensemble) == expected, (cores, ensemble)


def tiny_config(**changes) -> MoleculeTrainConfig:
    return MoleculeTrainConfig(**{"epochs": 2, "model": {"hidden": 16, "layers": 1}, **changes})


def test_a_file_without_data_rows_says_so(tmp_path):
    from graphattn import GraphInputError

    source = tmp_path / "header_only.csv"
    source.write_text("smiles,y\n")
    with pytest.raises(GraphInputError, match="no molecules to train on: the data set has no data"):
        train_molecule_model(MoleculeCSV(source, target_cols=["y"]), tiny_config(), progress=False)


def test_no_usable_rows_is_an_error_that_still_writes_skipped_csv(tmp_path):
    from graphattn import GraphInputError

    source = tmp_path / "m.csv"
    source.write_text("smiles,y\nCCO,high\nCCN,low\n")
    dataset = MoleculeCSV(source, target_cols=["y"])
    first = r"\(e\.g\. data row 0, counted from 0: .*high"
    with pytest.raises(GraphInputError, match=r"all 2 rows were skipped " + first):
        train_molecule_model(dataset, tiny_config(), run_dir=tmp_path / "run", progress=False)
    with open(tmp_path / "run" / "skipped.csv") as handle:
        assert [r["smiles"] for r in csv.DictReader(handle)] == ["CCO", "CCN"]

    # a folder holding an earlier run: its model must not pass for this failed run's
    train_molecule_model(
        MoleculeCSV(write_alcohols(tmp_path / "ok.csv"), target_cols=["y"]),
        tiny_config(),
        run_dir=tmp_path / "reused",
        progress=False,
    )
    with pytest.raises(GraphInputError, match="all 2 rows were skipped"):
        train_molecule_model(dataset, tiny_config(), run_dir=tmp_path / "reused", progress=False)
    assert sorted(p.name for p in (tmp_path / "reused").iterdir()) == ["skipped.csv"]


def test_splits_and_targets_the_trainer_cannot_use_are_errors(tmp_path):
    from graphattn import GraphInputError

    two = tmp_path / "two.csv"
    two.write_text("smiles,y\nCCO,1\nCCC,2\n")
    with pytest.raises(GraphInputError, match=r"left the val part empty") as random_error:
        train_molecule_model(MoleculeCSV(two, target_cols=["y"]), tiny_config(), progress=False)
    assert "or a random split" not in str(random_error.value)  # it is one already
    with pytest.raises(GraphInputError, match=r"part empty .*, or a random split"):
        train_molecule_model(
            MoleculeCSV(two, target_cols=["y"]), tiny_config(split="scaffold"), progress=False
        )

    unlabelled = MoleculeCSV(write_alcohols(tmp_path / "m.csv"), target_cols=[])
    with pytest.raises(GraphInputError, match="the data set has no target columns"):
        train_molecule_model(unlabelled, tiny_config(), progress=False)

    empty = tmp_path / "empty.csv"
    empty.write_text("smiles,y,z\n" + "".join(f"{'C' * n}O,,{n}\n" for n in range(1, 13)))
    with pytest.raises(
        GraphInputError, match=r"target column 'y' has no values among the 10 training"
    ):
        train_molecule_model(
            MoleculeCSV(empty, target_cols=["y", "z"]), tiny_config(), progress=False
        )

    three = tmp_path / "three.csv"
    three.write_text("smiles,c\n" + "".join(f"{'C' * n}O,{n % 3}\n" for n in range(1, 13)))
    with pytest.raises(GraphInputError, match=r"must be 0 or 1 \(or empty\): data row") as bad:
        train_molecule_model(
            MoleculeCSV(three, target_cols=["c"]),
            tiny_config(task="classification"),
            progress=False,
        )
    row, smiles = re.search(
        r"data row (\d+), counted from 0: (C+O) has c = 2", str(bad.value)
    ).groups()
    assert int(row) == smiles.count("C") - 1  # row n - 1 holds n carbons


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"epochs": 0}, "epochs must be at least 1, got 0"),
        ({"lr": -1.0}, "lr must be a finite number, 0 or more, got -1.0"),
        ({"lr": float("nan")}, "lr must be a finite number, 0 or more, got nan"),
        ({"weight_decay": -0.1}, "weight_decay must be a finite number, 0 or more, got -0.1"),
        ({"patience": 0}, "patience must be at least 1 epoch, got 0"),
        ({"seed": -1}, r"seed must be a whole number from 0 to 2\*\*64 - 1, got -1"),
        ({"batch_size": 0}, "batch_size must be at least 1, got 0"),
        ({"warmup_epochs": -1}, "warmup_epochs must be 0 or more, got -1"),
        ({"max_seconds": 0}, "max_seconds must be positive, got 0"),
        ({"refit": "yes"}, "refit must be True or False, got 'yes'"),
        (
            {"model": {"hidden": 30, "heads": 4}},
            r"hidden must be a positive multiple of heads \(4\), got 30",
        ),
        ({"model": {"heads": 0}}, "heads must be at least 1, got 0"),
        ({"model": {"layers": -1}}, "layers must be 0 or more, got -1"),
        (
            {"model": {"hidden": 16, "dropout": 1.0}},
            "dropout must be at least 0 and below 1, got 1.0",
        ),
        ({"split": "scafold"}, "split must be 'random' or 'scaffold', got 'scafold'"),
        ({"task": "regresion"}, r"task must be one of .*, got 'regresion'"),
        ({"model": {"hiden": 16}}, r"no MoleculeModelConfig field\(s\) \['hiden'\]"),
        (
            {"model": {"task": "classification", "mol_dim": 5}},
            r"sets \['mol_dim', 'task'\], which training takes from the data",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_settings_out_of_range_are_refused_by_name_and_write_nothing(tmp_path, changes, message):
    from graphattn import GraphInputError

    dataset = MoleculeCSV(write_alcohols(tmp_path / "m.csv"), target_cols=["y"])
    with pytest.raises(GraphInputError, match=message):
        train_molecule_model(dataset, tiny_config(**changes), tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / "model.pt").exists()


def test_seeds_beyond_32_bits_train_and_are_repeatable(tmp_path):
    dataset = MoleculeCSV(write_alcohols(tmp_path / "m.csv"), target_cols=["y"])
    config = tiny_config(seed=5_000_000, ensemble=2)  # member seeds pass 2**32
    runs = [train_molecule_model(dataset, config, progress=False) for _ in range(2)]
    assert runs[0]["train"]["rmse"] == runs[1]["train"]["rmse"]
    # member seeds past 2**64, beyond what a torch generator takes, wrap too (they raised
    # torch's "Overflow when unpacking long long")
    huge = tiny_config(seed=10**17, ensemble=1, epochs=1)
    assert np.isfinite(train_molecule_model(dataset, huge, progress=False)["train"]["rmse"])


def test_seeds_2_to_the_61_apart_give_members_their_own_initial_weights(tmp_path):
    # seed * 1000 + member wrapped at 2**64, so these two runs started from the same weights
    dataset = MoleculeCSV(write_alcohols(tmp_path / "m.csv"), target_cols=["y"])

    def initial_weights(seed: int) -> dict:
        config = tiny_config(seed=seed, ensemble=1, epochs=1, lr=0.0)
        return train_molecule_model(dataset, config, progress=False)["model"].state_dict()

    low, high, next_seed = (initial_weights(s) for s in (7, 7 + 2**61, 8))
    assert not torch.equal(low["atom_encoder.weight"], high["atom_encoder.weight"])
    assert not torch.equal(low["atom_encoder.weight"], next_seed["atom_encoder.weight"])
    assert member_seed(7, 2) == 7002  # as before for every seed below 2**64 / 1000
    assert member_seed(2**63, 0) != member_seed(0, 0) and member_seed(2**63, 0) < 2**64
    # NumPy integers wrapped before the check, tensors stayed tensors (and failed)
    assert member_seed(np.uint64(2**63), 0) == member_seed(2**63, 0)
    assert member_seed(torch.tensor(3), 1) == 3001
    assert member_seed(0, 1000) != member_seed(1, 0)  # a large ensemble meets no next seed


def test_a_model_without_attention_layers_trains(tmp_path):
    # layers=0 is allowed on purpose: a baseline that pools the encoded atoms directly
    dataset = MoleculeCSV(write_alcohols(tmp_path / "m.csv"), target_cols=["y"])
    config = tiny_config(model={"hidden": 16, "layers": 0})
    metrics = train_molecule_model(dataset, config, progress=False)
    assert not any("layers" in name for name, _ in metrics["model"].named_parameters())
    assert np.isfinite(metrics["train"]["rmse"])


def test_a_diverged_classifier_without_attention_layers_is_named_as_such(tmp_path):
    # no layer checks the values of a model without attention: a classifier's NaN
    # logits reached scikit-learn's ROC-AUC, which raised "Input contains NaN."
    from graphattn import TrainingDiverged

    source = tmp_path / "m.csv"
    smiles = ["CCO", "CCN", "CCC", "CCCl", "c1ccccc1", "CC(=O)O", "CCOC", "CCCC", "CCCO", "CCCN"]
    source.write_text("smiles,y\n" + "".join(f"{s},{i % 2}\n" for i, s in enumerate(smiles * 3)))
    dataset = MoleculeCSV(source, target_cols=["y"])
    config = tiny_config(task="classification", epochs=5, lr=1e6, model={"layers": 0})
    with pytest.raises(TrainingDiverged, match="a validation prediction is not finite"):
        train_molecule_model(dataset, config, progress=False)


class Molecules(list):
    """A plain list of featurized molecules with the attributes the trainer reads."""


def plain_molecules(featurizer: MoleculeFeaturizer | None = None) -> Molecules:
    from graphattn.featurize import featurize_smiles

    featurizer = featurizer or MoleculeFeaturizer()
    chains = ["C" * n + end for n in range(1, 8) for end in ("O", "N", "Cl")]
    dataset = Molecules(featurize_smiles(s, featurizer) for s in chains)
    for item, s in zip(dataset, chains, strict=True):
        item.y = torch.tensor([[float(len(s))]])
    dataset.smiles, dataset.target_cols, dataset.featurizer = chains, ["y"], featurizer
    return dataset


def test_a_nan_validation_input_of_a_model_without_attention_is_named_not_divergence():
    dataset = plain_molecules()
    val = random_split(len(dataset), (0.8, 0.1, 0.1), 0)["val"][0]
    dataset[val].x[0, 0] = float("nan")
    with pytest.raises(GraphInputError, match=rf"{dataset.smiles[val]}: x has non-finite values"):
        train_molecule_model(dataset, tiny_config(model={"layers": 0}), progress=False)


def test_a_plain_list_names_a_molecule_with_a_bad_descriptor():
    dataset = plain_molecules(MoleculeFeaturizer(descriptors=True))
    dataset[5].mol_x[0, 3] = float("nan")  # was an AttributeError: no data.row
    with pytest.raises(GraphInputError, match=r"'CCCl': descriptor 3 \(mol_x\) is nan"):
        train_molecule_model(dataset, tiny_config(), progress=False)


def test_a_plain_list_of_featurized_molecules_trains_and_writes_a_run(tmp_path):
    # train_molecule_model read dataset.skipped and data.row, which a list of
    # featurize_smiles items has not: it failed after training, with an AttributeError
    dataset = plain_molecules()
    chains = dataset.smiles
    metrics = train_molecule_model(dataset, tiny_config(), run_dir=tmp_path / "run", progress=False)
    assert metrics["num_skipped"] == 0
    assert (tmp_path / "run" / "skipped.csv").read_text().splitlines() == ["row,smiles,reason"]
    split = json.loads((tmp_path / "run" / "split.json").read_text())
    with open(tmp_path / "run" / "predictions.csv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [int(r["row"]) for r in rows] == split["test"]  # positions in the list
    assert [r["smiles"] for r in rows] == [chains[i] for i in split["test"]]


def test_an_undefined_validation_metric_selects_on_validation_loss(tmp_path, caplog):
    # one positive in 12: seed 0 leaves the validation part with one class only
    source = tmp_path / "m.csv"
    source.write_text("smiles,c\n" + "".join(f"{'C' * n}O,{int(n == 3)}\n" for n in range(1, 13)))
    dataset = MoleculeCSV(source, target_cols=["c"])
    config = tiny_config(task="classification", epochs=4)
    with caplog.at_level("WARNING"):
        metrics = train_molecule_model(dataset, config, run_dir=tmp_path / "run", progress=False)
    assert "ROC-AUC is undefined" in caplog.text
    assert metrics["selection_metric"] == "val_loss"
    assert 1 <= metrics["best_epoch"] <= 4  # a best epoch was chosen (not -1)
    history = json.loads((tmp_path / "run" / "history.json").read_text())["history"]
    assert all(np.isfinite(h["val_loss"]) for h in history)


def test_training_and_prediction_give_the_caller_its_random_generators_back(tmp_path):
    # training seeds Python's, NumPy's and torch's generators for its own run; a notebook's
    # draws afterwards used to be the same whatever it had seeded (and loading a model
    # drew its discarded random start weights from the caller's generator)
    from graphattn.train import predict_molecules
    from tests.conftest import draws_after_seeding

    dataset = MoleculeCSV(write_alcohols(tmp_path / "m.csv"), target_cols=["y"])
    config = MoleculeTrainConfig(epochs=1, ensemble=2, model={"hidden": 16, "layers": 1})

    def train_and_predict() -> None:
        train_molecule_model(dataset, config, run_dir=tmp_path / "run", progress=False)
        predict_molecules(tmp_path / "run", ["CCO"], progress=False)

    for seed in (7, 8):  # each caller's own sequence, not the run's seed's
        assert draws_after_seeding(seed, train_and_predict) == draws_after_seeding(seed)


def _keep_figures(plots, monkeypatch) -> list:
    """The figures ``plots`` draws from now on, to look at after they are saved."""
    figures = []
    make = plots.agg_figure
    monkeypatch.setattr(plots, "agg_figure", lambda size: figures.append(make(size)) or figures[-1])
    return figures


def test_plots_leave_the_callers_matplotlib_backend_alone(tmp_path):
    # a notebook's inline backend must survive importing graphattn.train and writing a
    # run's figures (the module used to switch the process to Agg when imported)
    import subprocess
    import sys

    code = (
        "import matplotlib, sys; matplotlib.use('svg')\n"
        "from graphattn.train import plots\n"
        "history = [{'epoch': 1, 'train_loss': 0.8, 'val_rmse': 1.2, 'best': True}]\n"
        "plots.plot_learning_curve(history, 'rmse', sys.argv[1])\n"
        "print(matplotlib.get_backend())\n"
    )
    png = tmp_path / "curve.png"
    ran = subprocess.run(
        [sys.executable, "-c", code, str(png)], capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.strip() == "svg"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_learning_curve_of_one_epoch_draws_its_points(tmp_path, monkeypatch):
    from graphattn.train import plots

    figures = _keep_figures(plots, monkeypatch)
    history = [{"epoch": 1, "train_loss": 0.8, "val_rmse": 1.2, "best": True, "member": 0}]
    history += [{**h, "member": 1} for h in history]  # an ensemble stopped after one epoch
    plots.plot_learning_curve(history, "rmse", tmp_path / "learning_curve.png")
    (figure,) = figures
    points = [line for ax in figure.axes for line in ax.get_lines() if len(line.get_xdata()) == 1]
    assert len(points) == 4  # train loss and validation RMSE of each member
    # a line through a single point is invisible: each needs a marker (the PNG was empty)
    assert all(line.get_marker() not in (None, "None", "", " ") for line in points)


def test_the_learning_curve_marks_the_kept_epoch(tmp_path, monkeypatch):
    from graphattn.train import plots

    figures = _keep_figures(plots, monkeypatch)
    history = [  # better at epochs 1 and 3: the model kept is that of epoch 3
        {"epoch": e, "train_loss": 1.0 / e, "val_rmse": v, "best": b}
        for e, v, b in ((1, 1.0, True), (2, 1.1, False), (3, 0.9, True), (4, 0.95, False))
    ]
    plots.plot_learning_curve(history, "rmse", tmp_path / "learning_curve.png")
    (figure,) = figures
    marks = [line for ax in figure.axes for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert [list(line.get_xdata()) for line in marks] == [[3, 3]]


def test_classification_predictions_give_logits_and_probabilities(tmp_path):
    source = tmp_path / "m.csv"
    source.write_text("smiles,c\n" + "".join(f"{'C' * n}O,{n % 2}\n" for n in range(1, 21)))
    run = tmp_path / "run"
    dataset = MoleculeCSV(source, target_cols=["c"])
    train_molecule_model(dataset, tiny_config(task="classification"), run_dir=run, progress=False)
    rows = list(csv.DictReader((run / "predictions.csv").read_text().splitlines()))
    assert rows and all(
        float(r["prob_c"]) == pytest.approx(1 / (1 + np.exp(-float(r["pred_c"]))), abs=1e-5)
        for r in rows
    )
    out = tmp_path / "pred.csv"
    assert main(["predict", "--model", str(run), "--csv", str(source), "--out", str(out)]) == 0
    predicted = list(csv.DictReader(out.read_text().splitlines()))
    assert list(predicted[0]) == ["smiles", "c", "pred_c", "prob_c", "error"]
    assert all(0.0 < float(r["prob_c"]) < 1.0 for r in predicted)


def test_spread_metrics_rank_the_spread_against_the_errors():
    from graphattn.train.metrics import spread_metrics

    y = np.array([[0.0, 1.0], [0.0, np.nan], [0.0, 3.0], [0.0, 4.0]])
    pred = np.array([[0.1, 1.0], [0.2, 9.0], [0.3, 3.5], [0.4, 5.0]])
    std = np.array([[0.1, 0.3], [0.2, 0.1], [0.3, 0.2], [0.4, 0.1]])
    # target 0: spread grows with the error (+1); target 1 (row 1 unlabelled): it falls (-1)
    result = spread_metrics(y, pred, std)
    assert result["spearman_std_abs_error"] == pytest.approx(0.0)
    assert result["mean_std"] == pytest.approx((0.25 + 0.2) / 2)
    assert spread_metrics(y[:, :1], pred[:, :1], std[:, :1])["spearman_std_abs_error"] == 1.0
    assert spread_metrics(y[:, 1], pred[:, 1], std[:, 1])["spearman_std_abs_error"] == -1.0
    constant = spread_metrics(y[:, 0], pred[:, 0], np.full(4, 0.5))
    assert np.isnan(constant["spearman_std_abs_error"]) and constant["mean_std"] == 0.5


def test_inference_names_stay_importable_from_the_training_module():
    import graphattn.train.molecule_inference as inference
    import graphattn.train.molecules as training

    for name in inference.__all__:
        assert getattr(training, name) is getattr(inference, name), name
        assert name in training.__all__, name


def test_regression_on_zero_one_targets_suggests_a_classifier(tmp_path, caplog):
    binary = tmp_path / "binary.csv"
    binary.write_text("smiles,c\n" + "".join(f"{'C' * n}O,{n % 2}\n" for n in range(1, 13)))
    suggestion = "hold only the values 0 and 1; if they are classes, train a classifier"
    for task, warned in (("regression", True), ("classification", False)):
        caplog.clear()
        with caplog.at_level("WARNING", logger="graphattn.train.molecules"):
            train_molecule_model(
                MoleculeCSV(binary, target_cols=["c"]), tiny_config(task=task), progress=False
            )
        assert any(suggestion in r.getMessage() for r in caplog.records) == warned
    caplog.clear()
    with caplog.at_level("WARNING", logger="graphattn.train.molecules"):
        train_molecule_model(
            MoleculeCSV(write_alcohols(tmp_path / "y.csv"), target_cols=["y"]),
            tiny_config(),
            progress=False,
        )
    assert not any(suggestion in r.getMessage() for r in caplog.records)


def test_a_csv_featurizes_alike_in_python_and_on_the_command_line(tmp_path):
    source = write_alcohols(tmp_path / "m.csv")
    dataset = MoleculeCSV(source, target_cols=["y"])
    assert dataset.featurizer.descriptors  # the CLI's default, --no-descriptors to drop
    run = tmp_path / "run"
    tiny = ["--epochs", "1", "--hidden", "16", "--layers", "1", "--no-progress"]
    assert main(["train", "--csv", str(source), "--target-col", "y", *tiny, "--out", str(run)]) == 0
    assert load_checkpoint(run)["featurizer"] == dataset.featurizer.to_dict()


def test_predictions_csv_leaves_missing_labels_empty(tmp_path):
    source = tmp_path / "m.csv"
    source.write_text(
        "smiles,y,z\n" + "".join(f"{'C' * n}O,{n},{'' if n % 2 else n}\n" for n in range(1, 21))
    )
    run = tmp_path / "run"
    dataset = MoleculeCSV(source, target_cols=["y", "z"], featurizer=MoleculeFeaturizer())
    config = tiny_config(fractions=(0.5, 0.25, 0.25))
    train_molecule_model(dataset, config, run_dir=run, progress=False)
    with open(run / "predictions.csv") as handle:
        rows = list(csv.DictReader(handle))
    missing = [int(r["row"]) % 2 == 0 for r in rows]  # data row 2k is C(2k+1)O, without z
    assert any(missing) and [r["z"] == "" for r in rows] == missing
    assert all(r["y"] != "" and r["pred_z"] != "" for r in rows)


def test_early_stopping_keeps_the_best_weights_not_the_last():
    from graphattn.train.loop import EarlyStopping

    for higher_is_better, values in [(False, [2.0, 1.0, 3.0, 1.5]), (True, [0.6, 0.9, 0.7, 0.8])]:
        model = torch.nn.Linear(2, 1)
        stopper = EarlyStopping(patience=2, higher_is_better=higher_is_better)
        weights = []
        for epoch, value in enumerate(values, start=1):
            with torch.no_grad():
                model.weight.fill_(float(epoch))  # training changes the weights in place
            weights.append(model.weight.detach().clone())
            stopper.step(value, epoch, model)
        assert stopper.best_epoch == 2 and stopper.should_stop  # 2 epochs without a gain
        stopper.restore(model)
        assert torch.equal(model.weight, weights[1])


def selection_run(tmp_path, task: str):
    """A run whose validation metric moves up and down (a learning rate too high)."""
    source = tmp_path / "m.csv"
    rows = [
        f"{'C' * n}{'O' * (n % 3)},{n % 2 if task == 'classification' else n * 0.3}"
        for n in range(1, 41)
    ]
    source.write_text("smiles,y\n" + "\n".join(rows) + "\n")
    dataset = MoleculeCSV(source, target_cols=["y"], featurizer=MoleculeFeaturizer())
    config = tiny_config(task=task, epochs=8, patience=8, lr=0.05, warmup_epochs=0, seed=3)
    metrics = train_molecule_model(dataset, config, run_dir=tmp_path / "run", progress=False)
    history = json.loads((tmp_path / "run" / "history.json").read_text())["history"]
    return dataset, metrics, history


@pytest.mark.parametrize(("task", "metric", "pick"), [
    ("regression", "rmse", np.argmin), ("classification", "roc_auc", np.argmax)
])  # fmt: skip
def test_the_model_kept_is_the_best_validation_epoch(tmp_path, task, metric, pick):
    _, metrics, history = selection_run(tmp_path, task)
    values = [h[f"val_{metric}"] for h in history]
    best = int(pick(values)) + 1
    assert best < len(history), "the setup must put the best epoch before the last one"
    assert metrics["best_epoch"] == best
    # the kept weights are that epoch's: evaluated again, they score its value
    assert metrics["val"][metric] == pytest.approx(values[best - 1], rel=1e-6)


def test_scalers_are_fitted_on_the_training_molecules_only(esol_run):
    dataset, run_dir, metrics = esol_run
    split = json.loads((run_dir / "split.json").read_text())
    scaler = load_checkpoint(run_dir)["scaler"]
    train_targets = dataset.targets[split["train"]].double()
    np.testing.assert_allclose(scaler["mean"], train_targets.mean(0), rtol=1e-6)
    np.testing.assert_allclose(scaler["std"], train_targets.std(0, unbiased=False), rtol=1e-6)
    descriptors = torch.cat([dataset[i].mol_x for i in split["train"]])
    model = metrics["model"]
    torch.testing.assert_close(model.mol_mean, descriptors.mean(0))
    torch.testing.assert_close(model.mol_std, descriptors.std(0).clamp(min=1e-6))


def test_a_constant_target_trains_to_finite_predictions(tmp_path):
    source = tmp_path / "m.csv"
    source.write_text("smiles,y\n" + "".join(f"{'C' * n}O,2.5\n" for n in range(1, 21)))
    run = tmp_path / "run"
    train_molecule_model(
        MoleculeCSV(source, target_cols=["y"]), tiny_config(), run_dir=run, progress=False
    )
    preds, _ = predict_molecules(run, ["CCO", "CCCCCO"])
    assert np.isfinite(preds).all()
    np.testing.assert_allclose(preds, 2.5, atol=1.0)


def test_multitask_classification_selects_epochs_when_one_task_has_one_class_in_val(tmp_path):
    source = tmp_path / "m.csv"
    rows = [f"{'C' * n}{'O' * (n % 3)},{n % 2},{int(n == 1)}" for n in range(1, 41)]
    source.write_text("smiles,a,rare\n" + "\n".join(rows) + "\n")
    dataset = MoleculeCSV(source, target_cols=["a", "rare"], featurizer=MoleculeFeaturizer())
    config = tiny_config(task="classification", epochs=4, patience=2, seed=0)
    metrics = train_molecule_model(dataset, config, run_dir=tmp_path / "run", progress=False)
    split = json.loads((tmp_path / "run" / "split.json").read_text())
    rare_in_val = dataset.targets[split["val"], 1]
    assert rare_in_val.unique().numel() == 1  # the setting: task 'rare' has one class in val
    assert metrics["selection_metric"] == "val_roc_auc"
    assert np.isfinite(metrics["val"]["roc_auc"])  # task 'a' alone defines it
    assert metrics["best_epoch"] >= 1  # an epoch was selected (a NaN metric selected none)
    assert metrics["val"]["roc_auc"] == metrics["val"]["per_target"]["a"]["roc_auc"]


def test_one_training_molecule_with_descriptors_trains_to_finite_weights():
    featurizer = MoleculeFeaturizer(descriptors=True)
    model = MoleculeModel(
        MoleculeModelConfig(featurizer.atom_dim, featurizer.bond_dim, mol_dim=featurizer.mol_dim)
    )
    one = featurizer("CCO")
    model.fit_descriptor_scaler(one.mol_x)  # a sample std of one row is NaN
    assert torch.isfinite(model.mol_std).all() and (model.mol_std == 1).all()
    assert torch.isfinite(model(featurizer("CCCO"))).all()


def test_a_model_that_reads_descriptors_names_them_when_they_are_missing():
    from graphattn import GraphInputError

    with_descriptors = MoleculeFeaturizer(descriptors=True)
    config = MoleculeModelConfig(
        with_descriptors.atom_dim, with_descriptors.bond_dim, mol_dim=with_descriptors.mol_dim
    )
    with pytest.raises(GraphInputError, match=r"descriptors \(data.mol_x\), which these graphs"):
        MoleculeModel(config)(MoleculeFeaturizer()("CCO"))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"mol_dim": -1}, "mol_dim must be an integer >= 0, got -1"),
        ({"num_tasks": 0}, "num_tasks must be an integer >= 1, got 0"),
        ({"pe": "rw", "pe_dim": 0}, "pe_dim must be an integer >= 1, got 0"),
    ],
)
def test_model_config_sizes_are_checked(changes, message):
    from graphattn import GraphInputError

    with pytest.raises(GraphInputError, match=message):
        MoleculeModelConfig(atom_dim=10, bond_dim=7, **changes)


def test_a_data_with_a_batch_vector_pools_each_graph():
    from torch_geometric.data import Batch, Data

    featurizer = MoleculeFeaturizer()
    graphs = [featurizer(s) for s in ("CCO", "c1ccccc1")]
    batch = Batch.from_data_list(graphs)
    plain = Data(
        x=batch.x, edge_index=batch.edge_index, edge_attr=batch.edge_attr, batch=batch.batch
    )
    model = MoleculeModel(MoleculeModelConfig(featurizer.atom_dim, featurizer.bond_dim)).eval()
    with torch.no_grad():
        torch.testing.assert_close(model(plain), model(batch))


def test_numpy_settings_give_a_loadable_checkpoint(tmp_path):
    # model.pt must load with weights_only=True: a config holding np.int64 (a value read
    # from a NumPy array) made a file that graphattn then refused as damaged
    import torch

    from graphattn.featurize import MoleculeFeaturizer
    from graphattn.train.molecule_inference import predict_molecules

    featurizer = MoleculeFeaturizer(descriptors=False, degrees=tuple(np.arange(6)))
    dataset = MoleculeCSV(
        write_alcohols(tmp_path / "m.csv"), target_cols=["y"], featurizer=featurizer
    )
    model = {"hidden": np.int64(16), "layers": np.int64(1), "dropout": np.float64(0.1)}
    config = tiny_config(epochs=1, model=model)
    train_molecule_model(dataset, config, run_dir=tmp_path / "run", progress=False)
    payload = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    assert type(payload["model_config"]["hidden"]) is int
    predictions, errors, *_ = predict_molecules(tmp_path / "run", ["CCO"])
    assert errors == [""] and np.isfinite(predictions).all()


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"hidden": 32.0}, "hidden must be an integer, got 32.0"),
        ({"layers": True}, "layers must be an integer, got True"),
    ],  # fmt: skip
)
def test_non_integer_architecture_settings_are_named(setting, message):
    from graphattn import GraphInputError
    from graphattn.train.molecules import check_train_config

    with pytest.raises(GraphInputError, match=message):
        check_train_config(tiny_config(model=setting))


def test_an_ensembles_metrics_json_counts_every_members_epochs_and_keeps_its_best(tmp_path):
    dataset = MoleculeCSV(write_chains(tmp_path / "m.csv"), target_cols=["y"])
    run = tmp_path / "run"
    config = tiny_config(epochs=3, ensemble=2)
    metrics = train_molecule_model(
        dataset, config, run_dir=run, dataset_name="chains", progress=False
    )
    written = json.loads((run / "metrics.json").read_text())
    history = json.loads((run / "history.json").read_text())["history"]
    runs = [(m, e) for m in (0, 1) for e in (1, 2, 3)]
    assert [(h["member"], h["epoch"]) for h in history] == runs  # member by member
    kept = [max(h["epoch"] for h in history if h["member"] == m and h["best"]) for m in (0, 1)]
    assert written["best_epoch"] == kept  # one per member, the epoch whose weights it kept
    assert written["epochs_run"] == len(history) == 6  # summed over the members
    assert written["dataset"] == "chains" and written["ensemble_size"] == 2
    assert 0 < written["train_seconds"] == round(metrics["train_seconds"], 2)
    assert re.fullmatch(r"\d+(\.\d{1,2})?", str(written["train_seconds"]))
    # val and test are scored on their own molecules, by the averaged ensemble
    split = json.loads((run / "split.json").read_text())
    for part in ("val", "test"):
        y = dataset.targets[split[part], 0].numpy()
        pred, _ = predict_molecules(run, [dataset.smiles[i] for i in split[part]])
        rmse = float(np.sqrt(np.mean((pred[:, 0] - y) ** 2)))
        assert written[part]["rmse"] == pytest.approx(rmse, rel=1e-5)


def test_a_checkpoint_keeps_its_settings_and_refuses_another_format(tmp_path):
    from graphattn import GraphInputError
    from graphattn.train.checkpoint import load_checkpoint, save_checkpoint

    model = torch.nn.Linear(2, 1)
    meta = {"pair": (1, 2), "nested": {"count": np.int64(3), "items": [np.float32(0.5)]}}
    path = save_checkpoint(tmp_path, model, kind="molecule", **meta)
    loaded = load_checkpoint(path)
    assert loaded["kind"] == "molecule" and loaded["format_version"] == 1
    assert loaded["pair"] == (1, 2) and type(loaded["pair"]) is tuple
    assert loaded["nested"] == {"count": 3, "items": [0.5]}
    assert torch.equal(loaded["state_dict"]["weight"], model.weight.detach())
    for version in (None, 2):
        payload = {"kind": "molecule", "state_dict": {}}
        if version is not None:
            payload["format_version"] = version
        torch.save(payload, tmp_path / "model.pt")
        with pytest.raises(
            GraphInputError, match=rf"checkpoint format {version!r}, this graphattn"
        ):
            load_checkpoint(tmp_path)


def test_the_target_scaler_ignores_missing_targets_and_keeps_a_constant_one_finite():
    from graphattn.train.molecules import TargetScaler

    scaler = TargetScaler.fit(torch.tensor([[1.0, 2.0], [1.0, float("nan")], [1.0, 4.0]]))
    assert scaler.to_dict() == {"mean": [1.0, 3.0], "std": [1.0, 1.0]}  # std 0 -> 1
    y = torch.tensor([[1.0, 5.0]])
    assert scaler.transform(y).tolist() == [[0.0, 2.0]]
    assert torch.equal(scaler.inverse(scaler.transform(y)), y)


def test_config_values_of_other_types_are_written_and_bad_ones_refused_first(tmp_path):
    # a torch.device, a Path or an ndarray crashed json after training, once the
    # earlier run's files were already deleted
    from pathlib import Path

    from graphattn import GraphInputError

    dataset = MoleculeCSV(write_alcohols(tmp_path / "m.csv"), target_cols=["y"])
    run = tmp_path / "run"
    train_molecule_model(dataset, tiny_config(), run_dir=run, progress=False)
    first = (run / "metrics.json").read_text()
    config = tiny_config(device=torch.device("cpu"), fractions=np.array([0.5, 0.25, 0.25]))
    train_molecule_model(dataset, config, run_dir=run, progress=False)
    written = json.loads((run / "metrics.json").read_text())["config"]
    assert written["device"] == "cpu" and written["fractions"] == [0.5, 0.25, 0.25]
    assert (run / "metrics.json").read_text() != first
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    bad = tiny_config(init_from={"run": Path("run"), "why": {1, 2}})  # a set: no JSON
    with pytest.raises(GraphInputError, match=r"MoleculeTrainConfig.init_from = .* cannot be"):
        train_molecule_model(dataset, bad, run_dir=run, progress=False)
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before  # the earlier run kept


@pytest.mark.parametrize(
    "setting",
    [
        {"epochs": 2.0},
        {"batch_size": 16.0},
        {"seed": 1.5},
        {"ensemble": 2.0},
        {"warmup_epochs": 1.5},
        {"workers": 2.0},
        {"patience": 3.0},
    ],
)
def test_molecule_counts_given_as_floats_are_named_before_training(tmp_path, setting):
    # a YAML or JSON config may hold 2.0: it failed inside Python, NumPy or torch, or,
    # for warmup_epochs, was used as given
    dataset = MoleculeCSV(write_alcohols(tmp_path / "m.csv"), target_cols=["y"])
    ((name, value),) = setting.items()
    with pytest.raises(GraphInputError, match=rf"{name} must be a whole number .*, got {value}"):
        train_molecule_model(dataset, MoleculeTrainConfig(**setting), progress=False)
    assert (
        train_molecule_model(
            dataset,
            MoleculeTrainConfig(epochs=np.int64(1), patience=None, model={"hidden": 8, "heads": 2}),
            progress=False,
        )["epochs_run"]
        == 1
    )


def test_the_kept_epoch_of_several_targets_does_not_depend_on_their_units(tmp_path):
    # selection averaged the targets' RMSEs in their own units: a target in 1e4 decided
    # the best epoch alone (epoch 16 or 33 of the same run, by the units, in the audit)
    from graphattn.train.molecule_inference import TargetScaler
    from graphattn.train.molecules import _validation_value

    rng = np.random.default_rng(0)
    y = rng.normal(size=(20, 2))
    pred = y + rng.normal(scale=[0.5, 0.1], size=(20, 2))
    scale = np.array([1e-3, 1e4])
    values = []
    for units in (np.ones(2), scale):
        scaler = TargetScaler.fit(torch.from_numpy(y * units))
        values.append(
            _validation_value("regression", "scaled_rmse", y * units, pred * units, scaler)
        )
    assert values[0] == pytest.approx(values[1], rel=1e-5)
    shifted = np.column_stack([y[:, 0], y[:, 1] + 0.3])  # 0.3 sd off on the second target
    scaler = TargetScaler.fit(torch.from_numpy(y))
    assert _validation_value("regression", "scaled_rmse", y, shifted, scaler) > 0.1

    def run(units: tuple[float, float], name: str) -> tuple[dict, list]:
        rows = "".join(
            f"{'C' * n}{end},{(n * 0.5 + shift) * units[0]},{(n % 3 + shift) * units[1]}\n"
            for end, shift in {"O": 0.0, "N": 1.0, "Cl": -2.0}.items()
            for n in range(1, 13)
        )
        (tmp_path / f"{name}.csv").write_text("smiles,a,b\n" + rows)
        dataset = MoleculeCSV(tmp_path / f"{name}.csv", target_cols=["a", "b"])
        config = tiny_config(epochs=6, patience=6, seed=1)
        metrics = train_molecule_model(dataset, config, run_dir=tmp_path / name, progress=False)
        history = json.loads((tmp_path / name / "history.json").read_text())["history"]
        return metrics, history

    plain, plain_history = run((1.0, 1.0), "plain")
    scaled, scaled_history = run((1e-3, 1e4), "scaled")
    assert plain["selection_metric"] == scaled["selection_metric"] == "val_scaled_rmse"
    assert plain["best_epoch"] == scaled["best_epoch"]
    np.testing.assert_allclose(
        [h["val_scaled_rmse"] for h in plain_history],
        [h["val_scaled_rmse"] for h in scaled_history],
        rtol=1e-3,
    )
    # the reported metrics stay in each target's own units
    assert scaled["val"]["per_target"]["b"]["rmse"] == pytest.approx(
        1e4 * plain["val"]["per_target"]["b"]["rmse"], rel=1e-3
    )


def test_the_validation_loss_is_on_the_training_losss_scale(tmp_path):
    from graphattn.train.molecule_inference import TargetScaler
    from graphattn.train.molecules import _validation_value

    y = np.array([[1.0], [3.0], [5.0]])
    pred = np.array([[2.0], [3.0], [4.0]])
    scaler = TargetScaler.fit(torch.from_numpy(y))  # std 1.633
    expected = float(np.mean(((pred - y) / y.std()) ** 2))
    assert _validation_value("regression", "loss", y, pred, scaler) == pytest.approx(
        expected, rel=1e-6
    )


def test_targets_that_float32_rounds_beyond_their_spread_are_warned_about(tmp_path, caplog):
    # 1e7 + logS was read as whole numbers (9999996.7 became 9999997), without a word
    source = tmp_path / "offset.csv"
    values = [1e7 + v for v in (-0.3, 1.2, -2.5, 0.7, 1.9)]
    source.write_text(
        "smiles,E,F\n"
        + "".join(f"{'C' * (i + 1)}O,{v!r},{v - 1e7:.3f}\n" for i, v in enumerate(values))
    )
    with caplog.at_level("WARNING"):
        dataset = MoleculeCSV(source, target_cols=["E", "F"])
    warned = [r.getMessage() for r in caplog.records if "float32" in r.getMessage()]
    assert len(warned) == 1 and "target 'E' is stored in float32" in warned[0]
    assert "subtract a constant" in warned[0]
    assert dataset.targets[:, 0].tolist() != pytest.approx(values, abs=0.1)  # what is warned
    caplog.clear()
    with caplog.at_level("WARNING"):
        MoleculeCSV(write_chains(tmp_path / "chains.csv"), target_cols=["y"])
    assert "float32" not in caplog.text
    near = tmp_path / "near.csv"  # rounding 0.025 against a spread of 9.46: 0.26%
    near.write_text(
        "smiles,E\n"
        + "".join(
            f"{'C' * (i + 1)}O,{1e6 + v!r}\n" for i, v in enumerate((-15.3, 7.1, 12.2, -3.7, 0.05))
        )
    )
    caplog.clear()
    with caplog.at_level("WARNING"):
        MoleculeCSV(near, target_cols=["E"])
    assert "target 'E' is stored in float32" in caplog.text
    for copies in (2, 3):  # a constant column has no spread to lose (std of 0.1s: 1e-17)
        constant = tmp_path / f"constant{copies}.csv"
        constant.write_text(
            "smiles,c\n" + "".join(f"{'C' * (i + 1)}O,0.1\n" for i in range(copies))
        )
        caplog.clear()
        with caplog.at_level("WARNING"):
            MoleculeCSV(constant, target_cols=["c"])
        assert "float32" not in caplog.text
    tiny = tmp_path / "tiny.csv"  # subnormal values: no constant to subtract
    tiny.write_text("smiles,k\nCO,3e-44\nCCO,1e-44\nCCCO,2.2e-44\n")
    with caplog.at_level("WARNING"):
        MoleculeCSV(tiny, target_cols=["k"])
    assert "rescale the column (multiply it by a power of ten)" in caplog.text


def test_a_target_the_run_cannot_learn_or_score_is_named(tmp_path, caplog):
    # one class only in training, or no labelled test molecule: null metrics and exit 0,
    # without a word (validation had its own warning)

    config = tiny_config(task="classification", epochs=1, seed=0)
    test = set(random_split(36, config.fractions, config.seed)["test"].tolist())
    chains = [f"{'C' * n}{end}" for end in ("O", "N", "Cl") for n in range(1, 13)]
    first = min(test)
    rows = "".join(
        f"{smiles},0,{'' if i in test else i % 2},{'' if i in test - {first} else i % 2}\n"
        for i, smiles in enumerate(chains)
    )
    source = tmp_path / "m.csv"
    source.write_text("smiles,never,parity,once\n" + rows)
    dataset = MoleculeCSV(source, target_cols=["never", "parity", "once"])
    with caplog.at_level("WARNING"):
        train_molecule_model(dataset, config, run_dir=tmp_path / "run", progress=False)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    messages = [r.getMessage() for r in caplog.records]
    assert any(
        "target 'never' has class 0 only among its 29 training labels" in m for m in messages
    )
    assert any("target 'parity' has 0 labelled test molecule(s)" in m for m in messages)
    assert any("target 'once' has 1 labelled test molecule(s)" in m for m in messages)
    assert any("target 'never' has one class only among its 3 test labels" in m for m in messages)
    assert metrics["test"]["per_target"]["parity"]["roc_auc"] is None
    assert metrics["test"]["per_target"]["never"]["roc_auc"] is None


def test_member_seeds_keep_the_old_formula_up_to_2_to_the_64_and_differ_beyond():
    top = 2**64 // 1000  # top * 1000 = 2**64 - 616
    assert member_seed(top, 615) == 2**64 - 1  # the largest that fits: seed * 1000 + member
    assert member_seed(top, 616) < 2**64  # seed * 1000 + member would be 2**64
    assert len({member_seed(2**63, member) for member in range(3)}) == 3  # one hash each


def test_batch_norm_refuses_a_lone_training_molecule_of_one_atom_at_any_batch_size(tmp_path):
    source = tmp_path / "m.csv"
    source.write_text("smiles,y\nC,0\nO,1\nN,2\n")  # one molecule each to train, val and test
    dataset = MoleculeCSV(source, target_cols=["y"])
    model = {"hidden": 16, "layers": 1, "norm": "batch"}
    config = tiny_config(batch_size=4, fractions=(1 / 3, 1 / 3, 1 / 3), model=model)
    one_atom = r"which has one atom \(batch_size=4, 1 training molecule\)"
    with pytest.raises(GraphInputError, match=one_atom):
        train_molecule_model(dataset, config, progress=False)


def test_batch_norm_refuses_a_training_batch_of_one_atom_by_row(tmp_path):
    source = tmp_path / "m.csv"
    alcohols = "".join(f"{'C' * n}O,{n}\n" for n in range(1, 9))
    source.write_text("smiles,y\n" + alcohols + "C,0\nO,1\nN,2\nS,3\n")  # rows 8-11: one atom
    dataset = MoleculeCSV(source, target_cols=["y"])
    model = {"hidden": 16, "layers": 1, "norm": "batch"}
    config = tiny_config(batch_size=1, model=model)
    one_atom = r"one would hold only data row (8|9|10|11), counted from 0: [CONS], which has one"
    with pytest.raises(GraphInputError, match=one_atom):
        train_molecule_model(dataset, config, progress=False)
    # torch raised "Expected more than 1 value per channel" mid-training; two per batch train
    metrics = train_molecule_model(dataset, replace(config, batch_size=2), progress=False)
    assert np.isfinite(metrics["train"]["rmse"])


def test_batch_norm_checks_the_refits_molecules_before_training(tmp_path, monkeypatch):
    # the refit trains on the validation molecules too: a one-atom one there passed the
    # check and torch failed after early stopping, naming no molecule
    source = tmp_path / "m.csv"
    alcohols = "".join(f"{'C' * n}O,{n}\n" for n in range(1, 10))
    source.write_text("smiles,y\n" + alcohols + "C,0\n")  # seed 12: row 9 alone in val
    dataset = MoleculeCSV(source, target_cols=["y"])
    model = {"hidden": 16, "layers": 1, "norm": "batch"}
    config = tiny_config(batch_size=1, seed=12, refit=True, model=model)
    from graphattn.train import molecules

    with monkeypatch.context() as patch:  # refused before the first epoch
        patch.setattr(molecules, "_fit", lambda *args, **kwargs: pytest.fail("trained"))
        with pytest.raises(GraphInputError, match=r"only data row 9, counted from 0: C, which"):
            train_molecule_model(dataset, config, progress=False)
    metrics = train_molecule_model(dataset, replace(config, refit=False), progress=False)
    assert metrics["num_molecules"]["val"] == 1 and np.isfinite(metrics["train"]["rmse"])


def test_predictions_csv_rows_are_data_rows_when_the_first_row_is_skipped(tmp_path):
    # with the skipped row after the test molecules, index and row number coincided
    source = tmp_path / "m.csv"
    source.write_text("smiles,y\nbad(,0\n" + "".join(f"{'C' * n}O,{n}\n" for n in range(1, 21)))
    run = tmp_path / "run"
    train_molecule_model(MoleculeCSV(source, target_cols=["y"]), tiny_config(), run, progress=False)
    split = json.loads((run / "split.json").read_text())
    with open(run / "predictions.csv", encoding="utf-8") as handle:
        rows = [int(row["row"]) for row in csv.DictReader(handle)]
    assert rows == [i + 1 for i in split["test"]]  # data rows, past the skipped row 0


def test_an_empty_plain_list_clears_an_earlier_run_in_its_folder(tmp_path):
    run = tmp_path / "run"
    train_molecule_model(plain_molecules(), tiny_config(), run_dir=run, progress=False)
    with pytest.raises(GraphInputError, match="the data set has no data rows"):
        train_molecule_model(Molecules(), tiny_config(), run_dir=run, progress=False)
    assert sorted(path.name for path in run.iterdir()) == ["skipped.csv"]  # no old model.pt


def refit_data(tmp_path, descriptors: bool = False) -> MoleculeCSV:
    """40 molecules whose validation metric moves up and down (as in selection_run)."""
    source = tmp_path / "refit.csv"
    rows = [f"{'C' * n}{'O' * (n % 3)},{n * 0.3}" for n in range(1, 41)]
    source.write_text("smiles,y\n" + "\n".join(rows) + "\n")
    featurizer = MoleculeFeaturizer(descriptors=descriptors)
    return MoleculeCSV(source, target_cols=["y"], featurizer=featurizer)


def refit_config(**changes) -> MoleculeTrainConfig:
    # without dropout: each validation pass draws from torch's global generator (a
    # DataLoader's base seed), so dropout masks after it differ from a run without one
    model = {"hidden": 16, "layers": 1, "dropout": 0.0}
    settings = {"epochs": 8, "patience": 8, "lr": 0.05, "warmup_epochs": 0, "seed": 3}
    return tiny_config(**{**settings, "model": model, **changes})


@pytest.mark.parametrize("schedule", [{}, {"batch_size": 8, "warmup_epochs": 2}])
def test_a_refit_retraces_early_stoppings_run_for_the_epochs_it_chose(
    tmp_path, monkeypatch, schedule
):
    """Refitting on the training molecules alone gives the early-stopped weights back
    exactly: the same start, batches and schedule, stopped at the chosen epoch."""
    import graphattn.train.molecules as trainer

    dataset = refit_data(tmp_path)
    selected = train_molecule_model(dataset, refit_config(**schedule), progress=False)
    assert selected["best_epoch"] < selected["epochs_run"], "the best epoch must not be the last"
    jobs, member_jobs = [], []
    real = trainer._refit_members
    monkeypatch.setattr(
        trainer, "_refit_members", lambda job, *a: jobs.append(job) or real(job, *a)
    )
    real_members = trainer._train_members
    monkeypatch.setattr(
        trainer,
        "_train_members",
        lambda job, *a: member_jobs.append(job) or real_members(job, *a),
    )
    loader_sizes = []
    real_loader = trainer._train_loader
    monkeypatch.setattr(
        trainer,
        "_train_loader",
        lambda items, config: loader_sizes.append(len(items)) or real_loader(items, config),
    )
    refitted = train_molecule_model(dataset, refit_config(refit=True, **schedule), progress=False)
    assert refitted["val"] == selected["val"]  # validation scores the early-stopped model
    assert refitted["refit"]["epochs"] == [selected["best_epoch"]]

    # each member trains on the training molecules, then refits on those and the validation ones
    sizes = refitted["num_molecules"]
    assert loader_sizes == [sizes["train"], sizes["train"] + sizes["val"]]

    (job,) = jobs
    early, refit_job = member_jobs
    assert early is job and refit_job.refit_epochs == (selected["best_epoch"],)
    # the refit's own job (seed, start, settings) on the training molecules alone
    data = {"train_items": job.train_items, "train_descriptors": job.train_descriptors}
    retrace = replace(refit_job, **data, scaler=job.scaler)
    model, history, epochs = retrace.train_member(0, torch.device("cpu"), None, "", False)
    assert epochs == len(history) == selected["best_epoch"]
    assert_same_weights(model, selected["model"])
    # and the refit itself, on more molecules, ends elsewhere
    pairs = zip(refitted["model"].state_dict().values(), model.state_dict().values(), strict=True)
    assert not all(torch.equal(a, b) for a, b in pairs)


def test_a_refitted_run_folder_holds_the_refitted_ensemble_and_says_so(tmp_path):
    from graphattn.train.molecules import TargetScaler

    dataset = refit_data(tmp_path, descriptors=True)
    config = refit_config(ensemble=2, refit=True)
    run = tmp_path / "run"
    metrics = train_molecule_model(dataset, config, run_dir=run, progress=False)
    selected = train_molecule_model(dataset, replace(config, refit=False), progress=False)
    assert metrics["val"] == selected["val"] and metrics["test"] != selected["test"]
    assert metrics["train"] != selected["train"]  # scored with the refitted models too
    best = selected["best_epoch"]  # each member's
    assert metrics["refit"]["epochs"] == best == metrics["best_epoch"]
    assert metrics["config"]["refit"] is True
    assert metrics["train_seconds"] >= metrics["refit"]["seconds"] > 0

    # standardisations fitted on the training and validation molecules together
    split = json.loads((run / "split.json").read_text())
    seen = split["train"] + split["val"]
    scaler = load_checkpoint(run)["scaler"]
    np.testing.assert_allclose(scaler["mean"], dataset.targets[seen].double().mean(0), rtol=1e-6)
    descriptors = torch.cat([dataset[i].mol_x for i in seen])
    for member in metrics["model"].members:
        torch.testing.assert_close(member.mol_mean, descriptors.mean(0))

    # the saved model is the refitted one, and predictions.csv is what it predicts
    table = list(csv.DictReader((run / "predictions.csv").read_text().splitlines()))
    preds, _ = predict_molecules(run, [r["smiles"] for r in table])
    assert [float(r["pred_y"]) for r in table] == pytest.approx(preds[:, 0].tolist(), rel=1e-5)
    batch = next(iter(torch_geometric_loader([dataset[i] for i in split["test"]])))
    with torch.no_grad():
        expected = TargetScaler(**scaler).inverse(metrics["model"](batch))
    np.testing.assert_allclose(preds, expected.numpy(), rtol=1e-5, atol=1e-6)

    rows = json.loads((run / "history.json").read_text())["refit"]
    assert [sum(r["member"] == m for r in rows) for m in (0, 1)] == best
    assert all(set(r) == {"epoch", "train_loss", "member"} for r in rows)
    assert json.loads((run / "metrics.json").read_text())["refit"] == metrics["refit"]


def test_a_classification_refit_keeps_unscaled_targets_and_a_run_without_says_nothing(
    tmp_path,
):
    source = tmp_path / "c.csv"
    rows = [f"{'C' * n}{'O' * (n % 3)},{n % 2}" for n in range(1, 41)]
    source.write_text("smiles,active\n" + "\n".join(rows) + "\n")
    dataset = MoleculeCSV(source, target_cols=["active"])
    run = tmp_path / "run"
    config = refit_config(task="classification", refit=True)
    metrics = train_molecule_model(dataset, config, run, progress=False)
    assert metrics["task"] == "classification" and metrics["refit"]["epochs"] == [
        metrics["best_epoch"]
    ]
    assert load_checkpoint(run)["scaler"] == {"mean": [0.0], "std": [1.0]}
    plain = tmp_path / "plain"
    metrics = train_molecule_model(dataset, replace(config, refit=False), plain, progress=False)
    assert "refit" not in metrics and "refit" not in json.loads(
        (plain / "metrics.json").read_text()
    )
    assert "refit" not in json.loads((plain / "history.json").read_text())


def test_the_refits_copy_count_includes_copies_in_the_validation_part():
    from torch_geometric.data import Data

    from graphattn.train.molecules import _also_in_train

    def part(*smiles):
        return [Data(smiles=s) for s in smiles]

    parts = {
        "train": part("CCO", "CCN"),
        "val": part("c1ccccc1", "CCO"),
        "test": part("CCO", "c1ccccc1", "CC"),
    }
    assert _also_in_train(parts) == {"val": 1, "test": 1}  # ethanol
    assert _also_in_train(parts, trained_on=("train", "val")) == {"test": 2}  # and benzene


def test_a_refit_counts_test_molecules_whose_copy_is_in_the_validation_part(tmp_path):
    source = tmp_path / "repeated.csv"
    rows = [f"{'C' * n}{'O' * (n % 3)},{n * 0.3}" for n in range(1, 41)]
    source.write_text("smiles,y\n" + "\n".join([*rows, "OC,0.3"]) + "\n")  # row 40: row 0
    config = refit_config(seed=19, refit=True)  # seed 19: row 0 in val, row 40 in test
    metrics = train_molecule_model(MoleculeCSV(source, target_cols=["y"]), config, progress=False)
    assert metrics["num_also_in_train"] == {"val": 0, "test": 0}
    assert metrics["refit"]["num_test_also_in_train_or_val"] == 1


def test_members_refitted_in_processes_equal_those_refitted_alone(tmp_path, capsys):
    dataset = refit_data(tmp_path)
    config = refit_config(ensemble=2, refit=True)
    in_processes = train_molecule_model(dataset, replace(config, workers=2), progress=True)
    refit_epochs = sum(in_processes["refit"]["epochs"])
    last_bar = capsys.readouterr().err.split("\r")[-1]
    assert "refit custom" in last_bar and f"{refit_epochs}/{refit_epochs}" in last_bar
    alone = trained_with_one_thread(dataset, config)
    assert in_processes["refit"]["epochs"] == alone["refit"]["epochs"]
    assert in_processes["test"] == alone["test"]
    for parallel, sequential in zip(
        in_processes["model"].members, alone["model"].members, strict=True
    ):
        assert_same_weights(parallel, sequential)


def test_a_refit_stopped_by_max_seconds_says_so(tmp_path, monkeypatch, caplog):
    import time as clock

    import graphattn.train.molecules as trainer

    dataset = refit_data(tmp_path)
    selected = train_molecule_model(dataset, refit_config(), progress=False)
    best = selected["best_epoch"]
    assert best >= 3
    real_train = trainer._Epochs.train
    refit_size = sum(selected["num_molecules"][name] for name in ("train", "val"))

    def slow_refit_epoch(self, epoch):  # 2 s per refit epoch; selection keeps its pace
        if len(self.loader.dataset) == refit_size:
            clock.sleep(2.0)
        return real_train(self, epoch)

    monkeypatch.setattr(trainer._Epochs, "train", slow_refit_epoch)
    config = refit_config(refit=True, max_seconds=3.0)
    with caplog.at_level("WARNING", logger="graphattn"):
        metrics = train_molecule_model(dataset, config, progress=False)
    assert metrics["best_epoch"] == best and metrics["refit"]["epochs"] == [2]
    assert (
        f"max_seconds=3 stopped the refit after 2 of the {best} epochs early stopping chose; "
        "the model kept is that of epoch 2"
    ) in caplog.text
