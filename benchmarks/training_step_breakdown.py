"""Where the time of a molecule training step goes: graphattn vs the PyG mirror.

One AdamW step (``graphattn.optim.adamw``, the trainers' fused AdamW, for both models)
of :class:`~graphattn.models.MoleculeModel` (the library default architecture) and of
:class:`~graphattn.bench.models.PyGMoleculeModel` (the same architecture on PyG
``TransformerConv``) on ESOL batches of 128, each step with a fresh copy of
``edge_index`` (no cached edge preparation), plus variants that isolate the attention:

* ``graphattn`` / ``pyg``: the full models;
* ``graphattn_reference_kernel``: graphattn with ``kernel="reference"`` (autograd through
  gather / segment softmax / scatter) instead of the kernel that ``kernel="auto"`` runs
  at this size (the Numba kernel where Numba is installed, else the gather kernel: the
  same computation);
* ``graphattn_projections_only``: every attention layer keeps its input checks, edge
  preparation, projections (W_q, W_k, W_v, W_O, edge) and one scatter of the edge terms,
  but no scores, softmax or weighted sums: the floor for *any* attention kernel with
  this architecture;
* ``graphattn_no_attention`` / ``pyg_no_attention``: the attention layers replaced by
  the identity (encoders, norms, feed-forward blocks, dropout, readout, head, optimizer);
* ``pyg_graphattn_dropout``: the PyG mirror with graphattn's CPU dropout
  (:class:`graphattn.nn.Dropout`) in place of ``torch.nn.Dropout``, which isolates what
  the cheaper dropout masks save from what the attention layers save.

The models take turns step by step (``--repeats`` x ``--rounds`` steps each, after
warm-up): median step time, the median of each block of ``--repeats`` steps
(``rounds_ms``, the spread), and the median over steps of each model's ratio to the PyG
step next to it (``paired_over_pyg``). Also times two shared components on their own
(``components_ms``): one dropout (p=0.1) of the feed-forward hidden layer ``[N, 128]``
of a batch, ``torch.nn.functional.dropout`` against :func:`graphattn.ops.dropout.dropout`,
and one AdamW step over the model's parameters, torch's default (a per-parameter loop on
CPU) against the fused one. And one attention layer alone (``layer_ms``): graphattn's
(with and without its self-loops) and ``TransformerConv``, forward + backward on the
first batch with bond features, a fresh ``edge_index`` per call, the three interleaved
call by call. Prints JSON and writes ``training_step_breakdown.json``.

Usage::

    python benchmarks/training_step_breakdown.py --data-dir ../shared/datasets --threads 2
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys

import torch
from _common import (
    add_common_args,
    interleaved_ms,
    machine_info,
    median_ms,
    positive_int,
    run_main,
    setup,
    write_outputs,
)
from torch import Tensor, nn

from graphattn.bench.inputs import esol_batches, load_esol
from graphattn.bench.models import build_molecule_model
from graphattn.nn.dropout import Dropout
from graphattn.ops.dropout import dropout
from graphattn.ops.graph import validate_node_features
from graphattn.optim import adamw

BATCH_SIZE, BATCHES = 128, 8


class Identity(nn.Module):
    """Stands in for an attention layer: returns the node features unchanged."""

    def forward(self, x: Tensor, *args, **kwargs) -> Tensor:
        return x


class ProjectionsOnly(nn.Module):
    """A :class:`GraphSelfAttention` without its kernel: checks, edges, projections."""

    def __init__(self, attention: nn.Module) -> None:
        super().__init__()
        self.attention = attention

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr=None, batch=None, **kwargs):
        a = self.attention
        validate_node_features(x, a.in_channels)
        edges = a.allowed_edges(edge_index, x.size(0), batch)
        terms = a._edge_terms(edges, edge_attr)
        q, k, v = a._project(x)
        mixed = (q + k + v).reshape(x.size(0), -1)
        if terms is not None:
            mixed = mixed.index_add(0, edges.dst, terms.reshape(edges.num_edges, -1))
        return a.lin_out(mixed)


def build(name: str, atom_dim: int, bond_dim: int) -> nn.Module:
    impl = "pyg" if name.startswith("pyg") else "graphattn"
    model = build_molecule_model(impl, atom_dim, bond_dim, max_dense_bytes=1 << 28, seed=0)
    for block in model.layers:
        if name == "graphattn_no_attention":
            block.attention = Identity()
        elif name == "graphattn_projections_only":
            block.attention = ProjectionsOnly(block.attention)
        elif name == "pyg_no_attention":
            block.conv = Identity()
        elif name == "graphattn_reference_kernel":
            block.attention.kernel = "reference"
    if name == "pyg_graphattn_dropout":
        swap_dropout(model)
    return model


def swap_dropout(model: nn.Module) -> None:
    """Replace every ``torch.nn.Dropout`` in ``model`` by graphattn's, same ``p``."""
    for parent in list(model.modules()):
        for child_name, child in parent.named_children():
            if type(child) is nn.Dropout:
                setattr(parent, child_name, Dropout(child.p))


MODELS = (
    "graphattn",
    "graphattn_reference_kernel",
    "graphattn_projections_only",
    "graphattn_no_attention",
    "pyg",
    "pyg_no_attention",
    "pyg_graphattn_dropout",
)


def interleaved_steps_ms(
    models: dict[str, nn.Module], batches: list, steps: int, warmup: int = 5
) -> dict[str, list[float]]:
    """Milliseconds of ``steps`` training steps of each model, the models taking turns
    step by step (so that the machine's slow spells hit every model alike)."""

    def steps_of(model: nn.Module):
        optimizer = adamw(model.parameters(), lr=1e-3)
        model.train()

        def prepare(i: int):
            b = batches[i % len(batches)]
            data = dataclasses.replace(b, edge_index=b.edge_index.clone())

            def step() -> None:
                optimizer.zero_grad(set_to_none=True)
                nn.functional.mse_loss(model(data), data.y).backward()
                optimizer.step()

            return step

        return prepare

    prepares = {name: steps_of(model) for name, model in models.items()}
    return interleaved_ms(prepares, steps, warmup)


def component_ms(batch, atom_dim: int, bond_dim: int, repeats: int) -> dict[str, float]:
    """Median ms of the dropouts and the AdamW steps the two models' steps differ in."""
    hidden = torch.randn(batch.x.size(0), 128)

    def call(fn):
        return lambda i: fn

    model = build("graphattn", atom_dim, bond_dim)
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    loop = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    fused = adamw(model.parameters(), lr=1e-3)
    timed = {
        "torch_dropout": lambda: nn.functional.dropout(hidden, 0.1),
        "graphattn_dropout": lambda: dropout(hidden, 0.1),
        "adamw_per_parameter": loop.step,
        "adamw_fused": fused.step,
    }
    return {name: median_ms(call(fn), repeats * 5, warmup=10) for name, fn in timed.items()}


def layer_ms(batch, repeats: int) -> dict[str, float]:
    """Median ms of one attention layer (64 channels, 4 heads, 64-wide edge features)."""
    from torch_geometric.nn import TransformerConv

    from graphattn.nn.attention import GraphSelfAttention

    torch.manual_seed(0)
    x = torch.randn(batch.x.size(0), 64, requires_grad=True)
    edge_attr = torch.randn(batch.edge_index.size(1), 64, requires_grad=True)
    layers = {
        "graphattn": GraphSelfAttention(64, 64, heads=4, edge_dim=64),
        "graphattn_no_self_loops": GraphSelfAttention(
            64, 64, heads=4, edge_dim=64, add_self_loops=False
        ),
        "pyg_transformer_conv": TransformerConv(64, 16, heads=4, edge_dim=64),
    }

    def calls_of(layer: nn.Module):
        def prepare(i: int):
            edge_index = batch.edge_index.clone()  # no cached edge preparation
            return lambda: layer(x, edge_index, edge_attr).sum().backward()

        return prepare

    prepares = {name: calls_of(layer) for name, layer in layers.items()}
    times = interleaved_ms(prepares, repeats * 5, warmup=10)
    return {name: statistics.median(values) for name, values in times.items()}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser, seeds=None)
    parser.add_argument("--repeats", type=positive_int, default=40)
    parser.add_argument("--rounds", type=positive_int, default=3)
    args = parser.parse_args(argv)
    if args.smoke:
        args.repeats, args.rounds = 3, 1
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup(args)
    machine = machine_info()  # before the timing: its load average is the machine's own
    smiles, targets = load_esol(args.data_dir, download=False)
    batches, atom_dim, bond_dim = esol_batches(smiles, targets, BATCH_SIZE, BATCHES)
    models = {name: build(name, atom_dim, bond_dim) for name in MODELS}
    steps = interleaved_steps_ms(models, batches, args.repeats * args.rounds)
    median = {name: statistics.median(values) for name, values in steps.items()}
    rounds = {  # the median of each consecutive block of --repeats steps: the spread
        name: [
            statistics.median(values[r * args.repeats : (r + 1) * args.repeats])
            for r in range(args.rounds)
        ]
        for name, values in steps.items()
    }
    paired = {  # median over steps of the ratio to the PyG step taken just before or after
        name: statistics.median(v / p for v, p in zip(values, steps["pyg"], strict=True))
        for name, values in steps.items()
    }
    components = component_ms(batches[0], atom_dim, bond_dim, args.repeats)
    layers = layer_ms(batches[0], args.repeats)
    pyg = median["pyg"]
    payload = {
        "machine": machine,
        "smoke": args.smoke,
        "batch_size": BATCH_SIZE,
        "repeats": args.repeats,
        "rounds": args.rounds,
        "median_step_ms": median,
        "rounds_ms": rounds,
        "components_ms": components,
        "layer_ms": layers,
        "over_pyg": {name: value / pyg for name, value in median.items()},
        "paired_over_pyg": paired,
        "attention_ms": {
            "graphattn": median["graphattn"] - median["graphattn_no_attention"],
            "graphattn_projections_only": median["graphattn_projections_only"]
            - median["graphattn_no_attention"],
            "pyg": pyg - median["pyg_no_attention"],
        },
    }
    write_outputs(args.out, "training_step_breakdown", payload)
    print(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
