"""Tests of graphattn.datasets.molecules: CSV/SDF loading, skipped rows, named data sets."""

from __future__ import annotations

import csv
import logging
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from rdkit import Chem, RDConfig, rdBase
from rdkit.Chem import Descriptors, rdMolDescriptors

from graphattn.datasets.molecules import (
    MOLECULE_DATASETS,
    MoleculeCSV,
    MoleculeDataset,
    MoleculeRecord,
    MoleculeSDF,
    SkippedRow,
    describe_row,
    graph_key,
    load_molecule_dataset,
    nci_tpsa_path,
    parse_target,
)
from graphattn.errors import GraphInputError
from graphattn.featurize.molecule import MoleculeFeaturizer

CAPTURES_LOG = hasattr(rdBase, "CaptureErrorLog")
UNCLOSED_RING = "unclosed ring" if CAPTURES_LOG else "syntax error"
BAD_CSV = """name,smiles,logS,pKa
ethanol, CCO ,-0.1,15.9
broken,C1CC,1.0,2.0
no-logS,c1ccccc1,,4.0
text-target,CCN,abc,3.0
empty-smiles,,1.0,1.0
short-row,CCC
phenol,Oc1ccccc1,-0.04,10.0
"""

# graph features only: these tests are about rows and targets, not descriptors
PLAIN = MoleculeFeaturizer()


def write(tmp_path: Path, text: str, name: str = "data.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture
def bad_dataset(tmp_path: Path) -> MoleculeCSV:
    return MoleculeCSV(write(tmp_path, BAD_CSV), target_cols=["logS", "pKa"])


def test_csv_keeps_good_rows_with_nan_for_missing(bad_dataset: MoleculeCSV) -> None:
    assert bad_dataset.num_rows_read == 7
    assert len(bad_dataset) == 3
    assert bad_dataset.rows == [0, 2, 6]
    assert [d.row for d in bad_dataset] == [0, 2, 6]
    assert bad_dataset.smiles == ["CCO", "c1ccccc1", "Oc1ccccc1"]
    assert bad_dataset.targets.shape == (3, 2)
    assert bad_dataset.targets.dtype == torch.float32
    assert bad_dataset[0].y.shape == (1, 2)
    assert bad_dataset[0].y[0].tolist() == pytest.approx([-0.1, 15.9])
    assert math.isnan(bad_dataset[1].y[0, 0]) and bad_dataset[1].y[0, 1] == 4.0
    for i, data in enumerate(bad_dataset):
        torch.testing.assert_close(
            data.y[0], bad_dataset.targets[i], rtol=0, atol=0, equal_nan=True
        )


def test_csv_records_skipped_rows_with_reasons(bad_dataset: MoleculeCSV) -> None:
    skipped = {s.row: s for s in bad_dataset.skipped}
    assert sorted(skipped) == [1, 3, 4, 5]
    assert skipped[1].smiles == "C1CC" and UNCLOSED_RING in skipped[1].reason
    assert "logS" in skipped[3].reason and "'abc'" in skipped[3].reason
    assert skipped[4].smiles == "" and skipped[4].reason == "empty SMILES"  # not the message
    assert "fields" in skipped[5].reason
    assert len(bad_dataset) + len(bad_dataset.skipped) == bad_dataset.num_rows_read


def test_write_skipped(bad_dataset: MoleculeCSV, tmp_path: Path) -> None:
    written = bad_dataset.write_skipped(tmp_path)
    assert written == tmp_path / "skipped.csv"
    rows = read_csv(written)
    assert list(rows[0]) == ["row", "smiles", "reason"]
    assert [int(r["row"]) for r in rows] == [s.row for s in bad_dataset.skipped]
    assert [r["reason"] for r in rows] == [s.reason for s in bad_dataset.skipped]
    assert [r["smiles"] for r in rows] == ["C1CC", "CCN", "", "CCC"]


def test_a_row_too_short_to_hold_the_smiles_is_skipped(tmp_path: Path) -> None:
    data = MoleculeCSV(write(tmp_path, "name,smiles,y\nx\nethanol,CCO,1\n"), target_cols="y")
    (short,) = data.skipped
    assert (short.row, short.smiles, short.reason) == (0, "", "row has 1 fields, the header has 3")
    assert data.rows == [1]


def test_write_skipped_writes_header_when_nothing_skipped(tmp_path: Path) -> None:
    dataset = MoleculeCSV(write(tmp_path, "smiles,y\nCCO,1\n"), target_cols="y")
    path = dataset.write_skipped(tmp_path / "none.csv")
    assert path.read_text(encoding="utf-8").splitlines() == ["row,smiles,reason"]


def test_skipped_rows_are_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="graphattn.datasets.molecules"):
        MoleculeCSV(write(tmp_path, BAD_CSV), target_cols=["logS"], name="bad")
    assert any("skipped 4 of 7" in r.getMessage() for r in caplog.records)
    assert any("(e.g. data row 1, counted from 0: " in r.getMessage() for r in caplog.records)


def test_repeated_molecules_are_named_by_their_data_rows(tmp_path: Path, caplog) -> None:
    text = "smiles,y\nOCC,1\nc1ccccc1,2\nC(O)C,3\nbad(,4\nC1=CC=CC=C1,5\nCCO,6\nCCN,7\n"
    with caplog.at_level(logging.WARNING, logger="graphattn.datasets.molecules"):
        data = MoleculeCSV(write(tmp_path, text), target_cols="y", name="dups")
    # ethanol three times and benzene twice, by canonical SMILES; the skipped row 3 is no copy
    assert data.duplicates == [(0, 2, 5), (1, 4)]
    (message,) = [r.getMessage() for r in caplog.records if "more than one row" in r.getMessage()]
    assert message.startswith("dups: 2 molecules occur in more than one row (5 rows; ")
    assert "e.g. data rows 0, 2, 5: CCO)" in message


def test_a_repeated_molecule_is_named_by_its_own_smiles_when_rows_repeat(caplog) -> None:
    # two sources numbered from 0: row numbers repeat, so the group is found by position
    records = [MoleculeRecord(0, "CCN", (1.0,)), MoleculeRecord(1, "CCC", (2.0,))]
    records += [MoleculeRecord(0, "CCO", (3.0,)), MoleculeRecord(1, "OCC", (4.0,))]
    with caplog.at_level(logging.WARNING, logger="graphattn.datasets.molecules"):
        data = MoleculeDataset(records, target_cols=["y"])
    assert data.duplicates == [(0, 1)]
    assert "1 molecule occurs in more than one row (2 rows; " in caplog.text
    assert "e.g. data rows 0, 1: CCO)" in caplog.text  # not CCN, the first item of row 0


def test_graph_key_drops_stereo_marks_written_either_way_and_keeps_what_rdkit_cannot_read():
    # RDKit writes "/" first, but a SMILES written by hand may use backslashes only
    assert graph_key(r"C\C=C\C") == graph_key("C/C=C/C") == "CC=CC"
    with rdBase.BlockLogs():
        assert graph_key("C[C@H](") == "C[C@H]("  # unreadable: its own key, not an error


def test_a_file_without_repeats_has_no_duplicates_and_no_warning(tmp_path: Path, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="graphattn.datasets.molecules"):
        data = MoleculeCSV(write(tmp_path, "smiles,y\nCCO,1\nCCCO,2\n"), target_cols="y")
    assert data.duplicates == [] and "more than one row" not in caplog.text


def test_record_with_wrong_number_of_targets_names_the_row() -> None:
    records = [MoleculeRecord(0, "CCO", [1.0]), MoleculeRecord(1, "CCN", [1.0, 2.0])]
    with pytest.raises(
        GraphInputError,
        match=r"custom: data row 1, counted from 0: 2 targets, expected 1 \(\['y'\]\)",
    ):
        MoleculeDataset(records, target_cols=["y"], name="custom")


def test_unreadable_and_unsanitisable_molecules_are_skipped_and_counted() -> None:
    pentavalent = Chem.MolFromSmiles("C(C)(C)(C)(C)C", sanitize=False)
    records = [
        MoleculeRecord(0, Chem.MolFromSmiles("CCO"), (1.0,)),
        MoleculeRecord(1, pentavalent, (2.0,)),
        MoleculeRecord(2, None, (3.0,)),  # as Chem.SDMolSupplier yields for a bad entry
        MoleculeRecord(3, "CC", (4.0,)),
    ]
    data = MoleculeDataset(records, target_cols=["y"])
    assert data.rows == [0, 3]
    assert [(s.row, s.smiles) for s in data.skipped] == [(1, "CC(C)(C)(C)C"), (2, "")]
    assert "valence" in data.skipped[0].reason and data.skipped[1].reason == "no molecule (None)"


def test_featurizing_shows_a_progress_bar_when_asked(tmp_path: Path, capsys) -> None:
    path = write(tmp_path, "smiles,y\nCCO,1\nCCN,2\nCCC,3\n", name="three.csv")
    MoleculeCSV(path, target_cols="y", featurizer=MoleculeFeaturizer())
    assert capsys.readouterr().err == ""
    MoleculeCSV(path, target_cols="y", featurizer=MoleculeFeaturizer(), progress=True)
    assert "featurize three.csv: 3 rows" in capsys.readouterr().err


def test_missing_column_lists_available_columns(tmp_path: Path) -> None:
    path = write(tmp_path, BAD_CSV)
    with pytest.raises(GraphInputError, match="'solubility' not found") as info:
        MoleculeCSV(path, target_cols=["solubility"])
    assert "logS" in str(info.value) and "pKa" in str(info.value)
    with pytest.raises(GraphInputError, match="'SMILES' not found"):
        MoleculeCSV(path, smiles_col="SMILES", target_cols="logS")


def test_empty_csv_raises(tmp_path: Path) -> None:
    with pytest.raises(GraphInputError, match="empty"):
        MoleculeCSV(write(tmp_path, ""), target_cols="y")


def test_column_names_match_despite_surrounding_spaces(tmp_path: Path) -> None:
    dataset = MoleculeCSV(write(tmp_path, "smiles , y \nCCO,2.5\n"), target_cols="y")
    assert dataset.targets.tolist() == [[2.5]]


def test_limit_headerless_and_comments(tmp_path: Path) -> None:
    text = "# a comment\nCCO,1.0\n\nCCN,2.0\nCCC,3.0\n"
    path = write(tmp_path, text)
    dataset = MoleculeCSV(path, target_cols="v", fieldnames=("smiles", "v"), comment="#")
    assert dataset.targets.flatten().tolist() == [1.0, 2.0, 3.0]
    assert dataset.rows == [0, 1, 2]
    limited = MoleculeCSV(path, target_cols="v", fieldnames=("smiles", "v"), comment="#", limit=2)
    assert limited.num_rows_read == 2 and len(limited) == 2


def test_a_smiles_with_a_character_beyond_ascii_is_skipped_with_the_character(
    tmp_path: Path,
) -> None:
    # an en dash pasted from a document: RDKit's error message cut the dash's UTF-8
    # bytes in two, and reading it raised UnicodeDecodeError out of the loader
    dashed = "CC1(C)C(C(=O)OC(C#N)c2cccc(Oc3ccccc3)c2\u2013)C1(C)C"
    text = f"smiles,y\nCCO,1\n{dashed},2\nCC\u00e9,3\nCCN,4\n"  # RDKit reads CCé as ethane
    dataset = MoleculeCSV(write(tmp_path, text), target_cols="y", featurizer=PLAIN)
    assert dataset.rows == [0, 3] and dataset.smiles == ["CCO", "CCN"]
    assert [s.row for s in dataset.skipped] == [1, 2]
    assert "'\u2013' (U+2013) is not a SMILES character" in dataset.skipped[0].reason
    assert "'\u00e9' (U+00E9)" in dataset.skipped[1].reason


def test_invisible_characters_around_a_smiles_are_ignored_inside_refused(tmp_path: Path) -> None:
    # a byte-order mark or zero-width space at either end, pasted from a document, parsed
    # before non-ASCII SMILES were refused; inside a SMILES it is still an error
    text = "smiles,y\n\ufeffCCO,1\nCCN\u200b,2\nCC\u200bC,3\n"
    dataset = MoleculeCSV(write(tmp_path, text), target_cols="y", featurizer=PLAIN)
    assert dataset.rows == [0, 1] and dataset.smiles == ["CCO", "CCN"]
    assert "(U+200B) is not a SMILES character" in dataset.skipped[0].reason


def test_featurizer_is_used(tmp_path: Path) -> None:
    featurizer = MoleculeFeaturizer(elements=("C",), hybridization=False)
    dataset = MoleculeCSV(write(tmp_path, BAD_CSV), target_cols="logS", featurizer=featurizer)
    assert dataset.featurizer is featurizer
    assert all(d.x.shape[1] == featurizer.atom_dim for d in dataset)


def test_sdf_loader_reads_properties_and_skips_bad_records(tmp_path: Path) -> None:
    pentavalent = Chem.MolFromSmiles("C(C)(C)(C)(C)C", sanitize=False)
    pentavalent.UpdatePropertyCache(strict=False)
    text = Chem.MolToMolBlock(Chem.MolFromSmiles("CCO")) + "> <value>\n1.5\n\n$$$$\n"
    text += Chem.MolToMolBlock(pentavalent, kekulize=False) + "> <value>\n2.0\n\n$$$$\n"
    text += Chem.MolToMolBlock(Chem.MolFromSmiles("CCN")) + "$$$$\n"
    text += Chem.MolToMolBlock(Chem.MolFromSmiles("CCCl")) + "> <value>\nhigh\n\n$$$$\n"
    dataset = MoleculeSDF(write(tmp_path, text, "mols.sdf"), target_cols="value")
    assert dataset.num_rows_read == 4
    assert dataset.smiles == ["CCO", "CCN"]
    assert dataset.rows == [0, 2]
    assert dataset.targets[0, 0] == 1.5 and math.isnan(dataset.targets[1, 0])
    assert [s.row for s in dataset.skipped] == [1, 3]
    assert dataset.skipped[1].smiles == "CCCl"  # the record's SMILES, not its name
    if CAPTURES_LOG:  # RDKit's reason needs rdBase.CaptureErrorLog (RDKit >= 2025.09)
        reason = dataset.skipped[0].reason
        assert "valence" in reason.lower() and "ERROR" not in reason
        assert reason.lower().count("explicit valence") == 1


def test_sdf_properties_are_matched_ignoring_surrounding_spaces(tmp_path: Path) -> None:
    text = Chem.MolToMolBlock(Chem.MolFromSmiles("CCO")) + "> <logS >\n1.5\n\n$$$$\n"
    text += Chem.MolToMolBlock(Chem.MolFromSmiles("CCN")) + "> <logS>\n2.5\n\n$$$$\n"
    path = write(tmp_path, text, "mols.sdf")
    for asked in ("logS", "logS "):
        dataset = MoleculeSDF(path, target_cols=asked, featurizer=PLAIN)
        assert dataset.target_cols == ["logS"]
        assert dataset.targets[:, 0].tolist() == [1.5, 2.5]


@pytest.mark.skipif(not CAPTURES_LOG, reason="RDKit's reason needs rdBase.CaptureErrorLog")
def test_an_sdf_record_rdkit_rejects_by_invariant_gets_a_short_reason(tmp_path: Path) -> None:
    block = Chem.MolToMolBlock(Chem.MolFromSmiles("CO"))
    unknown_element = block.replace(" C   0", " Xx  0", 1)  # an invariant in RDKit
    text = f"{block}$$$$\n{unknown_element}$$$$\n{block}$$$$\n"
    dataset = MoleculeSDF(write(tmp_path, text, "mols.sdf"), featurizer=PLAIN)
    assert dataset.rows == [0, 2]
    (skipped,) = dataset.skipped
    assert skipped.row == 1 and "Element 'Xx' not found" in skipped.reason
    # not RDKit's source location and stack trace (10,000 characters of library paths)
    assert "Stacktrace" not in skipped.reason and len(skipped.reason) < 200
    assert "*" not in skipped.reason  # nor the report's **** lines


def test_a_broken_record_in_a_latin1_sdf_is_skipped_not_a_decode_error(tmp_path: Path) -> None:
    block = Chem.MolToMolBlock(Chem.MolFromSmiles("CO")) + "> <value>\n1.5\n\n$$$$\n"
    lines = block.split("\n")
    lines[3] = "  2\u00e9"  # a counts line RDKit quotes in its message, in Latin-1
    path = tmp_path / "mols.sdf"
    path.write_bytes((block + "\n".join(lines) + block).encode("latin-1"))
    dataset = MoleculeSDF(path, target_cols="value", featurizer=PLAIN)  # UnicodeDecodeError
    assert dataset.rows == [0, 2] and [s.row for s in dataset.skipped] == [1]
    if CAPTURES_LOG:  # the Latin-1 byte RDKit quotes becomes U+FFFD, not dropped
        assert "'  2\ufffd'" in dataset.skipped[0].reason


def test_a_gzipped_sdf_is_read_and_a_truncated_one_is_an_error(tmp_path: Path) -> None:
    import gzip

    text = "".join(
        Chem.MolToMolBlock(Chem.MolFromSmiles(s)) + f"> <value>\n{i}\n\n$$$$\n"
        for i, s in enumerate(["CCO", "CCN", "c1ccccc1"])
    )
    packed = gzip.compress(text.encode())
    (tmp_path / "mols.sdf.gz").write_bytes(packed)
    dataset = MoleculeSDF(tmp_path / "mols.sdf.gz", target_cols="value", featurizer=PLAIN)
    assert dataset.smiles == ["CCO", "CCN", "c1ccccc1"] and not dataset.skipped
    assert dataset.targets[:, 0].tolist() == [0.0, 1.0, 2.0]
    (tmp_path / "cut.sdf.gz").write_bytes(packed[: len(packed) // 2])
    with pytest.raises(
        GraphInputError, match=r"cut\.sdf\.gz: cannot read record \d+ \(counted from 0\)"
    ):
        MoleculeSDF(tmp_path / "cut.sdf.gz", target_cols="value", featurizer=PLAIN)
    (tmp_path / "head.sdf.gz").write_bytes(packed[:10])  # the gzip header, no record at all
    message = r"cannot read record 0 \(counted from 0\): Compressed file ended before the end"
    with pytest.raises(GraphInputError, match=message):
        MoleculeSDF(tmp_path / "head.sdf.gz", target_cols="value", featurizer=PLAIN)


def test_sdf_targets_align_with_molecules() -> None:
    path = Path(RDConfig.RDDataDir) / "NCI" / "first_200.props.sdf"
    if not path.is_file():
        pytest.skip("this RDKit does not ship Data/NCI/first_200.props.sdf")
    dataset = MoleculeSDF(path, target_cols=["AMW"], limit=60)
    assert len(dataset) == 60
    for smiles, weight in zip(dataset.smiles, dataset.targets[:, 0].tolist(), strict=True):
        assert Descriptors.MolWt(Chem.MolFromSmiles(smiles)) == pytest.approx(weight, abs=0.05)


def test_unknown_dataset_name() -> None:
    with pytest.raises(KeyError, match="esol"):
        load_molecule_dataset("no-such-set")


def test_nci_tpsa_loads_offline_with_aligned_targets() -> None:
    dataset = load_molecule_dataset("nci-tpsa", limit=300)
    assert dataset.num_rows_read == 300
    assert len(dataset) + len(dataset.skipped) == 300
    assert dataset.target_cols == ["tpsa"]
    computed = torch.tensor(
        [rdMolDescriptors.CalcTPSA(Chem.MolFromSmiles(s)) for s in dataset.smiles]
    )
    close = (computed - dataset.targets[:, 0]).abs() < 0.1
    assert close.float().mean() > 0.99


def test_nci_tpsa_full_size() -> None:
    lines = nci_tpsa_path().read_text().splitlines()
    data_rows = [line for line in lines if line and not line.startswith("#")]
    dataset = load_molecule_dataset("nci-tpsa")
    assert dataset.num_rows_read == len(data_rows) == MOLECULE_DATASETS["nci-tpsa"].num_molecules
    assert len(dataset) >= 4900
    assert len(dataset) + len(dataset.skipped) == len(data_rows)
    for skipped in dataset.skipped:
        assert skipped.smiles == data_rows[skipped.row].rsplit(",", 1)[0]
    assert (dataset.targets >= 0).all()


@pytest.mark.parametrize("name", ["esol", "freesolv"])
def test_real_dataset_matches_its_file(name: str, data_dir: Path) -> None:
    info = MOLECULE_DATASETS[name]
    dataset = load_molecule_dataset(name, data_dir=data_dir, featurizer=PLAIN)
    rows = read_csv(data_dir / name / info.filename)
    (target,) = info.target_cols
    assert dataset.num_rows_read == len(rows) == info.num_molecules
    assert dataset.skipped == []
    assert len(dataset) == info.num_molecules
    expected = torch.tensor([float(r[target]) for r in rows])
    assert torch.allclose(dataset.targets[:, 0], expected)
    assert not dataset.targets.isnan().any()
    for i in (0, len(rows) // 2, len(rows) - 1):
        reference = Chem.MolToSmiles(Chem.MolFromSmiles(rows[i][info.smiles_col].strip()))
        assert dataset.smiles[i] == reference


def test_real_target_ranges(data_dir: Path) -> None:
    esol = load_molecule_dataset("esol", data_dir=data_dir, featurizer=PLAIN).targets
    assert -13 < esol.min() < -10 and 1 < esol.max() < 3  # log10(mol/L)
    freesolv = load_molecule_dataset("freesolv", data_dir=data_dir, featurizer=PLAIN).targets
    assert -30 < freesolv.min() < -20 and 0 < freesolv.max() < 5  # kcal/mol


def test_dataset_featurizer_is_the_loaders_default_with_overrides():
    from graphattn.datasets.molecules import dataset_featurizer

    assert dataset_featurizer("esol").descriptors is True
    assert dataset_featurizer("nci-tpsa").descriptors is False  # its target is a descriptor
    assert dataset_featurizer("esol", descriptors=False).descriptors is False
    assert dataset_featurizer("nci-tpsa", contributions=True).contributions is True
    assert dataset_featurizer("freesolv").contributions is False
    with pytest.raises(KeyError, match="unknown molecule data set"):
        dataset_featurizer("tox21")
    with pytest.raises(KeyError, match=r"unknown molecule data set 'tox21'; known: \['esol'"):
        load_molecule_dataset("tox21", featurizer=MoleculeFeaturizer())  # was KeyError: 'tox21'
    # one model name as a string is refused, not split into letters
    with pytest.raises(GraphInputError, match="xtb must be a list or tuple, got the string"):
        dataset_featurizer("esol", xtb="gfn2")


def test_a_csv_that_is_not_utf8_is_an_error_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes("smiles,name,y\nCCO,ethanol,1\nCCN,amin\u00e9,2\n".encode("latin-1"))
    with pytest.raises(GraphInputError, match=r"latin1\.csv: line 3 is not UTF-8 .*b'\\xe9'"):
        MoleculeCSV(path, target_cols=["y"])


def test_rows_are_named_one_way_in_every_message():
    assert describe_row(3, "no SMILES") == "data row 3, counted from 0: no SMILES"
    assert str(SkippedRow(3, "", "no SMILES")) == describe_row(3, "no SMILES")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.5", 1.5),
        ("-2e3", -2000.0),
        (".5", 0.5),
        ("+3.", 3.0),
        (" 4 ", 4.0),
        ("3.4028234663852886e38", 3.4028234663852886e38),  # float32's largest is finite
    ],
)
def test_parse_target_reads_decimal_numbers(text, expected) -> None:
    assert parse_target(text, "y") == expected


@pytest.mark.parametrize(
    "text", ["", "  ", "nan", "NaN", "NA", "n/a", "#N/A", "<NA>", "null", "None"]
)
def test_parse_target_reads_empty_and_missing_markers_as_missing(text) -> None:
    assert math.isnan(parse_target(text, "y"))


def test_an_r_style_na_cell_leaves_the_rows_other_targets(tmp_path) -> None:
    path = write(tmp_path, "smiles,a,b\nCCO,NA,2\nCCN,1,N/A\nCCC,x,3\n")
    data = MoleculeCSV(path, target_cols=["a", "b"], featurizer=MoleculeFeaturizer())
    assert data.rows == [0, 1] and [s.row for s in data.skipped] == [2]
    np.testing.assert_array_equal(data.targets.numpy(), [[np.nan, 2.0], [1.0, np.nan]])


@pytest.mark.parametrize(
    ("text", "problem"),
    [("1_000", "not a number"), ("0x10", "not a number"), ("high", "not a number"),
     ("inf", "not finite"), ("-Infinity", "not finite"), ("1e999", "not finite"),
     ("-3.5e38", r"beyond float32's range \(3.4e38\)")],
)  # fmt: skip
def test_parse_target_refuses_what_float_would_stretch(text, problem) -> None:
    with pytest.raises(ValueError, match=f"target 'y' is {problem}: '{text}'"):
        parse_target(text, "y")


def test_a_target_column_named_twice_is_refused(tmp_path) -> None:
    path = write(tmp_path, "smiles,y\nCCO,1\n")
    with pytest.raises(GraphInputError, match=r"target column\(s\) \['y'\] named more than once"):
        MoleculeCSV(path, target_cols=["y", "y"])
    with pytest.raises(GraphInputError, match=r"target column\(s\) \['y'\] named more than once"):
        MoleculeCSV(path, target_cols=["y", " y "])  # columns are matched stripped


def test_target_names_are_stored_stripped_as_columns_are_matched(tmp_path) -> None:
    path = write(tmp_path, "smiles,Donors \nCCO,1\n")
    assert MoleculeCSV(
        path, target_cols=["Donors "], featurizer=MoleculeFeaturizer()
    ).target_cols == ["Donors"]


def test_targets_beyond_float32_are_skipped_not_stored_as_inf(tmp_path) -> None:
    path = write(tmp_path, "smiles,y\nCCO,-3.5e38\nCCN,1e-46\nCCC,2.5\n")
    data = MoleculeCSV(path, target_cols=["y"])
    assert data.rows == [1, 2] and torch.isfinite(data.targets).all()
    assert [s.row for s in data.skipped] == [0]


def test_an_unclosed_quote_is_reported_not_silently_merged(tmp_path, caplog) -> None:
    # the quote opened on line 3 closes on line 6: three rows become one name cell
    text = (
        'name,smiles,y\nethanol,CCO,1\n"dimethylamine,CN(C)C,2\nmethanol,CO,3\n'
        'propanol,CCCO,4\n"x",CC,5\nbutane,CCCC,6\n'
    )
    with caplog.at_level(logging.WARNING):
        data = MoleculeCSV(write(tmp_path, text), target_cols=["y"])
    assert data.num_rows_read == 3
    assert "1 row(s) hold a line break inside a quoted field (first: the row on lines 3-6)" in (
        caplog.text
    )


def test_a_quoted_line_break_in_a_name_is_read_and_reported(tmp_path, caplog) -> None:
    text = 'name,smiles,y\n"two\nlines",CCO,1\nplain,CC,2\n'
    with caplog.at_level(logging.WARNING):
        data = MoleculeCSV(write(tmp_path, text), target_cols=["y"])
    assert data.smiles == ["CCO", "CC"] and data.rows == [0, 1]
    assert "lines 2-3" in caplog.text


def test_whitespace_only_lines_are_blank_lines_not_rows(tmp_path) -> None:
    data = MoleculeCSV(write(tmp_path, "smiles,y\nCCO,1\n   \n\t\nCC,2\n"), target_cols=["y"])
    assert data.num_rows_read == 2 and not data.skipped and data.rows == [0, 1]


def test_a_field_over_the_csv_limit_names_file_and_line(tmp_path) -> None:
    path = write(tmp_path, 'smiles,y,note\nCCO,1,x\nCC,2,"' + "a" * 200_000 + '"\n')
    with pytest.raises(GraphInputError, match=r"line 3: not valid CSV \(field larger than"):
        MoleculeCSV(path, target_cols=["y"])
    # in a quoted field that spans lines: the line where the limit is passed, not line 3
    path = write(tmp_path, 'smiles,y,note\nCCO,1,x\nCC,2,"a\n' + "a" * 200_000 + '"\n')
    with pytest.raises(GraphInputError, match=r"line 4: not valid CSV \(field larger than"):
        MoleculeCSV(path, target_cols=["y"])


def test_a_semicolon_separated_file_gets_a_hint(tmp_path) -> None:
    path = write(tmp_path, "smiles;y\nCCO;1\n")
    with pytest.raises(GraphInputError, match=r"\['smiles;y'\] \(one column: .* is it ';', tab"):
        MoleculeCSV(path, target_cols=["y"])


def test_comment_and_blank_lines_are_skipped_only_where_a_row_starts(tmp_path, caplog) -> None:
    # lines 2-3 are comments, the row on lines 4-5 holds a line break, and the quoted
    # field on lines 6-7 holds a line that starts like a comment
    text = 'smiles,y,note\n# c1\n# c2\nCCO,1,"two\nlines"\nCC,2,"a\n# not a comment"\n""\n'
    with caplog.at_level(logging.WARNING):
        data = MoleculeCSV(write(tmp_path, text), target_cols=["y"], comment="#")
    assert data.smiles == ["CCO", "CC"] and data.num_rows_read == 3
    assert "2 row(s) hold a line break inside a quoted field (first: the row on lines 4-5)" in (
        caplog.text
    )
    (empty,) = data.skipped  # an empty quoted SMILES is a row, not a blank line
    assert empty.row == 2 and empty.smiles == ""
