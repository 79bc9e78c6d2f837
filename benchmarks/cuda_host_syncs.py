"""Host synchronisations and time of one attention layer on ESOL batches (CUDA).

At molecule size a GPU layer is bound by the host: kernels are launched faster than
they run only while nothing makes the host wait. Every ``cudaStreamSynchronize``
(an ``item()``, ``nonzero``, ``unique``, ``bincount``...) drains that queue. This
script counts them per forward + backward of graphattn's layer (fused kernel) and of
PyG ``TransformerConv`` on ESOL batches of 128 with a fresh ``edge_index`` per step
(``torch.profiler``), and times the step (median of 120, host clock around a
synchronised step).

Usage: ``python benchmarks/cuda_host_syncs.py --data-dir ../shared/datasets --out DIR``
writes ``cuda_host_syncs.json`` (the machine, the settings, one row per implementation)
and ``cuda_host_syncs.md`` to ``DIR``. Without CUDA it says so and exits 0.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from _common import machine_info, markdown_table, run_main, write_outputs

BATCH_SIZE = 128
PROFILED_STEPS = 8
TIMED_STEPS = 120


def measure(data_dir: Path | None, impl: str) -> dict:
    from torch.profiler import ProfilerActivity, profile

    from graphattn.bench.cases import CaseSpec
    from graphattn.bench.inputs import esol_batches, load_esol, project_features
    from graphattn.bench.models import build_attention

    smiles, targets = load_esol(data_dir, download=False)
    batches, _, _ = esol_batches(smiles, targets, BATCH_SIZE, 8)
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
        for i in range(PROFILED_STEPS):
            step(i)
        torch.cuda.synchronize()
    events = prof.key_averages()
    syncs = sum(e.count for e in events if e.key == "cudaStreamSynchronize") / PROFILED_STEPS
    times = []
    for i in range(TIMED_STEPS):
        torch.cuda.synchronize()
        start = time.perf_counter()
        step(i)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return {"impl": impl, "syncs_per_step": syncs, "median_ms": statistics.median(times) * 1e3}


def render(rows: list[dict], machine: dict) -> str:
    body = [[r["impl"], f"{r['median_ms']:.2f}", f"{r['syncs_per_step']:.1f}"] for r in rows]
    return (
        "# Host synchronisations of one attention layer on ESOL batches\n\n"
        f"{machine['cuda']['name']}, graphattn {machine.get('graphattn_commit')}; "
        f"forward + backward, batches of {BATCH_SIZE} molecules, a fresh edge_index per step.\n\n"
        + markdown_table(["implementation", "median ms per step", "host syncs per step"], body)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, help="folder with esol/ (or $GRAPHATTN_DATA)")
    parser.add_argument("--out", type=Path, default=Path("bench_out"))
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("cuda_host_syncs.py: no CUDA device: nothing to measure", file=sys.stderr)
        return 1
    machine = machine_info()  # before the timing: its load average is the machine's own
    rows = [measure(args.data_dir, impl) for impl in ("fused", "pyg")]
    payload = {
        "batch_size": BATCH_SIZE,
        "profiled_steps": PROFILED_STEPS,
        "timed_steps": TIMED_STEPS,
        "rows": rows,
        "machine": machine,
    }
    markdown = render(rows, machine)
    args.out.mkdir(parents=True, exist_ok=True)
    write_outputs(args.out, "cuda_host_syncs", payload, markdown)
    print(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
