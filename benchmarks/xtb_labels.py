"""How closely do computed (xTB) hydration energies track FreeSolv's experiment?

For every FreeSolv molecule, each xTB model (``METHOD/SOLVATION``, see
:mod:`graphattn.pretrained.xtb`) gives its energy in implicit water minus in the gas
phase on ``--conformers`` ETKDG + MMFF conformers. Reported per model:
RMSE, MAE and Pearson r against experiment, on conformer 0 alone (how the pretraining
labels are made) and on the mean over conformers; the RMSE left after the best straight
line through all molecules (``fit_rmse``: how much a model could help once rescaled; the
line is fitted on the whole set, so it is a diagnostic, not a prediction); and the
spread between conformers (each molecule's sample standard deviation over its
conformers, pooled as a root mean square). The conformers' ETKDG seeds are 0 (the
pretraining labels' conformer), 2, 3, ...: RDKit embeds seeds 0 and 1 alike. Molecules
where a model fails are counted and listed.

Usage::

    python benchmarks/xtb_labels.py --data-dir ../shared/datasets --workers 2 \\
        --conformers 5 --out benchmarks/results/targets/freesolv/xtb_labels
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from _common import (
    Timer,
    add_common_args,
    finish,
    fmt,
    machine_info,
    machine_line,
    map_in_processes,
    markdown_table,
    positive_int,
    run_main,
    setup,
    xtb_model_arg,
)

from graphattn.datasets.molecules import load_molecule_dataset
from graphattn.featurize.molecule import MoleculeFeaturizer, parse_smiles
from graphattn.pretrained.xtb import conformer_seeds, parse_xtb_model, xtb_hydration_energies

DEFAULT_MODELS = ("GFN2-xTB/alpb", "GFN2-xTB/gbsa", "GFN1-xTB/alpb", "GFN1-xTB/gbsa")
SMOKE_MOLECULES, SMOKE_CONFORMERS = 8, 2


def _energies(job: tuple[str, list[tuple[str, str]], int]) -> list[float] | str:
    """The models' energies on one conformer, in order; the error text if it failed."""
    smiles, models, seed = job
    try:
        values = xtb_hydration_energies(parse_smiles(smiles), models, seed)
    except (ValueError, RuntimeError) as err:  # no 3D embedding; xTB did not converge
        return f"{type(err).__name__}: {err}"
    return [values[m] for m in models]


def agreement(computed: np.ndarray, experiment: np.ndarray) -> dict:
    """RMSE, MAE, Pearson r and the RMSE after the least-squares line ``a x + b``."""
    slope, intercept = np.polyfit(computed, experiment, 1)
    fitted = slope * computed + intercept
    return {
        "rmse": float(np.sqrt(np.mean((computed - experiment) ** 2))),
        "mae": float(np.mean(np.abs(computed - experiment))),
        "pearson_r": float(np.corrcoef(computed, experiment)[0, 1]),
        "fit_rmse": float(np.sqrt(np.mean((fitted - experiment) ** 2))),
        "fit_slope": float(slope),
        "fit_intercept": float(intercept),
    }


def run(args: argparse.Namespace) -> dict:
    limit = SMOKE_MOLECULES if args.smoke else None
    # only the SMILES and measured values are read: no descriptors to compute
    featurizer = MoleculeFeaturizer(descriptors=False)
    dataset = load_molecule_dataset("freesolv", args.data_dir, featurizer, limit=limit)
    smiles = list(dataset.smiles)
    experiment = np.array([float(dataset[i].y) for i in range(len(dataset))])
    seeds = conformer_seeds(args.conformers)
    jobs = [(s, args.models, seed) for s in smiles for seed in seeds]
    with Timer() as timer:
        results = map_in_processes(_energies, jobs, args.workers)
    # [molecule, conformer, model] in job order; NaN where a conformer failed
    values = np.full((len(smiles) * len(seeds), len(args.models)), np.nan)
    failures = []
    for index, ((s, _, seed), result) in enumerate(zip(jobs, results, strict=True)):
        if isinstance(result, str):
            failures.append({"smiles": s, "conformer_seed": seed, "error": result})
        else:
            values[index] = result
    values = values.reshape(len(smiles), len(seeds), len(args.models))
    ok = ~np.isnan(values).any(axis=(1, 2))
    if ok.sum() < 2:
        raise SystemExit(f"xTB gave every value for only {ok.sum()} molecules: {failures[:3]}")
    models = {}
    for k, (method, solvation) in enumerate(args.models):
        first, mean = values[ok, 0, k], values[ok, :, k].mean(axis=1)
        spread = values[ok, :, k].std(axis=1, ddof=1) if len(seeds) > 1 else None
        models[f"{method}/{solvation}"] = {
            "conformer_0": agreement(first, experiment[ok]),
            "conformer_mean": agreement(mean, experiment[ok]),
            "conformer_spread": None if spread is None else float(np.sqrt(np.mean(spread**2))),
        }
    return {
        "molecules": len(smiles),
        "molecules_used": int(ok.sum()),
        "conformers": len(seeds),
        "conformer_seeds": seeds,
        "seconds": timer.seconds,
        "models": models,
        "failures": failures,
    }


def render_markdown(payload: dict) -> str:
    result = payload["result"]
    rows = [
        [
            name,
            fmt(m["conformer_0"]["rmse"]),
            fmt(m["conformer_0"]["pearson_r"]),
            fmt(m["conformer_0"]["fit_rmse"]),
            fmt(m["conformer_mean"]["rmse"]),
            fmt(m["conformer_mean"]["fit_rmse"]),
            fmt(m["conformer_spread"]),
        ]
        for name, m in result["models"].items()
    ]
    headers = [
        "xTB model",
        "RMSE, conformer 0",
        "r",
        "RMSE after a fitted line",
        f"RMSE, mean of {result['conformers']} conformers",
        "after a fitted line",
        "spread between conformers",
    ]
    return "\n\n".join(
        [
            "# xTB hydration energies against FreeSolv's experiment (kcal/mol)",
            machine_line(payload["machine"], payload["settings"]["smoke"]),
            f"{result['molecules_used']} of {result['molecules']} molecules (every model and "
            f"conformer computed), {len(result['failures'])} failed conformers, "
            f"{result['seconds']:.0f} s ({payload['settings']['workers']} xTB processes).",
            markdown_table(headers, rows),
        ]
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser, seeds=None)
    parser.add_argument(
        "--models",
        type=xtb_model_arg,
        nargs="+",
        default=[parse_xtb_model(m) for m in DEFAULT_MODELS],
        help=f"METHOD/SOLVATION pairs (default: {' '.join(DEFAULT_MODELS)})",
    )
    parser.add_argument(
        "--conformers", type=positive_int, default=5, help="conformers per molecule"
    )
    parser.add_argument("--workers", type=int, default=2, help="processes computing xTB")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup(args)
    if args.smoke:
        args.conformers = SMOKE_CONFORMERS
    payload = {
        "complete": False,
        "machine": machine_info(),
        "settings": {
            "smoke": args.smoke,
            "models": [f"{m}/{s}" for m, s in args.models],
            "conformers": args.conformers,
            "workers": args.workers,
        },
    }
    payload["result"] = run(args)
    return finish(args.out, "xtb_labels", payload, render_markdown)


if __name__ == "__main__":
    sys.exit(run_main(main))
