"""Range checks shared by the model configurations."""

from __future__ import annotations

import numbers

from graphattn.errors import GraphInputError, is_real

__all__ = ["check_architecture", "check_attention_options"]


def check_architecture(hidden: int, layers: int, heads: int, **dropouts: float) -> None:
    """Raise :class:`GraphInputError` naming an architecture setting outside its range.

    Args:
        hidden: width C; at least 1 and a multiple of ``heads``.
        layers: attention layers; 0 is allowed (a baseline without attention, which
            sees each node's own features only).
        heads: attention heads, at least 1.
        **dropouts: dropout rates by name, each in ``[0, 1)``.
    """
    for name, value in (("hidden", hidden), ("layers", layers), ("heads", heads)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise GraphInputError(f"{name} must be an integer, got {value!r}")
    if heads < 1:
        raise GraphInputError(f"heads must be at least 1, got {heads}")
    if hidden < 1 or hidden % heads:
        raise GraphInputError(
            f"hidden must be a positive multiple of heads ({heads}), got {hidden}"
        )
    if layers < 0:
        raise GraphInputError(f"layers must be 0 or more, got {layers}")
    for name, rate in dropouts.items():
        if not is_real(rate) or not 0 <= rate < 1:
            raise GraphInputError(f"{name} must be at least 0 and below 1, got {rate}")


def check_attention_options(options: dict, config_name: str, owned: tuple[str, ...]) -> None:
    """Raise :class:`GraphInputError` for an ``attention`` option that the model
    configuration sets itself: passed twice, it was a ``TypeError`` deep in the layer.

    Args:
        options: the configuration's ``attention`` dict (extra layer arguments).
        config_name: the configuration's class name, for the message.
        owned: the layer arguments the configuration sets from its own fields.
    """
    taken = [key for key in owned if key in options]
    if taken:
        raise GraphInputError(
            f"attention={options!r} sets {taken}, which {config_name} sets itself from "
            f"its fields; use those (attention_dropout is the attention weights' dropout)"
        )
