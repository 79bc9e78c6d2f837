"""The examples run as documented (the ESOL one is covered by test_train_molecules)."""

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
