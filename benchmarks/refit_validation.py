"""Does refitting on training + validation molecules help? Judged without the test part.

``MoleculeTrainConfig.refit`` trains each ensemble member again, after early stopping,
on the training and validation molecules together, for the epochs early stopping chose.
Whether that helps cannot be read off a run's validation metric (the refitted models
have seen those molecules), and choosing it on test RMSE would spend the test part. So
for every seed, on the trainer's own split (``_make_split``), the test part is left
unread and the training part is split again: an inner validation part as large as the
validation part, drawn with ``numpy.random.default_rng([salt, seed])``, and the rest.

* **early-stopped**: the data set's defaults (``DATASET_DEFAULTS``, refit off), trained
  on the inner training part and early-stopped on the inner validation part;
* **refit**: those members refitted on both inner parts for their best epochs, with the
  target and descriptor standardisations fitted on both, exactly as the trainer does;

and both are scored on the (outer) validation part, which neither has seen (the test
molecules are featurized with the data set but never indexed). The rule
fixed before the first run: refit becomes a data set's default when the mean over seeds
of (refit − early-stopped) validation RMSE, each seed averaged over the salts, is below
minus twice its standard error.

Writes ``refit_validation.json`` and ``refit_validation.md`` into ``--out`` and prints
the markdown. ``--scratch`` drops the data set's pretrained start. ``--smoke`` runs 2
epochs on 150 molecules, one seed and one salt (meaningless figures).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from _common import (
    add_common_args,
    finish,
    fmt,
    machine_info,
    machine_line,
    markdown_table,
    require_datasets,
    run_main,
    setup,
    write_outputs,
)

from graphattn.datasets.molecules import dataset_featurizer, load_molecule_dataset
from graphattn.errors import GraphInputError
from graphattn.models.molecule import MoleculeModelConfig, pe_transform
from graphattn.train.metrics import regression_metrics
from graphattn.train.molecule_inference import TargetScaler, _predict_loader
from graphattn.train.molecules import (
    MoleculeTrainConfig,
    _ensemble,
    _eval_loader,
    _make_split,
    _MembersJob,
    _refit_members,
    _train_members,
    dataset_train_settings,
)
from graphattn.train.transfer import load_pretrained_encoder

DATASETS = ("esol", "freesolv")
SMOKE_MOLECULES = 150
SMOKE_EPOCHS = 2


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser, seeds=range(20))
    parser.add_argument("--dataset", choices=DATASETS, default="freesolv")
    parser.add_argument(
        "--scratch",
        action="store_true",
        help="without the data set's pretrained start (as graphattn train --init-from none)",
    )
    parser.add_argument(
        "--salts",
        type=int,
        nargs="+",
        default=[12345, 777],
        help="draws of the inner validation part per seed (default: 12345 777)",
    )
    parser.add_argument(
        "--combine",
        type=Path,
        nargs="+",
        metavar="JSON",
        help="train nothing: summarise the runs of these refit_validation.json files "
        "together (seeds run in separate processes) into --out",
    )
    return parser.parse_args(argv)


def combined(paths: list[Path]) -> dict:
    """One payload of the runs in ``paths`` (same data set and start; seeds in order)."""
    payloads = [json.loads(path.read_text()) for path in paths]
    first = payloads[0]["settings"]
    for path, payload in zip(paths, payloads, strict=True):
        settings = payload["settings"]
        if not payload.get("complete") or settings["dataset"] != first["dataset"]:
            raise GraphInputError(f"{path}: an incomplete run, or of another data set")
        if settings.get("scratch") != first.get("scratch") or settings["salts"] != first["salts"]:
            raise GraphInputError(f"{path}: another start or other salts than {paths[0]}")
    runs = sorted((r for p in payloads for r in p["runs"]), key=lambda r: (r["seed"], r["salt"]))
    seeds = sorted({r["seed"] for r in runs})
    settings = {**first, "seeds": seeds, "combined_from": [str(path) for path in paths]}
    settings.setdefault("scratch", False)  # files written before --scratch: the default start
    return {"settings": settings, "machine": payloads[0]["machine"], "runs": runs}


def inner_split(split: dict, salt: int, seed: int) -> dict[str, np.ndarray]:
    """The training part split again: ``inner_val`` as large as ``val``, and ``inner_train``."""
    order = np.random.default_rng([salt, seed]).permutation(np.asarray(split["train"]))
    size = len(split["val"])
    return {"inner_train": order[size:], "inner_val": order[:size]}


def validation_rmse(model, items: list, scaler: TargetScaler) -> float:
    pred, y, _ = _predict_loader(model, _eval_loader(items), scaler, "regression")
    return regression_metrics(y, pred)["rmse"]


def compare(dataset, name: str, seed: int, salt: int, smoke: bool, scratch: bool) -> dict:
    """Early-stopped and refitted ensembles of one seed and salt, scored on ``val``."""
    settings = {**dataset_train_settings(name, scratch=scratch), "refit": False, "workers": 1}
    if smoke:
        settings["epochs"] = SMOKE_EPOCHS
    config = MoleculeTrainConfig(seed=seed, **settings)
    split = _make_split(dataset, config)
    inner = inner_split(split, salt, seed)
    parts = {"train": [dataset[i] for i in inner["inner_train"]]}
    parts["val"] = [dataset[i] for i in inner["inner_val"]]
    outer_val = [dataset[i] for i in split["val"]]  # split["test"] is never indexed
    targets = {k: torch.cat([d.y for d in part]) for k, part in parts.items()}

    pretrained = load_pretrained_encoder(config.init_from) if config.init_from else None
    featurizer = dataset.featurizer
    model_config = MoleculeModelConfig(
        atom_dim=featurizer.atom_dim,
        bond_dim=featurizer.bond_dim,
        num_tasks=1,
        task="regression",
        mol_dim=featurizer.mol_dim,
        **{**(pretrained.architecture if pretrained else {}), **config.model},
    )
    transform = pe_transform(model_config)
    if transform is not None:
        parts = {k: [transform(d.clone()) for d in part] for k, part in parts.items()}
        outer_val = [transform(d.clone()) for d in outer_val]
    descriptors = torch.cat([d.mol_x for d in parts["train"]]) if model_config.mol_dim else None
    scaler = TargetScaler.fit(targets["train"])
    job = _MembersJob(
        model_config, pretrained, descriptors, parts["train"], parts["val"], scaler, config, "rmse"
    )
    cpu = torch.device("cpu")
    start = time.perf_counter()
    fitted = _train_members(job, cpu, 1, "", progress=False)
    early_seconds = time.perf_counter() - start
    best_epochs = [best for _, _, best in fitted]
    early_stopped = _ensemble([model for model, _, _ in fitted])
    refit, refit_scaler, _ = _refit_members(job, parts, targets, best_epochs, cpu, 1, name, False)
    row = {
        "seed": seed,
        "salt": salt,
        "best_epochs": best_epochs,
        "early_stopped_val_rmse": validation_rmse(early_stopped, outer_val, scaler),
        "refit_val_rmse": validation_rmse(refit, outer_val, refit_scaler),
        "inner_val_rmse": validation_rmse(early_stopped, parts["val"], scaler),
        "early_stopped_seconds": round(early_seconds, 1),
        "refit_seconds": round(time.perf_counter() - start - early_seconds, 1),
    }
    row["difference"] = row["refit_val_rmse"] - row["early_stopped_val_rmse"]
    return row


def paired(differences: list[float]) -> dict:
    """Mean, standard error and count of negative (refit better) paired differences."""
    values = np.asarray(differences, dtype=float)
    se = float(values.std(ddof=1) / np.sqrt(values.size)) if values.size > 1 else None
    return {
        "mean": float(values.mean()),
        "se": se,
        "refit_better": int((values < 0).sum()),
        "n": int(values.size),
    }


def summarise(rows: list[dict]) -> dict:
    by_salt = {}
    for salt in sorted({r["salt"] for r in rows}):
        mine = [r for r in rows if r["salt"] == salt]
        by_salt[str(salt)] = {
            "early_stopped_val_rmse": float(np.mean([r["early_stopped_val_rmse"] for r in mine])),
            "refit_val_rmse": float(np.mean([r["refit_val_rmse"] for r in mine])),
            "difference": paired([r["difference"] for r in mine]),
        }
    seeds = sorted({r["seed"] for r in rows})
    per_seed = [float(np.mean([r["difference"] for r in rows if r["seed"] == s])) for s in seeds]
    overall = paired(per_seed)
    adopt = overall["se"] is not None and overall["mean"] < -2 * overall["se"]
    return {"by_salt": by_salt, "per_seed": overall, "adopt_refit": adopt}


def render(payload: dict) -> str:
    summary = payload["summary"]
    lines = [
        f"# Refit after early stopping: {payload['settings']['dataset']}"
        f"{' from scratch' if payload['settings']['scratch'] else ''}, validation RMSE",
        "",
        machine_line(payload["machine"], payload["settings"]["smoke"]),
        "",
        "Scored on the validation part; early stopping used an inner validation part "
        "carved from the training part; the test part is not read.",
        "",
        markdown_table(
            ["salt", "seeds", "early-stopped", "refit", "refit − early-stopped", "refit better"],
            [
                [
                    salt,
                    s["difference"]["n"],
                    fmt(s["early_stopped_val_rmse"], 4),
                    fmt(s["refit_val_rmse"], 4),
                    f"{fmt(s['difference']['mean'], 4)} ± {fmt(s['difference']['se'], 4)}",
                    f"{s['difference']['refit_better']}/{s['difference']['n']}",
                ]
                for salt, s in summary["by_salt"].items()
            ],
        ),
        "",
    ]
    overall = summary["per_seed"]
    lines += [
        f"Per seed, averaged over the salts: refit − early-stopped "
        f"{fmt(overall['mean'], 4)} ± {fmt(overall['se'], 4)} (standard error), refit "
        f"better on {overall['refit_better']} of {overall['n']} seeds. Rule (below −2 SE): "
        f"**{'adopt' if summary['adopt_refit'] else 'do not adopt'}** refit.",
        "",
        "## Per seed and salt",
        "",
        markdown_table(
            ["seed", "salt", "best epochs", "early-stopped", "refit", "difference", "seconds"],
            [
                [
                    r["seed"],
                    r["salt"],
                    ", ".join(map(str, r["best_epochs"])),
                    fmt(r["early_stopped_val_rmse"], 4),
                    fmt(r["refit_val_rmse"], 4),
                    fmt(r["difference"], 4),
                    f"{r['early_stopped_seconds']} + {r['refit_seconds']}",
                ]
                for r in payload["runs"]
            ],
        ),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup(args)
    if args.combine:
        payload = combined(args.combine)
        payload["summary"] = summarise(payload["runs"])
        return finish(args.out, "refit_validation", payload, render)
    salts = args.salts[:1] if args.smoke else args.salts
    require_datasets([args.dataset], args.data_dir)
    dataset = load_molecule_dataset(
        args.dataset,
        data_dir=args.data_dir,
        featurizer=dataset_featurizer(args.dataset),
        limit=SMOKE_MOLECULES if args.smoke else None,
    )
    payload = {
        "settings": {
            "dataset": args.dataset,
            "scratch": args.scratch,
            "seeds": args.seeds,
            "salts": salts,
            "smoke": args.smoke,
            "threads": torch.get_num_threads(),
            "defaults": asdict(
                MoleculeTrainConfig(**dataset_train_settings(args.dataset, scratch=args.scratch))
            ),
        },
        "machine": machine_info(),
        "runs": [],
        "complete": False,
    }
    for seed in args.seeds:
        for salt in salts:
            row = compare(dataset, args.dataset, seed, salt, args.smoke, args.scratch)
            payload["runs"].append(row)
            print(json.dumps(row), flush=True)
            write_outputs(args.out, "refit_validation", payload)
    payload["summary"] = summarise(payload["runs"])
    return finish(args.out, "refit_validation", payload, render)


if __name__ == "__main__":
    raise SystemExit(run_main(main))
