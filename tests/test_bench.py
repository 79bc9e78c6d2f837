"""The benchmark harness: quick mode end to end, skips, outputs, and its pure helpers.

Timings are never asserted here (the auto-vs-best comparison lives in bench.json);
only that every case either has a time or says why it was skipped.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
import torch

import graphattn
from graphattn.bench.analysis import crossover_density
from graphattn.bench.cases import LAYER_IMPLS, MODEL_IMPLS, CaseSpec, build_cases, quick_grid
from graphattn.bench.inputs import random_graph
from graphattn.bench.measure import CpuMemoryProbe
from graphattn.bench.plots import PLOT_FILES
from graphattn.bench.runner import run_benchmarks
from graphattn.bench.worker import isolation_context, run_case
from tests.conftest import data_dir_unless_absent_outside_ci, shared_data_dir

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
        data_dir=data_dir_unless_absent_outside_ci(),
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
    for folder in ("graphattn", "benchmarks"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "code.py").write_text("x = 1\n")

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    assert git_uncommitted_changes(tmp_path) is False
    (tmp_path / "notes.txt").write_text("not code\n")  # outside graphattn/ and benchmarks/
    assert git_uncommitted_changes(tmp_path) is False
    for folder in ("graphattn", "benchmarks"):  # the library's code or a benchmark script
        (tmp_path / folder / "code.py").write_text("x = 2\n")
        assert git_uncommitted_changes(tmp_path) is True
        (tmp_path / folder / "code.py").write_text("x = 1\n")
        assert git_uncommitted_changes(tmp_path) is False


def test_machine_names_no_commit_for_an_installed_copy_inside_another_repository(
    tmp_path, monkeypatch
) -> None:
    """A virtual environment inside the user's own repository: its commit is not graphattn's."""
    import shutil
    import subprocess

    from graphattn.bench import machine

    if shutil.which("git") is None:
        pytest.skip("git is not installed")

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "app.py").write_text("print('the user project')\n")
    (tmp_path / ".gitignore").write_text(".venv/\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "user project")
    site_packages = tmp_path / ".venv" / "lib" / "python3" / "site-packages"
    (site_packages / "graphattn" / "bench").mkdir(parents=True)
    (site_packages / "graphattn" / "bench" / "machine.py").write_text("x = 1\n")
    monkeypatch.delenv("GRAPHATTN_COMMIT", raising=False)
    monkeypatch.setattr(machine, "_CHECKOUT", site_packages)
    assert machine.git_commit() is None
    assert machine.git_uncommitted_changes() is None
    assert machine.describe_machine()["graphattn"] == graphattn.__version__  # named instead
    (tmp_path / ".gitignore").write_text("")  # the environment untracked, not ignored
    assert machine.git_uncommitted_changes() is None


# --------------------------------------------------------------------------- failures


def _fail_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make building the reference layer raise, in this process."""
    import graphattn.bench.models as models

    build = models.build_attention

    def broken(spec: CaseSpec) -> torch.nn.Module:
        if spec.impl == "reference":
            raise RuntimeError("simulated kernel crash")
        return build(spec)

    monkeypatch.setattr(models, "build_attention", broken)


def _quick_scaling_in_this_process(out: Path) -> dict:
    """The quick grid's scaling suite, every case in this process, one paired round."""
    return run_benchmarks(
        out,
        quick=True,
        device="cpu",
        progress=False,
        isolate=False,
        suites=["scaling"],
        paired_rounds=1,
        max_dense_bytes=QUICK_DENSE_BUDGET,
    )


def test_a_run_in_this_process_gives_back_the_callers_threads_and_generators(
    tmp_path: Path,
) -> None:
    # its cases set torch's threads (1 in quick mode) and seed its generator
    from tests.conftest import draws_after_seeding

    threads = torch.get_num_threads()
    torch.set_num_threads(3)  # not the quick run's 1
    try:
        run = draws_after_seeding(7, lambda: _quick_scaling_in_this_process(tmp_path))
        assert run == draws_after_seeding(7)
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(threads)


def test_in_process_crash_is_a_failed_case_and_the_run_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A case raising in the main process (every CUDA case) used to abort the whole run:
    # no bench.md, no plots, no derived numbers, complete: false.
    _fail_reference(monkeypatch)
    _quick_scaling_in_this_process(tmp_path)
    result = json.loads((tmp_path / "bench.json").read_text())
    assert result["complete"] is True and result["derived"]["targets"]
    assert result["settings"]["case_timeout_seconds"] is None  # no timeout in-process
    by_impl: dict[str, list[dict]] = {}
    for case in result["cases"]:
        by_impl.setdefault(case["impl"], []).append(case)
    for case in by_impl["reference"]:
        assert case["status"] == "failed" and case["skipped"] is True
        assert case["reason"] == "RuntimeError: simulated kernel crash"
        assert "simulated kernel crash" in case["traceback"]
    assert all(c["status"] == "ok" for c in by_impl["fused"] + by_impl["pyg"])
    paired = [r for r in result["paired"] if r["impl"] == "reference"]
    assert paired and all(r["status"] == "skipped" for r in paired)
    assert all("failed earlier in this run: RuntimeError" in r["reason"] for r in paired)
    assert any(r["status"] == "ok" and r["impl"] == "fused" for r in result["paired"])
    text = (tmp_path / "bench.md").read_text()
    assert "(failed): RuntimeError: simulated kernel crash" in text
    assert all((tmp_path / name).read_bytes()[:8] == PNG_MAGIC for name in PLOT_FILES)


def _paired_specs() -> list[CaseSpec]:
    return [
        CaseSpec("scaling", impl, num_nodes=200, in_degree=5, repeats=1, threads=1)
        for impl in ("fused", "reference", "auto")
    ]


def test_paired_phase_records_a_crash_and_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from graphattn.bench.runner import run_paired

    _fail_reference(monkeypatch)
    records = {r["impl"]: r for r in run_paired(_paired_specs(), None, 2, progress=False)}
    assert records["reference"]["status"] == "failed"
    assert records["reference"]["reason"] == "RuntimeError: simulated kernel crash"
    assert records["fused"]["status"] == "ok" and len(records["fused"]["times"]) == 2
    assert records["auto"]["status"] == "ok"


def test_paired_crash_during_the_timed_rounds_is_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import graphattn.bench.models as models
    from graphattn.bench.runner import run_paired

    build = models.build_attention

    class FailsAfterWarmup(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner, self.calls = inner, 0

        def forward(self, *args: object) -> torch.Tensor:
            self.calls += 1
            if self.calls > 1:  # the warm-up pass (warmup=1) works, the timed ones raise
                raise ValueError("diverged in round 1")
            return self.inner(*args)

    def flaky(spec: CaseSpec) -> torch.nn.Module:
        model = build(spec)
        return FailsAfterWarmup(model) if spec.impl == "fused" else model

    monkeypatch.setattr(models, "build_attention", flaky)
    records = {r["impl"]: r for r in run_paired(_paired_specs(), None, 3, progress=False)}
    assert records["fused"]["status"] == "failed"
    assert records["fused"]["reason"] == "ValueError: diverged in round 1"
    assert records["reference"]["status"] == "ok" and len(records["reference"]["times"]) == 3


def test_paired_group_whose_inputs_fail_fails_each_member(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import graphattn.bench.worker as worker
    from graphattn.bench.runner import run_paired

    def no_inputs(*args: object) -> None:
        raise OSError("input generation failed")

    monkeypatch.setattr(worker, "_graph_inputs", no_inputs)
    records = run_paired(_paired_specs(), None, 1, progress=False)
    assert [r["status"] for r in records] == ["failed"] * 3
    assert all(r["reason"] == "OSError: input generation failed" for r in records)


def test_run_case_records_an_exception_as_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    _fail_reference(monkeypatch)
    spec = CaseSpec("scaling", "reference", num_nodes=100, in_degree=3, repeats=1)
    result = run_case(spec)
    assert result["status"] == "failed" and result["skipped"] is True
    assert result["reason"] == "RuntimeError: simulated kernel crash"


# --------------------------------------------------------------------------- memory method


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RSS probe details are Linux")
def test_ru_maxrss_fallback_is_labelled_an_upper_bound(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import graphattn.bench.measure as measure

    monkeypatch.setattr(measure, "_CLEAR_REFS", tmp_path / "missing" / "clear_refs")
    block = torch.ones(64 * 2**20)  # 256 MiB touched, then freed: the lifetime peak stays
    del block
    probe = CpuMemoryProbe()
    probe.start()
    small = torch.ones(2**20)  # 4 MiB
    extra = probe.extra_peak()
    del small
    assert probe.method == measure.CPU_UPPER_BOUND_METHOD == "ru_maxrss (upper bound)"
    assert extra >= 3 * 2**20  # never below the pass's own allocation


def test_report_names_the_version_of_an_installed_copy(bench_json: dict) -> None:
    import copy

    from graphattn.bench.report import markdown_report

    result = copy.deepcopy(bench_json)
    result["machine"].update(graphattn_commit="abc123", graphattn_uncommitted_changes=True)
    assert "commit abc123 with uncommitted changes" in markdown_report(result)
    result["machine"].update(graphattn_commit=None, graphattn_uncommitted_changes=None)
    result["machine"]["graphattn"] = "9.9.9"
    text = markdown_report(result)
    assert "graphattn 9.9.9 (installed, no git commit)" in text and "commit None" not in text


def test_report_marks_memory_measured_by_another_method(bench_json: dict) -> None:
    import copy

    from graphattn.bench.report import markdown_report

    probe = bench_json["settings"]["memory_probe"]
    assert probe in ("VmHWM after clear_refs", "ru_maxrss")
    result = copy.deepcopy(bench_json)
    for case in result["cases"]:
        if case["status"] == "ok":
            case["memory_method"] = probe  # every case as the run's setting
    assert "†" not in markdown_report(result)
    case = next(c for c in result["cases"] if c["name"] == "scaling/fused/N=500,d=10")
    case["memory_method"] = "ru_maxrss (upper bound)"
    text = markdown_report(result)
    assert f"{case['peak_extra_bytes'] / 2**20:.1f}†" in text
    assert "- `scaling/fused/N=500,d=10`: ru_maxrss (upper bound)" in text


# --------------------------------------------------------------------------- unusable timings


def test_crossover_leaves_out_nan_inf_and_zero_times() -> None:
    cases = [
        _density_case(0.01, "fused", 1.0),
        _density_case(0.01, "dense", 4.0),
        _density_case(0.05, "fused", float("nan")),  # would sit between the two points
        _density_case(0.05, "dense", 1.0),
        _density_case(0.1, "fused", 4.0),
        _density_case(0.1, "dense", 1.0),
        _density_case(0.5, "fused", 1.0),
        _density_case(0.5, "dense", float("inf")),
        _density_case(0.9, "fused", 0.0),
        _density_case(0.9, "dense", 1.0),
    ]
    result = crossover_density(cases)
    assert [p["density"] for p in result["points"]] == [0.01, 0.1]
    assert result["measured"] == pytest.approx((0.01 * 0.1) ** 0.5)
    assert "3 point(s) left out" in result["status"]
    assert [d["reason"] for d in result["dropped_points"]] == [
        "fused=nan",
        "dense=inf",
        "fused=0.0",
    ]
    json.dumps(result, allow_nan=False)  # raises on NaN or inf


@pytest.mark.parametrize("zero", ["fused", "dense"])
def test_crossover_with_a_zero_time_does_not_raise(zero: str) -> None:
    times = {"fused": 1.0, "dense": 2.0, zero: 0.0}
    cases = [_density_case(0.1, impl, t) for impl, t in times.items()]
    result = crossover_density(cases)
    assert result["points"] == [] and result["measured"] is None
    assert "no density sweep measured" in result["status"] and "left out" in result["status"]


def test_derived_numbers_never_contain_nan() -> None:
    from graphattn.bench.analysis import derive

    def case(impl: str, seconds: float) -> dict:
        return {
            "name": f"scaling/{impl}",
            "group": "scaling/N=20000,d=10",
            "suite": "scaling",
            "impl": impl,
            "status": "ok",
            "num_nodes": 20_000,
            "allowed_pairs": 220_000,
            "density": 0.0005,
            "auto_choice": "sparse",
            "median_seconds": seconds,
            "peak_extra_bytes": 2**20,
        }

    cases = [case("fused", float("nan")), case("dense", 0.0), case("auto", 1.0), case("pyg", 2.0)]
    derived = derive(cases, 0.1)
    json.dumps(derived, allow_nan=False)
    (auto,) = derived["auto_vs_best"]
    assert auto["ratio"] is None and auto["within_10_percent"] is None
    assert "fused=nan" in auto["note"] and "dense=0.0" in auto["note"]
    assert derived["targets"]["auto_over_best_worst"]["met"] is None
    assert derived["fused_vs_pyg"][0]["time_ratio"] is None


# --------------------------------------------------------------------------- plots


def test_plots_leave_out_skipped_failed_and_zero_points_and_say_so() -> None:
    from graphattn.bench.plots import left_out_note, plot_points

    cases = [
        {"suite": "scaling", "impl": "fused", "status": "ok", "peak_extra_bytes": 0},
        {"suite": "scaling", "impl": "fused", "status": "ok", "peak_extra_bytes": 2**20},
        {"suite": "scaling", "impl": "dense", "status": "skipped"},
        {"suite": "scaling", "impl": "pyg", "status": "failed"},
        {"suite": "density", "impl": "pyg", "status": "failed"},
    ]
    shown, left_out = plot_points(cases, "scaling", lambda c: c["peak_extra_bytes"])
    assert shown == [cases[1]]  # the zero is not drawn (as 1 byte or otherwise)
    assert left_out == {"skipped": 1, "failed": 1, "not positive": 1}
    note = left_out_note(left_out)
    assert note == "not shown: 1 skipped, 1 failed, 1 not positive (see bench.md)"
    assert left_out_note({}) == ""


def test_usable_cores_is_the_affinity_mask_else_the_cpu_count(monkeypatch) -> None:
    from graphattn.bench import machine

    monkeypatch.setattr(machine.os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    monkeypatch.setattr(machine.os, "cpu_count", lambda: 64)
    assert machine.usable_cores() == 3  # a process pinned to 3 of 64 cores
    monkeypatch.delattr(machine.os, "sched_getaffinity")  # macOS, Windows
    assert machine.usable_cores() == 64


# --------------------------------------------------------------------------- failed cases


def _scaling_case(impl: str, n: int, seconds: float | None, status: str = "ok", **extra) -> dict:
    case = {
        "name": f"scaling/{impl}/N={n},d=10",
        "group": f"scaling/N={n},d=10",
        "suite": "scaling",
        "impl": impl,
        "status": status,
        "num_nodes": n,
        "density": 10 / n,
        **extra,
    }
    if status == "ok":
        case.update(median_seconds=seconds, peak_extra_bytes=2**20)
    else:
        case["reason"] = "timed out after 600 s"
    return case


def test_a_failed_case_leaves_its_targets_undecided_not_met():
    # a failed case made no row, so the checks ran on the cases left: a target vanished,
    # or auto's worst ratio came from the other sizes and read "met"
    from graphattn.bench.analysis import derive

    cases = [
        _scaling_case("fused", 20_000, None, "failed"),
        _scaling_case("reference", 20_000, 0.2),
        _scaling_case("pyg", 20_000, 0.25),
        _scaling_case("auto", 20_000, None, "failed"),
        _scaling_case("fused", 100_000, 0.3),
        _scaling_case("reference", 100_000, 2.0),
        _scaling_case("pyg", 100_000, 1.7),
        _scaling_case("auto", 100_000, 0.31, auto_choice="sparse"),
    ]
    targets = derive(cases, 0.25)["targets"]
    for kind in ("time", "memory"):
        check = targets[f"fused_over_pyg_{kind}_N20000"]
        assert check["met"] is None and "fused failed (timed out after 600 s)" in check["note"]
    assert targets["fused_over_pyg_time_N100000"]["met"] is True
    auto = targets["auto_over_best_worst"]
    assert auto["met"] is None and "scaling/N=20000,d=10" in auto["note"]
    # a target size whose PyG case was left out of the run is listed, not dropped
    without_pyg = [c for c in cases if not (c["impl"] == "pyg" and c["num_nodes"] == 20_000)]
    check = derive(without_pyg, 0.25)["targets"]["fused_over_pyg_time_N20000"]
    assert check["met"] is None and "pyg not in the run" in check["note"]


def test_a_zero_time_gives_no_ratio():
    from graphattn.bench.analysis import derive

    cases = [_scaling_case("fused", 20_000, 0.0), _scaling_case("pyg", 20_000, 0.25)]
    check = derive(cases, 0.25)["targets"]["fused_over_pyg_time_N20000"]
    assert check["value"] is None and check["met"] is None and "fused=0.0" in check["note"]


def test_a_failed_sparse_kernel_drops_its_density_point_and_its_auto_row():
    # with the fused case failed, "sparse" had silently become the reference kernel
    from graphattn.bench.analysis import auto_vs_best

    cases = [
        {**_density_case(0.1, "fused", 1.0), "status": "failed", "reason": "crashed"},
        _density_case(0.1, "reference", 3.0),
        _density_case(0.1, "dense", 2.0),
        {**_density_case(0.1, "auto", 1.0), "auto_choice": "sparse"},
    ]
    result = crossover_density(cases)
    assert result["points"] == [] and "fused failed (crashed)" in result["status"]
    (row,) = auto_vs_best(cases)
    assert row["ratio"] is None and row["within_10_percent"] is None
    assert row["best_mode"] is None and row["same_mode_as_best"] is None
    assert "fused failed (crashed)" in row["note"]


def test_the_paired_phase_is_undecided_where_an_isolated_case_failed():
    from graphattn.bench.analysis import auto_vs_best

    isolated = [_scaling_case("fused", 1000, None, "failed")]
    paired = [  # the paired phase skips the failed case: only reference and auto ran
        _scaling_case("reference", 1000, 2.0),
        _scaling_case("auto", 1000, 1.9, auto_choice="sparse"),
    ]
    assert auto_vs_best(paired)[0]["within_10_percent"] is True  # alone it looks decided
    (row,) = auto_vs_best(paired, failed_elsewhere=isolated)
    assert row["within_10_percent"] is None and "fused failed" in row["note"]


def test_a_multi_line_reason_stays_on_its_line_of_bench_md(bench_json: dict) -> None:
    # the offline data-set message spans lines; written as is, it ended its list item
    # (and a target's table row) at the first line break
    import copy

    from graphattn.bench.analysis import derive
    from graphattn.bench.report import markdown_report

    result = copy.deepcopy(bench_json)
    for case in result["cases"]:
        if case["suite"] == "training":
            case.update(status="skipped", reason="data unavailable.\nLooked for:\n  /x/y.csv")
    result["derived"] = derive(result["cases"], 0.25, result.get("paired"))
    text = markdown_report(result)
    assert "training_step_over_pyg_time | – (not measured: graphattn skipped, pyg skipped)" in text
    items = [line for line in text.splitlines() if line.startswith("- `training/")]
    assert len(items) == 2 and all("Looked for: /x/y.csv" in line for line in items)


def test_a_multi_line_failure_stays_on_its_line_in_every_section(bench_json: dict) -> None:
    # a failed case's reason also reaches a target's note, the notes under the auto
    # tables and the paired phase's list: each on one line, as among the skipped cases
    import copy

    from graphattn.bench.analysis import derive
    from graphattn.bench.report import markdown_report

    result = copy.deepcopy(bench_json)
    reason = "out of memory.\nTried to allocate:\n  2 GiB"
    flat = "out of memory. Tried to allocate: 2 GiB"
    (auto,) = [c for c in result["cases"] if c.get("impl") == "auto"][:1]
    for case in result["cases"]:
        if case is auto or (case["suite"] == "training" and case["impl"] == "graphattn"):
            case.update(status="failed", reason=reason)
    paired = result["paired"][0]
    paired.update(status="failed", reason=reason)
    result["derived"] = derive(result["cases"], 0.25, result.get("paired"))
    lines = markdown_report(result).splitlines()
    assert not [line for line in lines if line.startswith(("Tried", "  2 GiB"))]
    assert any(line.startswith("| training_step_over_pyg_time") and flat in line for line in lines)
    assert any(line.startswith(f"- `{auto['group']}`: ") and flat in line for line in lines)
    item = f"- `{paired['group']}` {paired['impl']} (failed): {flat}"
    assert item in lines


# --------------------------------------------------------------------------- measurement protocol
# (from a mutation round on the harness: each test fails on a planted one-line bug)


def _record_passes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, torch.Tensor]]:
    """``(impl, edge_index)`` of every pass of the layers built from now on."""
    import graphattn.bench.models as models

    build, passes = models.build_attention, []

    class Recording(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module, impl: str) -> None:
            super().__init__()
            self.inner, self.impl, self.layer = inner, impl, inner.layer

        def forward(self, x, edge_index, batch=None):
            passes.append((self.impl, edge_index))
            return self.inner(x, edge_index, batch)

    monkeypatch.setattr(models, "build_attention", lambda spec: Recording(build(spec), spec.impl))
    return passes


def _tiny_molecules(count: int):
    from graphattn.bench.inputs import esol_batches
    from graphattn.bench.worker import MoleculeData

    smiles = ["CCO", "CC(=O)O", "c1ccccc1", "CCN", "OCCO", "CCCl"]
    return MoleculeData(*esol_batches(smiles, [0.5] * len(smiles), 2, count))


def test_a_case_reports_the_median_of_its_timed_passes_after_untimed_warmup(
    monkeypatch: pytest.MonkeyPatch, script_time_pass
) -> None:
    import graphattn.bench.worker as worker
    from graphattn.bench.measure import _current_rss

    passes = _record_passes(monkeypatch)
    script_time_pass(worker, [9.0, 1.0, 2.0, 30.0])  # the cold pass, then 3 timed ones
    spec = CaseSpec("scaling", "fused", num_nodes=200, in_degree=5, repeats=3, warmup=2)
    result = run_case(spec)
    assert result["status"] == "ok", result["reason"]
    assert result["cold_seconds"] == 9.0 and result["times"] == [1.0, 2.0, 30.0]
    assert result["median_seconds"] == 2.0  # the median, not the mean (11)
    # 2 untimed warm-up passes, the cold one on a fresh copy of edge_index, then the
    # timed ones on the graph the warm-up prepared (a fixed graph)
    edges = [e for _, e in passes]
    assert len(edges) == 6
    assert all(e is edges[0] for e in edges[:2] + edges[3:])
    assert edges[2] is not edges[0] and torch.equal(edges[2], edges[0])
    assert (result["num_edges"], result["allowed_pairs"], result["padded_pairs"]) == (
        1000,
        1200,
        200**2,
    )
    assert result["density"] == 1200 / 200**2  # self-loops included
    # the extra peak of the cold pass, from the RSS right before it
    assert result["memory_method"] in (
        "VmHWM after clear_refs",
        "ru_maxrss",
        "ru_maxrss (upper bound)",
    )
    assert 0 <= result["peak_extra_bytes"] < _current_rss()


def test_a_molecule_case_times_every_batch_on_a_new_copy_of_its_edges(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    molecules = _tiny_molecules(count=3)
    passes = _record_passes(monkeypatch)
    result = run_case(CaseSpec("molecules", "fused", repeats=1, warmup=1), molecules)
    assert result["status"] == "ok", result["reason"]
    assert result["graphs_per_pass"] == 3
    assert len(result["times"]) == 3  # one timed pass per batch at least, not `repeats`
    # warm-up on batch 0, cold pass on batch 1, timed passes on batches 1, 2, 0
    batches = [molecules.batches[i].edge_index for i in (0, 1, 1, 2, 0)]
    assert len(passes) == len(batches)
    for (_, seen), edges in zip(passes, batches, strict=True):
        assert seen is not edges and torch.equal(seen, edges)


def test_the_training_case_steps_the_model_in_training_mode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import graphattn.bench.models as models

    build, built = models.build_molecule_model, []
    monkeypatch.setattr(
        models, "build_molecule_model", lambda *a: built.append(build(*a)) or built[-1]
    )
    result = run_case(CaseSpec("training", "graphattn", repeats=1), _tiny_molecules(count=2))
    assert result["status"] == "ok", result["reason"]
    (model,) = built
    assert model.training  # dropout on, as in training (the step puts it in train mode)


def test_paired_rounds_shuffle_the_order_and_report_the_median(
    monkeypatch: pytest.MonkeyPatch, script_time_pass
) -> None:
    import graphattn.bench.worker as worker
    from graphattn.bench.runner import run_paired

    passes = _record_passes(monkeypatch)
    script_time_pass(worker, [float(i * i) for i in range(1, 16)])  # 5 rounds x 3 impls
    specs = [*_paired_specs(), CaseSpec("scaling", "pyg", num_nodes=200, in_degree=5)]
    specs.append(CaseSpec("training", "graphattn"))  # neither is timed in the paired phase
    records = {r["impl"]: r for r in run_paired(specs, None, 5, progress=False)}
    assert sorted(records) == ["auto", "fused", "reference"]
    order = [impl for impl, _ in passes[3:]]  # after one warm-up pass of each
    rounds = [tuple(order[i : i + 3]) for i in range(0, 15, 3)]
    assert all(sorted(r) == ["auto", "fused", "reference"] for r in rounds)
    assert len(set(rounds)) > 1  # a fresh order every round, not a fixed one
    for record in records.values():
        assert len(record["times"]) == 5
        assert record["median_seconds"] == sorted(record["times"])[2]  # not the mean


def test_an_isolated_case_past_its_timeout_is_a_failed_case_that_says_so() -> None:
    from graphattn.bench.worker import run_isolated

    spec = CaseSpec("scaling", "fused", num_nodes=100, in_degree=3, repeats=1)
    result = run_isolated(spec, timeout=0.001)
    assert result["status"] == "failed" and result["skipped"] is True
    assert result["reason"] == "no result within 0.001 s (killed)"


def test_a_case_past_its_timeout_is_killed_at_once(capfd) -> None:
    # it was given 10 s more to finish, and its late send printed BrokenPipeError
    from graphattn.bench.worker import run_isolated

    spec = CaseSpec("scaling", "reference", num_nodes=2000, in_degree=10, repeats=3000, threads=1)
    run_isolated(spec, timeout=0.001)  # starts the forkserver, which takes seconds
    started = time.perf_counter()
    result = run_isolated(spec, timeout=1.0)
    assert result["reason"] == "no result within 1.0 s (killed)"
    assert time.perf_counter() - started < 6.0  # 11 s before
    assert "BrokenPipeError" not in capfd.readouterr().err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RSS probe details are Linux")
def test_the_cpu_probe_counts_from_its_baseline_not_the_earlier_peak() -> None:
    block = torch.ones(64 * 2**20)  # 256 MiB touched, then freed before the probe starts
    del block
    probe = CpuMemoryProbe()
    probe.start()
    small = torch.ones(4 * 2**20)  # 16 MiB
    extra = probe.extra_peak()
    del small
    if probe.method != "VmHWM after clear_refs":
        pytest.skip(f"the high-water mark cannot be reset here ({probe.method})")
    assert 12 * 2**20 <= extra < 64 * 2**20, extra


def test_proc_status_fields_are_read_in_kibibytes(monkeypatch, tmp_path: Path) -> None:
    import graphattn.bench.measure as measure

    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmHWM:\t  2048 kB\nVmRSS:\t  1000 kB\n")
    monkeypatch.setattr(measure, "_STATUS", status)
    assert measure._status_bytes("VmHWM") == 2048 * 1024
    assert measure._status_bytes("VmRSS") == 1000 * 1024
    assert measure._status_bytes("VmSwap") is None


def test_run_benchmarks_refuses_counts_it_cannot_honour(tmp_path: Path) -> None:
    from graphattn.errors import GraphInputError

    with pytest.raises(GraphInputError, match="repeats must be at least 1, got 0"):
        run_benchmarks(tmp_path, quick=True, repeats=0, progress=False)
    with pytest.raises(GraphInputError, match="paired_rounds must be 0 .* got -1"):
        run_benchmarks(tmp_path, quick=True, paired_rounds=-1, progress=False)
    assert not (tmp_path / "bench.json").exists()


@pytest.mark.parametrize("quick", [True, False])
def test_settings_record_what_the_run_used(tmp_path: Path, quick: bool, monkeypatch) -> None:
    # every CUDA case skipped (as on a machine without CUDA, whatever this one has): only
    # the settings are computed
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    kwargs = {"repeats": 3, "paired_rounds": 0} if quick else {}
    result = run_benchmarks(tmp_path, quick=quick, device="cuda", progress=False, **kwargs)
    settings = result["settings"]
    assert settings["repeats"] == (3 if quick else 5)  # the cases', not the grid's
    assert settings["threads"] == (1 if quick else None)
    assert settings["paired_rounds"] == (0 if quick else 12)
    assert settings["isolated_processes"] is False  # CUDA cases run in this process
    assert settings["case_timeout_seconds"] is None


@pytest.mark.parametrize(("quick", "timeout"), [(True, 120.0), (False, 1800.0)])
def test_the_default_case_timeout_is_recorded(tmp_path: Path, quick: bool, timeout: float) -> None:
    result = run_benchmarks(tmp_path, quick=quick, device="cpu", progress=False, suites=[])
    assert result["cases"] == []
    assert result["settings"]["isolated_processes"] is True
    assert result["settings"]["case_timeout_seconds"] == timeout


def test_default_dense_budget_is_a_quarter_of_free_ram_up_to_4_gib(monkeypatch) -> None:
    import types

    import psutil

    from graphattn.bench.runner import default_dense_budget

    for available, budget in ((8 * 2**30, 2 * 2**30), (64 * 2**30, 4 * 2**30)):
        memory = types.SimpleNamespace(available=available)
        monkeypatch.setattr(psutil, "virtual_memory", lambda memory=memory: memory)
        assert default_dense_budget("cpu") == budget


def _timed(impl: str, n: int | None, seconds: float, memory: int = 2**20, **extra) -> dict:
    """An ok case: a scaling one of ``n`` nodes (:func:`_scaling_case`), or with ``n``
    None the training step's."""
    if n is not None:
        return {**_scaling_case(impl, n, seconds, **extra), "peak_extra_bytes": memory}
    return {
        "name": f"training/{impl}",
        "group": "training",
        "suite": "training",
        "impl": impl,
        "status": "ok",
        "num_nodes": None,
        "density": None,
        "median_seconds": seconds,
        "peak_extra_bytes": memory,
        **extra,
    }


def test_targets_auto_and_ratios_at_their_limits() -> None:
    from graphattn.bench.analysis import AUTO_TOLERANCE, derive

    cases = [
        _timed("fused", 20_000, 1.0, 2**20),
        _timed("reference", 20_000, 1.5),
        _timed("dense", 20_000, 2.0),
        _timed("auto", 20_000, 1.1, auto_choice="sparse"),  # exactly 10% slower: within
        _timed("pyg", 20_000, 2.0, 2**22),
        _timed("fused", 100_000, 1.0, 2**20),
        _timed("dense", 100_000, 3.0),
        _timed("auto", 100_000, 1.3, auto_choice="dense"),
        _timed("pyg", 100_000, 1.6, 0),  # no extra peak measured: no memory ratio
        _timed("graphattn", None, 0.7),
        _timed("pyg", None, 1.0),
    ]
    derived = derive(cases, 0.1)
    targets = {k: (v["value"], v["limit"], v["met"]) for k, v in derived["targets"].items()}
    assert targets == {
        "fused_over_pyg_time_N20000": (0.5, 0.5, True),  # a ratio at its limit meets it
        "fused_over_pyg_memory_N20000": (0.25, 0.25, True),
        "fused_over_pyg_time_N100000": (0.625, 0.5, False),
        "fused_over_pyg_memory_N100000": (None, 0.25, None),
        "training_step_over_pyg_time": (0.7, 0.7, True),
        "auto_over_best_worst": (1.3, AUTO_TOLERANCE, False),  # the worst group, not the best
    }
    assert AUTO_TOLERANCE == 1.1
    rows = {r["group"]: r for r in derived["auto_vs_best"]}
    small, large = rows["scaling/N=20000,d=10"], rows["scaling/N=100000,d=10"]
    assert (small["best_mode"], small["ratio"], small["within_10_percent"]) == ("sparse", 1.1, True)
    assert small["same_mode_as_best"] is True and small["best_seconds"] == 1.0
    assert (large["ratio"], large["within_10_percent"], large["same_mode_as_best"]) == (
        1.3,
        False,
        False,
    )
    (reference,) = derived["reference_vs_pyg"]
    assert reference["group"] == "scaling/N=20000,d=10" and reference["time_ratio"] == 0.75
    # no case of N=1,000,000 in the run: the CUDA target is not listed at all
    cuda = derive(cases, 0.1, device_type="cuda")["targets"]
    assert not any(key.startswith("fused_over_pyg") for key in cuda)


def test_derive_leaves_the_paired_auto_undecided_where_an_isolated_case_failed() -> None:
    from graphattn.bench.analysis import derive

    isolated = [
        _scaling_case("fused", 1000, None, "failed"),
        _scaling_case("reference", 1000, 2.0),
        _scaling_case("auto", 1000, 1.9, auto_choice="sparse"),
    ]
    paired = isolated[1:]  # the paired phase skipped the failed fused case
    (row,) = derive(isolated, 0.1, paired)["auto_vs_best_paired"]
    assert row["within_10_percent"] is None and "fused failed" in row["note"]


def test_bandwidth_counts_the_sparse_passes_traffic_over_its_median_time() -> None:
    from graphattn.bench.analysis import add_bandwidth, bandwidth_summary, edge_traffic_bytes

    # forward + backward: 8 node rows and 6 edge rows of C floats, one int64 per edge and pass
    assert edge_traffic_bytes(10, 30, 64) == 4 * 64 * (8 * 10 + 6 * 30) + 16 * 30
    cases = [
        _timed(impl, 1000, 0.5, allowed_pairs=11_000, auto_choice=choice)
        for impl, choice in (("fused", None), ("auto", "sparse"), ("dense", None))
    ]
    cases.append(_timed("auto", 2000, 0.5, allowed_pairs=22_000, auto_choice="dense"))
    add_bandwidth(cases, 64)
    traffic = edge_traffic_bytes(1000, 11_000, 64)
    for case in cases[:2]:  # fused, and auto where it chose sparse
        assert case["traffic_bytes"] == traffic
        assert case["bandwidth_gb_s"] == traffic / 0.5 / 1e9
    assert all("bandwidth_gb_s" not in case for case in cases[2:])
    (row,) = bandwidth_summary(cases, peak_gb_s=100.0)
    assert row["fraction_of_copy_bandwidth"] == row["bandwidth_gb_s"] / 100.0


def test_full_grids_hold_the_target_sizes_and_only_degrees_below_n() -> None:
    from graphattn.bench.analysis import SCALING_TARGETS
    from graphattn.bench.cases import full_grid

    cpu, cuda = full_grid("cpu"), full_grid("cuda")
    assert cpu.scaling_nodes == (1_000, 3_000, 10_000, 20_000, 50_000, 100_000)
    assert cuda.scaling_nodes == (*cpu.scaling_nodes, 300_000, 1_000_000)
    assert (cpu.density_nodes, cuda.density_nodes) == ((2_000,), (2_000, 8_000))
    for device, grid in (("cpu", cpu), ("cuda", cuda)):
        assert set(SCALING_TARGETS[device]) <= set(grid.scaling_nodes)
    density = {(s.num_nodes, s.in_degree) for s in build_cases(cuda, "cuda", 2**30)}
    density = {(n, d) for n, d in density if n in cuda.density_nodes and d != 10}
    assert all(d < n for n, d in density)  # no graph has N or more sources per node
    assert {(2_000, 1000), (8_000, 2000), (8_000, 4000)} <= density
    assert (2_000, 2000) not in density


def test_each_implementation_builds_the_layer_it_names() -> None:
    from graphattn.bench.models import build_attention

    built = {}
    for impl in ("fused", "reference", "dense", "auto"):
        layer = build_attention(CaseSpec("scaling", impl, max_dense_bytes=12345)).layer
        built[impl] = (layer.mode, layer.kernel, layer.max_dense_bytes, layer.heads)
    assert built == {
        "fused": ("sparse", "fused", 12345, 4),
        "reference": ("sparse", "reference", 12345, 4),
        "dense": ("dense", "auto", 12345, 4),
        "auto": ("auto", "auto", 12345, 4),
    }
    pyg = build_attention(CaseSpec("scaling", "pyg")).layer
    assert (type(pyg).__name__, pyg.heads, pyg.out_channels) == ("TransformerConv", 4, 16)


def test_esol_batches_are_full_batches_of_valid_molecules_with_their_targets() -> None:
    from graphattn.bench.inputs import esol_batches

    smiles = ["CCO", "CC(=O)O", "not a smiles", "c1ccccc1", "CCN", "OCCO", "CCCl"]
    batches, atom_dim, bond_dim = esol_batches(smiles, [float(i) for i in range(7)], 3, 5)
    assert len(batches) == 2  # the six valid molecules in full batches of 3, none left over
    assert sorted(float(y) for b in batches for y in b.y) == [0.0, 1.0, 3.0, 4.0, 5.0, 6.0]
    for b in batches:
        assert b.num_graphs == 3 and b.y.shape == (3, 1)
        assert b.x.size(1) == atom_dim and b.edge_attr.size(1) == bond_dim
    assert len(esol_batches(smiles, [0.0] * 7, 3, 1)[0]) == 1  # no more than `count`


def test_load_esol_reads_the_measured_solubility(data_dir: Path) -> None:
    from graphattn.bench.inputs import load_esol

    smiles, targets = load_esol(data_dir, download=False)
    assert len(smiles) == len(targets) == 1128
    assert smiles[1] == "Cc1occc1C(=O)Nc2ccccc2" and targets[:2] == [-0.77, -3.3]
    assert not smiles[0].endswith(" ")  # the file's trailing space is stripped


def test_random_graph_permutes_only_dense_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    # a permutation per row is N^2 keys: at N=100,000 that is 40 GB
    import graphattn.bench.inputs as inputs

    exact = inputs._exact_offsets
    calls = []
    monkeypatch.setattr(
        inputs, "_exact_offsets", lambda n, d, g: calls.append((n, d)) or exact(n, d, g)
    )
    random_graph(1_000, 10)
    random_graph(40, 20)
    assert calls == [(40, 20)]


def test_the_pyg_block_is_pre_norm_like_graphattns() -> None:
    from graphattn.bench.models import _PyGBlock, molecule_config

    block = _PyGBlock(molecule_config(8, 4, 2**20)).eval()
    c = block.conv.in_channels
    x, edge_attr = torch.randn(5, c), torch.randn(8, c)
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 1, 2, 3], [1, 2, 3, 4, 0, 0, 1, 2]])
    h = x + block.conv(block.norm_attention(x), edge_index, edge_attr)
    expected = h + block.ffn(block.norm_ffn(h))  # the feed-forward sees h, not x
    torch.testing.assert_close(block(x, edge_index, edge_attr), expected)


def test_machine_records_this_process_and_a_given_commit(monkeypatch) -> None:
    from graphattn.bench import machine

    monkeypatch.setattr(machine, "usable_cores", lambda: 3)
    monkeypatch.setenv("GRAPHATTN_COMMIT", "0123abc")
    described = machine.describe_machine()
    assert described["usable_cores"] == 3  # the affinity mask, not os.cpu_count()
    assert described["torch_threads"] == torch.get_num_threads()
    assert described["graphattn_commit"] == "0123abc"


def test_an_earlier_runs_bench_json_is_kept_as_bench_previous(tmp_path: Path) -> None:
    # a new run wrote its partial results over a complete earlier run, even one that
    # measured nothing
    earlier = {"complete": True, "earlier": 1, "cases": [{"status": "ok"}]}
    (tmp_path / "bench.json").write_text(json.dumps(earlier))
    run_benchmarks(tmp_path, quick=True, device="cpu", progress=False, suites=[])
    assert json.loads((tmp_path / "bench.previous.json").read_text())["earlier"] == 1
    assert "earlier" not in json.loads((tmp_path / "bench.json").read_text())
    # a run that measured nothing (this one: no case) is replaced, not kept: two such runs
    # in a row (--device cuda without a GPU) must not push out the last measured one
    run_benchmarks(tmp_path, quick=True, device="cpu", progress=False, suites=[])
    assert json.loads((tmp_path / "bench.previous.json").read_text())["earlier"] == 1
    # a file that is not one of ours, however odd, is kept rather than a traceback
    (tmp_path / "bench.json").write_text("[" * 100_000)
    run_benchmarks(tmp_path, quick=True, device="cpu", progress=False, suites=[])
    assert (tmp_path / "bench.previous.json").read_text() == "[" * 100_000


def test_run_problems_name_the_failed_cases_and_the_suites_that_measured_nothing() -> None:
    from graphattn.bench.runner import run_problems

    cases = [
        {"name": "scaling/fused/n1000", "suite": "scaling", "status": "ok"},
        {"name": "scaling/dense/n1000", "suite": "scaling", "status": "failed", "reason": "E: x"},
        {
            "name": "training/graphattn",
            "suite": "training",
            "status": "skipped",
            "reason": "no ESOL",
        },
    ]
    assert run_problems({"cases": cases}) == [
        "1 case(s) failed (first: scaling/dense/n1000: E: x)",
        "suite training: nothing measured (no ESOL)",
    ]
    assert run_problems({"cases": cases[:1]}) == []
    from graphattn.bench.runner import written_line

    assert written_line({"cases": cases}, "out") == "wrote 3 cases (1 measured) to out"


def test_bench_exits_1_when_a_case_failed(tmp_path: Path, monkeypatch, capsys) -> None:
    import graphattn.bench.runner as runner
    from graphattn.cli.main import main

    cases = [
        {"name": "a", "suite": "scaling", "status": "ok"},
        {"name": "b", "suite": "scaling", "status": "failed", "reason": "ValueError: v"},
    ]
    monkeypatch.setattr(runner, "run_benchmarks", lambda **kwargs: {"cases": cases})
    assert main(["bench", "--quick", "--out", str(tmp_path), "--no-progress"]) == 1
    assert "graphattn bench: 1 case(s) failed (first: b: ValueError: v)" in capsys.readouterr().err
    monkeypatch.setattr(runner, "run_benchmarks", lambda **kwargs: {"cases": cases[:1]})
    assert main(["bench", "--quick", "--out", str(tmp_path), "--no-progress"]) == 0


def test_run_benchmarks_takes_a_zero_dense_budget_and_refuses_bad_settings(
    tmp_path: Path, monkeypatch
) -> None:
    from graphattn import GraphInputError

    # the molecules suite without its data: every case skipped at once, on the CPU
    result = run_benchmarks(tmp_path, quick=True, device="cpu", progress=False,
                            suites=["molecules"], max_dense_bytes=0,
                            data_dir=tmp_path / "nowhere", paired_rounds=0)  # fmt: skip
    assert result["settings"]["max_dense_bytes"] == 0  # it became the 4 GiB default
    with pytest.raises(GraphInputError, match="max_dense_bytes must be 0 .never dense. or more"):
        run_benchmarks(tmp_path, quick=True, max_dense_bytes=-1)
    for timeout in (0, -5.0):
        with pytest.raises(GraphInputError, match="case_timeout must be a positive number"):
            run_benchmarks(tmp_path, quick=True, case_timeout=timeout)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--impl", "fsued", "--nodes", "10", "--degree", "2"], "invalid choice"),
        (["--impl", "fused", "--nodes", "-5", "--degree", "2"], "'-5'"),
        (["--impl", "fused", "--nodes", "10", "--degree", "2", "--repeats", "0"], "'0'"),
        (["--impl", "fused"], "--suite scaling needs --nodes and --degree"),
    ],
)
def test_the_worker_command_refuses_bad_arguments(flags, message, capsys) -> None:
    # each ran, printed a "failed" record and exited 0
    from graphattn.bench.worker import main as worker_main

    with pytest.raises(SystemExit) as exit_info:
        worker_main(["--suite", "scaling", *flags])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        worker_main(["--suite", "training", "--impl", "fused"])
    assert "--suite training runs --impl graphattn or pyg, not fused" in capsys.readouterr().err
