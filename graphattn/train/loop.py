"""Pieces shared by the molecule and node trainers: seeding, schedule, early stopping."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import json
import logging
import math
import operator
import os
import random
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

import numpy as np
import torch
from torch import nn

from graphattn.errors import (
    GraphInputError,
    NonFiniteError,
    TrainingDiverged,
    check_seed,
    whole_number,
)
from graphattn.ops.graph import check_finite
from graphattn.train.checkpoint import CHECKPOINT_NAME

__all__ = [
    "RUN_FILES",
    "EarlyStopping",
    "check_config_json",
    "check_run_folder",
    "check_training_settings",
    "check_whole_numbers",
    "global_rng_restored",
    "keeps_global_rng",
    "seed_everything",
    "start_run_folder",
    "to_json",
    "training_device",
    "warmup_cosine",
    "write_json",
]

log = logging.getLogger(__name__)

# Every file a trainer writes into a run folder, molecule and node runs together.
RUN_FILES = (
    CHECKPOINT_NAME,
    "metrics.json",
    "history.json",
    "predictions.csv",
    "split.json",
    "skipped.csv",
    "learning_curve.png",
    "confusion_matrix.png",
    "graph.png",
)


def check_run_folder(run_dir: str | Path | None) -> None:
    """Raise :class:`GraphInputError` if ``run_dir``, or the folder it would be created
    in, is an existing file, or no file can be created there (a read-only file system,
    no permission).

    The trainers call it before training, since the run folder is written only at the end.
    """
    if run_dir is None:
        return
    blocker = file_in_the_way(Path(run_dir))
    if blocker == Path(run_dir):
        raise GraphInputError(
            f"run folder {run_dir} is a file; name a folder (it is created if missing)"
        )
    if blocker is not None:
        raise GraphInputError(f"run folder {run_dir} cannot be created: {blocker} is a file")
    problem = unwritable_folder(Path(run_dir))
    if problem is not None:
        raise GraphInputError(f"run folder {run_dir} cannot be written ({problem})")


def unwritable_folder(path: Path) -> str | None:
    """Why no file can be created in ``path``, or in its nearest existing parent where it
    would be created (``"folder: reason"``), else ``None``. A file is made and removed
    there, which also finds read-only mounts (the permission bits do not show them, and
    root passes those)."""
    folder = next((c for c in (path, *path.parents) if c.is_dir()), None)
    if folder is None:
        return None
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        return f"{folder}: {error.strerror or error}"
    return None


def file_in_the_way(path: Path) -> Path | None:
    """The nearest of ``path`` and its parents that exists, if it is not a folder: a file
    that stops ``path`` from being created as a folder, or inside one."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return None if candidate.is_dir() else candidate
    return None


def start_run_folder(run_dir: str | Path) -> Path:
    """Create ``run_dir`` and delete the :data:`RUN_FILES` an earlier run left there.

    Not every run writes every file (no learning curve without validation nodes, no
    graph drawing above 3,000 nodes, no ``split.json`` from a node run), so a file left
    by an earlier run would pass for this run's. Other files in the folder are kept.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    stale = [run_dir / name for name in RUN_FILES if (run_dir / name).is_file()]
    for path in stale:
        path.unlink()
    if stale:
        log.info("%s: replaced the %d files of an earlier run", run_dir, len(stale))
    return run_dir


def check_training_settings(
    epochs: int, lr: float, weight_decay: float, patience: int | None, seed: int = 0
) -> None:
    """Raise :class:`GraphInputError` naming a training setting outside its range.

    Both trainers call it first, so that ``--epochs 0`` or ``--lr -1`` fail with the
    setting's name instead of an empty run or an optimizer's traceback. A count given
    as a float (``epochs=2.0``, as a YAML or JSON config may hold it) is refused here
    too: it used to fail deep inside Python, NumPy or torch.
    """
    check_whole_numbers(epochs=epochs, patience=patience)
    if epochs < 1:
        raise GraphInputError(f"epochs must be at least 1, got {epochs}")
    if not (lr >= 0 and math.isfinite(lr)):  # 0 keeps the weights (tests use it)
        raise GraphInputError(f"lr must be a finite number, 0 or more, got {lr}")
    if not (weight_decay >= 0 and math.isfinite(weight_decay)):
        raise GraphInputError(
            f"weight_decay must be a finite number, 0 or more, got {weight_decay}"
        )
    check_seed(seed)
    if patience is not None and patience < 1:
        raise GraphInputError(f"patience must be at least 1 epoch, got {patience}")


def check_whole_numbers(**settings: object) -> None:
    """Raise :class:`GraphInputError` naming the first setting that is not a whole number
    (:func:`~graphattn.errors.whole_number`; ``None`` passes, for optional settings)."""
    for name, value in settings.items():
        if value is not None and whole_number(value) is None:
            raise GraphInputError(f"{name} must be a whole number (an int), got {value!r}")


def training_device(device: str | torch.device) -> torch.device:
    """The device a trainer runs on: ``"auto"`` is CUDA when torch sees a GPU, else CPU.

    Raises:
        GraphInputError: for a device name torch does not know, or a CUDA device this
            torch build or machine does not have.
    """
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise GraphInputError(
            f"device must be 'cpu', 'cuda', 'cuda:N' or 'auto', got {device!r}"
        ) from err
    if resolved.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise GraphInputError(
                f"device {device!r} asked for, but torch {torch.__version__} sees no CUDA "
                "device here; use 'cpu' or 'auto'"
            )
        if resolved.index is not None and resolved.index >= count:
            raise GraphInputError(f"device {device!r} asked for, but only {count} CUDA device(s)")
    elif resolved.type != "cpu":
        raise GraphInputError(f"device must be 'cpu', 'cuda', 'cuda:N' or 'auto', got {device!r}")
    return resolved


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch so a run is repeatable on one machine (``seed``: a
    whole number; a NumPy integer or 0-d tensor is read as its ``int``)."""
    seed = operator.index(seed)  # random.seed takes no NumPy integer or tensor
    random.seed(seed)
    np.random.seed(seed % 2**32)  # NumPy's legacy seed has 32 bits; large seeds wrap
    torch.manual_seed(torch_seed(seed))


@contextlib.contextmanager
def global_rng_restored() -> Iterator[None]:
    """Seed and draw freely inside: the global generators of Python, NumPy and torch (the
    CPU's, and those of CUDA devices already in use) are put back as they were on exit."""
    python_state, numpy_state = random.getstate(), np.random.get_state()
    # forking CUDA's generators would initialise CUDA in a process that has not used it
    cuda_in_use = torch.cuda.is_initialized()
    cuda = list(range(torch.cuda.device_count())) if cuda_in_use else []
    try:
        with torch.random.fork_rng(devices=cuda):
            yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)
        if not cuda_in_use:
            # torch.manual_seed inside also seeded CUDA (queued until CUDA starts): queue
            # the seed the caller's torch.manual_seed had given it instead
            torch.cuda.manual_seed_all(torch.initial_seed())


_Train = TypeVar("_Train", bound=Callable)


def keeps_global_rng(train: _Train) -> _Train:
    """``train`` run in :func:`global_rng_restored`: it seeds the global generators for
    its own run, and the caller's random draws (a notebook's) go on as if it had not."""

    @functools.wraps(train)
    def run(*args, **kwargs):
        with global_rng_restored():
            return train(*args, **kwargs)

    return run  # type: ignore[return-value]


def torch_seed(seed: int) -> int:
    """``seed`` wrapped into the 64 bits a torch generator takes (smaller seeds unchanged)."""
    seed = operator.index(seed)
    return seed % 2**64 if seed >= 2**64 else seed


def warmup_cosine(
    optimizer: torch.optim.Optimizer,
    warmup_steps: int,
    total_steps: int,
    final_fraction: float = 0.01,
) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up to the base learning rate over ``warmup_steps``, then cosine decay
    to ``final_fraction`` at ``total_steps``. A warm-up as long as the run or longer, which
    would never reach the rate nor decay, is cut to half the run (to none for one step)."""
    if warmup_steps >= total_steps:
        warmup_steps = total_steps // 2

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return final_fraction + (1 - final_fraction) * 0.5 * (1 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


class EarlyStopping:
    """Track the best validation value, keep its weights, and say when to stop.

    Args:
        patience: epochs without improvement before stopping (``None``: never stop).
        higher_is_better: maximise (accuracy, AUC) rather than minimise (RMSE).
        min_delta: smallest change that counts as an improvement.
    """

    def __init__(self, patience: int | None, higher_is_better: bool, min_delta: float = 0.0):
        self.patience = patience
        self.sign = 1.0 if higher_is_better else -1.0
        self.min_delta = min_delta
        self.best_value = -math.inf
        self.best_epoch = -1
        self.best_state: dict | None = None
        self.bad_epochs = 0

    def step(self, value: float, epoch: int, model: nn.Module) -> bool:
        """Record an epoch; returns True when this epoch is the new best."""
        score = self.sign * value
        if math.isfinite(score) and score > self.best_value + self.min_delta:
            self.best_value, self.best_epoch, self.bad_epochs = score, epoch, 0
            self.best_state = copy.deepcopy(model.state_dict())
            return True
        self.bad_epochs += 1
        return False

    @property
    def should_stop(self) -> bool:
        return self.patience is not None and self.bad_epochs >= self.patience

    def restore(self, model: nn.Module) -> None:
        """Load the best weights back into ``model`` (no-op if none were recorded)."""
        if self.best_state is not None:
            model.load_state_dict(self.best_state)


@contextlib.contextmanager
def divergence_named(
    epoch: int, steps: int, lr: float, model: nn.Module, inputs: Iterable[torch.Tensor]
) -> Iterator[None]:
    """Within this block, part of epoch ``epoch`` after ``steps`` weight updates, a
    non-finite value met inside ``model`` is raised as :class:`TrainingDiverged` when
    its ``inputs`` (the float tensors given to the model in the block; read only then,
    so an iterable that builds them is fine) cannot be its cause: they are all finite,
    or a weight is no longer finite. Otherwise it stays the layer's input error."""
    try:
        yield
    except NonFiniteError as error:
        if steps and (_all_finite(inputs) or not _all_finite(model.parameters())):
            raise TrainingDiverged(epoch, lr, str(error)) from error
        raise


def check_finite_loss(value: float, epoch: int, lr: float, inputs: dict[str, torch.Tensor]) -> None:
    """For a non-finite training loss, raise the input error naming a non-finite entry of
    ``inputs`` (the float tensors given to the model, by name: some, such as whole-
    molecule descriptors, reach the loss unchecked), else :class:`TrainingDiverged`."""
    if not math.isfinite(value):
        check_finite(**inputs)
        raise TrainingDiverged(epoch, lr, f"the training loss is {value}")


def _all_finite(tensors: Iterable[torch.Tensor]) -> bool:
    return all(bool(t.detach().isfinite().all()) for t in tensors)


def to_json(payload: dict) -> str:
    """``payload`` as indented, standard JSON: NaN and infinities become null."""

    def clean(value):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]
        if isinstance(value, np.generic):
            return clean(value.item())
        if isinstance(value, np.ndarray | torch.Tensor):
            return clean(value.tolist())
        if isinstance(value, os.PathLike):
            return os.fspath(value)
        if isinstance(value, torch.device | torch.dtype):
            return str(value)
        return value

    return json.dumps(clean(payload), indent=2)


def check_config_json(config) -> None:
    """Raise :class:`GraphInputError` naming a training config field that
    ``metrics.json`` cannot hold, before any training (and before an earlier run's
    files are replaced)."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        try:
            to_json({field.name: value})
        except (TypeError, ValueError) as err:
            raise GraphInputError(
                f"{type(config).__name__}.{field.name} = {value!r} cannot be written to "
                f"metrics.json ({err}); pass a str, number, list or dict"
            ) from None


def write_json(path: str | Path, payload: dict) -> Path:
    """Write ``payload`` as indented JSON (NaN becomes null)."""
    Path(path).write_text(to_json(payload) + "\n", encoding="utf-8")
    return Path(path)
