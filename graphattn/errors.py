"""Exceptions raised for bad input."""

from __future__ import annotations

import numbers
import operator
from pathlib import Path


class GraphInputError(ValueError):
    """Input that cannot be used as given: the message names the problem and the values."""


class NonFiniteError(GraphInputError):
    """A NaN or infinity in a tensor a layer was given: bad input, or, met inside a model
    during training, weights that diverged (see :class:`TrainingDiverged`)."""


class TrainingDiverged(GraphInputError):
    """Training met non-finite values inside the model, after a weight update, with
    finite inputs (or weights no longer finite): the weights diverged, most often from
    too high a learning rate.

    Args:
        epoch: the epoch (from 1) in which it was met.
        lr: the run's learning rate, which the message suggests lowering.
        detail: what was met (a non-finite loss, or the layer's own message).
    """

    def __init__(self, epoch: int, lr: float, detail: str) -> None:
        self.epoch, self.lr, self.detail = epoch, lr, detail
        super().__init__(
            f"training diverged in epoch {epoch} ({detail}); lower the learning rate "
            f"(lr = {lr:g}; CLI --lr)"
        )

    def __reduce__(self):  # pickled with __init__'s arguments (worker processes)
        return type(self), (self.epoch, self.lr, self.detail)


def whole_number(value: object) -> int | None:
    """``value`` as an ``int`` when it is one whole number (Python's or NumPy's integers,
    a 0-d integer array or tensor; not a ``bool`` of any kind, not ``2.0``, not
    ``[5]``), else ``None``: the one rule of :func:`check_count`, :func:`check_seed`
    and the trainers' settings."""
    if isinstance(value, bool) or getattr(value, "ndim", 0) != 0:  # [5]: not one number
        return None
    if str(getattr(value, "dtype", "")) in ("bool", "torch.bool"):  # np.bool_, tensor(True)
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def check_count(name: str, value: object, least: int = 1) -> int:
    """``value`` as an ``int`` of at least ``least`` (NumPy integers included, ``bool``
    not), else a :class:`GraphInputError` naming ``name`` and the value."""
    count = whole_number(value)
    if count is None or count < least:
        raise GraphInputError(f"{name} must be an integer >= {least}, got {value!r}")
    return count


def check_seed(seed: object) -> int:
    """``seed`` as an ``int`` from 0 to 2**64 - 1 (the 64 bits a torch generator takes:
    a larger seed would be folded onto a smaller one, and two runs that name different
    seeds would be the same), else a :class:`GraphInputError` naming it."""
    value = whole_number(seed)
    if value is None or not 0 <= value < 2**64:
        raise GraphInputError(f"seed must be a whole number from 0 to 2**64 - 1, got {seed!r}")
    return value


def is_real(value: object) -> bool:
    """Whether ``value`` is a real number (NumPy's included; ``bool`` is not one here)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def not_utf8_error(path: str | Path, err: UnicodeDecodeError) -> GraphInputError:
    """A :class:`GraphInputError` naming the first line of ``path`` that is not UTF-8.

    ``err`` only knows its position within one buffered chunk, so the file is read
    again, line by line, to find the line.
    """
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as bad:
                byte = line[bad.start : bad.start + 1]
                return GraphInputError(
                    f"{path}: line {number} is not UTF-8 text (byte {byte!r} at column "
                    f"{bad.start + 1}); save the file as UTF-8"
                )
    return GraphInputError(f"{path}: not UTF-8 text ({err.reason}); save the file as UTF-8")
