"""Prototype (not part of graphattn): FreeSolv defaults with ensemble members started
from different pretrained encoders (member m from encoder m mod n), one thread, one
member after another. With one encoder it is the default (``graphattn train``
reproduces its figures exactly).

    python fine_tune_prototype.py --data-dir ../shared/datasets --encoders A.pt B.pt C.pt \
        --seeds 0 1 2 3 4 5 --out runs.json [--ensemble 6] [--overrides '{"lr": 5e-4}']
"""

import argparse
import json
import sys
from pathlib import Path

import torch

import graphattn.train.molecules as tm
from graphattn.datasets.molecules import load_molecule_dataset
from graphattn.train.transfer import load_pretrained_encoder

BENCHMARKS = next(p for p in Path(__file__).resolve().parents if p.name == "benchmarks")
sys.path.insert(0, str(BENCHMARKS))
from _common import fine_tuning_runs  # noqa: E402  (benchmarks/_common.py)

parser = argparse.ArgumentParser()
parser.add_argument("--data-dir", required=True)
parser.add_argument("--encoders", nargs="+", required=True)
parser.add_argument("--ensemble", type=int, default=3)
parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
parser.add_argument("--overrides", default="{}", help="MoleculeTrainConfig fields, JSON")
parser.add_argument("--out", required=True)
args = parser.parse_args()
torch.set_num_threads(1)
encoders = [load_pretrained_encoder(path) for path in args.encoders]
train_member = tm._MembersJob.train_member


def train_member_from_its_encoder(self, member, *rest, **options):
    if self.pretrained is not None:  # init_from null in --overrides: from scratch
        self.pretrained = encoders[member % len(encoders)]
    return train_member(self, member, *rest, **options)


tm._MembersJob.train_member = train_member_from_its_encoder
dataset = load_molecule_dataset("freesolv", data_dir=args.data_dir)
runs = fine_tuning_runs(
    dataset,
    "freesolv",
    args.seeds,
    ensemble=args.ensemble,
    init_from=args.encoders[0],
    **json.loads(args.overrides),
)
with open(args.out, "w") as handle:
    json.dump({"settings": vars(args), "runs": runs}, handle, indent=1)
