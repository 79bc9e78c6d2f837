"""Prototype (not part of graphattn): FreeSolv defaults (shipped xtb-hydration-57k
encoder, dropout 0, ensemble of 3) with a fine-tuning regulariser that the library
does not have, swapped into ``graphattn.train.molecules._fit``:

- ``encoder_lr``: the encoder's learning rate is this fraction of the head's;
- ``l2sp``: the encoder is pulled toward its pretrained weights (L2-SP, Li et al. 2018)
  instead of toward zero: after each step, w -= lr_t * l2sp * (w - w_pretrained);
- ``ema``: validation, early stopping and the kept weights use an exponential moving
  average of the weights with this decay per step.

    python fine_tune_variants.py --data-dir ../shared/datasets --variant '{"ema": 0.99}' \
        --seeds 0 1 2 3 4 5 --out runs.json

With ``--variant '{}'`` it reproduces the defaults (``graphattn train --dataset freesolv``).
"""

import argparse
import json
import time

import torch
from torch_geometric.loader import DataLoader

import graphattn.train.molecules as tm
from graphattn.datasets.molecules import load_molecule_dataset
from graphattn.train.loop import EarlyStopping, warmup_cosine
from graphattn.train.transfer import _FRESH

parser = argparse.ArgumentParser()
parser.add_argument("--data-dir", required=True)
parser.add_argument("--variant", default="{}", help="encoder_lr, l2sp, ema (JSON)")
parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
parser.add_argument("--out", required=True)
args = parser.parse_args()
variant = json.loads(args.variant)
unknown = set(variant) - {"encoder_lr", "l2sp", "ema"}
if unknown:
    parser.error(f"unknown variant keys {sorted(unknown)}")
torch.set_num_threads(1)


def is_head(name: str) -> bool:
    """Parameters that start fresh rather than from the pretrained encoder."""
    return name.startswith(_FRESH)


def fit(model, train_items, val_loader, scaler, config, metric, label, progress, report=None):
    generator = torch.Generator().manual_seed(torch.initial_seed() % 2**63)
    train_loader = DataLoader(
        train_items,
        batch_size=config.batch_size,
        shuffle=True,
        generator=generator,
        drop_last=len(train_items) > config.batch_size,
    )
    named = list(model.named_parameters())
    encoder = [p for n, p in named if not is_head(n)]
    head = [p for n, p in named if is_head(n)]
    l2sp = variant.get("l2sp")
    groups = [
        {
            "params": encoder,
            "lr": config.lr * variant.get("encoder_lr", 1.0),
            "weight_decay": 0.0 if l2sp else config.weight_decay,
        },
        {"params": head, "lr": config.lr, "weight_decay": config.weight_decay},
    ]
    optimizer = torch.optim.AdamW(groups, lr=config.lr, fused=True)
    start_weights = [p.detach().clone() for p in encoder]
    steps = max(1, len(train_loader))
    schedule = warmup_cosine(optimizer, config.warmup_epochs * steps, config.epochs * steps)
    stopper = EarlyStopping(config.patience, higher_is_better=False)
    averaged = (
        torch.optim.swa_utils.AveragedModel(
            model, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(variant["ema"])
        )
        if "ema" in variant
        else None
    )
    history = []
    for epoch in range(1, config.epochs + 1):
        model.train()
        total, count = 0.0, 0
        for batch in train_loader:
            optimizer.zero_grad()
            loss = tm.masked_loss(model(batch), scaler.transform(batch.y), config.task)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optimizer.step()
            if l2sp:
                with torch.no_grad():
                    rate = optimizer.param_groups[0]["lr"] * l2sp
                    for p, p0 in zip(encoder, start_weights, strict=True):
                        p.sub_(rate * (p - p0))
            schedule.step()
            if averaged is not None:
                averaged.update_parameters(model)
            total += loss.item() * batch.num_graphs
            count += batch.num_graphs
        judged = averaged.module if averaged is not None else model
        val_pred, val_y = tm._predict_loader(judged, val_loader, scaler, config.task)
        val_value = tm._validation_value(config.task, metric, val_y, val_pred)
        best = stopper.step(val_value, epoch, judged)
        history.append(
            {"epoch": epoch, "train_loss": total / count, f"val_{metric}": val_value, "best": best}
        )
        if stopper.should_stop:
            break
    stopper.restore(model)
    return history, stopper.best_epoch


tm._fit = fit
dataset = load_molecule_dataset("freesolv", data_dir=args.data_dir)
runs = []
for seed in args.seeds:
    settings = {**tm.DATASET_DEFAULTS["freesolv"], "seed": seed, "workers": 1}
    start = time.perf_counter()
    metrics = tm.train_molecule_model(
        dataset, tm.MoleculeTrainConfig(**settings), dataset_name="freesolv", progress=False
    )
    runs.append(
        {
            "seed": seed,
            "val_rmse": metrics["val"]["rmse"],
            "test_rmse": metrics["test"]["rmse"],
            "seconds": round(time.perf_counter() - start, 1),
        }
    )
    print(json.dumps(runs[-1]), flush=True)
with open(args.out, "w") as handle:
    json.dump({"variant": variant, "runs": runs}, handle, indent=1)
