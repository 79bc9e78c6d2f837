"""``graphattn bench``: run the benchmark grid and write ``bench.json``, ``bench.md``, plots.

Every case times forward + backward of one attention layer (or one training step of
the molecule model) and measures its extra peak memory; see
:mod:`graphattn.bench.worker` for the protocol and ``benchmarks/README.md`` for how to
read the results.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path

import torch

from graphattn.bench.analysis import add_bandwidth, derive
from graphattn.bench.cases import (
    MOLECULE_SUITES,
    CaseSpec,
    Grid,
    build_cases,
    full_grid,
    quick_grid,
)
from graphattn.bench.machine import describe_machine
from graphattn.bench.measure import CPU_EXACT_METHOD, CudaMemoryProbe
from graphattn.bench.plots import write_plots
from graphattn.bench.report import markdown_report
from graphattn.bench.worker import (
    MoleculeData,
    paired_failure,
    paired_layer_times,
    run_case,
    run_isolated,
    skipped_result,
)
from graphattn.errors import GraphInputError
from graphattn.train.loop import global_rng_restored, training_device

__all__ = [
    "default_dense_budget",
    "exit_status",
    "load_molecule_data",
    "nothing_measured",
    "resolve_device",
    "run_problems",
    "run_benchmarks",
    "written_line",
]

SCHEMA_VERSION = 1
PAIRED_IMPLS = ("fused", "reference", "dense", "auto")
CPU_DENSE_BUDGET_CAP = 4 * 1024**3
NOTES = {
    "loss": "sum of the layer's outputs; x requires grad; parameter grads reset before a pass",
    "random_graphs": "each node gets in_degree distinct random sources (no self-loops); "
    "node features are standard normal, F=64",
    "esol_features": "atom one-hot features mapped to F=64 by a fixed seeded random "
    "projection (one-layer suite); raw atom and bond features (training suite)",
    "graphattn_layer": "attends over the edges plus one self-loop per node; output projection",
    "pyg_layer": "TransformerConv(64, 16, heads=4): the edges only, plus a root-weight skip",
    "density": "allowed pairs (edges + self-loops) / (graphs x largest graph size^2)",
    "cold_seconds": "one pass on a fresh copy of edge_index (graph preparation not cached)",
    "molecule_timing": "every timed pass uses a new copy of its batch's edge_index (cold)",
    "training": "AdamW step on MSE to ESOL's measured log solubility, model in train mode",
}

log = logging.getLogger(__name__)


def resolve_device(device: str) -> tuple[str, str | None]:
    """``(device, why_unavailable)``: ``"auto"`` picks CUDA when present.

    A CUDA request on a machine without CUDA is not an error: its cases are
    reported as skipped with the returned reason. Other names are checked as the
    trainers check them (:func:`graphattn.train.loop.training_device`).
    """
    if device.startswith("cuda") and not torch.cuda.is_available():
        return device, "CUDA requested but no CUDA device is available"
    return str(training_device(device)), None


def default_dense_budget(device: str) -> int:
    """Dense mode's budget: half the free GPU memory, or min(4 GiB, 1/4 of free RAM)."""
    if device.startswith("cuda") and torch.cuda.is_available():
        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return int(free // 2)
    import psutil

    return int(min(CPU_DENSE_BUDGET_CAP, psutil.virtual_memory().available // 4))


def load_molecule_data(
    grid: Grid, data_dir: str | Path | None, download: bool
) -> tuple[MoleculeData | None, str | None]:
    """ESOL batches for the molecule suites, or ``(None, why not)``."""
    if not set(grid.suites) & set(MOLECULE_SUITES):
        return None, None
    from graphattn.bench.inputs import esol_batches, load_esol

    try:
        smiles, targets = load_esol(data_dir, download=download)
    except (OSError, ImportError, ValueError, KeyError) as err:
        return None, f"ESOL data unavailable ({type(err).__name__}: {err})"
    batches, atom_dim, bond_dim = esol_batches(
        smiles, targets, grid.molecule_batch_size, grid.molecule_batches
    )
    if not batches:
        return None, "ESOL has fewer molecules than one batch"
    return MoleculeData(batches, atom_dim, bond_dim), None


def _memory_settings(device: str, isolate: bool) -> dict:
    """How memory is measured: ``memory_method`` (words) and ``memory_probe`` (the
    ``memory_method`` every case should report; bench.md flags those that differ)."""
    if device.startswith("cuda"):
        method = "torch.cuda.max_memory_allocated - memory_allocated before the pass"
        return {"memory_method": method, "memory_probe": CudaMemoryProbe.method}
    where = (
        "one fresh process per case"
        if isolate
        else "in the benchmark's own process (not isolated: earlier cases can distort it)"
    )
    method = f"peak RSS - RSS before the pass, {where}"
    return {"memory_method": method, "memory_probe": CPU_EXACT_METHOD}


def _settings(
    grid: Grid, device: str, quick: bool, specs: list[CaseSpec], isolate: bool, timeout: float
) -> dict:
    from graphattn.ops.cost import CROSSOVER_DENSITY, DENSE_MIN_WORK

    first = specs[0] if specs else CaseSpec(suite="scaling", impl="fused")
    return {
        "quick": quick,
        "device": device,
        "grid": grid.to_dict(),
        "repeats": first.repeats,
        "warmup": first.warmup,
        "max_dense_bytes": first.max_dense_bytes,
        "threads": first.threads,
        "isolated_processes": isolate,
        "case_timeout_seconds": timeout if isolate else None,  # in-process cases: none
        "in_channels": first.in_channels,
        "heads": first.heads,
        "head_dim": first.head_dim,
        "timing": "CUDA events" if device.startswith("cuda") else "time.perf_counter",
        **_memory_settings(device, isolate),
        "configured_crossover_density": CROSSOVER_DENSITY,
        "configured_dense_min_work": DENSE_MIN_WORK,
        "notes": NOTES,
    }


def _run_one(
    spec: CaseSpec,
    molecules: MoleculeData | None,
    skip_reason: str | None,
    isolate: bool,
    timeout: float | None,
) -> dict:
    """One case's record: skipped up front, in a child process, or in this process."""
    if skip_reason is not None:
        return skipped_result(spec, skip_reason)
    data = molecules if spec.suite in MOLECULE_SUITES else None
    if isolate:
        return run_isolated(spec, data, timeout)
    try:
        return run_case(spec, data)
    finally:
        gc.collect()
        if spec.device.startswith("cuda"):
            torch.cuda.empty_cache()


def _write_json(result: dict, out_dir: Path) -> None:
    """Write ``bench.json`` atomically (also after every case, for long runs)."""
    path = out_dir / "bench.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _progress(specs: list[CaseSpec], enabled: bool) -> Iterable[CaseSpec]:
    from tqdm.auto import tqdm

    bar = tqdm(specs, desc="bench", unit="case", disable=not enabled)
    for spec in bar:
        bar.set_postfix_str(spec.name)
        yield spec


def _paired_group(
    members: list[CaseSpec], data: MoleculeData | None, rounds: int, failed: dict[str, str]
) -> dict[str, dict]:
    """``{impl: timing}`` of one group: implementations whose isolated case failed are
    skipped, with that reason; an error building the group's inputs fails them all."""
    runnable = [s for s in members if s.name not in failed]
    earlier = "its case failed earlier in this run"
    timings = {
        s.impl: {"skipped": True, "reason": f"{earlier}: {failed[s.name]}"}
        for s in members
        if s.name in failed
    }
    if runnable:
        try:
            timings.update(paired_layer_times(runnable, data, rounds))
        except Exception as err:  # recorded: the other groups still run
            timings.update({s.impl: paired_failure(err) for s in runnable})
    return timings


def _paired_status(timing: dict) -> str:
    if timing.get("failed"):
        return "failed"
    return "skipped" if timing.get("skipped") else "ok"


def run_paired(
    specs: list[CaseSpec],
    molecules: MoleculeData | None,
    rounds: int,
    progress: bool,
    failed: dict[str, str] | None = None,
) -> list[dict]:
    """Records of the paired phase: per size, the modes timed interleaved in this process.

    The records have the case format of ``bench.json`` (``group``, ``impl``, ``status``,
    ``median_seconds``...) without memory, so :func:`~graphattn.bench.analysis.auto_vs_best`
    reads them as it reads the isolated cases. ``failed`` maps the names of cases that
    already failed (earlier in this run) to why: they are skipped here, with that
    reason. An implementation that raises here gets ``"status": "failed"`` and the error;
    the phase goes on. There is no timeout: a pass that hangs hangs the run.
    """
    from tqdm.auto import tqdm

    layer = [s for s in specs if s.impl in PAIRED_IMPLS and s.suite != "training"]
    if molecules is None:
        layer = [s for s in layer if s.suite not in MOLECULE_SUITES]
    groups: dict[str, list[CaseSpec]] = {}
    for spec in layer:
        groups.setdefault(spec.group, []).append(spec)
    records = []
    for group, members in tqdm(groups.items(), desc="paired", unit="size", disable=not progress):
        data = molecules if members[0].suite in MOLECULE_SUITES else None
        for impl, timing in _paired_group(members, data, rounds, failed or {}).items():
            status = _paired_status(timing)
            base = {"group": group, "suite": members[0].suite, "impl": impl, "status": status}
            records.append({**base, **timing, "timing": "paired"})
        gc.collect()
    return records


def _finish(result: dict, out_dir: Path, started: float) -> dict:
    """Add derived numbers, then write the JSON, the markdown and the plots."""
    settings = result["settings"]
    add_bandwidth(result["cases"], settings["heads"] * settings["head_dim"])
    device_type = "cuda" if settings["device"].startswith("cuda") else "cpu"
    configured = settings["configured_crossover_density"].get(device_type)
    peak = (result["machine"].get("cuda") or {}).get("copy_bandwidth_gb_s")
    result["derived"] = derive(
        result["cases"],
        configured,
        result.get("paired"),
        device_type,
        peak if device_type == "cuda" else None,
    )
    result["complete"] = True
    result["elapsed_seconds"] = time.perf_counter() - started
    _write_json(result, out_dir)
    (out_dir / "bench.md").write_text(markdown_report(result), encoding="utf-8")
    result["plots"] = [p.name for p in write_plots(result, out_dir)]
    _write_json(result, out_dir)
    return result


def _keep_previous(out: Path) -> None:
    """Move an earlier run's ``bench.json`` to ``bench.previous.json`` when it measured
    something: this run writes its partial results there after its first case, and may
    measure nothing. An earlier run that measured nothing is simply replaced, so two
    runs without a GPU in a row do not push out the last measured one."""
    earlier = out / "bench.json"
    if not earlier.is_file():
        return
    try:
        cases = json.loads(earlier.read_text(encoding="utf-8"))["cases"]
        measured = not isinstance(cases, list) or any(c.get("status") == "ok" for c in cases)
    except Exception:  # not a bench.json of ours (not JSON, too deep, another shape): keep it
        measured = True
    if measured:
        os.replace(earlier, out / PREVIOUS_NAME)
        log.warning("%s: the earlier run's bench.json is kept as %s", out, PREVIOUS_NAME)


PREVIOUS_NAME = "bench.previous.json"


def run_problems(result: dict) -> list[str]:
    """One line per problem of a finished run: the cases that failed (the first named
    with its reason), and each suite that ran and measured nothing (its reasons)."""
    cases = result["cases"]
    failed = [c for c in cases if c.get("status") == "failed"]
    lines = []
    if failed:
        first = failed[0]
        lines.append(
            f"{len(failed)} case(s) failed (first: {first.get('name')}: {first.get('reason')})"
        )
    for suite in dict.fromkeys(c.get("suite") for c in cases):
        ran = [c for c in cases if c.get("suite") == suite]
        if not any(c.get("status") == "ok" for c in ran):
            reasons = sorted({str(c.get("reason", c.get("status"))) for c in ran})
            lines.append(f"suite {suite}: nothing measured ({'; '.join(reasons)})")
    return lines


def written_line(result: dict, out_dir: Path | str) -> str:
    """The line a command prints once the bench has run: cases written, and measured."""
    cases = result["cases"]
    measured = sum(1 for case in cases if case.get("status") == "ok")
    return f"wrote {len(cases)} cases ({measured} measured) to {out_dir}"


def exit_status(result: dict, prog: str) -> int:
    """The exit status of a command that ran the bench (``prog`` names it on stderr):
    1 when it measured nothing or a case failed, else 0; the reasons go to stderr."""
    reasons = nothing_measured(result)
    if reasons is not None:
        print(f"{prog}: nothing was measured: {reasons}", file=sys.stderr)
        return 1
    for line in run_problems(result):
        print(f"{prog}: {line}", file=sys.stderr)
    return 1 if any(case.get("status") == "failed" for case in result["cases"]) else 0


def nothing_measured(result: dict) -> str | None:
    """Why a run measured no case at all (its cases' distinct reasons), or None if it
    measured one; such a run should fail its command (``--device cuda`` without a GPU
    records every case as skipped)."""
    cases = result["cases"]
    if not cases or any(case.get("status") == "ok" for case in cases):
        return None
    return "; ".join(sorted({str(case.get("reason", case.get("status"))) for case in cases}))


def _keeps_callers_torch_settings(run: Callable[..., dict]) -> Callable[..., dict]:
    """Cases run in this process set torch's threads and seed its generator: the
    caller's threads and generators are put back afterwards."""

    @functools.wraps(run)
    def run_and_restore(*args, **kwargs) -> dict:
        threads = torch.get_num_threads()
        try:
            with global_rng_restored():
                return run(*args, **kwargs)
        finally:
            torch.set_num_threads(threads)

    return run_and_restore


@_keeps_callers_torch_settings
def run_benchmarks(
    out_dir: str | Path,
    quick: bool = False,
    repeats: int | None = None,
    device: str = "auto",
    progress: bool = True,
    data_dir: str | Path | None = None,
    *,
    max_dense_bytes: int | None = None,
    threads: int | None = None,
    isolate: bool | None = None,
    case_timeout: float | None = None,
    suites: Iterable[str] | None = None,
    paired_rounds: int | None = None,
) -> dict:
    """Run the benchmark grid and write its results into ``out_dir``.

    Args:
        out_dir: folder for ``bench.json``, ``bench.md`` and the PNG plots (created).
        quick: the tiny grid (N <= 2,000, 2 repeats) used by tests and CI.
        repeats: timed passes per case (default: the grid's, 5 or 2 in quick mode).
        device: ``"cpu"``, ``"cuda"`` or ``"auto"``; CUDA without a device: every case
            is reported as skipped.
        progress: show a tqdm progress bar over the cases.
        data_dir: folder with ``esol/delaney-processed.csv`` (default ``$GRAPHATTN_DATA``,
            then the cache); without it the molecule cases are skipped with the reason.
        max_dense_bytes: dense mode's budget (default :func:`default_dense_budget`).
        threads: torch threads per case (default: 1 in quick mode, else torch's default,
            i.e. every core).
        isolate: one fresh process per case (default: on CPU, where peak RSS needs it).
        case_timeout: seconds before an isolated case is killed (default 120 quick,
            1800 full). It applies to isolated cases only: cases run in this process
            (CUDA, or ``isolate=False``) and the paired phase cannot be interrupted, so
            one that hangs hangs the run (``settings.case_timeout_seconds`` is then null).
        suites: a subset of ``scaling``, ``density``, ``molecules``, ``training``.
        paired_rounds: rounds of the paired phase, which times the fused, reference,
            dense and auto layers of each size interleaved in this process, for the
            ``mode="auto"`` comparison (separate processes are too noisy for its 10%
            criterion); default 12, 2 in quick mode; 0 skips it.

    A case that raises is recorded as ``"status": "failed"`` with the error as its
    ``reason`` and the run goes on (in the paired phase too, which skips the
    implementations whose isolated case failed); ``complete`` is true once the run has
    finished, failed cases included.

    Returns:
        The dict written to ``bench.json``: ``machine``, ``settings``, ``cases``
        (each with ``median_seconds``, ``times``, ``peak_extra_bytes``... or
        ``skipped`` and ``reason``), ``paired`` (the paired phase's records) and
        ``derived`` (ratios, auto vs best, crossover, target checks).
    """
    started = time.perf_counter()
    if repeats is not None and repeats < 1:
        raise GraphInputError(f"repeats must be at least 1, got {repeats}")
    if paired_rounds is not None and paired_rounds < 0:
        raise GraphInputError(f"paired_rounds must be 0 (skip) or more, got {paired_rounds}")
    if max_dense_bytes is not None and max_dense_bytes < 0:
        raise GraphInputError(
            f"max_dense_bytes must be 0 (never dense) or more, got {max_dense_bytes}"
        )
    if case_timeout is not None and not case_timeout > 0:
        raise GraphInputError(
            f"case_timeout must be a positive number of seconds, got {case_timeout}"
        )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _keep_previous(out)
    device, unavailable = resolve_device(device)
    grid = quick_grid() if quick else full_grid("cuda" if device.startswith("cuda") else "cpu")
    if suites is not None:
        grid = dataclasses.replace(grid, suites=tuple(suites))
    if max_dense_bytes is not None:
        budget = max_dense_bytes
    else:
        budget = 0 if unavailable else default_dense_budget(device)
    if threads is None and quick:
        threads = 1  # quick checks the pipeline; one thread stays fast on a busy machine
    specs = build_cases(grid, device, budget, threads, repeats)
    isolate = (not device.startswith("cuda")) if isolate is None else isolate
    timeout = case_timeout if case_timeout is not None else (120.0 if quick else 1800.0)
    molecules, molecule_reason = (
        (None, None) if unavailable else load_molecule_data(grid, data_dir, download=not quick)
    )
    result = {
        "schema": SCHEMA_VERSION,
        "complete": False,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": describe_machine(),
        "settings": _settings(grid, device, quick, specs, isolate, timeout),
        "cases": [],
        "derived": {},
    }
    for spec in _progress(specs, progress):
        reason = unavailable or (molecule_reason if spec.suite in MOLECULE_SUITES else None)
        result["cases"].append(_run_one(spec, molecules, reason, isolate, timeout))
        _write_json(result, out)
    rounds = (2 if quick else 12) if paired_rounds is None else paired_rounds
    result["settings"]["paired_rounds"] = rounds
    if rounds > 0 and unavailable is None:
        failed = {c["name"]: c["reason"] for c in result["cases"] if c["status"] == "failed"}
        result["paired"] = run_paired(specs, molecules, rounds, progress, failed)
    return _finish(result, out, started)
