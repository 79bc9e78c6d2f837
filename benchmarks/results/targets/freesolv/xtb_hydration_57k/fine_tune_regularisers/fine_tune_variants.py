"""Prototype (not part of graphattn): FreeSolv defaults (shipped xtb-hydration-57k
encoder, dropout 0, ensemble of 3) with a fine-tuning regulariser that the library
does not have, swapped into ``graphattn.train.molecules._fit``:

- ``encoder_lr``: the encoder's learning rate is this fraction of the head's;
- ``l2sp``: the encoder is pulled toward its pretrained weights (L2-SP, Li et al. 2018)
  instead of toward zero: after each step, w -= lr_t * l2sp * (w - w_pretrained);
- ``ema``: validation, early stopping and the kept weights use an exponential moving
  average of the weights with this decay per step;
- ``huber``: the training loss is the Huber loss with this delta (in standardised target
  units) instead of the squared error, so that a few badly fitted molecules pull less;
- ``cotrain``: co-training on the xTB corpus the encoder was pretrained on. Each FreeSolv
  batch is paired with ``cotrain_batch`` (32) corpus molecules; a second head, fresh for
  each model, predicts their standardised xTB hydration energy from the same pooled
  vector and descriptors, and the loss is ``mse(FreeSolv) + cotrain * mse(xTB)``. The
  corpus is ``cotrain_molecules`` (20,000) molecules drawn (seed 0) from the 57,537
  labelled ones, FreeSolv's left out; featurized once and cached at ``--cache``;
- ``bootstrap``: bagging, each ensemble member trains on its own bootstrap sample of the
  training part (as many molecules, drawn with replacement);
- ``extreme_weight``: each molecule's squared error is weighted by ``1 + w * |z|``, z its
  standardised target, so that the rare strongly hydrophilic molecules (FreeSolv's
  largest test errors) pull harder.

Run from the repository root (the corpus labels are read from benchmarks/results/):

    python benchmarks/results/targets/freesolv/xtb_hydration_57k/fine_tune_regularisers/\
fine_tune_variants.py --data-dir ../shared/datasets --variant '{"ema": 0.99}' \
        --seeds 0 1 2 3 4 5 --out runs.json

With ``--variant '{}'`` it reproduces the defaults (``graphattn train --dataset freesolv``).
"""

import argparse
import json
import random
import sys
import time
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F
from torch_geometric.loader import DataLoader

import graphattn.train.molecules as tm
from graphattn.datasets.molecules import load_molecule_dataset
from graphattn.errors import GraphInputError
from graphattn.train.loop import EarlyStopping, warmup_cosine
from graphattn.train.transfer import _FRESH

BENCHMARKS = next(p for p in Path(__file__).resolve().parents if p.name == "benchmarks")
sys.path.insert(0, str(BENCHMARKS))
from _common import fine_tuning_runs  # noqa: E402  (benchmarks/_common.py)
from pretraining import read_xtb_labels  # noqa: E402  (benchmarks/pretraining.py)

RESULTS = Path("benchmarks/results/targets/freesolv")
XTB_LABELS = [
    RESULTS / "pretraining_xtb/corpus.csv.gz",
    RESULTS / "chedl_xtb_pretraining/chedl_labels.csv.gz",
]
KEYS = {
    "encoder_lr",
    "l2sp",
    "ema",
    "huber",
    "cotrain",
    "cotrain_batch",
    "cotrain_molecules",
    "bootstrap",
    "extreme_weight",
}

parser = argparse.ArgumentParser()
parser.add_argument("--data-dir", required=True)
parser.add_argument("--variant", default="{}", help=f"{', '.join(sorted(KEYS))} (JSON)")
parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
parser.add_argument("--cache", default="/tmp/cotraining_corpus.pt")
parser.add_argument("--out", required=True)
args = parser.parse_args()
variant = json.loads(args.variant)
if "cotrain" in variant:
    variant = {"cotrain_batch": 32, "cotrain_molecules": 20000, **variant}
unknown = set(variant) - KEYS
if unknown:
    parser.error(f"unknown variant keys {sorted(unknown)}")
torch.set_num_threads(1)


def is_head(name: str) -> bool:
    """Parameters that start fresh rather than from the pretrained encoder."""
    return name.startswith(_FRESH)


def xtb_corpus(featurizer, leave_out: set[str], count: int) -> list:
    """``count`` featurized corpus molecules with ``y`` = standardised xTB label."""
    cache = Path(f"{args.cache}.{count}")
    if cache.exists():
        return torch.load(cache, weights_only=False)
    labels = {s: v[0] for s, v in read_xtb_labels(XTB_LABELS, ["xtb_hydration"]).items()}
    smiles = sorted(labels)
    random.Random(0).shuffle(smiles)
    items = []
    for s in smiles:
        try:
            data = featurizer(s)
        except GraphInputError:
            continue
        if data.smiles in leave_out:
            continue
        data.y = torch.tensor([[labels[s]]], dtype=torch.float32)
        items.append(data)
        if len(items) == count:
            break
    y = torch.cat([d.y for d in items])
    mean, std = y.mean(), y.std()
    for d in items:
        d.y = (d.y - mean) / std
    torch.save(items, cache)
    return items


def endless(loader):
    """Batches of ``loader``, reshuffled at each pass, without end."""
    while True:
        yield from loader


def train_loss(pred, target, task):
    """The defaults' masked MSE, or the Huber loss of the ``huber`` variant, or the
    weighted MSE of ``extreme_weight``."""
    known = ~torch.isnan(target)
    if "huber" in variant:
        return F.huber_loss(pred[known], target[known], delta=variant["huber"])
    if "extreme_weight" in variant:
        weight = 1.0 + variant["extreme_weight"] * target[known].abs()
        return (weight * (pred[known] - target[known]) ** 2).sum() / weight.sum()
    return tm.masked_loss(pred, target, task)


def bootstrap_sample(items: list) -> list:
    """As many items as ``items``, drawn with replacement. The member's seed (set just
    before ``_fit``) seeds the draw, so each member of an ensemble gets its own."""
    draw = random.Random(torch.initial_seed())
    return [items[draw.randrange(len(items))] for _ in items]


def fit(model, train_items, val_loader, scaler, config, metric, label, progress, report=None):
    if variant.get("bootstrap"):
        train_items = bootstrap_sample(train_items)
    train_loader = tm._train_loader(train_items, config)
    cotrain = variant.get("cotrain", 0.0)
    if cotrain:
        corpus_batches = endless(
            DataLoader(
                CORPUS,
                batch_size=variant["cotrain_batch"],
                shuffle=True,
                generator=train_loader.generator,  # one random stream, as before
                drop_last=True,
            )
        )
        width, hidden = model.head[0].in_features, model.config.hidden
        xtb_head = nn.Sequential(nn.Linear(width, hidden), nn.GELU(), nn.Linear(hidden, 1))
    extra = list(xtb_head.parameters()) if cotrain else []
    params = list(model.parameters()) + extra
    named = list(model.named_parameters())
    encoder = [p for n, p in named if not is_head(n)]
    head = [p for n, p in named if is_head(n)] + extra
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
            loss = train_loss(model(batch), scaler.transform(batch.y), config.task)
            if cotrain:
                corpus = next(corpus_batches)
                xtb_loss = F.mse_loss(xtb_head(model.head_input(corpus)), corpus.y)
                (loss + cotrain * xtb_loss).backward()
            else:
                loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 5.0)
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
        val_pred, val_y, _ = tm._predict_loader(judged, val_loader, scaler, config.task)
        val_value = tm._validation_value(config.task, metric, val_y, val_pred, scaler)
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
if "cotrain" in variant:
    start = time.perf_counter()
    leave_out = {d.smiles for d in dataset}
    CORPUS = xtb_corpus(dataset.featurizer, leave_out, variant["cotrain_molecules"])
    print(f"corpus: {len(CORPUS)} molecules, {time.perf_counter() - start:.0f} s", flush=True)
runs = fine_tuning_runs(dataset, "freesolv", args.seeds)
with open(args.out, "w") as handle:
    json.dump({"variant": variant, "runs": runs}, handle, indent=1)
