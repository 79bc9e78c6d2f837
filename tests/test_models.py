"""Model configs and inputs: round trips, option checks, dtypes."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from torch_geometric.data import Batch

from graphattn.errors import GraphInputError
from graphattn.featurize import MoleculeFeaturizer
from graphattn.models import MoleculeModel, MoleculeModelConfig
from graphattn.models.node import NodeClassifier, NodeModelConfig

FEATURIZER = MoleculeFeaturizer()


def small_config(**changes) -> MoleculeModelConfig:
    return MoleculeModelConfig(
        FEATURIZER.atom_dim, FEATURIZER.bond_dim, hidden=16, layers=1, heads=2, **changes
    )


def test_a_config_dict_without_readout_keeps_the_default_architecture():
    source = MoleculeModel(small_config())
    saved = source.config.to_dict()
    del saved["readout"]
    rebuilt = MoleculeModel(MoleculeModelConfig.from_dict(saved))
    rebuilt.load_state_dict(source.state_dict())  # same shapes: mean + max
    assert rebuilt.config.readout == MoleculeModelConfig.readout


def test_an_unknown_task_is_refused_by_name():
    with pytest.raises(GraphInputError, match=r"task must be one of .* got 'regresion'"):
        small_config(task="regresion")


def test_a_positional_encoding_missing_from_the_data_is_named():
    model = MoleculeModel(small_config(pe="lap", pe_dim=4))
    batch = Batch.from_data_list([FEATURIZER("CCO"), FEATURIZER("c1ccccc1")])
    with pytest.raises(GraphInputError, match=r"pe='lap' needs data.lap_pe: apply"):
        model(batch)
    transform = model.pe_transform()
    batch = Batch.from_data_list([transform(FEATURIZER(s)) for s in ("CCO", "c1ccccc1")])
    assert model(batch).shape == (2, 1)


def test_label_inputs_follow_the_feature_dtype():
    config = NodeModelConfig(4, 3, hidden=8, heads=2, label_inputs=True)
    model = NodeClassifier(config).double()
    x = torch.randn(5, 4, dtype=torch.float64)
    edge_index = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]])
    out = model(x, edge_index, torch.tensor([0, -1, 2, -1, 1]))
    assert out.dtype == torch.float64 and out.shape == (5, 3)


def test_the_head_input_is_the_pooled_vector_next_to_the_scaled_descriptors():
    featurizer = MoleculeFeaturizer(descriptors=True)
    config = small_config(mol_dim=featurizer.mol_dim)
    model = MoleculeModel(config).eval()
    batch = Batch.from_data_list([featurizer(s) for s in ("CCO", "c1ccccc1O", "CC(=O)N")])
    model.fit_descriptor_scaler(batch.mol_x)
    head_input = model.head_input(batch)
    width = model.readout.out_channels
    assert head_input.shape == (3, width + featurizer.mol_dim)
    pooled = model.readout(model.node_embeddings(batch), batch.batch, 3)
    torch.testing.assert_close(head_input[:, :width], pooled)
    scaled = ((batch.mol_x - batch.mol_x.mean(0)) / batch.mol_x.std(0).clamp(min=1e-6)).clamp(-6, 6)
    torch.testing.assert_close(head_input[:, width:], scaled)
    torch.testing.assert_close(model(batch), model.head(head_input))


def test_a_single_molecule_is_predicted_without_changing_the_callers_data():
    featurizer = MoleculeFeaturizer()
    single, other = featurizer("CCO"), featurizer("c1ccccc1O")
    model = MoleculeModel(small_config()).eval()
    alone = model(single)
    assert single.batch is None  # it used to be set, and then Batch.from_data_list failed
    batched = model(Batch.from_data_list([single, other]))
    torch.testing.assert_close(batched[:1], alone)


def test_known_labels_are_refused_where_they_would_be_ignored_or_out_of_range():
    x, edge_index = torch.randn(6, 5), torch.tensor([[0, 1, 2, 3, 4], [1, 2, 3, 4, 5]])
    plain = NodeClassifier(NodeModelConfig(5, 3, hidden=8, heads=2)).eval()
    with pytest.raises(GraphInputError, match="built without label_inputs and would ignore"):
        plain(x, edge_index, known_labels=torch.zeros(6, dtype=torch.long))
    with_labels = NodeClassifier(NodeModelConfig(5, 3, hidden=8, heads=2, label_inputs=True))
    with pytest.raises(GraphInputError, match=r"class indices 0..2 or -1 .unknown., got values"):
        with_labels(x, edge_index, known_labels=torch.full((6,), 3))
    with pytest.raises(GraphInputError, match=r"or -1 .unknown., got values from -2 to 0"):
        with_labels(x, edge_index, known_labels=torch.tensor([0, -1, -2, 0, -1, 0]))
    assert with_labels(x, edge_index, known_labels=torch.full((6,), -1)).shape == (6, 3)


def test_known_labels_enter_the_model_one_hot_with_zeros_where_unknown():
    x, edge_index = torch.randn(4, 5), torch.tensor([[0, 1, 2], [1, 2, 3]])
    model = NodeClassifier(NodeModelConfig(5, 3, hidden=8, heads=2, label_inputs=True)).eval()
    seen = []
    model.label_encoder.register_forward_hook(lambda _, args, out: seen.append(args[0]))
    model(x, edge_index, known_labels=torch.tensor([2, -1, 0, -1]))
    expected = [[0.0, 0.0, 1.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    assert seen[0].tolist() == expected


@pytest.mark.parametrize(
    ("make", "taken"),
    [
        (lambda: small_config(attention={"dropout": 0.1}), "['dropout']"),
        (lambda: small_config(attention={"mode": "dense", "heads": 2}), "['heads', 'mode']"),
        # the layers' widths come from hidden: passed twice they were a TypeError
        (lambda: small_config(attention={"out_channels": 128}), "['out_channels']"),
        (lambda: NodeModelConfig(5, 3, attention={"in_channels": 64}), "['in_channels']"),
        (lambda: small_config(attention={"in_channels": 16}), "['in_channels']"),
        (lambda: NodeModelConfig(5, 3, attention={"out_channels": 64}), "['out_channels']"),
    ],
)
def test_attention_options_that_the_config_sets_itself_are_refused(make, taken):
    with pytest.raises(GraphInputError, match=rf"sets {re.escape(taken)}, which \w+ sets itself"):
        make()
    assert NodeModelConfig(5, 3, attention={"ffn_ratio": 4.0}).attention == {"ffn_ratio": 4.0}


def test_node_models_refuse_edge_features_by_name():
    with pytest.raises(GraphInputError, match="sets edge_dim, but node models take no edge feat"):
        NodeModelConfig(5, 3, attention={"edge_dim": 4})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"in_channels": 5.0}, "in_channels must be an integer >= 0, got 5.0"),
        ({"num_classes": 2.5}, "num_classes must be an integer >= 1, got 2.5"),
        ({"num_classes": 0}, "num_classes must be an integer >= 1, got 0"),
        ({"in_channels": True}, "in_channels must be an integer >= 0, got True"),
    ],
)
def test_node_model_config_checks_its_widths(fields, message):
    with pytest.raises(GraphInputError, match=re.escape(message)):
        NodeModelConfig(**{"in_channels": 5, "num_classes": 3, **fields})
    config = NodeModelConfig(np.int64(5), np.int64(3))  # NumPy integers, as the layers take
    assert type(config.in_channels) is int and type(config.num_classes) is int
    assert NodeClassifier(NodeModelConfig(0, 2))(
        torch.zeros(3, 0), torch.zeros(2, 0).long()
    ).shape == (3, 2)


def test_a_model_with_bond_features_names_graphs_without_them():
    model = MoleculeModel(small_config()).eval()
    data = FEATURIZER("CCO")
    del data.edge_attr  # a graph built by hand without bond features
    with pytest.raises(GraphInputError, match=r"reads 7 bond features \(data.edge_attr\)"):
        model(data)  # was AttributeError: 'NoneType' object has no attribute 'dim'
    config = MoleculeModelConfig(FEATURIZER.atom_dim, FEATURIZER.bond_dim, layers=0)
    baseline = MoleculeModel(config).eval()
    with pytest.raises(GraphInputError, match=r"data.edge_attr"):
        baseline(data)


def test_descriptors_of_the_wrong_shape_are_named():
    featurizer = MoleculeFeaturizer(descriptors=True)
    model = MoleculeModel(small_config(mol_dim=featurizer.mol_dim)).eval()
    batch = Batch.from_data_list([featurizer(s) for s in ("CCO", "c1ccccc1O")])
    assert model(batch).shape == (2, 1)
    width = featurizer.mol_dim
    for mol_x in (batch.mol_x[:, :-2], batch.mol_x[:1], batch.mol_x.flatten()):
        batch.mol_x = mol_x  # another descriptor set, or one row for two graphs
        expected, got = f"data.mol_x must have shape [2, {width}]", f"got {list(mol_x.shape)}"
        with pytest.raises(GraphInputError, match=f"{re.escape(expected)}.*{re.escape(got)}"):
            model(batch)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool, torch.uint8, torch.int16])
def test_known_labels_that_are_not_integer_class_indices_are_named(dtype):
    x, edge_index = torch.randn(4, 5), torch.tensor([[0, 1, 2], [1, 2, 3]])
    model = NodeClassifier(NodeModelConfig(5, 3, hidden=8, heads=2, label_inputs=True))
    labels = torch.tensor([0, 1, 1, 2]).to(dtype)
    with pytest.raises(GraphInputError, match=rf"int64 \(or int32\) .* got {dtype}"):
        model(x, edge_index, known_labels=labels)  # was an IndexError from the indexing
    assert model(x, edge_index, known_labels=labels.long().int()).shape == (4, 3)


def test_model_config_sizes_become_python_ints_and_rates_must_be_numbers():
    import json

    import numpy as np

    config = MoleculeModelConfig(
        np.int64(10), np.int64(7), num_tasks=np.int32(2), mol_dim=np.int64(3)
    )
    sizes = (config.atom_dim, config.bond_dim, config.num_tasks, config.mol_dim)
    assert sizes == (10, 7, 2, 3) and all(type(size) is int for size in sizes)
    json.dumps(config.to_dict())  # NumPy integers are not JSON
    with pytest.raises(GraphInputError, match="dropout must be at least 0 and below 1, got 0.1"):
        small_config(dropout="0.1")  # was a TypeError from the comparison
    with pytest.raises(GraphInputError, match="input_dropout must be at least 0 and below 1"):
        NodeModelConfig(5, 3, input_dropout=None)
    # pe_dim is read only with a positional encoding
    assert small_config(pe_dim=0).pe_dim == 0
    with pytest.raises(GraphInputError, match="pe_dim must be an integer >= 1, got 0"):
        small_config(pe="rw", pe_dim=0)


@pytest.mark.parametrize("ratio", [-1, 0, 0.01, "2", float("nan")])
def test_a_feed_forward_ratio_without_a_hidden_unit_is_named(ratio):
    from graphattn.nn import GraphTransformerLayer, HybridLayer
    from graphattn.train.molecules import MoleculeTrainConfig, check_train_config

    message = rf"ffn_ratio must be a number > 0 .*round\(ffn_ratio \* 16\) >= 1\), got {ratio!r}"
    for build in (
        lambda: small_config(ffn_ratio=ratio),
        lambda: GraphTransformerLayer(16, 2, ffn_ratio=ratio),
        lambda: HybridLayer(16, 2, ffn_ratio=ratio),
        lambda: check_train_config(MoleculeTrainConfig(model={"hidden": 16, "ffn_ratio": ratio})),
    ):  # -1 was a RuntimeError (negative dimension), 0 and 0.01 a zero-width block
        with pytest.raises(GraphInputError, match=message):
            build()
    assert GraphTransformerLayer(16, 2, ffn_ratio=0.04).ffn[0].out_features == 1


# ---------------------------------------------------------------- documented arguments


def documented_arguments(doc: str | None, sections=("Args", "Attributes")) -> dict[str, str]:
    """Name -> description of the entries of a docstring's ``Args:`` (and ``Attributes:``)
    sections (Google style: ``name: ...``, ``name (type): ...``, ``a, b: ...``,
    ``**kwargs: ...``)."""
    import inspect

    entries: dict[str, str] = {}
    lines = inspect.cleandoc(doc or "").splitlines()
    for at, line in enumerate(lines):
        if line.strip() not in [f"{section}:" for section in sections]:
            continue
        indent, names = None, []
        for entry in lines[at + 1 :]:
            depth = len(entry) - len(entry.lstrip())
            if entry.strip() and depth <= len(line) - len(line.lstrip()):
                break  # the next section
            indent = depth if indent is None and entry.strip() else indent
            head = re.match(r"\s*((?:\*\*)?\w+(?:, \w+)*)(?: \([^)]*\))?: ?(.*)", entry)
            if depth == indent and head:
                names = [name.lstrip("*") for name in head.group(1).split(", ")]
                entries.update({name: head.group(2) for name in names})
            elif entry.strip():
                entries.update({name: entries[name] + " " + entry.strip() for name in names})
    return entries


def shapes_section(doc: str | None) -> str:
    """The text of a docstring's ``Shapes:`` section ("" without one)."""
    found = re.search(r"\n\s*Shapes:\n(.*?)(?:\n\s*\n|$)", doc or "", re.DOTALL)
    return found.group(1) if found else ""


def public_api_classes() -> list[type]:
    from graphattn import datasets, featurize, models, nn, train, transforms

    return [
        *(getattr(nn, name) for name in nn.__all__ if name != "DenseMemoryError"),
        *(getattr(models, name) for name in models.__all__),
        train.MoleculeTrainConfig,
        train.NodeTrainConfig,
        featurize.MoleculeFeaturizer,
        datasets.MoleculeDataset,
        datasets.MoleculeCSV,
        datasets.MoleculeSDF,
        transforms.AddLaplacianPE,
        transforms.AddRandomWalkPE,
        transforms.AddSinusoidalPE,
    ]


def documented_default(text: str):
    """The value a description states as ``(default: X)``, or ``...`` when it states
    none or one that is not a Python literal."""
    import ast

    found = re.search(r"\(default: (.*?)\)(?:\s|$)", text)
    if not found:
        return ...
    literal = found.group(1).replace(":obj:", "").replace("`", "").split(" = ")[-1]
    try:
        return ast.literal_eval(literal)
    except (SyntaxError, ValueError):
        return ...


@pytest.mark.parametrize("cls", public_api_classes(), ids=lambda cls: cls.__name__)
def test_every_argument_of_the_public_classes_is_documented(cls):
    """The constructor's (or dataclass's) arguments appear in the class docstring's
    ``Args``/``Attributes`` (or ``__init__``'s), with the defaults they state, and no
    argument documented there is gone; a module's ``forward`` arguments appear in its
    own ``Args``, the class's, or the class's ``Shapes``."""
    import dataclasses
    import inspect

    def parameters(function) -> dict[str, inspect.Parameter]:
        signature = inspect.signature(function)
        return {name: p for name, p in signature.parameters.items() if name != "self"}

    init = cls.__init__ if "__init__" in vars(cls) else None
    if dataclasses.is_dataclass(cls):
        arguments = {f.name: f.default for f in dataclasses.fields(cls) if f.init}
    else:
        arguments = {name: p.default for name, p in parameters(init).items()} if init else {}
    docs = (cls.__doc__, init.__doc__ if init else None)
    documented = {k: v for doc in docs for k, v in documented_arguments(doc).items()}
    assert [name for name in arguments if name not in documented] == []
    if arguments and not dataclasses.is_dataclass(cls):  # dataclass Attributes may add more
        stale = [a for doc in docs for a in documented_arguments(doc, ("Args",))]
        assert [name for name in stale if name not in arguments] == []
    for name, default in arguments.items():  # None: the documented value is filled in
        stated = documented_default(documented[name])
        assert stated in (..., default) or default is None, f"{name}: documented {stated!r}"
    forward = vars(cls).get("forward")
    if isinstance(cls, type) and issubclass(cls, torch.nn.Module) and forward is not None:
        own = {**documented_arguments(cls.__doc__), **documented_arguments(forward.__doc__)}
        shapes = shapes_section(cls.__doc__)
        missing = [
            name
            for name in parameters(forward)
            if name not in own and not re.search(rf"\b{name}\b", shapes)
        ]
        assert missing == [], f"{cls.__name__}.forward does not document {missing}"


def test_atom_features_of_another_width_are_named():
    # was "mat1 and mat2 shapes cannot be multiplied" from torch (bond and descriptor
    # widths were already checked)
    model = MoleculeModel(small_config()).eval()
    wider = MoleculeFeaturizer(contributions=True)("CCO")
    with pytest.raises(
        GraphInputError,
        match=rf"data.x must be \[num_atoms, {FEATURIZER.atom_dim}\].*got \[3, {wider.x.size(1)}\]",
    ):
        model(wider)
    nodes = NodeClassifier(NodeModelConfig(5, 3, hidden=8, heads=2)).eval()
    edge_index = torch.tensor([[0, 1], [1, 2]])
    with pytest.raises(GraphInputError, match=r"x must be \[N, 5\] .*in_channels=5.*got \[3, 4\]"):
        nodes(torch.randn(3, 4), edge_index)
    assert nodes(torch.randn(3, 5), edge_index).shape == (3, 3)
