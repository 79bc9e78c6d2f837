"""Transfer learning: start a molecule model from another run's graph encoder.

The encoder is everything before the task head: atom and bond encoders, positional
encoder, transformer layers, final norm and readout. It carries over when the two
runs featurize atoms and bonds the same way; the head (and the descriptor scaler,
which belongs to the new training set) always starts fresh.

Typical use: train on a large set with cheap or computed labels, then fine-tune on a
small one (``graphattn train --dataset freesolv --init-from runs/pretrained``). Encoders
that ship with graphattn (:mod:`graphattn.pretrained`) are named instead of a path:
the FreeSolv default starts from ``xtb-hydration-57k``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from graphattn.errors import GraphInputError
from graphattn.pretrained import PRETRAINED_ENCODERS, pretrained_encoder_path
from graphattn.train.checkpoint import load_checkpoint

__all__ = ["ENCODER_FIELDS", "PretrainedEncoder", "encoder_changes", "load_pretrained_encoder"]

log = logging.getLogger(__name__)

# MoleculeModelConfig fields that shape the encoder's weights; a fine-tuned model
# inherits them from the pretrained run unless they are set explicitly.
ENCODER_FIELDS = (
    "hidden",
    "layers",
    "heads",
    "ffn_ratio",
    "norm",
    "layer_type",
    "pe",
    "pe_dim",
    "attention",
)
_FRESH = ("head.", "mol_mean", "mol_std")


@dataclass
class PretrainedEncoder:
    """The encoder weights and architecture of a trained molecule run.

    Attributes:
        source: the run folder or checkpoint file they came from.
        state_dict: encoder parameters and buffers (no head, no descriptor scaler).
        architecture: the run's values of :data:`ENCODER_FIELDS`, and its ``readout``
            when that has weights (attention pooling).
        featurizer: the run's featurizer settings (``MoleculeFeaturizer.to_dict``).
    """

    source: str
    state_dict: dict[str, torch.Tensor]
    architecture: dict
    featurizer: dict

    def check_featurizer(self, featurizer: dict) -> None:
        """Raise :class:`GraphInputError` unless atoms and bonds are featurized alike.

        Whole-molecule inputs (descriptors, xTB energies) may differ: only the head
        reads them.
        """
        ignore = {"descriptors", "xtb"}
        differ = sorted(
            key
            for key in set(self.featurizer) | set(featurizer)
            if key not in ignore and self.featurizer.get(key) != featurizer.get(key)
        )
        if differ:
            details = "; ".join(
                f"{key}: {self.featurizer.get(key)!r} there, {featurizer.get(key)!r} here"
                for key in differ
            )
            raise GraphInputError(
                f"cannot initialise from {self.source}: its featurizer differs ({details})"
            )

    def load_into(self, model: nn.Module) -> None:
        """Copy the encoder into ``model``; raise naming any missing or misshapen tensor."""
        target = {k: v for k, v in model.state_dict().items() if not k.startswith(_FRESH)}
        missing = sorted(set(target) - set(self.state_dict))
        unexpected = sorted(set(self.state_dict) - set(target))
        misshapen = sorted(
            f"{key} {list(self.state_dict[key].shape)} there, {list(value.shape)} here"
            for key, value in target.items()
            if key in self.state_dict and self.state_dict[key].shape != value.shape
        )
        problems = [
            f"{label}: {', '.join(keys[:5])}{' ...' if len(keys) > 5 else ''}"
            for label, keys in (
                ("missing", missing),
                ("unexpected", unexpected),
                ("shape", misshapen),
            )
            if keys
        ]
        if problems:
            raise GraphInputError(
                f"cannot initialise from {self.source}: the encoders differ ({'; '.join(problems)})"
            )
        model.load_state_dict(self.state_dict, strict=False)
        log.info("initialised %d encoder tensors from %s", len(self.state_dict), self.source)


def encoder_changes(encoder: PretrainedEncoder, model: dict) -> list[str]:
    """The fields of ``model`` (``MoleculeModelConfig`` overrides) that the encoder's
    weights do not fit: encoder fields set to other values, a readout with attention
    pooling (it has weights) where the encoder has none, or the other way round."""
    changed = [
        key
        for key in ENCODER_FIELDS
        if key in model and model[key] != encoder.architecture.get(key)
    ]
    has_gate = any(key.startswith("readout.") for key in encoder.state_dict)
    if "readout" in model and ("attention" in model["readout"]) != has_gate:
        changed.append("readout")
    return changed


def load_pretrained_encoder(run_dir_or_file: str | Path) -> PretrainedEncoder:
    """Read the encoder of a molecule run (``graphattn train`` output); of an ensemble,
    its first model's (with a warning: the members are alike, averaging their weights
    would not be). A string that is a shipped encoder's name (``"xtb-hydration"``) means
    that encoder; a folder of the same name is ``"./xtb-hydration"`` or a ``Path``.

    Raises:
        FileNotFoundError: no checkpoint there, nor a shipped encoder of that name.
        GraphInputError: not a molecule run; a damaged shipped encoder.
    """
    path = run_dir_or_file
    if isinstance(path, str) and path in PRETRAINED_ENCODERS:
        path = pretrained_encoder_path(path)
    elif not Path(path).exists():
        raise FileNotFoundError(
            f"no run folder or checkpoint at {path}, and no shipped encoder of that name "
            f"(shipped: {', '.join(PRETRAINED_ENCODERS)})"
        )
    checkpoint = load_checkpoint(path)
    source = str(run_dir_or_file)
    if checkpoint.get("kind") != "molecule":
        raise GraphInputError(
            f"cannot initialise from {source}: it holds a {checkpoint.get('kind')!r} model, "
            "not a molecule model"
        )
    state = checkpoint["state_dict"]
    size = int(checkpoint.get("ensemble_size", 1))
    if size != 1:
        log.warning("%s is an ensemble of %d models: initialising from its first", source, size)
        first = "members.0."
        state = {k[len(first) :]: v for k, v in state.items() if k.startswith(first)}
    state = {k: v for k, v in state.items() if not k.startswith(_FRESH)}
    config = checkpoint["model_config"]
    architecture = {key: config[key] for key in ENCODER_FIELDS if key in config}
    if any(key.startswith("readout.") for key in state):
        # attention pooling has weights, so it is part of the encoder: inherited too
        # (the weightless mean/sum/max poolings stay free to change)
        architecture["readout"] = config["readout"]
    return PretrainedEncoder(source, state, architecture, checkpoint["featurizer"])
