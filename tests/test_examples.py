"""The examples run as documented (the ESOL training is covered by test_train_molecules)."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("name", ["quickstart_attention.py", "karate_attention.py"])
def test_example_runs(name, capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", [name])  # as run from a shell, without pytest's options
    runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    out = capsys.readouterr().out
    assert "sparse == dense: True" in out or "members labelled correctly" in out


def test_the_esol_example_says_which_file_is_missing(tmp_path, monkeypatch):
    # offline without the data set: the message of graphattn train, not a traceback
    monkeypatch.setenv("GRAPHATTN_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("GRAPHATTN_DATA", raising=False)  # CI points it at ../shared
    monkeypatch.setattr("urllib.request.urlopen", _offline)
    name = "molecules_solubility.py"
    monkeypatch.setattr("sys.argv", [name, "--data-dir", str(tmp_path / "nowhere")])
    with pytest.raises(SystemExit, match=r"molecules_solubility\.py: .*delaney-processed\.csv"):
        runpy.run_path(str(EXAMPLES / name), run_name="__main__")


def _offline(*args, **kwargs):
    raise OSError("no network in this test")
