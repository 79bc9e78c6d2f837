"""The ``graphattn`` command: a thin layer over the library.

graphattn train     [--dataset NAME | --csv FILE ... | --edges FILE --labels FILE ...]
graphattn predict   --model RUN_DIR --csv FILE [--smiles-col COL] --out FILE
graphattn evaluate  --model RUN_DIR --csv FILE [--smiles-col COL] [--target-col [COL=]TARGET ...]
graphattn bench     [--quick] --out DIR
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import logging
import os
import re
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import numpy as np

from graphattn.bench.cases import SUITES
from graphattn.cli.interrupts import interrupts_not_lost
from graphattn.errors import GraphInputError

DEFAULT_DATASET = "nci-tpsa"
MOLECULE_SETS = ("esol", "freesolv", "nci-tpsa")
NODE_SETS = ("karate", "facebook-pages")
FILE_SETS = ("esol", "freesolv", "facebook-pages")  # read from --data-dir or downloaded
EMBEDDED_SETS = {"nci-tpsa": "RDKit", "karate": "networkx"}
DELIMITERS = ("comma", "tab", "semicolon", "whitespace")  # train.nodes.CLI_DELIMITERS
HEADERS = ("auto", "yes", "no")
NODE_FILE_FLAGS = ("labels", "features", "text_col", "label_col", "delimiter", "header")
CSV_FLAGS = ("smiles_col", "target_cols")
NODE_ONLY_FLAGS = ("labels_per_class",)
MOLECULE_ONLY_FLAGS = (
    "split",
    "batch_size",
    "task",
    "no_descriptors",
    "atom_contributions",
    "xtb_energies",
    "ensemble",
    "workers",
    "init_from",
    "refit",
)


def _add_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train a model and write a run folder",
        description="Train on molecules (--dataset esol|freesolv|nci-tpsa, or --csv) or on "
        "the nodes of one graph (--dataset karate|facebook-pages, or --edges) and write "
        "the run folder: model.pt, metrics.json, predictions.csv, plots. Unset settings "
        "take the tuned defaults of the named set.",
    )
    src = p.add_argument_group("data (one of)")
    src.add_argument(
        "--dataset",
        help=f"named set: {', '.join(MOLECULE_SETS + NODE_SETS)} "
        f"(default {DEFAULT_DATASET}, embedded, no download)",
    )
    src.add_argument("--csv", type=_user_path, help="molecule CSV file")
    src.add_argument("--smiles-col", help="SMILES column of --csv (default: smiles)")
    src.add_argument(
        "--target-col",
        action="append",
        dest="target_cols",
        help="target column of --csv (repeat for several targets)",
    )
    src.add_argument(
        "--edges", type=_user_path, help="edge list (comma-, tab- or whitespace-separated text)"
    )
    src.add_argument("--labels", type=_user_path, help="node label file for --edges")
    src.add_argument("--features", type=_user_path, help="optional node feature file for --edges")
    src.add_argument("--text-col", help="text column of --features/--labels turned into features")
    src.add_argument(
        "--label-col",
        help="label column (header name) of --labels (default: a column named 'label', "
        "else the last)",
    )
    src.add_argument(
        "--delimiter",
        choices=DELIMITERS,
        help="delimiter of the --edges/--labels/--features files (default: sniffed)",
    )
    src.add_argument(
        "--header",
        choices=HEADERS,
        help="whether the --edges/--labels/--features files start with a header "
        "(default auto: detected per file)",
    )
    src.add_argument(
        "--data-dir",
        type=_user_path,
        help="folder with the named data sets' files "
        "(default: $GRAPHATTN_DATA, then the download cache)",
    )
    p.add_argument(
        "--split",
        choices=("random", "scaffold"),
        help="molecules: random or Bemis-Murcko scaffold split (default: random 80/10/10)",
    )
    p.add_argument(
        "--split-fractions",
        type=float,
        nargs=3,
        metavar=("TRAIN", "VAL", "TEST"),
        help="fractions (molecules default 0.8 0.1 0.1, nodes 0.6 0.2 0.2)",
    )
    p.add_argument(
        "--labels-per-class",
        type=_positive_int,
        help="nodes: k training labels per class (the rest split between validation and "
        "test) instead of --split-fractions",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seeds the split, the initialisation, dropout and the batch order (default: 0)",
    )
    tuned = "; a named set may tune it. metrics.json's config records the value used"
    p.add_argument(
        "--epochs",
        type=_positive_int,
        help=f"maximum epochs (default: molecules 80, nodes 300{tuned})",
    )
    p.add_argument(
        "--batch-size",
        type=_positive_int,
        help="molecules: molecules per training batch (default: 32)",
    )
    p.add_argument(
        "--lr",
        type=float,
        help="peak learning rate of AdamW; molecules warm up to it for 5 epochs (half the "
        "run if that is not longer), then decay it along a cosine "
        f"(default: molecules 0.001, nodes 0.005{tuned})",
    )
    p.add_argument(
        "--patience",
        type=_positive_int,
        help="stop after this many epochs without a better validation metric "
        f"(default: molecules 30, nodes 60{tuned})",
    )
    p.add_argument(
        "--task",
        choices=("regression", "classification"),
        help="molecules: task of the --csv targets; classification needs 0/1 labels "
        "(default: regression)",
    )
    p.add_argument(
        "--mode",
        choices=("sparse", "dense", "auto"),
        default="sparse",
        help="attention over the edge list (sparse), as N x N scores with an adjacency mask "
        "(dense), or picked per batch by a cost model (auto); the same weights in every "
        "mode (default: sparse)",
    )
    p.add_argument(
        "--no-descriptors",
        action="store_true",
        help="molecules: graph features only, no RDKit whole-molecule descriptors",
    )
    p.add_argument(
        "--atom-contributions",
        action="store_true",
        help="molecules: add per-atom Crippen, TPSA, surface-area, Gasteiger-charge and "
        "E-state columns to the atom features",
    )
    p.add_argument(
        "--xtb-energies",
        nargs="+",
        default=[],
        metavar="METHOD/SOLVATION",
        help="molecules: add computed hydration energies (kcal/mol, implicit water minus gas "
        "phase, one conformer) of these xTB models to the whole-molecule inputs, e.g. "
        "GFN1-xTB/alpb GFN1-xTB/gbsa; needs tblite (pip install 'graphattn[xtb]'), about "
        "0.1 s per molecule for three models, at prediction too; molecules xTB fails on "
        "are skipped",
    )
    p.add_argument(
        "--ensemble",
        type=int,
        metavar="N",
        help="molecules: train N models from different initialisations and average their "
        "predictions (default: the tuned value; 3 for esol and freesolv, else 1)",
    )
    p.add_argument(
        "--refit",
        action=argparse.BooleanOptionalAction,
        help="molecules: after early stopping, train each model again on the training and "
        "validation molecules together for the epochs it chose; the saved model, the test "
        "metrics and predictions.csv are the refitted ones, the validation metrics those "
        "of the early-stopped models (default: the tuned value; on for freesolv from its "
        "pretrained start, else off)",
    )
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="molecules: train up to N ensemble members at once on the CPU, each in its own "
        "process with one torch thread (default: one per member, up to twice the usable cores; "
        "1 on a single core)",
    )
    p.add_argument(
        "--init-from",
        type=os.path.expanduser,
        metavar="RUN_DIR",
        help="molecules: start from this run's atom/bond encoders and attention layers "
        "(transfer learning; same featurizer needed); the head is trained from scratch. "
        "A shipped encoder's name also works (default: xtb-hydration-57k for freesolv, "
        "fine-tuned without dropout and refitted, unless "
        "--hidden/--layers/--heads/--atom-contributions change what it fits; a folder of "
        "that name is ./xtb-hydration); 'none': from scratch",
    )
    p.add_argument(
        "--hidden",
        type=_positive_int,
        help=f"width of the network, a multiple of --heads (default: 64{tuned})",
    )
    p.add_argument(
        "--layers",
        type=int,
        help=f"attention layers (default: molecules 3, nodes 2{tuned})",
    )
    p.add_argument(
        "--heads", type=_positive_int, help=f"attention heads per layer (default: 4{tuned})"
    )
    _add_compute(p)
    p.add_argument(
        "--out",
        type=_user_path,
        default=Path("runs/latest"),
        help="run folder (default: runs/latest)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def _add_inference(p: argparse.ArgumentParser) -> None:
    """The flags predict and evaluate share: progress, attention mode, device, threads."""
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument(
        "--mode",
        choices=("sparse", "dense", "auto"),
        help="attention mode to predict with (default: the model's own); the weights are "
        "the same in every mode, only speed and memory differ",
    )
    _add_compute(p)


def _add_compute(p: argparse.ArgumentParser) -> None:
    """``--device`` and ``--threads``: where the run computes."""
    p.add_argument(
        "--device",
        default="cpu",
        help="cpu (default), cuda, cuda:N, or auto (CUDA when torch sees a GPU)",
    )
    p.add_argument(
        "--threads",
        type=_positive_int,
        metavar="N",
        help="CPU threads of torch and of graphattn's Numba kernels in this process "
        "(default: torch's choice, one per core). Use 1 when several runs share the "
        "cores: threads of two runs that spin while they wait slow both down",
    )


def _nonnegative_int(text: str) -> int:
    value = _whole_number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _user_path(text: str) -> Path:
    """A path argument with ``~`` expanded: the shell leaves ``--out=~/run`` as it is,
    which would write a folder named ``~`` here."""
    return Path(text).expanduser()


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def _positive_int(text: str) -> int:
    value = _whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _add_predict(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "predict",
        help="predict molecules of a CSV with a trained model",
        description="Write the input CSV with pred_<target> columns (classification: "
        "pred_<target> is the logit, positive for class 1, averaged over an ensemble's "
        "members, and prob_<target> its sigmoid, the probability of class 1; a regression "
        "ensemble: also std_<target>, the members' standard deviation, which ranks "
        "molecules by disagreement and is not an error bar) and an error column; one "
        "output row per input row, in order.",
    )
    p.add_argument("--model", type=_user_path, required=True, help="run folder made by train")
    p.add_argument("--csv", type=_user_path, required=True, help="input CSV with a header")
    p.add_argument("--smiles-col", default="smiles", help="SMILES column (default: smiles)")
    p.add_argument("--out", type=_user_path, required=True, help="output CSV")
    _add_inference(p)


def _add_evaluate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "evaluate",
        help="metrics of a trained model on a labelled CSV",
        description="Print JSON: the model's metrics over the rows it can read, num_failed "
        "(rows whose SMILES cannot be read, left out of the metrics) and num_bad_labels "
        "(label cells that are not numbers, read as missing).",
    )
    p.add_argument("--model", type=_user_path, required=True, help="run folder made by train")
    p.add_argument(
        "--csv", type=_user_path, required=True, help="labelled CSV with a header and the SMILES"
    )
    p.add_argument("--smiles-col", default="smiles", help="SMILES column (default: smiles)")
    p.add_argument(
        "--target-col",
        action="append",
        dest="target_cols",
        help="target to evaluate: a model target read from the column of that name, or "
        "COLUMN=TARGET (repeat for several); default: every model target",
    )
    p.add_argument("--out", type=_user_path, help="also write the metrics JSON here")
    _add_inference(p)


def _add_bench(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="sparse vs dense vs PyG benchmark",
        description="Time forward + backward of one attention layer (sparse, dense, PyG) "
        "on synthetic graphs and ESOL molecules, and training steps of the molecule model; "
        "median of repeated runs and peak memory. Writes bench.json, bench.md and plots "
        "to --out (benchmarks/README.md explains them).",
    )
    p.add_argument("--quick", action="store_true", help="tiny grid (seconds), for CI")
    p.add_argument(
        "--out",
        type=_user_path,
        default=Path("bench_out"),
        help="folder for the JSON, Markdown and plots (default: bench_out)",
    )
    p.add_argument("--repeats", type=_positive_int, help="timed repeats per case (median reported)")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (default: auto)")
    p.add_argument(
        "--data-dir",
        type=_user_path,
        help="folder with esol/ (default: $GRAPHATTN_DATA, then the download cache)",
    )
    p.add_argument(
        "--paired-rounds",
        type=_nonnegative_int,
        help="rounds of the paired auto-vs-modes timing (default 12, quick 2; 0: skip)",
    )
    p.add_argument(
        "--suites",
        nargs="+",
        choices=SUITES,
        help=f"run only these suites (default: all of {', '.join(SUITES)})",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def _numba_problem() -> str | None:
    """Why graphattn's kernels do not use the installed Numba, or ``None`` (the rule of
    :func:`graphattn.ops.compiled.numba_available`, without importing torch)."""
    try:
        import numba
    except Exception as error:  # its metadata is installed: the module is missing or broken
        return f"Numba does not import: {type(error).__name__}: {error}"
    return "NUMBA_DISABLE_JIT is set" if numba.config.DISABLE_JIT else None


def _versions() -> str:
    """``graphattn X (Python Y; torch Z, ...)``, read from the installed packages'
    metadata, so that ``--help`` and ``--version`` do not import torch."""
    from importlib.metadata import PackageNotFoundError, version

    from graphattn import __version__

    found = []
    for package in ("torch", "torch_geometric", "rdkit", "numba", "triton"):
        try:
            found.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            found.append(f"{package} not installed")
        else:
            if package == "numba" and (problem := _numba_problem()):
                found[-1] += f" (not used: {problem})"
    python = ".".join(str(part) for part in sys.version_info[:3])
    return f"graphattn {__version__} (Python {python}; {', '.join(found)})"


class _PrintVersions(argparse.Action):
    """``--version``: like argparse's ``version`` action, but the versions are read only
    when asked for (reading the metadata costs ~30 ms, more than building the parser)."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None):
        super().__init__(option_strings, dest=argparse.SUPPRESS, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(_versions())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="graphattn", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log more (INFO level)")
    parser.add_argument(
        "--version",
        action=_PrintVersions,
        help="print the versions of graphattn and of its main dependencies (for bug reports)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for add in (_add_train, _add_predict, _add_evaluate, _add_bench):
        add(sub)
    return parser


def _check_train_sources(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse two data sources at once, and flags that the chosen source would ignore."""
    given = [f"--{name}" for name in ("edges", "dataset", "csv") if getattr(args, name)]
    if len(given) > 1:
        sources = f"{', '.join(given[:-1])} and {given[-1]}"
        parser.error(f"{sources} are alternatives: give one data source")
    needs = {"--edges": (args.edges, NODE_FILE_FLAGS), "--csv": (args.csv, CSV_FLAGS)}
    for source, (value, flags) in needs.items():
        for name in flags:
            if value is None and getattr(args, name) is not None:
                parser.error(f"{_flag(name)} needs {source}")
    if args.data_dir is not None and given and given[0] != "--dataset":
        parser.error(f"--data-dir is for the named data sets; {given[0]} reads the file it names")
    if args.data_dir is not None and (not given or args.dataset in EMBEDDED_SETS):
        name = args.dataset or DEFAULT_DATASET
        parser.error(
            f"--data-dir is for the data sets read from files ({', '.join(FILE_SETS)}); "
            f"{name} ships with {EMBEDDED_SETS[name]} and reads no file"
        )
    if args.edges is not None and args.labels is None:
        parser.error("--edges needs --labels, a file of node labels to learn from")
    if args.csv is not None and not args.target_cols:
        parser.error("--csv needs at least one --target-col")
    if args.dataset is not None and args.dataset not in MOLECULE_SETS + NODE_SETS:
        return  # which kind is unknown: the unknown name is the error, said later
    # a flag only the other kind of training uses would be ignored
    nodes = args.edges is not None or args.dataset in NODE_SETS
    flags, kind = (MOLECULE_ONLY_FLAGS, "molecule") if nodes else (NODE_ONLY_FLAGS, "node")
    for flag in flags:
        if getattr(args, flag) != parser.get_default(flag):  # given (--no-refit too)
            parser.error(f"{_flag(flag)} applies to {kind} training only")


def _subcommand_parser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of subcommand ``name`` (argparse keeps it in its subparsers action)."""
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return commands.choices[name]


def _flag(dest: str) -> str:
    """The command-line spelling of an argument (``target_cols`` is ``--target-col``)."""
    return "--target-col" if dest == "target_cols" else "--" + dest.replace("_", "-")


def _overrides(args: argparse.Namespace, names: tuple[str, ...]) -> dict:
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}


def cmd_train(args: argparse.Namespace) -> int:
    from graphattn.train.loop import check_run_folder, training_device

    check_run_folder(args.out)  # an --out that is a file fails now, not after the data
    training_device(args.device)  # so does a device this machine lacks
    if args.edges is not None or (args.dataset in NODE_SETS):
        return _train_nodes(args)
    return _train_molecules(args)


def _train_molecules(args: argparse.Namespace) -> int:
    from graphattn.datasets.files import file_title
    from graphattn.datasets.molecules import (
        MoleculeCSV,
        dataset_featurizer,
        load_molecule_dataset,
    )
    from graphattn.featurize.molecule import MoleculeFeaturizer
    from graphattn.train.molecules import check_train_config, train_molecule_model

    features = {
        "descriptors": not args.no_descriptors,
        "contributions": args.atom_contributions,
        "xtb": args.xtb_energies,
    }
    if args.csv is not None:
        name, featurizer = file_title(args.csv), MoleculeFeaturizer(**features)
    else:
        name = args.dataset or DEFAULT_DATASET
        if name not in MOLECULE_SETS:
            choices = MOLECULE_SETS + NODE_SETS
            raise GraphInputError(f"unknown data set {name!r}; choose from {choices}")
        featurizer = dataset_featurizer(name, **features)
    # a CSV gets the generic settings, whatever its file is called ("esol", "freesolv")
    config = _molecule_config(args, name if args.csv is None else "")
    check_train_config(config)  # before the featurizer reads the data
    if args.csv is not None:
        smiles_col, targets = args.smiles_col or "smiles", args.target_cols
        dataset = MoleculeCSV(
            args.csv, smiles_col, targets, featurizer=featurizer, progress=not args.no_progress
        )
    else:
        dataset = load_molecule_dataset(
            name, data_dir=args.data_dir, featurizer=featurizer, progress=not args.no_progress
        )
    metrics = train_molecule_model(
        dataset, config, run_dir=args.out, dataset_name=name, progress=not args.no_progress
    )
    metrics.pop("model")
    metrics.pop("scaler")
    _report(args.out, metrics)
    return 0


def _molecule_config(args: argparse.Namespace, name: str):
    """The ``MoleculeTrainConfig`` of a molecule run: the tuned settings of the named set
    ``name`` ("" for none), with the flags given on top."""
    from graphattn.train.molecules import (
        MoleculeTrainConfig,
        dataset_train_settings,
        default_workers,
    )

    architecture = _overrides(args, ("hidden", "layers", "heads"))
    if args.init_from is None:  # the data set's default start, if it fits
        settings = dataset_train_settings(name, architecture, args.atom_contributions)
    elif args.init_from == "none":
        settings = dataset_train_settings(name, scratch=True)
    else:
        settings = {**dataset_train_settings(name), "init_from": args.init_from}
    tuned = ("epochs", "batch_size", "lr", "patience", "ensemble", "refit")
    settings.update(_overrides(args, tuned))
    model = {**settings.pop("model", {}), "mode": args.mode, **architecture}
    config = MoleculeTrainConfig(
        seed=args.seed,
        **_overrides(args, ("split", "task")),
        model=model,
        device=args.device,
        **settings,
    )
    config.workers = default_workers(config.ensemble) if args.workers is None else args.workers
    if args.split_fractions:
        config.fractions = tuple(args.split_fractions)
    return config


def _train_nodes(args: argparse.Namespace) -> int:
    from graphattn.train.nodes import DATASET_DEFAULTS, NodeTrainConfig, train_node_model_cli

    settings = dict(DATASET_DEFAULTS.get(args.dataset, {})) if args.edges is None else {}
    names = ("epochs", "lr", "patience", "hidden", "layers", "heads", "labels_per_class")
    settings.update(_overrides(args, names))
    config = NodeTrainConfig(seed=args.seed, mode=args.mode, device=args.device, **settings)
    if args.split_fractions:
        config.fractions = tuple(args.split_fractions)
    metrics = train_node_model_cli(args, config)
    _report(args.out, metrics)
    return 0


def _report(run_dir: Path, metrics: dict) -> None:
    from graphattn.train.loop import to_json  # standard JSON, as in metrics.json: no NaN

    summary = {
        k: metrics[k]
        for k in ("task", "dataset", "test", "epochs_run", "train_seconds")
        if k in metrics
    }
    print(to_json(summary))
    print(f"run folder: {run_dir}")


def _read_csv(path: Path, strip: bool = True) -> tuple[list[str], list[list[str]]]:
    """Header (names stripped unless ``strip`` is false: predict writes the header back
    as it was) and rows of a CSV file, read as ``train`` reads it: UTF-8 with or without
    a byte-order mark; blank lines are not rows."""
    from graphattn.datasets.csv_file import CsvRows

    with CsvRows(path) as table:
        rows = list(table)
    header = [name.strip() if strip else name for name in rows.pop(0)] if rows else []
    if not header:
        raise GraphInputError(f"{path}: empty file, expected a header row")
    return header, rows


def _smiles_of_rows(
    path: Path, header: list[str], rows: list[list[str]], smiles_col: str
) -> tuple[list[str], list[str]]:
    """The SMILES of each row, and a problem per row ("" when none): a row whose number
    of fields differs from the header's gets no SMILES and says so (and names the
    fields past the header's, which the output row has no column for)."""
    from graphattn.datasets.molecules import column_index

    at = column_index(header, smiles_col, path)
    smiles, problems = [], []
    for fields in rows:
        ok = len(fields) == len(header)
        smiles.append(fields[at].strip() if ok else "")
        problem = "" if ok else f"row has {len(fields)} fields, the header has {len(header)}"
        if len(fields) > len(header):
            problem += f"; extra fields: {fields[len(header) :]}"
        problems.append(problem)
    return smiles, problems


def _check_output_file(
    path: Path | None, inputs: dict[str, Path] | None = None, source: Path | None = None
) -> None:
    """Refuse an output file that is a folder, or one of the files the command reads or
    must keep (``inputs``: what it is -> file), before any work is done (it is written
    last). ``source`` is an input that the output may replace (``predict``'s ``--csv``)."""
    from graphattn.train.loop import file_in_the_way

    if path is not None and path.is_dir():
        raise GraphInputError(f"--out {path} is a folder; name the file to write")
    blocker = None if path is None else file_in_the_way(path.parent)
    if blocker is not None:
        raise GraphInputError(f"--out {path} cannot be written: {blocker} is a file")
    problem = None if path is None else _cannot_write(path, source)
    if problem is not None:
        raise GraphInputError(f"--out {path} cannot be written ({problem})")
    for what, read in (inputs or {}).items():
        if path is not None and path.is_file() and read.is_file() and path.samefile(read):
            raise GraphInputError(f"--out {path} is {what}; name another file to write")


def _cannot_write(path: Path, source: Path | None = None) -> str | None:
    """Why the output file ``path`` cannot be written, or ``None``: an existing file is
    written in place, a new one is created in its folder, and the ``source`` file itself
    is replaced by a new file beside it (see :func:`_output`); streams and devices are
    left to ``open``."""
    from graphattn.train.loop import unwritable_folder

    if str(path).startswith(_STREAMS) or (path.exists() and not path.is_file()):
        return None
    if path.is_file():  # access() also reports a read-only mount, to root too
        if not os.access(path, os.W_OK):
            return f"{path}: not writable"
        if source is not None and _same_file(path, source):
            problem = unwritable_folder(Path(os.path.realpath(path)).parent)
            if problem is not None:
                return f"writing over its own --csv needs a new file in {problem}"
        return None
    return unwritable_folder(path.parent)


def _run_files(model: Path) -> dict[str, Path]:
    """The files of the run that ``--model`` names, which ``--out`` must not replace."""
    from graphattn.train.checkpoint import checkpoint_file
    from graphattn.train.loop import RUN_FILES

    checkpoint = checkpoint_file(model)
    run_files = {f"the run's {name}": checkpoint.parent / name for name in RUN_FILES}
    return {"the --model file": checkpoint, **run_files}


_STREAMS = ("/dev/stdout", "/dev/stderr", "/dev/fd/", "/proc/self/fd/")


@contextlib.contextmanager
def _output(path: Path, source: Path | None = None) -> Iterator[TextIO]:
    """A text handle writing the output file ``path``.

    When ``path`` is the ``source`` file being read (``predict --out`` may name its own
    ``--csv``), the output goes to a temporary file beside it that replaces it only once
    complete, so a failed write (a full disk, Ctrl-C) cannot leave it half-empty. A
    standard stream (``/dev/stdout``) is appended to: "w" would truncate the file a
    shell's ``>>`` sent it to. Anything else is written in place, as ``open`` does.
    """
    if str(path).startswith(_STREAMS):
        with open(path, "a", newline="", encoding="utf-8") as handle:
            yield handle
        return
    if source is None or not _same_file(path, source):
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", newline="", encoding="utf-8") as handle:
            yield handle
        return
    target = Path(os.path.realpath(path))  # a link's target is replaced, not the link
    if not os.access(target, os.W_OK):
        raise PermissionError(f"{path}: the file is not writable")
    try:
        fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    except OSError as err:
        raise OSError(
            f"{path}: writing the output over its own input needs a temporary file in "
            f"{target.parent} ({err.strerror}); pass another --out"
        ) from err
    try:
        with open(fd, "w", newline="", encoding="utf-8") as handle:
            yield handle
        os.chmod(temporary, target.stat().st_mode & 0o7777)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one does not exist, or a folder on its way does not (nosuch/../f)
        return os.path.realpath(a) == os.path.realpath(b)


def cmd_predict(args: argparse.Namespace) -> int:
    from graphattn.datasets.molecules import describe_row
    from graphattn.train.molecule_inference import (
        float32_text,
        fresh_name,
        load_molecule_checkpoint,
        predict_molecules,
        prediction_columns,
        reports_spread,
    )

    _check_output_file(args.out, _run_files(args.model), source=args.csv)
    checkpoint = load_molecule_checkpoint(args.model)
    targets = checkpoint["target_cols"]
    header, rows = _read_csv(args.csv, strip=False)  # the output keeps the input's names
    smiles, problems = _smiles_of_rows(args.csv, header, rows, args.smiles_col)
    preds, errors, std = predict_molecules(
        args.model,
        smiles,
        device=args.device,
        return_std=True,
        progress=not args.no_progress,
        mode=args.mode,
    )
    errors = [problem or error for problem, error in zip(problems, errors, strict=True)]
    spread = std if reports_spread(checkpoint) else None
    wanted, preds = prediction_columns(checkpoint["task"], targets, preds, spread)
    # names are matched stripped, as readers here match them; every new name is kept
    # from the renamed ones, or pred_y_2 could be y's prediction beside a target y_2
    inputs = {name.strip() for name in header}
    taken = inputs | {*wanted, "error"}
    added = [fresh_name(name, taken) if name in inputs else name for name in [*wanted, "error"]]
    renamed = [name for name in added if name not in {*wanted, "error"}]
    if renamed:
        print(f"the input has columns named like the output's: writing {renamed}", file=sys.stderr)
    with _output(args.out, source=args.csv) as handle:
        writer = csv.writer(handle)
        writer.writerow([*header, *added])
        for fields, pred, error in zip(rows, preds, errors, strict=True):
            cells = (fields + [""] * len(header))[: len(header)]
            values = [float32_text(p) for p in pred]  # as in the run's predictions.csv
            writer.writerow([*cells, *values, error])
    failed = sum(1 for e in errors if e)
    print(
        f"predicted {len(rows) - failed} of {len(rows)} rows ({failed} failed) -> {args.out}",
        file=sys.stderr,  # stdout may be the CSV itself (--out /dev/stdout)
    )
    _note_unusual_molecules(smiles, checkpoint)
    if rows and failed == len(rows):  # a wrong --smiles-col that exists, say
        first = next(i for i, e in enumerate(errors) if e)
        print(f"no row was predicted ({describe_row(first, errors[first])})", file=sys.stderr)
        return 1
    return 0


# A bracketed hydrogen atom: [H], [2H], [3H+]; not [nH], [NH4+] or [Hg].
_HYDROGEN_ATOM = re.compile(r"\[\d*H[^a-z]")


def _unusual_rows(smiles: list[str]) -> tuple[list[int], list[int]]:
    """Rows whose SMILES parses to several disconnected fragments (a salt, a mixture), and
    rows that keep hydrogen atoms as atoms (RDKit keeps isotopes such as [2H], and
    hydrogens without a heavy neighbour). Only a SMILES with a '.' or a bracketed
    hydrogen can be either, so most rows are not parsed again."""
    from rdkit import Chem, rdBase

    fragments, hydrogens = [], []
    with rdBase.BlockLogs():  # unparsable rows are reported elsewhere
        for i, text in enumerate(smiles):
            if "." not in text and not _HYDROGEN_ATOM.search(text):
                continue
            mol = Chem.MolFromSmiles(text.strip())
            if mol is None:
                continue
            if len(Chem.GetMolFrags(mol)) > 1:
                fragments.append(i)
            # not GetNumHeavyAtoms(): RDKit counts a dummy atom (*) as neither
            if any(atom.GetAtomicNum() == 1 for atom in mol.GetAtoms()):
                hydrogens.append(i)
    return fragments, hydrogens


def _note_unusual_molecules(smiles: list[str], checkpoint: dict) -> None:
    """Notes on stderr about rows the model predicts but may not have learnt to."""
    from graphattn.datasets.molecules import describe_row

    fragments, hydrogens = _unusual_rows(smiles)
    if fragments:
        print(
            f"note: {len(fragments)} row(s) hold several disconnected fragments (e.g. "
            f"{describe_row(fragments[0], smiles[fragments[0]])}); attention runs along bonds "
            "only, so the fragments meet only in the readout. Remove counter-ions and "
            "solvents first if the model was trained on single molecules.",
            file=sys.stderr,
        )
    if hydrogens and not checkpoint["featurizer"].get("add_hs", False):
        print(
            f"note: {len(hydrogens)} row(s) keep hydrogen atoms as graph nodes (e.g. "
            f"{describe_row(hydrogens[0], smiles[hydrogens[0]])}); RDKit keeps isotopes such "
            "as [2H], and hydrogens without a heavy neighbour, as atoms. This model counts "
            "hydrogens on their heavy atoms, so such nodes are likely new to it: write them "
            "as ordinary hydrogens where the isotope does not matter.",
            file=sys.stderr,
        )


_TARGET_COL_HINT = "--target-col COLUMN=TARGET reads a target from a column named otherwise"


def _evaluated_columns(
    path: Path, header: list[str], requested: list[str] | None, targets: list[str]
) -> dict[str, str]:
    """Model target -> CSV column: ``--target-col NAME`` (a model target in a column of
    that name) or ``--target-col COLUMN=TARGET``; by default every model target."""
    from graphattn.datasets.molecules import column_index

    # Headers are read stripped, as training now strips target names; a model trained
    # before that may hold a name with surrounding spaces.
    stored = {target.strip(): target for target in targets}
    if len(stored) < len(targets):
        raise GraphInputError(
            f"the model's targets {targets} differ only by surrounding spaces, and CSV "
            "headers are read stripped: score it in Python (evaluate_molecules)"
        )
    targets = list(stored)
    pairs = [_column_and_target(r, targets) for r in requested or targets]
    asked = [target for _, target in pairs]
    repeated = sorted({t for t in asked if asked.count(t) > 1})
    if repeated:
        raise GraphInputError(f"target(s) {repeated} asked for more than once")
    unknown = [t for t in asked if t not in targets]
    if unknown:
        raise GraphInputError(
            f"the model has no target(s) {unknown}; its targets are {targets} ({_TARGET_COL_HINT})"
        )
    missing = [c for c, _ in pairs if c not in header]
    if missing:
        raise GraphInputError(
            f"{path}: missing column(s) {missing}; columns are {header} (the model's "
            f"targets are {targets}; {_TARGET_COL_HINT})"
        )
    for column, _ in pairs:
        column_index(header, column, path)  # refuses a column the header holds twice
    return {stored[target]: column for column, target in pairs}


def _column_and_target(text: str, targets: list[str]) -> tuple[str, str]:
    """``(column, target)`` of one ``--target-col``: a model target (whose name may hold
    '='), else ``COLUMN=TARGET`` split at the '=' that leaves a model target on the right."""
    text = text.strip()
    if text in targets or "=" not in text:
        return text, text
    splits = [(text[:i].strip(), text[i + 1 :].strip()) for i, c in enumerate(text) if c == "="]
    known = [(column, target) for column, target in splits if target in targets]
    return known[0] if known else splits[0]


def _labels(
    header: list[str],
    rows: list[list[str]],
    chosen: dict[str, str],
    targets: list[str],
    task: str = "regression",
) -> tuple[np.ndarray, list[dict]]:
    """``[n, T]`` labels in the model's target order (NaN: not given or not evaluated),
    and the cells that are not numbers (or, for a classifier, not 0 or 1), which are
    read as missing."""
    from graphattn.datasets.molecules import parse_target

    labels = np.full((len(rows), len(targets)), np.nan)
    cells = [
        (targets.index(target), header.index(column), column) for target, column in chosen.items()
    ]  # columns found once each by _evaluated_columns
    bad = []
    for i, fields in enumerate(rows):
        for slot, at, column in cells:
            text = fields[at] if len(fields) == len(header) else ""
            try:
                value = parse_target(text, column)
                if task == "classification" and not (np.isnan(value) or value in (0.0, 1.0)):
                    raise ValueError(f"class label {column!r} must be 0 or 1: {text.strip()!r}")
                labels[i, slot] = value
            except ValueError as err:
                bad.append({"row": i, "column": column, "value": text, "reason": str(err)})
    return labels, bad


def cmd_evaluate(args: argparse.Namespace) -> int:
    from graphattn.datasets.molecules import column_index, describe_row
    from graphattn.train.loop import to_json
    from graphattn.train.molecule_inference import evaluate_molecules, load_molecule_checkpoint

    _check_output_file(args.out, {"the --csv file": args.csv, **_run_files(args.model)})
    checkpoint = load_molecule_checkpoint(args.model)
    targets = list(checkpoint["target_cols"])
    header, rows = _read_csv(args.csv)
    chosen = _evaluated_columns(args.csv, header, args.target_cols, targets)
    smiles, problems = _smiles_of_rows(args.csv, header, rows, args.smiles_col)
    labels, bad = _labels(header, rows, chosen, targets, checkpoint["task"])
    result = evaluate_molecules(
        args.model,
        smiles,
        labels,
        device=args.device,
        progress=not args.no_progress,
        mode=args.mode,
    )
    result["targets"] = chosen
    result["num_bad_labels"] = len(bad)
    result["bad_labels"] = bad[:20]
    if bad:
        first = bad[0]
        valid = "0 or 1" if checkpoint["task"] == "classification" else "numbers"
        print(
            f"{len(bad)} label cell(s) are not {valid} and were read as missing (e.g. "
            f"{describe_row(first['row'], first['reason'])})",
            file=sys.stderr,
        )
    at = column_index(header, args.smiles_col, args.csv)
    for failed in result["failed_rows"]:
        fields, problem = rows[failed["row"]], problems[failed["row"]]
        if problem:  # a row of another width: never predicted, its SMILES shown as read
            failed["reason"] = problem
            failed["smiles"] = fields[at].strip() if at < len(fields) else ""
    if result["failed_rows"]:
        first = result["failed_rows"][0]
        print(
            f"{result['num_failed']} row(s) could not be predicted and were not scored (e.g. "
            f"{describe_row(first['row'], first['reason'])}); the first 20 are in failed_rows",
            file=sys.stderr,
        )
    text = to_json(result)
    if not (args.out and _same_file(args.out, Path("/dev/stdout"))):  # else printed twice
        print(text)
    if args.out:
        with _output(args.out) as handle:
            handle.write(text + "\n")
    _note_unusual_molecules(smiles, checkpoint)
    if not any(result["num_scored"].values()):
        print("no labelled row was scored: every metric is null", file=sys.stderr)
        return 1
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from graphattn.bench.runner import exit_status, run_benchmarks, written_line

    result = run_benchmarks(
        out_dir=args.out,
        quick=args.quick,
        repeats=args.repeats,
        device=args.device,
        progress=not args.no_progress,
        data_dir=args.data_dir,
        paired_rounds=args.paired_rounds,
        suites=args.suites,
    )
    print(written_line(result, args.out))
    return exit_status(result, "graphattn bench")


COMMANDS = {
    "train": cmd_train,
    "predict": cmd_predict,
    "evaluate": cmd_evaluate,
    "bench": cmd_bench,
}


def main(argv: list[str] | None = None) -> int:
    if sys.stderr is None:  # started with stderr closed (2>&-): tqdm and argparse need one
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (the process keeps it)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "train":  # errors as `graphattn train: error: ...`, with its usage
        _check_train_sources(_subcommand_parser(parser, "train"), args)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        with interrupts_not_lost():  # one Ctrl-C is enough, even while Numba compiles
            return _run_command(args)
    except KeyboardInterrupt:  # Ctrl-C: one line, not a traceback from deep in training
        out = getattr(args, "out", None) if args.command == "train" else None
        partial = f" ({out} may hold a partial run)" if out and Path(out).exists() else ""
        print(f"graphattn {args.command}: interrupted{partial}", file=sys.stderr)
        if argv is None and os.name == "posix":
            # the command line: end by SIGINT, as an uncaught Ctrl-C does, so that a shell
            # loop running this command stops too (an exit status of 130 would not)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        return 130  # 128 + SIGINT, the status a shell reports for a command Ctrl-C ended


def _run_command(args: argparse.Namespace) -> int:
    """Run ``args.command``; a known kind of failure becomes one error line and status 2."""
    # imported here (torch, RDKit: seconds) so that a Ctrl-C meanwhile is handled too
    if getattr(args, "threads", None) is not None:
        import torch

        torch.set_num_threads(args.threads)  # graphattn's Numba kernels follow it
    from graphattn.datasets.files import DatasetChecksumError, DatasetUnavailableError
    from graphattn.train.molecules import WorkerProcessDied

    try:
        return COMMANDS[args.command](args)
    except (
        DatasetUnavailableError,
        DatasetChecksumError,
        GraphInputError,
        OSError,  # a file that cannot be read or written: missing, a folder, no permission
        ImportError,  # an optional dependency (tblite for --xtb-energies) is missing
        WorkerProcessDied,  # an ensemble worker was killed (out of memory, kill -9) or crashed
    ) as err:
        print(f"graphattn {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
