"""How close do the fused Triton kernels come to the GPU's memory bandwidth?

Times ``fused_edge_attention`` alone (no projections) on a random graph, N=1,000,000
nodes with in-degree 10 plus self-loops (E=11M), 4 heads x 16, forward and
forward + backward, in fp32, bf16 and fp16 (CUDA events, median of ``--repeats``).
The achieved bandwidth is the minimum traffic of each kernel (below) over its time,
against the copy bandwidth measured on the same card
(:func:`graphattn.bench.machine.copy_bandwidth_gb_s`, bytes read + written).

Minimum traffic (``b`` bytes per node row of H·D values, 8-byte indices):

- forward: q row and out row per node, the lse and the softmax's fp32 max and sum; per
  edge its source index and the k and v rows of the source: ``N (2b + 12H) + E (8 + 2b)``;
- backward, per target: q, dO, the max and sum, delta and dq per node; per edge the
  source index, the k and v rows, and the fp32 ``alpha`` and ``ds`` written:
  ``N (3b + 12H) + E (8 + 2b + 8H)``;
- backward, per source: dk and dv per node; per edge the permutation and target
  indices, ``alpha`` and ``ds`` read back, and the q and dO rows of the target:
  ``2 N b + E (16 + 8H + 2b)``.

The stored runs (``benchmarks/results/kernels_cuda*``) measured kernels that kept ``lse``
in place of the max and sum, and count accordingly: 8H bytes per node fewer in the
forward and 4H in the backward.

Usage: ``python benchmarks/cuda_kernel_bandwidth.py --out DIR``. Without CUDA it says
so and exits 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from _common import machine_info, markdown_table, median_ms, positive_int, write_outputs

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def traffic_bytes(n: int, e: int, heads: int, head_dim: int, element_size: int) -> dict:
    """Minimum bytes of the forward and of the backward kernels (module docstring)."""
    b, h = element_size * heads * head_dim, heads
    forward = n * (2 * b + 12 * h) + e * (8 + 2 * b)
    backward = n * (3 * b + 12 * h) + e * (8 + 2 * b + 8 * h) + 2 * n * b + e * (16 + 8 * h + 2 * b)
    return {"forward": forward, "forward_backward": forward + backward}


def _passes(edges, shape: tuple[int, int, int], dtype: torch.dtype) -> dict:
    """``{pass name: prepare(i) -> step}`` for one dtype (inputs made once)."""
    from graphattn.ops.fused import fused_edge_attention

    q, k, v = (torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True) for _ in "qkv")
    grad = torch.randn(shape, device="cuda", dtype=dtype)

    def forward() -> None:
        fused_edge_attention(q, k, v, edges)

    def forward_backward() -> None:
        out, _lse = fused_edge_attention(q, k, v, edges)
        torch.autograd.grad(out, (q, k, v), grad)

    return {"forward": lambda i: forward, "forward_backward": lambda i: forward_backward}


def measure(num_nodes: int, degree: int, heads: int, head_dim: int, repeats: int) -> dict:
    """Time both passes in every dtype; bandwidth against the measured copy bandwidth."""
    from graphattn.bench.inputs import random_graph
    from graphattn.bench.machine import copy_bandwidth_gb_s
    from graphattn.ops.graph import prepare_edges

    device = torch.device("cuda")
    peak = copy_bandwidth_gb_s(device)
    edges = prepare_edges(random_graph(num_nodes, degree).to(device), num_nodes)
    rows = []
    for name, dtype in DTYPES.items():
        size = torch.finfo(dtype).bits // 8
        traffic = traffic_bytes(num_nodes, edges.num_edges, heads, head_dim, size)
        passes = _passes(edges, (num_nodes, heads, head_dim), dtype)
        for part, prepare in passes.items():
            ms = median_ms(prepare, repeats, warmup=3, device=device)
            gb_s = traffic[part] / ms / 1e6
            rows.append(
                {
                    "dtype": name,
                    "pass": part,
                    "median_ms": ms,
                    "traffic_bytes": traffic[part],
                    "bandwidth_gb_s": gb_s,
                    "fraction_of_copy_bandwidth": gb_s / peak,
                }
            )
            print(f"{name} {part}: {ms:.2f} ms, {gb_s:.0f} GB/s ({gb_s / peak:.0%})", flush=True)
        del passes
        torch.cuda.empty_cache()
    return {
        "num_nodes": num_nodes,
        "allowed_pairs": edges.num_edges,
        "heads": heads,
        "head_dim": head_dim,
        "copy_bandwidth_gb_s": peak,
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=positive_int, default=1_000_000)
    parser.add_argument("--degree", type=positive_int, default=10)
    parser.add_argument("--heads", type=positive_int, default=4)
    parser.add_argument("--head-dim", type=positive_int, default=16)
    parser.add_argument("--repeats", type=positive_int, default=30)
    parser.add_argument("--out", type=Path, default=Path("bench_out"))
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("cuda_kernel_bandwidth.py: no CUDA device: nothing to measure", file=sys.stderr)
        return 1
    machine = machine_info()  # before the timing: its load average is the machine's own
    result = measure(args.nodes, args.degree, args.heads, args.head_dim, args.repeats)
    result["machine"] = machine
    headers = ["dtype", "pass", "median ms", "traffic (GB)", "GB/s", "of copy bandwidth"]
    body = [
        [
            r["dtype"],
            r["pass"],
            f"{r['median_ms']:.2f}",
            f"{r['traffic_bytes'] / 1e9:.2f}",
            f"{r['bandwidth_gb_s']:.0f}",
            f"{r['fraction_of_copy_bandwidth']:.0%}",
        ]
        for r in result["rows"]
    ]
    cuda = result["machine"]["cuda"]
    markdown = (
        "# Fused Triton kernels: achieved memory bandwidth\n\n"
        f"{cuda['name']}, measured copy bandwidth {result['copy_bandwidth_gb_s']:.0f} GB/s; "
        f"N={args.nodes:,}, allowed pairs {result['allowed_pairs']:,}, "
        f"{args.heads} heads x {args.head_dim}.\n\n" + markdown_table(headers, body)
    )
    args.out.mkdir(parents=True, exist_ok=True)
    write_outputs(args.out, "cuda_kernel_bandwidth", result, markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
