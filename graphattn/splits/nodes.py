"""Train / validation / test node masks for node classification.

Only labelled nodes (``y >= 0``) are ever placed in a mask; unlabelled nodes
(``y == -1``) stay in none, and the three masks never overlap. Splits are
stratified by class and reproducible from ``seed``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from graphattn.errors import GraphInputError

__all__ = ["fixed_train_masks", "node_split_masks"]

Masks = tuple[Tensor, Tensor, Tensor]


def node_split_masks(
    y: Tensor,
    fractions: Sequence[float] = (0.6, 0.2, 0.2),
    labels_per_class: int | None = None,
    seed: int = 0,
    class_names: Sequence | None = None,
) -> Masks:
    """Random, class-stratified train / val / test masks over the labelled nodes.

    Without ``labels_per_class``, each class's labelled nodes are shuffled and cut
    into ``round(f_train * n_c)`` training nodes (at least one when ``f_train > 0``: a
    class without training nodes could never be learned), ``round(f_val * n_c)``
    validation nodes and the rest for testing (with ``f_test = 0``, the rest goes to
    validation, or to training when ``f_val = 0`` too). With ``labels_per_class = k``, each class
    gives exactly k random training nodes; all remaining labelled nodes are split between
    validation and test in the ratio ``f_val : f_test`` (per class, rounded), and
    ``f_train`` is ignored.

    Args:
        y: ``[N]`` integer class per node, -1 for unlabelled.
        fractions: ``(f_train, f_val, f_test)``, non-negative, summing to 1.
        labels_per_class: k training nodes per class (the semi-supervised setting).
        seed: seed of the shuffles.
        class_names: the name of each class, for messages (``data.label_names``).

    Returns:
        ``(train_mask, val_mask, test_mask)``, each ``[N]`` bool.

    Raises:
        GraphInputError: invalid ``fractions``, no labelled node, or (with
            ``labels_per_class``) a class with fewer than k labelled nodes.
    """
    f_train, f_val, f_test = _check_fractions(fractions, labels_per_class)
    y = _check_labels(y)
    generator = torch.Generator().manual_seed(seed % 2**64 if seed >= 2**64 else seed)  # 64 bits
    masks = tuple(torch.zeros_like(y, dtype=torch.bool) for _ in range(3))
    for c in range(int(y.max()) + 1):
        members = (y == c).nonzero().view(-1)
        members = members[torch.randperm(members.numel(), generator=generator)]
        name = f"class {c}" if class_names is None else f"class {c} ({class_names[c]!r})"
        sizes = _class_sizes(members.numel(), name, f_train, f_val, f_test, labels_per_class)
        for mask, part in zip(masks, members.split(sizes), strict=True):
            mask[part] = True
    return masks


def fixed_train_masks(y: Tensor, train_nodes: Sequence[int]) -> Masks:
    """Masks for a fixed training set: the given nodes; no validation; test = the rest.

    Args:
        y: ``[N]`` integer class per node, -1 for unlabelled.
        train_nodes: node numbers (0..N-1) to train on; each must be labelled.

    Returns:
        ``(train_mask, val_mask, test_mask)``, each ``[N]`` bool; ``val_mask`` is
        empty and ``test_mask`` holds every other labelled node.

    Raises:
        GraphInputError: no labelled node, or a train node out of range or unlabelled.
    """
    y = _check_labels(y)
    train = torch.zeros_like(y, dtype=torch.bool)
    for node in train_nodes:
        if not 0 <= int(node) < y.numel():
            raise GraphInputError(f"train node {node} is out of range for {y.numel()} nodes")
        if y[node] < 0:
            raise GraphInputError(f"train node {node} is unlabelled (y = {int(y[node])})")
        train[node] = True
    test = (y >= 0) & ~train
    return train, torch.zeros_like(train), test


def _check_fractions(
    fractions: Sequence[float], labels_per_class: int | None
) -> tuple[float, float, float]:
    values = tuple(float(f) for f in fractions)
    if len(values) != 3 or any(not math.isfinite(f) or f < 0 for f in values):
        raise GraphInputError(
            f"fractions must be three non-negative numbers (train, val, test), got {fractions}"
        )
    if abs(sum(values) - 1.0) > 1e-6:
        raise GraphInputError(f"fractions must sum to 1, got {fractions} (sum {sum(values)})")
    if labels_per_class is None and values[0] == 0:
        raise GraphInputError(f"the train fraction must be positive, got {fractions}")
    if labels_per_class is not None and labels_per_class < 1:
        raise GraphInputError(f"labels_per_class must be >= 1, got {labels_per_class}")
    if labels_per_class is not None and values[1] + values[2] == 0:
        raise GraphInputError(
            f"with labels_per_class the val and test fractions set the split of the "
            f"remaining nodes; they cannot both be 0 (got {fractions})"
        )
    return values


def _check_labels(y: Tensor) -> Tensor:
    if not isinstance(y, Tensor) or y.dim() != 1 or y.is_floating_point() or y.is_complex():
        raise GraphInputError(f"y must be a 1-D integer tensor, got {_describe(y)}")
    if y.numel() == 0 or int(y.max()) < 0:
        raise GraphInputError(f"no labelled nodes (y >= 0) among {y.numel()} nodes")
    if int(y.min()) < -1:
        raise GraphInputError(f"y holds {int(y.min())}; use -1 for unlabelled nodes")
    return y.long().cpu()


def _describe(y) -> str:
    if isinstance(y, Tensor):
        return f"{y.dtype} tensor of shape {list(y.shape)}"
    return type(y).__name__


def _class_sizes(
    n: int, name: str, f_train: float, f_val: float, f_test: float, per_class: int | None
) -> list[int]:
    """How many of a class's n labelled nodes go to train, val and test."""
    if per_class is None:  # every class with nodes gets at least one training node
        train = max(round(f_train * n), 1 if f_train > 0 and n > 0 else 0)
        if f_test == 0:  # no test part asked for: what rounding leaves goes to val
            val = n - train if f_val > 0 else 0
            return [n - val, val, 0]
        val = min(round(f_val * n), n - train)
        return [train, val, n - train - val]
    if n < per_class:
        raise GraphInputError(
            f"{name} has {n} labelled node(s), fewer than labels_per_class={per_class}"
        )
    rest = n - per_class
    val = round(f_val / (f_val + f_test) * rest)
    return [per_class, val, rest - val]
