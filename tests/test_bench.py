"""The benchmark harness: quick mode end to end, skips, outputs, and its pure helpers.

Timings are never asserted here (the auto-vs-best comparison lives in bench.json);
only that every case either has a time or says why it was skipped.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch

from graphattn.bench.analysis import crossover_density
from graphattn.bench.cases import LAYER_IMPLS, MODEL_IMPLS, CaseSpec, build_cases, quick_grid
from graphattn.bench.inputs import random_graph
from graphattn.bench.measure import CpuMemoryProbe
from graphattn.bench.plots import PLOT_FILES
from graphattn.bench.runner import run_benchmarks
from graphattn.bench.worker import isolation_context, run_case
from tests.conftest import shared_data_dir

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
QUICK_DENSE_BUDGET = 64 * 2**20  # dense N=2,000 (~196 MB) is over it, N=500 is not
CASE_FIELDS = {"name", "group", "suite", "impl", "device", "status", "skipped", "reason"}
TIMED_FIELDS = {"median_seconds", "times", "cold_seconds", "peak_extra_bytes", "memory_method"}


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """One quick run shared by the tests of this module: ``(out_dir, returned dict)``."""
    out = tmp_path_factory.mktemp("bench")
    result = run_benchmarks(
        out,
        quick=True,
        device="cpu",
        progress=False,
        data_dir=shared_data_dir(),
        max_dense_bytes=QUICK_DENSE_BUDGET,
    )
    return out, result


@pytest.fixture(scope="module")
def bench_json(quick_run: tuple[Path, dict]) -> dict:
    return json.loads((quick_run[0] / "bench.json").read_text())


# --------------------------------------------------------------------------- quick run


def test_quick_json_top_level(bench_json: dict) -> None:
    assert bench_json["complete"] is True
    machine = bench_json["machine"]
    for key in ("cpu_model", "logical_cores", "torch_threads", "torch", "cuda"):
        assert key in machine
    settings = bench_json["settings"]
    assert settings["quick"] is True and settings["device"] == "cpu"
    assert settings["repeats"] == 2
    assert settings["isolated_processes"] is True


def test_every_case_has_a_time_or_a_reason(bench_json: dict) -> None:
    cases = bench_json["cases"]
    assert cases
    for case in cases:
        assert case.keys() >= CASE_FIELDS, case["name"]
        if case["status"] == "ok":
            assert case.keys() >= TIMED_FIELDS, case["name"]
            assert case["skipped"] is False
            assert case["median_seconds"] > 0
            assert len(case["times"]) >= bench_json["settings"]["repeats"]
            assert isinstance(case["peak_extra_bytes"], int) and case["peak_extra_bytes"] >= 0
        else:
            assert case["skipped"] is True
            assert isinstance(case["reason"], str) and case["reason"]


def test_quick_grid_covers_every_implementation(bench_json: dict) -> None:
    seen = {(c["suite"], c["impl"]) for c in bench_json["cases"]}
    for suite in ("scaling", "density", "molecules"):
        assert {(suite, impl) for impl in LAYER_IMPLS} <= seen
    assert {("training", impl) for impl in MODEL_IMPLS} <= seen
    sizes = [c["num_nodes"] for c in bench_json["cases"] if c["suite"] == "scaling"]
    assert max(sizes) <= 2_000


def test_random_graph_cases_ran(bench_json: dict) -> None:
    ran = [c for c in bench_json["cases"] if c["suite"] != "training" and c["status"] == "ok"]
    for case in ran:
        if case["suite"] in ("scaling", "density"):
            assert case["num_edges"] == case["num_nodes"] * case["in_degree"]
            assert case["allowed_pairs"] == case["num_edges"] + case["num_nodes"]
            assert 0 < case["density"] <= 1
    assert {c["impl"] for c in ran} == set(LAYER_IMPLS)


def test_dense_over_budget_is_skipped_with_reason(bench_json: dict) -> None:
    by_name = {c["name"]: c for c in bench_json["cases"]}
    over = by_name["scaling/dense/N=2000,d=10"]
    assert over["status"] == "skipped" and over["skipped"] is True
    assert "dense memory budget" in over["reason"]
    assert "max_dense_bytes" in over["reason"]
    assert by_name["scaling/dense/N=500,d=10"]["status"] == "ok"
    auto = by_name["scaling/auto/N=2000,d=10"]
    assert auto["status"] == "ok" and auto["auto_choice"] == "sparse"


def test_molecule_cases_run_or_say_why(bench_json: dict) -> None:
    molecular = [c for c in bench_json["cases"] if c["suite"] in ("molecules", "training")]
    if shared_data_dir() is None:
        assert all("ESOL" in c["reason"] for c in molecular)
    else:
        assert all(c["status"] == "ok" for c in molecular), [c["reason"] for c in molecular]


def test_derived_numbers(bench_json: dict) -> None:
    derived = bench_json["derived"]
    ran = [c for c in bench_json["cases"] if c["status"] == "ok"]
    groups = {c["group"] for c in ran if c["impl"] == "auto"}
    assert {r["group"] for r in derived["auto_vs_best"]} == groups
    for row in derived["auto_vs_best"]:
        assert row["best_mode"] in ("sparse", "dense")
        assert row["ratio"] > 0 and isinstance(row["within_10_percent"], bool)
    assert {r["group"] for r in derived["fused_vs_pyg"]} >= {"scaling/N=500,d=10"}
    crossover = derived["crossover_density"]
    assert len(crossover["points"]) == len(quick_grid().density_degrees)
    assert crossover["configured"] is not None and crossover["status"]
    assert "auto_over_best_worst" in derived["targets"]


def test_paired_phase_times_the_modes_of_each_size_in_one_process(bench_json: dict) -> None:
    paired = bench_json["paired"]
    assert bench_json["settings"]["paired_rounds"] == 2
    assert all(r["timing"] == "paired" for r in paired)
    ran = [r for r in paired if r["status"] == "ok"]
    assert all(len(r["times"]) == 2 and r["median_seconds"] > 0 for r in ran)
    # the same over-budget dense case the isolated run skipped is skipped here too
    dense = next(r for r in paired if r["group"] == "scaling/N=2000,d=10" and r["impl"] == "dense")
    assert dense["status"] == "skipped" and "budget" in dense["reason"]
    groups = {r["group"] for r in ran if r["impl"] == "auto"}
    derived = bench_json["derived"]
    assert {r["group"] for r in derived["auto_vs_best_paired"]} == groups
    if shared_data_dir() is not None:
        assert "molecules" in groups
    assert "auto_over_best_paired_worst" in derived["targets"]


def test_plots_are_valid_png(quick_run: tuple[Path, dict]) -> None:
    import matplotlib.image

    out, result = quick_run
    assert sorted(result["plots"]) == sorted(PLOT_FILES)
    for name in PLOT_FILES:
        path = out / name
        assert path.read_bytes()[:8] == PNG_MAGIC, name
        image = matplotlib.image.imread(path)
        assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100


def test_markdown_report(quick_run: tuple[Path, dict]) -> None:
    text = (quick_run[0] / "bench.md").read_text()
    assert text.startswith("# graphattn attention benchmark")
    assert "| N | E | density | fused | reference | dense | auto | pyg |" in text
    assert "Crossover density" in text
    assert "paired timing (one process)" in text
    assert "scaling/dense/N=2000,d=10" in text  # listed among the skipped cases


# --------------------------------------------------------------------------- no CUDA


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA path")
def test_cuda_request_without_cuda_skips_cleanly(tmp_path: Path) -> None:
    result = run_benchmarks(tmp_path, quick=True, device="cuda", progress=False)
    assert result["cases"]
    assert all(c["skipped"] and "CUDA" in c["reason"] for c in result["cases"])
    assert json.loads((tmp_path / "bench.json").read_text())["complete"] is True
    assert all((tmp_path / name).read_bytes()[:8] == PNG_MAGIC for name in PLOT_FILES)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_case_in_process() -> None:
    spec = CaseSpec("scaling", "fused", num_nodes=1_000, in_degree=10, repeats=2, device="cuda")
    result = run_case(spec)
    assert result["status"] == "ok"
    assert result["memory_method"] == "torch.cuda.max_memory_allocated"
    assert result["peak_extra_bytes"] > 0


def _report_visible_gpus(queue) -> None:
    queue.put((os.environ.get("CUDA_VISIBLE_DEVICES"), torch.cuda.device_count()))


def test_isolated_cases_see_no_gpu() -> None:
    # On a CUDA machine a GPU visible to a forked CPU case made it fail ("CUDA error:
    # initialization error" at its optimizer step) once PyG was preloaded.
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    ctx = isolation_context()
    queue = ctx.SimpleQueue()
    process = ctx.Process(target=_report_visible_gpus, args=(queue,))
    process.start()
    process.join(timeout=60)
    assert process.exitcode == 0
    assert queue.get() == ("", 0)
    assert os.environ.get("CUDA_VISIBLE_DEVICES") == before


# --------------------------------------------------------------------------- helpers


def test_dense_skip_in_process() -> None:
    spec = CaseSpec("scaling", "dense", num_nodes=300, in_degree=5, repeats=1, max_dense_bytes=1)
    result = run_case(spec)
    assert result["status"] == "skipped" and "max_dense_bytes" in result["reason"]


@pytest.mark.parametrize(("nodes", "degree"), [(50, 49), (300, 7), (5_000, 3)])
def test_random_graph_has_distinct_sources(nodes: int, degree: int) -> None:
    source, target = random_graph(nodes, degree, seed=1)
    assert source.numel() == nodes * degree
    assert bool((source != target).all())
    assert torch.equal(target, torch.arange(nodes).repeat_interleave(degree))
    pairs = target * nodes + source
    assert pairs.unique().numel() == pairs.numel()


def test_random_graph_rejects_impossible_degree() -> None:
    with pytest.raises(ValueError):
        random_graph(10, 10)


def _density_case(density: float, impl: str, seconds: float, num_nodes: int = 2000) -> dict:
    return {
        "group": f"density/N={num_nodes}/{density}",
        "suite": "density",
        "impl": impl,
        "status": "ok",
        "num_nodes": num_nodes,
        "density": density,
        "median_seconds": seconds,
    }


def test_crossover_interpolates_on_log_scale() -> None:
    # dense/sparse: 4 at density 0.01, 1/4 at 0.1 -> crosses at sqrt(0.01 * 0.1)
    cases = [
        _density_case(0.01, "fused", 1.0),
        _density_case(0.01, "dense", 4.0),
        _density_case(0.1, "fused", 4.0),
        _density_case(0.1, "dense", 1.0),
    ]
    result = crossover_density(cases, configured=0.05)
    assert result["status"] == "interpolated"
    assert result["measured"] == pytest.approx((0.01 * 0.1) ** 0.5)


def test_crossover_when_dense_never_wins() -> None:
    cases = [_density_case(0.01, "fused", 1.0), _density_case(0.01, "dense", 2.0)]
    result = crossover_density(cases)
    assert result["measured"] is None and "sparse faster" in result["status"]


def test_crossover_per_sweep_defaults_to_the_largest_n() -> None:
    # N=2,000: sparse always faster; N=8,000: dense faster from density 0.5 on.
    cases = [
        _density_case(0.5, "fused", 1.0, 2000),
        _density_case(0.5, "dense", 2.0, 2000),
        _density_case(0.1, "fused", 1.0, 8000),
        _density_case(0.1, "dense", 3.0, 8000),
        _density_case(0.5, "fused", 3.0, 8000),
        _density_case(0.5, "dense", 1.0, 8000),
    ]
    largest = crossover_density(cases)
    assert largest["num_nodes"] == 8000 and 0.1 < largest["measured"] < 0.5
    assert [p["num_nodes"] for p in largest["points"]] == [8000, 8000]
    small = crossover_density(cases, num_nodes=2000)
    assert small["measured"] is None and "sparse faster" in small["status"]


def test_build_cases_orders_implementations_by_size() -> None:
    specs = build_cases(quick_grid(), "cpu", 2**30)
    first = [s.impl for s in specs[: len(LAYER_IMPLS)]]
    assert first == list(LAYER_IMPLS)
    assert {s.group for s in specs[: len(LAYER_IMPLS)]} == {"scaling/N=500,d=10"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RSS probe details are Linux")
def test_cpu_memory_probe_sees_an_allocation() -> None:
    probe = CpuMemoryProbe()
    probe.start()
    block = torch.ones(16 * 2**20)  # 64 MiB, touched
    extra = probe.extra_peak()
    del block
    assert extra >= 48 * 2**20, (extra, probe.method)


def test_sparse_mode_is_the_faster_sparse_kernel() -> None:
    from graphattn.bench.analysis import auto_vs_best

    def case(impl: str, seconds: float, **extra) -> dict:
        return {
            "group": "g",
            "suite": "scaling",
            "impl": impl,
            "status": "ok",
            "median_seconds": seconds,
            "density": 0.01,
            **extra,
        }

    cases = [
        case("fused", 2.0),
        case("reference", 1.0),
        case("dense", 3.0),
        case("auto", 1.05, auto_choice="sparse"),
    ]
    (row,) = auto_vs_best(cases)
    assert row["best_mode"] == "sparse" and row["best_seconds"] == 1.0
    assert row["within_10_percent"] and abs(row["ratio"] - 1.05) < 1e-9


def test_machine_records_whether_the_code_differs_from_its_commit(tmp_path) -> None:
    import shutil
    import subprocess

    from graphattn.bench.machine import git_uncommitted_changes

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    (tmp_path / "graphattn").mkdir()
    code = tmp_path / "graphattn" / "kernel.py"
    code.write_text("x = 1\n")

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    assert git_uncommitted_changes(tmp_path) is False
    (tmp_path / "notes.txt").write_text("not code\n")  # outside graphattn/ and benchmarks/
    assert git_uncommitted_changes(tmp_path) is False
    code.write_text("x = 2\n")
    assert git_uncommitted_changes(tmp_path) is True
