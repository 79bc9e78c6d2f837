"""Diagnostic (not part of graphattn): how a pretrained encoder's predictions and
pooled vectors change between eval mode and training mode (dropout on), on molecules
its pretraining held out (the ``predictions.csv`` of a pretraining run with the same
seed and corpus).

    python dropout_readout_check.py RUN_DIR_OR_MODEL_PT PREDICTIONS_CSV [--rows 1024]

Prints JSON: the RMSE (kcal/mol) against the xTB labels in eval mode, with
graphattn's dropout masks and with ``torch.nn.functional.dropout`` masks, with dropout
in one module at a time, and for each readout the mean over molecules and features of
(training-mode pooled vector averaged over 50 masks) minus (eval-mode pooled vector).
"""

import argparse
import csv
import json
import math

import torch
import torch.nn.functional as F
from torch_geometric.data import Batch

import graphattn.nn.dropout as graphattn_dropout
from graphattn.featurize import MoleculeFeaturizer
from graphattn.train.molecules import load_molecule_model

parser = argparse.ArgumentParser()
parser.add_argument("model")
parser.add_argument("predictions")
parser.add_argument("--rows", type=int, default=1024)
args = parser.parse_args()
torch.set_num_threads(1)
model, meta = load_molecule_model(args.model)
featurizer = MoleculeFeaturizer(**meta["featurizer"])
with open(args.predictions) as handle:
    rows = list(csv.DictReader(handle))[: args.rows]
items = [featurizer(row["smiles"]) for row in rows]
labels = torch.tensor([float(row["xtb_hydration"]) for row in rows])
mean, std = meta["scaler"]["mean"][0], meta["scaler"]["std"][0]
dropouts = {name: m for name, m in model.named_modules() if isinstance(m, torch.nn.Dropout)}
batches = [Batch.from_data_list(items[k : k + 64]) for k in range(0, len(items), 64)]


@torch.no_grad()
def rmse() -> float:
    torch.manual_seed(1)
    pred = torch.cat([model(b) for b in batches]).squeeze(-1) * std + mean
    return math.sqrt(float(((pred - labels) ** 2).mean()))


def dropout_only_in(names) -> None:
    model.eval()
    for name in names:
        dropouts[name].train()


result = {"model": args.model, "molecules": len(items)}
dropout_only_in([])
result["eval"] = rmse()
dropout_only_in(dropouts)
result["dropout_graphattn_masks"] = rmse()
forward = graphattn_dropout.Dropout.forward
graphattn_dropout.Dropout.forward = lambda self, x: F.dropout(x, self.p, self.training)
result["dropout_torch_masks"] = rmse()
graphattn_dropout.Dropout.forward = forward
result["dropout_in_one_module"] = {}
for name in dropouts:
    dropout_only_in([name])
    result["dropout_in_one_module"][name] = rmse()

pooled = {}
model.readout.register_forward_hook(lambda module, inputs, out: pooled.update(out=out))
batch = Batch.from_data_list(items[:128])


@torch.no_grad()
def pooled_vectors(training: bool) -> torch.Tensor:
    model.train(training)
    model(batch)
    return pooled["out"]


eval_pooled = pooled_vectors(False)
train_pooled = torch.stack([pooled_vectors(True) for _ in range(50)])
shift = train_pooled.mean(0) - eval_pooled
width = model.config.hidden
result["pooled_shift"] = {
    name: {
        "mean": float(shift[:, i * width : (i + 1) * width].mean()),
        "mean_abs": float(shift[:, i * width : (i + 1) * width].abs().mean()),
        "eval_mean_abs": float(eval_pooled[:, i * width : (i + 1) * width].abs().mean()),
    }
    for i, name in enumerate(model.config.readout)
}
print(json.dumps(result, indent=1))
