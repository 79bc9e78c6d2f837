"""Throughput of graphattn's molecule featurizer against ``torch_geometric.utils.from_smiles``.

Featurizes every ESOL SMILES with both, ``--repeats`` times each (alternating, after
one warm-up pass each), and prints JSON with the median molecules per second.

Usage::

    python benchmarks/featurizer_throughput.py [--data-dir DIR] [--repeats 5]

The ESOL file is found by :func:`graphattn.datasets.files.resolve_file` (``--data-dir``,
``$GRAPHATTN_DATA``, the cache, then a download).

Note the outputs differ: graphattn builds float one-hot features and a canonical
SMILES; ``from_smiles`` builds integer-coded features and keeps the input string.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import rdkit
from _common import dataset_smiles, positive_int, run_main
from torch_geometric.utils import from_smiles

from graphattn.bench.machine import describe_machine
from graphattn.featurize.molecule import MoleculeFeaturizer


def seconds_per_pass(featurize: Callable[[str], object], smiles: list[str]) -> float:
    """Wall-clock seconds to featurize every SMILES once."""
    start = time.perf_counter()
    for text in smiles:
        featurize(text)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None, help="folder holding esol/")
    parser.add_argument(
        "--repeats", type=positive_int, default=5, help="timed passes per featurizer"
    )
    args = parser.parse_args()

    machine = describe_machine()  # before timing: the load average at the start
    smiles = dataset_smiles("esol", args.data_dir)
    candidates = {"graphattn": MoleculeFeaturizer(), "pyg_from_smiles": from_smiles}
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for featurize in candidates.values():  # warm-up: imports, caches
        seconds_per_pass(featurize, smiles)
    for _ in range(args.repeats):
        for name, featurize in candidates.items():
            times[name].append(seconds_per_pass(featurize, smiles))

    rate = {name: len(smiles) / statistics.median(t) for name, t in times.items()}
    print(
        json.dumps(
            {
                "graphattn_mols_per_s": round(rate["graphattn"], 1),
                "pyg_from_smiles_mols_per_s": round(rate["pyg_from_smiles"], 1),
                "ratio": round(rate["graphattn"] / rate["pyg_from_smiles"], 3),
                "n_molecules": len(smiles),
                "repeats": args.repeats,
                "machine": {**machine, "rdkit": rdkit.__version__},
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(run_main(main))
