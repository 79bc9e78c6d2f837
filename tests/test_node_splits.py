"""Node masks: disjoint, labelled nodes only, stratified, reproducible."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from graphattn.errors import GraphInputError
from graphattn.splits.nodes import fixed_train_masks, node_split_masks


def labels(counts: list[int], unlabelled: int = 0) -> torch.Tensor:
    parts = [torch.full((n,), c) for c, n in enumerate(counts)]
    y = torch.cat([*parts, torch.full((unlabelled,), -1)])
    return y[torch.randperm(y.numel(), generator=torch.Generator().manual_seed(5))]


def assert_valid(y, masks):
    train, val, test = masks
    assert all(m.dtype == torch.bool and m.shape == y.shape for m in masks)
    total = train.int() + val.int() + test.int()
    assert int(total.max()) <= 1, "masks overlap"
    assert torch.equal(total.bool(), y >= 0), "masks must cover exactly the labelled nodes"


def test_fraction_split_is_disjoint_stratified_and_labelled_only():
    y = labels([50, 30, 20], unlabelled=40)
    masks = node_split_masks(y, fractions=(0.6, 0.2, 0.2), seed=1)
    assert_valid(y, masks)
    train, val, test = masks
    assert [int((train & (y == c)).sum()) for c in range(3)] == [30, 18, 12]
    assert [int((val & (y == c)).sum()) for c in range(3)] == [10, 6, 4]
    assert [int((test & (y == c)).sum()) for c in range(3)] == [10, 6, 4]


def test_uneven_fractions_give_each_part_its_own_size_per_class():
    y = labels([50, 30, 20])
    train, val, test = node_split_masks(y, fractions=(0.5, 0.1, 0.4), seed=0)
    per_class = [[int((mask & (y == c)).sum()) for c in range(3)] for mask in (train, val, test)]
    assert per_class == [[25, 15, 10], [5, 3, 2], [20, 12, 8]]


def test_labels_per_class_gives_exactly_k_per_class():
    y = labels([40, 25, 10], unlabelled=15)
    train, val, test = node_split_masks(y, fractions=(0.0, 0.25, 0.75), labels_per_class=5)
    assert_valid(y, (train, val, test))
    assert [int((train & (y == c)).sum()) for c in range(3)] == [5, 5, 5]
    # remaining 35 / 20 / 5 split 1 : 3 between val and test, per class
    assert [int((val & (y == c)).sum()) for c in range(3)] == [9, 5, 1]
    assert int(test.sum()) == 60 - 15


def test_same_seed_same_masks_other_seed_other_masks():
    y = labels([30, 30])
    first = node_split_masks(y, seed=3)
    assert all(torch.equal(a, b) for a, b in zip(first, node_split_masks(y, seed=3), strict=True))
    assert not torch.equal(first[0], node_split_masks(y, seed=4)[0])


@pytest.mark.parametrize(
    ("fractions", "message"),
    [
        ((0.5, 0.2, 0.2), "sum to 1"),
        ((0.8, 0.4, -0.2), "non-negative"),
        ((0.5, 0.5), "three"),
        ((0.0, 0.5, 0.5), "train fraction must be positive"),
    ],
)
def test_invalid_fractions(fractions, message):
    with pytest.raises(GraphInputError, match=message):
        node_split_masks(labels([10, 10]), fractions=fractions)


def test_class_with_too_few_labels_is_named():
    with pytest.raises(GraphInputError, match=r"class 1 has 3 labelled node\(s\), fewer than"):
        node_split_masks(labels([10, 3, 10]), labels_per_class=4)
    with pytest.raises(GraphInputError, match="class 1 has 0"):
        node_split_masks(torch.tensor([0, 0, 2, 2, -1]), labels_per_class=1)
    with pytest.raises(GraphInputError, match=r"class 1 \('dog'\) has 3 labelled node"):
        node_split_masks(labels([10, 3]), labels_per_class=4, class_names=["cat", "dog"])


def test_no_labelled_nodes():
    with pytest.raises(GraphInputError, match="no labelled nodes"):
        node_split_masks(torch.full((5,), -1))
    with pytest.raises(GraphInputError, match="1-D integer"):
        node_split_masks(torch.zeros(5))


def test_fixed_train_masks():
    y = torch.tensor([0, 1, -1, 0, 1, 1])
    train, val, test = fixed_train_masks(y, [0, 4])
    assert train.tolist() == [True, False, False, False, True, False]
    assert not val.any()
    assert test.tolist() == [False, True, False, True, False, True]
    with pytest.raises(GraphInputError, match="train node 2 is unlabelled"):
        fixed_train_masks(y, [0, 2])
    with pytest.raises(GraphInputError, match="train node 9 is out of range"):
        fixed_train_masks(y, [9])


@settings(max_examples=25, deadline=None)
@given(
    counts=st.lists(st.integers(3, 30), min_size=1, max_size=4),
    unlabelled=st.integers(0, 10),
    k=st.none() | st.integers(1, 3),
    seed=st.integers(0, 10),
)
def test_masks_never_overlap_and_cover_labelled_nodes(counts, unlabelled, k, seed):
    y = labels(counts, unlabelled)
    masks = node_split_masks(y, fractions=(0.5, 0.25, 0.25), labels_per_class=k, seed=seed)
    assert_valid(y, masks)
    if k is not None:
        assert [int((masks[0] & (y == c)).sum()) for c in range(len(counts))] == [k] * len(counts)


def test_every_class_gets_a_training_node_even_when_rounding_gives_none(caplog):
    y = torch.arange(10)  # ten classes of one node: round(0.4 * 1) = 0
    with caplog.at_level("WARNING"):  # all ten train: val and test were empty silently
        train, val, test = node_split_masks(y, (0.4, 0.3, 0.3), seed=0)
    assert train.all() and not val.any() and not test.any()
    assert "of 10 labelled node(s) leave the validation part without nodes (no early" in caplog.text
    assert "leave the test part without nodes (no test metrics)" in caplog.text
    pairs = torch.tensor([0, 0, 1, 1, 2, 2])  # round(0.2 * 2) = 0
    train, _, _ = node_split_masks(pairs, (0.2, 0.4, 0.4), seed=0)
    assert sorted(pairs[train].tolist()) == [0, 1, 2]


def test_a_part_given_fraction_0_gets_no_node():
    # round() halves to even: round(2.5) + round(4.5) = 6 of 9 nodes, and the rest had
    # gone to the test part that (0.5, 0.5, 0) asks to leave out
    y = torch.tensor([0] * 5 + [1] * 9)
    train, val, test = node_split_masks(y, fractions=(0.5, 0.5, 0.0), seed=0)
    assert not test.any() and int(train.sum()) + int(val.sum()) == 14
    # 7 and 7 of 14: round(2.5) + round(4.5) = 6 training nodes, and one moved over
    assert [int((train & (y == c)).sum()) for c in (0, 1)] == [3, 4]
    train, val, test = node_split_masks(y, fractions=(0.5, 0.0, 0.5), seed=0)
    assert not val.any() and int(train.sum()) + int(test.sum()) == 14
    train, val, test = node_split_masks(y, fractions=(1.0, 0.0, 0.0), seed=0)
    assert train.sum() == 14 and not (val | test).any()


def test_node_seeds_beyond_64_bits_are_refused_not_folded():
    # seed 2**64 + 5 gave seed 5's split, and metrics.json recorded a different seed
    from graphattn.train.loop import torch_seed

    assert torch_seed(2**64 + 5) == 5 and torch_seed(7) == 7  # member seeds still wrap
    assert torch_seed(2**64) == 0 and torch_seed(2**64 - 1) == 2**64 - 1  # the edge
    y = torch.tensor([0, 1] * 10)
    for seed in (2**64 + 5, 2**64, -1, 1.5, True):
        with pytest.raises(
            GraphInputError, match=r"seed must be a whole number from 0 to 2\*\*64 - 1"
        ):
            node_split_masks(y, (0.5, 0.25, 0.25), seed=seed)
    assert node_split_masks(y, (0.5, 0.25, 0.25), seed=2**64 - 1)[0].sum() == 10


@pytest.mark.parametrize(
    ("counts", "fractions", "per_class", "expected"),
    [
        ([5] * 20, (0.8, 0.1, 0.1), None, [80, 10, 10]),  # was 80, 0, 20
        ([3] * 20, (0.6, 0.2, 0.2), None, [36, 12, 12]),  # was 40, 20, 0
        ([5] * 20, (0.0, 0.5, 0.5), 2, [40, 30, 30]),  # was 40, 40, 20
        ([17, 17], (0.6, 0.2, 0.2), None, [20, 7, 7]),  # karate: was 20, 6, 8
        ([3] * 20, (0.1, 0.45, 0.45), None, [20, 20, 20]),  # one train node per class kept
    ],
)
def test_part_sizes_follow_the_fractions_over_all_classes(counts, fractions, per_class, expected):
    # each class was rounded alone, with the same error in every class: whole parts
    # came out empty or doubled
    y = torch.cat([torch.full((n,), c) for c, n in enumerate(counts)])
    masks = node_split_masks(y, fractions, labels_per_class=per_class, seed=0)
    assert [int(m.sum()) for m in masks] == expected
    for c, n in enumerate(counts):  # each class within one node of its own share
        in_class = [int((m & (y == c)).sum()) for m in masks]
        assert sum(in_class) == n and in_class[0] >= 1
        if per_class is None:
            assert all(
                abs(got - f * n) < 1 + 1e-9
                for got, f in zip(in_class[1:], fractions[1:], strict=True)
            )
        else:
            assert in_class[0] == per_class


def test_a_forced_training_node_takes_nothing_from_the_other_classes():
    # ten classes of one node must each train their node; the parts' totals then came
    # out of the large class, which trained 12 of 100 nodes at a 0.2 train fraction
    y = torch.cat([torch.zeros(100, dtype=torch.long), torch.arange(1, 11)])
    masks = node_split_masks(y, (0.2, 0.4, 0.4), seed=0)
    assert [int((m & (y == 0)).sum()) for m in masks] == [20, 40, 40]
    assert [int(m.sum()) for m in masks] == [30, 40, 40]
    for seed in (np.int64(5), torch.tensor(5)):  # one rule for whole numbers
        assert all(
            torch.equal(a, b)
            for a, b in zip(
                node_split_masks(y, seed=seed), node_split_masks(y, seed=5), strict=True
            )
        )


def test_many_small_classes_are_balanced_with_every_class_near_its_share():
    counts = [3] * 4000 + [7] * 1000
    y = torch.cat([torch.full((n,), c) for c, n in enumerate(counts)])
    masks = node_split_masks(y, (0.8, 0.1, 0.1), seed=0)
    assert [int(m.sum()) for m in masks] == [15200, 1900, 1900]
    per_class = torch.stack([torch.bincount(y[m], minlength=len(counts)) for m in masks], 1)
    shares = torch.tensor(counts).unsqueeze(1) * torch.tensor([0.8, 0.1, 0.1])
    assert float((per_class - shares).abs().max()) < 1


@pytest.mark.parametrize("fractions", [(1 - 9e-7, 0.0, 0.0), (1 + 9e-7, 0.0, 0.0)])
def test_fractions_a_hair_off_one_give_a_part_of_fraction_0_no_node(fractions):
    # the leftover of f_train * n went to test: 599999/0/1, or a crash at 1 + 9e-7
    y = torch.arange(1000).repeat_interleave(600)
    assert [int(m.sum()) for m in node_split_masks(y, fractions)] == [600000, 0, 0]


def test_totals_reached_through_the_third_part_where_no_class_can_move_directly():
    # classes of 2, 2 and 3 at 0.5/0.25/0.25 stayed 4/1/2, though 3/2/2 keeps every
    # class within one node of its share (about 0.45% of random class mixes missed)
    y = torch.tensor([0, 0, 1, 1, 2, 2, 2])
    assert [int(m.sum()) for m in node_split_masks(y, (0.5, 0.25, 0.25))] == [3, 2, 2]


def test_a_small_class_with_a_forced_training_node_shares_the_rest_by_the_ratio():
    # class 0 (5 nodes at 0.02/0.73/0.25) got 1/4/0: 1.02 from its share of 1/2.98/1.02
    y = torch.tensor([0] * 5 + [1] * 65)
    masks = node_split_masks(y, (0.02, 0.73, 0.25), seed=0)
    assert [int((m & (y == 0)).sum()) for m in masks] == [1, 3, 1]


@pytest.mark.parametrize(
    ("counts", "fractions", "expected"),
    [
        ([2, 3, 2], (0.5, 0.25, 0.25), [(1, 1, 0), (1, 1, 1), (1, 0, 1)]),
        ([2, 2, 3], (0.5, 0.25, 0.25), [(1, 1, 0), (1, 0, 1), (1, 1, 1)]),  # through the third
        (
            [2, 2, 2, 2, 3],
            (0.5, 0.25, 0.25),
            [(1, 1, 0), (1, 1, 0), (1, 0, 1), (1, 0, 1), (1, 1, 1)],
        ),
        ([2, 4], (0.6, 0.2, 0.2), [(2, 0, 0), (2, 1, 1)]),
        ([2, 2], (0.8, 0.1, 0.1), [(1, 1, 0), (2, 0, 0)]),
        ([3, 3, 3, 3], (0.8, 0.1, 0.1), [(3, 0, 0), (3, 0, 0), (2, 1, 0), (2, 0, 1)]),
    ],
)
def test_which_class_gives_a_node_follows_the_documented_order(counts, fractions, expected):
    # furthest off first, the lowest class on ties; a class never goes a node past its
    # share nor gives up its training node (found by a mutation round)
    y = torch.cat([torch.full((n,), c) for c, n in enumerate(counts)])
    masks = node_split_masks(y, fractions, seed=0)
    got = [tuple(int((m & (y == c)).sum()) for m in masks) for c in range(len(counts))]
    assert got == expected


def test_a_train_fraction_a_hair_above_one_with_a_tiny_val_fraction_keeps_every_node():
    y = torch.arange(1000).repeat_interleave(600)  # a part of -1 nodes crashed here
    assert [int(m.sum()) for m in node_split_masks(y, (1 + 9e-7, 1e-9, 0.0))] == [600000, 0, 0]


def test_the_facebook_sized_default_split_is_each_classs_rounding():
    # where the classes' roundings already add up to the parts' totals, nothing moves:
    # the stored facebook-pages figures were made with these masks
    counts = [6495, 6880, 5768, 3327]
    y = torch.cat([torch.full((n,), c) for c, n in enumerate(counts)])
    masks = node_split_masks(y, seed=3)
    for c, n in enumerate(counts):
        assert [int((m & (y == c)).sum()) for m in masks] == [
            round(0.6 * n),
            round(0.2 * n),
            n - round(0.6 * n) - round(0.2 * n),
        ]


def test_split_arguments_that_are_not_numbers_are_named():
    from graphattn.splits.molecules import random_split, scaffold_split, split_sizes

    with pytest.raises(GraphInputError, match="fractions must be 3 numbers"):
        split_sizes(10, ("a", 0.5, 0.5))  # was float()'s bare ValueError
    with pytest.raises(GraphInputError, match="fractions must be three non-negative numbers"):
        node_split_masks(torch.tensor([0, 1] * 5), ("a", 0.5, 0.5))
    with pytest.raises(GraphInputError, match=r"seed must be a whole number"):
        random_split(10, seed=-1)  # was NumPy's "expected non-negative integer"
    with pytest.raises(GraphInputError, match=r"seed must be a whole number"):
        scaffold_split(["CCO", "c1ccccc1"], seed=2**64)
    with pytest.raises(GraphInputError, match="scaffold_split: molecule 1"):
        scaffold_split(["CCO", None, "CCN"])  # was a TypeError
    with pytest.raises(GraphInputError, match="labels_per_class must be an integer >= 1, got 2.0"):
        node_split_masks(torch.tensor([0, 1] * 5), labels_per_class=2.0)
    with pytest.raises(GraphInputError, match=r"n must be a whole number from 0 to 2\*\*50"):
        split_sizes(2**52)  # float products no longer add up to n there
    assert sum(split_sizes(2**50)) == 2**50  # the bound itself is in range
    # a float or bool n was NumPy's AxisError (10.0), a slice TypeError (10.5) or one item
    for n in (10.0, 10.5, True):
        with pytest.raises(GraphInputError, match=rf"n must be a whole number .*, got {n!r}"):
            random_split(n)
    for n in (np.int64(10), np.array(10), torch.tensor(10)):  # AxisError for the last two
        assert {k: v.tolist() for k, v in random_split(n).items()} == {
            k: v.tolist() for k, v in random_split(10).items()
        }


@pytest.mark.parametrize(
    "value", [True, np.True_, torch.tensor(True), torch.tensor([5]), np.array([5]), 2.0, "5"]
)
def test_a_seed_must_be_one_whole_number(value):
    # a bool tensor trained as seed 1 and epochs 1; [5] passed as 5
    with pytest.raises(GraphInputError, match="seed must be a whole number"):
        node_split_masks(torch.tensor([0, 1] * 5), seed=value)


def test_numpy_and_tensor_seeds_train_as_their_int():
    # check_seed took them, then random.seed raised a bare TypeError
    import networkx as nx

    from graphattn.featurize.graph import from_networkx
    from graphattn.train.nodes import NodeTrainConfig, train_node_model

    data = from_networkx(nx.karate_club_graph(), label_attr="club")
    masks = node_split_masks(data.y, (0.5, 0.25, 0.25), seed=0)
    runs = [
        train_node_model(data, masks, NodeTrainConfig(epochs=2, seed=seed), progress=False)
        for seed in (5, np.int64(5), torch.tensor(5))
    ]
    assert runs[0]["val"] == runs[1]["val"] == runs[2]["val"]
