"""What a wheel ships and what ``make install`` needs, checked against the checkout."""

from __future__ import annotations

import fnmatch
import importlib.metadata
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import graphattn.pretrained as pretrained

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_data_globs_ship_every_resource_file():
    """A wheel holds the ``.py`` files and what pyproject's package-data names: every other
    file in ``graphattn/`` (the shipped encoders, say) must match a glob of its package."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    with open(ROOT / "pyproject.toml", "rb") as handle:
        package_data = tomllib.load(handle)["tool"]["setuptools"]["package-data"]
    resources = [
        path.relative_to(ROOT)
        for path in (ROOT / "graphattn").rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts
    ]
    shipped = {
        f"graphattn/pretrained/{name}" for name, _ in pretrained.PRETRAINED_ENCODERS.values()
    }
    assert shipped <= {path.as_posix() for path in resources}
    for path in resources:
        package = ".".join(path.parent.parts)
        globs = package_data.get(package, []) + package_data.get("*", [])
        assert any(fnmatch.fnmatch(path.name, glob) for glob in globs), (
            f"{path} is not in pyproject's package-data for {package}: a wheel leaves it out"
        )


def test_make_refuses_a_python_older_than_the_pinned_versions_need():
    """``make install`` stops with a message on a Python that a version pinned in
    requirements/constraints.txt does not support (numpy 2.4 needs 3.11: pip failed)."""
    from packaging.specifiers import SpecifierSet

    guard = re.search(r"sys\.version_info < \((\d+), (\d+)\)", (ROOT / "Makefile").read_text())
    assert guard, "the Makefile does not check the Python version before installing"
    oldest = f"{guard[1]}.{guard[2]}"
    checked = 0
    for line in (ROOT / "requirements" / "constraints.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, version = line.split("==")
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if dist.version != version:
            continue  # only the pinned release's metadata says what it needs
        checked += 1
        needs = dist.metadata.get("Requires-Python") or ""
        assert oldest in SpecifierSet(needs), f"{line} needs Python {needs}, make accepts {oldest}"
    if not checked:
        pytest.skip("none of the pinned versions is installed")


needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
# an outer make (make test TORCH_SPEC=...) passes its settings down through these
MAKE_INHERITED = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PYTHON", "TORCH_SPEC", "TORCH_INDEX", "VENV"}


def run_make(folder: Path, *arguments: str, **exported: str) -> str:
    """``make VENV=env *arguments`` in ``folder``, with ``exported`` as the only install
    settings in its environment; its output, after checking that it succeeded."""
    env = {k: v for k, v in os.environ.items() if k not in MAKE_INHERITED} | exported
    command = ["make", *arguments, "VENV=env"]
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def make_plan(folder: Path, recorded: str | None, *settings: str, **exported: str) -> str:
    """What ``make -n install`` would run in ``folder``: on an environment installed with
    the settings ``recorded`` (``None``: none installed yet), given ``settings`` on the
    command line and ``exported``."""
    for name in ("Makefile", "pyproject.toml", "requirements/constraints.txt"):
        (folder / name).parent.mkdir(exist_ok=True)
        shutil.copy(ROOT / name, folder / name)
    if recorded is not None:
        (folder / "env").mkdir(exist_ok=True)
        (folder / "env" / ".settings").write_text(recorded + "\n")
        (folder / "env" / ".installed").touch()
    return run_make(folder, "-n", "install", *settings, **exported)


@needs_make
def test_make_builds_the_environment_again_when_an_install_setting_changes(tmp_path):
    """``make test TORCH_SPEC=...`` on an installed environment rebuilds it with that torch
    (the stamp once ignored the settings, so the old torch was tested); targets run
    without install settings use the environment as it is."""
    first = make_plan(tmp_path, None)
    assert "-m venv  env" in first and "--clear" not in first
    recorded = "python3 torch==2.13.0"
    assert "pip install" not in make_plan(tmp_path, recorded)
    assert "pip install" not in make_plan(tmp_path, recorded, "TORCH_SPEC=torch==2.13.0")
    assert "pip install" not in run_make(tmp_path, "-n", "train")
    rebuilt = make_plan(tmp_path, recorded, "TORCH_SPEC=torch==2.14.1")
    assert "-m venv --clear env" in rebuilt and '"torch==2.14.1"' in rebuilt
    assert "> env/.settings" in rebuilt
    rebuilt = make_plan(tmp_path, recorded, "TORCH_INDEX=https://example.org/cpu")
    assert "--clear" in rebuilt and "--index-url https://example.org/cpu" in rebuilt
    assert "python3.12 -m venv --clear env" in make_plan(tmp_path, recorded, "PYTHON=python3.12")


@needs_make
def test_make_rebuilds_for_a_dropped_or_exported_setting_and_keeps_an_unnamed_one(tmp_path):
    cpu = "python3 torch==2.13.0 https://example.org/cpu"
    assert "--clear" in make_plan(tmp_path, cpu, "TORCH_INDEX=")  # the index left out
    assert "--clear" in make_plan(tmp_path, "python3 torch==2.13.0", TORCH_SPEC="torch==2.14.1")
    # installed with TORCH_SPEC=torch==2.14.1 earlier: a plain make uses it as it is
    assert "pip install" not in make_plan(tmp_path, "python3 torch==2.14.1")


@needs_make
def test_make_clean_removes_the_environment_and_caches_and_keeps_the_run_folders(tmp_path):
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    kept = ["runs/default/metrics.json", "bench_out/results.json", "graphattn/core.py"]
    removed = ["env/bin/python", "graphattn/__pycache__/core.pyc", "tests/sub/__pycache__/t.pyc"]
    removed += [".pytest_cache/README.md", "graphattn.egg-info/PKG-INFO"]
    for name in kept + removed:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).touch()
    run_make(tmp_path, "clean")
    assert [name for name in kept if not (tmp_path / name).exists()] == []
    assert [name for name in removed if (tmp_path / name).exists()] == []
    assert not (tmp_path / "graphattn" / "__pycache__").exists()


def test_the_constraints_leave_triton_to_torch():
    # a CUDA build of torch pins its own triton (torch 2.13.0: 3.7.1): a pin here made
    # pip refuse every CUDA torch with ResolutionImpossible
    pins = (ROOT / "requirements" / "constraints.txt").read_text().splitlines()
    assert not [line for line in pins if re.match(r"(torch|triton)==", line, re.IGNORECASE)]


def test_the_sdist_holds_the_test_suite_and_what_it_reads(tmp_path):
    """setuptools alone puts only tests/test*.py in an sdist: without tests/conftest.py,
    tests/graphs.py, the examples and the benchmark scripts, five test modules failed to
    import and others to find their files."""
    import shutil
    import subprocess
    import sys
    import tarfile

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    setuptools = pytest.importorskip("setuptools")
    if int(setuptools.__version__.split(".")[0]) < 77:
        pytest.skip("pyproject.toml needs setuptools >= 77")
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    tracked = [name for name in listed.stdout.splitlines() if (ROOT / name).is_file()]
    source = tmp_path / "source"
    for name in tracked:  # a copy: building writes egg-info next to the source
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, source / name)
    build = "from setuptools import build_meta; print(build_meta.build_sdist(%r))"
    out = subprocess.run(
        [sys.executable, "-c", build % str(tmp_path)], cwd=source, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    with tarfile.open(tmp_path / out.stdout.split()[-1]) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    needed = [
        name
        for name in tracked
        if name.startswith(("tests/", "examples/", "benchmarks/", "datasets/"))
        or name in ("README.md", "LICENSE", "Makefile", "requirements/constraints.txt")
    ]
    missing = [name for name in needed if name not in names]
    assert not missing, f"the sdist leaves out {len(missing)} files, e.g. {missing[:5]}"


def test_each_test_has_a_time_limit(pytestconfig):
    """pytest-timeout (a dev dependency) fails a hung test, a worker process waited on
    forever say, instead of stalling the whole run."""
    assert pytestconfig.pluginmanager.hasplugin("timeout")
    assert float(pytestconfig.getini("timeout")) == 600


def test_every_text_file_the_package_opens_names_its_encoding():
    # without encoding=, open() uses the locale's: a target named ΔG crashed train's
    # predictions.csv under LANG=C after training, and bench.md's "≤" did the same
    import ast

    package = Path(__file__).resolve().parents[1] / "graphattn"
    unnamed = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name not in ("open", "read_text", "write_text"):
                continue
            if isinstance(func, ast.Attribute) and ast.unparse(func.value) in ("os", "Image"):
                continue  # os.open takes flags, not text
            modes = [a.value for a in node.args[1:2] if isinstance(a, ast.Constant)]
            modes += [k.value.value for k in node.keywords if k.arg == "mode"]
            if any("b" in str(mode) for mode in modes):
                continue
            if not any(k.arg == "encoding" for k in node.keywords):
                unnamed.append(f"{path.relative_to(package.parent)}:{node.lineno}")
    assert unnamed == []
