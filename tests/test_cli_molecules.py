"""`graphattn predict` / `evaluate` on awkward CSV files: they read what `train` reads,
never crash on a bad row, never overwrite the user's columns, and match targets by name."""

from __future__ import annotations

import csv
import json
import logging
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from graphattn.cli.main import main
from graphattn.errors import GraphInputError
from graphattn.train.molecules import evaluate_molecules, load_molecule_model, predict_molecules

ALCOHOLS = [f"{'C' * n}O" for n in range(1, 13)]


@pytest.fixture(scope="module")
def two_target_run(tmp_path_factory):
    """A 2-epoch model with targets ``y`` and ``z`` (z = 10 y, so their errors differ)."""
    folder = tmp_path_factory.mktemp("cli_molecules")
    source = folder / "train.csv"
    source.write_text(
        "smiles,y,z\n" + "".join(f"{s},{n * 0.5},{n * 5.0}\n" for n, s in enumerate(ALCOHOLS, 1))
    )
    run = folder / "run"
    args = ["train", "--csv", str(source), "--target-col", "y", "--target-col", "z"]
    tiny = ["--epochs", "2", "--hidden", "16", "--layers", "1", "--no-progress"]
    assert main([*args, *tiny, "--no-descriptors", "--out", str(run)]) == 0
    return run


def read_rows(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def predict_csv(run, tmp_path, data: bytes | str) -> list[dict]:
    """Write ``data`` as the input CSV, run ``graphattn predict`` on it, read the output."""
    source, out = tmp_path / "in.csv", tmp_path / "out.csv"
    source.write_bytes(data if isinstance(data, bytes) else data.encode())
    assert main(["predict", "--model", str(run), "--csv", str(source), "--out", str(out)]) == 0
    return read_rows(out)


def test_predict_reads_a_bom_and_padded_header_and_reports_bad_rows(two_target_run, tmp_path):
    text = " smiles ,id\nCCO,1\nc1ccccc1,2,extra\nCCN,3\nC C,4\n"
    rows = predict_csv(two_target_run, tmp_path, b"\xef\xbb\xbf" + text.encode())
    assert [r["id"] for r in rows] == ["1", "2", "3", "4"]  # every row, in order
    assert list(rows[0])[:2] == [" smiles ", "id"]  # the input's names, as they were
    # the cell past the header's columns is named, not lost
    assert rows[1]["error"] == "row has 3 fields, the header has 2; extra fields: ['extra']"
    assert rows[1]["pred_y"] == ""
    assert "whitespace inside" in rows[3]["error"]
    expected, _ = predict_molecules(two_target_run, ["CCO", "CCN"])
    for row, (y, z) in zip((rows[0], rows[2]), expected, strict=True):
        assert row["error"] == ""
        assert float(row["pred_y"]) == pytest.approx(y, rel=1e-5)
        assert float(row["pred_z"]) == pytest.approx(z, rel=1e-5)


def test_predict_keeps_the_users_columns_of_the_same_names(two_target_run, tmp_path, capsys):
    rows = predict_csv(
        two_target_run, tmp_path, "smiles,error,pred_y\nCCO,mine,0.25\nxyz,ours,0.5\n"
    )
    assert "pred_y_2" in capsys.readouterr().err
    assert list(rows[0]) == ["smiles", "error", "pred_y", "pred_y_2", "pred_z", "error_2"]
    assert [(r["error"], r["pred_y"]) for r in rows] == [("mine", "0.25"), ("ours", "0.5")]
    assert rows[0]["error_2"] == "" and rows[1]["error_2"] and rows[1]["pred_y_2"] == ""
    padded = predict_csv(two_target_run, tmp_path, "smiles, pred_y,error ,pred_z_2\nCCO,1,2,3\n")
    # kept as written, and still renamed around: readers here match names stripped
    assert list(padded[0]) == [
        *("smiles", " pred_y", "error ", "pred_z_2"),
        *("pred_y_2", "pred_z", "error_2"),
    ]


def test_train_renames_repeated_columns_to_names_no_other_column_has():
    from pathlib import Path

    from graphattn.train.molecules import _unique_header

    # targets row and row_2: target row's label must not become "row_2"
    names = ["row", "smiles", "row", "row_2", "pred_row", "pred_row_2"]
    header = _unique_header(names, Path("run"))
    assert header == ["row", "smiles", "row_3", "row_2", "pred_row", "pred_row_2"]


def test_predict_notes_rows_of_several_fragments(two_target_run, tmp_path, capsys):
    # "C1.C1" is ethane written with a ring-closure bond across the '.': one fragment
    text = "smiles\nCCO\nC1.C1\nCC(=O)[O-].[Na+]\nC.C(\nOCCO.O\n"
    rows = predict_csv(two_target_run, tmp_path, text)
    err = capsys.readouterr().err
    assert "2 row(s) hold several disconnected fragments" in err
    assert "data row 2, counted from 0: CC(=O)[O-].[Na+]" in err
    assert [r["error"] == "" for r in rows] == [True, True, True, False, True]
    assert rows[2]["pred_y"] != "" and rows[4]["pred_y"] != ""  # noted, still predicted


def test_predict_of_single_molecules_prints_no_fragment_note(two_target_run, tmp_path, capsys):
    predict_csv(two_target_run, tmp_path, "smiles\nCCO\nC1.C1\nc1ccccc1\n")
    assert "fragments" not in capsys.readouterr().err


def test_predict_notes_rows_that_keep_hydrogen_atoms(two_target_run, tmp_path, capsys):
    # [H] on a heavy atom is merged by RDKit; [nH] and [NH4+] are not hydrogen atoms
    text = "smiles\n[H]C([H])([H])O\nc1cc[nH]c1\n[NH4+]\n[2H]C([2H])([2H])O\n[H][H]\n"
    rows = predict_csv(two_target_run, tmp_path, text)
    err = capsys.readouterr().err
    assert "note: 2 row(s) keep hydrogen atoms as graph nodes (e.g. data row 3, " in err
    assert [r["error"] for r in rows] == [""] * 5  # noted, still predicted
    assert rows[0]["pred_y"] == predict_csv(two_target_run, tmp_path, "smiles\nCO\n")[0]["pred_y"]


def test_no_hydrogen_note_for_a_model_whose_graphs_have_hydrogen_nodes(capsys):
    from graphattn.cli.main import _note_unusual_molecules

    smiles = ["[2H]OC", "CCO"]
    _note_unusual_molecules(smiles, {"featurizer": {"add_hs": True}})
    assert capsys.readouterr().err == ""
    _note_unusual_molecules(smiles, {"featurizer": {"add_hs": False}})
    assert "1 row(s) keep hydrogen atoms" in capsys.readouterr().err


def test_dummy_atoms_are_not_taken_for_kept_hydrogen_atoms(capsys):
    from graphattn.cli.main import _note_unusual_molecules

    _note_unusual_molecules(["*CC.[Na+]", "CC(=O)O[*]"], {"featurizer": {"add_hs": False}})
    err = capsys.readouterr().err
    assert "1 row(s) hold several disconnected fragments" in err and "hydrogen" not in err


def evaluate_stderr(run, tmp_path, capsys, text: str) -> str:
    """Run ``graphattn evaluate`` on a CSV of ``text``; what it printed on stderr."""
    source = tmp_path / "labelled.csv"
    source.write_text(text)
    assert main(["evaluate", "--model", str(run), "--csv", str(source)]) == 0
    return capsys.readouterr().err


def test_evaluate_notes_rows_of_several_fragments(two_target_run, tmp_path, capsys):
    text = "smiles,y,z\nCCO,1,10\nCCCO.O,1.5,15\nCCCCO,2,20\n"
    err = evaluate_stderr(two_target_run, tmp_path, capsys, text)
    assert "1 row(s) hold several disconnected fragments (e.g. data row 1," in err


def test_evaluate_names_the_first_bad_label_cell(two_target_run, tmp_path, capsys):
    text = "smiles,y,z\nCCO,1,10\nCCCO,high,15\nCCCCO,2,20\n"
    err = evaluate_stderr(two_target_run, tmp_path, capsys, text)
    assert "1 label cell(s) are not numbers and were read as missing (e.g. data row 1, " in err


def test_evaluate_matches_targets_by_name_and_counts_bad_labels(two_target_run, tmp_path):
    source = tmp_path / "labelled.csv"
    lines = ["smiles,mw,y,other"] + [f"{s},{n * 5.0},{n * 0.5},{n}" for n, s in
                                     enumerate(ALCOHOLS[:6], 1)]  # fmt: skip
    lines[3] = lines[3].replace(",1.5,", ",inf,")  # row 2: an infinite label
    source.write_text("\n".join(lines) + "\n")
    model, _ = load_molecule_model(two_target_run)
    preds, _ = predict_molecules(two_target_run, ALCOHOLS[:6])
    y = np.array([n * 0.5 for n in range(1, 7)])
    z = np.array([n * 5.0 for n in range(1, 7)])

    def evaluate(*target_cols: str) -> dict:
        out = tmp_path / "metrics.json"
        flags = [f"--target-col={c}" for c in target_cols]
        assert main(["evaluate", "--model", str(two_target_run), "--csv", str(source),
                     *flags, "--out", str(out)]) == 0  # fmt: skip
        return json.loads(out.read_text())  # standard JSON: no NaN / Infinity

    by_name = evaluate("y")
    keep = np.arange(6) != 2
    rmse_y = np.sqrt(np.mean((preds[keep, 0] - y[keep]) ** 2))
    assert by_name["metrics"]["rmse"] == pytest.approx(rmse_y, rel=1e-4)
    assert by_name["num_bad_labels"] == 1 and by_name["bad_labels"][0]["row"] == 2
    renamed = evaluate("mw=z")
    rmse_z = np.sqrt(np.mean((preds[:, 1] - z) ** 2))
    assert renamed["metrics"]["rmse"] == pytest.approx(rmse_z, rel=1e-4)
    assert renamed["targets"] == {"z": "mw"}


def test_a_target_column_with_padded_header_can_be_trained_and_evaluated(tmp_path):
    """ESOL's header holds 'Number of H-Bond Donors ' (a trailing space)."""
    source = tmp_path / "train.csv"
    source.write_text("smiles,Donors \n" + "".join(f"{s},{n}\n" for n, s in enumerate(ALCOHOLS)))
    run = tmp_path / "run"
    tiny = ["--epochs", "1", "--hidden", "8", "--layers", "1", "--no-progress", "--no-descriptors"]
    assert (
        main(["train", "--csv", str(source), "--target-col", "Donors ", *tiny, "--out", str(run)])
        == 0
    )
    for asked in ([], ["--target-col", "Donors "], ["--target-col", "Donors"]):
        out = tmp_path / "metrics.json"
        command = ["evaluate", "--model", str(run), "--csv", str(source), "--out", str(out)]
        assert main([*command, *asked, "--no-progress"]) == 0
        assert json.loads(out.read_text())["targets"] == {"Donors": "Donors"}


def test_train_shows_featurization_progress_unless_told_not_to(tmp_path, capsys):
    source = tmp_path / "alcohols.csv"
    source.write_text("smiles,y\n" + "".join(f"{s},{n}\n" for n, s in enumerate(ALCOHOLS)))
    tiny = ["--epochs", "1", "--hidden", "8", "--layers", "1", "--no-descriptors"]
    args = ["train", "--csv", str(source), "--target-col", "y", *tiny]
    assert main([*args, "--out", str(tmp_path / "shown")]) == 0
    assert "featurize alcohols.csv: 12 rows" in capsys.readouterr().err
    assert main([*args, "--no-progress", "--out", str(tmp_path / "hidden")]) == 0
    assert "featurize" not in capsys.readouterr().err


def test_the_printed_summary_is_standard_json_when_a_metric_is_undefined(tmp_path, capsys):
    # a one-molecule test set has no RMSE: metrics.json says null, and so must stdout
    # (Python's json writes NaN, which other JSON readers refuse)
    source = tmp_path / "alcohols.csv"
    source.write_text("smiles,y\n" + "".join(f"{s},{n}\n" for n, s in enumerate(ALCOHOLS)))
    out = tmp_path / "run"
    tiny = ["--epochs", "1", "--hidden", "8", "--layers", "1", "--no-descriptors"]
    args = ["train", "--csv", str(source), "--target-col", "y", *tiny, "--no-progress"]
    assert main([*args, "--out", str(out)]) == 0
    printed = capsys.readouterr().out.strip().splitlines()[:-1]  # the last: the run folder
    summary = json.loads("\n".join(printed), parse_constant=pytest.fail)
    assert summary["test"] == {"rmse": None, "mae": None, "r2": None}
    assert summary["test"] == json.loads((out / "metrics.json").read_text())["test"]


def test_train_predictions_name_each_column_once_and_keep_every_float32_digit(tmp_path, caplog):
    # a target named `row` or `pred_<another target>` made two columns of one name, and
    # CSV readers keep one; 7 significant digits wrote 12345678 as 1.234568e+07
    source = tmp_path / "m.csv"
    big = [12345678.0 + n for n in range(12)]
    lines = [f"{s},{n * 0.5},{big[n]:.0f}\n" for n, s in enumerate(ALCOHOLS)]
    source.write_text("smiles,row,pred_row\n" + "".join(lines))
    out = tmp_path / "run"
    tiny = ["--epochs", "1", "--hidden", "8", "--layers", "1", "--no-descriptors"]
    argv = ["train", "--csv", str(source), "--target-col", "row", "--target-col", "pred_row"]
    argv += [*tiny, "--no-progress", "--split-fractions", "0.5", "0.25", "0.25"]
    assert main([*argv, "--out", str(out)]) == 0
    with open(out / "predictions.csv", encoding="utf-8") as handle:
        header = next(csv.reader(handle))
        handle.seek(0)
        rows = list(csv.DictReader(handle))
    assert header == ["row", "smiles", "row_2", "pred_row", "pred_row_2", "pred_pred_row"]
    assert "columns named twice are written as ['row_2', 'pred_row_2']" in caplog.text
    for row in rows:
        assert float(row["pred_row"]) == big[int(row["row"])]  # exact, in plain digits
        assert float(row["row_2"]) == int(row["row"]) * 0.5 and "e" not in row["pred_row"]


def test_float32_text_is_the_shortest_decimal_of_the_same_float32():
    from graphattn.train.molecule_inference import float32_text

    cases = {-5.45: "-5.45", 12345678.0: "12345678", 123456.789: "123456.79", 1.0: "1"}
    cases.update({0.0: "0", 2.5e-5: "2.5e-05", 3e20: "3e+20", math.nan: "", math.inf: "inf"})
    cases.update({1e39: "1e+39", -1e300: "-1e+300", 1e-50: "1e-50"})  # beyond float32
    for value, text in cases.items():
        assert float32_text(value) == text
    for value in np.random.default_rng(0).standard_normal(1000) * 10.0 ** np.arange(-6, 14, 0.02):
        assert np.float32(float(float32_text(value))) == np.float32(value)


def test_evaluate_reads_a_padded_target_name_of_an_older_model():
    from graphattn.cli.main import _evaluated_columns

    chosen = _evaluated_columns(Path("x.csv"), ["smiles", "y"], None, ["y "])
    assert chosen == {"y ": "y"}
    assert _evaluated_columns(Path("x.csv"), ["smiles", "y"], ["y"], ["y "]) == {"y ": "y"}
    with pytest.raises(GraphInputError, match="differ only by surrounding spaces"):
        _evaluated_columns(Path("x.csv"), ["smiles", "y"], None, ["y", "y "])


def test_evaluate_refuses_unknown_targets_and_node_models(two_target_run, tmp_path, capsys):
    source = tmp_path / "labelled.csv"
    source.write_text("smiles,y\nCCO,1\n")
    code = main(["evaluate", "--model", str(two_target_run), "--csv", str(source),
                 "--target-col", "other"])  # fmt: skip
    assert code == 2 and "no target(s) ['other']; its targets are ['y', 'z']" in (
        capsys.readouterr().err
    )
    code = main(["evaluate", "--model", str(two_target_run), "--csv", str(source)])
    err = capsys.readouterr().err
    assert code == 2 and "missing column(s) ['z']; columns are ['smiles', 'y']" in err
    assert "--target-col COLUMN=TARGET" in err  # says how to read a target from another column
    karate = tmp_path / "karate"
    assert main(["train", "--dataset", "karate", "--epochs", "2", "--out", str(karate),
                 "--no-progress"]) == 0  # fmt: skip
    for command in ("predict", "evaluate"):
        args = [command, "--model", str(karate), "--csv", str(source)]
        code = main([*args, "--out", str(tmp_path / "x.csv")])
        assert code == 2 and "holds a 'node' model, not a molecule model" in capsys.readouterr().err


def test_unreadable_checkpoints_and_wrong_data_files_are_one_line_errors(tmp_path, capsys):
    import torch

    from graphattn.errors import GraphInputError
    from graphattn.train.checkpoint import load_checkpoint

    run = tmp_path / "run"
    run.mkdir()
    torch.save({"format_version": 1, "kind": "molecule", "state_dict": {}}, run / "model.pt")
    whole = (run / "model.pt").read_bytes()
    unreadable = r"not a readable torch.save archive \(truncated or damaged, or another kind"
    for content in [b"", b"smiles,y\nCCO,1\n", whole[: len(whole) // 2]]:  # the last: cut short
        (run / "model.pt").write_bytes(content)
        with pytest.raises(GraphInputError, match=rf"model.pt: {unreadable}"):
            load_checkpoint(run)
    torch.save({"format_version": 99, "kind": "molecule", "state_dict": {}}, run / "model.pt")
    with pytest.raises(
        GraphInputError, match="checkpoint format 99, this graphattn reads format 1"
    ):
        load_checkpoint(run)
    torch.save([1, 2], run / "model.pt")
    source = tmp_path / "in.csv"
    source.write_text("smiles\nCCO\n")
    code = main(
        ["predict", "--model", str(run), "--csv", str(source), "--out", str(tmp_path / "o")]
    )
    assert code == 2 and "not a graphattn checkpoint" in capsys.readouterr().err

    wrong = tmp_path / "data" / "esol"
    wrong.mkdir(parents=True)
    (wrong / "delaney-processed.csv").write_text("smiles,y\nCCO,1\n")
    args = ["train", "--dataset", "esol", "--data-dir", str(tmp_path / "data"), "--epochs", "1"]
    assert main([*args, "--out", str(tmp_path / "r")]) == 2
    assert "sha256" in capsys.readouterr().err


def test_several_targets_get_metrics_each_in_their_own_units(two_target_run, tmp_path):
    metrics = json.loads((two_target_run / "metrics.json").read_text())
    train = json.loads((two_target_run / "split.json").read_text())["train"]
    preds, _ = predict_molecules(two_target_run, [ALCOHOLS[i] for i in train])
    per_target = metrics["train"]["per_target"]
    assert list(per_target) == ["y", "z"]
    for t, (name, scale) in enumerate((("y", 0.5), ("z", 5.0))):
        labels = np.array([(i + 1) * scale for i in train])
        rmse = float(np.sqrt(np.mean((preds[:, t] - labels) ** 2)))
        assert per_target[name]["rmse"] == pytest.approx(rmse, rel=1e-4)
    assert per_target["z"]["rmse"] > 5 * per_target["y"]["rmse"]  # z is 10 y: its own units
    mean = (per_target["y"]["rmse"] + per_target["z"]["rmse"]) / 2
    assert metrics["train"]["rmse"] == pytest.approx(mean, rel=1e-9)
    assert list(metrics["test"]["per_target"]) == ["y", "z"]

    source = tmp_path / "labelled.csv"
    source.write_text("smiles,y,z\n" + "".join(
        f"{s},{n * 0.5},{n * 5.0}\n" for n, s in enumerate(ALCOHOLS[:5], 1)))  # fmt: skip
    out = tmp_path / "evaluated.json"
    assert main(["evaluate", "--model", str(two_target_run), "--csv", str(source),
                 "--out", str(out)]) == 0  # fmt: skip
    evaluated = json.loads(out.read_text())["metrics"]
    preds, _ = predict_molecules(two_target_run, ALCOHOLS[:5])
    z = np.array([n * 5.0 for n in range(1, 6)])
    rmse_z = float(np.sqrt(np.mean((preds[:, 1] - z) ** 2)))
    assert evaluated["per_target"]["z"]["rmse"] == pytest.approx(rmse_z, rel=1e-4)


def test_output_paths_that_cannot_be_written_fail_before_any_work(two_target_run, tmp_path, capsys):
    source = tmp_path / "in.csv"
    source.write_text("smiles,y,z\nCCO,1,10\nCCCO,2,20\n")
    folder = tmp_path / "a_folder"
    folder.mkdir()
    missing_model = tmp_path / "no_run"  # the output is checked before the model is read
    for command in ("predict", "evaluate"):
        code = main([command, "--model", str(missing_model), "--csv", str(source),
                     "--out", str(folder)])  # fmt: skip
        assert code == 2
        assert f"--out {folder} is a folder; name the file to write" in capsys.readouterr().err

    a_file = tmp_path / "a_file"
    a_file.write_text("keep me")
    for data in (["--csv", str(source), "--target-col", "y"], ["--dataset", "karate"]):
        code = main(["train", *data, "--epochs", "1", "--no-progress", "--out", str(a_file)])
        assert code == 2
        assert f"run folder {a_file} is a file" in capsys.readouterr().err
        # inside a file: refused before training too (it failed after the last epoch)
        code = main(["train", *data, "--epochs", "1", "--no-progress",
                     "--out", str(a_file / "run")])  # fmt: skip
        assert code == 2
        assert f"cannot be created: {a_file} is a file" in capsys.readouterr().err
    for command in ("predict", "evaluate"):  # and an output file inside a file
        for out in (a_file / "out.csv", a_file / "sub" / "out.csv"):
            code = main([command, "--model", str(missing_model), "--csv", str(source),
                         "--out", str(out)])  # fmt: skip
            assert code == 2
            assert f"cannot be written: {a_file} is a file" in capsys.readouterr().err
    assert main(["bench", "--quick", "--no-progress", "--out", str(a_file)]) == 2
    assert "File exists" in capsys.readouterr().err  # an OSError is a message, not a traceback
    assert a_file.read_text() == "keep me"

    nested = tmp_path / "new" / "metrics.json"  # evaluate creates the folder, as predict does
    assert main(["evaluate", "--model", str(two_target_run), "--csv", str(source),
                 "--out", str(nested)]) == 0  # fmt: skip
    assert json.loads(nested.read_text())["targets"] == {"y": "y", "z": "z"}


def test_prediction_in_chunks_matches_one_batch_and_shows_progress(two_target_run, capsys):
    smiles = ["CCO", "bad(", "CCCO", "", "CCCCO", "C1CC", "OCCO"]  # failures across chunks
    whole = predict_molecules(two_target_run, smiles, return_std=True)
    for batch_size in (1, 2, 3):
        chunked = predict_molecules(two_target_run, smiles, batch_size, return_std=True)
        np.testing.assert_allclose(chunked[0], whole[0], rtol=1e-5, equal_nan=True)
        assert chunked[1] == whole[1]
    assert [bool(e) for e in whole[1]] == [False, True, False, True, False, True, False]
    assert "predict" not in capsys.readouterr().err  # no bar unless asked
    predict_molecules(two_target_run, smiles, batch_size=2, progress=True)
    assert "7/7" in capsys.readouterr().err
    with pytest.raises(ValueError, match="batch_size must be at least 1, got 0"):
        predict_molecules(two_target_run, smiles, batch_size=0)


@pytest.mark.parametrize("command", ["predict", "evaluate"])
def test_predict_and_evaluate_show_a_progress_bar_unless_told_not_to(
    two_target_run, tmp_path, capsys, command
):
    source = tmp_path / "in.csv"
    source.write_text("smiles,y,z\nCCO,1,10\nCCCO,2,20\nCCCCO,3,30\n")
    args = [command, "--model", str(two_target_run), "--csv", str(source)]
    args += ["--out", str(tmp_path / "out")]
    assert main(args) == 0
    assert "3/3" in capsys.readouterr().err
    assert main([*args, "--no-progress"]) == 0
    assert "3/3" not in capsys.readouterr().err


def test_label_cells_are_decimal_numbers_and_nan_is_missing(two_target_run, tmp_path):
    source = tmp_path / "labels.csv"
    source.write_text("smiles,y,z\nCCO,NaN,10\nCCCO,1_000,15\nCCCCO,2,NA\nCO,0x10,1\n")
    out = tmp_path / "m.json"
    assert main(["evaluate", "--model", str(two_target_run), "--csv", str(source),
                 "--out", str(out), "--no-progress"]) == 0  # fmt: skip
    result = json.loads(out.read_text())
    assert [(b["row"], b["value"]) for b in result["bad_labels"]] == [(1, "1_000"), (3, "0x10")]


def test_evaluate_refuses_repeated_targets_and_columns_and_reads_targets_with_equals(
    two_target_run, tmp_path, capsys
):
    source = tmp_path / "in.csv"
    source.write_text("smiles,y,z,y\nCCO,1,10,1\n")
    code = main(["evaluate", "--model", str(two_target_run), "--csv", str(source)])
    assert code == 2 and "column 'y' appears more than once" in capsys.readouterr().err
    source.write_text("smiles,y,z,w\nCCO,1,10,1\nCCCO,2,20,2\n")
    twice = ["--target-col", "y", "--target-col", "w=y"]
    assert main(["evaluate", "--model", str(two_target_run), "--csv", str(source), *twice]) == 2
    assert "target(s) ['y'] asked for more than once" in capsys.readouterr().err

    (tmp_path / "eq.csv").write_text(
        "smiles,dG=kcal\n" + "".join(f"{s},{n}\n" for n, s in enumerate(ALCOHOLS, 1))
    )
    run = tmp_path / "eq_run"
    assert main(["train", "--csv", str(tmp_path / "eq.csv"), "--target-col", "dG=kcal",
                 "--epochs", "1", "--hidden", "16", "--layers", "1", "--no-descriptors",
                 "--no-progress", "--out", str(run)]) == 0  # fmt: skip
    capsys.readouterr()
    for flags in ([], ["--target-col", "dG=kcal"], ["--target-col", "dG=kcal=dG=kcal"]):
        args = ["evaluate", "--model", str(run), "--csv", str(tmp_path / "eq.csv"), *flags]
        assert main([*args, "--no-progress"]) == 0
        assert json.loads(capsys.readouterr().out)["targets"] == {"dG=kcal": "dG=kcal"}


def test_predict_finds_the_smiles_column_as_train_does(two_target_run, tmp_path, capsys):
    source = tmp_path / "in.csv"
    source.write_text("smiles,smiles\nCCO,CCC\n")
    args = ["predict", "--model", str(two_target_run), "--csv", str(source)]
    assert main([*args, "--out", str(tmp_path / "o.csv")]) == 2
    assert "column 'smiles' appears more than once" in capsys.readouterr().err
    source.write_text("SMILES,id\nCCO,1\n")
    args = ["predict", "--model", str(two_target_run), "--csv", str(source), "--smiles-col"]
    assert main([*args, " SMILES ", "--out", str(tmp_path / "o.csv"), "--no-progress"]) == 0
    assert read_rows(tmp_path / "o.csv")[0]["error"] == ""


def test_evaluate_of_a_classifier_lists_labels_other_than_0_and_1(tmp_path, capsys):
    source = tmp_path / "classes.csv"
    source.write_text("smiles,c\n" + "".join(f"{s},{n % 2}\n" for n, s in enumerate(ALCOHOLS)))
    run = tmp_path / "run"
    assert main(["train", "--csv", str(source), "--target-col", "c", "--task", "classification",
                 "--epochs", "1", "--hidden", "16", "--layers", "1", "--no-descriptors",
                 "--no-progress", "--out", str(run)]) == 0  # fmt: skip
    source.write_text("smiles,c\nCCO,0\nCCCO,5\nCCCCO,1\nCO,0\n")
    capsys.readouterr()
    assert main(["evaluate", "--model", str(run), "--csv", str(source), "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["num_bad_labels"] == 1
    assert "1 label cell(s) are not 0 or 1 and were read as missing (e.g. data row 1" in (
        captured.err
    )


def test_the_attention_mode_of_prediction_can_be_chosen(two_target_run, tmp_path, capsys):
    from graphattn.nn.attention import DenseMemoryError

    small = ALCOHOLS[:4]
    sparse, _ = predict_molecules(two_target_run, small, mode="sparse")
    dense, _ = predict_molecules(two_target_run, small, mode="dense")
    np.testing.assert_allclose(dense, sparse, rtol=1e-5, atol=1e-6)  # the same weights
    crowded = ["CCO"] * 255 + ["C" * 400]  # one long chain pads the whole dense batch
    with pytest.raises(DenseMemoryError, match=r"use mode='sparse' \(on the command line"):
        predict_molecules(two_target_run, crowded, mode="dense")
    source = tmp_path / "in.csv"
    source.write_text("smiles\n" + "\n".join(crowded) + "\n")
    args = ["predict", "--model", str(two_target_run), "--csv", str(source), "--no-progress"]
    assert main([*args, "--out", str(tmp_path / "o.csv"), "--mode", "dense"]) == 2
    assert "--mode sparse" in capsys.readouterr().err
    assert main([*args, "--out", str(tmp_path / "o.csv"), "--mode", "sparse"]) == 0
    assert read_rows(tmp_path / "o.csv")[-1]["error"] == ""


def test_the_python_api_reports_bad_entries_per_row(two_target_run):
    from graphattn.train.molecule_inference import evaluate_molecules

    preds, errors = predict_molecules(two_target_run, ["CCO", float("nan"), None])
    assert errors[0] == "" and "got float: nan" in errors[1] and "got NoneType" in errors[2]
    assert np.isnan(preds[1:]).all()
    with pytest.raises(ValueError, match="got the string 'CCO': put a single SMILES in a list"):
        predict_molecules(two_target_run, "CCO")
    result = evaluate_molecules(two_target_run, ["CCO", "CCCO"], [[1.0, 10.0], [2.0, 20.0]])
    assert result["num_failed"] == 0 and result["metrics"]["rmse"] > 0


def test_predict_warns_of_rows_that_span_lines_and_skips_blank_ones(
    two_target_run, tmp_path, caplog
):
    # an unclosed quote on line 3 runs on to line 5: one output row for three input lines
    text = 'id,smiles\n1,CCO\n"2,CCN\n3,CO\n4",CC\n   \n5,CCC\n'
    with caplog.at_level(logging.WARNING):
        rows = predict_csv(two_target_run, tmp_path, text)
    assert [r["id"] for r in rows] == ["1", "2,CCN\n3,CO\n4", "5"]
    assert "1 row(s) hold a line break inside a quoted field (first: the row on lines 3-5)" in (
        caplog.text
    )


def test_predict_names_the_line_of_a_field_over_the_csv_limit(two_target_run, tmp_path, capsys):
    source = tmp_path / "in.csv"
    source.write_text('smiles,note\nCCO,"' + "a" * 200_000 + "\n")
    code = main(
        [
            "predict",
            "--model",
            str(two_target_run),
            "--csv",
            str(source),
            "--out",
            str(tmp_path / "o.csv"),
        ]
    )
    assert code == 2
    assert "in.csv, line 2: not valid CSV (field larger than" in capsys.readouterr().err


def test_evaluate_leaves_unparsable_rows_out_of_the_metrics(two_target_run):
    from graphattn.train.molecules import evaluate_molecules

    smiles = ["CCO", "not a smiles", "CCCO", "CCCCO"]
    targets = np.array([[0.5, 5.0], [9.0, 90.0], [1.0, 10.0], [1.5, 15.0]])
    everything = evaluate_molecules(two_target_run, smiles, targets)
    parsed = evaluate_molecules(two_target_run, ["CCO", "CCCO", "CCCCO"], targets[[0, 2, 3]])
    assert everything["num_failed"] == 1 and parsed["num_failed"] == 0
    assert everything["metrics"] == parsed["metrics"]
    assert [(f["row"], f["smiles"]) for f in everything["failed_rows"]] == [(1, "not a smiles")]
    assert everything["num_scored"] == parsed["num_scored"] == {"y": 3, "z": 3}


def test_evaluate_names_its_failed_rows_and_fails_when_nothing_is_scored(
    two_target_run, tmp_path, capsys
):
    # failed rows were counted, never named; a file with nothing to score exited 0
    source = tmp_path / "in.csv"
    source.write_text("smiles,y\nCCO,-0.5\nC1CC,1\nCCN,0.2\nCCCl,1,2\nc1ccccc1,-2\n")
    argv = ["evaluate", "--model", str(two_target_run), "--csv", str(source), "--no-progress"]
    argv += ["--target-col", "y"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    reasons = {f["row"]: f["reason"] for f in result["failed_rows"]}
    assert sorted(reasons) == [1, 3] and "extra fields: ['2']" in reasons[3]
    assert result["num_scored"] == {"y": 3, "z": 0}
    assert "2 row(s) could not be predicted and were not scored (e.g. data row 1" in err
    source.write_text("smiles,y\nC1CC,1\nCCO,\n")
    assert main(argv) == 1
    assert "no labelled row was scored: every metric is null" in capsys.readouterr().err
    source.write_text("smiles,y,note\nCCO,-0.5,a\nCCCl,2.0\nCCN,0.2,b\n")  # row 1: short
    assert main(argv) == 0
    (short,) = json.loads(capsys.readouterr().out)["failed_rows"]
    assert short == {"row": 1, "smiles": "CCCl", "reason": "row has 2 fields, the header has 3"}


def test_evaluate_out_to_stdout_prints_the_json_once(two_target_run, tmp_path):
    # it printed the metrics and wrote them to --out, the same stream: not JSON any more
    import subprocess
    import sys

    source = tmp_path / "in.csv"
    source.write_text("smiles,y\nCCO,-0.5\nCCN,0.2\nCCCl,1\n")
    argv = ["evaluate", "--model", str(two_target_run), "--csv", str(source), "--no-progress"]
    argv += ["--target-col", "y"]
    command = [sys.executable, "-m", "graphattn.cli.main", *argv, "--out", "/dev/stdout"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["num_scored"]["y"] == 3


def test_predict_fails_when_no_row_could_be_predicted(two_target_run, tmp_path, capsys):
    # a --smiles-col that exists but holds names wrote an all-empty file and exited 0
    source, out = tmp_path / "in.csv", tmp_path / "out.csv"
    source.write_text("name,smiles\nethanol,CCO\nmethanol,CO\n")
    argv = ["predict", "--model", str(two_target_run), "--csv", str(source), "--out", str(out)]
    assert main([*argv, "--smiles-col", "name", "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "predicted 0 of 2 rows (2 failed)" in err
    assert "no row was predicted (data row 0, counted from 0: " in err
    assert [row["error"] != "" for row in read_rows(out)] == [True, True]  # still written
    assert main([*argv, "--no-progress"]) == 0


def test_predict_writes_the_digits_of_the_runs_predictions_csv(two_target_run, tmp_path):
    written = read_rows(two_target_run / "predictions.csv")  # the test set, at train time
    source = "smiles\n" + "".join(f"{row['smiles']}\n" for row in written)
    rows = predict_csv(two_target_run, tmp_path, source)
    for column in ("pred_y", "pred_z"):  # 7 significant digits in both, not 6 here
        assert [r[column] for r in rows] == [r[column] for r in written]


def test_an_output_file_that_is_an_input_is_refused_before_any_work(
    two_target_run, tmp_path, capsys
):
    run = tmp_path / "run"
    shutil.copytree(two_target_run, run)
    checkpoint = (run / "model.pt").read_bytes()
    source = tmp_path / "labelled.csv"
    source.write_text("smiles,y,z\nCCO,1,10\nCCCO,2,20\n")
    args = ["evaluate", "--model", str(run), "--csv", str(source), "--no-progress"]
    for spelling in (source, tmp_path / "run" / ".." / "labelled.csv"):  # the same file
        assert main([*args, "--out", str(spelling)]) == 2
        assert "is the --csv file; name another file to write" in capsys.readouterr().err
    assert source.read_text() == "smiles,y,z\nCCO,1,10\nCCCO,2,20\n"  # not the metrics JSON
    for command in ("predict", "evaluate"):
        for model in (run, run / "model.pt"):
            args = [command, "--model", str(model), "--csv", str(source), "--no-progress"]
            assert main([*args, "--out", str(run / "model.pt")]) == 2
            assert "is the --model file; name another file to write" in capsys.readouterr().err
    assert (run / "model.pt").read_bytes() == checkpoint
    for command, name in (("evaluate", "metrics.json"), ("predict", "predictions.csv")):
        kept = (run / name).read_bytes()
        for model in (run, run / "model.pt"):  # the run's files, whichever --model names
            args = [command, "--model", str(model), "--csv", str(source), "--no-progress"]
            assert main([*args, "--out", str(run / name)]) == 2
            assert f"is the run's {name}; name another file to write" in capsys.readouterr().err
            assert (run / name).read_bytes() == kept
    out = tmp_path / "in_place.csv"  # predict may still write over its input CSV
    shutil.copy(source, out)
    assert main(["predict", "--model", str(run), "--csv", str(out), "--out", str(out)]) == 0
    assert [r["smiles"] for r in read_rows(out)] == ["CCO", "CCCO"]


class _LabelIndexed:
    """A column indexed by labels, not positions, as a filtered pandas Series is."""

    def __init__(self, values: list[str], labels: list[int]):
        self._by_label = dict(zip(labels, values, strict=True))

    def __len__(self) -> int:
        return len(self._by_label)

    def __iter__(self):
        return iter(self._by_label.values())

    def __getitem__(self, label: int) -> str:
        return self._by_label[label]


def test_predict_and_evaluate_read_any_iterable_in_its_order(two_target_run):
    smiles = ["CCO", "CCCCO", "OCCO"]
    expected, _ = predict_molecules(two_target_run, smiles)
    column = _LabelIndexed(smiles, labels=[2, 0, 1])  # position i is not label i
    np.testing.assert_array_equal(predict_molecules(two_target_run, column)[0], expected)
    np.testing.assert_array_equal(predict_molecules(two_target_run, iter(smiles))[0], expected)
    targets = expected.copy()
    result = evaluate_molecules(two_target_run, (s for s in smiles), targets)
    assert result["num_rows"] == 3 and result["metrics"]["rmse"] == pytest.approx(0.0, abs=1e-5)


def test_evaluate_refuses_targets_of_another_shape(two_target_run):
    from graphattn import GraphInputError

    smiles = ["CO", "CCO", "CCCO"]
    for targets in (np.zeros((3, 1)), np.zeros((2, 2)), np.zeros((3, 3))):
        with pytest.raises(GraphInputError, match=r"targets must have shape \[3, 2\]"):
            evaluate_molecules(two_target_run, smiles, targets)


def test_only_a_regression_ensemble_reports_its_spread():
    from graphattn.train.molecule_inference import reports_spread

    assert reports_spread({"task": "regression", "ensemble_size": 3}) is True
    assert reports_spread({"task": "regression", "ensemble_size": 1}) is False
    assert reports_spread({"task": "regression"}) is False
    assert reports_spread({"task": "classification", "ensemble_size": 3}) is False


def test_predict_reads_smiles_padded_with_spaces_and_counts_failed_rows(
    two_target_run, tmp_path, capsys
):
    rows = predict_csv(two_target_run, tmp_path, "smiles,note\n  CCO ,a\nCCO,b\nC1CC,c\n")
    assert [bool(row["error"]) for row in rows] == [False, False, True]
    assert rows[0]["pred_y"] == rows[1]["pred_y"] != "" and rows[2]["pred_y"] == ""
    assert "predicted 2 of 3 rows (1 failed)" in capsys.readouterr().err


def test_evaluate_lists_the_first_20_bad_label_cells_and_counts_them_all(two_target_run, tmp_path):
    source, out = tmp_path / "in.csv", tmp_path / "out.json"
    source.write_text("smiles,y,z\n" + "".join(f"{'C' * (n % 5 + 1)}O,x{n},1\n" for n in range(25)))
    argv = ["evaluate", "--model", str(two_target_run), "--csv", str(source), "--out", str(out)]
    assert main([*argv, "--no-progress"]) == 0
    text = out.read_text()
    assert text.endswith("}\n") and not text.endswith("\n\n")  # one line end
    result = json.loads(text)
    assert result["num_bad_labels"] == 25
    assert [bad["value"] for bad in result["bad_labels"]] == [f"x{n}" for n in range(20)]


def test_predict_over_its_own_input_keeps_it_whole_when_the_write_fails(
    two_target_run, tmp_path, monkeypatch
):
    # "w" emptied the input at once: a full disk left it cut in the middle of a row
    source = tmp_path / "in.csv"
    text = "smiles,id\n" + "".join(f"CCO,{n}\n" for n in range(50))
    source.write_text(text)
    source.chmod(0o640)
    argv = ["predict", "--model", str(two_target_run), "--csv", str(source), "--out"]

    real_writer = csv.writer

    def failing_writer(handle, *args, **kwargs):
        writer = real_writer(handle, *args, **kwargs)

        class Failing:
            def writerow(self, row):
                if row[-1] == "" and row[1] == "10":
                    raise OSError(28, "No space left on device")
                return writer.writerow(row)

        return Failing()

    monkeypatch.setattr(csv, "writer", failing_writer)
    assert main([*argv, str(source), "--no-progress"]) == 2
    assert source.read_text() == text
    assert [p.name for p in tmp_path.iterdir()] == ["in.csv"]  # no temporary file left
    # the same file through a folder that does not exist: still protected, no folder made
    assert main([*argv, str(tmp_path / "nosuch" / ".." / "in.csv"), "--no-progress"]) == 2
    assert source.read_text() == text and [p.name for p in tmp_path.iterdir()] == ["in.csv"]
    monkeypatch.setattr(csv, "writer", real_writer)
    assert main([*argv, str(source), "--no-progress"]) == 0
    assert len(read_rows(source)) == 50 and "pred_y" in read_rows(source)[0]
    assert source.stat().st_mode & 0o777 == 0o640  # the file's mode is kept
    # a link is followed, not replaced by a file
    link = tmp_path / "link.csv"
    link.symlink_to(source)
    assert main([*argv, str(link), "--no-progress"]) == 0
    assert link.is_symlink() and "pred_y_2" in read_rows(source)[0]
    # another file is written in place, as before: a hard link to it shows the output
    out, twin = tmp_path / "out.csv", tmp_path / "twin.csv"
    out.write_text("old\n")
    os.link(out, twin)
    assert main([*argv[:-1], "--out", str(out), "--no-progress"]) == 0
    assert twin.read_text() == out.read_text() != "old\n"


def test_predict_to_dev_stdout_writes_only_the_csv_there(two_target_run, tmp_path, capfd):
    source = tmp_path / "in.csv"
    source.write_text("smiles\nCCO\nCCN\n")
    argv = ["predict", "--model", str(two_target_run), "--csv", str(source)]
    assert main([*argv, "--out", "/dev/stdout", "--no-progress"]) == 0
    out, err = capfd.readouterr()
    assert out.splitlines()[0] == "smiles,pred_y,pred_z,error" and len(out.splitlines()) == 3
    assert "predicted 2 of 2 rows" in err  # the summary is not a CSV line


def test_a_checkpoint_damaged_inside_a_tensor_or_missing_parts_is_refused_by_name(
    two_target_run, tmp_path
):
    import shutil
    import struct
    import zipfile

    import torch

    from graphattn.errors import GraphInputError

    # bytes flipped inside the largest weight record: it loaded and predicted other numbers
    damaged = tmp_path / "damaged.pt"
    shutil.copy(two_target_run / "model.pt", damaged)
    info = max(zipfile.ZipFile(damaged).infolist(), key=lambda i: i.file_size)
    data = bytearray(damaged.read_bytes())
    name_len, extra_len = struct.unpack(
        "<HH", data[info.header_offset + 26 : info.header_offset + 30]
    )
    start = info.header_offset + 30 + name_len + extra_len
    for k in range(start + 8, start + 48):
        data[k] ^= 0xFF
    damaged.write_bytes(bytes(data))
    with pytest.raises(
        GraphInputError, match=rf"damaged.pt: damaged checkpoint, record {info.filename}"
    ):
        predict_molecules(damaged, ["CCO"])

    # a zip that zipfile cannot check (Deflate64): one line, not a NotImplementedError
    odd = tmp_path / "deflate64.pt"
    with zipfile.ZipFile(odd, "w") as archive:
        archive.writestr("data.pkl", b"x" * 100)
    data = bytearray(odd.read_bytes())
    central = data.index(b"PK\x01\x02")
    data[central + 10 : central + 12] = struct.pack("<H", 9)
    odd.write_bytes(bytes(data))
    with pytest.raises(
        GraphInputError, match=r"deflate64.pt: not a readable torch.save archive \(NotImpl"
    ):
        predict_molecules(odd, ["CCO"])

    checkpoint = torch.load(two_target_run / "model.pt", weights_only=True)
    no_scaler = {k: v for k, v in checkpoint.items() if k != "scaler"}
    torch.save(no_scaler, tmp_path / "no_scaler.pt")
    with pytest.raises(
        GraphInputError, match=r"no_scaler.pt: a molecule checkpoint without \['scaler'\]"
    ):
        predict_molecules(tmp_path / "no_scaler.pt", ["CCO"])
    wider = {**checkpoint, "model_config": {**checkpoint["model_config"], "hidden": 32}}
    torch.save(wider, tmp_path / "wider.pt")
    with pytest.raises(GraphInputError, match=r"wider.pt: the weights do not fit .* size mismatch"):
        predict_molecules(tmp_path / "wider.pt", ["CCO"])
