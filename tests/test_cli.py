"""The `graphattn` command line itself: documented options, refused flags, range errors."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import fields
from pathlib import Path

import pytest
import torch

from graphattn.cli.main import MOLECULE_ONLY_FLAGS, build_parser, main
from graphattn.models.molecule import MoleculeModelConfig
from graphattn.train.molecules import MoleculeTrainConfig
from graphattn.train.nodes import NodeTrainConfig


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def option_help(command: str, flag: str) -> str:
    (action,) = [a for a in subcommands()[command]._actions if flag in a.option_strings]
    return action.help


def test_every_option_of_every_command_is_documented():
    undocumented = [
        f"{name} {action.option_strings[0]}"
        for name, parser in subcommands().items()
        for action in parser._actions
        if action.option_strings and not action.help
    ]
    assert undocumented == []
    assert [name for name, parser in subcommands().items() if not parser.description] == []


def default(config_class, name: str):
    (field,) = [f for f in fields(config_class) if f.name == name]
    return field.default


@pytest.mark.parametrize("name", ["epochs", "lr", "patience"])
def test_the_train_help_states_the_library_defaults(name):
    text = option_help("train", f"--{name}")
    assert f"molecules {default(MoleculeTrainConfig, name):g}" in text
    assert f"nodes {default(NodeTrainConfig, name):g}" in text


def test_the_train_help_states_the_architecture_defaults():
    assert f"default: {default(MoleculeTrainConfig, 'batch_size')})" in option_help(
        "train", "--batch-size"
    )
    assert f"warm up to it for {default(MoleculeTrainConfig, 'warmup_epochs')} epochs" in (
        option_help("train", "--lr")
    )
    layers = option_help("train", "--layers")
    assert f"molecules {default(MoleculeModelConfig, 'layers')}" in layers
    assert f"nodes {default(NodeTrainConfig, 'layers')}" in layers
    for name in ("hidden", "heads"):  # one value for both kinds of model
        value = default(MoleculeModelConfig, name)
        assert value == default(NodeTrainConfig, name)
        assert f"default: {value}" in option_help("train", f"--{name}")


def test_the_train_help_states_the_split_task_mode_device_and_ensemble_defaults():
    from graphattn.train.molecules import DATASET_DEFAULTS

    fractions = option_help("train", "--split-fractions")
    for kind, config in (("molecules default", MoleculeTrainConfig), ("nodes", NodeTrainConfig)):
        assert f"{kind} {' '.join(f'{f:g}' for f in default(config, 'fractions'))}" in fractions
    assert f"default: {default(MoleculeTrainConfig, 'split')} " in option_help("train", "--split")
    assert f"default: {default(MoleculeTrainConfig, 'task')})" in option_help("train", "--task")
    (mode,) = {default(MoleculeModelConfig, "mode"), default(NodeTrainConfig, "mode")}
    assert f"(default: {mode})" in option_help("train", "--mode")
    (device,) = {default(MoleculeTrainConfig, "device"), default(NodeTrainConfig, "device")}
    assert option_help("train", "--device").startswith(f"{device} (default)")
    train = {action.dest: action.default for action in subcommands()["train"]._actions}
    assert (train["mode"], train["device"]) == (mode, device)  # what the help states
    for command in ("predict", "evaluate"):
        assert option_help(command, "--device").startswith(f"{device} (default)")
    tuned = sorted(name for name, d in DATASET_DEFAULTS.items() if "ensemble" in d)
    assert {DATASET_DEFAULTS[name]["ensemble"] for name in tuned} == {3}
    ensemble = f"3 for {' and '.join(tuned)}, else {default(MoleculeTrainConfig, 'ensemble')})"
    assert ensemble in option_help("train", "--ensemble")


@pytest.mark.parametrize(
    ("name", "flags", "refit"),
    [
        ("freesolv", [], True),
        ("freesolv", ["--no-refit"], False),
        ("freesolv", ["--init-from", "none"], False),  # measured with the pretrained start
        ("freesolv", ["--layers", "4"], False),  # the start does not fit: from scratch
        ("freesolv", ["--init-from", "none", "--refit"], True),
        ("freesolv", ["--init-from", "xtb-hydration-57k"], True),  # the start named
        ("esol", [], False),
        ("esol", ["--refit"], True),
        ("", ["--refit"], True),
    ],
)
def test_refit_is_tuned_per_data_set_and_set_by_its_flags(name, flags, refit):
    from graphattn.cli.main import _molecule_config
    from graphattn.train.molecules import DATASET_DEFAULTS

    args = build_parser().parse_args(["train", *flags])
    assert _molecule_config(args, name).refit is refit
    tuned = sorted(n for n, d in DATASET_DEFAULTS.items() if d.get("refit"))
    assert tuned == ["freesolv"]
    assert f"on for {' and '.join(tuned)} from its pretrained start, else off)" in (
        option_help("train", "--refit")
    )


@pytest.mark.parametrize("flag", MOLECULE_ONLY_FLAGS)
def test_node_training_refuses_every_molecule_only_flag(tmp_path, capsys, flag):
    option = "--" + flag.replace("_", "-")
    (action,) = [a for a in subcommands()["train"]._actions if option in a.option_strings]
    value = [] if action.nargs == 0 else [action.choices[-1] if action.choices else "2"]
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--dataset", "karate", option, *value, "--out", str(tmp_path / "r")])
    assert exit_info.value.code == 2
    assert f"graphattn train: error: {option} applies to molecule training only" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "r").exists()


def test_node_training_refuses_no_refit_too(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--dataset", "karate", "--no-refit", "--out", str(tmp_path / "r")])
    assert exit_info.value.code == 2
    assert "--refit applies to molecule training only" in capsys.readouterr().err


def test_molecule_training_refuses_labels_per_class(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--dataset", "esol", "--labels-per-class", "3", "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert "--labels-per-class applies to node training only" in capsys.readouterr().err


def test_an_unknown_data_set_is_one_error_line_with_status_2(tmp_path, capsys):
    assert main(["train", "--dataset", "nosuch", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("graphattn train: error: unknown data set 'nosuch'; choose from (")
    assert "'esol'" in err and "'karate'" in err
    # with a flag of one kind of training: still the name, not "applies to node training only"
    argv = ["train", "--dataset", "facebook", "--labels-per-class", "5"]
    assert main([*argv, "--out", str(tmp_path / "run")]) == 2
    assert "unknown data set 'facebook'; choose from" in capsys.readouterr().err


def test_an_out_path_that_is_a_file_is_refused_before_the_data_is_read(tmp_path, capsys):
    taken = tmp_path / "notes.txt"
    taken.write_text("not a run folder")
    args = ["train", "--dataset", "esol", "--data-dir", str(tmp_path / "nowhere")]
    assert main([*args, "--out", str(taken)]) == 2
    err = capsys.readouterr().err
    assert "notes.txt" in err and "not found" not in err  # the data folder was never read


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--dataset", "esol", "--csv", "m.csv"], "--dataset and --csv are alternatives"),
        (["--dataset", "karate", "--csv", "m.csv"], "--dataset and --csv are alternatives"),
        (
            ["--edges", "e.txt", "--dataset", "karate", "--csv", "m.csv"],
            "--edges, --dataset and --csv are alternatives",
        ),
        (["--dataset", "esol", "--target-col", "y"], "--target-col needs --csv"),
        (["--smiles-col", "smi"], "--smiles-col needs --csv"),
        (
            ["--csv", "m.csv", "--target-col", "y", "--data-dir", "d"],
            "--data-dir is for the named data sets; --csv reads the file it names",
        ),
        (["--edges", "e.txt", "--data-dir", "d"], "--edges reads the file it names"),
        (["--data-dir", "d"], "nci-tpsa ships with RDKit and reads no file"),
        (
            ["--dataset", "karate", "--data-dir", "d"],
            "--data-dir is for the data sets read from files (esol, freesolv, facebook-pages)"
            "; karate ships with networkx",
        ),
        (["--edges", "e.txt"], "--edges needs --labels, a file of node labels"),
        (["--csv", "m.csv"], "--csv needs at least one --target-col"),
        (
            ["--edges", "e.txt", "--labels", "l.txt", "--ensemble", "2"],
            "--ensemble applies to molecule training only",
        ),
        (
            ["--csv", "m.csv", "--target-col", "y", "--labels-per-class", "3"],
            "--labels-per-class applies to node training only",
        ),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else None,
)
def test_flags_that_the_data_source_would_ignore_are_refused(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", *flags, "--out", str(tmp_path / "r")])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "flag", ["--epochs", "--batch-size", "--patience", "--hidden", "--heads", "--labels-per-class"]
)
def test_counts_below_one_are_refused_before_any_data_is_read(tmp_path, capsys, flag):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--dataset", "esol", flag, "0", "--out", str(tmp_path / "r")])
    assert exit_info.value.code == 2
    assert f"{flag}: must be at least 1, got 0" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--dataset", "karate", "--lr", "-1"], "lr must be a finite number, 0 or more, got -1.0"),
        (["--dataset", "karate", "--hidden", "30"], "hidden must be a positive multiple of heads"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else None,
)
def test_out_of_range_settings_are_a_cli_error_not_a_traceback(tmp_path, capsys, flags, message):
    assert main(["train", *flags, "--no-progress", "--out", str(tmp_path / "r")]) == 2
    assert f"graphattn train: error: {message}" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_version_names_graphattn_and_its_main_dependencies(capsys):
    from importlib.metadata import version

    import graphattn

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith(f"graphattn {graphattn.__version__} (Python ")
    assert version("graphattn") == graphattn.__version__  # one version, set in __init__
    assert f"torch {version('torch')}" in text and f"rdkit {version('rdkit')}" in text


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--repeats", "0"], "--repeats: must be at least 1, got 0"),
        (["--paired-rounds", "-1"], "--paired-rounds: must be 0 or more, got -1"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else None,
)
def test_bench_counts_out_of_range_are_refused_while_parsing(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit):
        main(["bench", "--quick", *flags, "--out", str(tmp_path / "b")])
    assert message in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_run_benchmarks_refuses_counts_out_of_range(tmp_path):
    from graphattn import GraphInputError
    from graphattn.bench.runner import run_benchmarks

    with pytest.raises(GraphInputError, match="repeats must be at least 1, got -1"):
        run_benchmarks(tmp_path, quick=True, repeats=-1)
    with pytest.raises(GraphInputError, match="paired_rounds must be 0 .skip. or more, got -2"):
        run_benchmarks(tmp_path, quick=True, paired_rounds=-2)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_bench_that_measures_nothing_says_so_and_fails(tmp_path, capsys):
    args = ["bench", "--quick", "--suites", "density", "--device", "cuda", "--no-progress"]
    assert main([*args, "--out", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "(0 measured)" in captured.out
    assert "nothing was measured: CUDA requested but no CUDA device" in captured.err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--lr", "-1"], "lr must be a finite number, 0 or more, got -1.0"),
        (["--hidden", "30"], r"hidden must be a positive multiple of heads \(4\), got 30"),
        (["--ensemble", "0"], "ensemble must be at least 1 model, got 0"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else None,
)
def test_molecule_settings_are_checked_before_the_data_is_read(tmp_path, capsys, flags, message):
    # the data folder does not exist: reading it first would report the missing file
    args = ["train", "--dataset", "esol", "--data-dir", str(tmp_path / "nowhere"), *flags]
    assert main([*args, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and "delaney" not in err


@pytest.mark.parametrize("file_name", ["freesolv", "esol", "nci-tpsa"])
def test_a_csv_named_like_a_data_set_gets_the_generic_settings(tmp_path, monkeypatch, file_name):
    # the named sets' tuned settings (FreeSolv's pretrained start, ensembles of 3) were
    # looked up by the CSV's file name, so a file called "freesolv" fine-tuned xtb-hydration
    import graphattn.train.molecules as molecules

    seen = {}

    def capture(dataset, config, **kwargs):
        seen["config"] = config
        raise SystemExit(0)

    monkeypatch.setattr(molecules, "train_molecule_model", capture)
    csv = tmp_path / file_name
    csv.write_text("smiles,y\nCCO,1.0\nCCN,2.0\nCCC,3.0\n")
    args = ["train", "--csv", str(csv), "--target-col", "y", "--out", str(tmp_path / "r")]
    with pytest.raises(SystemExit):
        main([*args, "--no-descriptors", "--no-progress"])
    generic = MoleculeTrainConfig()
    config = seen["config"]
    assert (config.init_from, config.ensemble, config.epochs, config.refit) == (
        generic.init_from,
        generic.ensemble,
        generic.epochs,
        generic.refit,
    )
    assert config.model == {"mode": "sparse"}


def test_train_prints_a_summary_of_its_metrics_and_the_run_folder(tmp_path, capsys):
    out = tmp_path / "karate"
    assert main(["train", "--dataset", "karate", "--epochs", "2", "--out", str(out),
                 "--no-progress"]) == 0  # fmt: skip
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed[-1] == f"run folder: {out}"
    metrics = json.loads((out / "metrics.json").read_text())
    keys = ("task", "dataset", "test", "epochs_run", "train_seconds")
    assert json.loads("\n".join(printed[:-1])) == {key: metrics[key] for key in keys}


@pytest.fixture
def read_only(tmp_path, monkeypatch) -> Path:
    """A folder that takes no new file, as on a read-only mount (root ignores chmod, so
    the probe's temporary file there is made to fail)."""
    import errno
    import tempfile

    real = tempfile.TemporaryFile
    folder = tmp_path / "ro"
    folder.mkdir()

    def probe(*args, dir=None, **kwargs):
        if dir is not None and Path(dir) == folder:
            raise OSError(errno.EROFS, "Read-only file system")
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "TemporaryFile", probe)
    return folder


def test_an_out_folder_that_cannot_be_written_is_refused_before_the_work(
    tmp_path, capsys, read_only
):
    # a read-only mount or folder failed only after training (or predicting) everything
    run = read_only / "runs" / "k"
    assert main(["train", "--dataset", "karate", "--epochs", "1", "--out", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"run folder {run} cannot be written ({read_only}: Read-only file system)" in err
    assert "Epoch" not in err and not run.exists()
    source = tmp_path / "m.csv"
    source.write_text("smiles\nCCO\n")
    out = read_only / "p.csv"
    code = main(["predict", "--model", str(tmp_path), "--csv", str(source), "--out", str(out)])
    assert code == 2
    assert f"--out {out} cannot be written ({read_only}: Read-only" in capsys.readouterr().err
    assert main(["train", "--dataset", "karate", "--epochs", "1", "--no-progress",
                 "--out", str(tmp_path / "k")]) == 0  # fmt: skip
    # streams, devices and existing writable files are written in place: no probe
    for stream in ("/dev/stdout", "/dev/fd/1", "/dev/null"):
        code = main(["predict", "--model", str(tmp_path / "nothing"), "--csv", str(source),
                     "--out", stream])  # fmt: skip
        assert code == 2 and "no checkpoint at" in capsys.readouterr().err
    kept = read_only / "kept.csv"
    kept.write_text("old")  # a writable file in a folder where no new file can be made
    code = main(["predict", "--model", str(tmp_path / "nothing"), "--csv", str(source),
                 "--out", str(kept)])  # fmt: skip
    assert code == 2 and "no checkpoint at" in capsys.readouterr().err
    # but replacing its own --csv there needs a new file beside it: refused first
    code = main(["predict", "--model", str(tmp_path / "nothing"), "--csv", str(kept),
                 "--out", str(kept)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert (
        f"--out {kept} cannot be written (writing over its own --csv needs a new file in "
        f"{read_only}: Read-only file system)" in err
    )
    assert kept.read_text() == "old"


def test_a_tilde_in_a_path_option_is_the_home_folder(tmp_path, capsys, monkeypatch):
    # bash leaves --out=~/run as it is: a folder named "~" appeared in the working folder
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    args = build_parser().parse_args(["train", "--dataset", "karate", "--out=~/kar"])
    assert args.out == tmp_path / "home" / "kar"
    args = build_parser().parse_args(["predict", "--model=~/m", "--csv=~/p.csv", "--out=~/o.csv"])
    assert (args.model, args.csv, args.out) == tuple(
        tmp_path / "home" / name for name in ("m", "p.csv", "o.csv")
    )
    args = build_parser().parse_args(["train", "--csv=~/m.csv", "--init-from=~/run"])
    assert args.init_from == str(tmp_path / "home" / "run")
    assert build_parser().parse_args(["train", "--init-from", "none"]).init_from == "none"


def test_training_with_stderr_closed_still_writes_its_run(tmp_path, capsys, monkeypatch):
    # `graphattn train ... 2>&-` leaves sys.stderr None: tqdm's progress bar crashed
    import sys

    monkeypatch.setattr("sys.stderr", None)
    assert main(["train", "--dataset", "karate", "--epochs", "2", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "metrics.json").is_file()
    sys.stderr.close()  # main's /dev/null, which the process would keep


def test_a_file_name_that_is_not_utf8_is_a_readable_title(tmp_path):
    # its bytes came through as lone surrogates, which matplotlib refused for graph.png's
    # title (after training) and strict JSON readers refuse in metrics.json
    import os

    from graphattn.datasets.files import file_title

    name = os.fsdecode(b"edges_\xe9.csv")
    assert file_title(tmp_path / name) == "edges_\ufffd.csv"
    assert file_title(Path("kanten é.csv")) == "kanten é.csv"
    edges, labels = tmp_path / name, tmp_path / os.fsdecode(b"labels_\xe9.csv")
    edges.write_text("".join(f"{i},{(i + 1) % 12}\n{i},{(i + 5) % 12}\n" for i in range(12)))
    labels.write_text("".join(f"{i},{'ab'[i % 2]}\n" for i in range(12)))
    out = tmp_path / "run"
    assert main(["train", "--edges", str(edges), "--labels", str(labels), "--epochs", "2",
                 "--no-progress", "--out", str(out)]) == 0  # fmt: skip
    assert (out / "graph.png").is_file()
    metrics = (out / "metrics.json").read_text(encoding="utf-8")  # strict UTF-8
    assert json.loads(metrics)["dataset"] == "edges_\ufffd.csv"


def test_version_says_when_numba_is_installed_but_not_used(capsys, monkeypatch):
    monkeypatch.setenv("NUMBA_DISABLE_JIT", "1")
    import numba

    monkeypatch.setattr(numba.config, "DISABLE_JIT", True)
    with pytest.raises(SystemExit):
        main(["--version"])
    assert "(not used: NUMBA_DISABLE_JIT is set)" in capsys.readouterr().out
    # installed but broken against this NumPy: not "not installed"
    monkeypatch.setitem(sys.modules, "numba", None)
    with pytest.raises(SystemExit):
        main(["--version"])
    out = capsys.readouterr().out
    assert "(not used: Numba does not import: ModuleNotFoundError: import of numba halted" in out
    # whatever the import raises (an AttributeError against another NumPy, say)
    import builtins

    real_import = builtins.__import__

    def failing(name, *args, **kwargs):
        if name == "numba":
            raise AttributeError("module 'numpy' has no attribute 'long'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "numba")
    monkeypatch.setattr(builtins, "__import__", failing)
    with pytest.raises(SystemExit):
        main(["--version"])
    out = capsys.readouterr().out
    assert "(not used: Numba does not import: AttributeError: module 'numpy' has no" in out


def test_an_out_file_that_is_not_writable_is_refused_before_the_work(tmp_path, capsys, monkeypatch):
    source, kept = tmp_path / "m.csv", tmp_path / "kept.csv"
    source.write_text("smiles\nCCO\n")
    kept.write_text("old")
    real = os.access  # root ignores chmod 0o444: what access() says of the file is patched

    def access(path, mode, **kwargs):
        return not (Path(path) == kept and mode == os.W_OK) and real(path, mode, **kwargs)

    monkeypatch.setattr(os, "access", access)
    code = main(["predict", "--model", str(tmp_path / "nothing"), "--csv", str(source),
                 "--out", str(kept)])  # fmt: skip
    assert code == 2
    assert f"--out {kept} cannot be written ({kept}: not writable)" in capsys.readouterr().err


def test_streams_and_devices_are_not_probed_for_a_new_file(tmp_path, capsys, monkeypatch):
    # /dev takes no new file (but from root): probing it refused --out /dev/null
    import tempfile

    probed, real = [], tempfile.TemporaryFile

    def probe(*args, dir=None, **kwargs):
        probed.append(dir)
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(tempfile, "TemporaryFile", probe)
    source = tmp_path / "m.csv"
    source.write_text("smiles\nCCO\n")
    for stream in ("/dev/stdout", "/dev/fd/1", "/dev/null"):
        code = main(["predict", "--model", str(tmp_path / "nothing"), "--csv", str(source),
                     "--out", stream])  # fmt: skip
        assert code == 2 and "no checkpoint at" in capsys.readouterr().err
    assert probed == []


def test_a_molecule_csv_name_that_is_not_utf8_is_a_readable_title(tmp_path):
    source = tmp_path / os.fsdecode(b"mols_\xe9.csv")
    source.write_text("smiles,y\n" + "".join(f"{'C' * n}O,{n}\n" for n in range(1, 13)))
    out = tmp_path / "run"
    code = main(["train", "--csv", str(source), "--target-col", "y", "--epochs", "1",
                 "--hidden", "16", "--layers", "1", "--no-progress",
                 "--out", str(out)])  # fmt: skip
    assert code == 0
    metrics = (out / "metrics.json").read_text(encoding="utf-8")
    assert json.loads(metrics)["dataset"] == "mols_\ufffd.csv"


def test_predict_over_its_own_csv_through_a_link_probes_the_folder_of_the_file(
    tmp_path, capsys, read_only
):
    # the replacement file is made beside the link's target (see _output): a link in a
    # writable folder to a --csv in a read-only one is refused before the work
    kept = read_only / "kept.csv"
    kept.write_text("old")
    link = tmp_path / "link.csv"
    link.symlink_to(kept)
    for csv, out in ((link, link), (kept, link), (link, kept)):
        code = main(["predict", "--model", str(tmp_path / "nothing"), "--csv", str(csv),
                     "--out", str(out)])  # fmt: skip
        err = capsys.readouterr().err
        assert code == 2
        needs = f"writing over its own --csv needs a new file in {read_only}: Read-only file"
        assert f"--out {out} cannot be written ({needs}" in err, (csv, out, err)
    assert kept.read_text() == "old" and link.is_symlink()
