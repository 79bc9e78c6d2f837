"""The benchmark scripts run end to end (``--smoke``: tiny data, meaningless figures)."""

from __future__ import annotations

import csv
import gzip
import json
import math
import os
import re
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import torch
from rdkit import Chem
from torch_geometric.data import Data

from graphattn.datasets.molecules import load_molecule_dataset
from graphattn.errors import GraphInputError
from graphattn.featurize.molecule import parse_smiles
from graphattn.pretrained.xtb import xtb_hydration_energy
from tests.conftest import REPO


def run_script(name: str, *args: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / name), *args],
        cwd=REPO / "benchmarks",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def run_smoke(name: str, data_dir, out, *args: str) -> dict:
    """Run ``benchmarks/<name>.py --smoke`` into ``out``; its JSON output."""
    result = run_script(
        f"{name}.py", "--smoke", "--data-dir", str(data_dir), "--out", str(out), *args
    )
    assert result.returncode == 0, result.stderr
    return json.loads((out / f"{name}.json").read_text())


def test_molecule_targets_records_a_graphattn_variant(data_dir, tmp_path):
    payload = run_smoke(
        "molecule_targets",
        data_dir,
        tmp_path,
        *("--datasets", "freesolv", "--models", "graphattn", "--atom-contributions"),
        *("--model-overrides", '{"layers": 1}', "--train-overrides", '{"batch_size": 16}'),
    )
    assert payload["complete"]
    assert payload["settings"]["graphattn_variant"] == {
        "model_overrides": {"layers": 1},
        "train_overrides": {"batch_size": 16},
        "atom_contributions": True,
        "xtb_energies": [],
    }
    (run,) = payload["runs"]
    assert run["config"]["model"]["layers"] == 1 and run["config"]["batch_size"] == 16
    assert "Not the targets' setting" in (tmp_path / "molecule_targets.md").read_text()
    assert payload["targets"] and all(c["met"] is None for c in payload["targets"])


def test_pretraining_compares_scratch_and_pretrained_starts_on_the_same_split(data_dir, tmp_path):
    payload = run_smoke(
        "pretraining", data_dir, tmp_path, "--pretrain-model", '{"dropout": 0}',
        "--pretrain-lr", "3e-4", "--pretrain-featurizer", '{"contributions": true}',
    )  # fmt: skip
    pretrained = json.loads((tmp_path / "pretrained" / "metrics.json").read_text())["config"]
    assert pretrained["model"]["dropout"] == 0 and pretrained["lr"] == 3e-4
    assert payload["settings"]["pretrain_model"] == {"dropout": 0}
    assert payload["settings"]["pretrain_featurizer"] == {"contributions": True}
    # the corpus and the fine-tuned data set both get the per-atom contributions, so the
    # encoder fits: without them fine-tuning would fail on the atom width
    checkpoint = torch.load(tmp_path / "pretrained" / "model.pt", weights_only=True)
    assert checkpoint["featurizer"]["contributions"] and not checkpoint["featurizer"]["descriptors"]
    assert payload["complete"] and payload["pretraining"]["num_targets"] > 100
    assert payload["pretraining"]["corpus_sources"] == {"rdkit": {"molecules": 150}}
    assert (tmp_path / payload["pretraining"]["run_dir"] / "model.pt").is_file()
    assert payload["pretraining"]["run_dir"] == "pretrained"  # relative: the folder can move
    with open(tmp_path / "corpus.csv") as handle:
        assert sum(1 for _ in handle) == payload["pretraining"]["molecules"] + 1
    assert [(r["variant"], r["seed"]) for r in payload["runs"]] == [
        ("scratch", 0),
        ("pretrained", 0),
    ]
    assert "| freesolv | pretrained |" in (tmp_path / "pretraining.md").read_text()


def test_pretraining_refuses_a_bad_encoder_override_before_building_the_corpus(tmp_path):
    for value, message in (
        ('{"dropot": 0}', "no MoleculeModelConfig field(s) ['dropot']"),
        ("[0]", "needs a JSON object of fields"),
        ("{dropout", "not JSON"),
        ('{"task": "classification"}', "which training takes from the data"),
    ):
        result = run_script("pretraining.py", "--pretrain-model", value, "--out", str(tmp_path))
        assert result.returncode != 0 and message in result.stderr
    result = run_script(
        "pretraining.py", "--pretrain-featurizer", '{"contribution": true}', "--out", str(tmp_path)
    )
    assert result.returncode != 0
    assert "no MoleculeFeaturizer field(s) ['contribution']" in result.stderr
    assert not (tmp_path / "corpus.csv").exists()


def test_xtb_pretraining_labels_freesolv_like_molecules(data_dir, tmp_path):
    pytest.importorskip("tblite")
    payload = run_smoke("pretraining", data_dir, tmp_path, "--targets", "xtb")
    pre = payload["pretraining"]
    assert payload["complete"] and pre["targets"] == "xtb" and pre["num_targets"] == 1
    assert pre["not_freesolv_like"] > 0 and pre["molecules"] > 20
    labels = (tmp_path / "corpus.csv").read_text()
    assert labels.startswith("smiles,xtb_hydration\n")
    assert labels.count("\n") == pre["molecules"] + 1
    assert "# xTB pretraining" in (tmp_path / "pretraining.md").read_text()


def test_xtb_labels_of_an_earlier_run_are_reused_and_missing_ones_dropped(tmp_path, monkeypatch):
    pretraining = import_script("pretraining", monkeypatch)
    earlier = tmp_path / "earlier.csv"
    earlier.write_text("smiles,xtb_hydration\nCCO,-4.1\nC,0.2\n")
    smiles = ["CCO", "C", "CCN", "CC(=O)[O-]", "not a smiles"]
    gfn2 = [("GFN2-xTB", "alpb")]
    counts = pretraining.write_xtb_corpus(tmp_path / "corpus.csv", smiles, gfn2, [earlier], 1)
    assert (tmp_path / "corpus.csv").read_text().splitlines() == [
        "smiles,xtb_hydration",
        "CCO,-4.1000",
        "C,0.2000",
    ]
    assert counts == {
        "molecules": 2,
        "unparsable": 1,
        "not_freesolv_like": 1,
        "xtb_failed": 1,  # CCN: no label there
        "targets": ["xtb_hydration"],
    }


def test_several_xtb_models_are_one_label_column_each_read_from_several_files(
    tmp_path, monkeypatch
):
    pretraining = import_script("pretraining", monkeypatch)
    gfn2, gfn1 = tmp_path / "gfn2.csv", tmp_path / "gfn1.csv.gz"
    gfn2.write_text("smiles,xtb_hydration\nCCO,-4.1\nC,0.2\nCCN,-3.9\n")
    with gzip.open(gfn1, "wt") as handle:  # C has no GFN1 labels: left out
        handle.write("smiles,xtb_gfn1_alpb,xtb_gfn1_gbsa\nCCN,-5.5,-4.5\nCCO,-5.0,-4.3\n")
    models = [("GFN2-xTB", "alpb"), ("GFN1-xTB", "alpb"), ("GFN1-xTB", "gbsa")]
    corpus = tmp_path / "corpus.csv"
    counts = pretraining.write_xtb_corpus(corpus, ["CCO", "C", "CCN"], models, [gfn2, gfn1], 1)
    assert corpus.read_text().splitlines() == [
        "smiles,xtb_hydration,xtb_gfn1_alpb,xtb_gfn1_gbsa",
        "CCO,-4.1000,-5.0000,-4.3000",
        "CCN,-3.9000,-5.5000,-4.5000",
    ]
    assert counts["targets"] == ["xtb_hydration", "xtb_gfn1_alpb", "xtb_gfn1_gbsa"]
    assert counts["molecules"] == 2 and counts["xtb_failed"] == 1
    with pytest.raises(SystemExit, match="no column xtb_gfn2_gbsa in"):
        pretraining.write_xtb_corpus(corpus, ["CCO"], [("GFN2-xTB", "gbsa")], [gfn2, gfn1], 1)


def _chemicals_row(smiles: str) -> str:
    """A row of the chemicals package's PubChem table (SMILES in the fifth field)."""
    return "\t".join(["1", "0-00-0", "formula", "1.0", smiles, "InChI", "KEY", "a name"]) + "\n"


CHEMICALS_ROWS = {
    "C(C)O": "freesolv",  # ethanol, written otherwise than in the FreeSolv list
    "NCCCCCCO": "kept",
    "OCCCCCCN": "duplicate",  # the same molecule again
    "CC(=O)[O-]": "not_one_neutral_fragment",
    "CCO.C": "not_one_neutral_fragment",
    "C[Si](C)(C)C": "other_elements",
    "ClCl": "other_elements",  # no carbon
    "C" * 25: "too_large",  # FreeSolv's largest: 24 heavy atoms (10 in the stand-in list)
    "not a smiles": "unparsable",
    "c1ccccc1": "in_corpus",
    "ClCCCCCCN": "kept",
    "OCC(F)CC#N": "kept",
}


def test_chemicals_corpus_keeps_new_freesolv_like_molecules_once(tmp_path, monkeypatch):
    pretraining = import_script("pretraining", monkeypatch)
    table = tmp_path / "table.tsv"
    table.write_text("".join(_chemicals_row(s) for s in CHEMICALS_ROWS) + "short\tline\n")
    freesolv, corpus = ["CCO", "CCCCCCCCCC"], ["C1=CC=CC=C1", "not parsed"]
    kept, counts = pretraining.chemicals_corpus_smiles(table, freesolv, corpus)
    # canonical SMILES, in the table's order shuffled with seed 0
    assert kept == ["NCCCCCCO", "N#CCC(F)CO", "NCCCCCCCl"]
    expected = {"rows": len(CHEMICALS_ROWS) + 1, "unparsable": 2}  # the short line too
    for reason in CHEMICALS_ROWS.values():
        expected[reason] = expected.get(reason, 0) + (reason != "unparsable")
    assert counts == expected
    again, _ = pretraining.chemicals_corpus_smiles(table, freesolv, corpus)
    assert again == kept  # the shuffle is seeded
    first, _ = pretraining.chemicals_corpus_smiles(table, freesolv, corpus, limit=1)
    assert first == kept[:1]


# the RDKit corpus's stored xTB labels: the pretraining smoke runs need no tblite
RDKIT_XTB_LABELS = REPO / "benchmarks/results/targets/freesolv/pretraining_xtb/corpus.csv.gz"


def _xtb_pretraining_smoke(data_dir, tmp_path, labels, corpus: str, *corpus_args: str):
    """A smoke run of xTB pretraining on ``corpus``, its labels read from the RDKit
    corpus's file and ``labels``; the payload, the corpus.csv lines and the markdown."""
    out = tmp_path / "out"
    payload = run_smoke(
        "pretraining",
        data_dir,
        out,
        *("--targets", "xtb", "--corpus", corpus, *corpus_args),
        *("--xtb-labels", str(RDKIT_XTB_LABELS), str(labels)),
    )
    rows = (out / "corpus.csv").read_text().splitlines()
    return payload, rows, (out / "pretraining.md").read_text()


def test_xtb_labels_are_merged_over_files_and_empty_cells_are_no_value(tmp_path, monkeypatch):
    pretraining = import_script("pretraining", monkeypatch)
    first, second = tmp_path / "first.csv", tmp_path / "second.csv.gz"
    first.write_text("smiles,xtb_hydration\nCCO,-4.1\nCCN,\n")
    with gzip.open(second, "wt") as handle:
        handle.write("smiles,xtb_hydration\nCCO,-9.9\nCCN,-3.9\nC,0.2\n")
    labels = pretraining.read_xtb_labels([first, second], ["xtb_hydration"])
    assert labels == {"CCO": [-4.1], "CCN": [-3.9], "C": [0.2]}  # the first value wins


def test_xtb_pretraining_on_the_rdkit_and_chemicals_corpus(data_dir, tmp_path):
    """The rdkit+chemicals corpus from a stand-in table, labels read from files (no xTB)."""
    table = tmp_path / "table.tsv"
    table.write_text("".join(_chemicals_row(s) for s in CHEMICALS_ROWS))
    chemicals_labels = tmp_path / "chemicals_labels.csv"
    chemicals_labels.write_text(
        "smiles,xtb_hydration\nNCCCCCCO,-9.5\nNCCCCCCCl,-6.4\nN#CCC(F)CO,\n"
    )
    payload, rows, markdown = _xtb_pretraining_smoke(
        data_dir, tmp_path, chemicals_labels, "rdkit+chemicals", "--chemicals-table", str(table)
    )
    pre = payload["pretraining"]
    assert payload["complete"] and payload["settings"]["corpus"] == "rdkit+chemicals"
    chemicals = pre["corpus_sources"]["chemicals"]
    assert chemicals["molecules"] == 3 and chemicals["kept"] == 3
    assert set(rows[-2:]) == {"NCCCCCCO,-9.5000", "NCCCCCCCl,-6.4000"}  # N#CCC(F)CO: no label
    assert pre["xtb_failed"] >= 1 and len(rows) == pre["molecules"] + 1
    assert pre["molecules"] > 20 + 2  # the RDKit molecules come first
    assert "RDKit-shipped and chemicals-table molecules" in markdown


MOSES_ROWS = {
    "CCO": "freesolv",
    "NCCCCCCO": "in_corpus",
    "OCCCCCCN": "in_corpus",  # the same molecule written otherwise
    "c1ccccc1": "in_corpus",
    "CC(=O)[O-]": "not_one_neutral_fragment",
    "C" * 25: "too_large",
    "ClCCCCCCN": "kept",
    "OCC(F)CC#N": "kept",
    "C=CC(=O)OCC": "kept",
    "CCOC(=O)C=C": "duplicate",
}


def _write_moses_train(path, rows) -> None:
    with gzip.open(path, "wt") as handle:
        handle.write("SMILES\n" + "".join(f"{s}\n" for s in rows))


def test_moses_corpus_keeps_new_freesolv_like_molecules_up_to_a_limit(tmp_path, monkeypatch):
    pretraining = import_script("pretraining", monkeypatch)
    train, wheel = tmp_path / "train.csv.gz", tmp_path / "molsets-0.3.1-py3-none-any.whl"
    _write_moses_train(train, MOSES_ROWS)
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.write(train, pretraining.MOSES_TRAIN)
    freesolv, corpus = ["CCO", "CCCCCCCCCC"], ["C1=CC=CC=C1", "NCCCCCCO"]
    kept, counts = pretraining.moses_corpus_smiles(train, freesolv, corpus, limit=10)
    # canonical SMILES, judged in the rows' order shuffled with seed 0
    assert kept == ["N#CCC(F)CO", "C=CC(=O)OCC", "NCCCCCCCl"]
    expected = {"rows": len(MOSES_ROWS)}
    for reason in MOSES_ROWS.values():
        expected[reason] = expected.get(reason, 0) + 1
    assert counts == expected
    assert pretraining.moses_corpus_smiles(wheel, freesolv, corpus, limit=10) == (kept, counts)
    first, counts = pretraining.moses_corpus_smiles(train, freesolv, corpus, limit=2)
    assert first == kept[:2] and counts["kept"] == 2  # the same seeded order, read no further


def test_the_moses_file_errors_say_how_to_get_it(tmp_path, monkeypatch):
    pretraining = import_script("pretraining", monkeypatch)
    how = r"pip download molsets==0\.3\.1 --no-deps -d DIR, then --moses-file"
    with pytest.raises(SystemExit, match=f"not given.*{how}"):
        pretraining.moses_smiles(None)
    missing = tmp_path / "molsets.whl"
    with pytest.raises(SystemExit, match=f"{missing} not found.*{how}"):
        pretraining.moses_smiles(missing)
    with zipfile.ZipFile(missing, "w") as archive:
        archive.writestr("other/file.txt", "x")
    with pytest.raises(SystemExit, match="holds no moses/dataset/data/train.csv.gz"):
        pretraining.moses_smiles(missing)
    with pytest.raises(SystemExit, match="not given"):  # before any corpus is built
        pretraining.main(["--targets", "xtb", "--corpus", "rdkit+chemicals+moses"])


def test_xtb_pretraining_adds_the_moses_molecules(data_dir, tmp_path):
    """The rdkit+chemicals+moses corpus from stand-in files, labels read from files."""
    table, train = tmp_path / "table.tsv", tmp_path / "train.csv.gz"
    table.write_text(_chemicals_row("NCCCCCCO"))
    _write_moses_train(train, ["OCCCCCCN", "C=CC(=O)OCC", "Cc1ccc(O)cc1C", "CC(C)(O)CCl", "CCCCOC"])
    new = [Chem.CanonSmiles(s) for s in ("C=CC(=O)OCC", "CC(C)(O)CCl")]
    labels = tmp_path / "labels.csv"
    labels.write_text(f"smiles,xtb_hydration\nNCCCCCCO,-9.5\n{new[0]},-4.0\n{new[1]},-6.0\n")
    payload, rows, markdown = _xtb_pretraining_smoke(
        data_dir,
        tmp_path,
        labels,
        "rdkit+chemicals+moses",
        *("--chemicals-table", str(table), "--moses-file", str(train)),
    )
    pre = payload["pretraining"]
    moses = pre["corpus_sources"]["moses"]
    assert moses["molecules"] == 3  # OCCCCCCN is the chemicals one, Cc1ccc(O)cc1C FreeSolv's
    assert moses["in_corpus"] == 1 and moses["freesolv"] == 1
    assert set(rows[-3:]) == {"NCCCCCCO,-9.5000", f"{new[0]},-4.0000", f"{new[1]},-6.0000"}
    assert pre["xtb_failed"] >= 1  # CCCCOC has no label
    assert "RDKit-shipped, chemicals-table and MOSES molecules" in markdown


def test_without_the_chemicals_package_the_error_says_what_to_install(monkeypatch):
    pretraining = import_script("pretraining", monkeypatch)
    monkeypatch.setitem(sys.modules, "chemicals", None)  # import chemicals fails
    with pytest.raises(SystemExit, match=r"pip install 'graphattn\[corpus\]'"):
        pretraining.chemicals_table()


def test_a_missing_chemicals_table_is_named_in_the_error(tmp_path, monkeypatch):
    pretraining = import_script("pretraining", monkeypatch)
    missing = tmp_path / "no_table.tsv"
    with pytest.raises(SystemExit, match=f"chemicals table {missing} not found.*--chemicals-table"):
        pretraining.chemicals_table(missing)


def test_freesolv_smiles_are_read_without_featurizing(data_dir, monkeypatch):
    pretraining = import_script("pretraining", monkeypatch)
    smiles = pretraining.dataset_smiles("freesolv", data_dir)
    assert len(smiles) == 642
    assert smiles[:2] == ["CN(C)C(=O)c1ccc(cc1)OC", "CS(=O)(=O)Cl"]  # the file's first rows
    esol = pretraining.dataset_smiles("esol", data_dir)
    assert len(esol) == 1128 and esol[1] == "Cc1occc1C(=O)Nc2ccccc2"
    # the file writes this one with a trailing space
    assert esol[0] == "OCC3OC(OCC2OC(OC(C#N)c1ccccc1)C(O)C(O)C2O)C(O)C(O)C3O"


def test_the_chemicals_corpus_goes_with_xtb_targets():
    result = run_script("pretraining.py", "--corpus", "rdkit+chemicals", "--smoke")
    assert result.returncode != 0
    assert "--corpus rdkit+chemicals goes with --targets xtb" in result.stderr


def test_the_rdkit_corpus_is_both_shipped_files_in_file_order(monkeypatch):
    pretraining = import_script("pretraining", monkeypatch)
    smiles = pretraining.corpus_smiles(None)
    assert len(smiles) == 4999 + 10000  # NCI/first_5K.smi, then wehi_mols.csv
    assert smiles[:2] == ["CC1=CC(=O)C=CC1=O", "S(SC1=NC2=CC=CC=C2S1)C3=NC4=C(S3)C=CC=C4"]
    assert smiles[4998:5000] == ["CN1CCC[CH]1C2=CC=CN=C2", "N(NC(=O)C1CCC1)c2ccc(cc2)C(C)(C)C"]
    assert smiles[-1] == "Brc1ccc(cc1)NC(=O)NCCCOCC(OC)COC"
    assert pretraining.corpus_smiles(2) == smiles[:2]


def test_freesolv_like_rules_at_their_edges(tmp_path, monkeypatch):
    pretraining = import_script("pretraining", monkeypatch)
    table = tmp_path / "table.tsv"
    rows = ["C" * 9 + "O", "C" * 11, "CCO", "CCCl"]  # 10 heavy atoms: FreeSolv's largest here
    table.write_text("".join(map(_chemicals_row, rows)) + "1\t2\t3\tfour fields\n")
    # CCO is one of FreeSolv's molecules and of the corpus too: counted as FreeSolv's
    kept, counts = pretraining.chemicals_corpus_smiles(table, ["CCO", "C" * 10], ["OCC", "ClCC"])
    assert kept == ["CCCCCCCCCO"]
    assert counts == {
        **{"rows": 5, "kept": 1, "too_large": 1, "freesolv": 1, "in_corpus": 1},
        "unparsable": 1,  # the row of four fields
    }


def test_moses_smiles_read_a_plain_csv_with_or_without_its_header(tmp_path, monkeypatch):
    pretraining = import_script("pretraining", monkeypatch)
    with_header, without = tmp_path / "train.csv", tmp_path / "smiles.csv"
    with_header.write_text("SMILES\nCCO\nc1ccccc1\n")
    without.write_text("CCO\nc1ccccc1\n")
    assert pretraining.moses_smiles(with_header) == ["CCO", "c1ccccc1"]
    assert pretraining.moses_smiles(without) == ["CCO", "c1ccccc1"]


def test_the_descriptor_corpus_keeps_the_columns_that_vary(tmp_path, monkeypatch):
    pretraining = import_script("pretraining", monkeypatch)
    from graphattn.featurize.descriptors import DESCRIPTOR_NAMES, molecule_descriptors

    smiles = ["CCO", "not a smiles", "c1ccccc1O", "CCN"]
    counts = pretraining.write_corpus(tmp_path / "corpus.csv", smiles)
    with open(tmp_path / "corpus.csv") as handle:
        header, *rows = list(csv.reader(handle))
    values = np.stack([molecule_descriptors(parse_smiles(s)) for s in ("CCO", "c1ccccc1O", "CCN")])
    varying = [
        name for name, std in zip(DESCRIPTOR_NAMES, values.std(axis=0), strict=True) if std > 1e-3
    ]
    assert counts == {"molecules": 3, "unparsable": 1, "targets": varying}
    assert header == ["smiles", *varying] and len(varying) < len(DESCRIPTOR_NAMES)
    assert [row[0] for row in rows] == ["CCO", "c1ccccc1O", "CCN"]
    columns = [DESCRIPTOR_NAMES.index(name) for name in varying]
    written = np.array([[float(v) for v in row[1:]] for row in rows])
    # 6 decimals (of float32 values: within 2e-6)
    np.testing.assert_allclose(written, values[:, columns], rtol=0, atol=2e-6)


def test_an_xtb_label_is_none_when_xtb_fails_or_any_energy_is_absurd(monkeypatch):
    pretraining = import_script("pretraining", monkeypatch)
    gfn2, gfn1 = ("GFN2-xTB", "alpb"), ("GFN1-xTB", "gbsa")
    energies = {gfn2: -5.0, gfn1: -4.0}
    monkeypatch.setattr(pretraining, "xtb_hydration_energies", lambda mol, models: energies)
    assert pretraining._xtb_labels(("CCO", [gfn1, gfn2])) == [-4.0, -5.0]  # the models' order
    energies[gfn1] = 2 * pretraining.PLAUSIBLE_KCAL
    assert pretraining._xtb_labels(("CCO", [gfn2, gfn1])) is None
    for error in (ValueError("no conformer"), RuntimeError("SCF did not converge")):

        def failing(mol, models, error=error):
            raise error

        monkeypatch.setattr(pretraining, "xtb_hydration_energies", failing)
        assert pretraining._xtb_labels(("CCO", [gfn2])) is None


def _fake_training(runs: list):
    """A stand-in for ``train_molecule_model`` that records its calls and trains nothing."""

    def train(dataset, config, run_dir=None, dataset_name="custom", progress=True):
        runs.append(dict(dataset=dataset, config=config, run_dir=run_dir, name=dataset_name))
        rmse = float(len(runs))
        val = [rmse] if run_dir is not None else rmse  # pretraining: one per target
        return {"train_seconds": 5.0, "epochs_run": config.epochs, "val": {"rmse": val},
                "test": {"rmse": rmse + 0.5}}  # fmt: skip

    return train


def test_pretrain_builds_its_corpus_and_config_from_the_arguments(data_dir, tmp_path, monkeypatch):
    """pretrain() with the training faked: what reaches the corpus, the run and the record."""
    pretraining = import_script("pretraining", monkeypatch)
    runs = []
    monkeypatch.setattr(pretraining, "train_molecule_model", _fake_training(runs))
    rdkit = ["CCCO", "not a smiles", "CC(=O)[O-]", "CCCN"]
    monkeypatch.setattr(pretraining, "corpus_smiles", lambda limit: rdkit[:limit])
    table, train, labels = tmp_path / "table.tsv", tmp_path / "train.csv", tmp_path / "labels.csv"
    table.write_text(_chemicals_row("NCCCCCCO") + _chemicals_row("ClCCCCCCN"))
    train.write_text("SMILES\nOCC(F)CC#N\nC=CC(=O)OCC\n")  # one of them is read (the limit)
    labels.write_text(
        "smiles,xtb_hydration\nCCCO,-4.0\nNCCCCCCO,-9.5\nNCCCCCCCl,-6.4\n"
        "N#CCC(F)CO,-8.0\nC=CC(=O)OCC,-3.5\n"  # CCCN has none
    )
    args = pretraining.parse_args(
        [
            *("--targets", "xtb", "--corpus", "rdkit+chemicals+moses"),
            *("--chemicals-table", str(table), "--moses-file", str(train)),
            *("--moses-molecules", "1", "--xtb-labels", str(labels)),
            *("--pretrain-seed", "3", "--pretrain-epochs", "7", "--pretrain-lr", "3e-4"),
            *("--pretrain-model", '{"dropout": 0}', "--pretrain-featurizer", '{"in_ring": false}'),
            *("--data-dir", str(data_dir), "--out", str(tmp_path / "out")),
        ]
    )
    args.out.mkdir()
    record = pretraining.pretrain(args, "freesolv")
    (run,) = runs
    config = run["config"]
    assert (config.seed, config.epochs, config.lr, config.model) == (3, 7, 3e-4, {"dropout": 0})
    assert (config.batch_size, config.warmup_epochs) == (64, 2)
    assert config.fractions == (0.9, 0.05, 0.05) and config.init_from is None
    assert run["run_dir"] == args.out / "pretrained" and run["name"] == "rdkit-xtb"
    featurizer = run["dataset"].featurizer
    assert not featurizer.descriptors and not featurizer.in_ring  # the corpus: graph only
    assert run["dataset"].smiles[-1] in {"N#CCC(F)CO", "C=CC(=O)OCC"}  # the MOSES one last
    moses = record["corpus_sources"].pop("moses")
    assert moses == {"molecules": 1, "rows": 1, "kept": 1}  # read no further
    assert record == {
        "run_dir": "pretrained",
        "targets": "xtb",
        "label_columns": ["xtb_hydration"],
        "corpus_files": list(pretraining.CORPUS_FILES),
        "corpus_sources": {
            "rdkit": {"molecules": 4},
            "chemicals": {"molecules": 2, "table": "table.tsv", "rows": 2, "kept": 2},
        },
        "seed": 3,
        "molecules": 4,  # CCCO, the two chemicals molecules and the MOSES one
        "skipped": 1,  # not a smiles
        "not_freesolv_like": 1,  # the acetate
        "xtb_failed": 1,  # CCCN: no label
        "num_targets": 1,
        "train_seconds": 5.0,
        "epochs_run": 7,
        "val_rmse_mean_over_targets": 1.0,
    }


def test_a_smoke_pretraining_cuts_the_corpus_and_the_epochs(data_dir, tmp_path, monkeypatch):
    pretraining = import_script("pretraining", monkeypatch)
    runs, limits = [], []
    monkeypatch.setattr(pretraining, "train_molecule_model", _fake_training(runs))
    monkeypatch.setattr(pretraining, "corpus_smiles", lambda limit: limits.append(limit) or [])
    # 57 rows, 47 of them new FreeSolv-like molecules: more than a smoke run labels
    candidates = [f"{'C' * n}{end}" for n in range(2, 21) for end in ("CN", "CS", "CC#N")]
    table, labels = tmp_path / "table.tsv", tmp_path / "labels.csv"
    table.write_text("".join(map(_chemicals_row, candidates)))
    labels.write_text("smiles,xtb_hydration\n" + "".join(f"{s},-1.0\n" for s in candidates))
    args = pretraining.parse_args(
        [
            *("--smoke", "--targets", "xtb", "--corpus", "rdkit+chemicals"),
            *("--chemicals-table", str(table), "--xtb-labels", str(labels)),
            *("--pretrain-epochs", "7", "--data-dir", str(data_dir), "--out", str(tmp_path)),
        ]
    )
    record = pretraining.pretrain(args, "freesolv")
    assert limits == [pretraining.SMOKE_XTB_MOLECULES]
    assert record["corpus_sources"]["chemicals"]["molecules"] == pretraining.SMOKE_XTB_MOLECULES
    assert record["molecules"] == pretraining.SMOKE_XTB_MOLECULES
    assert runs[0]["config"].epochs == record["epochs_run"] == pretraining.SMOKE_EPOCHS


def test_fine_tuning_trains_each_seed_from_scratch_and_from_the_encoder(
    data_dir, tmp_path, monkeypatch
):
    pretraining = import_script("pretraining", monkeypatch)
    from graphattn.train.molecules import MoleculeTrainConfig, dataset_train_settings

    runs = []
    monkeypatch.setattr(pretraining, "train_molecule_model", _fake_training(runs))
    args = pretraining.parse_args(
        [
            *("--smoke", "--seeds", "4", "5", "--pretrain-featurizer", '{"contributions": true}'),
            *("--data-dir", str(data_dir), "--out", str(tmp_path)),
        ]
    )
    payload = {"runs": []}
    pretraining.fine_tune(args, "freesolv", "/runs/pretrained", payload)
    scratch = {**dataset_train_settings("freesolv", scratch=True), "epochs": 2}
    tuned = {**dataset_train_settings("freesolv"), "epochs": 2}
    assert [run["config"] for run in runs] == [
        MoleculeTrainConfig(**{**scratch, "seed": 4, "init_from": None}),
        MoleculeTrainConfig(**{**tuned, "seed": 4, "init_from": "/runs/pretrained"}),
        MoleculeTrainConfig(**{**scratch, "seed": 5, "init_from": None}),
        MoleculeTrainConfig(**{**tuned, "seed": 5, "init_from": "/runs/pretrained"}),
    ]
    assert runs[0]["config"].model == {} and runs[1]["config"].model == {"dropout": 0.0}
    assert all(run["name"] == "freesolv" and run["run_dir"] is None for run in runs)
    dataset = runs[0]["dataset"]
    assert len(dataset) == pretraining.SMOKE_MOLECULES and dataset.featurizer.contributions
    records = [
        (r["variant"], r["seed"], r["val"]["rmse"], r["test"]["rmse"]) for r in payload["runs"]
    ]
    assert records == [
        ("scratch", 4, 1.0, 1.5),
        ("pretrained", 4, 2.0, 2.5),
        ("scratch", 5, 3.0, 3.5),
        ("pretrained", 5, 4.0, 4.5),
    ]
    written = json.loads((tmp_path / "pretraining.json").read_text())
    assert len(written["runs"]) == 4  # saved after each run


def test_the_pretraining_markdown_reports_the_corpus_and_each_start(monkeypatch):
    pretraining = import_script("pretraining", monkeypatch)
    pre = {
        "targets": "xtb",
        "label_columns": ["xtb_hydration", "xtb_gfn1_gbsa"],
        "corpus_sources": {"rdkit": {}, "chemicals": {}},
        "molecules": 12345,
        "skipped": 3,
        "not_freesolv_like": 5,
        "xtb_failed": 7,
        "epochs_run": 60,
        "train_seconds": 123.4,
        "seed": 2,
    }
    machine = {"cpu_model": "cpu", "usable_cores": 2, "torch_threads": 1}
    runs = [
        {"dataset": "freesolv", "variant": variant, "seed": seed, "val": {"rmse": val},
         "test": {"rmse": test}}
        for variant, seed, val, test in (
            ("scratch", 0, 1.0, 1.5), ("pretrained", 0, 0.5, 0.75),
            ("scratch", 1, 2.0, 2.5), ("pretrained", 1, 0.25, 0.25),
        )
    ]  # fmt: skip
    summary = [
        {"dataset": "freesolv", "variant": "scratch", "rmse": {"mean": 2.0}},
        {"dataset": "freesolv", "variant": "pretrained", "rmse": {"mean": 0.5}},
    ]
    payload = {"pretraining": pre, "machine": machine, "settings": {"smoke": False}}
    markdown = pretraining.render_markdown({**payload, "runs": runs, "summary": summary})
    assert markdown.startswith("# xTB pretraining, then fine-tuning")
    assert (
        "Pretrained on 12,345 RDKit-shipped and chemicals-table molecules (3 skipped; 5 not "
        "FreeSolv-like, xTB failed on 7) to predict the xTB hydration energies xtb_hydration, "
        "xtb_gfn1_gbsa: 60 epochs, 123 s, seed 2." in markdown
    )
    assert "| test RMSE, seeds [0, 1] |" in markdown
    assert "| freesolv | scratch | 1.500 | **2.000** | 1.500, 2.500 |" in markdown
    assert "| freesolv | pretrained | 0.375 | **0.500** | 0.750, 0.250 |" in markdown


def test_the_chemicals_corpus_needs_freesolv_even_when_fine_tuning_on_esol(
    data_dir, tmp_path, monkeypatch, offline, capsys
):
    pretraining = import_script("pretraining", monkeypatch)
    only_esol = _esol_only(data_dir, tmp_path)
    argv = [
        *("--targets", "xtb", "--corpus", "rdkit+chemicals", "--datasets", "esol"),
        *("--data-dir", str(only_esol), "--out", str(tmp_path / "out")),
    ]
    assert pretraining.run_main(lambda: pretraining.main(argv)) == 2
    assert "data set 'freesolv'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # stopped before any work


def test_xtb_labels_compares_each_model_with_freesolv_experiment(data_dir, tmp_path):
    pytest.importorskip("tblite")
    models = ("GFN2-xTB/alpb", "GFN1-xTB/gbsa")
    payload = run_smoke("xtb_labels", data_dir, tmp_path, "--models", *models, "--workers", "1")
    result = payload["result"]
    assert payload["complete"] and list(result["models"]) == list(models)
    assert result["molecules"] == result["molecules_used"] == 8 and not result["failures"]
    assert result["conformer_seeds"] == [0, 2] and payload["settings"]["conformers"] == 2
    # conformer 0 is the pretraining labels' conformer: the RMSE of those labels
    freesolv = load_molecule_dataset("freesolv", data_dir=data_dir, limit=8)
    labels = [xtb_hydration_energy(parse_smiles(s)) for s in freesolv.smiles]
    experiment = [float(d.y) for d in freesolv]
    rmse = float(np.sqrt(np.mean((np.array(labels) - np.array(experiment)) ** 2)))
    assert result["models"]["GFN2-xTB/alpb"]["conformer_0"]["rmse"] == pytest.approx(rmse)
    for model in result["models"].values():
        assert model["conformer_spread"] > 0.01  # two different conformers
        assert model["conformer_mean"]["rmse"] != model["conformer_0"]["rmse"]
    assert "| GFN1-xTB/gbsa |" in (tmp_path / "xtb_labels.md").read_text()


def test_xtb_labels_agreement_and_arguments(monkeypatch, capsys):
    xtb_labels = import_script("xtb_labels", monkeypatch)
    computed = torch.tensor([-1.0, -3.0, -5.0, -9.0]).numpy()
    stats = xtb_labels.agreement(computed, 2 * computed + 1)  # experiment on a line
    assert stats["fit_slope"] == pytest.approx(2) and stats["fit_intercept"] == pytest.approx(1)
    assert stats["fit_rmse"] == pytest.approx(0, abs=1e-9)
    assert stats["pearson_r"] == pytest.approx(1)
    assert stats["rmse"] == pytest.approx(float(((computed + 1) ** 2).mean() ** 0.5))
    assert xtb_labels.conformer_seeds(4) == [0, 2, 3, 4]  # RDKit embeds 0 and 1 alike
    assert xtb_labels.xtb_model_arg("GFN1-xTB/gbsa") == ("GFN1-xTB", "gbsa")
    for bad, message in (
        (["--models", "GFN3-xTB/alpb"], "unknown xTB model GFN3-xTB/alpb: methods are GFN2"),
        (["--models", "GFN1-xTB"], "xTB model 'GFN1-xTB': expected METHOD/SOLVATION"),
        (["--conformers", "0"], "'0': expected a whole number of at least 1"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            xtb_labels.parse_args(bad)
        assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_auto_choice_times_every_mode_of_each_size_in_one_process(data_dir, tmp_path):
    payload = run_smoke("auto_choice", data_dir, tmp_path)
    groups = [c["group"] for c in payload["comparisons"]]
    assert "molecules" in groups and any(g.startswith("density/") for g in groups)
    for c in payload["comparisons"]:
        assert c["auto_seconds"] > 0 and c["best_seconds"] > 0
        assert c["auto_choice"] in ("sparse", "dense") and c["best_mode"] in ("sparse", "dense")
        assert c["within_10_percent"] == (c["ratio"] <= 1.10)
    timed = {(r["group"], r["impl"]) for r in payload["paired"] if r["status"] == "ok"}
    for group in groups:
        assert {(group, impl) for impl in ("fused", "reference", "auto")} <= timed
    assert "auto / faster" in (tmp_path / "auto_choice.md").read_text()


def test_kernel_crossover_times_every_kernel_and_records_the_auto_choice(data_dir, tmp_path):
    payload = run_smoke("kernel_crossover", data_dir, tmp_path)
    assert payload["smoke"] is True  # a smoke run's JSON says it is one
    assert payload["machine"]["numba"] and payload["machine"]["rdkit"]  # versions recorded
    rows = payload["rows"]
    assert rows and {r["edge_features"] for r in rows} == {False, True}
    for r in rows:
        assert r["fused_ms"] > 0 and r["gather_ms"] > 0 and r["reference_ms"] > 0
        assert r["fused_over_gather"] == r["fused_ms"] / r["gather_ms"]
        assert r["gather_over_reference"] == r["gather_ms"] / r["reference_ms"]
        assert r["auto_chooses"] in ("fused", "gather", "numba")
        if "numba_ms" in r:  # Numba installed: timed, and auto runs it below the fused sizes
            assert r["numba_over_gather"] == r["numba_ms"] / r["gather_ms"]
            assert r["auto_chooses"] in ("fused", "numba")


def test_training_step_breakdown_times_every_model_step_by_step(data_dir, tmp_path):
    payload = run_smoke("training_step_breakdown", data_dir, tmp_path)
    models = set(payload["median_step_ms"])
    assert {"graphattn", "pyg", "graphattn_no_attention", "pyg_graphattn_dropout"} <= models
    assert all(value > 0 for value in payload["median_step_ms"].values())
    assert set(payload["paired_over_pyg"]) == models and payload["paired_over_pyg"]["pyg"] == 1.0
    assert all(len(values) == 1 for values in payload["rounds_ms"].values())  # --smoke: 1
    assert payload["smoke"] is True and payload["rounds"] == 1
    assert set(payload["layer_ms"]) == {
        "graphattn",
        "graphattn_no_self_loops",
        "pyg_transformer_conv",
    }


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA exit")
@pytest.mark.parametrize("name", ["cuda_kernel_bandwidth.py", "cuda_host_syncs.py"])
def test_cuda_scripts_exit_1_without_cuda_saying_why(name, tmp_path):
    # they exited 0, where attention_bench.py --device cuda exits 1
    result = run_script(name, "--out", str(tmp_path / "out"))
    assert result.returncode == 1, result.stderr[-2000:]
    assert f"{name}: no CUDA device: nothing to measure" in result.stderr
    assert not (tmp_path / "out").exists()


def test_host_syncs_writes_each_implementations_row_with_the_machine(monkeypatch, tmp_path):
    script = import_script("cuda_host_syncs", monkeypatch)
    measured = {"fused": (3.24, 3.0), "pyg": (3.04, 0.0)}
    calls = []

    def measure(data_dir, impl):
        assert data_dir == tmp_path / "data"
        calls.append("measure")
        ms, syncs = measured[impl]
        return {"impl": impl, "syncs_per_step": syncs, "median_ms": ms}

    machine = {"cuda": {"name": "NVIDIA H200"}, "graphattn_commit": "abc1234"}
    monkeypatch.setattr(script.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(script, "measure", measure)
    monkeypatch.setattr(script, "machine_info", lambda: calls.append("machine") or machine)
    out = tmp_path / "out"
    assert script.main(["--data-dir", str(tmp_path / "data"), "--out", str(out)]) == 0
    assert calls == ["machine", "measure", "measure"]  # the load before the timing
    payload = json.loads((out / "cuda_host_syncs.json").read_text())
    assert [(r["impl"], r["median_ms"], r["syncs_per_step"]) for r in payload["rows"]] == [
        ("fused", 3.24, 3.0),
        ("pyg", 3.04, 0.0),
    ]
    assert payload["machine"] == machine
    assert (payload["batch_size"], payload["profiled_steps"], payload["timed_steps"]) == (
        128,
        8,
        120,
    )
    markdown = (out / "cuda_host_syncs.md").read_text()
    assert "NVIDIA H200, graphattn abc1234" in markdown
    assert "| fused | 3.24 | 3.0 |" in markdown and "| pyg | 3.04 | 0.0 |" in markdown


def test_kernel_bandwidth_writes_its_rows_with_the_machine_read_first(monkeypatch, tmp_path):
    script = import_script("cuda_kernel_bandwidth", monkeypatch)
    calls = []
    row = {
        "dtype": "fp32",
        "pass": "forward",
        "median_ms": 3.24,
        "traffic_bytes": 7.3e9,
        "bandwidth_gb_s": 2253.1,
        "fraction_of_copy_bandwidth": 0.535,
    }

    def measure(nodes, degree, heads, head_dim, repeats):
        calls.append(("measure", nodes, degree, heads, head_dim, repeats))
        return {"allowed_pairs": 1234, "copy_bandwidth_gb_s": 4210.4, "rows": [row]}

    machine = {"cuda": {"name": "NVIDIA H200"}}
    monkeypatch.setattr(script.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(script, "measure", measure)
    monkeypatch.setattr(script, "machine_info", lambda: calls.append("machine") or machine)
    out = tmp_path / "out"
    argv = ["--nodes", "1000", "--degree", "3", "--heads", "2", "--head-dim", "8"]
    assert script.main([*argv, "--repeats", "5", "--out", str(out)]) == 0
    assert calls == ["machine", ("measure", 1000, 3, 2, 8, 5)]  # the load before the timing
    payload = json.loads((out / "cuda_kernel_bandwidth.json").read_text())
    assert payload["machine"] == machine and payload["rows"] == [row]
    markdown = (out / "cuda_kernel_bandwidth.md").read_text()
    assert "NVIDIA H200, measured copy bandwidth 4210 GB/s; N=1,000, " in markdown
    assert "allowed pairs 1,234, 2 heads x 8." in markdown
    assert "| fp32 | forward | 3.24 | 7.30 | 2253 | 54% |" in markdown


def test_kernel_traffic_counts_every_read_and_write():
    sys.path.insert(0, str(REPO / "benchmarks"))
    from cuda_kernel_bandwidth import traffic_bytes

    # 2 nodes, 3 edges, 1 head of width 2, fp32: a node row b = 8 bytes, H = 1.
    counted = traffic_bytes(2, 3, 1, 2, 4)
    forward = 2 * (2 * 8 + 4 + 8) + 3 * (8 + 2 * 8)  # lse, then the max and sum
    per_target = 2 * (3 * 8 + 8 + 4) + 3 * (8 + 2 * 8 + 8)  # the max and sum, delta
    per_source = 2 * 2 * 8 + 3 * (16 + 8 + 2 * 8)
    assert counted == {"forward": forward, "forward_backward": forward + per_target + per_source}
    # bytes grow linearly with the edges: one more edge adds its gathers and buffers
    more = traffic_bytes(2, 4, 1, 2, 4)
    assert more["forward"] - counted["forward"] == 8 + 2 * 8


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_copy_bandwidth_is_plausible():
    from graphattn.bench.machine import copy_bandwidth_gb_s

    # a units check (GB/s, not bytes/s or TB/s), not a speed target: any GPU moves
    # between 10 GB/s and 20 TB/s (reads + writes)
    assert 10 < copy_bandwidth_gb_s("cuda", size_bytes=2**26) < 20_000


# --------------------------------------------------------------------------- summaries


def import_script(name: str, monkeypatch: pytest.MonkeyPatch):
    """``benchmarks/<name>.py`` imported as a module (it imports ``_common`` by name)."""
    import importlib

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    return importlib.import_module(name)


def _molecule_run(seed: int, rmse: float) -> dict:
    return {
        "dataset": "esol",
        "model": "graphattn",
        "seed": seed,
        "test": {"rmse": rmse, "mae": 0.3, "r2": 0.9},
        "train_seconds": 10.0,
        "epochs_run": 5,
        "best_epoch": 4,
    }


def test_molecule_target_with_a_diverged_seed_is_not_met(monkeypatch):
    script = import_script("molecule_targets", monkeypatch)
    runs = [_molecule_run(0, 0.4), _molecule_run(1, float("nan")), _molecule_run(2, 0.5)]
    (summary,) = script.summarize_runs(runs)
    assert summary["rmse"]["n"] == 2 and summary["rmse"]["nonfinite_seeds"] == [1]
    rmse = next(c for c in script.check_targets([summary]) if "RMSE" in c["target"])
    assert rmse["value"] == pytest.approx(0.45)  # the finite seeds' mean, below 0.55
    assert rmse["met"] is False and "seed(s) 1 not finite" in rmse["note"]
    (row,) = script._mean_rows([summary])
    assert row[2] == "2/3"  # finite seeds / seeds run
    assert "(seed(s) 1 not finite (diverged); value over 2)" in script._value_cell(rmse)


def test_molecule_target_with_finite_seeds_is_judged_on_the_mean(monkeypatch):
    script = import_script("molecule_targets", monkeypatch)
    (summary,) = script.summarize_runs([_molecule_run(0, 0.4), _molecule_run(1, 0.5)])
    rmse = next(c for c in script.check_targets([summary]) if "RMSE" in c["target"])
    assert rmse["met"] is True and rmse["note"] is None
    assert script._mean_rows([summary])[0][2] == "2/2"


def test_molecule_targets_are_not_judged_outside_their_setting(monkeypatch):
    script = import_script("molecule_targets", monkeypatch)
    settings = {"smoke": False, "graphattn_variant": None, "seeds": [0, 1, 2]}
    assert script.setting_caveats(settings) == []
    assert script.setting_caveats({**settings, "seeds": [6, 7]}) == ["seeds [6, 7]"]
    assert script.setting_caveats({**settings, "smoke": True}) == ["smoke run"]
    (summary,) = script.summarize_runs([_molecule_run(6, 0.4), _molecule_run(7, 0.5)])
    checks = script.check_targets([summary], judged=False)
    assert len(checks) == 2  # ESOL's RMSE and training-time targets
    assert all(c["met"] is None and c["note"] == "not the targets' setting" for c in checks)
    rmse = next(c for c in checks if "RMSE" in c["target"])
    assert rmse["value"] == pytest.approx(0.45)  # still listed, below 0.55, but not judged


def _node_run(seed: int, accuracy: float) -> dict:
    return {
        "part": "facebook",
        "model": "graphattn",
        "seed": seed,
        "test": {"accuracy": accuracy, "macro_f1": 0.9, "correct": 100, "total": 110},
        "train_seconds": 10.0,
        "epochs_run": 5,
        "best_epoch": 4,
    }


def test_node_target_with_a_diverged_seed_is_not_met(monkeypatch):
    script = import_script("node_targets", monkeypatch)
    runs = [_node_run(0, 0.95), _node_run(1, float("inf")), _node_run(2, 0.96)]
    (summary,) = script.summarize_runs(runs)
    accuracy = next(c for c in script.check_targets([summary]) if "accuracy" in c["target"])
    assert accuracy["value"] == pytest.approx(0.955)  # finite seeds' mean, above 0.92
    assert accuracy["met"] is False and "seed(s) 1 not finite" in accuracy["shown"]
    assert script._mean_rows([summary])[0][2] == "2/3"


def test_molecule_targets_judge_graphattn_only_on_the_slowest_seed_and_the_test_rmse(monkeypatch):
    script = import_script("molecule_targets", monkeypatch)
    runs = [_molecule_run(0, 0.5), _molecule_run(1, 0.6)]
    runs[0]["train_seconds"], runs[1]["train_seconds"] = 100.0, 180.0  # mean 140, max 180
    runs[0]["val"] = {"rmse": 9.0, "mae": 9.0, "r2": 9.0}
    baseline = {**_molecule_run(0, 0.1), "model": "attentivefp"}
    summaries = script.summarize_runs([*runs, baseline])
    checks = script.check_targets(summaries)
    assert [c["target"] for c in checks] == [
        "esol: mean test RMSE ≤ 0.55",
        "esol: training < 180 s per seed",
    ]  # nothing for the baseline
    assert checks[0]["value"] == pytest.approx(0.55) and checks[0]["met"] is True  # ≤ target
    assert checks[1]["value"] == 180.0 and checks[1]["met"] is False  # the slowest, not <
    assert script._mean_rows(summaries[:1])[0][3] == "**0.550 ± 0.071**"
    assert script._seed_rows(runs[:1])[0][3:6] == ["0.500", "0.300", "0.900"]
    variant = {"model_overrides": {"layers": 1}}
    settings = {"smoke": False, "graphattn_variant": variant, "seeds": [0, 1, 2]}
    assert script.setting_caveats(settings) == [
        'graphattn variant {"model_overrides": {"layers": 1}}'
    ]


def test_molecule_targets_split_each_seed_like_the_trainer(data_dir, tmp_path, monkeypatch):
    from graphattn.splits.molecules import random_split

    script = import_script("molecule_targets", monkeypatch)
    argv = ["--smoke", "--datasets", "esol", "--seeds", "3", "4", "--data-dir", str(data_dir)]
    args = script.parse_args([*argv, "--out", str(tmp_path)])
    splits = []
    sizes = {"train": 120, "val": 15, "test": 15}

    def fake_graphattn(dataset, name, seed, args):
        return {"num_molecules": dict(sizes), "test": {"rmse": 1.0}, "train_seconds": 0.0,
                "epochs_run": 1}  # fmt: skip

    def fake_attentivefp(graphs, split, seed, settings):
        splits.append((seed, split))
        return {"num_molecules": {"train": 1}, "test": {"rmse": 1.0}, "train_seconds": 0.0,
                "epochs_run": 1}  # fmt: skip

    monkeypatch.setattr(script, "run_graphattn", fake_graphattn)
    monkeypatch.setattr(script, "run_attentivefp", fake_attentivefp)
    payload = {"runs": []}
    script.run_dataset("esol", args, script.AttentiveFPSettings(epochs=1), payload)
    assert [(r["model"], r["seed"]) for r in payload["runs"]] == [
        ("graphattn", 3), ("attentivefp", 3), ("graphattn", 4), ("attentivefp", 4),
    ]  # fmt: skip
    assert [r["same_split_sizes"] for r in payload["runs"]] == [True, False, True, False]
    for seed, split in splits:
        expected = random_split(150, (0.8, 0.1, 0.1), seed)
        assert {k: list(v) for k, v in split.items()} == {k: list(v) for k, v in expected.items()}
    assert script.args_config("esol", 3, args).epochs == script.SMOKE_EPOCHS


def test_molecule_targets_attentivefp_restores_the_best_validation_epoch(monkeypatch):
    # the epoch is chosen on validation RMSE (not test) and its weights are the ones scored
    from types import SimpleNamespace

    script = import_script("molecule_targets", monkeypatch)
    items = [SimpleNamespace(smiles="CCO", y=torch.tensor([[float(v)]])) for v in range(10)]
    graphs = script.pyg_graphs(items)
    split = {"train": np.arange(4), "val": np.arange(4, 7), "test": np.arange(7, 10)}
    val_rmse, test_rmse = {1: 3.0, 2: 1.0, 3: 2.0}, {1: 0.5, 2: 2.0, 3: 1.5}

    def fake_train(model, loader, optimizer, mean, std):
        next(model.parameters()).data.fill_(fake_train.epoch)
        fake_train.epoch += 1

    def fake_evaluate(model, loader, mean, std):
        epoch = int(next(model.parameters()).data.flatten()[0])
        table = (
            val_rmse if len(loader.dataset) == 3 and loader.dataset[0] is graphs[4] else test_rmse
        )
        return {"rmse": table[epoch], "mean": mean, "std": std}

    fake_train.epoch = 1
    monkeypatch.setattr(script, "_train_epoch", fake_train)
    monkeypatch.setattr(script, "_evaluate", fake_evaluate)
    settings = script.AttentiveFPSettings(hidden=8, epochs=3)
    result = script.run_attentivefp(graphs, split, 0, settings)
    assert result["best_epoch"] == 2 and result["epochs_run"] == 3
    assert result["val"]["rmse"] == 1.0 and result["test"]["rmse"] == 2.0
    assert result["test"]["mean"] == pytest.approx(1.5)  # standardised on the training part
    assert result["test"]["std"] == pytest.approx(float(torch.tensor([0.0, 1, 2, 3]).std()))
    assert result["num_molecules"] == {"train": 4, "val": 3, "test": 3}


def test_node_targets_judge_graphattn_on_the_worst_karate_seed_and_the_slowest_run(monkeypatch):
    script = import_script("node_targets", monkeypatch)
    karate = []
    for seed, correct in ((0, 32), (1, 30)):  # mean 31 meets the target, the worst seed not
        run = {**_node_run(seed, correct / 32), "part": "karate"}
        run["test"] = {**run["test"], "correct": correct, "total": 32}
        karate.append(run)
    facebook = [_node_run(0, 0.95), _node_run(1, 0.93)]
    facebook[1]["train_seconds"] = 300.0  # mean 155, max 300
    gat = {**_node_run(0, 0.5), "model": "gat"}
    summaries = script.summarize_runs([*karate, *facebook, gat])
    checks = script.check_targets(summaries)
    assert [(c["target"], c["value"], c["met"]) for c in checks] == [
        ("karate: ≥ 31/32 correct, every seed", 30, False),
        ("facebook: mean test accuracy ≥ 0.92", pytest.approx(0.94), True),
        ("facebook: training < 300 s per run", 300.0, False),
    ]  # nothing for the baseline
    assert checks[0]["shown"] == "30/32 (worst seed)"
    assert script._mean_rows(summaries[:1])[0][5] == "31.0/32 (min 30)"
    full = {"smoke": False, "seeds": [0, 1, 2], "karate_seeds": [0, 1, 2, 3, 4]}
    assert script.setting_caveats({**full, "seeds": [0]}, "karate") == []
    assert script.setting_caveats({**full, "karate_seeds": [0]}, "facebook") == []
    assert script.setting_caveats({**full, "karate_seeds": [0]}, "karate") == ["seeds [0]"]


def test_node_targets_run_the_models_of_each_part_on_each_seeds_masks(monkeypatch, tmp_path):

    from graphattn.splits.nodes import node_split_masks

    script = import_script("node_targets", monkeypatch)
    y = torch.arange(40) % 2
    data = Data(x=torch.randn(40, 3), edge_index=torch.tensor([[0, 1], [1, 0]]), y=y)
    seen = []
    record = {"test": {"accuracy": 1.0, "correct": 1, "total": 1, "macro_f1": 1.0},
              "train_seconds": 0.0, "epochs_run": 1}  # fmt: skip

    def fake_graphattn(data, masks, config, name):
        seen.append((name, "graphattn", config.seed, masks))
        return dict(record)

    def fake_pyg(kind, x, data, masks, seed, s):
        seen.append((data.num_nodes, kind, seed, masks))
        return dict(record)

    monkeypatch.setattr(script, "facebook_graph", lambda args: data)
    monkeypatch.setattr(script, "train_graphattn", fake_graphattn)
    monkeypatch.setattr(script, "train_pyg", fake_pyg)
    args = script.parse_args(["--seeds", "3", "4", "--karate-seeds", "5", "--out", str(tmp_path)])
    payload = {"runs": []}
    script.run_karate(args, payload)
    script.run_facebook(args, payload)
    assert [(r["part"], r["model"], r["seed"]) for r in payload["runs"]] == [
        ("karate", "graphattn", 5), ("karate", "gat", 5),
        *[("facebook", m, s) for s in (3, 4) for m in ("graphattn", "gat", "transformer")],
    ]  # fmt: skip
    for *_, seed, masks in seen[2:]:
        expected = node_split_masks(y, fractions=(0.6, 0.2, 0.2), seed=seed)
        assert [masks[p].tolist() for p in ("train", "val", "test")] == [
            m.tolist() for m in expected
        ]


def test_node_targets_pyg_baseline_restores_its_best_validation_epoch(monkeypatch):
    # early stopping reads validation accuracy (not test) and the scores are the best epoch's

    script = import_script("node_targets", monkeypatch)
    y = torch.tensor([0, 1, 0, 1, 0, 1, 0, 1])
    data = Data(x=torch.eye(8), edge_index=torch.tensor([[0, 1], [1, 0]]), y=y)
    masks = {
        "train": torch.tensor([1, 1, 0, 0, 0, 0, 0, 0], dtype=torch.bool),
        "val": torch.tensor([0, 0, 1, 1, 0, 0, 0, 0], dtype=torch.bool),
        "test": torch.tensor([0, 0, 0, 0, 1, 1, 1, 1], dtype=torch.bool),
    }
    wrong = 1 - y
    # epoch 2: validation right, test wrong; epochs 1 and 3: validation wrong, test right
    by_epoch = [wrong.clone(), y.clone(), wrong.clone()]
    by_epoch[1][4:] = wrong[4:]
    by_epoch[0][4:] = y[4:]
    by_epoch[2][4:] = y[4:]
    snapshots = []

    def fake_predict(model, x, edge_index):
        weights = torch.cat([p.detach().flatten() for p in model.parameters()])
        for previous, pred in snapshots:
            if torch.equal(previous, weights):
                return pred
        snapshots.append((weights, by_epoch[len(snapshots)]))
        return snapshots[-1][1]

    monkeypatch.setattr(script, "_predict", fake_predict)
    settings = script.PygSettings(hidden=2, heads=1, epochs=3, patience=None, lr=0.1)
    result = script.train_pyg("gat", data.x, data, masks, 0, settings)
    assert result["best_epoch"] == 2 and result["epochs_run"] == 3
    assert result["val"]["accuracy"] == 1.0 and result["test"]["accuracy"] == 0.0


def test_target_scripts_record_the_runs_settings_and_fields(data_dir, tmp_path, monkeypatch):
    molecules = import_script("molecule_targets", monkeypatch)
    nodes = import_script("node_targets", monkeypatch)
    metrics = {key: key for key in ("test", "val", "train_seconds", "epochs_run", "best_epoch")}
    metrics.update(num_molecules=1, config=2, label_inputs=3, history=4)
    monkeypatch.setattr(molecules, "train_molecule_model", lambda *a, **k: dict(metrics))
    monkeypatch.setattr(nodes, "train_node_model", lambda *a, **k: dict(metrics))
    args = molecules.parse_args(["--smoke", "--out", str(tmp_path)])
    record = molecules.run_graphattn(None, "esol", 0, args)
    assert sorted(record) == sorted(set(metrics) - {"label_inputs", "history"})
    config = nodes.facebook_config(0, smoke=True)
    record = nodes.train_graphattn(None, {}, config, "karate")
    assert sorted(record) == sorted(set(metrics) - {"num_molecules", "history"})
    assert config.epochs == nodes.SMOKE_EPOCHS != nodes.facebook_config(0, smoke=False).epochs
    monkeypatch.setattr(molecules, "machine_info", lambda: dict(FAKE_MACHINE))
    monkeypatch.setattr(molecules, "run_dataset", lambda *a: None)
    argv = ["--smoke", "--datasets", "esol", "--seeds", "5", "--data-dir", str(data_dir)]
    assert molecules.main([*argv, "--out", str(tmp_path)]) == 0
    settings = json.loads((tmp_path / "molecule_targets.json").read_text())["settings"]
    assert settings["seeds"] == [5] and settings["attentivefp"]["epochs"] == 2


# --------------------------------------------------------------------------- machine first

FAKE_MACHINE = {
    "cpu_model": "test CPU",
    "usable_cores": 1,
    "torch_threads": 1,
    "load_average_1_5_15": [0.0, 0.0, 0.0],
}


def _record_machine(script, calls: list[str], monkeypatch) -> None:
    def machine() -> dict:
        calls.append("machine")
        return dict(FAKE_MACHINE)

    monkeypatch.setattr(script, "machine_info", machine)


def test_auto_choice_reads_the_machine_before_timing_and_lists_what_was_not_timed(
    monkeypatch, offline, tmp_path
):
    script = import_script("auto_choice", monkeypatch)
    calls: list[str] = []
    _record_machine(script, calls, monkeypatch)
    paired = [
        {"group": "scaling/N=500,d=10", "impl": "dense", "status": "skipped", "reason": "budget"},
        {"group": "scaling/N=500,d=10", "impl": "fused", "status": "failed", "reason": "E: x"},
    ]

    def run_paired(*args, **kwargs) -> list[dict]:
        calls.append("timing")
        return paired

    monkeypatch.setattr(script, "run_paired", run_paired)
    empty = tmp_path / "no-data"  # no ESOL: the molecule sizes are not run
    assert script.main(["--smoke", "--out", str(tmp_path), "--data-dir", str(empty)]) == 0
    assert calls == ["machine", "timing"]
    text = (tmp_path / "auto_choice.md").read_text()
    assert "2 of 2 implementation/size pairs not timed; ESOL batches not run." in text
    assert "- ESOL batches (molecules), every mode: ESOL data unavailable" in text
    assert "- `scaling/N=500,d=10` dense (skipped): budget" in text
    assert "- `scaling/N=500,d=10` fused (failed): E: x" in text
    assert "out of memory or failed" in text  # the legend of "—"


def test_kernel_crossover_reads_the_machine_before_timing(monkeypatch, tmp_path):
    from graphattn.bench.inputs import random_graph

    script = import_script("kernel_crossover", monkeypatch)
    calls: list[str] = []
    _record_machine(script, calls, monkeypatch)
    monkeypatch.setattr(script, "graphs", lambda args: [("tiny", random_graph(30, 3), 30, None)])

    def interleaved_ms(prepares, repeats, warmup, *rest) -> dict[str, list[float]]:
        calls.append("timing")
        return {name: [1.0] for name in prepares}

    monkeypatch.setattr(script, "interleaved_ms", interleaved_ms)
    assert script.main(["--smoke", "--out", str(tmp_path)]) == 0
    assert calls[0] == "machine" and calls[1:] == ["timing", "timing"]


def test_training_step_breakdown_reads_the_machine_before_timing(monkeypatch, tmp_path):
    script = import_script("training_step_breakdown", monkeypatch)
    calls: list[str] = []
    _record_machine(script, calls, monkeypatch)
    monkeypatch.setattr(script, "load_esol", lambda *a, **k: ([], []))
    monkeypatch.setattr(script, "esol_batches", lambda *a: ([None], 1, 1))
    monkeypatch.setattr(script, "build", lambda *a: None)

    def steps(models, batches, count) -> dict[str, list[float]]:
        calls.append("timing")
        return {name: [1.0] * count for name in models}

    monkeypatch.setattr(script, "interleaved_steps_ms", steps)
    monkeypatch.setattr(script, "component_ms", lambda *a: {})
    monkeypatch.setattr(script, "layer_ms", lambda *a: {})
    assert script.main(["--smoke", "--out", str(tmp_path)]) == 0
    assert calls == ["machine", "timing"]


def test_featurizer_throughput_compares_both_featurizers_on_esol(data_dir):
    result = run_script("featurizer_throughput.py", "--data-dir", str(data_dir), "--repeats", "1")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["n_molecules"] == 1128 and payload["repeats"] == 1
    rates = payload["graphattn_mols_per_s"], payload["pyg_from_smiles_mols_per_s"]
    assert all(rate > 0 for rate in rates)
    assert payload["ratio"] == pytest.approx(rates[0] / rates[1], rel=1e-2)
    assert "load_average_1_5_15" in payload["machine"] and "rdkit" in payload["machine"]


def test_map_in_processes_keeps_the_order_with_one_worker_and_with_a_pool(monkeypatch):
    common = import_script("_common", monkeypatch)
    items = [-3, 1, -4, 1, -5, 9, -2, 6]
    expected = [abs(i) for i in items]
    assert common.map_in_processes(abs, items, workers=1) == expected
    assert common.map_in_processes(abs, items, workers=2, chunksize=1) == expected


def test_fine_tuning_runs_train_the_data_sets_defaults_with_settings_on_top(monkeypatch):
    common = import_script("_common", monkeypatch)
    from graphattn.train import molecules

    configs = []

    def fake_training(dataset, config, dataset_name, progress):
        configs.append(config)
        assert dataset == "the data" and dataset_name == "freesolv" and not progress
        return {"val": {"rmse": 0.5 + config.seed}, "test": {"rmse": 0.7 + config.seed}}

    monkeypatch.setattr(molecules, "train_molecule_model", fake_training)
    runs = common.fine_tuning_runs("the data", "freesolv", [3, 5], ensemble=2)
    assert [(r["seed"], r["val_rmse"], r["test_rmse"]) for r in runs] == [
        (3, 3.5, 3.7),
        (5, 5.5, 5.7),
    ]
    assert [c.seed for c in configs] == [3, 5]
    for config in configs:  # FreeSolv's defaults, one worker, and the setting given
        assert config.init_from == "xtb-hydration-57k" and config.model == {"dropout": 0.0}
        assert config.ensemble == 2 and config.workers == 1
        assert not config.refit  # the stored prototypes predate FreeSolv's refit default
    common.fine_tuning_runs("the data", "freesolv", [3], refit=True)
    assert configs[-1].refit and configs[-1].init_from == "xtb-hydration-57k"


def test_ensemble_spread_summarises_a_runs_test_predictions(tmp_path, monkeypatch, capsys):
    from graphattn.datasets.molecules import MoleculeCSV
    from graphattn.train.molecules import MoleculeTrainConfig, train_molecule_model

    spread = import_script("ensemble_spread", monkeypatch)
    rows = [f"{'C' * n}{end},{n * 0.5 + k}" for k, end in enumerate("ONS") for n in range(1, 14)]
    (tmp_path / "m.csv").write_text("smiles,y\n" + "\n".join(rows) + "\n")
    dataset = MoleculeCSV(tmp_path / "m.csv", target_cols=["y"])
    tiny = {"hidden": 16, "layers": 1}
    for name, ensemble in (("three", 3), ("one", 1)):
        config = MoleculeTrainConfig(epochs=2, ensemble=ensemble, model=tiny)
        train_molecule_model(dataset, config, run_dir=tmp_path / name, progress=False)

    assert spread.main([str(tmp_path / "three"), "--out", str(tmp_path / "out")]) == 0
    (run,) = json.loads((tmp_path / "out" / "ensemble_spread.json").read_text())["runs"]
    summary = run["targets"]["y"]
    metrics = json.loads((tmp_path / "three" / "metrics.json").read_text())
    assert summary["rmse"] == pytest.approx(metrics["test"]["rmse"], rel=1e-5)
    assert summary["mean_std"] == pytest.approx(
        metrics["ensemble_spread"]["test"]["mean_std"], rel=1e-5
    )
    predictions = (tmp_path / "three" / "predictions.csv").read_text().splitlines()[1:]
    worst = max(predictions, key=lambda r: abs(float(r.split(",")[3]) - float(r.split(",")[2])))
    assert summary["worst"]["smiles"] == worst.split(",")[1]
    assert 1 <= summary["worst"]["std_rank"] <= summary["num_molecules"] == len(predictions)
    capsys.readouterr()
    with pytest.raises(SystemExit, match="not a regression ensemble"):
        spread.main([str(tmp_path / "one")])


def test_attention_bench_script_passes_the_paired_rounds_and_suites(monkeypatch, tmp_path):
    # its docstring promises graphattn bench's flags; --paired-rounds was missing
    script = import_script("attention_bench", monkeypatch)
    seen = {}

    def fake_run(**kwargs):
        seen.update(kwargs)
        return {"derived": {"targets": {}}, "cases": []}

    monkeypatch.setattr(script, "run_benchmarks", fake_run)
    argv = ["--quick", "--out", str(tmp_path), "--paired-rounds", "0", "--suites", "scaling"]
    assert script.main([*argv, "--suite", "density"]) == 0
    assert seen["paired_rounds"] == 0 and seen["suites"] == ["scaling", "density"]


def test_attention_bench_script_fails_when_it_measured_nothing(monkeypatch, tmp_path, capsys):
    # like graphattn bench: --device cuda without a GPU records every case as skipped
    script = import_script("attention_bench", monkeypatch)
    skipped = {"status": "skipped", "reason": "CUDA requested but no CUDA device"}
    cases = [skipped, {**skipped, "reason": "dense over budget"}]
    result = {"derived": {"targets": {}}, "cases": cases}
    monkeypatch.setattr(script, "run_benchmarks", lambda **kwargs: result)
    assert script.main(["--quick", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "nothing was measured: CUDA requested but no CUDA device; dense over budget" in err
    cases.append({"status": "ok"})
    assert script.main(["--quick", "--out", str(tmp_path)]) == 0
    result["cases"] = []  # no case at all (say, every suite empty) is not a failure
    assert script.main(["--quick", "--out", str(tmp_path)]) == 0


def test_attention_bench_script_fails_when_a_case_failed(monkeypatch, tmp_path, capsys):
    # 6 of 15 cases failed and the script said "wrote 15 cases" and exited 0
    script = import_script("attention_bench", monkeypatch)
    cases = [
        {"name": "density/fused", "suite": "density", "status": "ok"},
        {"name": "density/dense", "suite": "density", "status": "failed", "reason": "E: x"},
    ]
    monkeypatch.setattr(
        script, "run_benchmarks", lambda **kwargs: {"derived": {"targets": {}}, "cases": cases}
    )
    assert script.main(["--quick", "--out", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert "wrote 2 cases (1 measured)" in out
    assert "attention_bench.py: 1 case(s) failed (first: density/dense: E: x)" in err


@pytest.mark.parametrize(
    ("flags", "message"),
    [(["--max-dense-bytes", "-1"], "'-1'"), (["--case-timeout", "0"], "'0'"),
     (["--case-timeout", "nan"], "'nan'"), (["--paired-rounds", "-1"], "'-1'")],
)  # fmt: skip
def test_attention_bench_script_refuses_bad_settings_while_parsing(
    monkeypatch, capsys, flags, message
):
    script = import_script("attention_bench", monkeypatch)
    with pytest.raises(SystemExit) as exit_info:
        script.main(["--quick", *flags])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


# ------------------------------------------------------------------- arguments and data


def test_molecule_targets_baseline_trains_on_the_variants_split(data_dir, tmp_path, monkeypatch):
    # a variant's split or fractions went to graphattn only: AttentiveFP kept random 80/10/10
    from graphattn.splits.molecules import scaffold_split

    script = import_script("molecule_targets", monkeypatch)
    overrides = '{"split": "scaffold", "fractions": [0.6, 0.2, 0.2]}'
    argv = ["--smoke", "--datasets", "esol", "--train-overrides", overrides]
    args = script.parse_args([*argv, "--data-dir", str(data_dir), "--out", str(tmp_path)])
    splits = []
    record = {"num_molecules": {}, "test": {"rmse": 1.0}, "train_seconds": 0.0, "epochs_run": 1}
    monkeypatch.setattr(script, "pyg_graphs", lambda dataset: None)
    monkeypatch.setattr(script, "run_graphattn", lambda *args: dict(record))
    monkeypatch.setattr(
        script, "run_attentivefp", lambda g, split, s, a: splits.append(split) or dict(record)
    )
    script.run_dataset("esol", args, script.AttentiveFPSettings(epochs=1), {"runs": []})
    dataset = script.load_dataset("esol", args)
    expected = scaffold_split(list(dataset.smiles), (0.6, 0.2, 0.2), 0)
    assert {part: list(idx) for part, idx in splits[0].items()} == {
        part: list(idx) for part, idx in expected.items()
    }


def test_molecule_targets_refuse_a_bad_variant_before_reading_any_data(tmp_path, monkeypatch):
    script = import_script("molecule_targets", monkeypatch)
    monkeypatch.setattr(script, "load_dataset", lambda *a: pytest.fail("data read"))
    for flag, value, message in (
        ("--train-overrides", '{"epochz": 5}', "no MoleculeTrainConfig field(s) ['epochz']"),
        ("--train-overrides", '{"split": "scafold"}', "split must be 'random' or 'scaffold'"),
        ("--model-overrides", '{"layrs": 4}', "no MoleculeModelConfig field(s) ['layrs']"),
    ):
        with pytest.raises(GraphInputError, match=re.escape(message)):
            script.main([flag, value, "--out", str(tmp_path)])


def test_node_targets_outside_their_setting_are_listed_not_judged(tmp_path, monkeypatch):
    # a smoke run said "met" for karate's "every seed" target after one seed, and its JSON
    # named five karate seeds and 300 baseline epochs where one seed and 2 epochs ran
    script = import_script("node_targets", monkeypatch)
    monkeypatch.setattr(script, "machine_info", lambda: dict(FAKE_MACHINE))
    argv = ["--smoke", "--parts", "karate", "--models", "gat", "--out", str(tmp_path)]
    assert script.main(argv) == 0
    payload = json.loads((tmp_path / "node_targets.json").read_text())
    assert payload["settings"]["karate_seeds"] == [0] == [r["seed"] for r in payload["runs"]]
    assert payload["settings"]["facebook_pyg"]["epochs"] == 2
    (summary,) = script.summarize_runs([_node_run(0, 0.95), _node_run(1, 0.96)])
    full = {"smoke": False, "seeds": [0, 1, 2], "karate_seeds": [0, 1, 2, 3, 4]}
    assert all(c["met"] is not None for c in script.check_targets([summary], full))
    for settings, caveat in (
        ({**full, "smoke": True}, "smoke run"),
        ({**full, "seeds": [0, 1]}, "seeds [0, 1]"),
    ):
        for check in script.check_targets([summary], settings):
            assert check["met"] is None and caveat in check["note"] and caveat in check["shown"]


def test_a_missing_data_set_stops_a_script_at_its_start_with_one_error_line(
    data_dir, tmp_path, monkeypatch, offline, capsys
):
    # the ablation ran every ESOL variant, then died with a traceback on facebook-pages
    script = import_script("ablation", monkeypatch)
    only_esol = _esol_only(data_dir, tmp_path)
    monkeypatch.setattr(script, "ablate_esol", lambda *a: pytest.fail("ESOL ran"))
    argv = ["--tasks", "esol", "facebook", "--data-dir", str(only_esol), "--out", str(tmp_path)]
    assert script.run_main(lambda: script.main(argv)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{os.path.basename(sys.argv[0])}: error: data set 'facebook-pages'")
    assert "Traceback" not in err and str(only_esol / "facebook-pages") in err


def _esol_only(data_dir, tmp_path):
    """A data folder holding ESOL (linked from the shared one) and nothing else."""
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "esol").symlink_to(data_dir / "esol")
    return folder


@pytest.mark.parametrize(
    ("name", "argv", "message"),
    [
        ("auto_choice", ["--seeds", "1"], "unrecognized arguments: --seeds"),  # took no seed
        ("kernel_crossover", ["--seeds", "1"], "unrecognized arguments: --seeds"),
        ("training_step_breakdown", ["--seeds", "1"], "unrecognized arguments: --seeds"),
        ("xtb_labels", ["--seeds", "1"], "unrecognized arguments: --seeds"),
        ("auto_choice", ["--rounds", "0"], "'0': expected a whole number of at least 1"),
        ("kernel_crossover", ["--repeats", "0"], "'0': expected a whole number of at least 1"),
        ("training_step_breakdown", ["--rounds", "0"], "'0': expected a whole"),
        ("ablation", ["--smoke", "--epochs", "0"], "'0': expected a whole"),  # ran 1 epoch
        ("ablation", ["--facebook-epochs", "0"], "'0': expected a whole"),
        ("molecule_targets", ["--threads", "0"], "'0': expected a whole"),  # was ignored
        ("attention_bench", ["--repeats", "0"], "'0': expected a whole"),
    ],
)
def test_scripts_refuse_arguments_they_cannot_honour(name, argv, message, monkeypatch, capsys):
    script = import_script(name, monkeypatch)
    parse = script.build_parser().parse_args if name == "attention_bench" else script.parse_args
    with pytest.raises(SystemExit) as exit_info:
        parse(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_pretraining_refuses_xtb_flags_without_xtb_targets(tmp_path, monkeypatch):
    # it pretrained on descriptors and ignored them
    script = import_script("pretraining", monkeypatch)
    for flag, value in (("--xtb-labels", "labels.csv"), ("--xtb-models", "GFN1-xTB/alpb")):
        with pytest.raises(SystemExit, match=f"{flag}: only with --targets xtb"):
            script.main([flag, value, "--out", str(tmp_path)])
    assert not (tmp_path / "corpus.csv").exists()


def test_ablation_plot_marks_the_default_only_when_it_ran(monkeypatch):
    script = import_script("ablation", monkeypatch)
    import matplotlib.pyplot as plt

    def result(name: str, mean: float) -> dict:
        return {"variant": name, "test": {"mean": mean, "std": None}}

    for results, dotted in (
        ([result("pe=rw", 2.3), result("hops=2", 2.5)], 0),  # was a "default" line at pe=rw
        ([result("default", 2.4), result("hops=2", 2.5)], 1),
    ):
        fig, ax = plt.subplots()
        script._plot_panel(ax, results, "test", "test RMSE", "esol")
        assert sum(line.get_linestyle() == ":" for line in ax.get_lines()) == dotted
        plt.close(fig)


def test_auto_choice_table_counts_the_sizes_within_10_percent_and_the_right_choices(
    monkeypatch,
):
    from graphattn.bench.analysis import auto_vs_best

    script = import_script("auto_choice", monkeypatch)

    def case(group: str, impl: str, ms: float | None, **extra) -> dict:
        if ms is None:
            return {"group": group, "impl": impl, "status": "skipped", "reason": "budget"}
        return {"group": group, "impl": impl, "status": "ok", "median_seconds": ms / 1e3, **extra}

    paired = [  # a: dense is faster, auto ran sparse 5% slower; b: no dense, auto sparse
        *(case("a", impl, ms) for impl, ms in (("fused", 2.0), ("reference", 3.0), ("dense", 1.0))),
        case("a", "auto", 1.05, auto_choice="sparse"),
        *(
            case("b", impl, ms)
            for impl, ms in (("fused", 4.0), ("reference", 5.0), ("dense", None))
        ),
        case("b", "auto", 4.2, auto_choice="sparse"),
    ]
    payload = {"machine": FAKE_MACHINE, "smoke": False, "rounds": 12, "paired": paired}
    payload["comparisons"] = auto_vs_best(paired)
    text = script.render_markdown(payload)
    assert "Median of 12 interleaved forward + backward passes, ms" in text
    assert (
        "within 10% of the faster mode in **2/2** sizes; it chose the faster mode in 1/2." in text
    )
    assert "| a | 2.00 | 3.00 | 1.00 | 1.05 | sparse | dense | 1.050 | yes |" in text
    assert "| b | 4.00 | 5.00 | — | 4.20 | sparse | sparse | 1.050 | yes |" in text
    assert "1 of 8 implementation/size pairs not timed." in text


def test_kernel_crossover_rows_hold_the_median_times_their_ratios_and_the_auto_kernel(
    monkeypatch, tmp_path
):
    from graphattn.bench.inputs import random_graph

    script = import_script("kernel_crossover", monkeypatch)
    monkeypatch.setattr(script, "machine_info", lambda: dict(FAKE_MACHINE))
    # 7,000 nodes, in-degree 10 + self-loops: E'·H·D = 77,000 x 64, over the Numba size
    graph = ("big", random_graph(7000, 10), 7000, None)
    monkeypatch.setattr(script, "graphs", lambda args: [graph])
    samples = {"fused": [1.0, 2.0, 9.0], "gather": [4.0] * 3, "reference": [16.0] * 3}
    samples["numba"] = [1.0, 1.0, 4.0]
    repeats = []

    def interleaved_ms(prepares, count, warmup, *rest) -> dict[str, list[float]]:
        repeats.append(count)
        return {name: samples[name] for name in prepares}

    monkeypatch.setattr(script, "interleaved_ms", interleaved_ms)
    assert script.main(["--smoke", "--out", str(tmp_path)]) == 0
    assert repeats == [2, 2]  # --smoke: 2 timed passes
    rows = json.loads((tmp_path / "kernel_crossover.json").read_text())["rows"]
    numba = "numba" in script.KERNELS
    for row, edge_features in zip(rows, (False, True), strict=True):
        assert row["edge_features"] is edge_features
        assert row["allowed_pairs"] == 77_000 and row["size_EHD"] == 77_000 * 64
        assert (row["fused_ms"], row["gather_ms"], row["reference_ms"]) == (2.0, 4.0, 16.0)
        assert row["fused_over_reference"] == 0.125 and row["fused_over_gather"] == 0.5
        assert row["gather_over_reference"] == 0.25
        assert row.get("numba_over_gather") == (0.25 if numba else None)
    # over the Numba (or plain fused) size without edge features; Numba or gather with
    assert [r["auto_chooses"] for r in rows] == ["fused", "numba" if numba else "gather"]
    text = (tmp_path / "kernel_crossover.md").read_text()
    cells = "1.00 | 0.25" if numba else "- | -"
    assert f"| big | yes | 4.93M | 2.00 | 4.00 | 16.00 | 0.50 | 0.25 | {cells} |" in text


def _fake_steps(names) -> dict[str, list[float]]:
    steps = {name: [1.0] * 4 for name in names}
    steps["pyg"] = [10.0, 20.0, 30.0, 40.0]
    steps["graphattn"] = [5.0, 10.0, 30.0, 20.0]
    steps["graphattn_no_attention"] = [2.0] * 4
    steps["graphattn_projections_only"] = [4.0] * 4
    steps["pyg_no_attention"] = [3.0] * 4
    return steps


def test_training_step_breakdown_medians_ratios_and_attention_times(monkeypatch, tmp_path):
    script = import_script("training_step_breakdown", monkeypatch)
    monkeypatch.setattr(script, "machine_info", lambda: dict(FAKE_MACHINE))
    monkeypatch.setattr(script, "load_esol", lambda *a, **k: ([], []))
    monkeypatch.setattr(script, "esol_batches", lambda *a: (["batch"], 1, 1))
    monkeypatch.setattr(script, "build", lambda name, *a: name)
    monkeypatch.setattr(script, "interleaved_steps_ms", lambda models, b, n: _fake_steps(models))
    monkeypatch.setattr(script, "component_ms", lambda *a: {})
    monkeypatch.setattr(script, "layer_ms", lambda *a: {})
    assert script.main(["--repeats", "2", "--rounds", "2", "--out", str(tmp_path)]) == 0
    payload = json.loads((tmp_path / "training_step_breakdown.json").read_text())
    assert payload["median_step_ms"]["graphattn"] == 15.0 and payload["median_step_ms"]["pyg"] == 25
    assert payload["rounds_ms"]["pyg"] == [15.0, 35.0]  # blocks of --repeats steps
    assert payload["rounds_ms"]["graphattn"] == [7.5, 25.0]
    assert payload["over_pyg"]["graphattn"] == 15 / 25  # of the medians
    assert payload["paired_over_pyg"]["graphattn"] == 0.5  # median of the step ratios
    assert payload["attention_ms"] == {
        "graphattn": 13.0,
        "graphattn_projections_only": 2.0,
        "pyg": 22.0,
    }


def test_training_step_breakdown_models_differ_in_what_they_say(data_dir, monkeypatch):
    from torch import nn

    from graphattn.bench.inputs import esol_batches, load_esol
    from graphattn.nn.dropout import Dropout

    script = import_script("training_step_breakdown", monkeypatch)
    smiles, targets = load_esol(data_dir, download=False)
    (batch,), atom_dim, bond_dim = esol_batches(smiles[:8], targets[:8], 8, 1)
    models = {name: script.build(name, atom_dim, bond_dim) for name in script.MODELS}
    kernels = {n: {b.attention.kernel for b in models[n].layers} for n in ("graphattn",)}
    assert kernels["graphattn"] != {"reference"}
    assert {b.attention.kernel for b in models["graphattn_reference_kernel"].layers} == {
        "reference"
    }
    for name, model in models.items():
        dropouts = {type(m) for m in model.modules() if isinstance(m, (nn.Dropout, Dropout))}
        if name == "pyg_graphattn_dropout":
            assert dropouts == {Dropout}
        elif name.startswith("pyg"):
            assert dropouts == {nn.Dropout}
    # the projections-only stand-in still adds the edge terms (one scatter)
    layer = models["graphattn_projections_only"].layers[0].attention
    assert isinstance(layer, script.ProjectionsOnly) and layer.attention.edge_dim
    torch.manual_seed(0)
    x = torch.randn(batch.x.size(0), layer.attention.in_channels)
    edge_attr = torch.randn(batch.edge_index.size(1), layer.attention.edge_dim)
    with torch.no_grad():
        plain = layer(x, batch.edge_index, edge_attr, batch.batch)
        doubled = layer(x, batch.edge_index, 2 * edge_attr, batch.batch)
    assert not torch.allclose(plain, doubled)


def test_training_step_breakdown_times_the_layer_with_and_without_self_loops(monkeypatch):
    import graphattn.nn.attention as attention
    from graphattn.bench.inputs import random_graph

    script = import_script("training_step_breakdown", monkeypatch)
    self_loops = []

    class Recording(attention.GraphSelfAttention):
        def __init__(self, *args, **kwargs):
            self_loops.append(kwargs.get("add_self_loops", True))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(attention, "GraphSelfAttention", Recording)
    times = [1.0, 3.0, 2.0]
    monkeypatch.setattr(script, "interleaved_ms", lambda p, n, warmup: {k: times for k in p})
    batch = Data(x=torch.zeros(6, 3), edge_index=random_graph(6, 2))
    assert script.layer_ms(batch, 1) == {
        "graphattn": 2.0,
        "graphattn_no_self_loops": 2.0,
        "pyg_transformer_conv": 2.0,
    }
    assert self_loops == [True, False]


def test_ensemble_spread_target_summary_ranks_the_worst_and_the_top_tenth(tmp_path, monkeypatch):
    spread = import_script("ensemble_spread", monkeypatch)
    std = [i / 100 for i in range(30)]
    std[27], std[29], std[16] = 0.9, 0.5, 0.5  # the worst (29) ties with 16, after 27
    rows = [
        {"smiles": f"C{i}", "y": "0.0", "pred_y": str(i / 10), "std_y": str(std[i])}
        for i in range(30)
    ]
    rows += [{"smiles": "N", "y": value, "pred_y": "9", "std_y": "0"} for value in ("", "nan")]
    summary = spread.target_summary(rows, "y")
    errors = np.arange(30) / 10
    assert summary["num_molecules"] == 30  # the unlabelled rows are left out
    assert summary["rmse"] == pytest.approx(float(np.sqrt(np.mean(errors**2))))
    assert summary["mean_std"] == pytest.approx(float(np.mean(std)))
    assert summary["worst"] == {
        "smiles": "C29",
        "measured": 0.0,
        "predicted": 2.9,
        "std": 0.5,
        "std_rank": 2,  # one larger spread; the tie does not count
    }
    # errors' top three {27, 28, 29}; spread's {27, 29, 16}
    assert summary["top_tenth_overlap"] == "2/3"
    metrics = {"dataset": "esol", "seed": 3, "ensemble_size": 3, "target_cols": ["y"]}
    (tmp_path / "metrics.json").write_text(json.dumps({**metrics, "ensemble_spread": {}}))
    header = "smiles,y,pred_y,std_y\n"
    lines = [f"{r['smiles']},{r['y']},{r['pred_y']},{r['std_y']}\n" for r in rows]
    (tmp_path / "predictions.csv").write_text(header + "".join(lines))
    run = spread.run_summary(tmp_path)
    assert {k: run[k] for k in ("dataset", "seed", "ensemble_size")} == {
        "dataset": "esol",
        "seed": 3,
        "ensemble_size": 3,
    }
    assert run["targets"]["y"] == summary


def test_featurizer_throughput_takes_the_median_of_the_timed_passes(monkeypatch, capsys):
    script = import_script("featurizer_throughput", monkeypatch)
    monkeypatch.setattr(script, "dataset_smiles", lambda name, data_dir: ["C"] * 10)
    monkeypatch.setattr(script, "describe_machine", lambda: {})
    # the warm-up pass of each (100 s), then 3 timed passes each, taking turns
    seconds = [100.0, 100.0, 1.0, 5.0, 4.0, 8.0, 2.0, 4.0]
    calls = []

    def seconds_per_pass(featurize, smiles):
        calls.append("pyg" if featurize is script.from_smiles else "graphattn")
        return seconds[len(calls) - 1]

    monkeypatch.setattr(script, "seconds_per_pass", seconds_per_pass)
    monkeypatch.setattr("sys.argv", ["featurizer_throughput.py", "--repeats", "3"])
    assert script.main() == 0
    payload = json.loads(capsys.readouterr().out)
    assert calls == ["graphattn", "pyg"] * 4
    assert payload["graphattn_mols_per_s"] == 5.0 and payload["pyg_from_smiles_mols_per_s"] == 2.0
    assert payload["ratio"] == 2.5 and payload["n_molecules"] == 10 and payload["repeats"] == 3


class _FakeFreeSolv:
    smiles = ["C", "CC", "CCC", "CCCC"]
    experiment = [-1.0, -2.0, -4.0, -5.0]

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i):
        return Data(y=torch.tensor([self.experiment[i]]))


def test_xtb_labels_uses_the_molecules_with_every_value_and_lists_the_failures(
    monkeypatch, tmp_path
):
    script = import_script("xtb_labels", monkeypatch)
    dataset = _FakeFreeSolv()
    monkeypatch.setattr(script, "load_molecule_dataset", lambda *a, **k: dataset)
    shift = {0: 0.0, 2: 0.3, 3: -0.6}  # per conformer seed, times the molecule's size

    def energies(mol, models, seed):
        i = mol.GetNumAtoms() - 1
        if i == 3 and seed == 2:
            raise RuntimeError("no convergence")
        x = dataset.experiment[i]
        values = [x, 2 * x + 1]  # GFN2 on the experiment, GFN1 on a line through it
        return {m: v + shift[seed] * (i + 1) for m, v in zip(models, values, strict=True)}

    monkeypatch.setattr(script, "xtb_hydration_energies", energies)
    argv = ["--models", "GFN2-xTB/alpb", "GFN1-xTB/gbsa", "--conformers", "3"]
    args = script.parse_args([*argv, "--workers", "1", "--out", str(tmp_path)])
    result = script.run(args)
    assert (result["molecules"], result["molecules_used"], result["conformers"]) == (4, 3, 3)
    assert result["conformer_seeds"] == [0, 2, 3]
    assert result["failures"] == [
        {"smiles": "CCCC", "conformer_seed": 2, "error": "RuntimeError: no convergence"}
    ]
    experiment = np.array([-1.0, -2.0, -4.0])
    size = np.array([1.0, 2.0, 3.0])
    for name, first in (("GFN2-xTB/alpb", experiment), ("GFN1-xTB/gbsa", 2 * experiment + 1)):
        model = result["models"][name]
        assert model["conformer_0"] == pytest.approx(script.agreement(first, experiment))
        mean = first - 0.1 * size
        assert model["conformer_mean"] == pytest.approx(script.agreement(mean, experiment))
        # each molecule's sample std over its conformers (0, 0.3, -0.6) x size, pooled
        pooled = np.sqrt(np.mean((np.std([0.0, 0.3, -0.6], ddof=1) * size) ** 2))
        assert model["conformer_spread"] == pytest.approx(pooled)
    gfn1 = result["models"]["GFN1-xTB/gbsa"]
    assert gfn1["conformer_0"]["mae"] == pytest.approx(4 / 3)  # errors 0, 1, 3
    assert gfn1["conformer_0"]["fit_rmse"] == pytest.approx(0, abs=1e-9)
    assert gfn1["conformer_mean"]["fit_rmse"] > 0.005  # the mean is off the line
    payload = {
        "machine": FAKE_MACHINE,
        "settings": {"smoke": False, "workers": 1},
        "result": result,
    }
    text = script.render_markdown(payload)
    assert "3 of 4 molecules (every model and conformer computed), 1 failed conformers" in text
    c0, cm = gfn1["conformer_0"], gfn1["conformer_mean"]
    cells = [c0["rmse"], c0["pearson_r"], c0["fit_rmse"], cm["rmse"], cm["fit_rmse"]]
    row = " | ".join(f"{v:.3f}" for v in [*cells, gfn1["conformer_spread"]])
    assert f"| GFN1-xTB/gbsa | {row} |" in text
    assert "RMSE, mean of 3 conformers" in text
    # one molecule left: no line to fit, the script stops and says why
    monkeypatch.setattr(script, "xtb_hydration_energies", _only_methane)
    with pytest.raises(SystemExit, match="xTB gave every value for only 1 molecules"):
        script.run(args)


def _only_methane(mol, models, seed):
    if mol.GetNumAtoms() > 1:
        raise ValueError("no 3D embedding")
    return {m: -1.0 for m in models}


# ------------------------------------------------------------------------------- ablation


def test_ablation_variants_change_one_factor_from_the_librarys_settings(monkeypatch):
    script = import_script("ablation", monkeypatch)
    from graphattn.train.molecules import DATASET_DEFAULTS, MoleculeTrainConfig

    assert [v.name for v in script.VARIANTS] == [
        "default",
        "pe=lap",
        "pe=rw",
        "hops=2",
        "hops=3",
        "attend=global",
        "attend=hybrid",
        "normalize=relu",
    ]
    attention = {v.name: v.attention() for v in script.VARIANTS}
    assert attention == {
        "default": {},
        "pe=lap": {},
        "pe=rw": {},
        "hops=2": {"hops": 2},
        "hops=3": {"hops": 3},
        "attend=global": {"attend": "global"},
        "attend=hybrid": {},  # a layer type, not an attention option
        "normalize=relu": {"normalize": "relu"},
    }
    # ESOL: its tuned settings, one model instead of the ensemble, the change on top
    base = DATASET_DEFAULTS["esol"]["model"]
    model = {v.name: script.esol_config(v, 4, None).model for v in script.VARIANTS}
    assert model["default"] == base and model["pe=rw"] == {**base, "pe": "rw"}
    assert model["attend=hybrid"] == {**base, "layer_type": "hybrid"}
    assert model["hops=3"] == {**base, "attention": {"hops": 3}}
    assert model["normalize=relu"] == {**base, "attention": {"normalize": "relu"}}
    config = script.esol_config(script.VARIANTS[0], 4, None)
    assert config.seed == 4 and config.ensemble == 1
    assert config.epochs == MoleculeTrainConfig().epochs
    assert script.esol_config(script.VARIANTS[0], 4, 7).epochs == 7
    facebook = script.facebook_config(2, 5, script.VARIANTS[4])
    assert (facebook.seed, facebook.epochs, facebook.attention) == (2, 5, {"hops": 3})


def test_ablation_smoke_settings_keep_what_was_asked(monkeypatch):
    script = import_script("ablation", monkeypatch)
    args = script.parse_args([])
    assert (args.epochs, args.pair_limit, args.variants) == (None, 2e7, None)
    args = script.parse_args(["--smoke"])
    assert (args.epochs, args.pair_limit) == (1, 2e5)
    args = script.parse_args(["--smoke", "--epochs", "3", "--pair-limit", "1e3"])
    assert (args.epochs, args.pair_limit) == (3, 1e3)  # --smoke only lowers them


def test_ablation_counts_khop_pairs_exactly_block_by_block(monkeypatch):
    from graphattn.bench.inputs import random_graph
    from graphattn.ops.khop import khop_edges

    script = import_script("ablation", monkeypatch)
    monkeypatch.setattr(script, "PAIR_BLOCK_ROWS", 7)  # 40 nodes: 6 blocks
    torch.manual_seed(0)
    edges = torch.cat([random_graph(40, 2), torch.tensor([[3, 3, 5], [3, 8, 8]])], 1)
    within = {h: khop_edges(edges, 40, h)[0].size(1) for h in (1, 2, 3)}
    assert within[1] < within[2] < within[3] < 40 * 39  # the hops add pairs
    for hops in (1, 2, 3):
        assert script.count_khop_pairs(edges, 40, hops, math.inf) == (within[hops], True)
        assert script.count_khop_pairs(edges, 40, hops, within[hops]) == (within[hops], True)
    # past the limit: a lower bound above it, flagged as not exact
    count, exact = script.count_khop_pairs(edges, 40, 3, within[3] - 1)
    assert within[3] - 1 < count <= within[3] and not exact
    assert script.count_khop_pairs(edges, 40, 3, within[2] - 1) == (within[2], False)
    data = Data(edge_index=edges, num_nodes=40)
    for attend in ("global", "hybrid"):
        variant = script.Variant("attend", attend=attend)
        assert script.attention_pairs(variant, data, 10) == (40 * 39, True)
    assert script.attention_pairs(script.Variant("hops", hops=2), data, 1e9) == (within[2], True)


def test_ablation_skips_a_facebook_variant_with_the_reason(monkeypatch):
    script = import_script("ablation", monkeypatch)
    default, hops, glob, hybrid = (script.VARIANTS[i] for i in (0, 4, 5, 6))
    assert script.skip_reason(glob, 1500 * 1499, True, 2e5) == (
        "global attention, N(N-1) = 2.25e+06 pairs > limit 2e+05"
    )
    assert script.skip_reason(hops, 412_345, False, 4e5) == (
        "attention = at least 4.12e+05 pairs > limit 4e+05"
    )
    assert script.skip_reason(default, 400_000, True, 4e5) is None  # at the limit: runs
    assert script.skip_reason(hops, 400_000, True, 4e5) is None
    assert script.skip_reason(hybrid, 100, True, 4e5) == "the node model has no layer_type option"


def _ablation_graph(num_nodes: int = 40) -> Data:
    ring = torch.arange(num_nodes)
    edges = torch.stack([ring, (ring + 1) % num_nodes])
    edges = torch.cat([edges, edges.flip(0), torch.tensor([[0, 20], [20, 0]])], 1)
    torch.manual_seed(0)
    return Data(x=torch.randn(num_nodes, 5), edge_index=edges, y=ring % 2, num_nodes=num_nodes)


def _fake_node_training(calls: list):
    def train(data, masks, config, dataset_name, progress):
        calls.append((data, masks, config))
        assert dataset_name == "facebook-pages" and not progress
        test = {"accuracy": 0.5 + config.seed / 10, "macro_f1": 0.4}
        return {"test": test, "train_seconds": 6.0, "epochs_run": 3, "best_epoch": 1}

    return train


def test_ablation_facebook_runs_add_the_pe_columns_and_follow_each_seed(monkeypatch):
    import argparse

    from graphattn.splits.nodes import node_split_masks

    script = import_script("ablation", monkeypatch)
    data = _ablation_graph()
    lap, rw = script.node_pe("lap", data), script.node_pe("rw", data)
    assert lap.shape == rw.shape == (40, 8)
    assert (lap**2).mean(0) == pytest.approx(torch.ones(8), abs=1e-4)  # unit mean square
    assert rw.mean(0) == pytest.approx(torch.zeros(8), abs=1e-5)
    assert rw.std(0)[rw.std(0) > 0] == pytest.approx(torch.ones(8)[rw.std(0) > 0], abs=1e-4)
    calls: list = []
    monkeypatch.setattr(script, "train_node_model", _fake_node_training(calls))
    args = argparse.Namespace(seeds=[0, 3], epochs=2, facebook_epochs=None)
    runs = script._facebook_runs(data, script.Variant("pe", pe="rw"), args)
    assert [(r["seed"], r["accuracy"], r["seconds_per_epoch"]) for r in runs] == [
        (0, 0.5, 2.0),  # 6 s over the 3 epochs run (not the best epoch's 1)
        (3, pytest.approx(0.8), 2.0),
    ]
    for seed, (used, masks, config) in zip((0, 3), calls, strict=True):
        assert torch.equal(used.x, torch.cat([data.x, rw], 1))
        assert (config.seed, config.epochs) == (seed, 2)
        expected = node_split_masks(data.y, fractions=config.fractions, seed=seed)
        for got, want in zip(masks.values(), expected, strict=True):
            assert torch.equal(got, want)
    args = argparse.Namespace(seeds=[0], epochs=2, facebook_epochs=5)
    script._facebook_runs(data, script.VARIANTS[0], args)
    assert calls[-1][2].epochs == 5 and torch.equal(calls[-1][0].x, data.x)


def test_ablation_runs_the_chosen_variants_and_reports_each(monkeypatch, tmp_path):
    script = import_script("ablation", monkeypatch)
    monkeypatch.setattr(script, "machine_info", lambda: dict(FAKE_MACHINE))
    monkeypatch.setattr(script, "require_datasets", lambda *a: None)
    monkeypatch.setattr(script, "load_molecule_dataset", lambda *a, **k: "esol data")
    monkeypatch.setattr(script, "facebook_graph", lambda args: _ablation_graph())
    monkeypatch.setattr(script, "train_node_model", _fake_node_training([]))
    esol = {"default": [1.0, 1.2], "hops=2": [0.8, 0.9], "attend=global": [1.3, 1.5]}

    def run_esol(dataset, variant, seed, epochs):
        assert dataset == "esol data" and epochs == 3
        metrics = {"rmse": esol[variant.name][seed], "mae": 0.5, "r2": 0.9}
        run = {"test": metrics, "train_seconds": 4.0, "epochs_run": 2, "best_epoch": 2}
        return script._run_record(seed, run, ("rmse", "mae", "r2"))

    monkeypatch.setattr(script, "run_esol", run_esol)
    argv = ["--variants", "hops=2", "default", "attend=global", "--epochs", "3"]
    argv += ["--seeds", "0", "1", "--pair-limit", "1000", "--out", str(tmp_path)]
    assert script.main(argv) == 0
    payload = json.loads((tmp_path / "ablation.json").read_text())
    assert payload["complete"] and (tmp_path / "ablation.png").stat().st_size > 0
    assert [v["name"] for v in payload["settings"]["variants"]] == [
        "default",
        "hops=2",
        "attend=global",
    ]
    results = {(r["task"], r["variant"]): r for r in payload["results"]}
    assert list(results) == [
        ("esol", "default"),
        ("esol", "hops=2"),
        ("esol", "attend=global"),
        ("facebook", "default"),
        ("facebook", "hops=2"),
        ("facebook", "attend=global"),
    ]
    glob = results[("facebook", "attend=global")]
    assert glob["status"] == "skipped" and glob["runs"] == [] and glob["test"]["n"] == 0
    assert (glob["pairs"], glob["pairs_exact"]) == (40 * 39, True)
    assert results[("facebook", "hops=2")]["status"] == "ok"
    assert results[("esol", "hops=2")]["test"]["mean"] == pytest.approx(0.85)
    assert results[("esol", "default")]["seconds_per_epoch"]["mean"] == 2.0
    text = (tmp_path / "ablation.md").read_text()
    assert "Maximum epochs: ESOL 3, facebook 3 (early stopping" in text
    assert "| hops=2 | 0.850 ± 0.071 | -0.250 | 2.00 ± 0.00 | 2.0 |  |" in text
    assert "| default | 1.100 ± 0.141 | — | 2.00 ± 0.00 | 2.0 |  |" in text
    assert "| attend=global | 1.400 ± 0.141 | +0.300 | 2.00 ± 0.00 | 2.0 |  |" in text  # ESOL
    assert "| attend=global | — | — | — | — | skipped: global attention, N(N-1) = 1.56e+03" in text
    assert "| hops=2 | 0.550 ± 0.071 | +0.000 | 2.00 ± 0.00 | 3.0 | 170 pairs |" in text
    settings = {"epochs": None, "facebook_epochs": 40}
    assert script._epoch_line(settings).startswith(
        "Maximum epochs: ESOL library default, facebook 40"
    )


# --------------------------------------------------------------------------- shared helpers


def test_timing_helpers_leave_out_the_warmup_calls_and_take_the_median(
    monkeypatch, script_time_pass
):
    import graphattn.bench.measure as measure

    common = import_script("_common", monkeypatch)
    built = []

    def prepare(name: str):
        return lambda i: built.append((name, i)) or (lambda: None)

    # one warm-up call each (100 s), then 3 timed calls each, taking turns
    script_time_pass(measure, [100.0, 100.0, 1e-3, 4e-3, 2e-3, 5e-3, 9e-3, 6e-3])
    times = common.interleaved_ms({"a": prepare("a"), "b": prepare("b")}, repeats=3, warmup=1)
    assert times == {"a": pytest.approx([1.0, 2.0, 9.0]), "b": pytest.approx([4.0, 5.0, 6.0])}
    assert built == [(name, i) for i in range(4) for name in "ab"]
    script_time_pass(measure, [100.0, 1e-3, 2e-3, 9e-3])
    assert common.median_ms(prepare("c"), repeats=3, warmup=1) == pytest.approx(2.0)  # not 4


def test_summaries_use_the_finite_values_and_the_sample_std(monkeypatch):
    import statistics

    common = import_script("_common", monkeypatch)
    summary = common.summarize([1.0, 2.0, None, float("nan"), 4.0, float("inf")])
    assert summary == {
        "mean": pytest.approx(7 / 3),
        "std": pytest.approx(statistics.stdev([1.0, 2.0, 4.0])),  # ddof=1
        "min": 1.0,
        "max": 4.0,
        "n": 3,
    }
    assert common.summarize([5.0])["std"] is None
    assert common.summarize([None])["n"] == 0
    assert common.fmt_mean_std({"mean": 1.23456, "std": 0.1}) == "1.235 ± 0.100"
    assert common.fmt_mean_std({"mean": 1.23456, "std": None}) == "1.235"


def test_a_target_value_at_its_threshold_meets_it(monkeypatch):
    common = import_script("_common", monkeypatch)
    assert common.met(0.55, 0.55, higher_is_better=False) is True
    assert common.met(0.92, 0.92, higher_is_better=True) is True
    assert common.met(0.56, 0.55, higher_is_better=False) is False
    assert common.met(0.91, 0.92, higher_is_better=True) is False
    assert common.met(None, 0.55, higher_is_better=False) is None


def test_positive_int_and_smoke_setup(monkeypatch, tmp_path):
    import argparse

    common = import_script("_common", monkeypatch)
    assert common.positive_int("1") == 1 and common.positive_int("12") == 12
    for text in ("0", "-1", "1.5", "two", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="at least 1"):
            common.positive_int(text)
    args = argparse.Namespace(threads=None, smoke=True, seeds=[3, 4, 5], out=tmp_path / "o")
    common.setup(args)
    assert args.seeds == [3] and (tmp_path / "o").is_dir()  # --smoke: the first seed only
    args = argparse.Namespace(threads=None, smoke=False, seeds=[3, 4, 5], out=tmp_path / "o")
    common.setup(args)
    assert args.seeds == [3, 4, 5]


def test_common_arguments_and_setup_honour_the_threads(monkeypatch, tmp_path):
    import argparse
    import logging

    common = import_script("_common", monkeypatch)
    parser = argparse.ArgumentParser()
    common.add_common_args(parser, seeds=(0, 1, 2))
    args = parser.parse_args([])
    assert args.out == common.Path("bench_out")  # not the working folder
    assert args.seeds == [0, 1, 2] and args.threads is None and not args.smoke
    assert common.positive_int(" 2 ") == 2  # int() reads surrounding spaces
    graphattn_log = logging.getLogger("graphattn")
    threads, level = torch.get_num_threads(), graphattn_log.level
    try:
        common.setup(argparse.Namespace(threads=3, smoke=False, out=tmp_path / "o"))
        assert torch.get_num_threads() == 3  # --threads
        assert graphattn_log.level == logging.ERROR  # the library's notes are not printed
    finally:
        torch.set_num_threads(threads)
        graphattn_log.setLevel(level)


def test_json_object_takes_a_json_object_only(monkeypatch):
    import argparse

    common = import_script("_common", monkeypatch)
    assert common.json_object('{"layers": 4, "readout": ["sum"]}') == {
        "layers": 4,
        "readout": ["sum"],
    }
    for text, message in (
        ("", "not JSON: ''"),
        ("{layers: 4}", "not JSON: '{layers: 4}'"),
        ("[0]", "needs a JSON object of fields, got '[0]'"),
        ("4", "needs a JSON object of fields, got '4'"),
    ):
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(message)):
            common.json_object(text)


def test_run_main_prints_a_bad_input_as_one_error_line(monkeypatch, capsys):
    common = import_script("_common", monkeypatch)

    def bad_input() -> int:
        raise GraphInputError("--train-overrides: no MoleculeTrainConfig field(s) ['x']")

    assert common.run_main(bad_input) == 2
    err = capsys.readouterr().err
    assert err == (
        f"{os.path.basename(sys.argv[0])}: error: "
        "--train-overrides: no MoleculeTrainConfig field(s) ['x']\n"
    )
    assert common.run_main(lambda: 0) == 0


def test_require_datasets_checks_every_file_with_the_options_given(
    data_dir, tmp_path, monkeypatch, offline
):
    from graphattn.datasets.files import DatasetUnavailableError

    common = import_script("_common", monkeypatch)
    edges_only = tmp_path / "data" / "facebook-pages"
    edges_only.mkdir(parents=True)
    edges = "musae_facebook_edges.csv"
    (edges_only / edges).symlink_to(data_dir / "facebook-pages" / edges)
    common.require_datasets(["facebook-pages"], data_dir, download=False)  # all there
    with pytest.raises(DatasetUnavailableError, match="musae_facebook_target.csv") as error:
        common.require_datasets(["facebook-pages"], tmp_path / "data", download=False)
    assert "downloads are disabled" in str(error.value)  # download=False reached resolve_file


def test_machine_line_names_the_one_minute_load_and_flags_a_smoke_run(monkeypatch):
    common = import_script("_common", monkeypatch)
    machine = {**FAKE_MACHINE, "load_average_1_5_15": [0.5, 2.0, 3.0]}
    line = "Machine: test CPU, 1 usable cores, torch threads 1, load average at start 0.5."
    assert common.machine_line(machine, smoke=False) == line
    assert common.machine_line(machine, smoke=True) == (
        line + " **Smoke run (`--smoke`): the figures are meaningless.**"
    )
    no_load = {**FAKE_MACHINE, "load_average_1_5_15": None}
    assert common.machine_line(no_load, smoke=False).endswith("load average at start ?.")


def test_finish_writes_the_complete_json_and_the_markdown_and_prints_it(
    monkeypatch, tmp_path, capsys
):
    common = import_script("_common", monkeypatch)
    payload = {"complete": False, "value": float("nan")}
    common.write_outputs(tmp_path, "partial", payload)
    assert json.loads((tmp_path / "partial.json").read_text()) == {"complete": False, "value": None}
    assert not (tmp_path / "partial.md").exists()  # no markdown until the end

    def render(done: dict) -> str:
        return f"# report\n\ncomplete: {done['complete']}\n\n\n"

    assert common.finish(tmp_path, "report", payload, render) == 0
    assert json.loads((tmp_path / "report.json").read_text())["complete"] is True
    assert (tmp_path / "report.md").read_text() == "# report\n\ncomplete: True\n"
    assert capsys.readouterr().out == render(payload) + "\n"


def test_table_cells_and_seed_summaries_keep_their_form(monkeypatch):
    common = import_script("_common", monkeypatch)
    assert common.markdown_table(["a", "b"], [[1, None], ["x", 2.5]]) == (
        "| a | b |\n|---|---|\n| 1 | None |\n| x | 2.5 |"
    )
    assert [common.fmt(v) for v in (float("nan"), float("inf"), None, 2, 0.12345)] == [
        *("—", "—", "—", "2.000", "0.123")
    ]
    assert common.fmt_mean_std({"mean": 0.123456, "std": None}, 4) == "0.1235"
    assert [common.yes_no(flag) for flag in (True, False, None)] == ["yes", "**no**", "—"]
    runs = [_molecule_run(2, 0.5), _molecule_run(0, 0.6)]
    (summary,) = common.summarize_seeds(runs, ("dataset", "model"), ("rmse",))
    assert summary["seeds"] == [2, 0]  # the seeds in the order they ran
    assert summary["dataset"] == "esol" and summary["rmse"]["n"] == 2


def test_timer_measures_wall_time(monkeypatch):
    import time

    common = import_script("_common", monkeypatch)
    with common.Timer() as timer:
        time.sleep(0.05)  # no CPU time: a process-time timer reads about 0
    assert 0.05 <= timer.seconds < 5


def test_molecule_targets_markdown_names_how_a_run_differs_from_the_targets_setting(monkeypatch):
    script = import_script("molecule_targets", monkeypatch)
    settings = {"smoke": False, "graphattn_variant": None, "seeds": [0, 1, 2]}
    assert script.setting_caveats({**settings, "seeds": [0]}) == ["seeds [0]"]  # a subset
    variant = {"model_overrides": {}, "train_overrides": {}, "atom_contributions": True}
    assert script.setting_caveats({**settings, "graphattn_variant": variant}) == [
        'graphattn variant {"model_overrides": {}, "train_overrides": {}, '
        '"atom_contributions": true}'
    ]
    (summary,) = script.summarize_runs([_molecule_run(5, 0.4)])
    payload = {
        "machine": dict(FAKE_MACHINE),
        "settings": settings,
        "summary": [summary],
        "targets": script.check_targets([summary], judged=False),
        "runs": [],
    }
    markdown = script.render_markdown(payload)
    assert "Not the targets' setting" not in markdown and "Smoke run" not in markdown
    assert "| esol: mean test RMSE ≤ 0.55 | 0.400 (not the targets' setting) | — |" in markdown
    for changed, caveats in (
        ({"seeds": [5]}, "seeds [5]"),
        ({"smoke": True, "seeds": [5]}, "smoke run; seeds [5]"),
    ):
        markdown = script.render_markdown({**payload, "settings": {**settings, **changed}})
        assert (
            f"**Not the targets' setting**: {caveats}. The targets are for `graphattn train`'s "
            "defaults on seeds 0, 1, 2."
        ) in markdown
        assert ("**Smoke run (`--smoke`)" in markdown) == changed.get("smoke", False)


def test_molecule_targets_do_not_judge_a_full_run_of_a_variant(data_dir, tmp_path, monkeypatch):
    script = import_script("molecule_targets", monkeypatch)
    monkeypatch.setattr(script, "machine_info", lambda: dict(FAKE_MACHINE))

    def fake_dataset(name, args, afp, payload):
        payload["runs"] += [_molecule_run(seed, 0.4) for seed in args.seeds]

    monkeypatch.setattr(script, "run_dataset", fake_dataset)
    argv = ["--datasets", "esol", "--data-dir", str(data_dir), "--out", str(tmp_path)]
    for variant in (["--atom-contributions"], ["--train-overrides", '{"epochs": 5}']):
        assert script.main([*argv, *variant]) == 0  # not --smoke, seeds 0, 1, 2
        payload = json.loads((tmp_path / "molecule_targets.json").read_text())
        assert payload["settings"]["graphattn_variant"] is not None
        assert payload["targets"] and all(c["met"] is None for c in payload["targets"])
        assert payload["reference"]["issue_attentivefp"] == script.ISSUE_ATTENTIVEFP
        assert payload["reference"]["published"] == script.PUBLISHED
    args = script.parse_args(["--xtb-energies", "GFN2-xTB/alpb"])
    assert script.is_variant(args) and not script.is_variant(script.parse_args([]))


def test_molecule_targets_check_every_data_set_before_reading_any(
    data_dir, tmp_path, monkeypatch, offline
):
    from graphattn.datasets.files import DatasetUnavailableError

    script = import_script("molecule_targets", monkeypatch)
    only_esol = _esol_only(data_dir, tmp_path)
    monkeypatch.setattr(script, "run_dataset", lambda *a: pytest.fail("ran before the check"))
    argv = ["--data-dir", str(only_esol), "--out", str(tmp_path / "out")]
    with pytest.raises(DatasetUnavailableError, match="data set 'freesolv'"):
        script.main(argv)  # esol first, freesolv second: both checked at the start
    assert not (tmp_path / "out").exists()


def test_node_targets_smoke_cuts_facebook_to_its_first_nodes(monkeypatch, tmp_path):

    script = import_script("node_targets", monkeypatch)
    edges = torch.tensor([[0, 1, 2, 3, 4, 5, 1], [1, 0, 3, 5, 0, 2, 3]])
    full = Data(
        x=torch.arange(12.0).view(6, 2), edge_index=edges, y=torch.tensor([0, 1, 2, 0, 1, 2])
    )
    monkeypatch.setattr(script, "load_node_dataset", lambda name, data_dir: full)
    monkeypatch.setattr(script, "SMOKE_NODES", 4)
    args = script.parse_args(["--out", str(tmp_path)])
    assert script.facebook_graph(args) is full  # a full run keeps the whole graph
    cut = script.facebook_graph(script.parse_args(["--smoke", "--out", str(tmp_path)]))
    assert cut.num_nodes == 4 and cut.x.tolist() == full.x[:4].tolist()
    assert cut.y.tolist() == [0, 1, 2, 0]
    assert cut.edge_index.tolist() == [[0, 1, 2, 1], [1, 0, 3, 3]]  # edges among nodes 0-3


def test_node_targets_check_the_facebook_data_before_any_run(tmp_path, monkeypatch, offline):
    from graphattn.datasets.files import DatasetUnavailableError

    script = import_script("node_targets", monkeypatch)
    monkeypatch.setattr(script, "run_karate", lambda *a: pytest.fail("karate ran first"))
    argv = ["--data-dir", str(tmp_path / "empty"), "--out", str(tmp_path / "out")]
    with pytest.raises(DatasetUnavailableError, match="data set 'facebook-pages'"):
        script.main(argv)
    monkeypatch.setattr(script, "machine_info", lambda: dict(FAKE_MACHINE))
    monkeypatch.setattr(script, "run_karate", lambda *a: None)
    assert script.main([*argv, "--parts", "karate"]) == 0  # karate needs no files


def test_node_targets_keep_every_note_of_a_target_outside_its_setting(monkeypatch, tmp_path):
    script = import_script("node_targets", monkeypatch)
    runs = [_node_run(0, 0.95), _node_run(1, float("nan"))]
    karate = {**_node_run(0, 1.0), "part": "karate"}
    karate["test"] = {**karate["test"], "correct": 32, "total": 32}
    summaries = script.summarize_runs([*runs, karate])
    assert [(s["part"], s["total"]) for s in summaries] == [("facebook", 110), ("karate", 32)]
    settings = {"smoke": True, "seeds": [0, 1], "karate_seeds": [0, 1, 2, 3, 4]}
    accuracy = script.check_targets(summaries[:1], settings)[0]
    assert accuracy["met"] is None
    assert accuracy["note"] == (
        "seed(s) 1 not finite (diverged); value over 1; "
        "not the targets' setting: smoke run; seeds [0, 1]"
    )
    monkeypatch.setattr(script, "machine_info", lambda: dict(FAKE_MACHINE))
    monkeypatch.setattr(script, "run_karate", lambda *a: None)
    assert script.main(["--parts", "karate", "--out", str(tmp_path)]) == 0
    recorded = json.loads((tmp_path / "node_targets.json").read_text())["settings"]
    assert recorded["facebook_graphattn_defaults"] == script.DATASET_DEFAULTS.get(
        script.FACEBOOK, {}
    )


def test_refit_validation_scores_both_ensembles_on_the_validation_part_only(data_dir, tmp_path):
    payload = run_smoke("refit_validation", data_dir, tmp_path, "--seeds", "4", "--scratch")
    assert payload["complete"] and payload["settings"]["salts"] == [12345]
    assert payload["settings"]["defaults"]["init_from"] is None  # --scratch
    (row,) = payload["runs"]
    assert (row["seed"], row["salt"]) == (4, 12345)
    assert row["difference"] == row["refit_val_rmse"] - row["early_stopped_val_rmse"]
    assert row["refit_val_rmse"] != row["early_stopped_val_rmse"]
    assert all(1 <= epochs <= 2 for epochs in row["best_epochs"])  # --smoke: 2 epochs
    assert payload["summary"]["per_seed"]["n"] == 1
    markdown = (tmp_path / "refit_validation.md").read_text()
    assert "freesolv from scratch, validation RMSE" in markdown and "Rule (below −2 SE)" in markdown


def test_refit_validations_compare_trains_as_the_trainer_does_and_never_reads_the_test_part(
    tmp_path, monkeypatch
):
    from graphattn.datasets.molecules import MoleculeCSV
    from graphattn.featurize.molecule import MoleculeFeaturizer
    from graphattn.train.molecules import MoleculeTrainConfig

    script = import_script("refit_validation", monkeypatch)
    source = tmp_path / "m.csv"
    rows = [
        f"{'C' * n}{end},{n * 0.3 + k}" for k, end in enumerate(["O", "N"]) for n in range(1, 26)
    ]
    source.write_text("smiles,y\n" + "\n".join(rows) + "\n")

    class Recorded(MoleculeCSV):
        read: set[int] = set()

        def __getitem__(self, index):
            self.read.add(int(index))
            return super().__getitem__(index)

    dataset = Recorded(source, target_cols=["y"], featurizer=MoleculeFeaturizer(descriptors=True))
    calls = {"members": [], "refit": [], "scored": []}
    monkeypatch.setattr(script, "load_pretrained_encoder", lambda name: pytest.fail(name))
    for name, key in (("_train_members", "members"), ("_refit_members", "refit")):
        real = getattr(script, name)

        def spy(*args, real=real, key=key, **options):
            calls[key].append((args, result := real(*args, **options)))
            return result

        monkeypatch.setattr(script, name, spy)
    real_score = script.validation_rmse
    monkeypatch.setattr(
        script,
        "validation_rmse",
        lambda model, items, scaler: (
            calls["scored"].append((items, scaler)) or real_score(model, items, scaler)
        ),
    )
    monkeypatch.setattr(script, "SMOKE_EPOCHS", 8)
    row = script.compare(dataset, "freesolv", seed=2, salt=777, smoke=True, scratch=True)
    assert min(row["best_epochs"]) < 8  # so that a refit of every epoch would show

    settings = script.dataset_train_settings("freesolv", scratch=True)
    split = script._make_split(dataset, MoleculeTrainConfig(**{**settings, "seed": 2, "epochs": 8}))
    assert dataset.read and dataset.read.isdisjoint(split["test"].tolist())
    (job, *_), _ = calls["members"][0]
    assert job.train_descriptors is not None and job.pretrained is None
    ((_, parts, _, best_epochs, *_), (_, refit_scaler, _)) = calls["refit"][0]
    assert best_epochs == row["best_epochs"]
    (outer, early_scaler), (outer_again, scaler), (inner, inner_scaler) = calls["scored"]
    assert len(outer) == len(outer_again) == len(split["val"]) and inner is parts["val"]
    assert early_scaler is inner_scaler is job.scaler and scaler is refit_scaler


def test_the_inner_split_divides_the_training_part_and_leaves_the_rest_alone(monkeypatch):
    script = import_script("refit_validation", monkeypatch)
    split = {"train": np.arange(80), "val": np.arange(80, 90), "test": np.arange(90, 100)}
    inner = script.inner_split(split, salt=12345, seed=3)
    assert len(inner["inner_val"]) == 10
    assert sorted([*inner["inner_train"], *inner["inner_val"]]) == list(range(80))
    again = script.inner_split(split, salt=12345, seed=3)
    assert np.array_equal(again["inner_val"], inner["inner_val"])
    other = script.inner_split(split, salt=777, seed=3)["inner_val"]
    assert not np.array_equal(other, inner["inner_val"])


def test_refit_is_adopted_only_below_minus_two_standard_errors(monkeypatch):
    script = import_script("refit_validation", monkeypatch)

    def rows(differences):
        return [
            {"seed": s, "salt": 1, "difference": d, "early_stopped_val_rmse": 1.0,
             "refit_val_rmse": 1.0 + d}
            for s, d in enumerate(differences)
        ]  # fmt: skip

    clear = script.summarise(rows([-0.03, -0.02, -0.04, -0.03]))
    assert clear["adopt_refit"] and clear["per_seed"]["refit_better"] == 4
    noisy = script.summarise(rows([-0.10, 0.08, -0.05, 0.06]))
    assert not noisy["adopt_refit"]
    assert noisy["per_seed"]["mean"] == pytest.approx(-0.0025)
    between = script.summarise(rows([-0.03, 0.0, -0.03, 0.0]))  # -1.73 standard errors
    assert between["per_seed"]["mean"] < -between["per_seed"]["se"]
    assert not between["adopt_refit"]
    tied = script.summarise(rows([-0.03, 0.0, -0.04, -0.03]))  # a tie is not "better"
    assert tied["per_seed"]["refit_better"] == 3


def test_refit_validation_combines_the_runs_of_several_processes(tmp_path, monkeypatch):
    script = import_script("refit_validation", monkeypatch)

    def payload(seeds, complete=True):
        runs = [
            {"seed": s, "salt": salt, "best_epochs": [3], "early_stopped_val_rmse": 1.0,
             "refit_val_rmse": 1.0 - 0.01 * s, "difference": -0.01 * s,
             "early_stopped_seconds": 1.0, "refit_seconds": 1.0}
            for s in seeds for salt in (1, 2)
        ]  # fmt: skip
        settings = {"dataset": "freesolv", "scratch": False, "salts": [1, 2], "smoke": False}
        return {"settings": settings, "machine": {}, "runs": runs, "complete": complete}

    paths = [tmp_path / "b.json", tmp_path / "a.json"]
    paths[0].write_text(json.dumps(payload([3, 4])))
    paths[1].write_text(json.dumps(payload([1, 2])))
    monkeypatch.setattr(script, "machine_line", lambda machine, smoke: "Machine: test.")
    assert script.main(["--combine", *map(str, paths), "--out", str(tmp_path / "out")]) == 0
    merged = json.loads((tmp_path / "out" / "refit_validation.json").read_text())
    assert merged["settings"]["seeds"] == [1, 2, 3, 4]
    assert [(r["seed"], r["salt"]) for r in merged["runs"]][:3] == [(1, 1), (1, 2), (2, 1)]
    assert merged["summary"]["per_seed"]["n"] == 4
    assert merged["summary"]["per_seed"]["mean"] == pytest.approx(-0.025)
    paths[1].write_text(json.dumps(payload([1, 2], complete=False)))
    with pytest.raises(GraphInputError, match="a.json: an incomplete run"):
        script.main(["--combine", *map(str, paths), "--out", str(tmp_path / "out")])
    other_salts = payload([1, 2])
    other_salts["settings"]["salts"] = [1, 3]
    paths[1].write_text(json.dumps(other_salts))
    with pytest.raises(GraphInputError, match="a.json: another start or other salts than"):
        script.main(["--combine", *map(str, paths), "--out", str(tmp_path / "out")])
