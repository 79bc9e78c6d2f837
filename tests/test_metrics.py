"""Metrics against values worked out by hand, with missing labels and undefined tasks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from graphattn.train.metrics import classification_metrics, node_metrics, regression_metrics

NAN = float("nan")


def test_regression_metrics_by_hand_per_task_then_averaged():
    y = np.array([[1.0, 10.0], [2.0, NAN], [3.0, 30.0], [NAN, 20.0]])
    p = np.array([[1.5, 12.0], [2.0, 99.0], [2.0, 30.0], [99.0, 17.0]])
    # task 0: errors 0.5, 0, -1 ; task 1: errors 2, 0, -3 (rows with NaN targets left out)
    rmse = (math.sqrt((0.25 + 0 + 1) / 3) + math.sqrt((4 + 0 + 9) / 3)) / 2
    mae = (1.5 / 3 + 5 / 3) / 2
    r2_0 = 1 - 1.25 / 2.0  # sum of squares about the mean 2: 1 + 0 + 1
    r2_1 = 1 - 13 / 200.0  # about the mean 20: 100 + 100 + 0
    got = regression_metrics(y, p)
    assert got["rmse"] == pytest.approx(rmse)
    assert got["mae"] == pytest.approx(mae)
    assert got["r2"] == pytest.approx((r2_0 + r2_1) / 2)


def test_a_task_with_one_class_is_left_out_of_the_mean_roc_auc():
    y = np.array([[0, 0], [1, 0], [0, 0], [1, 0.0]])
    logits = np.array([[-1, 0.2], [1, 0.1], [-2, 0.3], [2, 0.4]])
    got = classification_metrics(y, logits)
    assert got["roc_auc"] == 1.0  # task 1 has no positive: its AUC is undefined
    assert got["accuracy"] == pytest.approx((1.0 + 0.0) / 2)  # task 1: every logit > 0
    only_one_class = classification_metrics(y[:, 1:], logits[:, 1:])
    assert math.isnan(only_one_class["roc_auc"])


def test_tasks_with_fewer_than_two_labels_are_undefined():
    y = np.array([[1.0, NAN], [NAN, NAN]])
    got = regression_metrics(y, np.zeros((2, 2)))
    assert all(math.isnan(v) for v in got.values())


def test_node_metrics_by_hand():
    got = node_metrics(np.array([0, 0, 1, 2]), np.array([0, 1, 1, 2]))
    assert got["accuracy"] == 0.75 and got["correct"] == 3 and got["total"] == 4
    # per-class F1: class 0: p=1, r=0.5 -> 2/3; class 1: p=0.5, r=1 -> 2/3; class 2: 1
    assert got["macro_f1"] == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)


def test_single_task_metrics_by_hand():
    got = regression_metrics(np.array([1.0, 2, 3, 4]), np.array([2.0, 2, 2, 6]))
    # errors 1, 0, -1, 2: RMSE sqrt(6/4), MAE 1; about the mean 2.5 the squares sum to 5
    assert got["rmse"] == pytest.approx(math.sqrt(1.5))
    assert got["mae"] == pytest.approx(1.0)
    assert got["r2"] == pytest.approx(1 - 6 / 5)
    # logits, not probabilities: 0.5 is a positive prediction; the ranking is perfect
    got = classification_metrics(np.array([0.0, 1, 0, 1]), np.array([0.5, 2.0, -1.0, 1.0]))
    assert got["roc_auc"] == pytest.approx(1.0) and got["accuracy"] == pytest.approx(0.75)
    # macro F1 averages the classes alike: class 0 scores 6/7, class 1 (never predicted) 0
    got = node_metrics(np.array([0, 0, 0, 1]), np.array([0, 0, 0, 0]))
    assert got["macro_f1"] == pytest.approx((6 / 7 + 0) / 2)


def test_nan_predictions_stay_visible_in_the_mean():
    y = np.array([[1.0, 2.0], [2.0, 3.0], [3.0, 4.0]])
    p = np.array([[1.0, NAN], [2.0, NAN], [3.0, NAN]])  # a diverged second head
    assert math.isnan(regression_metrics(y, p)["rmse"])
    assert math.isnan(regression_metrics(y, p)["r2"])


@pytest.mark.parametrize("bad", [NAN, np.inf])
def test_roc_auc_of_logits_that_are_not_finite_is_nan_not_an_error(bad):
    y = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    p = np.array([[-1.0, bad], [1.0, 0.5], [-2.0, 0.1], [2.0, -3.0]])  # a diverged head
    got = classification_metrics(y, p)
    assert math.isnan(got["roc_auc"])
    assert classification_metrics(y[:, :1], p[:, :1])["roc_auc"] == 1.0


def test_r2_of_a_constant_target_is_undefined_and_left_out_of_the_mean():
    # a constant column has no variance to explain: its R² divided by a floor of 1e-12
    # gave -1e10, which swamped the other targets' mean
    y = np.array([[0.0, 1.0], [2.0, 1.0], [4.0, 1.0]])
    p = np.array([[0.1, 1.1], [2.0, 0.9], [3.9, 1.0]])
    assert regression_metrics(y, p)["r2"] == pytest.approx(1 - 0.02 / 8)
    assert math.isnan(regression_metrics(y[:, 1], p[:, 1])["r2"])
    # a constant that binary floats cannot hold exactly: its mean rounds, and the spread
    # about it is 1e-33, not 0 (R² was -6.5e32)
    tenths = np.full(7, 0.1)
    assert math.isnan(regression_metrics(tenths, tenths + 0.01)["r2"])
    assert regression_metrics(y[:, 1], p[:, 1])["rmse"] == pytest.approx(math.sqrt(0.02 / 3))
