"""Predict with and evaluate trained molecule models, and the pieces that training
shares with them (target scaling, batched prediction, metrics, output columns).

Data path at prediction time: SMILES -> the run's featurizer -> ``Batch`` ->
:class:`~graphattn.models.MoleculeModel` (or an ensemble) -> unscaled predictions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import torch
from scipy.special import expit
from torch_geometric.data import Batch
from torch_geometric.loader import DataLoader
from tqdm.auto import tqdm

from graphattn.errors import GraphInputError
from graphattn.featurize.molecule import MoleculeFeaturizer
from graphattn.models.molecule import MoleculeEnsemble, MoleculeModel, MoleculeModelConfig
from graphattn.train.checkpoint import checkpoint_file, load_checkpoint
from graphattn.train.loop import training_device
from graphattn.train.metrics import classification_metrics, regression_metrics, spread_metrics

__all__ = [
    "TargetScaler",
    "evaluate_molecules",
    "load_molecule_checkpoint",
    "load_molecule_model",
    "predict_molecules",
    "prediction_columns",
    "reports_spread",
]


class TargetScaler:
    """Standardise each target with the training set's mean and std (NaN-aware).

    Args:
        mean: ``[T]`` training mean of each target (0 for classification).
        std: ``[T]`` training standard deviation of each target (1 where it is 0, and
            for classification).
    """

    def __init__(self, mean: list[float], std: list[float]) -> None:
        self.mean = torch.tensor(mean, dtype=torch.float32)
        self.std = torch.tensor(std, dtype=torch.float32)

    @classmethod
    def fit(cls, targets: torch.Tensor) -> TargetScaler:
        """The scaler of ``[n, T]`` training targets (NaN: missing)."""
        y = targets.double().numpy()
        std = np.nanstd(y, axis=0)
        return cls(np.nanmean(y, axis=0).tolist(), np.where(std > 0, std, 1.0).tolist())

    @classmethod
    def identity(cls, num_tasks: int) -> TargetScaler:
        """The scaler that changes nothing (classification's)."""
        return cls([0.0] * num_tasks, [1.0] * num_tasks)

    def transform(self, y: torch.Tensor) -> torch.Tensor:
        """``[B, T]`` targets to the standardised values the model learns."""
        return (y - self.mean.to(y.device)) / self.std.to(y.device)

    def inverse(self, y: torch.Tensor) -> torch.Tensor:
        """``[B, T]`` model outputs back to the targets' units."""
        return y * self.std.to(y.device) + self.mean.to(y.device)

    def to_dict(self) -> dict:
        return {"mean": self.mean.tolist(), "std": self.std.tolist()}


@torch.no_grad()
def _predict_batch(
    model: MoleculeModel | MoleculeEnsemble, batch, scaler: TargetScaler, task: str
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(prediction [B, T], the members' standard deviation [B, T] or None for one
    model)``, in the targets' units for regression, as logits for classification."""
    if isinstance(model, MoleculeEnsemble):
        members = model.member_predictions(batch)
        pred, std = members.mean(0), members.std(0)
    else:
        pred, std = model(batch), None
    if task == "regression":
        pred = scaler.inverse(pred)
        std = None if std is None else std * scaler.std.to(std.device)
    return pred, std


def _predict_loader(
    model: MoleculeModel | MoleculeEnsemble, loader: DataLoader, scaler: TargetScaler, task: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(predictions, targets, the members' std or None)`` of every batch, ``[n, T]``."""
    model.eval()
    device = _model_device(model)
    preds, stds, targets = [], [], []
    for batch in loader:
        pred, std = _predict_batch(model, batch.to(device), scaler, task)
        preds.append(pred.cpu())
        stds.append(None if std is None else std.cpu())
        targets.append(batch.y.cpu())
    std = None if stds[0] is None else torch.cat(stds).numpy()
    return torch.cat(preds).numpy(), torch.cat(targets).numpy(), std


def _model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def _metrics(task: str, y: np.ndarray, pred: np.ndarray, names: list[str] | None = None) -> dict:
    """Metrics of ``[n, T]`` targets and predictions: the mean over targets and, with
    ``names`` of more than one target, ``"per_target"``: each one's metrics in its own
    units (a mean of RMSEs in different units says little on its own)."""
    metrics_of = regression_metrics if task == "regression" else classification_metrics
    return _per_target(metrics_of, names, y, pred)


def _per_target(metrics_of: Callable, names: list[str] | None, *arrays: np.ndarray) -> dict:
    result: dict = metrics_of(*arrays)
    if names is not None and len(names) > 1:
        result["per_target"] = {
            name: metrics_of(*(a[:, t] for a in arrays)) for t, name in enumerate(names)
        }
    return result


def prediction_columns(
    task: str, target_cols: list[str], preds: np.ndarray, std: np.ndarray | None = None
) -> tuple[list[str], np.ndarray]:
    """Output columns of ``[n, T]`` predictions: ``pred_<target>`` (values, or logits for
    classification); for classification, ``prob_<target>`` (their sigmoid); for a
    regression ensemble's ``std`` (the members' standard deviation), ``std_<target>``."""
    names = [f"pred_{c}" for c in target_cols]
    if task == "classification":
        return names + [f"prob_{c}" for c in target_cols], np.concatenate([preds, expit(preds)], 1)
    if std is None:
        return names, preds
    return names + [f"std_{c}" for c in target_cols], np.concatenate([preds, std], 1)


def fresh_name(name: str, taken: set[str]) -> str:
    """``name``, or ``name_2``, ``name_3``... when ``taken`` has it; the result is added
    to ``taken``. Output columns get unique names this way: a CSV reader keeps only one
    of two columns of the same name."""
    candidate, k = name, 2
    while candidate in taken:
        candidate, k = f"{name}_{k}", k + 1
    taken.add(candidate)
    return candidate


def float32_text(value: float) -> str:
    """The shortest decimal that reads back as the same float32 (labels and predictions
    are float32): ``-5.45``, not ``-5.449999809``; ``12345678``, not ``1.234568e+07``.
    NaN, a missing value, is an empty cell, as in the input."""
    if np.isnan(value):
        return ""
    with np.errstate(over="ignore"):
        single = np.float32(value)
    if (np.isinf(single) and np.isfinite(value)) or (single == 0 and value != 0):
        return repr(float(value))  # beyond float32 (from another caller): as Python writes it
    if single == 0 or 1e-4 <= abs(single) < 1e16:
        return np.format_float_positional(single, unique=True, trim="-")
    return np.format_float_scientific(single, unique=True, trim="-")


def load_molecule_checkpoint(run_dir: str | Path) -> dict:
    """:func:`~graphattn.train.checkpoint.load_checkpoint`, refusing other kinds of model.

    Raises:
        GraphInputError: the run folder holds a node-classification (or other) model.
    """
    checkpoint = load_checkpoint(run_dir)
    if checkpoint.get("kind") != "molecule":
        raise GraphInputError(
            f"{run_dir} holds a {checkpoint.get('kind')!r} model, not a molecule model "
            "(node runs write their predictions.csv when they train)"
        )
    missing = [key for key in _MOLECULE_KEYS if key not in checkpoint]
    if missing:
        raise GraphInputError(
            f"{checkpoint_file(run_dir)}: a molecule checkpoint without {missing} (train "
            "writes them all; save_checkpoint needs them as keyword arguments)"
        )
    return checkpoint


_MOLECULE_KEYS = ("model_config", "featurizer", "scaler", "target_cols", "task")


def load_molecule_model(
    run_dir: str | Path, device: str | torch.device = "cpu", mode: str | None = None
) -> tuple[MoleculeModel | MoleculeEnsemble, dict]:
    """Rebuild a trained model from a run folder: ``(model in eval mode, checkpoint meta)``.

    Args:
        run_dir: a run folder made by :func:`train_molecule_model` (or its ``model.pt``).
        device: where to put the model (``"cpu"``, ``"cuda"``, ``"auto"``).
        mode: attention mode (``"sparse"``, ``"dense"``, ``"auto"``) instead of the one
            the model was trained with; the weights are the same in every mode.
    """
    checkpoint = load_molecule_checkpoint(run_dir)
    config = MoleculeModelConfig.from_dict(checkpoint["model_config"])
    size = int(checkpoint.get("ensemble_size", 1))
    # the random start weights are replaced below: drawing them leaves the caller's
    # generator as it was
    with torch.random.fork_rng(devices=[]):
        model = (
            MoleculeModel(config)
            if size == 1
            else MoleculeEnsemble([MoleculeModel(config) for _ in range(size)])
        )
    try:
        model.load_state_dict(checkpoint["state_dict"])
    except RuntimeError as err:  # missing or unexpected keys, or shapes that differ
        detail = " ".join(line.strip() for line in str(err).splitlines()[1:3])
        raise GraphInputError(
            f"{checkpoint_file(run_dir)}: the weights do not fit the model its config "
            f"describes: {detail}"
        ) from None
    if mode is not None:
        model.set_mode(mode)
    return model.to(training_device(device)).eval(), checkpoint


def predict_molecules(
    run_dir: str | Path,
    smiles: Iterable[str],
    batch_size: int = 256,
    device: str | torch.device = "cpu",
    return_std: bool = False,
    progress: bool = False,
    mode: str | None = None,
) -> tuple[np.ndarray, list[str]] | tuple[np.ndarray, list[str], np.ndarray]:
    """Predict every SMILES (or RDKit molecule) of a list (any iterable, in its order:
    a pandas column too); unparsable ones, and entries that are not strings (a missing
    cell read as NaN), get NaN and an error message.

    ``device`` runs the model there (``"cpu"``, ``"cuda"``, ``"auto"``).
    ``return_std`` also returns the standard deviation of an ensemble's members around
    each prediction, in the same units. It ranks molecules by how much the members
    disagree; it is not a calibrated error bar (members that start from one pretrained
    encoder disagree far less than they err; see ``ensemble_spread`` in the run's
    ``metrics.json`` for how well it ranks the errors). ``progress`` shows a progress
    bar (molecules featurized and predicted). ``mode`` (``"sparse"``, ``"dense"``,
    ``"auto"``) overrides the attention mode the model was trained with; the weights
    are the same in every mode, so only speed and memory change (a dense model may
    need ``"sparse"`` for a batch that holds a very large molecule).

    Molecules are featurized and predicted ``batch_size`` at a time, so memory does not
    grow with the number of SMILES beyond the outputs.

    Returns:
        ``(predictions [n, T] in the targets' units (or logits), errors [n])`` with
        ``errors[i] == ""`` for rows that were predicted; with ``return_std``, also
        ``std [n, T]`` (NaN for unparsable rows, and everywhere for a single model).
    """
    model, meta = load_molecule_model(run_dir, device, mode)
    preds, errors, stds = _predict_smiles(model, meta, smiles, batch_size, progress)
    return (preds, errors, stds) if return_std else (preds, errors)


@torch.no_grad()
def _predict_smiles(
    model: MoleculeModel | MoleculeEnsemble,
    meta: dict,
    smiles: list[str],
    batch_size: int = 256,
    progress: bool = False,
) -> tuple[np.ndarray, list[str], np.ndarray]:
    """:func:`predict_molecules` with the model loaded: ``(preds, errors, std)``."""
    smiles = _smiles_list(smiles)
    if batch_size < 1:
        raise GraphInputError(f"batch_size must be at least 1, got {batch_size}")
    device = _model_device(model)
    featurizer = MoleculeFeaturizer.from_dict(meta["featurizer"])
    scaler = TargetScaler(**meta["scaler"])
    num_tasks = len(meta["target_cols"])
    preds = np.full((len(smiles), num_tasks), np.nan)
    stds = np.full((len(smiles), num_tasks), np.nan)
    errors = [""] * len(smiles)
    transform = model.pe_transform()
    with tqdm(total=len(smiles), desc="predict", unit="mol", disable=not progress) as bar:
        for start in range(0, len(smiles), batch_size):
            chunk = range(start, min(start + batch_size, len(smiles)))
            graphs, rows = [], []
            for i in chunk:
                try:
                    graph = featurizer(smiles[i])
                except (ValueError, TypeError) as err:  # TypeError: not a string (NaN)
                    errors[i] = str(err)
                    continue
                graphs.append(graph if transform is None else transform(graph))
                rows.append(i)
            if graphs:
                batch = Batch.from_data_list(graphs).to(device)
                pred, std = _predict_batch(model, batch, scaler, meta["task"])
                preds[rows] = pred.cpu().numpy()
                if std is not None:
                    stds[rows] = std.cpu().numpy()
            bar.update(len(chunk))
    return preds, errors, stds


def _smiles_list(smiles: Iterable) -> list:
    """``smiles`` as a list in iteration order (a pandas Series is indexed by its labels,
    a generator not at all); a lone string is refused, not read one character at a time."""
    if isinstance(smiles, str):
        raise GraphInputError(
            f"smiles must be a list of SMILES strings, got the string {smiles[:40]!r}: "
            "put a single SMILES in a list"
        )
    return list(smiles)


def evaluate_molecules(
    run_dir: str | Path,
    smiles: Iterable[str],
    targets: np.ndarray,
    device: str | torch.device = "cpu",
    progress: bool = False,
    mode: str | None = None,
) -> dict:
    """Metrics of a trained model on labelled molecules.

    ``targets`` is ``[n, T]`` (array-like) in the order of the model's targets, NaN
    where unknown. Rows that cannot be predicted are counted (``num_failed``) and the
    first 20 listed (``failed_rows``: row index, SMILES, reason); ``num_scored`` gives,
    per target, the labelled rows scored (a metric needs two, else it is NaN).
    ``progress`` shows a progress bar while the molecules are predicted; ``mode``
    overrides the attention mode, as in :func:`predict_molecules`. A regression
    ensemble also gets ``ensemble_spread``
    (:func:`~graphattn.train.metrics.spread_metrics`).
    """
    model, meta = load_molecule_model(run_dir, device, mode)
    names = list(meta["target_cols"])
    smiles = _smiles_list(smiles)
    targets = np.asarray(targets, dtype=float)
    if targets.ndim != 2 or targets.shape != (len(smiles), len(names)):
        raise GraphInputError(
            f"targets must have shape [{len(smiles)}, {len(names)}] (the model's targets "
            f"{names}), got {list(targets.shape)}"
        )
    preds, errors, std = _predict_smiles(model, meta, smiles, progress=progress)
    ok = np.array([e == "" for e in errors], dtype=bool)
    failed = [i for i, e in enumerate(errors) if e]
    result = {
        "task": meta["task"],
        "num_rows": len(smiles),
        "num_failed": len(failed),
        "failed_rows": [
            {"row": i, "smiles": str(smiles[i]), "reason": errors[i]} for i in failed[:20]
        ],
        "num_scored": {
            name: int((ok & ~np.isnan(targets[:, t])).sum()) for t, name in enumerate(names)
        },
        "metrics": _metrics(meta["task"], targets[ok], preds[ok], names),
    }
    if reports_spread(meta):
        result["ensemble_spread"] = _per_target(
            spread_metrics, names, targets[ok], preds[ok], std[ok]
        )
    return result


def reports_spread(checkpoint: dict) -> bool:
    """Whether a checkpoint's model reports its members' spread (``std_<target>``
    columns, ``ensemble_spread`` metrics): a regression ensemble."""
    return checkpoint["task"] == "regression" and int(checkpoint.get("ensemble_size", 1)) > 1
