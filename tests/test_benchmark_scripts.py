"""The benchmark scripts run end to end (``--smoke``: tiny data, meaningless figures)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import REPO


def run_script(name: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / name), *args],
        cwd=REPO / "benchmarks",
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_molecule_targets_records_a_graphattn_variant(data_dir, tmp_path):
    result = run_script(
        "molecule_targets.py",
        *("--smoke", "--data-dir", str(data_dir), "--out", str(tmp_path)),
        *("--datasets", "freesolv", "--models", "graphattn", "--atom-contributions"),
        *("--model-overrides", '{"layers": 1}', "--train-overrides", '{"batch_size": 16}'),
    )
    assert result.returncode == 0, result.stderr
    payload = json.loads((tmp_path / "molecule_targets.json").read_text())
    assert payload["complete"]
    assert payload["settings"]["graphattn_variant"] == {
        "model_overrides": {"layers": 1},
        "train_overrides": {"batch_size": 16},
        "atom_contributions": True,
    }
    (run,) = payload["runs"]
    assert run["config"]["model"]["layers"] == 1 and run["config"]["batch_size"] == 16
    assert "Not the targets' setting" in (tmp_path / "molecule_targets.md").read_text()


def test_auto_choice_times_every_mode_of_each_size_in_one_process(data_dir, tmp_path):
    result = run_script(
        "auto_choice.py", "--smoke", "--data-dir", str(data_dir), "--out", str(tmp_path)
    )
    assert result.returncode == 0, result.stderr
    payload = json.loads((tmp_path / "auto_choice.json").read_text())
    groups = [c["group"] for c in payload["comparisons"]]
    assert "molecules" in groups and any(g.startswith("density/") for g in groups)
    for c in payload["comparisons"]:
        assert c["auto_seconds"] > 0 and c["best_seconds"] > 0
        assert c["auto_choice"] in ("sparse", "dense") and c["best_mode"] in ("sparse", "dense")
        assert c["within_10_percent"] == (c["ratio"] <= 1.10)
    timed = {(r["group"], r["impl"]) for r in payload["paired"] if r["status"] == "ok"}
    for group in groups:
        assert {(group, impl) for impl in ("fused", "reference", "auto")} <= timed
    assert "auto / faster" in (tmp_path / "auto_choice.md").read_text()


def test_kernel_crossover_times_both_kernels_and_records_the_auto_choice(data_dir, tmp_path):
    result = run_script(
        "kernel_crossover.py", "--smoke", "--data-dir", str(data_dir), "--out", str(tmp_path)
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads((tmp_path / "kernel_crossover.json").read_text())["rows"]
    assert rows and {r["edge_features"] for r in rows} == {False, True}
    for r in rows:
        assert r["fused_ms"] > 0 and r["reference_ms"] > 0
        assert r["fused_over_reference"] == r["fused_ms"] / r["reference_ms"]
        assert r["auto_chooses"] in ("fused", "reference")
