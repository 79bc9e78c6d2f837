"""How well an ensemble's spread points at its errors, on the test sets of run folders.

Reads the ``predictions.csv`` and ``metrics.json`` of run folders made by
``graphattn train`` with an ensemble (the ESOL and FreeSolv defaults), and prints JSON
with, per run and target: the test RMSE, the members' mean standard deviation, the rank
correlation of each molecule's standard deviation with its absolute error, where the
worst-predicted molecule ranks by standard deviation, and how many of the tenth with the
largest errors are also among the tenth with the largest spread.

Usage::

    for s in 0 1 2; do
        graphattn train --dataset freesolv --data-dir ../shared/datasets --seed $s \\
            --out runs/freesolv_$s
    done
    python benchmarks/ensemble_spread.py runs/freesolv_* [--out DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np

from graphattn.train.metrics import spread_metrics


def target_summary(rows: list[dict], target: str) -> dict:
    """The spread against the errors of one target over the labelled test rows."""
    rows = [r for r in rows if r[target] not in ("", "nan")]
    y = np.array([float(r[target]) for r in rows])
    pred = np.array([float(r[f"pred_{target}"]) for r in rows])
    std = np.array([float(r[f"std_{target}"]) for r in rows])
    error = np.abs(pred - y)
    worst = int(np.argmax(error))
    tenth = max(1, len(y) // 10)
    largest_errors = set(np.argsort(-error)[:tenth].tolist())
    largest_spread = set(np.argsort(-std)[:tenth].tolist())
    return {
        "num_molecules": len(y),
        "rmse": float(np.sqrt(np.mean(error**2))),
        **spread_metrics(y, pred, std),
        "worst": {
            "smiles": rows[worst]["smiles"],
            "measured": float(y[worst]),
            "predicted": float(pred[worst]),
            "std": float(std[worst]),
            "std_rank": int((std > std[worst]).sum()) + 1,
        },
        "top_tenth_overlap": f"{len(largest_errors & largest_spread)}/{tenth}",
    }


def run_summary(run_dir: Path) -> dict:
    metrics = json.loads((run_dir / "metrics.json").read_text())
    if "ensemble_spread" not in metrics:
        raise SystemExit(f"{run_dir}: not a regression ensemble (no ensemble_spread)")
    with open(run_dir / "predictions.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return {
        "run": str(run_dir),
        "dataset": metrics["dataset"],
        "seed": metrics["seed"],
        "ensemble_size": metrics["ensemble_size"],
        "targets": {t: target_summary(rows, t) for t in metrics["target_cols"]},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders of graphattn train")
    parser.add_argument("--out", type=Path, help="also write ensemble_spread.json here")
    args = parser.parse_args(argv)
    text = json.dumps({"runs": [run_summary(r) for r in args.runs]}, indent=2)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "ensemble_spread.json").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
