"""Host synchronisations and time of one attention layer on ESOL batches (CUDA).

At molecule size a GPU layer is bound by the host: kernels are launched faster than
they run only while nothing makes the host wait. Every ``cudaStreamSynchronize``
(an ``item()``, ``nonzero``, ``unique``, ``bincount``...) drains that queue. This
script counts them per forward + backward of graphattn's layer (fused kernel) and of
PyG ``TransformerConv`` on ESOL batches of 128 with a fresh ``edge_index`` per step
(``torch.profiler``), and times the step (median of 120, host clock around a
synchronised step).

Usage: ``python benchmarks/cuda_host_syncs.py --data-dir ../shared/datasets``. Without
CUDA it says so and exits 0.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from _common import run_main


def measure(data_dir: Path | None, impl: str, steps: int = 120) -> dict:
    from torch.profiler import ProfilerActivity, profile

    from graphattn.bench.cases import CaseSpec
    from graphattn.bench.inputs import esol_batches, load_esol, project_features
    from graphattn.bench.models import build_attention

    smiles, targets = load_esol(data_dir, download=False)
    batches, _, _ = esol_batches(smiles, targets, 128, 8)
    device = torch.device("cuda")
    model = build_attention(CaseSpec("molecules", impl, device="cuda")).to(device)
    graphs = [
        (project_features(b.x, 64).to(device), b.edge_index.to(device), b.batch.to(device))
        for b in batches
    ]

    def step(i: int) -> None:
        x, edge_index, batch = graphs[i % len(graphs)]
        model(x.clone().requires_grad_(), edge_index.clone(), batch).sum().backward()

    for i in range(10):
        step(i)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(8):
            step(i)
        torch.cuda.synchronize()
    events = prof.key_averages()
    syncs = sum(e.count for e in events if e.key == "cudaStreamSynchronize") / 8
    times = []
    for i in range(steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        step(i)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return {"impl": impl, "syncs_per_step": syncs, "median_ms": statistics.median(times) * 1e3}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, help="folder with esol/ (or $GRAPHATTN_DATA)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to measure")
        return 0
    for impl in ("fused", "pyg"):
        r = measure(args.data_dir, impl)
        print(f"{impl}: {r['median_ms']:.2f} ms per step, {r['syncs_per_step']:.1f} host syncs")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
