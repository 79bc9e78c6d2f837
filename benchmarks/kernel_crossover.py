"""Which sparse CPU kernel is fastest where (the data behind ``kernel="auto"``).

Times forward + backward of one :class:`~graphattn.nn.GraphSelfAttention` layer (F=64,
4 heads x 16) with ``kernel="fused"``, ``"gather"``, ``"reference"`` and (where Numba is
installed) ``"numba"``, with and without
edge features, on ESOL batches (32, 128, 512 molecules) and random graphs of in-degree 10
(N = 500 ... 20,000). Each pass gets a fresh copy of ``edge_index`` (no cached edge
preparation), as in training on a stream of batches, and the kernels take turns call
by call, so that a slow spell of the machine hits all of them. Prints JSON (median of
``--repeats`` passes after warm-up) and writes ``kernel_crossover.json`` / ``.md``.
The thresholds in :data:`graphattn.ops.cost.FUSED_MIN_SIZE_CPU` come from this table.

Usage::

    python benchmarks/kernel_crossover.py --data-dir ../shared/datasets --threads 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch
from _common import (
    add_common_args,
    interleaved_ms,
    machine_info,
    machine_line,
    markdown_table,
    positive_int,
    run_main,
    setup,
    write_outputs,
)

from graphattn.bench.inputs import esol_batches, load_esol, random_graph
from graphattn.nn import GraphSelfAttention
from graphattn.ops.compiled import numba_available
from graphattn.ops.cost import choose_kernel

CHANNELS, HEADS = 64, 4
MOLECULE_BATCHES = (32, 128, 512)
RANDOM_SIZES = (500, 1000, 2000, 5000, 20000)
KERNELS = ("fused", "gather", "reference") + (("numba",) if numba_available() else ())
WARMUP = 3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser, seeds=None)
    parser.add_argument("--repeats", type=positive_int, default=20)
    args = parser.parse_args(argv)
    if args.smoke:
        args.repeats = 2
    return args


def measure(edge_index, num_nodes: int, batch, edge_features: bool, repeats: int) -> dict:
    """Median ms of each kernel on one graph, the kernels interleaved call by call."""
    x = torch.randn(num_nodes, CHANNELS, requires_grad=True)
    edge_attr = torch.randn(edge_index.size(1), CHANNELS) if edge_features else None
    layers = {}
    for kernel in KERNELS:
        torch.manual_seed(0)
        layers[kernel] = GraphSelfAttention(
            CHANNELS,
            CHANNELS,
            heads=HEADS,
            kernel=kernel,
            edge_dim=CHANNELS if edge_features else None,
        )

    def calls_of(layer: GraphSelfAttention):
        def prepare(i: int):
            fresh = edge_index.clone()  # no cached edge preparation
            return lambda: layer(x, fresh, edge_attr, batch).sum().backward()

        return prepare

    samples = interleaved_ms({k: calls_of(layer) for k, layer in layers.items()}, repeats, WARMUP)
    times = {kernel: statistics.median(values) for kernel, values in samples.items()}
    layer = layers["reference"]
    pairs = layer.allowed_edges(edge_index, num_nodes, batch).num_edges
    size = pairs * CHANNELS
    return {
        "num_nodes": num_nodes,
        "allowed_pairs": pairs,
        "size_EHD": size,
        "edge_features": edge_features,
        **{f"{kernel}_ms": times[kernel] for kernel in KERNELS},
        "fused_over_reference": times["fused"] / times["reference"],
        "fused_over_gather": times["fused"] / times["gather"],
        "gather_over_reference": times["gather"] / times["reference"],
        **({"numba_over_gather": times["numba"] / times["gather"]} if "numba" in times else {}),
        "auto_chooses": choose_kernel(
            pairs, HEADS, CHANNELS // HEADS, edge_features, "cpu", num_nodes, "numba" in times
        ),
    }


def graphs(args: argparse.Namespace):
    """``(name, edge_index, num_nodes, batch)`` of every case."""
    smiles, targets = load_esol(args.data_dir, download=False)
    for size in MOLECULE_BATCHES[:1] if args.smoke else MOLECULE_BATCHES:
        (b,), _, _ = esol_batches(smiles, targets, size, 1)
        yield f"ESOL batch of {size}", b.edge_index, b.x.size(0), b.batch
    for n in RANDOM_SIZES[:1] if args.smoke else RANDOM_SIZES:
        yield f"random N={n}, in-degree 10", random_graph(n, 10), n, None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup(args)
    machine = machine_info()  # before the timing: its load average is the machine's own
    rows = []
    for name, edge_index, num_nodes, batch in graphs(args):
        for edge_features in (False, True):
            row = {
                "case": name,
                **measure(edge_index, num_nodes, batch, edge_features, args.repeats),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    payload = {"machine": machine, "smoke": args.smoke, "repeats": args.repeats, "rows": rows}
    table = markdown_table(
        [
            "case",
            "edge features",
            "E·H·D",
            "fused ms",
            "gather ms",
            "reference ms",
            "fused / gather",
            "gather / ref",
            "numba ms",
            "numba / gather",
            "auto",
        ],
        [
            [
                r["case"],
                "yes" if r["edge_features"] else "no",
                f"{r['size_EHD'] / 1e6:.2f}M",
                f"{r['fused_ms']:.2f}",
                f"{r['gather_ms']:.2f}",
                f"{r['reference_ms']:.2f}",
                f"{r['fused_over_gather']:.2f}",
                f"{r['gather_over_reference']:.2f}",
                f"{r['numba_ms']:.2f}" if "numba_ms" in r else "-",
                f"{r['numba_over_gather']:.2f}" if "numba_ms" in r else "-",
                r["auto_chooses"],
            ]
            for r in rows
        ],
    )
    markdown = "\n\n".join(
        [
            "# Sparse CPU kernels, forward + backward of one layer",
            machine_line(payload["machine"], args.smoke),
            table,
        ]
    )
    write_outputs(args.out, "kernel_crossover", payload, markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
