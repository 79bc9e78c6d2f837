"""Does refitting on train+val after early stopping help FreeSolv? Judged without test data.

The prototype of benchmarks/refit_validation.py (2026-11-28; run from the repository root
as ``SALT=12345 python refit_prototype.py SEEDS...``, ``SALT=777 SKIP_C=1`` for the second
salt). Its protocol B is what ``MoleculeTrainConfig.refit`` does; the kept script
reproduces B's figures to the last digit.

For each seed: the default 80/10/10 split; the test part is never read. Inside the
training part, an inner validation part as large as the outer validation part is held
out. Protocol A (today's): ensemble of 3 trained on inner-train, early-stopped on
inner-val, scored on the outer validation part. Protocol B: each member retrained on
inner-train + inner-val for its best epoch of A, same schedule (stopped mid-schedule).
Protocol C: retrained on inner-train + inner-val with a schedule as long as its best epoch.
"""

import json
import os
import sys
import time
from dataclasses import replace

import numpy as np
import torch

from graphattn.datasets.molecules import dataset_featurizer, load_molecule_dataset
from graphattn.models.molecule import MoleculeEnsemble, MoleculeModel, MoleculeModelConfig
from graphattn.optim import adamw
from graphattn.splits.molecules import random_split
from graphattn.train.loop import seed_everything, warmup_cosine
from graphattn.train.molecule_inference import TargetScaler, _metrics, _predict_loader
from graphattn.train.molecules import (
    MoleculeTrainConfig,
    _eval_loader,
    _MembersJob,
    _train_loader,
    dataset_train_settings,
    masked_loss,
    member_seed,
)
from graphattn.train.transfer import load_pretrained_encoder

torch.set_num_threads(1)


def fixed_fit(model, items, scaler, config, epochs):
    loader = _train_loader(items, config)
    opt = adamw(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    spe = max(1, len(loader))
    sched = warmup_cosine(opt, config.warmup_epochs * spe, config.epochs * spe)
    for _ in range(epochs):
        model.train()
        for batch in loader:
            opt.zero_grad()
            loss = masked_loss(model(batch), scaler.transform(batch.y), config.task)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
            sched.step()
    model.eval()
    return model


def fresh(model_config, pretrained, descriptors, seed):
    seed_everything(seed)
    model = MoleculeModel(model_config)
    pretrained.load_into(model)
    if descriptors is not None:
        model.fit_descriptor_scaler(descriptors)
    return model


def rmse(model, items, scaler):
    pred, y, _ = _predict_loader(model, _eval_loader(items), scaler, "regression")
    return _metrics("regression", y, pred)["rmse"]


def run(dataset, seed):
    settings = dataset_train_settings("freesolv")
    config = MoleculeTrainConfig(seed=seed, **settings)
    split = random_split(len(dataset), config.fractions, seed)
    rng = np.random.default_rng([int(os.environ.get("SALT", 12345)), seed])
    perm = rng.permutation(split["train"])
    n_inner = len(split["val"])
    inner_val, inner_train = perm[:n_inner], perm[n_inner:]
    items = [dataset[i] for i in range(len(dataset))]
    tr = [items[i] for i in inner_train]
    iv = [items[i] for i in inner_val]
    ov = [items[i] for i in split["val"]]
    both = tr + iv
    pretrained = load_pretrained_encoder(config.init_from)
    fz = dataset.featurizer
    mc = MoleculeModelConfig(
        atom_dim=fz.atom_dim,
        bond_dim=fz.bond_dim,
        num_tasks=1,
        task="regression",
        mol_dim=fz.mol_dim,
        **{**pretrained.architecture, **config.model},
    )
    desc = lambda part: torch.cat([d.mol_x for d in part]) if mc.mol_dim else None  # noqa
    scaler_a = TargetScaler.fit(torch.cat([d.y for d in tr]))
    job = _MembersJob(mc, pretrained, desc(tr), tr, iv, scaler_a, config, "rmse")
    t0 = time.perf_counter()
    a_members, bests = [], []
    for m in range(config.ensemble):
        model, _, best = job.train_member(m, torch.device("cpu"), _eval_loader(iv), "", False)
        a_members.append(model.eval())
        bests.append(best)
    ta = time.perf_counter() - t0
    scaler_b = TargetScaler.fit(torch.cat([d.y for d in both]))
    b_members, c_members = [], []
    for m, best in enumerate(bests):
        s = member_seed(seed, m)
        b_members.append(
            fixed_fit(fresh(mc, pretrained, desc(both), s), both, scaler_b, config, best)
        )
        if os.environ.get("SKIP_C"):
            continue
        cfg_c = replace(
            config, epochs=best, warmup_epochs=min(config.warmup_epochs, max(1, best // 2))
        )
        c_members.append(
            fixed_fit(fresh(mc, pretrained, desc(both), s), both, scaler_b, cfg_c, best)
        )
    tb = time.perf_counter() - t0 - ta
    ens = lambda ms: MoleculeEnsemble(ms).eval()  # noqa
    row = {
        "seed": seed,
        "best_epochs": bests,
        "A_outer_val": rmse(ens(a_members), ov, scaler_a),
        "A_inner_val": rmse(ens(a_members), iv, scaler_a),
        "B_outer_val": rmse(ens(b_members), ov, scaler_b),
        "C_outer_val": rmse(ens(c_members), ov, scaler_b) if c_members else None,
        "salt": int(os.environ.get("SALT", 12345)),
        "A_seconds": round(ta, 1),
        "BC_seconds": round(tb, 1),
    }
    print(json.dumps(row), flush=True)
    return row


if __name__ == "__main__":
    seeds = [int(s) for s in sys.argv[1:]]
    ds = load_molecule_dataset(
        "freesolv", data_dir="../shared/datasets", featurizer=dataset_featurizer("freesolv")
    )
    for s in seeds:
        run(ds, s)
