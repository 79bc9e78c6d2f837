"""Reading general graphs: networkx round trips, edge/label/feature files, features."""

from __future__ import annotations

import array
import csv
import logging
import re

import networkx as nx
import numpy as np
import pytest
import torch

from graphattn.cli.main import main
from graphattn.datasets.social import (
    NODE_DATASETS,
    load_node_dataset,
    load_node_graph,
    read_edge_list,
    read_labels,
    read_node_features,
)
from graphattn.errors import GraphInputError
from graphattn.featurize.graph import (
    from_networkx,
    structural_features,
    text_features,
    to_networkx,
)


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def edge_set(edge_index: torch.Tensor, node_ids) -> set[tuple]:
    return {(node_ids[j], node_ids[i]) for j, i in edge_index.t().tolist()}


def undirected(G: nx.Graph) -> set[frozenset]:
    return {frozenset(e) for e in G.edges()}


# ----------------------------------------------------------------------------- networkx


def test_karate_round_trip_keeps_nodes_edges_labels():
    G = nx.karate_club_graph()
    data = from_networkx(G, label_attr="club")
    assert data.num_nodes == 34 and data.edge_index.shape == (2, 156)
    assert data.label_names == ["Mr. Hi", "Officer"]
    assert data.y.tolist() == [int(G.nodes[n]["club"] == "Officer") for n in G.nodes]
    H = to_networkx(data)
    assert not H.is_directed()
    assert list(H.nodes) == list(G.nodes)
    assert undirected(H) == undirected(G)
    assert all(H.nodes[n]["label"] == G.nodes[n]["club"] for n in G.nodes)


def test_string_keys_partial_labels_and_attributes_round_trip():
    G = nx.Graph()
    G.add_node("carol", club="b", age=40.0, pos=[1.0, 2.0])
    G.add_node("alice", club="a", age=30.0, pos=[0.0, 1.0])
    G.add_node("bob", age=25.0, pos=[3.0, 4.0])  # unlabelled
    G.add_node("dave", club="b", age=50.0, pos=[5.0, 6.0])  # isolated
    G.add_edges_from([("alice", "bob"), ("bob", "carol")])
    data = from_networkx(G, node_attrs=["age", "pos"], label_attr="club")
    assert data.node_ids == ["carol", "alice", "bob", "dave"]
    assert data.x.tolist() == [[40, 1, 2], [30, 0, 1], [25, 3, 4], [50, 5, 6]]
    assert data.label_names == ["a", "b"]
    assert data.y.tolist() == [1, 0, -1, 1]
    assert edge_set(data.edge_index, data.node_ids) == {
        ("alice", "bob"),
        ("bob", "alice"),
        ("bob", "carol"),
        ("carol", "bob"),
    }
    assert data.graph_report.num_isolated_nodes == 1
    H = to_networkx(data)
    assert set(H.nodes) == set(G.nodes) and undirected(H) == undirected(G)
    assert "label" not in H.nodes["bob"]
    assert {n: H.nodes[n].get("label") for n in H} == {n: G.nodes[n].get("club") for n in G}


def test_directed_graph_keeps_direction():
    G = nx.DiGraph([("x", "y"), ("y", "z")])
    data = from_networkx(G)
    assert data.edge_index.tolist() == [[0, 1], [1, 2]]
    H = to_networkx(data)
    assert H.is_directed() and set(H.edges) == {("x", "y"), ("y", "z")}


def test_multigraph_self_loops_and_duplicates_are_kept_and_reported(caplog):
    G = nx.MultiGraph([(0, 1), (1, 0), (2, 2), (1, 2)])
    with caplog.at_level(logging.WARNING):
        data = from_networkx(G)
    report = data.graph_report
    assert report.num_self_loops == 1 and report.num_duplicate_edges == 1
    assert data.edge_index.size(1) == 7  # 3 non-loop edges both ways + 1 loop
    assert "self-loop" in caplog.text and "duplicate" in caplog.text


def test_missing_node_attribute_names_the_node():
    G = nx.Graph([("a", "b")])
    G.nodes["a"]["w"] = 1.0
    with pytest.raises(GraphInputError, match="node 'b' has no attribute 'w'"):
        from_networkx(G, node_attrs=["w"])


def test_a_single_attribute_name_given_as_a_string_is_refused():
    # "age" was read letter by letter: "node 0 has no attribute 'a'"
    G = nx.path_graph(3)
    nx.set_node_attributes(G, 1.0, "age")
    with pytest.raises(
        GraphInputError,
        match="node_attrs must be an ordered sequence of names .* got the string 'age'",
    ):
        from_networkx(G, node_attrs="age")
    assert from_networkx(G, node_attrs=["age"]).x.shape == (3, 1)


def test_the_label_attribute_is_never_also_a_feature():
    # random labels given as both reached 1.0 test accuracy: each node read its class
    G = nx.path_graph(4)
    nx.set_node_attributes(G, {n: n % 2 for n in G}, "cls")
    with pytest.raises(GraphInputError, match="label_attr 'cls' is also in node_attrs"):
        from_networkx(G, node_attrs=["cls"], label_attr="cls")


def test_feature_names_in_a_set_are_refused_their_order_would_change(tmp_path):
    # a set's order follows PYTHONHASHSEED: x's columns changed from process to process
    G = nx.path_graph(2)
    nx.set_node_attributes(G, 1.0, "a")
    nx.set_node_attributes(G, 2.0, "b")
    # a bytes' letters were read as names 97, 98
    byte_likes = (b"ab", bytearray(b"ab"), memoryview(b"ab"), array.array("b", b"ab"))
    for names in ({"a", "b"}, *byte_likes, 5):
        with pytest.raises(GraphInputError, match="node_attrs must be an ordered sequence"):
            from_networkx(G, node_attrs=names)
    said = [
        (5, "an int: 5"),
        (np.uint8(5), f"a uint8: {np.uint8(5)!r}"),  # not "an uint8"
        (Ellipsis, "an ellipsis: Ellipsis"),
        (array.array("b", b"ab"), "an array: array('b', [97, 98])"),
        (frozenset({"a"}), "a frozenset: frozenset({'a'})"),
        (bytearray(b"ab"), "a bytearray: bytearray(b'ab')"),
        ("a", "the string 'a'"),
    ]
    for names, text in said:
        with pytest.raises(GraphInputError, match=re.escape(f"got {text}") + "$"):
            from_networkx(G, node_attrs=names)
    assert from_networkx(G, node_attrs=("b", "a")).x.tolist() == [[2.0, 1.0], [2.0, 1.0]]
    edges = write(tmp_path, "e.csv", "a,b\nb,c\n")
    features = write(tmp_path, "f.csv", "id,age,score\na,1,2\nb,3,4\nc,5,6\n")
    for cols in ({"age", "score"}, "age", frozenset({"age"}), b"\x01", 2):
        with pytest.raises(GraphInputError, match="feature_cols must be an ordered sequence"):
            load_node_graph(edges, features=features, feature_cols=cols)
    data = load_node_graph(edges, features=features, feature_cols=["score", "age"])
    assert data.x.tolist() == [[2.0, 1.0], [4.0, 3.0], [6.0, 5.0]]
    # ordered sequences other than lists and tuples keep working
    assert load_node_graph(edges, features=features, feature_cols=range(2, 0, -1)).x.equal(data.x)
    keys = {"b": 0, "a": 1}.keys()
    assert from_networkx(G, node_attrs=keys).x.tolist() == [[2.0, 1.0], [2.0, 1.0]]


def test_attribute_widths_are_checked_one_attribute_at_a_time():
    # [1, 2], 3 and 1, [2, 3] both made three values: column 1 held a at u and b at v
    G = nx.Graph()
    G.add_node("u", a=[1.0, 2.0], b=3.0)
    G.add_node("v", a=1.0, b=[2.0, 3.0])
    with pytest.raises(
        GraphInputError, match="attribute 'a' has different lengths: 2 values at node 'u', 1 at"
    ):
        from_networkx(G, node_attrs=["a", "b"])


def test_labels_held_in_one_value_tensors_are_classes_by_value():
    # tensors hash by identity: every node's tensor(0) was a class of its own
    G = nx.path_graph(4)
    y = torch.tensor([0, 1, 0, 1])
    nx.set_node_attributes(G, {n: y[n] for n in G}, "y")
    data = from_networkx(G, label_attr="y")
    assert data.y.tolist() == [0, 1, 0, 1] and data.label_names == [0, 1]
    nx.set_node_attributes(G, {n: torch.zeros(2) for n in G}, "y")
    with pytest.raises(GraphInputError, match=r"node 0: the label is a tensor of shape \[2\]"):
        from_networkx(G, label_attr="y")
    from graphattn.featurize.graph import encode_labels

    y, names = encode_labels(list(torch.tensor([1, 0, 1, -1])))  # the public function too
    assert y.tolist() == [2, 1, 2, 0] and names == [-1, 0, 1]
    y, names = encode_labels(list(torch.tensor([0.0, float("nan"), 1.0])))
    assert y.tolist() == [0, -1, 1] and names == [0.0, 1.0]


def test_text_features_of_missing_texts_are_zero_rows_and_a_lone_string_is_refused():
    rows = text_features(["", None, float("nan"), np.nan, "cat dog"], 8)
    assert rows[:4].abs().sum().item() == 0.0 and rows[4].abs().sum().item() > 0
    with pytest.raises(GraphInputError, match="got the string 'hello world'"):
        text_features("hello world", 8)  # was 11 one-letter rows


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"num_probes": 0, "exact_budget": 0}, "num_probes must be an integer >= 1, got 0"),
        ({"walk_length": 2.5}, "walk_length must be an integer >= 0, got 2.5"),
        ({"exact_budget": -1}, "exact_budget must be an integer >= 0, got -1"),
        ({"seed": -1}, "seed must be a whole number"),
    ],
)
def test_structural_feature_settings_are_checked(settings, message):
    edge_index = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    with pytest.raises(GraphInputError, match=re.escape(message)):
        structural_features(edge_index, 3, **{"walk_length": 4, **settings})


def test_a_self_loop_counts_once_in_the_degree_column():
    G = nx.Graph([(0, 0), (0, 1)])
    data = from_networkx(G)
    degree = torch.expm1(structural_features(data.edge_index, 2, walk_length=0)[:, 0])
    assert degree.round().tolist() == [2.0, 1.0]  # networkx's degree of node 0 is 3


@pytest.mark.parametrize(
    ("src", "dst", "message"),
    [
        ([0, -1], [1, 0], "edge 1: -1 -> 0 is not an edge between node ids 0..2"),
        ([0, 5], [1, 0], "edge 1: 5 -> 0 is not an edge between node ids 0..2"),
        ([0, 1, 2], [1, 0], "src has 3 ids but dst has 2"),
        ([0.0, 1.7], [1, 0], "src must be a 1-D integer tensor of node ids"),
        ([True, False], [1, 0], "src must be a 1-D integer tensor of node ids"),
    ],
)
def test_edges_from_pairs_names_a_bad_edge(src, dst, message):
    from graphattn.featurize.graph import edges_from_pairs

    with pytest.raises(GraphInputError, match=re.escape(message)):
        edges_from_pairs(torch.tensor(src), torch.tensor(dst), 3)


def test_to_networkx_names_attention_predictions_and_labels_it_cannot_attach():
    G = nx.path_graph(3)
    nx.set_node_attributes(G, {0: "a", 1: "b", 2: "a"}, "cls")
    data = from_networkx(G, label_attr="cls")
    alpha = (data.edge_index, torch.rand(data.edge_index.size(1)))
    for layers in ([alpha], [alpha, alpha], (alpha, alpha, alpha)):  # every layer's pair
        with pytest.raises(GraphInputError, match="attention must be one layer's"):
            to_networkx(data, attention=layers)
    with pytest.raises(GraphInputError, match="must be integer class indices, got torch.float32"):
        to_networkx(data, predictions=torch.tensor([0.0, 1.0, 0.0]))
    with pytest.raises(GraphInputError, match=r"classes 0..2, but data.label_names has classes"):
        to_networkx(data, predictions=torch.tensor([0, 1, 2]))
    assert to_networkx(data, predictions=torch.tensor([1, 0, 1])).nodes[0]["prediction"] == "b"
    scores = torch.tensor([-1.0, 2.0, -3.0])
    marked = to_networkx(data, predictions=scores > 0)  # bools are classes 0 and 1
    assert [marked.nodes[n]["prediction"] for n in range(3)] == ["a", "b", "a"]
    data.y = torch.zeros(3, 2)
    with pytest.raises(GraphInputError, match=r"one class per node \(3\), got shape \[3, 2\]"):
        to_networkx(data)


def test_to_networkx_names_predictions_of_the_wrong_size_and_reads_float_labels():
    data = from_networkx(nx.path_graph(3))
    for wrong in (torch.zeros(2, dtype=torch.long), torch.tensor(1), torch.zeros(3, 2, 2)):
        with pytest.raises(
            GraphInputError, match=r"predictions must be \[3\] classes or \[3, C\] scores"
        ):
            to_networkx(data, predictions=wrong)  # was a zip() error
    data.y = torch.tensor([1.0, float("nan"), 0.0])  # NaN: unlabelled
    data.label_names = ["no", "yes"]
    G = to_networkx(data)  # a float label was a list index: TypeError
    assert [G.nodes[n].get("label") for n in G] == ["yes", None, "no"]
    del data.label_names
    G = to_networkx(data)  # class numbers stay ints (1.0 == 1, so the type is checked)
    labels = [G.nodes[n].get("label") for n in G]
    assert labels == [1, None, 0] and [type(v) for v in labels] == [int, type(None), int]


def test_to_networkx_predictions_and_attention():
    data = from_networkx(nx.path_graph(3), label_attr=None)
    data.label_names = ["no", "yes"]
    attention_index = torch.tensor([[0, 1, 1, 2, 0], [1, 0, 2, 1, 0]])
    alpha = torch.tensor([[0.2, 0.4], [0.6, 0.8], [1.0, 1.0], [0.5, 0.5], [0.3, 0.1]])
    H = to_networkx(data, predictions=torch.tensor([1, 0, 1]), attention=(attention_index, alpha))
    assert [H.nodes[n]["prediction"] for n in H] == ["yes", "no", "yes"]
    assert H.edges[0, 1]["attention"] == pytest.approx((0.3 + 0.7) / 2)
    assert H.edges[0, 1]["attention_heads"] == pytest.approx([0.4, 0.6])
    assert H.edges[1, 2]["attention"] == pytest.approx(0.75)
    assert H.nodes[0]["self_attention"] == pytest.approx(0.2)
    D = to_networkx(data, attention=(attention_index, alpha), directed=True)
    assert D.edges[1, 0]["attention"] == pytest.approx(0.7)


# ----------------------------------------------------------------------------- edge files


@pytest.mark.parametrize(
    "text",
    [
        "src,dst\n1,0\n1,2\n",
        "1,0\n1,2\n",
        "# a comment\nsource target\n1 0\n\n1\t2\n",
        "1 0\n1 2\n",
    ],
    ids=["csv-header", "csv", "whitespace-header-comments", "whitespace"],
)
def test_edge_list_formats_agree(tmp_path, text):
    edge_index, node_ids, report = read_edge_list(write(tmp_path, "e.txt", text))
    assert node_ids == ["0", "1", "2"]
    assert edge_index.tolist() == [[1, 1, 0, 2], [0, 2, 1, 1]]
    assert report.num_input_edges == 2


def test_a_lone_carriage_return_ends_a_line(tmp_path):
    # old Mac line ends, alone or mixed with \r\n and \n: every one ends a line
    edge_index, node_ids, report = read_edge_list(write(tmp_path, "e.csv", "0,1\r1,2\r"))
    assert node_ids == ["0", "1", "2"] and report.num_input_edges == 2
    labels = write(tmp_path, "l.txt", "0 a\r\n1 b\r2 c\r1 d\n")
    with pytest.raises(GraphInputError, match=r"node '1': 'b' \(line 2\) and 'd' \(line 4\)"):
        read_labels(labels)


def test_integer_ids_map_in_integer_order(tmp_path):
    _, node_ids, _ = read_edge_list(write(tmp_path, "e.csv", "10,9\n2,10\n"))
    assert node_ids == ["2", "9", "10"]


def test_string_ids_and_explicit_header(tmp_path):
    path = write(tmp_path, "e.tsv", "who\twhom\nbob\talice\nalice\tcarol\n")
    edge_index, node_ids, _ = read_edge_list(path, directed=True, has_header=True)
    assert node_ids == ["alice", "bob", "carol"]
    assert edge_set(edge_index, node_ids) == {("bob", "alice"), ("alice", "carol")}
    _, node_ids, _ = read_edge_list(path, directed=True)  # no known header name: read as data
    assert "who" in node_ids


def test_unknown_node_id_names_id_and_line(tmp_path):
    path = write(tmp_path, "e.csv", "a,b\nb,c\nc,zed\n")
    with pytest.raises(GraphInputError, match=r"line 3: unknown node id 'zed'"):
        read_edge_list(path, node_ids=["a", "b", "c"])


def test_malformed_line_names_the_line(tmp_path):
    path = write(tmp_path, "e.txt", "1 2\n2 3\n4\n")
    with pytest.raises(GraphInputError, match=r"e.txt, line 3: malformed line"):
        read_edge_list(path)


@pytest.mark.parametrize("text", ["", "# only a comment\n\n", "src,dst\n"])
def test_empty_graph_is_an_error(tmp_path, text):
    with pytest.raises(GraphInputError, match="empty graph"):
        read_edge_list(write(tmp_path, "e.csv", text))


def test_self_loops_and_duplicates_reported_and_kept(tmp_path, caplog):
    path = write(tmp_path, "e.txt", "0 1\n1 1\n1 0\n2 3\n0 1\n")
    with caplog.at_level(logging.WARNING):
        edge_index, _, report = read_edge_list(path)
    assert report.num_self_loops == 1
    assert report.num_duplicate_edges == 2  # "1 0" and the second "0 1"
    assert edge_index.size(1) == 2 * 4 + 1
    assert "self-loop(s) kept (first at line 2)" in caplog.text
    assert "duplicate edge(s) kept (first at line 3)" in caplog.text
    _, _, directed = read_edge_list(path, directed=True)
    assert directed.num_duplicate_edges == 1 and directed.num_edges == 5


# ----------------------------------------------------------------------------- labels


def test_partial_labels_leave_nodes_unlabelled(tmp_path):
    edges = write(tmp_path, "e.csv", "a,b\nb,c\nc,d\n")
    labels = write(tmp_path, "l.csv", "node,label\nb,red\nd,blue\n")
    data = load_node_graph(edges, labels=labels)
    assert data.node_ids == ["a", "b", "c", "d"]
    assert data.label_names == ["blue", "red"]
    assert data.y.tolist() == [-1, 1, -1, 0]
    assert data.x.shape == (4, 9)  # structural features only
    assert data.edge_index.size(1) == 6


def test_label_only_nodes_become_isolated_nodes(tmp_path, caplog):
    edges = write(tmp_path, "e.txt", "0 1\n")
    labels = write(tmp_path, "l.txt", "0 x\n1 y\n2 x\n")
    with caplog.at_level(logging.WARNING):
        data = load_node_graph(edges, labels=labels)
    assert data.node_ids == ["0", "1", "2"] and data.y.tolist() == [0, 1, 0]
    assert data.graph_report.num_isolated_nodes == 1
    assert "1 node(s) found only in the label/feature files" in caplog.text


def test_label_lines_without_a_label_still_add_their_nodes(tmp_path):
    # the label-only node w, whose label is empty, was dropped from the graph (z, with a
    # label, was added): both are nodes; only z is labelled
    edges = write(tmp_path, "e.csv", "a,b\nb,c\n")
    labels = write(tmp_path, "l.csv", "id,label\na,x\nb,y\nc,x\nz,y\nw,\n")
    for source in (labels, {"a": "x", "b": "y", "c": "x", "z": "y", "w": None}):
        data = load_node_graph(edges, labels=source)
        assert data.node_ids == ["a", "b", "c", "w", "z"]
        assert data.y.tolist() == [0, 1, 0, -1, 1]
        assert data.graph_report.num_isolated_nodes == 2


def test_a_label_column_in_the_feature_file_is_not_a_feature(tmp_path, caplog):
    # one file for labels and features: the default feature columns (every column but
    # the id) took the numeric label column in, and test labels leaked into x
    edges = write(tmp_path, "e.csv", "0,1\n1,2\n2,3\n")
    nodes = write(tmp_path, "n.csv", "id,f1,f2,label\n0,0.5,1,2\n1,1.5,0,0\n2,2.5,1,1\n3,3.5,0,2\n")
    with caplog.at_level(logging.INFO):
        data = load_node_graph(edges, labels=nodes, features=nodes)
    assert data.x_blocks == {"features": (0, 2)}
    assert data.x.tolist() == [[0.5, 1.0], [1.5, 0.0], [2.5, 1.0], [3.5, 0.0]]
    assert data.y.tolist() == [2, 0, 1, 2]
    assert "the label column 'label' is left out of the features" in caplog.text
    by_position = load_node_graph(edges, labels=nodes, features=nodes, label_col=-1)
    assert by_position.x_blocks == {"features": (0, 2)}  # -1 is the label column too
    (tmp_path / "sub").mkdir()  # the same file under another spelling of its path
    respelled = load_node_graph(edges, labels=nodes, features=tmp_path / "sub" / ".." / "n.csv")
    assert respelled.x_blocks == {"features": (0, 2)}
    # named feature columns are read as named; another feature file keeps every column
    chosen = load_node_graph(edges, labels=nodes, features=nodes, feature_cols=["f2", "f1"])
    assert chosen.x[:, 1].tolist() == [0.5, 1.5, 2.5, 3.5]
    copy = write(tmp_path, "copy.csv", nodes.read_text())
    assert load_node_graph(edges, labels=nodes, features=copy).x.size(1) == 3


def test_conflicting_labels_name_the_id_and_both_labels(tmp_path):
    path = write(tmp_path, "l.csv", "id,label\n7,cat\n8,dog\n7,bird\n")
    with pytest.raises(GraphInputError, match=r"node '7': 'cat' \(line 2\) and 'bird' \(line 4\)"):
        read_labels(path)


def test_a_repeated_node_is_an_error_even_with_the_same_label(tmp_path):
    path = write(tmp_path, "l.txt", "7 cat\n8 dog\n7 cat\n")
    with pytest.raises(GraphInputError, match=r"node '7' is repeated: line 1 and line 3"):
        read_labels(path)


def test_labels_by_column_name_with_quoted_commas(tmp_path):
    path = write(tmp_path, "t.csv", 'id,name,kind\n0,"Smith, Jones & Co",company\n1,Ünïcode,tv\n')
    assert read_labels(path, id_col="id", label_col="kind") == {"0": "company", "1": "tv"}
    with pytest.raises(GraphInputError, match="no label column 'type'"):
        read_labels(path, label_col="type")


def test_line_numbers_count_quoted_multiline_fields(tmp_path):
    path = write(tmp_path, "t.csv", 'id,name,label\n1,"two\nlines",a\n2,x,b\n1,y,c\n')
    with pytest.raises(GraphInputError, match=r"'a' \(line 2\) and 'c' \(line 5\)"):
        read_labels(path)


# ----------------------------------------------------------------------------- feature files


def test_numeric_feature_file(tmp_path):
    path = write(tmp_path, "f.csv", "id,f1,f2\nb,1.5,2\na,-1,0\n")
    table = read_node_features(path)
    assert table.ids == ["b", "a"] and table.columns == ["f1", "f2"]
    assert table.values.tolist() == [[1.5, 2.0], [-1.0, 0.0]]
    edges = write(tmp_path, "e.csv", "a,b\n")
    data = load_node_graph(edges, features=path)
    assert data.x.tolist() == [[-1.0, 0.0], [1.5, 2.0]]
    assert data.x_blocks == {"features": (0, 2)}


def test_bad_feature_value_names_line_and_column(tmp_path):
    path = write(tmp_path, "f.csv", "id,f1,f2\na,1,2\nb,3,oops\n")
    with pytest.raises(GraphInputError, match=r"line 3: feature column 'f2' holds 'oops'"):
        read_node_features(path)


def test_feature_file_repeated_or_missing_nodes(tmp_path):
    repeated = write(tmp_path, "r.txt", "a 1\nb 2\na 3\n")
    with pytest.raises(GraphInputError, match=r"line 3: node 'a' repeated \(first on line 1\)"):
        read_node_features(repeated)
    partial = write(tmp_path, "p.txt", "a 1\nb 2\n")
    edges = write(tmp_path, "e.txt", "a b\nb c\n")
    with pytest.raises(GraphInputError, match=r"1 node\(s\) of the graph have no row.*'c'"):
        load_node_graph(edges, features=partial)


def test_text_column_becomes_hashed_features(tmp_path):
    edges = write(tmp_path, "e.csv", "0,1\n1,2\n")
    target = write(
        tmp_path,
        "t.csv",
        'id,page_name,page_type\n0,"Acme, Inc.",company\n'
        "1,中国好声音,tvshow\n2,Acme Labs,company\n",
    )
    data = load_node_graph(
        edges,
        labels=target,
        text_col="page_name",
        label_col="page_type",
        text_dim=64,
        structural=True,
    )
    assert data.x.shape == (3, 64 + 9)
    assert data.x_blocks == {"text": (0, 64), "structural": (64, 73)}
    text = data.x[:, :64]
    assert torch.allclose(text.norm(dim=1), torch.ones(3))
    assert float(text[0] @ text[2]) > 0  # both mention "acme"
    assert data.label_names == ["company", "tvshow"] and data.y.tolist() == [0, 1, 0]


# ----------------------------------------------------------------------------- reported defects


def test_comment_with_a_quote_does_not_swallow_the_following_lines(tmp_path):
    path = write(tmp_path, "e.csv", 'src,dst\n0,1\n#x,"bad\n1,2\n2,3\n3,4\n')
    edge_index, node_ids, report = read_edge_list(path, directed=True)
    assert report.num_input_edges == 4
    assert edge_set(edge_index, node_ids) == {("0", "1"), ("1", "2"), ("2", "3"), ("3", "4")}
    bad = write(tmp_path, "b.csv", 'src,dst\n%x,"y\n0,1\n2\n')
    with pytest.raises(GraphInputError, match=r"b.csv, line 4: malformed line"):
        read_edge_list(bad)


def test_quoted_field_spanning_a_line_that_looks_like_a_comment(tmp_path):
    path = write(tmp_path, "t.csv", 'id,name,label\n1,"two\n# not a comment",a\n2,x,b\n')
    assert read_labels(path) == {"1": "a", "2": "b"}


@pytest.mark.parametrize(
    ("text", "edges"),
    [("node1 node2\nnode2 node3\nnode3 node1\n", 3), ("source,target\ntarget,source\n", 2)],
    ids=["shaped-like-ids", "ids-recur"],
)
def test_edge_row_of_column_names_that_are_node_ids_is_data(tmp_path, caplog, text, edges):
    with caplog.at_level(logging.WARNING):
        _, _, report = read_edge_list(write(tmp_path, "e.txt", text), directed=True)
    assert report.num_input_edges == edges
    assert "line 1" in caplog.text and "read as data" in caplog.text


def test_label_row_of_ids_named_like_columns_is_data(tmp_path):
    path = write(tmp_path, "l.csv", "node1,compute\nnode2,storage\nnode3,compute\n")
    assert read_labels(path) == {"node1": "compute", "node2": "storage", "node3": "compute"}
    assert read_labels(path, has_header=True) == {"node2": "storage", "node3": "compute"}


def test_detected_header_is_a_warning_naming_file_and_row(tmp_path, caplog):
    path = write(tmp_path, "e.csv", "source,target\n0,1\n")
    with caplog.at_level(logging.WARNING):
        read_edge_list(path)
    [record] = [r for r in caplog.records if "header" in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert "e.csv: line 1" in record.getMessage() and "['source', 'target']" in record.getMessage()
    assert "has_header" in record.getMessage()


def test_feature_file_with_numeric_column_names_has_a_header(tmp_path):
    edges = write(tmp_path, "e.csv", "0,1\n1,2\n")
    labels = write(tmp_path, "l.csv", "id,label\n0,a\n1,b\n2,a\n")
    feats = write(tmp_path, "feats.csv", "id,0,1\n0,0.5,1\n1,0,0\n2,1,1\n")
    table = read_node_features(feats)
    assert table.ids == ["0", "1", "2"] and table.columns == ["0", "1"]
    data = load_node_graph(edges, labels=labels, features=feats)
    assert data.node_ids == ["0", "1", "2"]
    assert data.x.tolist() == [[0.5, 1.0], [0.0, 0.0], [1.0, 1.0]]


def test_tab_file_whose_first_line_has_a_comma_is_tab_separated(tmp_path):
    path = write(tmp_path, "l.tsv", "0\tgovernment,local\n1\tcompany\n2\tgovernment\n")
    assert read_labels(path) == {"0": "government,local", "1": "company", "2": "government"}
    edges = write(tmp_path, "e.tsv", "a,b\tc\nc\td\n")
    _, node_ids, _ = read_edge_list(edges)
    assert node_ids == ["a,b", "c", "d"]


def test_comma_needs_every_line_then_whitespace(tmp_path):
    path = write(tmp_path, "l.txt", "0 a,b\n1 c\n")
    assert read_labels(path) == {"0": "a,b", "1": "c"}


@pytest.mark.parametrize(
    "text",
    ["0 a\n1 b\n2\n", "0,a\n1,b\n2,\n", "0,a\n1,b\n2\n"],
    ids=["whitespace", "csv", "csv-short"],
)
def test_label_line_without_a_label_leaves_the_node_unlabelled(tmp_path, caplog, text):
    with caplog.at_level(logging.WARNING):
        assert read_labels(write(tmp_path, "l.txt", text)) == {"0": "a", "1": "b"}
    assert "1 line(s) with an empty or missing label" in caplog.text
    assert "line 3" in caplog.text


def test_tab_separated_label_keeps_its_spaces(tmp_path):
    path = write(tmp_path, "l.tsv", "0\tpolitical party\n1\tcompany\n")
    assert read_labels(path) == {"0": "political party", "1": "company"}


def test_whitespace_label_with_spaces_is_an_error(tmp_path):
    path = write(tmp_path, "l.txt", "0 company\n1 political party\n")
    with pytest.raises(GraphInputError, match=r"l.txt, line 2: 3 whitespace-separated.*delimiter"):
        read_labels(path)
    with pytest.raises(GraphInputError, match="line 2"):
        read_labels(path, label_col=1)
    header = write(tmp_path, "h.txt", "id label\n0 company\n1 political party\n")
    with pytest.raises(GraphInputError, match=r"h.txt, line 3: 3 whitespace-separated"):
        read_labels(header)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [  # an unquoted comma inside a name shifts the fields of that line
        ("l.csv", "id,name,label\n0,Acme,company\n1,Tokyo, Japan,city\n",
         "line 3: 4 fields where the header has 3"),
        ("f.tsv", "id\tx\n0\t1.0\n1\t2.0\t3.0\n", "line 3: 3 fields where the header has 2"),
        ("f.csv", "1,0.1,0.2\n2,0.3,0.4\n4,0.2,0.3,0.9\n", "line 3: 4 fields where line 1 has 3"),
        ("l.csv", "1,cat\n2,dog,extra\n", "line 2: 3 fields where line 1 has 2"),
    ],
)  # fmt: skip
def test_delimited_line_wider_than_its_header_or_first_line_is_an_error(
    tmp_path, name, text, message
):
    read = read_labels if name.startswith("l") else read_node_features
    with pytest.raises(GraphInputError, match=f"{name}, {message}"):
        read(write(tmp_path, name, text))


def test_whitespace_extra_fields_are_fine_when_selected(tmp_path):
    path = write(tmp_path, "l.txt", "0 Acme company\n1 Foo tvshow\n")
    assert read_labels(path, label_col=2) == {"0": "company", "1": "tvshow"}
    edges = write(tmp_path, "e.txt", "0 1\n")
    data = load_node_graph(edges, labels=path, text_col=1, label_col=2, text_dim=16)
    assert data.label_names == ["company", "tvshow"] and "text" in data.x_blocks


def test_whitespace_text_with_spaces_is_an_error(tmp_path):
    path = write(tmp_path, "f.txt", "0 Acme\n1 Foo Bar\n")
    with pytest.raises(GraphInputError, match=r"f.txt, line 2: 3 whitespace-separated"):
        read_node_features(path, text_col=1)


def test_label_column_named_label_is_the_default(tmp_path):
    path = write(tmp_path, "l.csv", "id,label,name\n0,a,Acme Co\n1,b,Foo\n2,a,Acme\n")
    assert read_labels(path) == {"0": "a", "1": "b", "2": "a"}
    assert read_labels(path, label_col="name")["1"] == "Foo"
    edges = write(tmp_path, "e.csv", "0,1\n1,2\n")
    data = load_node_graph(edges, labels=path, text_col="name", text_dim=16)
    assert data.label_names == ["a", "b"] and data.y.tolist() == [0, 1, 0]


def test_default_label_column_that_is_the_text_column_is_an_error(tmp_path):
    path = write(tmp_path, "l.csv", "id,kind,name\n0,a,Acme\n1,b,Foo\n")
    edges = write(tmp_path, "e.csv", "0,1\n")
    with pytest.raises(GraphInputError, match="default label column 'name' is the text column"):
        load_node_graph(edges, labels=path, text_col="name")
    data = load_node_graph(edges, labels=path, text_col="name", label_col="kind", text_dim=16)
    assert data.label_names == ["a", "b"]


def test_a_label_column_is_never_also_read_as_an_input(tmp_path):
    # each node would see its own label, test nodes included (a leak: test accuracy 1.0)
    path = write(tmp_path, "n.csv", "id,f1,kind,name\n0,0.5,a,Acme\n1,1.5,b,Foo\n")
    edges = write(tmp_path, "e.csv", "0,1\n")
    named = "the label column 'kind' is also the text column"
    with pytest.raises(GraphInputError, match=named):
        load_node_graph(edges, labels=path, label_col="kind", text_col="kind")
    with pytest.raises(GraphInputError, match=named):  # the file passed as features too
        load_node_graph(edges, labels=path, features=path, label_col="kind", text_col="kind")
    for label_col, text_col in (("kind", -2), (-2, "kind"), (2, -2)):  # -1: the last column
        with pytest.raises(GraphInputError, match=named):
            load_node_graph(edges, labels=path, label_col=label_col, text_col=text_col)
    with pytest.raises(GraphInputError, match="label column 'id' is the id column"):
        load_node_graph(edges, labels=path, label_col=-4)
    ragged = write(tmp_path, "r.csv", "0,alice,A\n1,bob,B\n2,carol\n")  # -1 on line 3: carol
    with pytest.raises(GraphInputError, match="is also the text column"):
        load_node_graph(edges, labels=ragged, label_col=-1, text_col=1)
    with pytest.raises(GraphInputError, match="no text column -5"):  # past the end: not a clash
        load_node_graph(edges, labels=path, label_col=2, text_col=-5)
    defaulted = "default label column 'name' is the text column"
    with pytest.raises(GraphInputError, match=defaulted):
        load_node_graph(edges, labels=path, features=path, text_col="name")
    with pytest.raises(GraphInputError, match="feature column 'kind' is the label column"):
        load_node_graph(edges, labels=path, features=path, label_col="kind", feature_cols=["kind"])
    data = load_node_graph(
        edges, labels=path, features=path, label_col="kind", feature_cols=["f1"], text_col="name"
    )
    assert data.label_names == ["a", "b"] and data.x_blocks["features"] == (0, 1)


# ----------------------------------------------------------------------------- command line


@pytest.mark.parametrize(
    "flags",
    [
        ["--labels", "l.csv"],
        ["--dataset", "karate", "--labels", "l.csv"],
        ["--features", "f.csv"],
        ["--text-col", "name"],
        ["--label-col", "kind"],
        ["--delimiter", "tab"],
        ["--header", "auto"],
    ],
    ids=" ".join,
)
def test_cli_node_file_flags_need_edges(tmp_path, capsys, flags):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", *flags, "--epochs", "1", "--out", str(tmp_path / "r")])
    assert exit_info.value.code == 2
    assert f"{flags[-2]} needs --edges" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_cli_edges_and_a_named_dataset_are_alternatives(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["train", "--dataset", "karate", "--edges", "e.txt", "--out", str(tmp_path)])
    assert "--edges and --dataset are alternatives" in capsys.readouterr().err


def test_cli_file_flags_reach_the_readers(tmp_path):
    graph = nx.karate_club_graph()
    edges = write(
        tmp_path, "e.txt", "who;whom\n" + "".join(f"p{u};p{v}\n" for u, v in graph.edges())
    )
    rows = "".join(f"p{n};{club};member {n}\n" for n, club in graph.nodes(data="club"))
    labels = write(tmp_path, "l.txt", "who;club;name\n" + rows)
    out = tmp_path / "run"
    flags = ["--delimiter", "semicolon", "--header", "yes", "--label-col", "club"]
    argv = ["--edges", str(edges), "--labels", str(labels), "--text-col", "name", *flags]
    assert main(["train", *argv, "--epochs", "1", "--out", str(out), "--no-progress"]) == 0
    with open(out / "predictions.csv") as handle:
        predictions = list(csv.DictReader(handle))
    assert {r["node_id"] for r in predictions} == {f"p{n}" for n in range(34)}
    assert {r["label"] for r in predictions} == {"Mr. Hi", "Officer"}


# ------------------------------------------------------------------ structural and text features


def test_return_probabilities_on_a_path_by_hand():
    # path 0 - 1 - 2: from an end, P^2 returns with 1 * 1/2; from the middle with 1.
    edge_index = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    f = structural_features(edge_index, 3, walk_length=4)
    assert f[:, 0].tolist() == pytest.approx(np.log1p([1, 2, 1]).tolist())
    assert f[:, 1].tolist() == [0, 0, 0]  # no self-loops
    assert f[:, 2].tolist() == pytest.approx([0.5, 1.0, 0.5])
    assert f[:, 3].tolist() == [0, 0, 0]  # bipartite: no odd returns
    assert f[:, 4].tolist() == pytest.approx([0.5, 1.0, 0.5])


def test_return_probabilities_on_a_triangle_by_hand():
    edge_index = torch.tensor([[0, 1, 1, 2, 2, 0], [1, 0, 2, 1, 0, 2]])
    f = structural_features(edge_index, 3, walk_length=3)
    expected = torch.tensor([[0.0, 0.5, 0.25]]).expand(3, 3)
    torch.testing.assert_close(f[:, 1:], expected)


def dense_return_probabilities(edge_index, n, k):
    A = np.zeros((n, n))
    np.add.at(A, tuple(edge_index.numpy()), 1)
    out = A.sum(1, keepdims=True)
    P = np.divide(A, out, out=np.zeros_like(A), where=out > 0)
    return np.stack([np.diag(np.linalg.matrix_power(P, t)) for t in range(1, k + 1)], 1)


def test_directed_graph_with_dead_ends_matches_dense_powers():
    edge_index = torch.randint(0, 25, (2, 70), generator=torch.Generator().manual_seed(1))
    f = structural_features(edge_index, 25, walk_length=7)
    expected = dense_return_probabilities(edge_index, 25, 7)
    np.testing.assert_allclose(f[:, 1:].numpy(), expected, atol=1e-6)
    in_degree = torch.bincount(edge_index[1], minlength=25)
    assert torch.allclose(f[:, 0], torch.log1p(in_degree.float()))


def test_estimated_return_probabilities_are_close():
    G = nx.gnm_random_graph(200, 800, seed=3)
    data = from_networkx(G)
    exact = structural_features(data.edge_index, 200, walk_length=6)
    estimate = structural_features(
        data.edge_index, 200, walk_length=6, exact_budget=0, num_probes=1024
    )
    assert torch.equal(exact[:, :3], estimate[:, :3])  # steps 1-2 need no product
    for t in (4, 6):
        relative = (estimate[:, t] - exact[:, t]).abs() / exact[:, t]
        assert float(relative.median()) < 0.1


def test_text_features_are_deterministic_and_normalised():
    texts = ["The Voice of China 中国好声音", "U.S. Consulate General Mumbai", ""]
    a, b = text_features(texts, 128), text_features(list(texts), 128)
    assert a.shape == (3, 128) and a.dtype == torch.float32 and torch.equal(a, b)
    assert a[:2].norm(dim=1).tolist() == pytest.approx([1.0, 1.0])
    assert a[2].abs().sum() == 0
    tfidf = text_features(["red apple", "green apple", "red"], 16, method="tfidf")
    assert tfidf.shape == (3, 16) and float(tfidf[0] @ tfidf[1]) > 0
    with pytest.raises(GraphInputError, match="hashing"):
        text_features(texts, 8, method="bert")


# ----------------------------------------------------------------------------- named sets


def test_karate_dataset():
    data = load_node_dataset("karate")
    assert torch.equal(data.x[:, :34], torch.eye(34))
    spectral = data.x[:, 34:]
    assert spectral.shape == (34, 2)
    torch.testing.assert_close(spectral.square().mean(0), torch.ones(2))  # unit mean square
    # the first eigenvector separates the two leaders
    assert spectral[0, 0] * spectral[33, 0] < 0
    assert data.default_train_nodes == [0, 33]
    assert [data.label_names[c] for c in data.y[[0, 33]]] == ["Mr. Hi", "Officer"]
    assert torch.bincount(data.y).tolist() == [17, 17]
    with pytest.raises(KeyError, match="known"):
        load_node_dataset("cora")


def test_facebook_pages_from_real_data(data_dir, caplog):
    with caplog.at_level(logging.WARNING, logger="graphattn.datasets.social"):
        data = load_node_dataset("facebook-pages", data_dir=data_dir)
    assert "are not read" not in caplog.text  # page_type is the label, facebook_id an id
    report = data.graph_report
    assert data.num_nodes == 22470 and data.node_ids[:3] == ["0", "1", "2"]
    assert report.num_input_edges == 171002
    assert report.num_self_loops == 179 and report.num_duplicate_edges == 0
    # 171,002 undirected edges give 2 directed edges each, self-loops one.
    assert data.edge_index.size(1) == 2 * 171002 - 179 == 341825
    assert data.label_names == ["company", "government", "politician", "tvshow"]
    assert torch.bincount(data.y).tolist() == [6495, 6880, 5768, 3327]
    assert data.x.shape == (22470, 1024 + 9) and data.x.dtype == torch.float32
    assert bool(torch.isfinite(data.x).all())
    assert NODE_DATASETS["facebook-pages"]["num_nodes"] == data.num_nodes


MISSING = [None, "", "  ", float("nan"), np.float32("nan"), np.float64("nan")]


def test_missing_labels_mean_unlabelled_in_a_dict_and_in_networkx(tmp_path):
    edges = write(tmp_path, "e.txt", "".join(f"{i} {i + 1}\n" for i in range(1, 8)))
    labels = {1: "cat", 8: "dog", **{i: v for i, v in enumerate(MISSING, 2)}}
    data = load_node_graph(edges, labels=labels)
    assert data.label_names == ["cat", "dog"]
    assert data.y.tolist() == [0, -1, -1, -1, -1, -1, -1, 1]

    G = nx.path_graph(len(MISSING) + 2)
    nx.set_node_attributes(G, {0: "a", len(MISSING) + 1: "b"}, "club")
    nx.set_node_attributes(G, dict(enumerate(MISSING, 1)), "club")
    data = from_networkx(G, label_attr="club")
    assert data.label_names == ["a", "b"]
    assert data.y.tolist() == [0] + [-1] * len(MISSING) + [1]


def test_a_headerless_first_line_without_its_label_allows_the_label_column(tmp_path):
    edges = write(tmp_path, "e.txt", "1 2\n2 3\n3 4\n")
    short_first = write(tmp_path, "s.csv", "1\n2,dog\n3,cat\n")
    assert read_labels(short_first, has_header=False, label_col=1) == {"2": "dog", "3": "cat"}
    assert load_node_graph(edges, short_first, label_col=1).y.tolist() == [-1, 1, 0, -1]


def test_feature_values_beyond_float32_are_refused_by_line(tmp_path):
    features = write(tmp_path, "f.csv", "1,0.5\n2,1e39\n")
    with pytest.raises(GraphInputError, match=r"line 2: .* holds '1e39', not a finite float32"):
        read_node_features(features)


def test_a_text_column_names_the_feature_columns_it_leaves_unread(tmp_path, caplog):
    features = write(tmp_path, "f.csv", "id,age,name\n1,3,Tom\n2,4,Rex\n")
    with caplog.at_level(logging.WARNING, logger="graphattn.datasets.social"):
        read_node_features(features, text_col="name")
    assert "only the text column 'name' becomes features; columns ['age'] are not read" in (
        caplog.text
    )


def test_an_unclosed_quote_in_a_label_file_is_reported(tmp_path, caplog):
    path = write(tmp_path, "t.csv", 'id,name,kind\n0,a,x\n1,"Beta Show,y\n2,c,x\n3,d",y\n4,e,x\n')
    with caplog.at_level(logging.WARNING):
        labels = read_labels(path, id_col="id", label_col="kind")
    assert labels == {"0": "x", "1": "y", "4": "x"}  # 2 and 3 went into 1's name
    assert "1 row(s) hold a line break inside a quoted field (first: the row on lines 3-5)" in (
        caplog.text
    )


def test_unicode_line_separators_inside_a_field_do_not_end_the_line(tmp_path):
    # U+2028, NEL and a form feed: str.splitlines() broke lines at them
    path = write(tmp_path, "t.csv", "id,name,kind\n0,Alpha\u2028Beta,x\n1,Gamma\x85\x0c,y\n2,c,x\n")
    assert read_labels(path, id_col="id", label_col="kind") == {"0": "x", "1": "y", "2": "x"}
    repeated = write(tmp_path, "r.csv", "id,name,kind\n0,a\u2028b,x\n1,c,y\n1,d,x\n")
    with pytest.raises(GraphInputError, match=r"node '1': 'y' \(line 3\) and 'x' \(line 4\)"):
        read_labels(repeated, id_col="id", label_col="kind")


def test_a_field_over_the_csv_limit_names_the_line(tmp_path):
    path = write(tmp_path, "t.csv", 'id,name,kind\n0,a,x\n1,"' + "b" * 200_000 + '",y\n')
    with pytest.raises(GraphInputError, match=r"t.csv, line 3: not valid CSV \(field larger"):
        read_labels(path, id_col="id", label_col="kind")
    # in a quoted field that spans lines: the line where the limit is passed
    path = write(tmp_path, "m.csv", 'id,name,kind\n0,a,x\n1,"b\n' + "b" * 200_000 + '",y\n')
    with pytest.raises(GraphInputError, match=r"m.csv, line 4: not valid CSV \(field larger"):
        read_labels(path, id_col="id", label_col="kind")
    # unquoted, in a file without any quote: the fast path parses it, and names the line
    path = write(tmp_path, "u.csv", "id,name,kind\n0,a,x\n1," + "b" * 200_000 + ",y\n")
    with pytest.raises(
        GraphInputError, match=r"u.csv, line 3: not valid CSV \(field larger"
    ) as err:
        read_labels(path, id_col="id", label_col="kind")
    assert "quote" not in str(err.value)  # the file has none: no hint about one
    edges = write(tmp_path, "e.csv", "0,1\n" + "9" * 200_000 + ",1\n")
    with pytest.raises(GraphInputError, match=r"e.csv, line 2: not valid CSV \(field larger"):
        read_edge_list(edges)


def test_labels_whose_ids_match_no_edge_list_node_are_an_error(tmp_path):
    # a pandas float export writes the ids 100, 101, 102 as 100.0, 101.0, 102.0
    edges = write(tmp_path, "e.csv", "100,101\n101,102\n")
    labels = write(tmp_path, "l.csv", "100.0,a\n101.0,b\n102.0,a\n")
    message = r"none of its 3 labelled node ids is a node of the edge list .*'100.0', '101.0'"
    with pytest.raises(GraphInputError, match=message):
        load_node_graph(edges, labels=labels)
    with pytest.raises(GraphInputError, match=r"the label dict: .*\['100', '101'\]"):
        load_node_graph(edges, labels={100.0: "a", 101.0: "b"})
    partial = write(tmp_path, "p.csv", "100,a\n7,b\n")  # one id in the edge list is enough
    assert load_node_graph(edges, labels=partial).y.tolist() == [1, 0, -1, -1]  # 7 first
    # an edge list without edges cannot write the ids differently: isolated nodes
    no_edges = write(tmp_path, "none.csv", "# no edges yet\n")
    isolated = load_node_graph(no_edges, labels=labels)
    assert isolated.node_ids == ["100.0", "101.0", "102.0"] and isolated.y.tolist() == [0, 1, 0]


def test_to_networkx_takes_class_scores():
    data = from_networkx(nx.path_graph(4))
    scores = torch.tensor([[0.1, 0.9, 0.0], [0.8, 0.1, 0.1], [0.0, 0.0, 1.0], [0.3, 0.6, 0.1]])
    graph = to_networkx(data, predictions=scores)
    assert [graph.nodes[n]["prediction"] for n in graph] == [1, 0, 2, 1]


def test_text_features_count_bigrams_and_are_non_negative():
    swapped = text_features(["new york city", "york new city"], 1 << 16)
    assert not torch.allclose(swapped[0], swapped[1])  # word order reaches the bigrams
    many = text_features([f"word{i} other{i} thing{i % 7}" for i in range(200)], 64)
    assert (many >= 0).all()


def test_load_node_graph_keeps_direction_when_asked(tmp_path):
    data = load_node_graph(write(tmp_path, "e.txt", "0 1\n1 2\n"), directed=True)
    assert data.graph_report.directed and data.edge_index.tolist() == [[0, 1], [1, 2]]


def test_a_first_line_of_mixed_ids_is_data(tmp_path):
    edge_index, ids, _ = read_edge_list(write(tmp_path, "e.txt", "a 1\nb 2\nc 3\n"))
    assert edge_index.size(1) == 6 and "a" in ids


@pytest.mark.parametrize("features", [False, True], ids=["text-from-labels", "same-file"])
def test_a_label_file_read_again_for_its_columns_keeps_its_header(tmp_path, features):
    # 'who' is not a known column name: the label read (integer ids) takes line 1 for
    # a header, and the second read of the file (text column) must not make it a node
    edges = write(tmp_path, "e.txt", "1 2\n2 3\n")
    labels = write(tmp_path, "l.tsv", "who\tname\tlabel\n1\tfoo\ta\n2\tbar\tb\n3\tbaz\ta\n")
    data = load_node_graph(edges, labels=labels, features=labels if features else None, text_col=1)
    assert data.node_ids == ["1", "2", "3"] and data.graph_report.notes == []
    numeric = write(tmp_path, "n.csv", "who,f,label\n1,0.5,a\n2,0.1,b\n3,0.2,a\n")
    data = load_node_graph(edges, labels=numeric, features=numeric)
    assert data.x.view(-1).tolist() == pytest.approx([0.5, 0.1, 0.2])


def test_the_label_column_of_a_same_file_text_table_is_not_called_unread(tmp_path, caplog):
    edges = write(tmp_path, "e.txt", "1 2\n2 3\n")
    table = write(tmp_path, "t.csv", "id,name,label,score\n1,foo,a,1\n2,bar,b,2\n3,baz,a,3\n")
    with caplog.at_level(logging.WARNING):
        load_node_graph(edges, labels=table, features=table, text_col="name")
    [record] = [r for r in caplog.records if "not read" in r.getMessage()]
    assert "['score']" in record.getMessage()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("1,\n1,a\n2,b\n", "label 'a' on line 2 only"),
        ("1,a\n2,b\n1,\n", "label 'a' on line 1 only"),
        ("1,\n2,b\n1,\n", "no label on either"),
    ],
    ids=["empty-first", "empty-second", "both-empty"],
)
def test_a_node_on_two_label_lines_is_an_error_even_without_a_label(tmp_path, text, said):
    path = write(tmp_path, "l.csv", text)
    with pytest.raises(GraphInputError, match=r"node '1' is repeated: line \d and line \d"):
        read_labels(path)
    with pytest.raises(GraphInputError, match=said):
        read_labels(path)


def test_a_label_dict_with_keys_that_are_one_node_is_an_error(tmp_path):
    edges = write(tmp_path, "e.txt", "1 2\n2 3\n")
    with pytest.raises(GraphInputError, match=r"keys 1 and '1', both node '1'"):
        load_node_graph(edges, labels={1: "a", "1": "b", 3: "c"})


@pytest.mark.parametrize(
    ("text", "kwargs", "role"),
    [
        ("id,label,label\n1,a,b\n2,c,d\n", {"label_col": "label"}, "label"),
        ("id,id,label\n1,5,a\n2,6,b\n", {"id_col": "id"}, "id"),
    ],
)
def test_a_column_named_twice_is_an_error_not_the_first(tmp_path, text, kwargs, role):
    path = write(tmp_path, "l.csv", text)
    with pytest.raises(GraphInputError, match=rf"{role} column '\w+' appears more than once"):
        read_labels(path, **kwargs)
    with pytest.raises(GraphInputError, match="more than one column is named 'label'"):
        read_labels(write(tmp_path, "d.csv", "id,Label,label\n1,a,b\n2,c,d\n"))
    feats = write(tmp_path, "f.csv", "id,f,f\n1,1,2\n2,3,4\n")
    with pytest.raises(GraphInputError, match=r"feature column 'f' appears more than once"):
        read_node_features(feats, feature_cols=["f"])


def test_minus_zero_is_not_an_integer_id_so_numbering_is_stable(tmp_path):
    # "-0" and "0" both sorted as the integer 0 left their order to set iteration (it
    # changed with PYTHONHASHSEED); they are string ids, numbered in string order
    _, node_ids, _ = read_edge_list(write(tmp_path, "e.txt", "0 -0\n-0 1\n"))
    assert node_ids == ["-0", "0", "1"]
    _, node_ids, _ = read_edge_list(write(tmp_path, "f.txt", "-0 0\n0 10\n10 2\n"))
    assert node_ids == sorted(["-0", "0", "10", "2"])


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("f.csv", "1,,1\n2,1.5,2\n", r"f.csv, line 1: feature column 1 holds ''"),
        ("f.csv", "1,x\n2,1\n3,2\n", r"f.csv, line 1: feature column 1 holds 'x'"),
        ("e.csv", "1,\n2,3\n", r"e.csv, line 1: malformed line"),
        ("f.csv", "-1,x\n2,1\n3,2\n", r"f.csv, line 1: feature column 1 holds 'x'"),
        ("f.csv", "1,x\n-2,1\n-3,2\n", r"f.csv, line 1: feature column 1 holds 'x'"),
        ("e.csv", "-1,\n2,3\n", r"e.csv, line 1: malformed line"),
    ],
    ids=[
        "empty-feature",
        "text-feature",
        "edge-without-target",
        "negative-id-first",
        "negative-ids-after",
        "negative-edge-without-target",
    ],
)
def test_a_first_data_line_with_a_bad_field_is_an_error_not_a_header(tmp_path, name, text, message):
    path = write(tmp_path, name, text)
    read = read_edge_list if name == "e.csv" else read_node_features
    with pytest.raises(GraphInputError, match=message):
        read(path)


def test_a_first_label_line_with_a_zero_padded_id_is_data(tmp_path):
    path = write(tmp_path, "l.txt", "007 a\n8 b\n")
    assert read_labels(path) == {"007": "a", "8": "b"}
    assert read_labels(write(tmp_path, "h.txt", "who class\n1 a\n2 b\n")) == {"1": "a", "2": "b"}


def test_networkx_attributes_beyond_float32_are_refused_by_node():
    G = nx.Graph()
    G.add_node("a", f=1e39)
    G.add_node("b", f=1.0)
    G.add_edge("a", "b")
    with pytest.raises(GraphInputError, match=r"node 'a': attribute 'f' = 1e\+39 .*float32"):
        from_networkx(G, node_attrs=["f"])
    G.nodes["a"]["f"] = largest = float(np.finfo(np.float32).max)  # the largest is finite
    assert from_networkx(G, node_attrs=["f"]).x[:, 0].tolist() == [largest, 1.0]
    G.nodes["a"]["f"] = 10**400  # beyond float64 too: an OverflowError traceback before
    with pytest.raises(GraphInputError, match=r"node 'a': attribute 'f' = 1000.* not numeric"):
        from_networkx(G, node_attrs=["f"])


@pytest.mark.parametrize("label", [[1], {"kind": 1}, ([1],)], ids=["list", "dict", "tuple"])
def test_an_unhashable_networkx_label_is_refused_by_node(label):
    G = nx.Graph()
    G.add_node("a", club=label)
    G.add_node("b", club="x")
    with pytest.raises(
        GraphInputError, match=r"node 'a': label attribute 'club' = .* not hashable"
    ):
        from_networkx(G, label_attr="club")


def test_an_empty_node_id_in_a_label_or_feature_file_is_an_error_naming_the_line(tmp_path):
    # it became a node named '' and turned integer ids into string order ('10' < '2')
    edges = write(tmp_path, "e.csv", "1,2\n2,10\n10,1\n")
    labels = write(tmp_path, "l.csv", "id,label\n1,a\n2,b\n10,a\n,b\n")
    with pytest.raises(GraphInputError, match=r"l.csv, line 5: empty node id"):
        load_node_graph(edges, labels)
    good = write(tmp_path, "g.csv", "id,label\n1,a\n2,b\n10,a\n")
    features = write(tmp_path, "f.csv", "id,v\n1,0.1\n2,0.2\n10,0.3\n,0.4\n")
    with pytest.raises(GraphInputError, match=r"f.csv, line 5: empty node id"):
        load_node_graph(edges, good, features=features)
    assert load_node_graph(edges, good).node_ids == ["1", "2", "10"]


@pytest.mark.parametrize("sep", [" ", ",", "\t"])
def test_comment_lines_among_the_data_are_counted_in_a_warning(tmp_path, caplog, sep):
    # hashtag ids: the lines starting with # were dropped without a word
    lines = ["#ml python", "python #ml", "#ai python", "java python", "#ai java"]
    path = write(tmp_path, "e.txt", "".join(line.replace(" ", sep) + "\n" for line in lines))
    with caplog.at_level(logging.INFO):
        edge_index, _, _ = read_edge_list(path)
    assert edge_index.shape[1] == 4  # python-#ml and java-python, both ways
    assert "2 line(s) after the first data line start with # or % and were skipped" in caplog.text
    assert "(first: line 3)" in caplog.text
    assert "1 comment line(s) skipped" in caplog.text  # line 1, before the data: info only
    caplog.clear()
    if sep != " ":  # quoted, the ids are read as data
        quoted = "".join(sep.join(f'"{f}"' for f in line.split()) + "\n" for line in lines)
        with caplog.at_level(logging.INFO):
            _, ids, _ = read_edge_list(write(tmp_path, "q.txt", quoted))
        assert ids == ["#ai", "#ml", "java", "python"]
        assert "comment line" not in caplog.text and "as comments" not in caplog.text


def test_header_comments_alone_are_not_a_warning(tmp_path, caplog):
    path = write(tmp_path, "snap.txt", "# Directed graph\n# FromNodeId\tToNodeId\n0\t1\n1\t2\n")
    with caplog.at_level(logging.INFO):
        read_edge_list(path)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "2 comment line(s) skipped" in caplog.text
    # a comment between the header and the data is not among the data either
    after_header = write(tmp_path, "h.csv", "src,dst\n# exported 2024\n0,1\n1,2\n")
    caplog.clear()
    with caplog.at_level(logging.INFO):
        read_edge_list(after_header)
    assert "as comments" not in caplog.text and "1 comment line(s) skipped" in caplog.text


@pytest.mark.parametrize("column", ["name", "v"])
def test_a_feature_file_whose_ids_match_no_edge_list_node_is_an_error(tmp_path, column):
    # ids written 1.0 against 1: the text went to four isolated copies of the nodes, and
    # every real node got a zero text vector
    edges = write(tmp_path, "e.csv", "1,2\n2,3\n3,4\n4,1\n")
    labels = write(tmp_path, "l.csv", "1,a\n2,b\n3,a\n4,b\n")
    features = write(
        tmp_path, "f.csv", "id,name,v\n1.0,foo bar,1\n2.0,baz,2\n3.0,foo,3\n4.0,quux,4\n"
    )
    kwargs = {"text_col": "name"} if column == "name" else {"feature_cols": ["v"]}
    with pytest.raises(GraphInputError, match=r"f.csv: none of its 4 node ids is a node of the"):
        load_node_graph(edges, labels, features=features, **kwargs)
    good = write(tmp_path, "g.csv", "id,name,v\n1,foo bar,1\n2,baz,2\n3,foo,3\n4,quux,4\n")
    data = load_node_graph(edges, labels, features=good, **kwargs)
    assert data.node_ids == ["1", "2", "3", "4"] and bool((data.x.abs().sum(1) > 0).all())


def test_a_label_column_name_marks_a_header_over_string_ids(tmp_path, caplog):
    # 'user,label' was read as a node 'user' of class 'label', a one-member class
    edges = write(tmp_path, "e.csv", "alice,bob\nbob,carol\ncarol,dave\n")
    labels = write(tmp_path, "l.csv", "user,Label\nalice,x\nbob,y\ncarol,x\ndave,y\n")
    data = load_node_graph(edges, labels)
    assert data.node_ids == ["alice", "bob", "carol", "dave"]
    assert data.label_names == ["x", "y"]
    assert "line 1 read as a header" in caplog.text
    # a class that is really named 'label' elsewhere in the column: line 1 is data
    data_line = write(tmp_path, "d.csv", "alice,label\nbob,y\ncarol,label\ndave,y\n")
    assert read_labels(data_line) == {"alice": "label", "bob": "y", "carol": "label", "dave": "y"}
    # only the label column counts: 'Label' in another column chosen out is data
    other = write(
        tmp_path, "o.csv", "label_inc,Label,company\nsony,Sony Music,company\nemi,EMI,music\n"
    )
    assert read_labels(other, label_col=2) == {
        "label_inc": "company",
        "sony": "company",
        "emi": "music",
    }
    # ... and a 'label' column outside the chosen one is warned about, not passed over silently
    caplog.clear()
    header = write(tmp_path, "h.csv", "user,label,group\nalice,x,g1\nbob,y,g2\n")
    assert read_labels(header, label_col=2) == {"user": "group", "alice": "g1", "bob": "g2"}
    assert "line 1 ['user', 'label', 'group'] names a column 'label' other than the label" in (
        caplog.text
    )
    assert read_labels(header, label_col=2, has_header=True) == {"alice": "g1", "bob": "g2"}


def test_a_tab_file_with_one_tabless_line_warns_that_fields_with_spaces_were_split(
    tmp_path, caplog
):
    # one line without a tab turned the whole file whitespace-separated: every
    # two-word id was split, with only an 'extra columns ignored' warning
    text = "John Smith\tJane Doe\nJane Doe\tBob Lee\nBob Lee Ann Wu\nAnn Wu\tJohn Smith\n"
    path = write(tmp_path, "e.tsv", text)
    read_edge_list(path)
    assert "3 tab-separated line(s) hold spaces inside fields (first: line 1), but line 3" in (
        caplog.text
    )
    caplog.clear()
    read_edge_list(write(tmp_path, "one.tsv", "a\tb\nc\td\nJohn Smith\tb\ng h\n"))
    assert "1 tab-separated line(s) hold spaces inside fields (first: line 3), but line 4" in (
        caplog.text
    )
    with pytest.raises(GraphInputError, match=r"e.tsv, line 3: malformed line"):
        read_edge_list(path, delimiter="\t")  # the advice given: names the bad line
    caplog.clear()
    # tabs and spaces mixed as separators, no field with a space: read right, no warning
    _, ids, _ = read_edge_list(write(tmp_path, "m.txt", "1\t2\n3 4\n4\t1\n"))
    assert ids == ["1", "2", "3", "4"] and "tab-separated" not in caplog.text


def test_a_forced_header_that_looks_like_data_is_a_warning(tmp_path, caplog):
    # --header yes applies to every file: a headerless edge list lost its first edge
    edges = write(tmp_path, "e.tsv", "0\t1\n1\t2\n2\t3\n3\t0\n4\t0\n")
    labels = write(tmp_path, "l.tsv", "node\tkind\n0\ta\n1\tb\n2\ta\n3\tb\n4\ta\n")
    data = load_node_graph(edges, labels, label_col="kind", delimiter="\t", has_header=True)
    assert data.graph_report.num_input_edges == 4
    assert "e.tsv: line 1 read as a header, as asked, but its ids ['0', '1'] are node ids" in (
        caplog.text
    )
    assert "l.tsv: line 1 read as a header, as asked" not in caplog.text  # a real header


def test_labels_written_alike_but_of_two_types_are_an_error():
    # 1 and "1" became two classes both named "1" (predictions.csv: prob_1, prob_1)
    G = nx.relabel_nodes(nx.cycle_graph(4), {n: n + 10 for n in range(4)})
    for n in G:
        G.nodes[n]["c"] = 1 if n % 2 else "1"
    with pytest.raises(
        GraphInputError, match=r"first at nodes 1[01] and 1[01], are two classes written '1'"
    ):
        from_networkx(G, label_attr="c")


def test_node_attributes_of_different_lengths_name_the_node():
    G = nx.path_graph(3)
    for n in G:
        G.nodes[n]["w"] = [1.0, 2.0] if n == 2 else [1.0]
    with pytest.raises(GraphInputError, match=r"1 values at node 0, 2 at node 2"):
        from_networkx(G, node_attrs=["w"])


def test_labels_spelled_like_a_missing_value_are_warned_about(tmp_path, caplog):
    # R writes NA and np.savetxt nan for a missing label: both became classes unseen
    path = write(tmp_path, "l.csv", "id,label\n0,a\n1,NA\n2,b\n3,nan\n4,NA\n5,\n")
    labels = read_labels(path)
    assert labels == {"0": "a", "1": "NA", "2": "b", "3": "nan", "4": "NA"}  # still classes
    assert "3 node(s) have the label 'NA' or 'nan', which is read as a class" in caplog.text


@pytest.mark.parametrize(
    ("src", "dst", "num_nodes", "message"),
    [
        ([0, 3], [1, 0], 3, "edge 1: 3 -> 0 is not an edge between node ids 0..2"),
        ([[0, 1]], [[1, 0]], 3, "src must be a 1-D integer tensor of node ids"),
        ([0, 1], [1, 0], 2.5, "num_nodes must be an integer >= 0, got 2.5"),
        ([0, 1], [1, 0], -1, "num_nodes must be an integer >= 0, got -1"),
    ],
)
def test_edges_from_pairs_names_ids_at_the_boundary_and_bad_shapes(src, dst, num_nodes, message):
    from graphattn.featurize.graph import edges_from_pairs

    with pytest.raises(GraphInputError, match=re.escape(message)):
        edges_from_pairs(torch.tensor(src), torch.tensor(dst), num_nodes)


def test_an_empty_tensor_label_is_named():
    from graphattn.featurize.graph import encode_labels

    with pytest.raises(GraphInputError, match=r"position 1: the label is a tensor of shape \[0\]"):
        encode_labels([torch.tensor(1), torch.tensor([]), torch.tensor(0)])


def test_a_negative_predicted_class_is_refused_not_read_as_the_last_class():
    G = nx.path_graph(3)
    nx.set_node_attributes(G, {0: "a", 1: "b", 2: "a"}, "cls")
    data = from_networkx(G, label_attr="cls")
    with pytest.raises(GraphInputError, match=r"classes -1..1, but data.label_names has"):
        to_networkx(data, predictions=torch.tensor([-1, 0, 1]))
