"""Train / validation / test node masks for node classification.

Only labelled nodes (``y >= 0``) are ever placed in a mask; unlabelled nodes
(``y == -1``) stay in none, and the three masks never overlap. Splits are
stratified by class and reproducible from ``seed``.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Sequence

import torch
from torch import Tensor

from graphattn.errors import GraphInputError, check_count, check_seed
from graphattn.splits.molecules import largest_remainder

__all__ = ["fixed_train_masks", "node_split_masks"]

Masks = tuple[Tensor, Tensor, Tensor]

log = logging.getLogger(__name__)


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

    Rounding each class alone can miss the parts' sizes far: 20 classes of 5 nodes at
    0.8 / 0.1 / 0.1 would give 0 validation nodes (``round(0.5) = 0`` twenty times).
    So nodes are then moved between parts, in the classes whose rounding was furthest
    off, until each part holds its share of all labelled nodes (largest remainder, as
    :func:`~graphattn.splits.molecules.split_sizes`) or no class can give one without
    going a node past its own share: every class stays within one node of its share,
    a forced training node counted in it (so a class of 1 node takes none from the
    other classes' training parts).

    Args:
        y: ``[N]`` integer class per node, -1 for unlabelled.
        fractions: ``(f_train, f_val, f_test)``, non-negative, summing to 1.
        labels_per_class: k training nodes per class (the semi-supervised setting).
        seed: seed of the shuffles.
        class_names: the name of each class, for messages (``data.label_names``).

    Returns:
        ``(train_mask, val_mask, test_mask)``, each ``[N]`` bool.

    Raises:
        GraphInputError: invalid ``fractions`` or ``seed``, no labelled node, or (with
            ``labels_per_class``) a class with fewer than k labelled nodes. A part that
            a positive fraction asks for but too few labelled nodes leave empty is
            warned about.
    """
    f_train, f_val, f_test = _check_fractions(fractions, labels_per_class)
    y = _check_labels(y)
    generator = torch.Generator().manual_seed(check_seed(seed))
    # each class's nodes in ascending order, from one stable sort (not one pass over y
    # per class), then shuffled class by class
    counts = torch.bincount(y[y >= 0], minlength=int(y.max()) + 1).tolist()
    by_class = torch.argsort(y, stable=True)[int((y < 0).sum()) :].split(counts)
    members = [nodes[torch.randperm(nodes.numel(), generator=generator)] for nodes in by_class]
    for c, n in enumerate(counts):
        if labels_per_class is not None and n < labels_per_class:
            name = f"class {c}" if class_names is None else f"class {c} ({class_names[c]!r})"
            raise GraphInputError(
                f"{name} has {n} labelled node(s), fewer than labels_per_class={labels_per_class}"
            )
    shares = [_class_share(n, (f_train, f_val, f_test), labels_per_class) for n in counts]
    sizes = [_rounded(n, share) for n, share in zip(counts, shares, strict=True)]
    _balance(sizes, shares)
    _warn_empty_parts(sizes, (f_train, f_val, f_test), sum(counts))
    masks = tuple(torch.zeros_like(y, dtype=torch.bool) for _ in range(3))
    for nodes, class_sizes in zip(members, sizes, strict=True):
        for mask, part in zip(masks, nodes.split(class_sizes), strict=True):
            mask[part] = True
    return masks


def _class_share(
    n: int, fractions: tuple[float, float, float], per_class: int | None
) -> list[float]:
    """A class's exact (unrounded) number of nodes per part, for its ``n`` labelled
    nodes. A class's forced training node (its share below 1) counts as its training
    share, the rest of the class then shared between validation and test by their
    ratio; with ``f_test = 0`` the rest goes to validation (or, with ``f_val = 0`` too, to
    training), whatever rounding the fractions carry."""
    f_train, f_val, f_test = fractions
    if f_val + f_test == 0:
        return [float(n), 0.0, 0.0]
    if per_class is not None:
        train = float(per_class)
    elif f_train > 0 and n > 0 and f_train * n < 1:
        train = 1.0
    elif f_test > 0:  # as the fractions say (the usual case)
        return [f_train * n, f_val * n, f_test * n]
    else:
        train = min(f_train * n, float(n))
    to_val = f_val / (f_val + f_test)
    rest = n - train
    return [train, to_val * rest, rest - to_val * rest]


def _rounded(n: int, share: list[float]) -> list[int]:
    """A class's whole part sizes, each part's share rounded (test takes what is left;
    with a test share of 0, validation does)."""
    train = round(share[0])
    if share[2] == 0:
        return [train, n - train, 0]
    val = min(round(share[1]), n - train)
    return [train, val, n - train - val]


def _balance(sizes: list[list[int]], shares: list[list[float]]) -> None:
    """Move nodes between the parts of classes, in place, towards the parts' totals (the
    classes' summed shares, by :func:`~graphattn.splits.molecules.largest_remainder`).

    A node moves from a part over its total to one under it, only in a class that has
    more than its share in the first and less in the second (so each class stays within
    one node of its share), the classes furthest off first (lowest class on ties). Where
    no class can move one directly, one class moves a node to the third part and
    another class moves one from there. Where neither is left, the totals stay as near
    as they came; every move brings two of them a node nearer, so it ends."""
    exact = [sum(share[p] for share in shares) for p in range(3)]
    wanted = largest_remainder(exact, sum(map(sum, sizes)))
    totals = [sum(row[p] for row in sizes) for p in range(3)]

    def movers(source: int, to: int) -> list[int]:
        """Classes that can give a node from ``source`` to ``to``, furthest off first."""
        eligible = [
            c
            for c, (row, share) in enumerate(zip(sizes, shares, strict=True))
            if row[source] > share[source] and row[to] < share[to]
        ]
        off = {
            c: (shares[c][to] - sizes[c][to]) + (sizes[c][source] - shares[c][source])
            for c in eligible
        }
        return sorted(eligible, key=lambda c: (-off[c], c))

    def move(c: int, source: int, to: int) -> None:
        sizes[c][source] -= 1
        sizes[c][to] += 1
        totals[source] -= 1
        totals[to] += 1

    while True:
        moved = False
        for to, source in itertools.permutations(range(3), 2):
            need = min(wanted[to] - totals[to], totals[source] - wanted[source])
            if need > 0:
                for c in movers(source, to)[:need]:
                    move(c, source, to)
                    moved = True
        if moved:
            continue
        for to, source in itertools.permutations(range(3), 2):
            if min(wanted[to] - totals[to], totals[source] - wanted[source]) > 0:
                middle = 3 - to - source
                first, second = movers(source, middle), movers(middle, to)
                if first and second:  # two classes: one is short of its middle share
                    move(first[0], source, middle)
                    move(second[0], middle, to)
                    moved = True
                    break
        if not moved:
            return


def _warn_empty_parts(
    sizes: list[list[int]], fractions: tuple[float, float, float], labelled: int
) -> None:
    """Warn for a part that a positive fraction asked for and too few labelled nodes
    left empty (after each class's training node): training goes on without it."""
    for p, (name, without) in enumerate(PART_LOSSES):
        if fractions[p] > 0 and sum(row[p] for row in sizes) == 0:
            log.warning(
                "fractions %s of %d labelled node(s) leave the %s part without nodes (%s): "
                "label more nodes, or give it a larger fraction",
                fractions,
                labelled,
                name,
                without,
            )


PART_LOSSES = (
    ("train", "nothing to train on"),
    ("validation", "no early stopping"),
    ("test", "no test metrics"),
)


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
    try:
        values = tuple(float(f) for f in fractions)
    except (TypeError, ValueError):  # "a", None, or not a sequence at all
        values = ()
    if len(values) != 3 or any(not math.isfinite(f) or f < 0 for f in values):
        raise GraphInputError(
            f"fractions must be three non-negative numbers (train, val, test), got {fractions}"
        )
    if abs(sum(values) - 1.0) > 1e-6:
        raise GraphInputError(f"fractions must sum to 1, got {fractions} (sum {sum(values)})")
    if labels_per_class is None and values[0] == 0:
        raise GraphInputError(f"the train fraction must be positive, got {fractions}")
    if labels_per_class is not None:
        check_count("labels_per_class", labels_per_class)
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
