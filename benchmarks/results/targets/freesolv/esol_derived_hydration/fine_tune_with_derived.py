"""Prototype (not part of graphattn): the FreeSolv defaults (shipped xtb-hydration-57k
encoder, dropout 0, ensemble of 3) with ESOL-derived hydration free energies
(``derived_labels.py``) added to each seed's training part.

Only molecules that are not in FreeSolv (by InChIKey connectivity, and again by
canonical SMILES after featurizing) are added, so no validation or test molecule of any
seed is trained on. The target and descriptor standardisations stay those of the
FreeSolv training part. Validation, early stopping and test are FreeSolv's, as before.

    python benchmarks/results/targets/freesolv/esol_derived_hydration/fine_tune_with_derived.py \
        --data-dir ../shared/datasets --labels /tmp/esol_derived_hydration.csv \
        --subset all --seeds 0 1 2 3 4 5 --out runs.json
"""

import argparse
import csv
import json
import sys
from pathlib import Path

import torch

import graphattn.train.molecules as tm
from graphattn.datasets.molecules import load_molecule_dataset

BENCHMARKS = next(p for p in Path(__file__).resolve().parents if p.name == "benchmarks")
sys.path.insert(0, str(BENCHMARKS))
from _common import fine_tuning_runs  # noqa: E402  (benchmarks/_common.py)

SUBSETS = {
    "all": lambda row: True,
    "liquid": lambda row: row["solid"] == "0",
    "liquid_in_range": lambda row: row["solid"] == "0" and row["in_range"] == "1",
}

parser = argparse.ArgumentParser()
parser.add_argument("--data-dir", required=True)
parser.add_argument("--labels", required=True, help="derived_labels.py's CSV")
parser.add_argument("--subset", choices=sorted(SUBSETS), default="all")
parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
parser.add_argument("--out", required=True)
args = parser.parse_args()
torch.set_num_threads(1)

dataset = load_molecule_dataset("freesolv", data_dir=args.data_dir)
freesolv_smiles = {d.smiles for d in dataset}
extra = []
with open(args.labels, newline="") as handle:
    for row in csv.DictReader(handle):
        if row["in_freesolv"] == "1" or not SUBSETS[args.subset](row):
            continue
        data = dataset.featurizer(row["smiles"])
        if data.smiles in freesolv_smiles:
            raise SystemExit(f"{row['smiles']} is a FreeSolv molecule; the labels mark it wrongly")
        data.y = torch.tensor([[float(row["dg_derived"])]])
        data.row = -1 - len(extra)  # FreeSolv items carry their CSV row; these have none
        extra.append(data)
print(f"{len(extra)} derived molecules added to each training part", flush=True)

fit_freesolv_only = tm._fit


def fit_with_extra(model, train_items, *rest, **kwargs):
    return fit_freesolv_only(model, list(train_items) + extra, *rest, **kwargs)


tm._fit = fit_with_extra
runs = fine_tuning_runs(dataset, "freesolv", args.seeds)
with open(args.out, "w") as handle:
    json.dump({"subset": args.subset, "added": len(extra), "runs": runs}, handle, indent=1)
