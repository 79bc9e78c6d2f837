"""The benchmark scripts run end to end (``--smoke``: tiny data, meaningless figures)."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import torch
from rdkit import Chem

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
    assert sorted(kept) == ["N#CCC(F)CO", "NCCCCCCCl", "NCCCCCCO"]  # canonical SMILES
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
    assert sorted(kept) == ["C=CC(=O)OCC", "N#CCC(F)CO", "NCCCCCCCl"]  # canonical SMILES
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


def test_the_chemicals_corpus_goes_with_xtb_targets():
    result = run_script("pretraining.py", "--corpus", "rdkit+chemicals", "--smoke")
    assert result.returncode != 0
    assert "--corpus rdkit+chemicals goes with --targets xtb" in result.stderr


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
@pytest.mark.parametrize(
    ("name", "writes"), [("cuda_kernel_bandwidth.py", True), ("cuda_host_syncs.py", False)]
)
def test_cuda_scripts_exit_cleanly_without_cuda(name, writes, tmp_path):
    result = run_script(name, *(("--out", str(tmp_path)) if writes else ()))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "no CUDA device" in result.stdout


def test_kernel_traffic_counts_every_read_and_write():
    sys.path.insert(0, str(REPO / "benchmarks"))
    from cuda_kernel_bandwidth import traffic_bytes

    # 2 nodes, 3 edges, 1 head of width 2, fp32: a node row b = 8 bytes, H = 1.
    counted = traffic_bytes(2, 3, 1, 2, 4)
    forward = 2 * (2 * 8 + 4) + 3 * (8 + 2 * 8)
    per_target = 2 * (3 * 8 + 8) + 3 * (8 + 2 * 8 + 8)
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
    from torch_geometric.data import Data

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
    from torch_geometric.data import Data

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
    monkeypatch, tmp_path
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
    monkeypatch.delenv("GRAPHATTN_DATA", raising=False)  # CI points it at ../shared
    monkeypatch.setenv("GRAPHATTN_CACHE", str(empty))
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
    data_dir, tmp_path, monkeypatch, capsys
):
    # the ablation ran every ESOL variant, then died with a traceback on facebook-pages
    script = import_script("ablation", monkeypatch)
    only_esol = tmp_path / "data"
    only_esol.mkdir()
    (only_esol / "esol").symlink_to(data_dir / "esol")
    monkeypatch.delenv("GRAPHATTN_DATA", raising=False)
    monkeypatch.setenv("GRAPHATTN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("graphattn.datasets.files._download", _no_download)
    monkeypatch.setattr(script, "ablate_esol", lambda *a: pytest.fail("ESOL ran"))
    argv = ["--tasks", "esol", "facebook", "--data-dir", str(only_esol), "--out", str(tmp_path)]
    assert script.run_main(lambda: script.main(argv)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{os.path.basename(sys.argv[0])}: error: data set 'facebook-pages'")
    assert "Traceback" not in err and str(only_esol / "facebook-pages") in err


def _no_download(card, timeout):
    raise OSError("no network in this test")


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
