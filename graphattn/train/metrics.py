"""Metrics for regression, binary classification and node classification.

Missing targets (NaN) are left out of every metric; multi-task metrics are the mean
over tasks of the per-task values.
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import accuracy_score, f1_score, roc_auc_score

__all__ = ["classification_metrics", "node_metrics", "regression_metrics"]


def _per_task(y_true: np.ndarray, y_pred: np.ndarray, fn) -> float:
    y_true, y_pred = np.asarray(y_true, float), np.asarray(y_pred, float)
    if y_true.ndim == 1:
        y_true, y_pred = y_true[:, None], y_pred[:, None]
    values = []
    for t in range(y_true.shape[1]):
        keep = ~np.isnan(y_true[:, t])
        if keep.sum() >= 2:
            values.append(fn(y_true[keep, t], y_pred[keep, t]))
    return float(np.mean(values)) if values else float("nan")


def regression_metrics(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    """``{"rmse", "mae", "r2"}`` of ``[n, T]`` arrays (NaN targets ignored)."""

    def r2(t, p):
        return 1.0 - ((t - p) ** 2).sum() / max(((t - t.mean()) ** 2).sum(), 1e-12)

    return {
        "rmse": _per_task(y_true, y_pred, lambda t, p: np.sqrt(np.mean((t - p) ** 2))),
        "mae": _per_task(y_true, y_pred, lambda t, p: np.mean(np.abs(t - p))),
        "r2": _per_task(y_true, y_pred, r2),
    }


def classification_metrics(y_true: np.ndarray, logits: np.ndarray) -> dict[str, float]:
    """``{"roc_auc", "accuracy"}`` for binary (per-task) labels and logits."""

    def auc(t, p):
        return roc_auc_score(t, p) if len(np.unique(t)) == 2 else np.nan

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
