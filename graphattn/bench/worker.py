"""Run one benchmark case, in this process or in a fresh child process.

A case: build its inputs and model, run ``warmup`` untimed passes, then one pass on
a freshly copied ``edge_index`` (so graphattn's per-graph preparation cache misses)
whose time is ``cold_seconds`` and whose extra peak memory is reported, then
``repeats`` timed passes (the median is ``median_seconds``). Random-graph suites keep
the same ``edge_index`` across the timed passes (a fixed graph, as in full-graph
training); the molecule suites use a new copy of each batch's ``edge_index`` every
pass, as training on a stream of batches would.

On CPU every case runs in a fresh process (peak RSS is per process): a child forked
from a *forkserver* that has imported torch and PyG once (and sees no GPU), so a case starts in
milliseconds. Run a single case by hand with::

    python -m graphattn.bench.worker --suite scaling --impl fused --nodes 20000 --degree 10
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import multiprocessing as mp
import os
import random
import statistics
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from graphattn.bench.cases import GRAPH_SUITES, LAYER_IMPLS, MODEL_IMPLS, SUITES, CaseSpec
from graphattn.bench.inputs import (
    GraphInput,
    MoleculeBatch,
    project_features,
    random_features,
    random_graph,
)
from graphattn.bench.measure import memory_probe, time_pass
from graphattn.nn.attention import DenseMemoryError
from graphattn.optim import adamw

__all__ = [
    "MoleculeData",
    "describe_error",
    "failed_result",
    "paired_failure",
    "paired_layer_times",
    "run_case",
    "run_isolated",
    "skipped_result",
]

Prepare = Callable[[int, bool], Callable[[], None]]


@dataclass
class MoleculeData:
    """ESOL batches shared by the molecule suites."""

    batches: list[MoleculeBatch]
    atom_dim: int
    bond_dim: int


# --------------------------------------------------------------------------- results


def _base_result(spec: CaseSpec) -> dict:
    return {
        "name": spec.name,
        "group": spec.group,
        "suite": spec.suite,
        "impl": spec.impl,
        "device": spec.device,
        "num_nodes": spec.num_nodes,
        "in_degree": spec.in_degree,
    }


def skipped_result(spec: CaseSpec, reason: str) -> dict:
    """The record of a case that did not run, with why."""
    return {**_base_result(spec), "status": "skipped", "skipped": True, "reason": reason}


def failed_result(spec: CaseSpec, reason: str, trace: str | None = None) -> dict:
    """The record of a case that crashed or timed out (also counted as skipped)."""
    record = {**_base_result(spec), "status": "failed", "skipped": True, "reason": reason}
    if trace is not None:
        record["traceback"] = trace
    return record


def describe_error(err: BaseException) -> str:
    """``"TypeName: message"`` of an exception, the reason of a failed record."""
    return f"{type(err).__name__}: {err}"


def short_traceback(err: BaseException, limit: int = 4000) -> str:
    """The end of ``err``'s formatted traceback (where it was raised), at most ``limit`` chars."""
    return "".join(traceback.format_exception(err))[-limit:]


# --------------------------------------------------------------------------- inputs


def _graph_inputs(spec: CaseSpec, molecules: MoleculeData | None) -> list[GraphInput]:
    """The graph(s) the layer of ``spec`` runs on, on the CPU."""
    if spec.suite in GRAPH_SUITES:
        edge_index = random_graph(spec.num_nodes, spec.in_degree, spec.seed)
        x = random_features(spec.num_nodes, spec.in_channels, spec.seed)
        return [GraphInput(x, edge_index)]
    if molecules is None or not molecules.batches:
        raise RuntimeError("molecule suite without molecule data")
    return [
        GraphInput(project_features(b.x, spec.in_channels, spec.seed), b.edge_index, b.batch)
        for b in molecules.batches
    ]


def _graph_info(spec: CaseSpec, model: nn.Module, graphs: list[GraphInput]) -> dict:
    """Sizes and densities (means over batches), and what ``mode="auto"`` picks."""
    from graphattn.ops.dense import dense_layout, dense_memory_bytes
    from graphattn.ops.graph import prepare_edges

    rows = []
    for g in graphs:
        n = g.x.size(0)
        edges = prepare_edges(g.edge_index, n, add_self_loops=True, cache=False)
        layout = dense_layout(n, g.batch, g.x.device)
        padded = layout.num_graphs * layout.max_nodes**2
        dense = dense_memory_bytes(layout.num_graphs, layout.max_nodes, spec.heads, spec.head_dim)
        row = {
            "num_nodes": n,
            "num_edges": g.edge_index.size(1),
            "allowed_pairs": edges.num_edges,
            "padded_pairs": padded,
            "density": edges.num_edges / padded,
            "dense_estimate_bytes": dense,
        }
        if spec.impl == "auto":
            row["auto_choice"] = model.layer.resolve_mode(edges, layout, g.x.device, g.x.dtype)
        rows.append(row)
    return _average_rows(rows)


def _average_rows(rows: list[dict]) -> dict:
    """Numbers averaged over batches (exact for one graph); choices joined."""
    info: dict = {}
    for key in rows[0]:
        values = [r[key] for r in rows]
        if isinstance(values[0], str):
            info[key] = "/".join(sorted(set(values)))
        elif len(values) == 1:
            info[key] = values[0]
        else:
            info[key] = statistics.fmean(values)
    info["graphs_per_pass"] = len(rows)
    return info


# --------------------------------------------------------------------------- passes


def _layer_pass(spec: CaseSpec, model: nn.Module, graphs: list[GraphInput]) -> Prepare:
    """``prepare(i, cold)``: the forward+backward step on graph ``i`` (mod the count)."""

    def prepare(i: int, cold: bool) -> Callable[[], None]:
        g = graphs[i % len(graphs)]
        edge_index = g.edge_index.clone() if cold else g.edge_index
        x = g.x.detach().clone().requires_grad_(True)
        model.zero_grad(set_to_none=True)

        def step() -> None:
            model(x, edge_index, g.batch).sum().backward()

        return step

    return prepare


def _training_pass(model: nn.Module, batches: list[MoleculeBatch]) -> Prepare:
    """``prepare(i, cold)``: one AdamW step of the molecule model on batch ``i``."""
    optimizer = adamw(model.parameters(), lr=1e-3)  # the trainers' optimizer, for both models
    model.train()

    def prepare(i: int, cold: bool) -> Callable[[], None]:
        b = batches[i % len(batches)]
        data = dataclasses.replace(b, edge_index=b.edge_index.clone()) if cold else b

        def step() -> None:
            optimizer.zero_grad(set_to_none=True)
            loss = nn.functional.mse_loss(model(data), data.y)
            loss.backward()
            optimizer.step()

        return step

    return prepare


def _time_and_memory(spec: CaseSpec, prepare: Prepare, timed: int, always_cold: bool) -> dict:
    """Warm up, measure the cold pass (time + extra peak memory), then time the rest."""
    device = torch.device(spec.device)
    for i in range(spec.warmup):
        prepare(i, always_cold)()
    probe = memory_probe(device)
    step = prepare(spec.warmup, True)
    probe.start()
    cold = time_pass(step, device)
    extra = probe.extra_peak()
    del step
    times = [time_pass(prepare(spec.warmup + i, always_cold), device) for i in range(timed)]
    return {
        "median_seconds": statistics.median(times),
        "times": times,
        "cold_seconds": cold,
        "peak_extra_bytes": extra,
        "memory_method": probe.method,
    }


# --------------------------------------------------------------------------- cases


def _layer_case(spec: CaseSpec, molecules: MoleculeData | None) -> dict:
    from graphattn.bench.models import build_attention

    device = torch.device(spec.device)
    graphs = [g.to(device) for g in _graph_inputs(spec, molecules)]
    model = build_attention(spec).to(device)
    info = _graph_info(spec, model, graphs)
    molecular = spec.suite not in GRAPH_SUITES
    timed = max(spec.repeats, len(graphs)) if molecular else spec.repeats
    measured = _time_and_memory(spec, _layer_pass(spec, model, graphs), timed, molecular)
    return {**info, **measured}


def _training_case(spec: CaseSpec, molecules: MoleculeData | None) -> dict:
    from graphattn.bench.models import build_molecule_model

    if molecules is None or not molecules.batches:
        raise RuntimeError("training suite without molecule data")
    device = torch.device(spec.device)
    batches = [_batch_to(b, device) for b in molecules.batches]
    model = build_molecule_model(
        spec.impl, molecules.atom_dim, molecules.bond_dim, spec.max_dense_bytes, spec.seed
    ).to(device)
    info = {
        "num_nodes": statistics.fmean(b.x.size(0) for b in batches),
        "num_edges": statistics.fmean(b.edge_index.size(1) for b in batches),
        "graphs_per_pass": len(batches),
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    timed = max(spec.repeats, len(batches))
    measured = _time_and_memory(spec, _training_pass(model, batches), timed, True)
    return {**info, **measured}


def paired_layer_times(
    specs: list[CaseSpec], molecules: MoleculeData | None = None, rounds: int = 12
) -> dict[str, dict]:
    """Time the implementations of one case group *interleaved*, in this process.

    Every implementation runs on the same inputs; each round times one pass of each, in
    a fresh (seeded) random order, so that drifts of the machine (frequency, other
    load) and the after-effects of one pass on the next (a dense pass's large frees,
    say) hit all of them alike. (A rotated order would not: it keeps each
    implementation's predecessor fixed.) Separate processes, as in :func:`run_case`, can
    differ by more than the 10% that ``mode="auto"`` is judged by.

    Args:
        specs: cases of one group (same suite and size), differing only in ``impl``.
        molecules: ESOL batches for the molecule suite.
        rounds: timed rounds, after ``specs[0].warmup`` untimed ones.

    Returns:
        ``{impl: {"median_seconds", "times"}}``, the auto entry also with its graph
        info (``auto_choice``, ``density``, ...); an implementation over the dense memory
        budget or out of memory gets ``{"skipped": True, "reason": ...}``, one that
        raised ``{"skipped": True, "failed": True, "reason": "TypeName: message"}``.
        An error building the group's inputs is raised (the caller records it).
    """
    first = specs[0]
    if first.threads:
        torch.set_num_threads(first.threads)
    device = torch.device(first.device)
    graphs = [g.to(device) for g in _graph_inputs(first, molecules)]
    cold = first.suite not in GRAPH_SUITES
    passes, results = {}, {}
    for spec in specs:
        prepare, outcome = _paired_setup(spec, graphs, cold)
        results[spec.impl] = outcome
        if prepare is not None:
            passes[spec.impl] = prepare
    _paired_rounds(passes, results, first, rounds, cold)
    for impl in passes:
        results[impl]["median_seconds"] = statistics.median(results[impl]["times"])
    return results


def _paired_setup(
    spec: CaseSpec, graphs: list[GraphInput], cold: bool
) -> tuple[Prepare | None, dict]:
    """Build and warm up one implementation of the paired phase: ``(prepare, its record)``,
    ``prepare`` None when it was skipped (over budget, out of memory) or raised."""
    from graphattn.bench.models import build_attention

    device = torch.device(spec.device)
    try:
        model = build_attention(spec).to(device)
        prepare = _layer_pass(spec, model, graphs)
        for i in range(spec.warmup):
            prepare(i, cold)()
        outcome: dict = {"times": []}
        if spec.impl == "auto":
            outcome.update(_graph_info(spec, model, graphs))
    except DenseMemoryError as err:
        return None, {"skipped": True, "reason": f"over the dense memory budget: {err}"}
    except (torch.OutOfMemoryError, MemoryError) as err:
        if device.type == "cuda":
            torch.cuda.empty_cache()
        return None, {"skipped": True, "reason": f"out of memory: {err}"[:300]}
    except Exception as err:  # recorded, the other implementations still run
        return None, paired_failure(err)
    return prepare, outcome


def paired_failure(err: BaseException) -> dict:
    """A paired-phase record of an implementation that raised."""
    return {"skipped": True, "failed": True, "reason": describe_error(err)}


def _paired_rounds(
    passes: dict[str, Prepare], results: dict[str, dict], first: CaseSpec, rounds: int, cold: bool
) -> None:
    """Time ``rounds`` rounds, the implementations in a fresh random order each round;
    one that raises is recorded as failed (its times so far kept) and leaves the rounds."""
    device = torch.device(first.device)
    order = random.Random(first.seed)
    for r in range(rounds):
        impls = list(passes)
        order.shuffle(impls)
        for impl in impls:
            try:
                step = passes[impl](first.warmup + r, cold)
                results[impl]["times"].append(time_pass(step, device))
            except Exception as err:  # a crash must not end the phase
                results[impl].update(paired_failure(err))
                del passes[impl]


def _batch_to(b: MoleculeBatch, device: torch.device) -> MoleculeBatch:
    moved = {
        f.name: getattr(b, f.name).to(device)
        for f in dataclasses.fields(b)
        if isinstance(getattr(b, f.name), torch.Tensor)
    }
    return dataclasses.replace(b, **moved)


def run_case(spec: CaseSpec, molecules: MoleculeData | None = None) -> dict:
    """Measure one case in this process.

    Dense over its budget or out of memory: a ``skipped`` record. Any other exception:
    a ``failed`` record with ``"TypeName: message"`` as its reason and the end of the
    traceback, so that a run goes on with its other cases. (No timeout applies here:
    a case that hangs in this process hangs the run; see :func:`run_isolated`.)
    """
    if spec.threads:
        torch.set_num_threads(spec.threads)
    start = time.perf_counter()
    try:
        if spec.suite == "training":
            measured = _training_case(spec, molecules)
        else:
            measured = _layer_case(spec, molecules)
    except DenseMemoryError as err:
        return skipped_result(spec, f"over the dense memory budget: {err}")
    except (torch.OutOfMemoryError, MemoryError) as err:
        return skipped_result(spec, f"out of memory: {err}")
    except Exception as err:  # any crash of the case is its result
        return failed_result(spec, describe_error(err), short_traceback(err))
    return {
        **_base_result(spec),
        **measured,
        "status": "ok",
        "skipped": False,
        "reason": None,
        "threads": torch.get_num_threads(),
        "case_wall_seconds": time.perf_counter() - start,
    }


# --------------------------------------------------------------------------- isolation

# Imported once by the forkserver, so that a case's process starts with them loaded.
_PRELOAD = [
    "torch",
    "torch_geometric",
    "graphattn.bench.worker",
    "graphattn.bench.models",
    "graphattn.ops.cost",
    "graphattn.ops.fused",
    "graphattn.ops.khop",
]


def isolation_context() -> mp.context.BaseContext:
    """A forkserver context whose server has imported torch and PyG (spawn elsewhere)."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)
    _start_forkserver_without_gpus()
    return ctx


def _start_forkserver_without_gpus() -> None:
    """Start the forkserver (if not yet running) with ``CUDA_VISIBLE_DEVICES=""``.

    Only CPU cases run isolated, and they must not reach a GPU: on a CUDA machine,
    importing PyG initialises the CUDA driver in the server, so a forked child that
    calls CUDA fails with "initialization error" (torch's optimizers call it whenever
    a GPU is visible, to check for graph capture), and a CUDA context would add to the
    child's RSS. The variable is set only while the server starts.
    """
    from multiprocessing import forkserver

    saved = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    try:
        forkserver.ensure_running()
    finally:
        if saved is None:
            del os.environ["CUDA_VISIBLE_DEVICES"]
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = saved


def _child(spec: CaseSpec, molecules: MoleculeData | None, conn) -> None:
    """Process entry point: run the case and send its record back."""
    gc.freeze()  # the preloaded modules' objects: keeps the probe's gc.collect() short
    try:
        result = run_case(spec, molecules)
    except Exception as err:  # run_case records crashes; this catches anything it missed
        result = failed_result(spec, describe_error(err), short_traceback(err))
    try:
        conn.send(result)
        conn.close()
    except OSError:  # BrokenPipeError: the parent gave up waiting (timeout) and left
        pass


def run_isolated(
    spec: CaseSpec, molecules: MoleculeData | None = None, timeout: float | None = None
) -> dict:
    """Run one case in a fresh child process; a crash or timeout becomes a failed record."""
    ctx = isolation_context()
    reader, writer = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_child, args=(spec, molecules, writer), daemon=True)
    process.start()
    writer.close()
    result, timed_out = None, False
    try:
        if reader.poll(timeout):
            result = reader.recv()
        else:
            timed_out = True
    except EOFError:
        result = None
    finally:
        reader.close()
    if timed_out:
        process.kill()  # at once: the case had its time
    process.join(timeout=10)
    if process.is_alive():
        process.kill()
        process.join()
    if result is not None:
        return result
    if timed_out:
        return failed_result(spec, f"no result within {timeout} s (killed)")
    return failed_result(spec, f"worker process died (exit code {process.exitcode})")


# --------------------------------------------------------------------------- command line


def whole_number_at_least(least: int) -> Callable[[str], int]:
    """argparse type of a count: a whole number (digits only) of at least ``least``; the
    bench's command lines and the benchmark scripts share it."""

    def parse(text: str) -> int:
        if not text.strip().isdigit() or int(text) < least:
            raise argparse.ArgumentTypeError(
                f"{text!r}: expected a whole number of at least {least}"
            )
        return int(text)

    return parse


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="run one graphattn benchmark case")
    p.add_argument("--suite", required=True, choices=SUITES)
    p.add_argument("--impl", required=True, choices=sorted({*LAYER_IMPLS, *MODEL_IMPLS}))
    p.add_argument("--nodes", type=whole_number_at_least(1))
    p.add_argument("--degree", type=whole_number_at_least(1))
    p.add_argument("--repeats", type=whole_number_at_least(1), default=5)
    p.add_argument("--device", default="cpu")
    p.add_argument("--max-dense-bytes", type=whole_number_at_least(0), default=4 * 1024**3)
    p.add_argument("--data-dir")
    args = p.parse_args(argv)
    if args.suite in GRAPH_SUITES and (args.nodes is None or args.degree is None):
        p.error(f"--suite {args.suite} needs --nodes and --degree")
    impls = MODEL_IMPLS if args.suite == "training" else LAYER_IMPLS
    if args.impl not in impls:
        p.error(f"--suite {args.suite} runs --impl {' or '.join(impls)}, not {args.impl}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the case described on the command line here and print its JSON record;
    exit status 0 when it was measured, 1 when it failed or was skipped (nothing
    measured, as for ``graphattn bench``), 2 for a bad argument."""
    args = _parse(argv)
    spec = CaseSpec(
        suite=args.suite,
        impl=args.impl,
        num_nodes=args.nodes,
        in_degree=args.degree,
        repeats=args.repeats,
        device=args.device,
        max_dense_bytes=args.max_dense_bytes,
    )
    molecules = None
    if spec.suite not in GRAPH_SUITES:
        from graphattn.bench.inputs import esol_batches, load_esol

        smiles, targets = load_esol(args.data_dir)
        molecules = MoleculeData(*esol_batches(smiles, targets, 128, 8))
    record = run_case(spec, molecules)
    print(json.dumps(record, indent=2))
    return 0 if record["status"] == "ok" else 1


if __name__ == "__main__":
    raise SystemExit(main())
