"""Prototype (not part of graphattn): the FreeSolv defaults (shipped xtb-hydration-57k
encoder, dropout 0, ensemble of 3) with the data set's featurizer changed by
``--featurizer JSON`` (``MoleculeFeaturizer`` fields). The atom and bond features must
stay those of the encoder; whole-molecule inputs (``descriptors``, ``xtb``) may change,
since the head starts fresh. Run from the repository root:

    python benchmarks/results/targets/freesolv/xtb_hydration_57k/featurizer_variants/\\
featurizer_variant.py --data-dir ../shared/datasets --featurizer '{"descriptors": false}' \\
        --out no_descriptors.json
"""

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import torch

from graphattn.datasets.molecules import dataset_featurizer, load_molecule_dataset

BENCHMARKS = next(p for p in Path(__file__).resolve().parents if p.name == "benchmarks")
sys.path.insert(0, str(BENCHMARKS))
from _common import fine_tuning_runs  # noqa: E402  (benchmarks/_common.py)

parser = argparse.ArgumentParser()
parser.add_argument("--data-dir", required=True)
parser.add_argument("--featurizer", required=True, help="MoleculeFeaturizer fields (JSON)")
parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
parser.add_argument("--out", required=True)
args = parser.parse_args()
torch.set_num_threads(1)

changes = json.loads(args.featurizer)
featurizer = replace(dataset_featurizer("freesolv"), **changes)
dataset = load_molecule_dataset("freesolv", data_dir=args.data_dir, featurizer=featurizer)
runs = fine_tuning_runs(dataset, "freesolv", args.seeds)
with open(args.out, "w") as handle:
    json.dump({"featurizer": changes, "runs": runs}, handle, indent=1)
