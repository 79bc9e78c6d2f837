"""Train a solubility model on ESOL, then predict new molecules (the Python API).

Run: python examples/molecules_solubility.py [--data-dir DIR]
(DIR holds esol/delaney-processed.csv; without it the file is downloaded once into
datasets/cache/). The same as `graphattn train --dataset esol` followed by
`graphattn predict`: an ensemble of 3 models, here trained one after another (the CLI
trains them in worker processes at once, MoleculeTrainConfig(workers=...), which needs
the `if __name__ == "__main__":` guard): about 3 minutes on 2 CPU cores (166 s wall,
149 s of training, on an idle 2-core Intel Xeon).
"""

import argparse

import torch

from graphattn.datasets import DatasetUnavailableError, load_molecule_dataset
from graphattn.train import MoleculeTrainConfig, predict_molecules, train_molecule_model
from graphattn.train.molecules import DATASET_DEFAULTS

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--data-dir", help="folder with esol/delaney-processed.csv")
parser.add_argument("--epochs", type=int, help="default: the library's (80)")
parser.add_argument("--out", default="runs/example_esol")
parser.add_argument("--threads", type=int, help="CPU threads (default: one per core)")
args = parser.parse_args()
if args.threads:
    torch.set_num_threads(args.threads)  # graphattn's Numba kernels follow it

try:
    dataset = load_molecule_dataset("esol", data_dir=args.data_dir)
except DatasetUnavailableError as err:  # offline: which file to put where
    raise SystemExit(f"molecules_solubility.py: {err}") from None
settings = dict(DATASET_DEFAULTS["esol"])  # ESOL's tuned readout, as the CLI uses
if args.epochs is not None:
    settings["epochs"] = args.epochs
config = MoleculeTrainConfig(**settings)
metrics = train_molecule_model(dataset, config, run_dir=args.out, dataset_name="esol")
print(f"test RMSE {metrics['test']['rmse']:.3f} log mol/L, run folder {args.out}")

smiles = ["CCO", "c1ccccc1", "OC(=O)c1ccccc1O", "not a molecule"]
# std: how far the ensemble's members disagree (it ranks molecules; not an error bar)
predictions, errors, std = predict_molecules(args.out, smiles, return_std=True)
for s, p, d, e in zip(smiles, predictions[:, 0], std[:, 0], errors, strict=True):
    print(f"{s:>20}: {'error: ' + e if e else f'{p:.2f} log mol/L (members ±{d:.2f})'}")
