"""What the benchmark measures: one :class:`CaseSpec` per (suite, implementation, size).

Suites:

- ``scaling``: random graphs, N nodes, every node gets ``in_degree`` random sources.
- ``density``: the same generator at a fixed N with a growing in-degree (dense wins
  at high density; the crossover calibrates ``mode="auto"``).
- ``molecules``: one attention layer on batches of real ESOL molecules.
- ``training``: one optimizer step of the whole molecule model.

The attention suites compare :data:`LAYER_IMPLS`; the training suite :data:`MODEL_IMPLS`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

__all__ = [
    "LAYER_IMPLS",
    "MODEL_IMPLS",
    "SUITES",
    "CaseSpec",
    "Grid",
    "build_cases",
    "full_grid",
    "quick_grid",
]

SUITES = ("scaling", "density", "molecules", "training")
LAYER_IMPLS = ("fused", "reference", "dense", "auto", "pyg")
MODEL_IMPLS = ("graphattn", "pyg")
GRAPH_SUITES = ("scaling", "density")
MOLECULE_SUITES = ("molecules", "training")


@dataclass(frozen=True)
class CaseSpec:
    """One measurement: everything a worker process needs except the molecule data.

    Attributes:
        suite: one of :data:`SUITES`.
        impl: one of :data:`LAYER_IMPLS` (attention suites) or :data:`MODEL_IMPLS`.
        num_nodes: N of a random graph (``None`` for molecule suites).
        in_degree: random sources per node (``None`` for molecule suites).
        repeats: timed passes (the median is reported).
        warmup: untimed passes before the measured ones.
        device: ``"cpu"`` or ``"cuda"``.
        max_dense_bytes: dense mode's memory budget (over it: the case is skipped).
        threads: torch intra-op threads (``None``: torch's default).
        seed: seeds the graph, the features and the weights.
        in_channels: F, the input width of the attention layer.
        heads: attention heads H.
        head_dim: width of one head (the output width is ``heads * head_dim``).
    """

    suite: str
    impl: str
    num_nodes: int | None = None
    in_degree: int | None = None
    repeats: int = 5
    warmup: int = 1
    device: str = "cpu"
    max_dense_bytes: int = 2 * 1024**3
    threads: int | None = None
    seed: int = 0
    in_channels: int = 64
    heads: int = 4
    head_dim: int = 16

    @property
    def name(self) -> str:
        """A short readable label, e.g. ``scaling/fused/N=1000,d=10``."""
        if self.num_nodes is None:
            return f"{self.suite}/{self.impl}"
        return f"{self.suite}/{self.impl}/N={self.num_nodes},d={self.in_degree}"

    @property
    def group(self) -> str:
        """The label shared by all implementations of one size, e.g. ``scaling/N=1000,d=10``."""
        if self.num_nodes is None:
            return self.suite
        return f"{self.suite}/N={self.num_nodes},d={self.in_degree}"

    def to_dict(self) -> dict:
        """The fields as a JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True)
class Grid:
    """Sizes of one benchmark run.

    Attributes:
        scaling_nodes: N values of the scaling suite.
        scaling_degree: in-degree of the scaling suite.
        density_nodes: N of each density sweep.
        density_degrees: in-degrees of the density sweeps (those below N).
        molecule_batch_size: molecules per batch.
        molecule_batches: distinct batches (timed passes cycle over them).
        repeats: timed passes per case.
        warmup: untimed passes per case.
        suites: the suites to run, a subset of :data:`SUITES` (default: all).
    """

    scaling_nodes: tuple[int, ...]
    scaling_degree: int
    density_nodes: tuple[int, ...]
    density_degrees: tuple[int, ...]
    molecule_batch_size: int = 128
    molecule_batches: int = 8
    repeats: int = 5
    warmup: int = 1
    suites: tuple[str, ...] = field(default=SUITES)

    def to_dict(self) -> dict:
        """The fields as a JSON-ready dict."""
        return asdict(self)


def full_grid(device: str = "cpu") -> Grid:
    """The grid the published numbers come from.

    CUDA adds N=300,000 and 1,000,000 to the scaling suite, and a second density sweep
    at N=8,000 up to density 0.5: at N=2,000 a GPU layer's fixed costs hide the work.
    """
    nodes = (1_000, 3_000, 10_000, 20_000, 50_000, 100_000)
    density_nodes: tuple[int, ...] = (2_000,)
    degrees: tuple[int, ...] = (2, 5, 10, 20, 50, 100, 200, 500, 1000)
    if device == "cuda":
        nodes = (*nodes, 300_000, 1_000_000)
        density_nodes = (2_000, 8_000)
        degrees = (*degrees, 2000, 4000)
    return Grid(
        scaling_nodes=nodes,
        scaling_degree=10,
        density_nodes=density_nodes,
        density_degrees=degrees,
        molecule_batch_size=128,
        molecule_batches=8,
        repeats=5,
        warmup=1,
    )


def quick_grid() -> Grid:
    """A tiny grid (N <= 2,000, 2 repeats, molecule batches of 32) for tests and CI."""
    return Grid(
        scaling_nodes=(500, 2_000),
        scaling_degree=10,
        density_nodes=(400,),
        density_degrees=(2, 30, 200),
        molecule_batch_size=32,
        molecule_batches=2,
        repeats=2,
        warmup=1,
    )


def build_cases(
    grid: Grid,
    device: str,
    max_dense_bytes: int,
    threads: int | None = None,
    repeats: int | None = None,
) -> list[CaseSpec]:
    """Every case of ``grid``, implementations of one size next to each other."""
    common = {
        "device": device,
        "max_dense_bytes": max_dense_bytes,
        "threads": threads,
        "repeats": repeats or grid.repeats,
        "warmup": grid.warmup,
    }
    sizes: list[tuple[str, int | None, int | None]] = []
    if "scaling" in grid.suites:
        sizes += [("scaling", n, grid.scaling_degree) for n in grid.scaling_nodes]
    if "density" in grid.suites:
        sizes += [
            ("density", n, d) for n in grid.density_nodes for d in grid.density_degrees if d < n
        ]
    if "molecules" in grid.suites:
        sizes.append(("molecules", None, None))
    cases = [
        CaseSpec(suite=suite, impl=impl, num_nodes=n, in_degree=d, **common)
        for suite, n, d in sizes
        for impl in LAYER_IMPLS
    ]
    if "training" in grid.suites:
        cases += [CaseSpec(suite="training", impl=impl, **common) for impl in MODEL_IMPLS]
    return cases
