"""One attention layer, forward + backward: graphattn fused vs reference vs PyG TransformerConv.

The layer: 64 input channels, 4 heads x 16, on a random graph where every node has 10
incoming edges (N=20,000/E=200,000 and N=100,000/E=1,000,000 by default). graphattn's
layer has the same four projections as ``TransformerConv(64, 16, heads=4)`` (query,
key, value, and an output projection in place of its ``lin_skip`` root weight).

Each (size, implementation) runs in ``--processes`` fresh subprocesses (medians are
reported, and every process's figures):

- time: median over ``--repeats`` forward+backward steps after one warm-up step;
- memory: ``extra_peak_mib`` is the peak RSS over the timed (steady-state) steps minus
  the RSS after set-up (imports, one step on a 100-node graph to load lazily loaded
  library code, inputs and model built), so structures cached by the warm-up count.
  The peak is reset through ``/proc/self/clear_refs`` after the warm-up step (Linux;
  elsewhere ``ru_maxrss`` is used). ``extra_peak_with_warm_up_mib`` also counts the
  warm-up step, with graphattn's one-off graph preparation (sort, dedup, CSR).

Usage::

    python benchmarks/ops_fused_vs_pyg.py [--sizes 20000 100000] [--repeats 5]
        [--processes 3] [--threads T] [--impls fused reference pyg]

Prints JSON: per size and implementation ``time_s`` and ``extra_peak_mib``, and the
ratios of graphattn fused to PyG. Peak RSS depends on glibc's heap layout, which varies
between processes (measured spread up to ~1.4x at N=100k), hence several processes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from _common import machine_info, positive_int
from torch import Tensor, nn
from torch_geometric.nn import TransformerConv

from graphattn.ops.attention import reference_edge_attention
from graphattn.ops.fused import fused_edge_attention
from graphattn.ops.graph import prepare_edges

IMPLEMENTATIONS = ("fused", "reference", "pyg")
CHANNELS, HEADS, HEAD_DIM, IN_DEGREE = 64, 4, 16, 10


class EdgeAttentionLayer(nn.Module):
    """q/k/v projections, edge-restricted attention, output projection."""

    def __init__(self, fused: bool) -> None:
        super().__init__()
        self.query, self.key, self.value, self.out = (
            nn.Linear(CHANNELS, HEADS * HEAD_DIM) for _ in range(4)
        )
        self.fused = fused

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        n = x.size(0)
        edges = prepare_edges(edge_index, n, add_self_loops=False)  # cached per graph
        q, k, v = (lin(x).view(n, HEADS, HEAD_DIM) for lin in (self.query, self.key, self.value))
        attend = fused_edge_attention if self.fused else reference_edge_attention
        out, _ = attend(q, k, v, edges)
        return self.out(out.reshape(n, HEADS * HEAD_DIM))


def build(impl: str, num_nodes: int) -> tuple[nn.Module, Tensor, Tensor]:
    torch.manual_seed(0)
    x = torch.randn(num_nodes, CHANNELS)
    src = torch.randint(0, num_nodes, (num_nodes * IN_DEGREE,))
    dst = torch.arange(num_nodes).repeat_interleave(IN_DEGREE)
    edge_index = torch.stack([src, dst])
    if impl == "pyg":
        model = TransformerConv(CHANNELS, HEAD_DIM, heads=HEADS)
    else:
        model = EdgeAttentionLayer(fused=impl == "fused")
    return model, x, edge_index


def step(model: nn.Module, x: Tensor, edge_index: Tensor) -> None:
    model.zero_grad(set_to_none=True)
    model(x, edge_index).square().mean().backward()


def current_rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def reset_peak() -> bool:
    """Reset the peak RSS (VmHWM); False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss(resettable: bool) -> int:
    if resettable:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def run_case(impl: str, num_nodes: int, repeats: int) -> dict:
    """Time and memory of one implementation at one size (call in a fresh process)."""
    step(*build(impl, 100))  # loads lazily loaded code (e.g. MKL's sparse kernels)
    model, x, edge_index = build(impl, num_nodes)
    baseline = current_rss()
    step(model, x, edge_index)  # warm-up (and one-off graph preparation)
    warm_up_peak = peak_rss(False)
    resettable = reset_peak()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step(model, x, edge_index)
        times.append(time.perf_counter() - start)
    steady_peak = peak_rss(resettable)
    return {
        "time_s": statistics.median(times),
        "extra_peak_mib": (steady_peak - baseline) / 2**20,
        "extra_peak_with_warm_up_mib": (max(steady_peak, warm_up_peak) - baseline) / 2**20,
        "peak_reset": resettable,
    }


def run_in_subprocess(impl: str, num_nodes: int, repeats: int, threads: int | None) -> dict:
    command = [
        sys.executable,
        __file__,
        "--case",
        impl,
        "--sizes",
        str(num_nodes),
        "--repeats",
        str(repeats),
    ]
    if threads:
        command += ["--threads", str(threads)]
    repo = str(Path(__file__).resolve().parents[1])
    path = os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
        check=True,
    )
    return json.loads(result.stdout)


def run_processes(impl: str, num_nodes: int, args: argparse.Namespace) -> dict:
    """Medians over ``args.processes`` fresh processes (glibc's heap layout, hence the
    peak RSS, varies from one process to the next), with every process's figures."""
    runs = [
        run_in_subprocess(impl, num_nodes, args.repeats, args.threads)
        for _ in range(args.processes)
    ]
    summary = {
        key: statistics.median(run[key] for run in runs)
        for key in ("time_s", "extra_peak_mib", "extra_peak_with_warm_up_mib")
    }
    summary["per_process"] = [
        {key: round(value, 3) if isinstance(value, float) else value for key, value in r.items()}
        for r in runs
    ]
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=positive_int, nargs="+", default=[20_000, 100_000])
    parser.add_argument("--repeats", type=positive_int, default=5)
    parser.add_argument("--processes", type=positive_int, default=3)
    parser.add_argument("--threads", type=positive_int, default=None)
    parser.add_argument("--impls", nargs="+", choices=IMPLEMENTATIONS, default=IMPLEMENTATIONS)
    parser.add_argument("--case", choices=IMPLEMENTATIONS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.case:
        print(json.dumps(run_case(args.case, args.sizes[0], args.repeats)))
        return

    machine = machine_info()  # before the timing: its load average is the machine's own
    results = {}
    for n in args.sizes:
        cases = {impl: run_processes(impl, n, args) for impl in args.impls}
        if "fused" in cases and "pyg" in cases:
            fused, pyg = cases["fused"], cases["pyg"]
            cases["fused_over_pyg"] = {
                "time": fused["time_s"] / pyg["time_s"],
                "extra_peak": fused["extra_peak_mib"] / pyg["extra_peak_mib"],
                "extra_peak_with_warm_up": fused["extra_peak_with_warm_up_mib"]
                / pyg["extra_peak_with_warm_up_mib"],
            }
        results[f"N={n},E={n * IN_DEGREE}"] = cases
    meta = {
        "machine": machine,
        "threads": args.threads or torch.get_num_threads(),
        "repeats": args.repeats,
        "processes": args.processes,
    }
    print(json.dumps({"meta": meta, "results": results}, indent=2))


if __name__ == "__main__":
    main()
