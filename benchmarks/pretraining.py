"""Does pretraining the graph encoder on computed labels help small data sets?

1. Corpus: the ~15,000 molecules that ship with RDKit (``Data/NCI/first_5K.smi`` and
   ``Data/Pains/test_data/wehi_mols.csv``); no labels from any benchmark. With
   ``--corpus rdkit+chemicals`` (``--targets xtb`` only) the FreeSolv-like molecules
   of the PubChem identifier table in the ``chemicals`` package follow them (``pip
   install 'graphattn[corpus]'``: chemicals 1.5.2, MIT): one fragment, no net charge,
   only C H N O S P F Cl Br I with at least one carbon, at most as many heavy atoms as
   FreeSolv's largest, and neither one of FreeSolv's molecules nor one of the RDKit
   corpus (by InChIKey), in a shuffled order (seed 0). FreeSolv's own molecules are left
   out so that no test molecule is seen in pretraining, even with a computed label.
   ``--corpus rdkit+chemicals+moses`` adds ``--moses-molecules`` (30,000) more chosen by
   the same rules from the MOSES training set (1.6 million drug-like ZINC molecules, in
   the ``molsets`` 0.3.1 wheel, MIT: ``pip download molsets==0.3.1 --no-deps``, then
   ``--moses-file`` the wheel), in a shuffled order (seed 0).
2. Pretraining: ``graphattn train`` on that corpus. The model sees the graph only (no
   descriptor inputs), so it has to learn the targets from structure. ``--targets``:

   - ``descriptors``: RDKit's whole-molecule descriptors (signed log1p, as
     :mod:`graphattn.featurize.descriptors` computes them; columns that are constant
     over the corpus dropped), 30 epochs;
   - ``xtb``: the xTB hydration energy (:mod:`graphattn.pretrained.xtb`; needs
     ``tblite``, about 20 minutes on 2 cores per model for the RDKit corpus and an hour
     for the chemicals one, or ``--xtb-labels`` from an earlier run) of the molecules
     with one fragment, no net charge and at most 40 heavy atoms, 60 epochs; one target
     per ``--xtb-models`` entry. With the default, GFN2-xTB/alpb, this run made the
     ``xtb-hydration`` encoder; with ``--corpus rdkit+chemicals`` it made
     ``xtb-hydration-57k``, the one the FreeSolv default starts from (both ship in
     ``graphattn/pretrained/``).
3. Fine-tuning: for each data set and seed, the data set's ``graphattn train``
   defaults trained from scratch and from the pretrained encoder
   (``MoleculeTrainConfig(init_from=...)``), on the same random split.

Writes ``pretraining.json`` / ``pretraining.md`` and the pretrained run folder.

Usage::

    python benchmarks/pretraining.py --data-dir ../shared/datasets --threads 1 --seeds 0 1 2 3 4 5
    python benchmarks/pretraining.py --targets xtb --data-dir ../shared/datasets \\
        --seeds 0 1 2 3 4 5 --xtb-labels "$RESULTS/pretraining_xtb/corpus.csv.gz"
    python benchmarks/pretraining.py --targets xtb --corpus rdkit+chemicals \\
        --data-dir ../shared/datasets --threads 2 --seeds 0 1 2 3 4 5 \\
        --xtb-labels "$RESULTS/pretraining_xtb/corpus.csv.gz" \\
                     "$RESULTS/chedl_xtb_pretraining/chedl_labels.csv.gz"
    # the same with another encoder: --pretrain-model '{"dropout": 0}', or
    # --pretrain-model '{"hidden": 128}' --pretrain-lr 3e-4

(``RESULTS=benchmarks/results/targets/freesolv``; leave ``--xtb-labels`` out to recompute.)
"""

from __future__ import annotations

import argparse
import csv
import gzip
import logging
import os
import random
import sys
import zipfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path

import numpy as np
from _common import (
    Timer,
    add_common_args,
    dataset_smiles,
    finish,
    fmt,
    json_object,
    machine_info,
    machine_line,
    map_in_processes,
    markdown_table,
    positive_int,
    require_datasets,
    run_main,
    setup,
    summarize_seeds,
    write_outputs,
    xtb_model_arg,
)
from rdkit import Chem, RDConfig, rdBase

from graphattn.datasets.molecules import MoleculeCSV, dataset_featurizer, load_molecule_dataset
from graphattn.errors import GraphInputError
from graphattn.featurize.descriptors import DESCRIPTOR_NAMES, molecule_descriptors
from graphattn.featurize.molecule import InvalidSmilesError, MoleculeFeaturizer, parse_smiles
from graphattn.models.molecule import MoleculeModelConfig
from graphattn.pretrained.xtb import PLAUSIBLE_KCAL, corpus_molecule_ok, xtb_hydration_energies
from graphattn.train.molecules import (
    MoleculeTrainConfig,
    check_train_config,
    dataset_train_settings,
    train_molecule_model,
)

log = logging.getLogger("benchmarks")

CORPUS_FILES = ("NCI/first_5K.smi", "Pains/test_data/wehi_mols.csv")
MOSES_CORPUS = "rdkit+chemicals+moses"
CORPUS_CHOICES = ("rdkit", "rdkit+chemicals", MOSES_CORPUS)
# the chemicals package's table: PubChem id, CAS, formula, weight, SMILES, InChI, key, names
CHEMICALS_TABLE = ("Identifiers", "chemical identifiers pubchem large.tsv")
CHEMICALS_SMILES_FIELD = 4
# the MOSES training set inside the molsets wheel, and how many of it to label
MOSES_TRAIN = "moses/dataset/data/train.csv.gz"
MOSES_MOLECULES = 30_000
FREESOLV_ELEMENTS = frozenset({"H", "C", "N", "O", "S", "P", "F", "Cl", "Br", "I"})
PRETRAIN = {"batch_size": 64, "warmup_epochs": 2, "fractions": (0.9, 0.05, 0.05)}
PRETRAIN_EPOCHS = {"descriptors": 30, "xtb": 60}
XTB_COLUMN = "xtb_hydration"
DEFAULT_XTB_MODEL = ("GFN2-xTB", "alpb")
SMOKE_MOLECULES, SMOKE_EPOCHS = 150, 2
SMOKE_XTB_MOLECULES = 40  # xTB labels cost ~0.1 s each


def corpus_smiles(limit: int | None) -> list[str]:
    """The first column of RDKit's shipped molecule files (SMILES), in file order."""
    smiles: list[str] = []
    for name in CORPUS_FILES:
        with open(os.path.join(RDConfig.RDDataDir, name), newline="") as handle:
            rows = csv.reader(handle, delimiter="\t" if name.endswith(".smi") else ",")
            smiles += [row[0].strip() for row in rows if row]
    return smiles[:limit]


def chemicals_table(path: Path | None = None) -> Path:
    """``path`` (``--chemicals-table``), else the PubChem identifier table inside the
    installed ``chemicals`` package; exits with a message when the file is not there."""
    if path is None:
        try:
            import chemicals
        except ImportError:
            raise SystemExit(
                "--corpus rdkit+chemicals reads the chemicals package's PubChem table: "
                "pip install 'graphattn[corpus]' (chemicals==1.5.2), or --chemicals-table FILE"
            ) from None
        path = Path(chemicals.__file__).parent.joinpath(*CHEMICALS_TABLE)
    if not path.is_file():
        raise SystemExit(
            f"chemicals table {path} not found: give the PubChem identifier table of the "
            f"chemicals package ({'/'.join(CHEMICALS_TABLE)} inside it) with --chemicals-table"
        )
    return path


def _not_freesolv_like(mol: Chem.Mol | None, max_heavy_atoms: int) -> str | None:
    """Why a candidate corpus molecule is not FreeSolv-like (``None``: it is)."""
    if mol is None:
        return "unparsable"
    if not corpus_molecule_ok(mol):
        return "not_one_neutral_fragment"
    symbols = {atom.GetSymbol() for atom in mol.GetAtoms()}
    if "C" not in symbols or not symbols <= FREESOLV_ELEMENTS:
        return "other_elements"
    if mol.GetNumHeavyAtoms() > max_heavy_atoms:
        return "too_large"
    return None


class _NewFreeSolvLike:
    """Judges candidate SMILES: FreeSolv-like, and neither one of FreeSolv's molecules,
    nor one of ``corpus``, nor one already kept (by InChIKey)."""

    def __init__(self, freesolv: list[str], corpus: list[str]) -> None:
        with rdBase.BlockLogs():  # unparsable SMILES of either list are no molecule
            freesolv_mols = [mol for mol in map(Chem.MolFromSmiles, freesolv) if mol is not None]
            corpus_mols = [mol for mol in map(Chem.MolFromSmiles, corpus) if mol is not None]
            self.excluded = {  # checked in this order; "duplicate" grows with those kept
                "freesolv": {Chem.MolToInchiKey(mol) for mol in freesolv_mols},
                "in_corpus": {Chem.MolToInchiKey(mol) for mol in corpus_mols},
                "duplicate": set(),
            }
        self.max_heavy_atoms = max(mol.GetNumHeavyAtoms() for mol in freesolv_mols)
        self.counts: Counter = Counter()

    def keep(self, smiles: str) -> str | None:
        """The canonical SMILES if kept, else ``None``; the reason is counted either way.
        (Call it inside ``rdBase.BlockLogs()``: RDKit logs each unparsable SMILES.)"""
        mol = Chem.MolFromSmiles(smiles) if smiles else None
        reason = _not_freesolv_like(mol, self.max_heavy_atoms)
        if reason is None:
            key = Chem.MolToInchiKey(mol)
            reason = next((name for name, keys in self.excluded.items() if key in keys), None)
        self.counts[reason or "kept"] += 1
        if reason is not None:
            return None
        self.excluded["duplicate"].add(key)
        return Chem.MolToSmiles(mol)

    def summary(self) -> dict[str, int]:
        return {"rows": sum(self.counts.values()), **self.counts}


def chemicals_corpus_smiles(
    table: Path, freesolv: list[str], corpus: list[str], limit: int | None = None
) -> tuple[list[str], dict[str, int]]:
    """The FreeSolv-like molecules of ``table`` (the chemicals package's format) that are
    neither in ``freesolv`` nor in ``corpus`` (by InChIKey), once each, as canonical
    SMILES shuffled with seed 0; and how many rows each rule left out."""
    judge, kept = _NewFreeSolvLike(freesolv, corpus), []
    with rdBase.BlockLogs(), open(table, encoding="utf-8") as handle:
        for line in handle:
            fields = line.rstrip("\n").split("\t")
            text = fields[CHEMICALS_SMILES_FIELD] if len(fields) > CHEMICALS_SMILES_FIELD else ""
            smiles = judge.keep(text)
            if smiles is not None:
                kept.append(smiles)
    random.Random(0).shuffle(kept)
    return kept[:limit], judge.summary()


def check_moses_file(path: Path | None) -> Path:
    """``path`` if it is a file, else exit saying how to get the MOSES training set."""
    if path is None or not path.is_file():
        where = "not given" if path is None else f"{path} not found"
        raise SystemExit(
            f"--corpus {MOSES_CORPUS} reads the MOSES training set ({where}): "
            "pip download molsets==0.3.1 --no-deps -d DIR, then --moses-file "
            f"DIR/molsets-0.3.1-py3-none-any.whl (or the {MOSES_TRAIN} inside it)"
        )
    return path


def moses_smiles(path: Path | None) -> list[str]:
    """The SMILES of the MOSES training set (1,584,663 ZINC molecules), from the
    ``molsets`` 0.3.1 wheel or from the ``train.csv.gz`` (or ``.csv``) inside it."""
    path = check_moses_file(path)
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as wheel:
            if MOSES_TRAIN not in wheel.namelist():
                raise SystemExit(f"{path} holds no {MOSES_TRAIN}: is it the molsets wheel?")
            text = gzip.decompress(wheel.read(MOSES_TRAIN)).decode()
    else:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as handle:
            text = handle.read()
    rows = text.split()
    return rows[1:] if rows[:1] == ["SMILES"] else rows


def moses_corpus_smiles(
    path: Path | None, freesolv: list[str], corpus: list[str], limit: int
) -> tuple[list[str], dict[str, int]]:
    """``limit`` FreeSolv-like molecules of the MOSES training set that are neither in
    ``freesolv`` nor in ``corpus``, as canonical SMILES, and how many rows each rule left
    out. The rows are shuffled (seed 0) and read in that order until ``limit`` are kept:
    judging all 1.6 million would take RDKit about an hour."""
    rows = moses_smiles(path)
    random.Random(0).shuffle(rows)
    judge, kept = _NewFreeSolvLike(freesolv, corpus), []
    with rdBase.BlockLogs():
        for text in rows:
            smiles = judge.keep(text)
            if smiles is not None:
                kept.append(smiles)
                if len(kept) == limit:
                    break
    return kept, judge.summary()


def write_corpus(path: Path, smiles: list[str]) -> dict:
    """``smiles`` + descriptor columns as a CSV; returns counts and the kept columns."""
    kept_smiles, rows, unparsable = [], [], 0
    for s in smiles:
        try:
            rows.append(molecule_descriptors(parse_smiles(s)))
        except InvalidSmilesError:
            unparsable += 1  # MoleculeCSV would skip them too; counted here
            continue
        kept_smiles.append(s)
    values = np.stack(rows)
    varying = values.std(axis=0) > 1e-3
    columns = [name for name, keep in zip(DESCRIPTOR_NAMES, varying, strict=True) if keep]
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["smiles", *columns])
        for s, row in zip(kept_smiles, values[:, varying], strict=True):
            writer.writerow([s, *np.round(row, 6).tolist()])
    return {"molecules": len(kept_smiles), "unparsable": unparsable, "targets": columns}


def label_column(model: tuple[str, str]) -> str:
    """The corpus column of one xTB model's labels: ``xtb_hydration`` for GFN2-xTB/alpb
    (the shipped ``xtb-hydration`` encoder's), else e.g. ``xtb_gfn1_gbsa``."""
    if model == DEFAULT_XTB_MODEL:
        return XTB_COLUMN
    method, solvation = model
    return f"xtb_{method.split('-')[0].lower()}_{solvation}"


def _xtb_labels(job: tuple[str, list[tuple[str, str]]]) -> list[float] | None:
    smiles, models = job
    try:
        values = xtb_hydration_energies(parse_smiles(smiles), models)
    except (ValueError, RuntimeError):  # no 3D embedding; xTB did not converge
        return None
    labels = [values[m] for m in models]
    return labels if all(abs(v) < PLAUSIBLE_KCAL for v in labels) else None  # absurd: failed


def read_xtb_labels(paths: list[Path], columns: list[str]) -> dict[str, list[float]]:
    """SMILES -> ``columns`` labels from earlier runs' corpus files (plain or gzipped).

    Each column is read from every file that has it; a SMILES's first value wins, and
    an empty cell (xTB failed there) is no value. SMILES lacking a column are left out.
    """
    found: dict[str, dict[str, float]] = {column: {} for column in columns}
    for path in paths:
        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "rt", newline="") as handle:
            reader = csv.DictReader(handle)
            names = [c for c in columns if c in (reader.fieldnames or ())]
            for row in reader:
                for column in names:
                    if row[column]:
                        found[column].setdefault(row["smiles"], float(row[column]))
    missing = [column for column in columns if not found[column]]
    if missing:
        raise SystemExit(f"no column {', '.join(missing)} in {', '.join(map(str, paths))}")
    common = set.intersection(*(set(labels) for labels in found.values()))
    return {s: [found[column][s] for column in columns] for s in common}


def write_xtb_corpus(
    path: Path,
    smiles: list[str],
    models: list[tuple[str, str]],
    labels_files: list[Path] | None,
    workers: int,
    extra: Sequence[str] = (),
) -> dict:
    """``smiles`` + the xTB hydration energies (one column per model) of the
    FreeSolv-like corpus molecules, then those of ``extra`` (already FreeSolv-like)."""
    kept, unparsable, unlike = [], 0, 0
    for s in smiles:
        try:
            mol = parse_smiles(s)
        except InvalidSmilesError:
            unparsable += 1
            continue
        if corpus_molecule_ok(mol):
            kept.append(s)
        else:
            unlike += 1
    kept += list(extra)
    columns = [label_column(m) for m in models]
    if labels_files:
        known = read_xtb_labels(labels_files, columns)
        labels = [known.get(s) for s in kept]
    else:
        labels = map_in_processes(_xtb_labels, [(s, models) for s in kept], workers, chunksize=8)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["smiles", *columns])
        pairs = zip(kept, labels, strict=True)
        writer.writerows([s, *(f"{v:.4f}" for v in values)] for s, values in pairs if values)
    failed = sum(v is None for v in labels)
    return {
        "molecules": len(kept) - failed,
        "unparsable": unparsable,
        "not_freesolv_like": unlike,
        "xtb_failed": failed,
        "targets": columns,
    }


def featurizer(args: argparse.Namespace, name: str, **fixed) -> MoleculeFeaturizer:
    """Data set ``name``'s featurizer with the ``fixed`` settings, then
    ``--pretrain-featurizer``'s, on top (the corpus: ``descriptors=False``)."""
    settings = {**dataset_featurizer(name).to_dict(), **fixed, **args.pretrain_featurizer}
    return MoleculeFeaturizer.from_dict(settings)


def pretrain(args: argparse.Namespace, dataset_name: str) -> dict:
    """Write the corpus, train on its labels; the record (run folder, sizes, time)."""
    smoke_size = SMOKE_XTB_MOLECULES if args.targets == "xtb" else SMOKE_MOLECULES
    smiles = corpus_smiles(smoke_size if args.smoke else None)
    sources = {"rdkit": {"molecules": len(smiles)}}  # its files: "corpus_files"
    if args.targets == "xtb":
        extra = []
        if args.corpus in ("rdkit+chemicals", MOSES_CORPUS):
            freesolv = dataset_smiles("freesolv", args.data_dir)
            table = chemicals_table(args.chemicals_table)
            extra, counts = chemicals_corpus_smiles(
                table, freesolv, smiles, smoke_size if args.smoke else None
            )
            sources["chemicals"] = {"molecules": len(extra), "table": table.name, **counts}
            log.info(
                "chemicals corpus: %d FreeSolv-like molecules of %d rows",
                *(len(extra), counts["rows"]),
            )
        if args.corpus == MOSES_CORPUS:
            limit = smoke_size if args.smoke else args.moses_molecules
            moses, counts = moses_corpus_smiles(args.moses_file, freesolv, smiles + extra, limit)
            sources["moses"] = {"molecules": len(moses), **counts}
            log.info(
                "MOSES corpus: %d FreeSolv-like molecules of %d rows read",
                len(moses),
                counts["rows"],
            )
            extra += moses
        corpus = write_xtb_corpus(
            args.out / "corpus.csv", smiles, args.xtb_models, args.xtb_labels, args.workers, extra
        )
    else:
        corpus = write_corpus(args.out / "corpus.csv", smiles)
    # the fine-tuned data set's atom and bond features, without descriptor inputs
    dataset = MoleculeCSV(
        args.out / "corpus.csv",
        target_cols=corpus["targets"],
        featurizer=featurizer(args, dataset_name, descriptors=False),
    )
    epochs = SMOKE_EPOCHS if args.smoke else args.pretrain_epochs or PRETRAIN_EPOCHS[args.targets]
    overrides = {"model": args.pretrain_model} if args.pretrain_model else {}
    if args.pretrain_lr is not None:
        overrides["lr"] = args.pretrain_lr
    config = MoleculeTrainConfig(
        **{**PRETRAIN, "epochs": epochs, "seed": args.pretrain_seed, **overrides}
    )
    run_dir = args.out / "pretrained"
    metrics = train_molecule_model(
        dataset, config, run_dir=run_dir, dataset_name=f"rdkit-{args.targets}", progress=False
    )
    log.info("pretrained on %d molecules, %.0f s", len(dataset), metrics["train_seconds"])
    return {
        "run_dir": run_dir.name,  # relative to --out, so that the results folder can move
        "targets": args.targets,
        "label_columns": corpus["targets"],
        "corpus_files": list(CORPUS_FILES),
        "corpus_sources": sources,
        "seed": args.pretrain_seed,
        "molecules": len(dataset),
        "skipped": corpus["unparsable"] + len(dataset.skipped),
        "not_freesolv_like": corpus.get("not_freesolv_like", 0),
        "xtb_failed": corpus.get("xtb_failed", 0),
        "num_targets": len(corpus["targets"]),
        "train_seconds": metrics["train_seconds"],
        "epochs_run": metrics["epochs_run"],
        "val_rmse_mean_over_targets": float(np.mean(metrics["val"]["rmse"])),
    }


def fine_tune(args: argparse.Namespace, name: str, init_from: str, payload: dict) -> None:
    limit = SMOKE_MOLECULES if args.smoke else None
    dataset = load_molecule_dataset(
        name, data_dir=args.data_dir, featurizer=featurizer(args, name), limit=limit
    )
    for seed in args.seeds:
        for variant, source in (("scratch", None), ("pretrained", init_from)):
            settings = {
                **dataset_train_settings(name, scratch=source is None),
                "seed": seed,
                "init_from": source,
            }
            if args.smoke:
                settings["epochs"] = SMOKE_EPOCHS
            with Timer() as timer:
                metrics = train_molecule_model(
                    dataset, MoleculeTrainConfig(**settings), dataset_name=name, progress=False
                )
            payload["runs"].append(
                {
                    "dataset": name,
                    "variant": variant,
                    "seed": seed,
                    "val": metrics["val"],
                    "test": metrics["test"],
                    "epochs_run": metrics["epochs_run"],
                    "train_seconds": timer.seconds,
                }
            )
            log.info(
                "%s %s seed %d: val %.3f test %.3f",
                *(name, variant, seed, metrics["val"]["rmse"], metrics["test"]["rmse"]),
            )
            write_outputs(args.out, "pretraining", payload)


def _corpus_words(pre: dict) -> str:
    """Where the pretraining molecules came from, for the markdown."""
    sources = pre.get("corpus_sources", {})
    if "moses" in sources:
        return "RDKit-shipped, chemicals-table and MOSES molecules"
    if "chemicals" in sources:
        return "RDKit-shipped and chemicals-table molecules"
    return "RDKit-shipped molecules"


def render_markdown(payload: dict) -> str:
    pre = payload["pretraining"]
    if pre.get("targets", "descriptors") == "xtb":
        columns = pre.get("label_columns", ["xtb_hydration"])
        title, what = "xTB", f"the xTB hydration energies {', '.join(columns)}"
        excluded = (
            f"; {pre['not_freesolv_like']} not FreeSolv-like, xTB failed on {pre['xtb_failed']}"
        )
    else:
        title, what, excluded = "Descriptor", f"{pre['num_targets']} descriptors", ""
    seeds = sorted({r["seed"] for r in payload["runs"]})
    rows = []
    for s in payload["summary"]:
        runs = [
            r
            for r in payload["runs"]
            if (r["dataset"], r["variant"]) == (s["dataset"], s["variant"])
        ]
        rows.append(
            [
                s["dataset"],
                s["variant"],
                fmt(float(np.mean([r["val"]["rmse"] for r in runs]))),
                f"**{fmt(s['rmse']['mean'])}**",
                ", ".join(fmt(r["test"]["rmse"]) for r in runs),
            ]
        )
    return "\n\n".join(
        [
            f"# {title} pretraining, then fine-tuning (random 80/10/10 splits)",
            machine_line(payload["machine"], payload["settings"]["smoke"]),
            f"Pretrained on {pre['molecules']:,} {_corpus_words(pre)} "
            f"({pre['skipped']} skipped{excluded}) to predict {what}: "
            f"{pre['epochs_run']} epochs, {pre['train_seconds']:.0f} s, "
            f"seed {pre.get('seed', 0)}.",
            markdown_table(
                [
                    "data set",
                    "start",
                    "mean val RMSE",
                    "mean test RMSE",
                    f"test RMSE, seeds {seeds}",
                ],
                rows,
            ),
        ]
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser, seeds=(0, 1, 2))
    parser.add_argument("--datasets", nargs="+", default=["freesolv"], choices=("esol", "freesolv"))
    parser.add_argument("--targets", choices=("descriptors", "xtb"), default="descriptors")
    parser.add_argument(
        "--pretrain-epochs", type=positive_int, help="default: 30 for descriptors, 60 for xtb"
    )
    parser.add_argument(
        "--xtb-models",
        type=xtb_model_arg,
        nargs="+",
        default=[DEFAULT_XTB_MODEL],
        help="--targets xtb: METHOD/SOLVATION models whose energies are the labels, one "
        "target each (default: GFN2-xTB/alpb, the shipped xtb-hydration encoder's)",
    )
    parser.add_argument(
        "--xtb-labels",
        type=Path,
        nargs="+",
        help="corpus files (.csv or .csv.gz) of earlier xtb runs holding the label columns "
        "(xtb_hydration for GFN2-xTB/alpb, else e.g. xtb_gfn1_gbsa): no recomputing",
    )
    parser.add_argument(
        "--corpus",
        choices=CORPUS_CHOICES,
        default="rdkit",
        help="pretraining molecules: RDKit's shipped files, then (--targets xtb) the "
        "FreeSolv-like molecules of the chemicals package's PubChem table",
    )
    parser.add_argument(
        "--chemicals-table",
        type=Path,
        help="that table's file (default: the one inside the installed chemicals package)",
    )
    parser.add_argument(
        "--moses-file",
        type=Path,
        help=f"--corpus {MOSES_CORPUS}: the molsets 0.3.1 wheel (pip download molsets==0.3.1 "
        "--no-deps) or the MOSES train.csv.gz inside it",
    )
    parser.add_argument(
        "--moses-molecules",
        type=positive_int,
        default=MOSES_MOLECULES,
        help="how many FreeSolv-like MOSES molecules to add (default %(default)s)",
    )
    parser.add_argument("--workers", type=int, default=2, help="processes computing xTB labels")
    parser.add_argument(
        "--pretrain-seed", type=int, default=0, help="seed of the pretraining split and weights"
    )
    parser.add_argument(
        "--pretrain-model",
        type=json_object,
        default={},
        metavar="JSON",
        help="MoleculeModelConfig fields of the pretrained encoder, e.g. '{\"dropout\": 0}' "
        "(default: MoleculeModelConfig's)",
    )
    parser.add_argument(
        "--pretrain-lr", type=float, help="pretraining learning rate (default 1e-3)"
    )
    parser.add_argument(
        "--pretrain-featurizer",
        type=json_object,
        default={},
        metavar="JSON",
        help="MoleculeFeaturizer settings on top of the data set's, for the corpus and the "
        "fine-tuning alike, e.g. '{\"contributions\": true}' (default: none)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.corpus != "rdkit" and args.targets != "xtb":
        raise SystemExit(f"--corpus {args.corpus} goes with --targets xtb")
    xtb_flags = [
        flag
        for flag, given in (
            ("--xtb-models", args.xtb_models != [DEFAULT_XTB_MODEL]),
            ("--xtb-labels", args.xtb_labels),
        )
        if given
    ]
    if xtb_flags and args.targets != "xtb":  # else pretrained on descriptors, silently
        raise SystemExit(f"{' and '.join(xtb_flags)}: only with --targets xtb")
    for flag, given, settings in (
        ("--pretrain-model", args.pretrain_model, MoleculeModelConfig),
        ("--pretrain-featurizer", args.pretrain_featurizer, MoleculeFeaturizer),
    ):  # before the corpus and its labels, which can take an hour
        unknown = sorted(set(given) - {f.name for f in fields(settings) if f.init})
        if unknown:
            raise SystemExit(f"{flag}: no {settings.__name__} field(s) {unknown}")
    try:  # the checks training makes, such as fields it takes from the data
        check_train_config(MoleculeTrainConfig(model=dict(args.pretrain_model)))
    except GraphInputError as err:
        raise SystemExit(f"--pretrain-model: {err}") from err
    if args.corpus == MOSES_CORPUS:
        check_moses_file(args.moses_file)
    # before the corpus and the pretraining: the data sets fine-tuned on (and FreeSolv,
    # whose molecules the chemicals and MOSES corpora leave out)
    needed = {*args.datasets, *(["freesolv"] if args.corpus != "rdkit" else [])}
    require_datasets(sorted(needed), args.data_dir)
    setup(args)
    payload = {
        "complete": False,
        "machine": machine_info(),
        "settings": {
            "datasets": args.datasets,
            "seeds": args.seeds,
            "smoke": args.smoke,
            "corpus": args.corpus,
            "pretrain_model": args.pretrain_model,
            "pretrain_lr": args.pretrain_lr,
            "pretrain_featurizer": args.pretrain_featurizer,
        },
        "runs": [],
    }
    # one featurizer for every data set here (both use the same atom and bond features)
    payload["pretraining"] = pretrain(args, args.datasets[0])
    for name in args.datasets:
        fine_tune(args, name, str(args.out / payload["pretraining"]["run_dir"]), payload)
    payload["summary"] = summarize_seeds(payload["runs"], ("dataset", "variant"), ("rmse",))
    return finish(args.out, "pretraining", payload, render_markdown)


if __name__ == "__main__":
    sys.exit(run_main(main))
