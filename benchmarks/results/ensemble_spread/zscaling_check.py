"""One scale factor per run, fitted on validation (z-scaling): does it turn the spread
into an error bar? Reads the run folders of README.md's commands (/tmp/spread2/...).

    python benchmarks/results/ensemble_spread/zscaling_check.py
"""

import json

import numpy as np

from graphattn.datasets.molecules import load_molecule_dataset
from graphattn.train.molecules import predict_molecules

for name in ("freesolv", "esol"):
    dataset = load_molecule_dataset(name, data_dir="../shared/datasets")
    y = dataset.targets.numpy()[:, 0]
    for seed in (0, 1, 2):
        run = f"/tmp/spread2/{name}_{seed}"
        with open(f"{run}/split.json") as handle:
            split = json.load(handle)
        parts = {}
        for part in ("val", "test"):
            rows = split[part]
            smiles = [dataset.smiles[i] for i in rows]
            pred, _, std = predict_molecules(run, smiles, return_std=True)
            parts[part] = (y[rows], pred[:, 0], std[:, 0])
        y_val, pred_val, std_val = parts["val"]
        scale = np.sqrt(np.mean(((y_val - pred_val) / std_val) ** 2))
        y_test, pred_test, std_test = parts["test"]
        z = np.abs(y_test - pred_test) / (scale * std_test)
        print(
            f"{name} seed {seed}: scale {scale:.2f}; test within 1 scaled sd "
            f"{np.mean(z <= 1):.2f}, within 2 {np.mean(z <= 2):.2f}; largest |z| {z.max():.1f}"
        )
