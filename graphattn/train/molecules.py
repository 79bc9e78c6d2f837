"""Train graph-level molecule models.

Data path: SMILES -> featurizer -> ``Data`` -> PyG ``DataLoader`` batches ->
:class:`~graphattn.models.MoleculeModel` -> standardised targets -> masked loss / metrics.
Prediction and evaluation with a trained run live in
:mod:`graphattn.train.molecule_inference`; their public names are importable from here too.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import io
import logging
import math
import multiprocessing
import multiprocessing.connection
import operator
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.loader import DataLoader
from tqdm.auto import tqdm

from graphattn.bench.machine import usable_cores
from graphattn.datasets.molecules import (
    MoleculeDataset,
    describe_row,
    graph_key,
    write_skipped_rows,
)
from graphattn.errors import GraphInputError, NonFiniteError, TrainingDiverged
from graphattn.models.checks import check_architecture
from graphattn.models.molecule import (
    TASKS,
    MoleculeEnsemble,
    MoleculeModel,
    MoleculeModelConfig,
    pe_transform,
)
from graphattn.nn.transformer import ffn_width
from graphattn.ops.graph import check_finite
from graphattn.optim import adamw
from graphattn.splits.molecules import random_split, save_split, scaffold_split
from graphattn.train.checkpoint import save_checkpoint
from graphattn.train.loop import (
    EarlyStopping,
    check_config_json,
    check_finite_loss,
    check_run_folder,
    check_training_settings,
    check_whole_numbers,
    divergence_named,
    keeps_global_rng,
    seed_everything,
    start_run_folder,
    to_json,
    training_device,
    warmup_cosine,
    write_json,
)
from graphattn.train.metrics import spread_metrics
from graphattn.train.molecule_inference import (
    TargetScaler,
    _metrics,
    _model_device,
    _per_target,
    _predict_loader,
    evaluate_molecules,
    float32_text,
    fresh_name,
    load_molecule_checkpoint,
    load_molecule_model,
    predict_molecules,
    prediction_columns,
    reports_spread,
)
from graphattn.train.plots import plot_learning_curve
from graphattn.train.transfer import PretrainedEncoder, encoder_changes, load_pretrained_encoder

# Prediction and evaluation moved to molecule_inference; their names stay importable here.
__all__ = [
    "DATASET_DEFAULTS",
    "FINE_TUNING_MODEL",
    "FINE_TUNING_TRAIN",
    "MoleculeTrainConfig",
    "TargetScaler",
    "WorkerProcessDied",
    "check_train_config",
    "evaluate_molecules",
    "load_molecule_checkpoint",
    "load_molecule_model",
    "predict_molecules",
    "prediction_columns",
    "reports_spread",
    "train_molecule_model",
]

log = logging.getLogger(__name__)

# Tuned settings per named data set, used by `graphattn train --dataset NAME`.
# nci-tpsa (the embedded default, ~5,000 molecules) gets a shorter schedule so that
# `make train` finishes in a few minutes on 2 CPU cores.
# Polar surface area is a sum of atom contributions, so its model also pools by sum.
# ESOL: sum pooling next to mean and max had the lowest mean validation RMSE (0.514 vs
# 0.533 for mean+max) among 12 configurations tried on seeds 0-2 (benchmarks/molecules.md);
# solubility depends on molecular size, which a sum sees and a mean does not.
# ESOL and FreeSolv average an ensemble of 3 models: mean validation RMSE 0.524 -> 0.514
# (ESOL, seeds 0-2) and 0.867 -> 0.837 (FreeSolv, seeds 0-5) against one model.
# FreeSolv starts from a shipped encoder pretrained on computed (xTB) hydration
# energies: mean validation RMSE 0.842 -> 0.800 over seeds 0-5 with xtb-hydration
# (14,562 molecules), and 0.799 -> 0.762 on a later day with xtb-hydration-57k (57,537
# molecules). Fine-tuned without dropout: 0.762 -> 0.732, and 0.011 and 0.020 lower from
# two encoders of other pretraining seeds; from scratch dropout 0 does worse, so it goes
# with the pretrained start only (FINE_TUNING_MODEL; benchmarks/molecules.md).
# FreeSolv refits: each member trained again on training + validation molecules for the
# epochs early stopping chose. Scored on the validation part with an inner validation
# part carved from the training one (benchmarks/refit_validation.py, seeds 0-19, two
# inner splits each), refitting lowered RMSE by 0.030 +- 0.010 (15 of 20 seeds) from
# the pretrained start, and by 0.021 +- 0.011 (11 of 20) from scratch, short of the rule
# fixed beforehand (below -2 standard errors): it goes with the pretrained start only
# (FINE_TUNING_TRAIN; benchmarks/results/refit_validation/).
DATASET_DEFAULTS: dict[str, dict] = {
    "nci-tpsa": {"epochs": 15, "patience": 5, "model": {"readout": ["sum", "mean", "max"]}},
    "esol": {"ensemble": 3, "model": {"readout": ["sum", "mean", "max"]}},
    "freesolv": {
        "ensemble": 3,
        "init_from": "xtb-hydration-57k",
        "refit": True,
        "model": {"dropout": 0.0},
    },
}
# Model and training fields of DATASET_DEFAULTS that are tuned for fine-tuning the data
# set's pretrained start: a run from scratch leaves them at MoleculeModelConfig's and
# MoleculeTrainConfig's values.
FINE_TUNING_MODEL: dict[str, tuple[str, ...]] = {"freesolv": ("dropout",)}
FINE_TUNING_TRAIN: dict[str, tuple[str, ...]] = {"freesolv": ("refit",)}


def dataset_train_settings(
    name: str, model: dict | None = None, contributions: bool = False, scratch: bool = False
) -> dict:
    """A copy of ``DATASET_DEFAULTS[name]`` for a run that may change the model or features.

    A default pretrained encoder (``init_from``) fits only the architecture and atom
    features it was trained with: when ``model`` sets an encoder field
    (:data:`~graphattn.train.transfer.ENCODER_FIELDS`) to another value or adds an
    attention readout, or ``contributions`` adds per-atom features, it is dropped with a
    warning and the run trains from scratch. ``scratch`` drops it without a warning
    (``graphattn train --init-from none``). Without the pretrained start, the model
    fields of :data:`FINE_TUNING_MODEL` and the training fields of
    :data:`FINE_TUNING_TRAIN` go back to their generic values.
    """
    settings = copy.deepcopy(DATASET_DEFAULTS.get(name, {}))
    start = settings.get("init_from")
    if start is not None and (scratch or not _encoder_fits(start, name, model, contributions)):
        settings["init_from"] = None
        for key in FINE_TUNING_MODEL.get(name, ()):
            settings.get("model", {}).pop(key, None)
        for key in FINE_TUNING_TRAIN.get(name, ()):
            settings.pop(key, None)
    return settings


def _encoder_fits(start: str, name: str, model: dict | None, contributions: bool) -> bool:
    """Whether data set ``name``'s default encoder ``start`` fits ``model`` and
    ``contributions``; a warning names what does not."""
    if not (model or contributions):
        return True  # nothing to check (training loads the encoder itself)
    changed = encoder_changes(load_pretrained_encoder(start), model or {})
    changed += ["contributions"] if contributions else []
    if changed:
        log.warning(
            "%s differ from the pretrained %r encoder of %s: training from scratch",
            *(", ".join(changed), start, name),
        )
    return not changed


@dataclass
class MoleculeTrainConfig:
    """How :func:`train_molecule_model` trains. The defaults are the tuned ones.

    Attributes:
        epochs: maximum epochs.
        batch_size: molecules per batch.
        lr: peak learning rate (AdamW), reached after ``warmup_epochs``, then cosine decay.
        weight_decay: AdamW weight decay.
        warmup_epochs: linear warm-up length (one as long as the run or longer is cut to
            half the run).
        patience: stop after this many epochs without a better validation metric.
        seed: seeds the split, the initialisation and the batch order.
            Training seeds the global generators of Python, NumPy and torch with it,
            and gives the caller's back as they were when it returns.
        split: ``"random"`` or ``"scaffold"``.
        fractions: train / validation / test fractions.
        task: ``"regression"`` or ``"classification"``.
        model: overrides of :class:`MoleculeModelConfig` fields (``hidden``, ``layers``...).
        max_seconds: stop training one model after this wall time (None: no limit); a
            refit stopped by it before the epochs chosen says so in a warning.
        ensemble: train this many models from different initialisations on the same
            split and average their predictions (a :class:`MoleculeEnsemble`).
        workers: train up to this many ensemble members at once on the CPU, each in
            its own process with one torch thread. A member's result does not depend
            on the number of workers: it is that of training alone with one thread
            (``workers=1`` trains in this process with its torch threads: with more than
            one, results can differ in the last digits).
            Small models gain little from a second torch thread (ESOL's: 0.96 s per
            epoch with two threads, about 1.0 s with one), so members trained side by
            side finish sooner (see :func:`default_workers`, which ``graphattn train``
            uses). 1 (the default here): one member after another in this process.
            Ignored on CUDA and for a single model. The worker processes are started with
            ``spawn``: a script that sets ``workers > 1`` needs the usual
            ``if __name__ == "__main__":`` guard. Each start costs the imports of torch
            and PyG, about 10 s on a slow 2-core machine. A member's error, or an
            interrupt, ends all the worker processes at once, and they end with the
            process that started them, killed or not.
        init_from: a molecule run folder (or its ``model.pt``), or the name of a shipped
            encoder (:mod:`graphattn.pretrained`), whose graph encoder
            initialises every model (transfer learning, see
            :mod:`graphattn.train.transfer`); the encoder's architecture fields are
            inherited unless ``model`` sets them. The head starts fresh.
        device: ``"cpu"``, ``"cuda"`` (``"cuda:N"``) or ``"auto"`` (CUDA when torch sees
            a GPU). The checkpoint holds CPU weights either way.
        refit: after early stopping, train every member again from the same start (the
            same seed and pretrained encoder) on the training and validation molecules
            together, for the number of epochs early stopping chose, on the same
            learning-rate schedule; the target and descriptor standardisations are fitted
            on both parts. The saved model, the test and training metrics and
            ``predictions.csv`` are the refitted ones; the validation metrics stay those of
            the early-stopped models (the refitted ones have seen the validation
            molecules). Training takes about as long again as the epochs chosen.
    """

    epochs: int = 80
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 1e-2
    warmup_epochs: int = 5
    patience: int = 30
    seed: int = 0
    split: str = "random"
    fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
    task: str = "regression"
    model: dict = field(default_factory=dict)
    max_seconds: float | None = None
    ensemble: int = 1
    workers: int = 1
    init_from: str | None = None
    device: str = "cpu"
    refit: bool = False


def masked_loss(pred: torch.Tensor, target: torch.Tensor, task: str) -> torch.Tensor:
    """MSE (regression) or BCE-with-logits (classification) over the known targets."""
    known = ~torch.isnan(target)
    if not bool(known.any()):
        return pred.sum() * 0.0
    if task == "regression":
        return F.mse_loss(pred[known], target[known])
    return F.binary_cross_entropy_with_logits(pred[known], target[known])


def _eval_loader(items: list) -> DataLoader:
    """Batches for evaluation (no shuffling; larger than training batches)."""
    return DataLoader(items, batch_size=256)


def _make_split(dataset, config: MoleculeTrainConfig) -> dict[str, np.ndarray]:
    if config.split == "random":
        return random_split(len(dataset), config.fractions, config.seed)
    if config.split == "scaffold":
        return scaffold_split(list(dataset.smiles), config.fractions, config.seed)
    raise GraphInputError(f"split must be 'random' or 'scaffold', got {config.split!r}")


def check_train_config(config: MoleculeTrainConfig) -> None:
    """Raise :class:`GraphInputError` naming a setting outside its range, the model
    overrides' ``hidden``/``layers``/``heads``/``dropout`` included.

    :func:`train_molecule_model` calls it first; ``graphattn train`` calls it before it
    reads any data, so that a bad setting does not wait for the featurizer.
    """
    model_fields = {f.name for f in fields(MoleculeModelConfig)}
    unknown = sorted(set(config.model) - model_fields)
    if unknown:
        raise GraphInputError(f"model={config.model!r}: no MoleculeModelConfig field(s) {unknown}")
    taken = sorted(set(config.model) & set(_FROM_DATA))
    if taken:
        raise GraphInputError(
            f"model={config.model!r} sets {taken}, which training takes from the data and "
            "the featurizer (set task on the training config)"
        )
    if config.split not in ("random", "scaffold"):
        raise GraphInputError(f"split must be 'random' or 'scaffold', got {config.split!r}")
    if config.task not in TASKS:
        raise GraphInputError(f"task must be one of {TASKS}, got {config.task!r}")
    architecture = {f.name: f.default for f in fields(MoleculeModelConfig) if f.name in _ARCH}
    architecture.update({k: v for k, v in config.model.items() if k in _ARCH})
    check_architecture(**architecture)
    ffn_width(architecture["hidden"], config.model.get("ffn_ratio", MoleculeModelConfig.ffn_ratio))
    check_training_settings(
        config.epochs, config.lr, config.weight_decay, config.patience, config.seed
    )
    check_whole_numbers(
        batch_size=config.batch_size,
        warmup_epochs=config.warmup_epochs,
        ensemble=config.ensemble,
        workers=config.workers,
    )
    if config.batch_size < 1:
        raise GraphInputError(f"batch_size must be at least 1, got {config.batch_size}")
    if config.warmup_epochs < 0:
        raise GraphInputError(f"warmup_epochs must be 0 or more, got {config.warmup_epochs}")
    if config.max_seconds is not None and not config.max_seconds > 0:
        raise GraphInputError(f"max_seconds must be positive, got {config.max_seconds}")
    if config.ensemble < 1:
        raise GraphInputError(f"ensemble must be at least 1 model, got {config.ensemble}")
    if config.workers < 1:
        raise GraphInputError(f"workers must be at least 1, got {config.workers}")
    if not isinstance(config.refit, bool):
        raise GraphInputError(f"refit must be True or False, got {config.refit!r}")
    check_config_json(config)


_ARCH = ("hidden", "layers", "heads", "dropout")  # MoleculeModelConfig's ranged fields
_FROM_DATA = ("atom_dim", "bond_dim", "num_tasks", "mol_dim", "task")  # set by the trainer


def _skipped(dataset) -> list:
    """The data set's skipped rows; none for a plain sequence of ``Data`` items."""
    return list(getattr(dataset, "skipped", []))


def _check_not_empty(dataset, run_dir: str | Path | None) -> None:
    """Refuse a data set without molecules, after writing its ``skipped.csv``."""
    if len(dataset) > 0:
        return
    skipped = _skipped(dataset)
    where = ""
    if run_dir is not None:
        skipped_csv = start_run_folder(run_dir) / "skipped.csv"
        where = f"; reasons in {write_skipped_rows(skipped, skipped_csv)}"
    if not skipped:
        raise GraphInputError("no molecules to train on: the data set has no data rows")
    raise GraphInputError(
        f"no molecules to train on: all {len(skipped)} rows were skipped (e.g. {skipped[0]}){where}"
    )


def _part_targets(parts: dict[str, list], target_cols: list[str], config) -> dict:
    """Each part's ``[n, T]`` targets, after refusing splits and targets the trainer
    cannot learn or select a model from."""
    for name, part in parts.items():
        if not part:
            sizes = {k: len(v) for k, v in parts.items()}
            remedy = "more data or a larger fraction for it"
            if config.split == "scaffold":  # whole scaffolds go to one part
                remedy += ", or a random split"
            raise GraphInputError(
                f"the {config.split} split with fractions {tuple(config.fractions)} left the "
                f"{name} part empty ({sizes}); every part needs molecules: use {remedy}"
            )
    if not target_cols:
        raise GraphInputError(
            "the data set has no target columns, so there is nothing to train on: name "
            "them (MoleculeCSV(..., target_cols=[...]); graphattn train --target-col COL)"
        )
    targets = {name: torch.cat([d.y for d in part]) for name, part in parts.items()}
    known = (~torch.isnan(targets["train"])).sum(0).tolist()
    for column, count in zip(target_cols, known, strict=True):
        if count == 0:
            raise GraphInputError(
                f"target column {column!r} has no values among the {len(parts['train'])} "
                "training molecules"
            )
    if bool(torch.isnan(targets["val"]).all()):
        raise GraphInputError(
            f"none of the {len(parts['val'])} validation molecules has a target value "
            f"({', '.join(target_cols)}): nothing to choose the model on"
        )
    if config.task == "classification":
        for name, y in targets.items():
            _check_binary(parts[name], y, target_cols)
    else:
        _note_binary_regression(targets["train"], target_cols)
    _note_unscorable(targets, target_cols, config.task)
    return targets


def _note_unscorable(targets: dict[str, torch.Tensor], target_cols: list[str], task: str) -> None:
    """Warn, naming the target, where the training labels hold one class only (nothing
    to tell apart) or the test labels cannot define the target's metrics (fewer than 2
    labelled molecules; one class only): the run would end with ``null`` metrics, or a
    constant classifier, and exit 0 without a word. (Validation has its own warning.)"""
    for column, train, test in zip(target_cols, targets["train"].T, targets["test"].T, strict=True):
        train, test = train[~torch.isnan(train)], test[~torch.isnan(test)]
        if task == "classification" and train.unique().numel() == 1:
            log.warning(
                "target %r has class %g only among its %d training labels: the model "
                "cannot learn to tell the classes apart",
                column,
                float(train[0]),
                train.numel(),
            )
        if test.numel() < 2:
            log.warning(
                "target %r has %d labelled test molecule(s): its test metrics are "
                "undefined (null in metrics.json)",
                column,
                test.numel(),
            )
        elif task == "classification" and test.unique().numel() == 1:
            log.warning(
                "target %r has one class only among its %d test labels: its test ROC-AUC "
                "is undefined (null in metrics.json)",
                column,
                test.numel(),
            )


def _check_binary(part: list, y: torch.Tensor, target_cols: list[str]) -> None:
    bad = ~torch.isnan(y) & (y != 0) & (y != 1)
    if bool(bad.any()):
        index, column = bad.nonzero()[0].tolist()
        data = part[index]
        detail = f"{data.smiles} has {target_cols[column]} = {float(y[index, column]):g}"
        raise GraphInputError(
            f"classification targets must be 0 or 1 (or empty): {_item_named(data, detail)}"
        )


def _item_named(data, detail: str) -> str:
    """``detail`` with the item's data row, when it has one (a plain list's items have
    none)."""
    return describe_row(int(data.row), detail) if hasattr(data, "row") else detail


def _note_binary_regression(y: torch.Tensor, target_cols: list[str]) -> None:
    """Warn when every regression target holds only the values 0 and 1: labels of classes,
    which a regression fits by squared error and scores by RMSE instead of ROC-AUC."""
    known = [col[~torch.isnan(col)] for col in y.T]
    if all(set(col.unique().tolist()) == {0.0, 1.0} for col in known):
        log.warning(
            "the training targets %s hold only the values 0 and 1; if they are classes, "
            "train a classifier (graphattn train --task classification; "
            "MoleculeTrainConfig(task='classification'))",
            target_cols,
        )


def _selection_metric(task: str, val_targets: torch.Tensor, num_val: int) -> str:
    """The validation metric that picks the best epoch: RMSE or ROC-AUC where the
    validation targets define it (two labelled molecules; both classes), else the loss.

    Several regression targets are compared in the units the model learns them in:
    ``scaled_rmse`` is the mean over targets of each one's RMSE divided by its training
    standard deviation, so that a target's units (kcal/mol or cal/mol) do not decide
    which epoch is kept. The reported metrics stay in each target's own units."""
    columns = [col[~np.isnan(col)] for col in val_targets.numpy().T]
    if task == "regression" and any(col.size >= 2 for col in columns):
        return "rmse" if len(columns) == 1 else "scaled_rmse"
    if task != "regression" and any(np.unique(col).size == 2 for col in columns):
        return "roc_auc"
    log.warning(
        "validation %s is undefined on the %d validation molecules (%s): the best epoch "
        "is chosen by validation loss instead",
        "RMSE" if task == "regression" else "ROC-AUC",
        num_val,
        "fewer than 2 labelled" if task == "regression" else "one class only per target",
    )
    return "loss"


@keeps_global_rng
def train_molecule_model(
    dataset: MoleculeDataset,
    config: MoleculeTrainConfig | None = None,
    run_dir: str | Path | None = None,
    dataset_name: str = "custom",
    progress: bool = True,
) -> dict:
    """Train on a molecule dataset and (optionally) write a run folder.

    Args:
        dataset: a :class:`graphattn.datasets.molecules.MoleculeDataset` (``Data`` items
            with ``y [1, T]``; attributes ``smiles``, ``target_cols``, ``featurizer``).
        config: training settings (defaults: :class:`MoleculeTrainConfig`).
        run_dir: folder for ``model.pt``, ``metrics.json``, ``predictions.csv``,
            ``learning_curve.png``, ``split.json``, ``skipped.csv``, ``history.json``.
        dataset_name: recorded in ``metrics.json``.
        progress: show a progress bar over epochs.

    Returns:
        The metrics dictionary (as written to ``metrics.json``), with two extra keys
        (not written): the trained model (in eval mode) under ``"model"``, and the
        :class:`~graphattn.train.molecule_inference.TargetScaler` under ``"scaler"``.
        The model outputs standardised targets (logits for classification): in the
        targets' units, ``scaler.inverse(model(batch))``, for a batch featurized by
        ``dataset.featurizer`` (and ``model.pe_transform()``, when not ``None``). A run
        folder gives the same through :func:`~graphattn.train.predict_molecules`.
    """
    config = config or MoleculeTrainConfig()
    check_train_config(config)
    check_run_folder(run_dir)
    device = training_device(config.device)
    seed_everything(config.seed)
    _check_not_empty(dataset, run_dir)
    split = _make_split(dataset, config)
    items = [dataset[i] for i in range(len(dataset))]
    parts = {name: [items[i] for i in idx] for name, idx in split.items()}
    part_targets = _part_targets(parts, list(dataset.target_cols), config)
    targets = part_targets["train"]
    task = config.task
    scaler = (
        TargetScaler.fit(targets)
        if task == "regression"
        else TargetScaler.identity(targets.size(1))
    )

    featurizer = dataset.featurizer
    pretrained = None
    if config.init_from is not None:
        pretrained = load_pretrained_encoder(config.init_from)
        pretrained.check_featurizer(featurizer.to_dict())
    model_config = MoleculeModelConfig(
        atom_dim=featurizer.atom_dim,
        bond_dim=featurizer.bond_dim,
        num_tasks=targets.size(1),
        task=task,
        mol_dim=featurizer.mol_dim,
        **{**(pretrained.architecture if pretrained else {}), **config.model},
    )
    transform = pe_transform(model_config)
    if transform is not None:
        parts = {name: [transform(d.clone()) for d in part] for name, part in parts.items()}
    eval_loaders = {name: _eval_loader(parts[name]) for name in ("train", "val", "test")}
    metric = _selection_metric(task, part_targets["val"], len(parts["val"]))
    if model_config.mol_dim:
        _check_descriptors(parts)
    if model_config.norm == "batch":
        refit_items = parts["val"] if config.refit else []
        _check_batch_norm(parts["train"] + refit_items, config.batch_size)
    train_descriptors = (
        torch.cat([d.mol_x for d in parts["train"]]) if model_config.mol_dim else None
    )
    members, history, best_epochs = [], [], []
    start = time.perf_counter()
    job = _MembersJob(
        model_config,
        pretrained,
        train_descriptors,
        parts["train"],
        parts["val"],
        scaler,
        config,
        metric,
    )
    workers = min(config.workers, config.ensemble) if device.type == "cpu" else 1
    fitted = _train_members(job, device, workers, f"train {dataset_name}", progress)
    for member, (model, member_history, best_epoch) in enumerate(fitted):
        members.append(model)
        history += [{**h, "member": member} for h in member_history]
        best_epochs.append(best_epoch)
    model = _ensemble(members)
    selected = {"val": (model, scaler)}  # validation always scores the early-stopped models
    refit, refit_rows = None, []
    if config.refit:
        refit_start = time.perf_counter()
        model, scaler, refit_history = _refit_members(
            job, parts, part_targets, best_epochs, device, workers, dataset_name, progress
        )
        refit_rows = [{**h, "member": m} for m, rows in enumerate(refit_history) for h in rows]
        also_seen = _also_in_train(parts, trained_on=("train", "val"))
        refit = {
            "epochs": [len(h) for h in refit_history],
            "seconds": round(time.perf_counter() - refit_start, 2),
            "num_test_also_in_train_or_val": None if also_seen is None else also_seen["test"],
        }
    train_seconds = time.perf_counter() - start

    results, predictions, spread = {}, {}, {}
    names = list(dataset.target_cols)
    for name, loader in eval_loaders.items():
        scoring, scoring_scaler = selected.get(name, (model, scaler))
        pred, y, std = _predict_loader(scoring, loader, scoring_scaler, task)
        predictions[name] = (pred, std)
        results[name] = _metrics(task, y, pred, names)
        if std is not None and task == "regression" and name != "train":
            spread[name] = _per_target(spread_metrics, names, y, pred, std)
    metrics = {
        "task": task,
        "dataset": dataset_name,
        "split": config.split,
        "seed": config.seed,
        "target_cols": list(dataset.target_cols),
        "num_molecules": {k: len(v) for k, v in parts.items()},
        "num_skipped": len(_skipped(dataset)),
        "num_also_in_train": _also_in_train(parts),
        "test": results["test"],
        "val": results["val"],
        "train": results["train"],
        "best_epoch": best_epochs[0] if len(best_epochs) == 1 else best_epochs,
        "selection_metric": f"val_{metric}",
        "epochs_run": len(history),
        "ensemble_size": len(members),
        **({"ensemble_spread": spread} if spread else {}),
        **({"refit": refit} if refit else {}),
        "train_seconds": round(train_seconds, 2),
        "device": str(device),
        "config": {**asdict(config), "model": model_config.to_dict()},
    }
    if run_dir is not None:
        _write_run(
            Path(run_dir),
            model,
            dataset,
            split,
            parts,
            predictions["test"],
            scaler,
            history,
            metrics,
            metric,
            refit_rows,
        )
    return {**metrics, "model": model, "scaler": scaler}


def default_workers(ensemble: int) -> int:
    """The ``workers`` that ``graphattn train`` uses: one process per ensemble member,
    up to twice the CPU cores this process may use; 1 on a single core.

    More processes than cores share them, so members that stop early free their share
    for the others. Measured: ESOL's 3 members on 2 cores, 172 s with 3 workers, 207 s
    with 2 (one worker trains two members), 226 s one after another with 2 threads.
    """
    cores = usable_cores() or 1
    return 1 if cores == 1 else min(ensemble, 2 * cores)


def _ensemble(members: list[MoleculeModel]) -> MoleculeModel | MoleculeEnsemble:
    return members[0] if len(members) == 1 else MoleculeEnsemble(members).eval()


def _train_members(
    job: _MembersJob, device: torch.device, workers: int, label: str, progress: bool
) -> list[tuple[MoleculeModel, list[dict], int]]:
    """Every member of ``job``, trained in ``workers`` processes or one after another:
    ``(model, history, epochs)`` each (the best epoch, or a refit's epochs)."""
    members = job.config.ensemble
    if workers > 1:
        label += f" [{members} models, {workers} processes]"
        return _fit_members_in_processes(job, workers, label, progress)
    val_loader = _eval_loader(job.val_items)
    return [
        job.train_member(
            member,
            device,
            val_loader,
            label + (f" [{member + 1}/{members}]" if members > 1 else ""),
            progress,
        )
        for member in range(members)
    ]


def _refit_members(
    job: _MembersJob,
    parts: dict[str, list],
    part_targets: dict[str, torch.Tensor],
    best_epochs: list[int],
    device: torch.device,
    workers: int,
    dataset_name: str,
    progress: bool,
) -> tuple[MoleculeModel | MoleculeEnsemble, TargetScaler, list[list[dict]]]:
    """``MoleculeTrainConfig.refit``: every member trained again on the training and
    validation molecules for its best epoch count; ``(model, scaler, histories)``."""
    items = parts["train"] + parts["val"]
    targets = torch.cat([part_targets["train"], part_targets["val"]])
    scaler = (
        TargetScaler.fit(targets)
        if job.config.task == "regression"
        else TargetScaler.identity(targets.size(1))
    )
    descriptors = torch.cat([d.mol_x for d in items]) if job.train_descriptors is not None else None
    refit_job = replace(
        job,
        train_items=items,
        train_descriptors=descriptors,
        scaler=scaler,
        refit_epochs=tuple(best_epochs),
    )
    fitted = _train_members(refit_job, device, workers, f"refit {dataset_name}", progress)
    return _ensemble([model for model, _, _ in fitted]), scaler, [h for _, h, _ in fitted]


@dataclass
class _MembersJob:
    """What training any member of an ensemble needs (sent whole to worker processes)."""

    model_config: MoleculeModelConfig
    pretrained: PretrainedEncoder | None
    train_descriptors: torch.Tensor | None
    train_items: list
    val_items: list
    scaler: TargetScaler
    config: MoleculeTrainConfig
    metric: str
    refit_epochs: tuple[int, ...] | None = None  # refit: each member's epochs, no validation

    def epochs_of(self, member: int) -> int:
        """The most epochs member ``member`` trains for."""
        return self.config.epochs if self.refit_epochs is None else self.refit_epochs[member]

    def train_member(
        self,
        member: int,
        device: torch.device,
        val_loader: DataLoader,
        label: str,
        progress: bool,
        report: Callable[[float, float], None] | None = None,
    ) -> tuple[MoleculeModel, list[dict], int]:
        """Member ``member`` (its own seed; the pretrained encoder if any; the training
        molecules' descriptor standardisation), trained: ``(model, history, best_epoch)``;
        refitted for its ``refit_epochs``: ``(model, history, those epochs)``."""
        seed_everything(member_seed(self.config.seed, member))
        model = MoleculeModel(self.model_config)
        if self.pretrained is not None:
            self.pretrained.load_into(model)
        if self.train_descriptors is not None:
            model.fit_descriptor_scaler(self.train_descriptors)
        model.to(device)
        if self.refit_epochs is not None:
            epochs = self.refit_epochs[member]
            args = (self.scaler, self.config, epochs, label, progress, report)
            return model, _refit(model, self.train_items, *args), epochs
        history, best_epoch = _fit(
            model,
            self.train_items,
            val_loader,
            self.scaler,
            self.config,
            self.metric,
            label,
            progress,
            report,
        )
        return model, history, best_epoch


def _to_bytes(value) -> bytes:
    # torch's multiprocessing pickler would share every tensor of every graph through
    # its own file descriptor, thousands for a data set: send one byte string instead
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def _from_bytes(payload: bytes):
    return torch.load(io.BytesIO(payload), weights_only=False)  # our own bytes


_REPORTS = None  # in a worker process: the queue its members' epochs are reported to


def _start_worker(reports) -> None:
    """Set up a worker process: where it reports epochs, and a thread that ends it when
    the process that started it ends (killed, it cannot stop its workers, which would
    train on, then wait forever to hand in their results)."""
    global _REPORTS
    _REPORTS = reports
    # workers show no progress bars: a thread lock spares them the semaphore tqdm would
    # share between processes, which a stopped worker would leave behind (with a warning)
    tqdm.set_lock(threading.RLock())
    sentinel = multiprocessing.parent_process().sentinel  # ready once the parent is gone
    threading.Thread(target=_exit_after, args=(sentinel,), daemon=True).start()


def _exit_after(sentinel: int) -> None:
    multiprocessing.connection.wait([sentinel])
    os._exit(1)


def _fit_member_alone(payload: bytes, member: int) -> bytes:
    """Train one member in a worker process (one torch thread); its weights, history
    and best epoch. Each epoch's ``(member, train loss, val metric)`` is reported,
    then ``(member, None, epochs run)``."""
    torch.set_num_threads(1)
    job: _MembersJob = _from_bytes(payload)
    model, history, best_epoch = job.train_member(
        member,
        torch.device("cpu"),
        _eval_loader(job.val_items),
        label=f"model {member + 1}",  # named only in warnings: no progress bar here
        progress=False,
        report=lambda loss, value: _REPORTS.put((member, loss, value)),
    )
    _REPORTS.put((member, None, len(history)))  # done: the epochs it ran
    return _to_bytes((model.state_dict(), history, best_epoch))


def _fit_members_in_processes(
    job: _MembersJob, workers: int, label: str, progress: bool
) -> list[tuple[MoleculeModel, list[dict], int]]:
    """Train every ensemble member in ``workers`` fresh processes; one progress bar
    counts the epochs of all of them (its total drops when a member stops early).

    A member's error, or an interrupt, ends the other members' processes at once and
    is raised here."""
    context = multiprocessing.get_context("spawn")  # fork is unsafe once torch has threads
    reports = context.SimpleQueue()  # written before each result: read in full below
    pool = ProcessPoolExecutor(
        workers, mp_context=context, initializer=_start_worker, initargs=(reports,)
    )
    before = set(multiprocessing.active_children())
    with pool:
        try:
            results = _collect_members(pool, job, reports, label, progress)
        except BaseException:
            # an interrupt while a worker starts can come before the pool lists it
            _stop_workers(pool, set(multiprocessing.active_children()) - before)
            raise
    fitted = []
    for state, history, best_epoch in results:
        model = MoleculeModel(job.model_config)
        model.load_state_dict(state)
        fitted.append((model, history, best_epoch))
    return fitted


def _collect_members(pool, job: _MembersJob, reports, label: str, progress: bool) -> list:
    """Submit every member to ``pool``, show their epochs, and return their results;
    a member's error is raised as soon as it arrives."""
    payload = _to_bytes(job)
    futures = [
        pool.submit(_fit_member_alone, payload, member) for member in range(job.config.ensemble)
    ]
    members = job.config.ensemble
    total = sum(job.epochs_of(member) for member in range(members))
    with tqdm(total=total, desc=label, unit="epoch", disable=not progress) as bar:
        finished = 0
        while True:
            while not reports.empty():
                member, loss, value = reports.get()
                if loss is None:  # member stopped after `value` epochs
                    bar.total -= job.epochs_of(member) - value
                    finished += 1
                    bar.set_postfix(done=f"{finished}/{members}")
                    continue
                bar.update(1)
                validation = {} if math.isnan(value) else {f"val_{job.metric}": f"{value:.4f}"}
                bar.set_postfix(
                    model=member + 1, done=f"{finished}/{members}", loss=f"{loss:.4f}", **validation
                )
            _raise_member_errors(futures, pool)
            if all(f.done() for f in futures) and reports.empty():
                break
            time.sleep(0.2)
    return [_from_bytes(f.result()) for f in futures]


class WorkerProcessDied(RuntimeError):
    """A process training ensemble members ended without reporting an error: killed
    by a signal (the out-of-memory killer, ``kill -9``) or crashed.

    Args:
        exitcode: the process's exit code as :attr:`multiprocessing.Process.exitcode`
            gives it (``-N``: killed by signal ``N``), or ``None`` when unknown. It is
            kept as the ``exitcode`` attribute.
    """

    def __init__(self, exitcode: int | None = None) -> None:
        self.exitcode = exitcode
        super().__init__(
            f"a worker process training ensemble members ended abruptly: {_how(exitcode)}. "
            "With --workers 1 (MoleculeTrainConfig(workers=1)) the members train one "
            "after another in this process: in less memory, and with no processes to start"
        )

    def __reduce__(self):  # pickled with the argument __init__ takes, not the message
        return type(self), (self.exitcode,)


def _how(exitcode: int | None) -> str:
    """How a worker process ended, in words, from its exit code."""
    if exitcode is None:
        return "killed (by the out-of-memory killer, say, or kill -9) or crashed"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        if -exitcode == getattr(signal, "SIGKILL", None):  # no SIGKILL on Windows
            return f"killed by {name} (as the out-of-memory killer and kill -9 do)"
        return f"killed by {name}"
    if exitcode == 0:  # how a worker ends whose set-up failed (the pool logs the error)
        return "it exited with code 0 before training (its error, if logged, is above)"
    # a script without the guard runs again in each worker, and fails there when it
    # starts processes of its own: Python's error, not ours, is printed above
    return (
        f"it exited with code {exitcode} (its error, if it printed one, is above). A "
        'script that trains with workers > 1 needs the `if __name__ == "__main__":` guard'
    )


def _raise_member_errors(futures: list, pool: ProcessPoolExecutor) -> None:
    """Raise a member's error as its worker raised it, else report a worker that died.

    A dead worker leaves the pool "broken": it marks every future with a bare
    ``BrokenProcessPool`` and ends the other workers itself (SIGTERM), so the exit code
    told is that of the worker that ended first. A pool that broke with no such worker
    (its own SIGTERMs only: an error it could not read back, say) is reported with its
    own error as the cause, which holds the reason."""
    failed = [f for f in futures if f.done() and f.exception() is not None]
    for future in failed:
        if not isinstance(future.exception(), BrokenProcessPool):
            future.result()  # a member's own error
    broken = failed[0].exception() if failed else None  # what is left: the pool broke
    ended = _ended_worker(pool)
    if ended is not None and not (broken is not None and ended.exitcode == -signal.SIGTERM):
        raise WorkerProcessDied(ended.exitcode) from broken
    if broken is not None:
        raise WorkerProcessDied() from broken


def _ended_worker(pool: ProcessPoolExecutor) -> multiprocessing.Process | None:
    """A worker process of ``pool`` that has ended while members train, if any; one the
    pool did not end itself (with SIGTERM, once it saw another one end) first.

    The pool notices such a worker itself, but only among the workers it had when its
    thread last woke, and ``submit`` wakes that thread before it starts the worker for
    the job (CPython starts workers on demand with ``spawn``; seen on 3.11): a worker
    killed then went unnoticed until another one reported (in a test, after the other
    member's 60 s of training)."""
    ended = [p for p in list((pool._processes or {}).values()) if p.exitcode is not None]
    ended.sort(key=lambda process: process.exitcode == -signal.SIGTERM)
    return ended[0] if ended else None


def _stop_workers(pool: ProcessPoolExecutor, started: set = frozenset()) -> None:
    """End the pool's processes, and those of ``started``, now: leaving the pool would
    wait for the members still training, all of their epochs."""
    processes = {*(pool._processes or {}).values(), *started}  # terminate_workers: 3.14
    reaper = pool._executor_manager_thread  # the pool's thread, which shutdown forgets
    call_queue = pool._call_queue  # shutdown forgets it too
    if call_queue is not None:
        # a member still queued for a worker (more members than workers) would block the
        # pool's thread, and on Python 3.10 the exit, waiting to send it to a process that
        # is gone (Python 3.11 closes the queue's reader once its workers are terminated)
        call_queue.cancel_join_thread()
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    # wait for them to end, and for the pool's thread, which reaps them: joining them here
    # too would race it for os.waitpid, and the loser sees no exit code. Without any (an
    # error or interrupt before the first worker started) there is nothing to wait for:
    # waiting on no sentinels at all would never return.
    if processes:
        multiprocessing.connection.wait([process.sentinel for process in processes])
    if reaper is not None:
        reaper.join(timeout=1)
        if reaper.is_alive() and call_queue is not None:
            _unblock_feeder(call_queue)
        reaper.join(timeout=60)


def _unblock_feeder(call_queue) -> None:
    """Let a pool's thread finish that waits for its call queue's feeder thread, stuck
    sending a member to a worker that died before reading it (a killed worker).

    Once this process's end of the pipe is closed too, no reader is left and the send
    fails. CPython does this itself since its fix of issue 94777 (3.11.7 has it, 3.11.2
    and 3.10 do not: there the pool's thread waited the full 60 s). Called only with
    every worker gone and the pool's thread still waiting, so the feeder is stuck in
    that send: it reaches its own close of the reader only after this one, which it
    then finds done."""
    reader = call_queue._reader
    handle, reader._handle = reader._handle, None
    if handle is not None:
        with contextlib.suppress(OSError):
            os.close(handle)


def member_seed(seed: int, member: int) -> int:
    """The seed of an ensemble's member: ``seed * 1000 + member`` where that fits in the
    64 bits of a torch generator and ``member < 1000`` (every seed below 2**64 / 1000),
    else a hash of both, so that large seeds and large ensembles do not wrap onto the
    members of other seeds."""
    seed, member = operator.index(seed), operator.index(member)  # NumPy ints would wrap
    combined = seed * 1000 + member
    if member < 1000 and combined < 2**64:
        return combined
    return int(np.random.SeedSequence([seed, member]).generate_state(1, np.uint64)[0])


def _train_loader(train_items: list, config: MoleculeTrainConfig) -> DataLoader:
    """Shuffled training batches, in an order seeded from torch's current seed; a last
    batch smaller than ``batch_size`` is dropped unless it is the only one."""
    generator = torch.Generator().manual_seed(torch.initial_seed() % 2**63)
    return DataLoader(
        train_items,
        batch_size=config.batch_size,
        shuffle=True,
        generator=generator,
        drop_last=len(train_items) > config.batch_size,
    )


def _fit(
    model: MoleculeModel,
    train_items: list,
    val_loader: DataLoader,
    scaler: TargetScaler,
    config: MoleculeTrainConfig,
    metric: str,
    label: str,
    progress: bool,
    report: Callable[[float, float], None] | None = None,
) -> tuple[list[dict], int]:
    """Train one model with warm-up + cosine decay and early stopping on validation.

    Leaves the best validation weights in ``model``; returns ``(history, best_epoch)``.
    ``report(train_loss, val_metric)`` is called after every epoch.
    """
    epoch_of = _Epochs(model, train_items, scaler, config)
    stopper = EarlyStopping(config.patience, higher_is_better=metric == "roc_auc")
    history: list[dict] = []
    start = time.perf_counter()
    bar = tqdm(range(1, config.epochs + 1), desc=label, unit="epoch", disable=not progress)
    for epoch in bar:
        loss_value = epoch_of.train(epoch)
        val_inputs = (t for item in val_loader.dataset for t in _float_inputs(item).values())
        with divergence_named(epoch, epoch_of.steps, config.lr, model, val_inputs):
            val_pred, val_y, _ = _predict_loader(model, val_loader, scaler, config.task)
        if not np.isfinite(val_pred).all():  # no layer saw it: a model without attention
            _check_finite_items(val_loader.dataset)  # a bad input is named as such
            raise TrainingDiverged(epoch, config.lr, "a validation prediction is not finite")
        val_value = _validation_value(config.task, metric, val_y, val_pred, scaler)
        best = stopper.step(val_value, epoch, model)
        history.append(
            {"epoch": epoch, "train_loss": loss_value, f"val_{metric}": val_value, "best": best}
        )
        bar.set_postfix(loss=f"{loss_value:.4f}", **{f"val_{metric}": f"{val_value:.4f}"})
        if report is not None:
            report(loss_value, val_value)
        out_of_time = config.max_seconds is not None and (
            time.perf_counter() - start > config.max_seconds
        )
        if stopper.should_stop or out_of_time:
            break
    stopper.restore(model)
    return history, stopper.best_epoch


def _refit(
    model: MoleculeModel,
    train_items: list,
    scaler: TargetScaler,
    config: MoleculeTrainConfig,
    epochs: int,
    label: str,
    progress: bool,
    report: Callable[[float, float], None] | None = None,
) -> list[dict]:
    """Train ``model`` for exactly ``epochs`` epochs of :func:`_fit`'s schedule (warm-up
    and cosine decay over ``config.epochs``, stopped where early stopping chose), with no
    validation; the last epoch's weights stay in ``model``. Returns the history."""
    epoch_of = _Epochs(model, train_items, scaler, config)
    history: list[dict] = []
    start = time.perf_counter()
    bar = tqdm(range(1, epochs + 1), desc=label, unit="epoch", disable=not progress)
    for epoch in bar:
        loss_value = epoch_of.train(epoch)
        history.append({"epoch": epoch, "train_loss": loss_value})
        bar.set_postfix(loss=f"{loss_value:.4f}")
        if report is not None:
            report(loss_value, math.nan)
        if config.max_seconds is not None and time.perf_counter() - start > config.max_seconds:
            if epoch < epochs:
                log.warning(
                    "%s: max_seconds=%g stopped the refit after %d of the %d epochs early "
                    "stopping chose; the model kept is that of epoch %d",
                    *(label or "refit", config.max_seconds, epoch, epochs, epoch),
                )
            break
    return history


class _Epochs:
    """Training epochs of one model: shuffled batches, AdamW, warm-up and cosine decay
    over ``config.epochs``, gradients clipped to norm 5."""

    def __init__(
        self, model: MoleculeModel, train_items: list, scaler: TargetScaler, config
    ) -> None:
        self.model, self.scaler, self.config = model, scaler, config
        self.loader = _train_loader(train_items, config)
        self.optimizer = adamw(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        steps_per_epoch = max(1, len(self.loader))
        self.schedule = warmup_cosine(
            self.optimizer,
            config.warmup_epochs * steps_per_epoch,
            config.epochs * steps_per_epoch,
        )
        self.device = _model_device(model)
        self.steps = 0

    def train(self, epoch: int) -> float:
        """One pass over the batches; the mean training loss per molecule."""
        model, config = self.model, self.config
        model.train()
        total, count = 0.0, 0
        for batch in self.loader:
            batch = batch.to(self.device)
            self.optimizer.zero_grad()
            inputs = _float_inputs(batch)
            with divergence_named(epoch, self.steps, config.lr, model, inputs.values()):
                loss = masked_loss(model(batch), self.scaler.transform(batch.y), config.task)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            self.optimizer.step()
            self.schedule.step()
            self.steps += 1
            value = loss.item()
            check_finite_loss(value, epoch, config.lr, inputs)
            total += value * batch.num_graphs
            count += batch.num_graphs
        return total / max(count, 1)


def _also_in_train(
    parts: dict[str, list], trained_on: tuple[str, ...] = ("train",)
) -> dict[str, int] | None:
    """How many molecules of the other parts are the same graph as a molecule of the
    parts ``trained_on`` (:func:`~graphattn.datasets.molecules.graph_key`: a data set
    that repeats molecules, under a random split); ``None`` for items without
    ``smiles``, where it is unknown."""
    if not all(hasattr(d, "smiles") for part in parts.values() for d in part):
        return None
    seen = {graph_key(d.smiles) for name in trained_on for d in parts[name]}
    held_out = [name for name in ("val", "test") if name not in trained_on]
    return {name: sum(graph_key(d.smiles) in seen for d in parts[name]) for name in held_out}


def _check_batch_norm(train: list, batch_size: int) -> None:
    """Batch normalisation needs two atoms in every training batch: refuse the batches of
    one molecule of one atom (torch's error would come mid-training, without the row).
    ``train`` holds every molecule a batch may draw from, the refit's included."""
    if batch_size > 1 and len(train) > 1:
        return
    lone = next((d for d in train if d.num_nodes == 1), None)
    if lone is not None:
        smiles = getattr(lone, "smiles", "a molecule")
        where = _item_named(lone, smiles)
        raise GraphInputError(
            f"norm='batch' needs two atoms in every training batch, but one would hold only "
            f"{where}, which has one atom (batch_size={batch_size}, {len(train)} training "
            f"{'molecule' if len(train) == 1 else 'molecules'}): use batch_size >= 2 or "
            "norm='layer'"
        )


def _check_descriptors(parts: dict[str, list]) -> None:
    """Raise naming the first molecule whose descriptors (``mol_x``) are not finite: they
    reach the loss through no layer's check, and the training set's would set every
    molecule's standardisation to NaN (graphattn's featurizer makes them finite; a
    custom one may not)."""
    for part in parts.values():
        for data in part:
            bad = (~data.mol_x.isfinite()).nonzero()
            if len(bad):
                where = tuple(bad[0].tolist())
                raise GraphInputError(
                    _item_named(
                        data,
                        f"{getattr(data, 'smiles', 'a molecule')!r}: descriptor {where[-1]} "
                        f"(mol_x) is {float(data.mol_x[where])}; descriptors must be finite",
                    )
                )


def _check_finite_items(items) -> None:
    """Raise :class:`NonFiniteError` naming the first item with a NaN or infinite input."""
    for data in items:
        try:
            check_finite(**_float_inputs(data))
        except NonFiniteError as error:
            smiles = getattr(data, "smiles", "a molecule")
            raise NonFiniteError(_item_named(data, f"{smiles}: {error}")) from None


def _float_inputs(batch) -> dict[str, torch.Tensor]:
    """The batch's floating-point tensors by name (atom and bond features, descriptors)."""
    return {
        key: value
        for key, value in batch.items()
        if key != "y" and isinstance(value, torch.Tensor) and value.is_floating_point()
    }


def _validation_value(
    task: str, metric: str, y: np.ndarray, pred: np.ndarray, scaler: TargetScaler
) -> float:
    """The selection metric of validation targets ``y`` and predictions ``pred`` (both in
    the targets' units): ``scaled_rmse`` and ``loss`` are taken on the standardised
    values the model learns, as the training loss is."""
    if metric in ("rmse", "roc_auc"):
        return _metrics(task, y, pred)[metric]
    y_scaled, pred_scaled = (scaler.transform(torch.from_numpy(a)) for a in (y, pred))
    if metric == "scaled_rmse":
        return _metrics(task, y_scaled.numpy(), pred_scaled.numpy())["rmse"]
    return float(masked_loss(pred_scaled, y_scaled, task))


def _write_run(
    run_dir: Path,
    model,
    dataset,
    split,
    parts,
    test_pred,
    scaler,
    history,
    metrics,
    metric,
    refit_history: list[dict],
) -> None:
    """``test_pred``: ``(predictions [n, T], the members' std [n, T] or None)``;
    ``refit_history``: the refit's epochs (empty without one)."""
    to_json(metrics)  # raises before start_run_folder deletes an earlier run's files
    start_run_folder(run_dir)
    save_checkpoint(
        run_dir,
        model,
        kind="molecule",
        model_config=model.config.to_dict(),
        featurizer=dataset.featurizer.to_dict(),
        scaler=scaler.to_dict(),
        target_cols=list(dataset.target_cols),
        task=metrics["task"],
        ensemble_size=metrics["ensemble_size"],
    )
    write_json(run_dir / "metrics.json", metrics)
    refit = {"refit": refit_history} if refit_history else {}
    write_json(run_dir / "history.json", {"history": history, **refit})
    save_split(
        {k: np.asarray(v) for k, v in split.items()},
        run_dir / "split.json",
        getattr(dataset, "rows", None),
    )
    write_skipped_rows(_skipped(dataset), run_dir / "skipped.csv")
    plot_learning_curve(history, metric, run_dir / "learning_curve.png")
    cols = list(dataset.target_cols)
    names, test_pred = prediction_columns(metrics["task"], cols, *test_pred)
    with open(run_dir / "predictions.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(_unique_header(["row", "smiles", *cols, *names], run_dir))
        for index, data, pred in zip(split["test"], parts["test"], test_pred, strict=True):
            cells = map(float32_text, [*data.y.view(-1).tolist(), *pred.tolist()])
            row = data.row if hasattr(data, "row") else index  # items without a file row
            writer.writerow([int(row), data.smiles, *cells])


def _unique_header(names: list[str], run_dir: Path) -> list[str]:
    """``names`` with repeats renamed ``name_2``...: a target named ``row``, ``smiles``
    or ``pred_<another target>`` would otherwise hide a column from CSV readers."""
    taken, seen = set(names), set()  # a new name is none of the others (row_2 may be one)
    header = []
    for name in names:
        header.append(fresh_name(name, taken) if name in seen else name)
        seen.add(name)
    renamed = [new for new, old in zip(header, names, strict=True) if new != old]
    if renamed:
        log.warning(
            "%s: columns named twice are written as %s", run_dir / "predictions.csv", renamed
        )
    return header
