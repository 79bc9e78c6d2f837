"""Metrics for regression, binary classification and node classification.

Missing targets (NaN) are left out of every metric; multi-task metrics are the mean
over tasks of the per-task values, over the tasks where the metric is defined (two
labelled molecules; for ROC-AUC, both classes; for R², not all values equal).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr
from sklearn.metrics import accuracy_score, f1_score, roc_auc_score

__all__ = ["classification_metrics", "node_metrics", "regression_metrics", "spread_metrics"]


def _per_task(y_true: np.ndarray, y_pred: np.ndarray, fn) -> float:
    """Mean over tasks of ``fn(true, pred)`` on each task's labelled rows; ``fn`` returns
    ``None`` where its metric is undefined for a task, which leaves that task out."""
    y_true, y_pred = np.asarray(y_true, float), np.asarray(y_pred, float)
    if y_true.ndim == 1:
        y_true, y_pred = y_true[:, None], y_pred[:, None]
    values = []
    for t in range(y_true.shape[1]):
        keep = ~np.isnan(y_true[:, t])
        if keep.sum() >= 2:
            values.append(fn(y_true[keep, t], y_pred[keep, t]))
    # An undefined task (one class for ROC-AUC, a constant target for R²) must not make
    # the mean NaN, or swamp it: a NaN validation metric stops model selection. NaNs
    # from NaN predictions stay visible.
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else float("nan")


def regression_metrics(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    """``{"rmse", "mae", "r2"}`` of ``[n, T]`` arrays (NaN targets ignored; R² is
    undefined for a target whose labelled values are all equal)."""

    def r2(t, p):
        if np.ptp(t) == 0:  # all equal: (t - mean)² is 0, or rounding noise (0.1 * 7)
            return None
        return 1.0 - ((t - p) ** 2).sum() / ((t - t.mean()) ** 2).sum()

    return {
        "rmse": _per_task(y_true, y_pred, lambda t, p: np.sqrt(np.mean((t - p) ** 2))),
        "mae": _per_task(y_true, y_pred, lambda t, p: np.mean(np.abs(t - p))),
        "r2": _per_task(y_true, y_pred, r2),
    }


def spread_metrics(y_true: np.ndarray, y_pred: np.ndarray, std: np.ndarray) -> dict[str, float]:
    """How an ensemble's spread relates to its errors, for ``[n, T]`` arrays (NaN targets
    ignored; mean over tasks).

    Returns:
        ``mean_std``, the members' mean standard deviation, and
        ``spearman_std_abs_error``, the rank correlation of each molecule's standard
        deviation with its absolute error: near 1 when the molecules the members disagree
        on are those predicted worst, near 0 when the spread says nothing about the
        error (NaN with fewer than 3 molecules or a constant spread).
    """
    y_true, y_pred, std = (np.asarray(a, float) for a in (y_true, y_pred, std))
    if y_true.ndim == 1:
        y_true, y_pred, std = y_true[:, None], y_pred[:, None], std[:, None]
    means, correlations = [], []
    for t in range(y_true.shape[1]):
        keep = ~np.isnan(y_true[:, t])
        if not keep.any():
            continue
        spread, error = std[keep, t], np.abs(y_true[keep, t] - y_pred[keep, t])
        means.append(spread.mean())
        ranked = keep.sum() >= 3 and np.ptp(spread) > 0 and np.ptp(error) > 0
        correlations.append(spearmanr(spread, error).statistic if ranked else np.nan)
    correlations = [c for c in correlations if not np.isnan(c)]
    return {
        "mean_std": float(np.mean(means)) if means else float("nan"),
        "spearman_std_abs_error": float(np.mean(correlations)) if correlations else float("nan"),
    }


def classification_metrics(y_true: np.ndarray, logits: np.ndarray) -> dict[str, float]:
    """``{"roc_auc", "accuracy"}`` for binary (per-task) labels and logits."""

    def auc(t, p):
        if len(np.unique(t)) != 2:
            return None
        return roc_auc_score(t, p) if np.isfinite(p).all() else float("nan")

    return {
        "roc_auc": _per_task(y_true, logits, auc),
        "accuracy": _per_task(y_true, logits, lambda t, p: np.mean((p > 0) == (t > 0.5))),
    }


def node_metrics(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    """``{"accuracy", "macro_f1", "correct", "total"}`` of class indices."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    if y_true.size == 0:
        return {"accuracy": float("nan"), "macro_f1": float("nan"), "correct": 0, "total": 0}
    return {
        "accuracy": float(accuracy_score(y_true, y_pred)),
        "macro_f1": float(f1_score(y_true, y_pred, average="macro")),
        "correct": int((y_true == y_pred).sum()),
        "total": int(y_true.size),
    }
