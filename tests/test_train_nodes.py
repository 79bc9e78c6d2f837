"""End-to-end node classification: karate (embedded) and facebook-pages (real data)."""

from __future__ import annotations

import csv
import json
import math
from contextlib import nullcontext

import networkx as nx
import pytest
import torch
from torch_geometric.data import Data

from graphattn.cli.main import main
from graphattn.datasets.social import load_node_dataset
from graphattn.errors import GraphInputError
from graphattn.featurize.graph import from_networkx
from graphattn.splits.nodes import node_split_masks
from graphattn.train.nodes import NodeTrainConfig, train_node_model


def test_karate_cli_run_beats_the_majority_class_and_writes_the_run_folder(tmp_path):
    out = tmp_path / "karate"
    assert main(["train", "--dataset", "karate", "--out", str(out), "--no-progress"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["task"] == "node-classification"
    assert metrics["device"] == "cpu"
    assert metrics["num_labelled"] == {"train": 2, "val": 0, "test": 32}
    assert metrics["split"] == "fixed_train_nodes"  # the two leaders, not a random split
    assert metrics["num_edges"] == 2 * nx.karate_club_graph().number_of_edges()  # both ways
    assert metrics["best_epoch"] == metrics["epochs_run"] == 100  # no validation: all kept
    majority = 16 / 32  # the other 32 members split 16 / 16
    assert metrics["test"]["accuracy"] > majority + 0.25
    assert {"accuracy", "macro_f1"} <= set(metrics["test"])
    for name in ("model.pt", "predictions.csv", "confusion_matrix.png", "graph.png"):
        assert (out / name).is_file(), name
    with open(out / "predictions.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 34
    probabilities = [r[k] for r in rows for k in r if k.startswith("prob_")]
    assert max(len(p) for p in probabilities) <= len("0.12345")  # no float32 digits
    assert [r["split"] for r in rows if r["node"] in ("0", "33")] == ["train", "train"]
    assert (
        sum(r["label"] == r["predicted"] for r in rows if r["split"] == "test")
        == (metrics["test"]["correct"])
    )


def test_threads_flag_sets_the_runs_thread_count_and_rejects_zero(tmp_path, capsys):
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)  # so that the flag has something to change on one core too
        args = ["train", "--dataset", "karate", "--threads", "1", "--no-progress"]
        assert main([*args, "--out", str(tmp_path / "karate")]) == 0
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    with pytest.raises(SystemExit):
        main(["predict", "--model", "m", "--csv", "c", "--out", "o", "--threads", "0"])
    assert "--threads: must be at least 1, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["train", "--threads", "two"])
    assert "--threads: expected a whole number, got 'two'" in capsys.readouterr().err


def test_training_from_edge_and_label_files_with_string_ids(tmp_path):
    import networkx as nx

    graph = nx.karate_club_graph()
    edges = tmp_path / "edges.txt"
    edges.write_text("".join(f"person{u} person{v}\n" for u, v in graph.edges()))
    labels = tmp_path / "labels.csv"
    with open(labels, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "club"])
        for node, club in graph.nodes(data="club"):
            if node % 3:  # a partial label file: a third of the people are unlabelled
                writer.writerow([f"person{node}", club])
    out = tmp_path / "run"
    code = main(
        [
            "train",
            "--edges",
            str(edges),
            "--labels",
            str(labels),
            "--epochs",
            "30",
            "--split-fractions",
            "0.5",
            "0.25",
            "0.25",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["num_nodes"] == 34 and sum(metrics["num_labelled"].values()) == 22
    with open(out / "predictions.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert {r["node_id"] for r in rows} == {f"person{n}" for n in range(34)}
    assert sum(r["split"] == "unlabelled" for r in rows) == 12
    assert {r["label"] for r in rows if r["split"] == "unlabelled"} == {""}
    assert {r["label"] for r in rows if r["split"] != "unlabelled"} == {"Mr. Hi", "Officer"}


def test_facebook_pages_short_run_learns(data_dir):
    torch.set_num_threads(1)
    data = load_node_dataset("facebook-pages", data_dir=data_dir)
    train, val, test = node_split_masks(data.y, seed=0)
    assert not (train & val).any() and not (train & test).any() and not (val & test).any()
    masks = {"train": train, "val": val, "test": test}
    config = NodeTrainConfig(epochs=15, hidden=32, layers=1, heads=2, label_inputs=False)
    metrics = train_node_model(data, masks, config, progress=False)
    majority = torch.bincount(data.y[val]).max().item() / int(val.sum())
    assert metrics["val"]["accuracy"] > majority + 0.2


def test_node_training_gives_the_caller_its_random_generators_back():
    from tests.conftest import draws_after_seeding

    data = from_networkx(nx.karate_club_graph(), label_attr="club")
    masks = node_split_masks(data.y, (0.5, 0.25, 0.25), seed=0)

    def train() -> None:
        train_node_model(data, masks, NodeTrainConfig(epochs=2), progress=False)

    assert draws_after_seeding(7, train) == draws_after_seeding(7)


def test_training_leaves_cudas_queued_seed_to_the_caller(monkeypatch):
    # torch.manual_seed also seeds CUDA, queued until CUDA starts: the run's seed must not
    # be what a caller's first CUDA draws follow
    seeds = []
    seed_all = torch.cuda.manual_seed_all
    monkeypatch.setattr(torch.cuda, "manual_seed_all", lambda s: seeds.append(s) or seed_all(s))
    data = from_networkx(nx.karate_club_graph(), label_attr="club")
    masks = node_split_masks(data.y, (0.5, 0.25, 0.25), seed=0)
    torch.manual_seed(7)
    train_node_model(data, masks, NodeTrainConfig(epochs=1, seed=123), progress=False)
    assert 123 in seeds and seeds[-1] == 7


def test_a_networkx_graph_without_node_features_trains_on_structural_ones(tmp_path):
    import networkx as nx

    from graphattn.featurize import from_networkx
    from graphattn.featurize.graph import structural_features

    data = from_networkx(nx.karate_club_graph(), label_attr="club")
    assert getattr(data, "x", None) is None
    masks = node_split_masks(data.y, (0.5, 0.25, 0.25), seed=0)
    metrics = train_node_model(
        data, masks, NodeTrainConfig(epochs=3), run_dir=tmp_path, progress=False
    )
    expected = structural_features(data.edge_index, data.num_nodes).size(1)
    assert metrics["model"].config.in_channels == expected
    with open(tmp_path / "predictions.csv") as handle:
        assert len(list(csv.DictReader(handle))) == 34


def test_node_ids_of_any_sequence_type_and_too_few_label_names(tmp_path):
    import numpy as np

    from graphattn import GraphInputError

    data = from_networkx(nx.karate_club_graph(), label_attr="club")
    masks = node_split_masks(data.y, (0.5, 0.25, 0.25), seed=0)
    config = NodeTrainConfig(epochs=2)
    for ids in (torch.arange(100, 134), np.arange(100, 134)):  # failed after training
        data.node_ids = ids
        train_node_model(data, masks, config, run_dir=tmp_path / "run", progress=False)
        with open(tmp_path / "run" / "predictions.csv") as handle:
            rows = list(csv.DictReader(handle))
        assert [row["node_id"] for row in rows] == [str(n) for n in range(100, 134)]
    assert data.node_ids is ids  # the caller's graph is left as it was
    unlabelled = data.clone()
    unlabelled.y = unlabelled.y.float()
    unlabelled.y[5] = float("nan")  # a float label NaN: unlabelled, as before
    kept = [mask & (torch.arange(34) != 5) for mask in masks]
    train_node_model(unlabelled, tuple(kept), config, progress=False)
    unlabelled.y[5] = 2.7  # float labels must be whole numbers (the cast truncated it)
    with pytest.raises(GraphInputError, match=r"y\[5\] = 2.7 is not a whole class number"):
        train_node_model(unlabelled, tuple(kept), config, progress=False)
    bad = [
        ("label_names", ["Mr. Hi"], r"label_names has 1 name\(s\), but y holds class 1"),
        ("node_ids", list(range(33)), r"node_ids has 33 id\(s\) for the graph's 34 nodes"),
    ]
    for name, value, message in bad:
        wrong = data.clone()
        setattr(wrong, name, value)
        (tmp_path / "old").mkdir(exist_ok=True)
        (tmp_path / "old" / "metrics.json").write_text("{}")  # an earlier run: kept
        with pytest.raises(GraphInputError, match=message):
            train_node_model(wrong, masks, config, run_dir=tmp_path / "old", progress=False)
        assert (tmp_path / "old" / "metrics.json").read_text() == "{}"


def test_nan_features_are_bad_input_and_a_huge_learning_rate_is_divergence():
    from graphattn import GraphInputError, TrainingDiverged

    data = from_networkx(nx.karate_club_graph(), label_attr="club")
    data.x = torch.randn(34, 4)
    masks = node_split_masks(data.y, (0.5, 0.25, 0.25), seed=0)
    with pytest.raises(TrainingDiverged, match=r"diverged in epoch \d+ \(.*lr = 1e\+08"):
        train_node_model(data, masks, NodeTrainConfig(epochs=5, lr=1e8), progress=False)
    data.x[3, 1] = math.nan  # the input's fault, whatever the learning rate
    named = r"data.x has non-finite values: data.x\[3, 1\]"
    with pytest.raises(GraphInputError, match=named) as caught:
        train_node_model(data, masks, NodeTrainConfig(epochs=5, lr=1e8), progress=False)
    assert not isinstance(caught.value, TrainingDiverged)


def test_labels_of_a_single_class_are_refused_by_name():
    import networkx as nx
    import pytest

    from graphattn import GraphInputError
    from graphattn.featurize import from_networkx

    G = nx.path_graph(6)
    nx.set_node_attributes(G, "only", "kind")
    data = from_networkx(G, label_attr="kind")
    masks = node_split_masks(data.y, (0.5, 0.25, 0.25), seed=0)
    with pytest.raises(GraphInputError, match=r"at least 2 classes .* found 1: \['only'\]"):
        train_node_model(data, masks, NodeTrainConfig(epochs=1), progress=False)


def test_networkx_missing_values_unlabel_nodes_and_refuse_nan_features():
    import math

    import networkx as nx
    import pytest

    from graphattn import GraphInputError
    from graphattn.featurize import from_networkx

    G = nx.path_graph(5)
    for node, label in enumerate(["a", math.nan, "b", None, float("nan")]):
        G.nodes[node]["label"] = label
        G.nodes[node]["h"] = float(node)
    data = from_networkx(G, label_attr="label")
    assert data.y.tolist() == [0, -1, 1, -1, -1]
    assert data.label_names == ["a", "b"]
    for bad in (None, math.nan, math.inf):
        G.nodes[3]["h"] = bad
        with pytest.raises(GraphInputError, match=r"node 3: attribute 'h' = .* not a finite"):
            from_networkx(G, node_attrs=["h"])


def test_masks_of_the_wrong_shape_are_refused_by_name():
    import pytest

    from graphattn import GraphInputError

    data = load_node_dataset("karate")
    train, val, test = node_split_masks(data.y, (0.5, 0.25, 0.25), seed=0)
    with pytest.raises(GraphInputError, match=r"masks\['val'\] must be a bool tensor of shape"):
        train_node_model(data, {"train": train, "val": val[:-1], "test": test}, progress=False)
    with pytest.raises(GraphInputError, match="masks must have the keys"):
        train_node_model(data, {"train": train, "test": test}, progress=False)
    nothing = torch.zeros_like(train)
    with pytest.raises(GraphInputError, match=r"masks\['train'\] selects no node"):
        train_node_model(data, {"train": nothing, "val": val, "test": test}, progress=False)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"epochs": 0}, "epochs must be at least 1, got 0"),
        ({"lr": -0.5}, "lr must be a finite number, 0 or more, got -0.5"),
        (
            {"weight_decay": float("inf")},
            "weight_decay must be a finite number, 0 or more, got inf",
        ),
        ({"patience": -2}, "patience must be at least 1 epoch, got -2"),
        ({"seed": -3}, r"seed must be a whole number from 0 to 2\*\*64 - 1, got -3"),
        ({"label_mask_rate": 0.0}, "label_mask_rate must be above 0 and at most 1, got 0.0"),
        ({"hidden": 0}, r"hidden must be a positive multiple of heads \(4\), got 0"),
        ({"input_dropout": -0.1}, "input_dropout must be at least 0 and below 1, got -0.1"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_settings_out_of_range_are_refused_by_name(tmp_path, changes, message):
    from graphattn import GraphInputError

    data = load_node_dataset("karate")
    masks = node_split_masks(data.y, (0.5, 0.25, 0.25), seed=0)
    config = NodeTrainConfig(**{"epochs": 2, **changes})
    with pytest.raises(GraphInputError, match=message):
        train_node_model(data, masks, config, run_dir=tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / "model.pt").exists()


def test_a_small_label_mask_rate_still_scores_a_node_every_epoch(tmp_path):
    # karate's 17 training nodes at rate 0.02: most epochs would hide no label, and the
    # loss over no node is NaN
    data = load_node_dataset("karate")
    masks = node_split_masks(data.y, (0.5, 0.25, 0.25), seed=0)
    config = NodeTrainConfig(epochs=20, label_inputs=True, label_mask_rate=0.02)
    train_node_model(data, masks, config, run_dir=tmp_path, progress=False)
    history = json.loads((tmp_path / "history.json").read_text())["history"]
    losses = [record["train_loss"] for record in history]
    assert len(losses) == 20 and all(loss is not None and loss > 0 for loss in losses)


def test_a_run_replaces_every_file_an_earlier_run_left_in_its_folder(tmp_path):
    # karate's default run has no validation nodes, so it draws no learning curve: the
    # curve of an earlier run with validation must not stay behind as if it were its own
    data = load_node_dataset("karate")
    masks = node_split_masks(data.y, (0.5, 0.25, 0.25), seed=0)
    train_node_model(data, masks, NodeTrainConfig(epochs=1), run_dir=tmp_path, progress=False)
    assert (tmp_path / "learning_curve.png").exists()  # one epoch with validation draws it
    (tmp_path / "split.json").write_text("{}")  # as a molecule run leaves it
    (tmp_path / "notes.txt").write_text("mine")
    args = ["train", "--dataset", "karate", "--epochs", "2", "--no-progress"]
    assert main([*args, "--out", str(tmp_path)]) == 0
    assert not (tmp_path / "learning_curve.png").exists()
    assert not (tmp_path / "split.json").exists()
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert json.loads((tmp_path / "metrics.json").read_text())["num_labelled"]["val"] == 0


def test_an_empty_graph_is_refused_by_name():
    import networkx as nx
    import pytest
    from torch_geometric.data import Data

    from graphattn import GraphInputError
    from graphattn.featurize import from_networkx

    with pytest.raises(GraphInputError, match="the networkx graph has no nodes"):
        from_networkx(nx.Graph())
    empty = Data(edge_index=torch.empty(2, 0, dtype=torch.long), y=torch.empty(0), num_nodes=0)
    masks = {part: torch.zeros(0, dtype=torch.bool) for part in ("train", "val", "test")}
    with pytest.raises(GraphInputError, match="the graph has no nodes"):
        train_node_model(empty, masks, progress=False)


def test_the_cli_offers_exactly_the_delimiters_node_training_understands():
    # the CLI lists the words without importing the trainer (a fast --help); keep them equal
    from graphattn.cli.main import DELIMITERS
    from graphattn.train.nodes import CLI_DELIMITERS

    assert sorted(DELIMITERS) == sorted(CLI_DELIMITERS)


def test_masks_must_be_disjoint_and_select_labelled_nodes(tmp_path):
    from graphattn import GraphInputError

    data = load_node_dataset("karate")
    data.y[[5, 6, 7]] = -1  # three unlabelled nodes
    train, val, test = node_split_masks(data.y, (0.5, 0.25, 0.25), seed=0)
    with_unlabelled = val.clone()
    with_unlabelled[[5, 6, 7]] = True
    config = NodeTrainConfig(epochs=2)
    with pytest.raises(GraphInputError, match=r"masks\['val'\] selects 3 unlabelled node\(s\)"):
        train_node_model(data, (train, with_unlabelled, test), config, progress=False)
    overlap = int((train).sum())
    with pytest.raises(
        GraphInputError, match=rf"masks\['train'\] and masks\['test'\] share {overlap} node"
    ):
        train_node_model(data, (train, val, test | train), config, progress=False)
    for first, second, masks in [
        ("train", "val", (train, val | train, test)),
        ("val", "test", (train, val, test | val)),
    ]:
        with pytest.raises(GraphInputError, match=rf"masks\['{first}'\] and masks\['{second}'\]"):
            train_node_model(data, masks, config, progress=False)


def test_an_empty_test_part_warns_and_writes_a_run_without_test_figures(tmp_path, caplog):
    data = load_node_dataset("karate")
    train, val, test = node_split_masks(data.y, (0.5, 0.25, 0.25), seed=0)
    with caplog.at_level("WARNING", logger="graphattn.train.nodes"):
        metrics = train_node_model(
            data, (train, val | test, torch.zeros_like(test)), NodeTrainConfig(epochs=2),
            run_dir=tmp_path, progress=False,
        )  # fmt: skip
    assert "the test part (masks['test']) selects no node" in caplog.text
    assert math.isnan(metrics["test"]["accuracy"])  # null in metrics.json
    assert (tmp_path / "graph.png").exists() and (tmp_path / "predictions.csv").exists()
    assert not (tmp_path / "confusion_matrix.png").exists()


# ----------------------------------------------------------------------------- label inputs


def test_train_inputs_hide_exactly_the_scored_labels():
    from graphattn.train.nodes import _train_inputs

    generator = torch.Generator().manual_seed(0)
    y, train = torch.arange(20) % 3, torch.arange(20) < 12
    for _ in range(10):
        known, scored = _train_inputs(y, train, 0.5, generator)
        assert scored.any() and not (scored & ~train).any()
        assert (known[scored] == -1).all() and (known[~train] == -1).all()
        assert torch.equal(known[train & ~scored], y[train & ~scored])


def spied_karate_run(monkeypatch, tmp_path, fractions=(0.5, 0.25, 0.25), **settings):
    """Train on karate (default 0.5/0.25/0.25) recording each forward's mode, known labels and
    predictions, and the number of rows of each training loss."""
    import torch.nn.functional as F

    from graphattn.models.node import NodeClassifier

    calls, loss_rows = [], []
    forward, cross_entropy = NodeClassifier.forward, F.cross_entropy

    def spy(self, x, edge_index, known_labels=None, *args, **kwargs):
        out = forward(self, x, edge_index, known_labels, *args, **kwargs)
        known = None if known_labels is None else known_labels.clone()
        calls.append((self.training, known, out.argmax(-1)))
        return out

    def loss_spy(logits, target, *args, **kwargs):
        loss_rows.append(logits.size(0))
        return cross_entropy(logits, target, *args, **kwargs)

    monkeypatch.setattr(NodeClassifier, "forward", spy)
    monkeypatch.setattr(F, "cross_entropy", loss_spy)
    data = load_node_dataset("karate")
    masks = node_split_masks(data.y, fractions, seed=0)
    config = NodeTrainConfig(**{"epochs": 6, "patience": 6, "label_inputs": True, **settings})
    metrics = train_node_model(data, masks, config, run_dir=tmp_path, progress=False)
    history = json.loads((tmp_path / "history.json").read_text())["history"]
    return data, masks, calls, loss_rows, metrics, history


def test_label_inputs_show_only_training_labels_and_score_only_hidden_ones(monkeypatch, tmp_path):
    data, (train, val, test), calls, loss_rows, _, _ = spied_karate_run(monkeypatch, tmp_path)
    training = [known for is_training, known, _ in calls if is_training]
    assert len(training) == len(loss_rows) == 6
    for known, rows in zip(training, loss_rows, strict=True):
        assert (known[val | test] == -1).all()
        assert rows == int((train & (known == -1)).sum())  # the loss scores the hidden ones
    evaluation = [known for is_training, known, _ in calls if not is_training]
    assert len(evaluation) == 6 + 1 + 2 and all(k is not None for k in evaluation)
    for known in evaluation[:7]:  # scoring val and test: every training label, no other
        assert (known[val | test] == -1).all() and torch.equal(known[train], data.y[train])
    # then the training nodes, in round(1 / label_mask_rate) = 2 folds, each pass hiding
    # one fold's labels: every training node is scored once without its own label
    hidden = [train & (known == -1) for known in evaluation[7:]]
    assert all(h.any() for h in hidden) and not (hidden[0] & hidden[1]).any()
    assert torch.equal(hidden[0] | hidden[1], train)
    for known in evaluation[7:]:
        shown = known != -1
        assert torch.equal(known[shown], data.y[shown]) and not (shown & (val | test)).any()


def karate_label_model():
    """Karate, its seed-0 training mask, an untrained label-input model (eval mode) and the
    known labels it reads: those of the training nodes, -1 elsewhere."""
    from graphattn.models.node import NodeClassifier, NodeModelConfig

    data = load_node_dataset("karate")
    train, _, _ = node_split_masks(data.y, (0.5, 0.25, 0.25), seed=0)
    torch.manual_seed(0)
    config = NodeModelConfig(data.x.size(1), 2, hidden=8, heads=2, label_inputs=True)
    model = NodeClassifier(config).eval()
    known = torch.where(train, data.y, torch.full_like(data.y, -1))
    return data, train, model, known


def test_training_nodes_are_scored_without_their_own_label():
    # the train metrics and predictions.csv's training rows came from a pass that showed
    # each training node its own label (0.978 against 0.959 hidden, on facebook-pages)
    from graphattn.train.nodes import final_logits

    data, train, model, known = karate_label_model()
    logits = final_logits(model, data.x, data.edge_index, known, train, 0.5)
    with torch.no_grad():
        full = model(data.x, data.edge_index, known)
    assert torch.equal(logits[~train], full[~train])  # the others read every training label
    for node in train.nonzero().flatten()[:4].tolist():
        flipped = known.clone()
        flipped[node] = 1 - flipped[node]  # another own label: its logits do not move
        again = final_logits(model, data.x, data.edge_index, flipped, train, 0.5)
        assert torch.equal(again[node], logits[node])
        with torch.no_grad():  # while a pass that shows it its own label does move
            assert not torch.equal(model(data.x, data.edge_index, flipped)[node], full[node])


def test_training_nodes_are_scored_in_at_most_ten_folds():
    # a small label_mask_rate would mean one pass per 1 / rate nodes: capped at 10 folds
    from graphattn.train.nodes import MAX_SCORING_FOLDS, final_logits

    data, train, model, known = karate_label_model()
    hidden_per_pass = []
    forward = model.forward

    def counting(x, edge_index, inputs):
        hidden_per_pass.append(int((train & (inputs == -1)).sum()))
        return forward(x, edge_index, inputs)

    model.forward = counting
    final_logits(model, data.x, data.edge_index, known, train, 0.01)
    assert MAX_SCORING_FOLDS == 10 and len(hidden_per_pass) == 1 + 10
    assert hidden_per_pass[0] == 0 and sum(hidden_per_pass[1:]) == int(train.sum())


def test_history_and_metrics_score_the_validation_nodes_of_the_kept_epoch(monkeypatch, tmp_path):
    data, (train, val, test), calls, _, metrics, history = spied_karate_run(
        monkeypatch, tmp_path, epochs=40, patience=40
    )
    assert metrics["best_epoch"] < len(history)  # the setting: the kept epoch is not the last
    per_epoch = [pred for is_training, _, pred in calls if not is_training][: len(history)]
    for record, pred in zip(history, per_epoch, strict=True):
        expected = int((pred[val] == data.y[val]).sum()) / int(val.sum())
        assert record["val_accuracy"] == expected
    best = history[metrics["best_epoch"] - 1]
    assert best["best"] and metrics["val"]["accuracy"] == best["val_accuracy"]
    assert not metrics["model"].training  # predictions come from eval mode (no dropout)
    rows = list(csv.DictReader((tmp_path / "predictions.csv").read_text().splitlines()))
    for row in rows:  # the predicted class is the most probable one, from the same inputs
        probs = [float(row[f"prob_{name}"]) for name in data.label_names]
        assert row["predicted"] == data.label_names[probs.index(max(probs))]


def test_history_holds_the_float64_validation_accuracy_that_metrics_json_reports(
    monkeypatch, tmp_path
):
    # 9 validation nodes and a slow start: history held float32's 0.8888888955116272 for 8/9
    data, (_, val, _), calls, _, metrics, history = spied_karate_run(
        monkeypatch, tmp_path, epochs=20, label_inputs=False, lr=1e-4
    )
    per_epoch = [pred for is_training, _, pred in calls if not is_training][: len(history)]
    scores = [int((pred[val] == data.y[val]).sum()) / 9 for pred in per_epoch]
    assert int(val.sum()) == 9 and len(set(scores) - {0.0, 1.0}) >= 2
    assert [record["val_accuracy"] for record in history] == scores
    written = json.loads((tmp_path / "metrics.json").read_text())["val"]["accuracy"]
    assert written == history[metrics["best_epoch"] - 1]["val_accuracy"]


def test_label_inputs_default_follows_the_share_of_labelled_training_nodes():
    data = load_node_dataset("karate")
    few = node_split_masks(data.y, labels_per_class=1, seed=0)
    many = node_split_masks(data.y, (0.6, 0.2, 0.2), seed=0)
    one_epoch = NodeTrainConfig(epochs=1)
    assert train_node_model(data, few, one_epoch, progress=False)["label_inputs"] is False
    assert train_node_model(data, many, one_epoch, progress=False)["label_inputs"] is True


def test_a_known_label_of_class_zero_is_an_input():
    from graphattn.models.node import NodeClassifier, NodeModelConfig

    torch.manual_seed(0)
    model = NodeClassifier(NodeModelConfig(4, 3, hidden=8, heads=2, label_inputs=True)).eval()
    x, edge_index = torch.randn(3, 4), torch.tensor([[0, 1], [1, 2]])
    unknown = model(x, edge_index, torch.tensor([-1, -1, -1]))
    class_zero = model(x, edge_index, torch.tensor([0, -1, -1]))
    assert not torch.allclose(unknown[0], class_zero[0])


def test_a_named_class_without_nodes_keeps_its_output_and_column(tmp_path, monkeypatch):
    # label_names has 3 classes, but no node carries the last one: the model had 2
    # outputs while predictions.csv's header named 3 probabilities
    graph = nx.karate_club_graph()
    for node in graph:
        graph.nodes[node]["kind"] = "a" if node % 2 else "b"
    data = from_networkx(graph, label_attr="kind")
    data.label_names = ["a", "b", "c"]
    masks = node_split_masks(data.y, (0.5, 0.25, 0.25), seed=0)
    matrices = []
    monkeypatch.setattr(
        "graphattn.train.nodes.plot_confusion_matrix", lambda m, *rest: matrices.append(m)
    )
    metrics = train_node_model(
        data, masks, NodeTrainConfig(epochs=2), run_dir=tmp_path, progress=False
    )
    assert metrics["num_classes"] == 3
    rows = list(csv.reader((tmp_path / "predictions.csv").read_text().splitlines()))
    assert rows[0][-3:] == ["prob_a", "prob_b", "prob_c"]
    assert all(len(row) == len(rows[0]) for row in rows)
    assert [m.shape for m in matrices] == [(3, 3)]  # the confusion matrix has its row too


def test_prediction_probabilities_are_the_softmax_of_the_models_logits(tmp_path):
    data = load_node_dataset("karate")
    masks = node_split_masks(data.y, (0.5, 0.25, 0.25), seed=0)
    config = NodeTrainConfig(epochs=3, label_inputs=False)
    metrics = train_node_model(data, masks, config, run_dir=tmp_path, progress=False)
    with torch.no_grad():
        logits = metrics["model"](data.x.float(), data.edge_index, None)
    expected = torch.softmax(logits, -1)
    rows = list(csv.DictReader((tmp_path / "predictions.csv").read_text().splitlines()))
    written = torch.tensor([[float(row[f"prob_{n}"]) for n in data.label_names] for row in rows])
    assert written.shape == expected.shape == (34, 2)
    assert (written - expected).abs().max() <= 5.1e-6  # rounded to 5 decimals
    assert (expected.max(-1).values < 0.99).all()  # the setting: a scale would show


def test_label_inputs_are_on_from_exactly_30_percent_of_the_labelled_nodes_in_training():
    from graphattn.train.nodes import _use_label_inputs

    def masks(train: int) -> dict[str, torch.Tensor]:
        parts = {part: torch.zeros(10, dtype=torch.bool) for part in ("train", "val", "test")}
        parts["train"][:train], parts["val"][train:] = True, True
        return parts

    assert _use_label_inputs(NodeTrainConfig(), masks(3)) is True  # 3 of 10: at least 30%
    assert _use_label_inputs(NodeTrainConfig(), masks(2)) is False
    assert _use_label_inputs(NodeTrainConfig(label_inputs=False), masks(3)) is False
    assert _use_label_inputs(NodeTrainConfig(label_inputs=True), masks(2)) is True


def test_training_stops_patience_epochs_after_the_best_validation_accuracy():
    data = load_node_dataset("karate")
    masks = node_split_masks(data.y, (0.5, 0.25, 0.25), seed=0)
    config = NodeTrainConfig(epochs=200, patience=3, label_inputs=False)
    metrics = train_node_model(data, masks, config, progress=False)
    assert metrics["epochs_run"] < 200  # the setting: it stopped early
    assert metrics["epochs_run"] == metrics["best_epoch"] + 3


def test_label_names_keep_the_class_order_of_the_data_in_predictions_csv(tmp_path):
    # class 0 is named "zeta", class 1 "alpha": the columns and labels follow the class
    # numbers, never the names' alphabetical order
    graph = nx.karate_club_graph()
    data = from_networkx(graph, label_attr="club")
    data.label_names = ["zeta", "alpha"]
    masks = node_split_masks(data.y, (0.5, 0.25, 0.25), seed=0)
    train_node_model(data, masks, NodeTrainConfig(epochs=2), run_dir=tmp_path, progress=False)
    rows = list(csv.DictReader((tmp_path / "predictions.csv").read_text().splitlines()))
    assert list(rows[0])[-2:] == ["prob_zeta", "prob_alpha"]
    assert [row["label"] for row in rows] == [["zeta", "alpha"][int(c)] for c in data.y]
    for row in rows:
        probs = [float(row["prob_zeta"]), float(row["prob_alpha"])]
        assert row["predicted"] == ["zeta", "alpha"][probs.index(max(probs))]


def test_labels_per_class_on_a_set_with_fixed_training_nodes_replaces_them(tmp_path):
    # karate's default split trains on its two leaders; --labels-per-class asks for another
    out = tmp_path / "run"
    args = ["train", "--dataset", "karate", "--labels-per-class", "3", "--epochs", "2"]
    assert main([*args, "--out", str(out), "--no-progress"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["split"] == "labels_per_class"
    assert metrics["num_labelled"]["train"] == 6


def test_a_torch_device_in_the_node_config_is_written_as_text(tmp_path):
    # it crashed json after training, with the earlier run's files deleted
    data = from_networkx(nx.karate_club_graph(), label_attr="club")
    masks = node_split_masks(data.y, (0.5, 0.25, 0.25), seed=0)
    config = NodeTrainConfig(epochs=2, device=torch.device("cpu"))
    train_node_model(data, masks, config, run_dir=tmp_path / "run", progress=False)
    written = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert written["config"]["device"] == "cpu"


def test_float_labels_with_nan_for_unlabelled_nodes_write_the_run_folder(tmp_path):
    # the run folder was written from data.y, whose NaN could not become a class number:
    # training succeeded, then model.pt and metrics.json were left beside a cut-off
    # predictions.csv
    data = from_networkx(nx.karate_club_graph(), label_attr="club")
    floats = data.y.float()
    floats[[5, 6, 7]] = float("nan")
    data.y = floats
    labelled = floats.isfinite()
    masks = node_split_masks(torch.where(labelled, data.y, -1).long(), (0.5, 0.25, 0.25), seed=0)
    config = NodeTrainConfig(epochs=2, hidden=8, heads=2)
    train_node_model(data, masks, config, run_dir=tmp_path, progress=False)
    with open(tmp_path / "predictions.csv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 34
    assert [r["label"] for r in rows if r["split"] == "unlabelled"] == ["", "", ""]
    assert (tmp_path / "confusion_matrix.png").is_file()


def test_a_model_with_label_inputs_needs_them_and_the_run_returns_them(tmp_path):
    # called as examples/karate_attention.py calls it, such a model predicted silently
    # otherwise than predictions.csv (test accuracy 0.625 against 1.0 in the audit)
    data = from_networkx(nx.karate_club_graph(), label_attr="club")
    data.x = torch.eye(34)
    masks = node_split_masks(data.y, seed=0)
    config = NodeTrainConfig(epochs=5, hidden=16, heads=2)
    metrics = train_node_model(data, masks, config, run_dir=tmp_path, progress=False)
    assert metrics["label_inputs"] is True
    known = metrics["known_labels"]
    assert torch.equal(known, torch.where(masks[0], data.y, -1))
    model = metrics["model"].eval()
    with pytest.raises(GraphInputError, match="reads the known labels .* pass known_labels"):
        model(data.x, data.edge_index)
    with torch.no_grad():
        probs = torch.softmax(model(data.x, data.edge_index, known), -1)
    with open(tmp_path / "predictions.csv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    test = [int(r["node"]) for r in rows if r["split"] == "test"]
    written = torch.tensor(
        [[float(rows[n]["prob_Mr. Hi"]), float(rows[n]["prob_Officer"])] for n in test]
    )
    torch.testing.assert_close(probs[test], written, atol=1e-5, rtol=0)
    plain = dict(config.__dict__, label_inputs=False)
    unlabelled = train_node_model(data, masks, NodeTrainConfig(**plain), progress=False)
    assert unlabelled["known_labels"] is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("isolated_without_x", r"shape \[3\], got \[5\] \(without data.x, .* set data.num_nodes"),
        ("fewer_x_rows", r"shape \[4\], got \[5\] \(the node count is data.x's number of rows"),
        ("column_y", r"one label per node, shape \[5\], got \[5, 1\]$"),  # no guessed count
        ("x_rows_with_num_nodes", r"data.x must be \[num_nodes, F\] = \[5, F\], got \[4, 3\]"),
    ],
)
def test_labels_that_do_not_match_the_node_count_are_named(change, message):
    # each was an IndexError from torch, or an error about the (right) masks or about
    # known_labels the caller never gave
    y = torch.tensor([0, 1, 0, 1, 0])
    data = Data(edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), y=y)
    if change == "fewer_x_rows":
        data.x = torch.randn(4, 3)
    elif change == "column_y":
        data.num_nodes, data.y = 5, y.view(-1, 1)
    elif change == "x_rows_with_num_nodes":
        data.num_nodes, data.x = 5, torch.randn(4, 3)
    train = torch.tensor([True, True, False, False, False])
    masks = (train, torch.zeros(5, dtype=torch.bool), ~train)
    config = NodeTrainConfig(epochs=1, hidden=8, heads=2)
    warned = pytest.warns(UserWarning) if change == "isolated_without_x" else nullcontext()
    with warned, pytest.raises(GraphInputError, match=message):  # PyG warns of the guess
        train_node_model(data, masks, config, progress=False)


def test_the_split_recorded_for_given_masks_is_custom_not_the_unused_config_fields():
    data = from_networkx(nx.karate_club_graph(), label_attr="club")
    masks = node_split_masks(data.y, (0.5, 0.25, 0.25), seed=0)
    config = NodeTrainConfig(epochs=1, labels_per_class=3)  # read by the CLI only
    assert train_node_model(data, masks, config, progress=False)["split"] == "custom"
    named = train_node_model(data, masks, config, progress=False, split_name="random")
    assert named["split"] == "random"


def test_cli_records_the_split_it_made(tmp_path):
    out = tmp_path / "run"
    args = ["train", "--dataset", "karate", "--epochs", "2", "--no-progress", "--out", str(out)]
    assert main([*args, "--labels-per-class", "2"]) == 0
    assert json.loads((out / "metrics.json").read_text())["split"] == "labels_per_class"
    assert main([*args, "--split-fractions", "0.5", "0.25", "0.25"]) == 0
    assert json.loads((out / "metrics.json").read_text())["split"] == "random"


@pytest.mark.parametrize("setting", [{"epochs": 2.0}, {"seed": 1.5}, {"patience": 3.0}])
def test_node_counts_given_as_floats_are_named(setting):
    data = from_networkx(nx.karate_club_graph(), label_attr="club")
    masks = node_split_masks(data.y, (0.5, 0.25, 0.25), seed=0)
    ((name, value),) = setting.items()
    with pytest.raises(GraphInputError, match=rf"{name} must be a whole number .*, got {value}"):
        train_node_model(data, masks, NodeTrainConfig(**setting), progress=False)
