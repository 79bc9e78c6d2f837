"""Helpers shared by the target and ablation benchmarks.

Machine description, argument parsing, thread setup, timing, mean/std summaries and
writing the JSON + markdown outputs. The scripts import this module as ``_common``
(they run as ``python benchmarks/<script>.py``, which puts ``benchmarks/`` on the path).
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import math
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

from graphattn.bench.worker import whole_number_at_least
from graphattn.datasets.files import (
    CARDS,
    DatasetChecksumError,
    DatasetUnavailableError,
    resolve_file,
)
from graphattn.datasets.molecules import MOLECULE_DATASETS
from graphattn.errors import GraphInputError
from graphattn.pretrained.xtb import parse_xtb_model
from graphattn.train.loop import write_json

__all__ = [
    "Timer",
    "add_common_args",
    "median_ms",
    "fmt",
    "finish",
    "finite_of_seeds",
    "fine_tuning_runs",
    "fmt_mean_std",
    "machine_info",
    "machine_line",
    "map_in_processes",
    "markdown_table",
    "met",
    "nonnegative_int",
    "positive_float",
    "positive_int",
    "require_datasets",
    "run_main",
    "seed_target",
    "setup",
    "summarize",
    "summarize_seeds",
    "write_outputs",
    "yes_no",
]

log = logging.getLogger("benchmarks")


# argparse types of counts: digits only, at least 1 (repeats, seeds, rounds) or at least
# 0 (a budget where 0 means none)
positive_int = whole_number_at_least(1)
nonnegative_int = whole_number_at_least(0)


def positive_float(text: str) -> float:
    """argparse type of a duration: a finite number above 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number above 0")
    return value


def add_common_args(parser: argparse.ArgumentParser, seeds: Sequence[int] | None) -> None:
    """Add ``--data-dir``, ``--seeds`` (not with ``seeds=None``: a script whose runs take
    no seed), ``--threads``, ``--smoke`` and ``--out``."""
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=os.environ.get("GRAPHATTN_DATA"),
        help="folder with esol/, freesolv/, facebook-pages/ (default: $GRAPHATTN_DATA)",
    )
    if seeds is not None:
        parser.add_argument("--seeds", type=int, nargs="+", default=list(seeds))
    parser.add_argument(
        "--threads", type=positive_int, help="torch.set_num_threads (default: torch's own choice)"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tiny settings (fewer epochs, seeds, sizes or repeats, as the script has them) "
        "to check the pipeline; the figures are meaningless",
    )
    parser.add_argument("--out", type=Path, default=Path("bench_out"), help="output folder")


def require_datasets(names: Iterable[str], data_dir: str | Path | None, **options) -> None:
    """Check that every file of the named data sets is available (``resolve_file`` with
    ``options``, e.g. ``download=False``) before any work, so that a missing one stops a
    long run at its start, not after hours; :func:`run_main` prints the error."""
    for name in names:
        for filename in CARDS[name].files:
            resolve_file(name, filename, data_dir, **options)


def run_main(main: Callable[[], int]) -> int:
    """``main()``; a missing data set or a bad input (:class:`GraphInputError`) is one
    ``error:`` line on stderr and exit status 2, not a traceback."""
    try:
        return main()
    except (DatasetUnavailableError, DatasetChecksumError, GraphInputError) as err:
        print(f"{Path(sys.argv[0]).name}: error: {err}", file=sys.stderr)
        return 2


def dataset_smiles(name: str, data_dir: str | Path | None) -> list[str]:
    """The SMILES column of a named molecule data set's file (stripped of surrounding
    whitespace), read without featurizing it."""
    info = MOLECULE_DATASETS[name]
    path = resolve_file(name, info.filename, data_dir)
    with open(path, newline="", encoding="utf-8") as handle:
        return [row[info.smiles_col].strip() for row in csv.DictReader(handle)]


def xtb_model_arg(text: str) -> tuple[str, str]:
    """argparse type of an xTB model named ``METHOD/SOLVATION`` (``GFN1-xTB/alpb``)."""
    try:
        return parse_xtb_model(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def json_object(text: str) -> dict:
    """A command-line JSON object (``argparse`` type)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not JSON: {text!r} ({error})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"needs a JSON object of fields, got {text!r}")
    return value


def setup(args: argparse.Namespace) -> None:
    """Logging, torch threads, output folder; ``--smoke`` keeps only the first seed."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("graphattn").setLevel(logging.ERROR)  # e.g. facebook self-loop notes
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.smoke and "seeds" in args:
        args.seeds = args.seeds[:1]
    args.out.mkdir(parents=True, exist_ok=True)


def map_in_processes(func: Callable, items: Sequence, workers: int, chunksize: int = 4) -> list:
    """``[func(item) for item in items]`` in ``workers`` spawned processes (one worker:
    in this process, without starting a pool). ``func`` must be a module-level function."""
    if workers <= 1:
        return [func(item) for item in items]
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        return pool.map(func, items, chunksize=chunksize)


def fine_tuning_runs(dataset, name: str, seeds: Sequence[int], **settings) -> list[dict]:
    """``graphattn train``'s defaults for data set ``name`` without the refit (and with
    one worker), ``settings`` on top, trained on ``dataset`` once per seed; one row per
    seed with validation and test RMSE and seconds, each printed as JSON when done. The
    FreeSolv prototypes under ``results/`` share it; they patch the training code before
    calling it, and ran before FreeSolv refitted by default, so their test RMSE is the
    early-stopped ensemble's (``refit=True`` in ``settings`` asks for the refit)."""
    from graphattn.train import molecules

    runs = []
    for seed in seeds:
        defaults = {**molecules.DATASET_DEFAULTS[name], "refit": False}
        config = molecules.MoleculeTrainConfig(
            **{**defaults, "seed": seed, "workers": 1, **settings}
        )
        start = time.perf_counter()
        metrics = molecules.train_molecule_model(dataset, config, dataset_name=name, progress=False)
        runs.append(
            {
                "seed": seed,
                "val_rmse": metrics["val"]["rmse"],
                "test_rmse": metrics["test"]["rmse"],
                "seconds": round(time.perf_counter() - start, 1),
            }
        )
        print(json.dumps(runs[-1]), flush=True)
    return runs


def machine_info() -> dict:
    """CPU model, cores, torch threads, memory, load, versions (and CUDA if any)."""
    from graphattn.bench.machine import describe_machine

    return describe_machine()


def machine_line(machine: dict, smoke: bool) -> str:
    """One markdown line naming the machine (and flagging a smoke run)."""
    load = machine.get("load_average_1_5_15")
    line = (
        f"Machine: {machine['cpu_model']}, {machine['usable_cores']} usable cores, "
        f"torch threads {machine['torch_threads']}, load average at start "
        f"{fmt(load[0], 1) if load else '?'}."
    )
    return line + (" **Smoke run (`--smoke`): the figures are meaningless.**" if smoke else "")


class Timer:
    """``with Timer() as t: ...`` then ``t.seconds`` (wall time, ``perf_counter``)."""

    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        self.seconds = float("nan")
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.perf_counter() - self.start


def interleaved_ms(
    prepares: dict[str, Callable[[int], Callable[[], None]]],
    repeats: int,
    warmup: int,
    device: torch.device | str = "cpu",
) -> dict[str, list[float]]:
    """Milliseconds of ``repeats`` timed calls of each entry after ``warmup`` untimed ones,
    the entries taking turns call by call, so that a slow spell of the machine hits them
    all alike.

    ``prepare(i)`` builds call ``i`` (fresh inputs, say) outside the timed region and
    returns it; see :func:`graphattn.bench.measure.time_pass` (CUDA: events).
    """
    from graphattn.bench.measure import time_pass

    device = torch.device(device)
    times: dict[str, list[float]] = {name: [] for name in prepares}
    for i in range(warmup + repeats):
        for name, prepare in prepares.items():
            seconds = time_pass(prepare(i), device)
            if i >= warmup:
                times[name].append(seconds * 1e3)
    return times


def median_ms(
    prepare: Callable[[int], Callable[[], None]],
    repeats: int,
    warmup: int,
    device: torch.device | str = "cpu",
) -> float:
    """Median milliseconds of ``repeats`` timed calls after ``warmup`` untimed ones
    (``prepare`` as in :func:`interleaved_ms`)."""
    return statistics.median(interleaved_ms({"": prepare}, repeats, warmup, device)[""])


def summarize(values: Iterable[float | None]) -> dict:
    """``{"mean", "std", "min", "max", "n"}`` of the finite values (sample std, ddof=1)."""
    finite = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not finite:
        return {"mean": None, "std": None, "min": None, "max": None, "n": 0}
    arr = np.asarray(finite)
    return {
        "mean": float(arr.mean()),
        "std": float(arr.std(ddof=1)) if arr.size > 1 else None,
        "min": float(arr.min()),
        "max": float(arr.max()),
        "n": int(arr.size),
    }


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(float(value))


def _metric_summary(members: list[dict], metric: str) -> dict:
    """:func:`summarize` of ``run["test"][metric]`` plus ``nonfinite_seeds``: the seeds
    whose value is missing, NaN or infinite (a diverged run), left out of the mean."""
    values = [r["test"][metric] for r in members]
    summary = summarize(values)
    summary["nonfinite_seeds"] = [
        r["seed"] for r, v in zip(members, values, strict=True) if not _finite(v)
    ]
    return summary


def summarize_seeds(
    runs: Iterable[dict], keys: Sequence[str], test_metrics: Sequence[str]
) -> list[dict]:
    """One summary per group of runs sharing the values of ``keys`` (e.g. data set and
    model): those values, the ``seeds``, and a :func:`summarize` of each
    ``run["test"][metric]`` (with its ``nonfinite_seeds``), of ``train_seconds`` and of
    ``epochs_run``."""
    groups: dict[tuple, list[dict]] = {}
    for run in runs:
        groups.setdefault(tuple(run[key] for key in keys), []).append(run)
    return [
        {
            **dict(zip(keys, values, strict=True)),
            "seeds": [r["seed"] for r in members],
            **{m: _metric_summary(members, m) for m in test_metrics},
            "train_seconds": summarize(r["train_seconds"] for r in members),
            "epochs_run": summarize(r["epochs_run"] for r in members),
        }
        for values, members in groups.items()
    ]


def finite_of_seeds(summary: dict, metric: str) -> str:
    """``"n/seeds"``: how many seeds have a finite ``metric`` out of those run."""
    return f"{summary[metric]['n']}/{len(summary['seeds'])}"


def seed_target(
    metric: dict, value: float | None, threshold: float, higher_is_better: bool
) -> tuple[bool | None, str | None]:
    """``(met, note)`` of a target on ``value`` (a statistic of the :func:`summarize_seeds`
    ``metric`` dict): not met, with the seeds named, when any seed's value is not finite
    (a diverged run cannot meet a target), else :func:`met` and no note."""
    bad = metric.get("nonfinite_seeds") or []
    if bad:
        n = metric["n"]
        return False, f"seed(s) {', '.join(map(str, bad))} not finite (diverged); value over {n}"
    return met(value, threshold, higher_is_better), None


def fmt(value: float | None, digits: int = 3) -> str:
    """A number for a table; ``—`` for a missing one."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:.{digits}f}"


def fmt_mean_std(summary: dict, digits: int = 3) -> str:
    """``mean ± std`` (or just the mean with one value) of a :func:`summarize` dict."""
    if summary["mean"] is None:
        return "—"
    if summary["std"] is None:
        return fmt(summary["mean"], digits)
    return f"{fmt(summary['mean'], digits)} ± {fmt(summary['std'], digits)}"


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A GitHub markdown table; cells are converted with ``str``."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def write_outputs(out_dir: Path, stem: str, payload: dict, markdown: str | None = None) -> None:
    """Write ``stem.json`` (NaN as null) and, when given, ``stem.md`` into ``out_dir``.

    The scripts call it after every run without markdown (``"complete": false`` in the
    payload), so a long run that dies keeps what it measured.
    """
    write_json(out_dir / f"{stem}.json", payload)
    if markdown is not None:
        (out_dir / f"{stem}.md").write_text(markdown.rstrip() + "\n", encoding="utf-8")


def finish(out_dir: Path, stem: str, payload: dict, render: Callable[[dict], str]) -> int:
    """End a script: mark ``payload`` complete, write ``stem.json`` and ``stem.md``
    (``render(payload)``), print the markdown; returns the exit code 0."""
    payload["complete"] = True
    markdown = render(payload)
    write_outputs(out_dir, stem, payload, markdown)
    print(markdown)
    return 0


def met(value: float | None, threshold: float, higher_is_better: bool) -> bool | None:
    """Whether ``value`` meets ``threshold`` (``None`` when there is no value)."""
    if value is None:
        return None
    return value >= threshold if higher_is_better else value <= threshold


def yes_no(flag: bool | None) -> str:
    """``yes`` / ``no`` / ``—`` for a target table."""
    return "—" if flag is None else ("yes" if flag else "**no**")
