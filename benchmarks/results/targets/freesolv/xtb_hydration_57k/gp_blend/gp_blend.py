"""FreeSolv prototype: the defaults' ensemble averaged with a Gaussian process.

For each seed, ``graphattn train --dataset freesolv``'s model is trained as usual; a
Gaussian process (scikit-learn; constant x RBF + white noise, fitted by marginal
likelihood on the training molecules) then predicts the hydration free energy from the
head's input, the pooled atom vectors next to the scaled descriptors, of either
- ``frozen``: the shipped ``xtb-hydration-57k`` encoder as pretrained, or
- ``tuned``: the three fine-tuned members (their vectors side by side).
The blend is ``(1 - w) * ensemble + w * GP``; w is to be chosen on validation.
``--noise-floor`` is the least white-noise variance the GP may fit, as a fraction of
the training targets' variance (default 1e-5, scikit-learn's own bound); a larger floor
keeps the GP from interpolating the training molecules.

    python gp_blend.py --data-dir ../shared/datasets --seeds 0 1 2 3 4 5 --out runs.json
"""

import argparse
import json
import time

import numpy as np
import torch
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
from sklearn.preprocessing import StandardScaler
from torch_geometric.loader import DataLoader

import graphattn.train.molecules as tm
from graphattn.datasets.molecules import load_molecule_dataset
from graphattn.models.molecule import MoleculeModel
from graphattn.train.transfer import load_pretrained_encoder

WEIGHTS = (0.1, 0.2, 0.3, 0.4, 0.5)

parser = argparse.ArgumentParser()
parser.add_argument("--data-dir", required=True)
parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
parser.add_argument("--noise-floor", type=float, default=1e-5)
parser.add_argument("--out", required=True)
args = parser.parse_args()
torch.set_num_threads(1)
dataset = load_molecule_dataset("freesolv", data_dir=args.data_dir)
items = [dataset[i] for i in range(len(dataset))]
y = np.array([float(d.y[0, 0]) for d in items])


@torch.no_grad()
def head_inputs(model: MoleculeModel, index: np.ndarray) -> np.ndarray:
    model.eval()
    loader = DataLoader([items[i] for i in index], batch_size=256)
    return torch.cat([model.head_input(batch) for batch in loader]).numpy()


def gaussian_process(models: list[MoleculeModel], parts: dict) -> tuple[dict, str]:
    """GP predictions for validation and test from the models' head inputs side by side,
    fitted on the training molecules, and the fitted kernel."""
    inputs = {k: np.hstack([head_inputs(m, index) for m in models]) for k, index in parts.items()}
    columns = StandardScaler().fit(inputs["train"])
    noise = WhiteKernel(max(0.1, args.noise_floor), (args.noise_floor, 1e5))
    kernel = ConstantKernel() * RBF(np.sqrt(columns.n_features_in_)) + noise
    gp = GaussianProcessRegressor(kernel, normalize_y=True, random_state=0)
    gp.fit(columns.transform(inputs["train"]), y[parts["train"]])
    predict = {k: gp.predict(columns.transform(inputs[k])) for k in ("val", "test")}
    return predict, str(gp.kernel_)


def rmse(pred: np.ndarray, index: np.ndarray) -> float:
    return float(np.sqrt(np.mean((pred - y[index]) ** 2)))


runs = []
for seed in args.seeds:
    start = time.perf_counter()
    config = tm.MoleculeTrainConfig(**tm.DATASET_DEFAULTS["freesolv"], seed=seed)
    ensemble = tm.train_molecule_model(dataset, config, progress=False)["model"]
    parts = {k: np.asarray(v) for k, v in tm._make_split(dataset, config).items()}
    scaler = tm.TargetScaler.fit(torch.from_numpy(y[parts["train"], None]))
    nn_pred = {
        k: tm._predict_loader(
            ensemble, tm._eval_loader([items[i] for i in parts[k]]), scaler, "regression"
        )[0][:, 0]
        for k in ("val", "test")
    }
    frozen = MoleculeModel(ensemble.config)
    load_pretrained_encoder("xtb-hydration-57k").load_into(frozen)
    frozen.fit_descriptor_scaler(torch.cat([items[i].mol_x for i in parts["train"]]))
    gps = {
        "frozen": gaussian_process([frozen], parts),
        "tuned": gaussian_process(list(ensemble.members), parts),
    }
    run = {"seed": seed, "ensemble": [rmse(nn_pred[k], parts[k]) for k in ("val", "test")]}
    for name, (gp_pred, kernel) in gps.items():
        run[f"gp_{name}"] = [rmse(gp_pred[k], parts[k]) for k in ("val", "test")]
        run[f"kernel_{name}"] = kernel
        for w in WEIGHTS:
            run[f"blend_{name}_{w}"] = [
                rmse((1 - w) * nn_pred[k] + w * gp_pred[k], parts[k]) for k in ("val", "test")
            ]
    run["seconds"] = round(time.perf_counter() - start, 1)
    runs.append(run)
    print(json.dumps(run), flush=True)
with open(args.out, "w") as handle:
    note = "[val RMSE, test RMSE] per entry"
    json.dump({"note": note, "noise_floor": args.noise_floor, "runs": runs}, handle, indent=1)
