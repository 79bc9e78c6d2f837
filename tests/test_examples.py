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


def test_the_esol_example_says_which_file_is_missing(tmp_path, monkeypatch, offline):
    # offline without the data set: the message of graphattn train, not a traceback
    name = "molecules_solubility.py"
    monkeypatch.setattr("sys.argv", [name, "--data-dir", str(tmp_path / "nowhere")])
    with pytest.raises(SystemExit, match=r"molecules_solubility\.py: .*delaney-processed\.csv"):
        runpy.run_path(str(EXAMPLES / name), run_name="__main__")


def test_the_quickstart_compares_the_sparse_mode_with_the_dense_one(capsys, monkeypatch):
    from graphattn.nn import GraphSelfAttention

    modes = []
    forward = GraphSelfAttention.forward

    def recording(self, *args, mode=None, **kwargs):
        modes.append(mode)
        return forward(self, *args, mode=mode, **kwargs)

    monkeypatch.setattr(GraphSelfAttention, "forward", recording)
    monkeypatch.setattr("sys.argv", ["quickstart_attention.py"])
    runpy.run_path(str(EXAMPLES / "quickstart_attention.py"), run_name="__main__")
    assert modes[:2] == [None, "dense"]  # the layer's own (sparse) mode, then dense
    assert "sparse == dense: True" in capsys.readouterr().out


def test_the_karate_example_trains_the_epochs_asked_and_shows_the_last_layer(capsys, monkeypatch):
    import torch

    import graphattn.featurize
    import graphattn.train

    trained, drawn = [], []
    train, to_networkx = graphattn.train.train_node_model, graphattn.featurize.to_networkx

    def recording_train(data, masks, config, **kwargs):
        trained.append((data, config, train(data, masks, config, **kwargs)))
        return trained[-1][2]

    def recording_graph(data, **kwargs):
        drawn.append(kwargs["attention"])
        return to_networkx(data, **kwargs)

    monkeypatch.setattr(graphattn.train, "train_node_model", recording_train)
    monkeypatch.setattr(graphattn.featurize, "to_networkx", recording_graph)
    monkeypatch.setattr("sys.argv", ["karate_attention.py", "--epochs", "3"])
    runpy.run_path(str(EXAMPLES / "karate_attention.py"), run_name="__main__")
    ((data, config, metrics),) = trained
    assert config.epochs == 3 and metrics["epochs_run"] == 3
    with torch.no_grad():
        _, attentions = metrics["model"].eval()(data.x, data.edge_index, return_attention=True)
    (attention,) = drawn
    assert len(attentions) == config.layers > 1
    assert torch.equal(attention[0], attentions[-1][0])
    assert torch.equal(attention[1], attentions[-1][1])
    assert "most attended tie in the last layer:" in capsys.readouterr().out
