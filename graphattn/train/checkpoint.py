"""Run-folder checkpoints: weights plus everything needed to rebuild and use a model.

``model.pt`` holds only tensors and plain Python values (dicts, lists, strings,
numbers), so it loads with ``torch.load(path, weights_only=True)``: no pickled code.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from graphattn.errors import GraphInputError

__all__ = ["CHECKPOINT_NAME", "checkpoint_file", "load_checkpoint", "save_checkpoint"]

CHECKPOINT_NAME = "model.pt"
FORMAT_VERSION = 1


def save_checkpoint(run_dir: str | Path, model: nn.Module, kind: str, **meta: Any) -> Path:
    """Write ``run_dir/model.pt``.

    Args:
        run_dir: the run folder.
        model: its ``state_dict`` is saved.
        kind: ``"molecule"`` or ``"node"``; tells loaders which model to rebuild.
        **meta: plain values: model config, featurizer settings, target scaler, ...
    """
    path = Path(run_dir) / CHECKPOINT_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    # CPU copies of the weights: the file loads the same wherever it was trained.
    state = {name: value.detach().cpu() for name, value in model.state_dict().items()}
    payload = {"format_version": FORMAT_VERSION, "kind": kind, "state_dict": state}
    payload.update(_plain(meta))
    torch.save(payload, path)
    return path


def _plain(value: Any) -> Any:
    """``value`` with NumPy scalars (a config's ``np.int64(2)``) as Python numbers and
    strings: ``weights_only`` loading refuses NumPy objects, so a file holding one could
    not be read back."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_plain(item) for item in value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def checkpoint_file(run_dir_or_file: str | Path) -> Path:
    """The checkpoint that a run folder or file names: ``RUN_DIR/model.pt``, or the file."""
    path = Path(run_dir_or_file)
    return path / CHECKPOINT_NAME if path.is_dir() else path


def load_checkpoint(run_dir_or_file: str | Path) -> dict[str, Any]:
    """Read a checkpoint safely (``weights_only=True``) from a run folder or file."""
    path = checkpoint_file(run_dir_or_file)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}: pass a run folder made by train")
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive; a CSV is not one
        raise GraphInputError(
            f"{path}: not a readable torch.save archive (truncated or damaged, or another "
            "kind of file); pass a run folder made by train or its model.pt"
        )
    _check_archive(path)
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated, corrupt, or not a weights-only torch file
        raise GraphInputError(
            f"{path}: not a readable graphattn checkpoint ({type(err).__name__}: "
            f"{str(err).splitlines()[0] if str(err) else 'no details'})"
        ) from err
    _check_payload(path, payload)
    return payload


def _check_archive(path: Path) -> None:
    """Check the archive's stored checksums: ``torch.load`` does not, so a damaged
    weight tensor would load and predict other numbers without a word."""
    try:
        with zipfile.ZipFile(path) as archive:
            damaged = archive.testzip()
    except Exception as err:  # BadZipFile, zlib.error, an unsupported method, ...
        raise GraphInputError(
            f"{path}: not a readable torch.save archive ({type(err).__name__}: {err}); pass "
            "a run folder made by train or its model.pt"
        ) from None
    if damaged is not None:
        raise GraphInputError(
            f"{path}: damaged checkpoint, record {damaged} fails its checksum; copy the "
            "run's model.pt again or retrain"
        )


def _check_payload(path: Path, payload: Any) -> None:
    if not isinstance(payload, dict) or "state_dict" not in payload or "kind" not in payload:
        raise GraphInputError(f"{path}: not a graphattn checkpoint (no 'kind'/'state_dict')")
    version = payload.get("format_version")
    if version != FORMAT_VERSION:
        raise GraphInputError(
            f"{path}: checkpoint format {version!r}, this graphattn reads format {FORMAT_VERSION}"
        )
