"""Numbers derived from the case records: ratios, auto vs best, crossover, targets.

All functions take the list of case dicts written to ``bench.json`` (see
:func:`graphattn.bench.worker.run_case`). Cases skipped on purpose (dense mode over its
memory budget) are left out. A case that failed (crashed or timed out), like a time
that is not a finite positive number (NaN, inf, 0), is unusable: no ratio or judgement
is computed from it or from a comparison it belongs to (``None``, so a target that
depends on it is not decided), and the results say which case it was; no NaN or inf is
ever returned.
"""

from __future__ import annotations

import math
from collections import defaultdict

__all__ = [
    "AUTO_TOLERANCE",
    "add_bandwidth",
    "auto_vs_best",
    "bandwidth_summary",
    "crossover_density",
    "density_sweep_nodes",
    "derive",
    "pair_ratios",
    "target_checks",
    "usable_time",
]

AUTO_TOLERANCE = 1.10  # auto may be at most 10% slower than the faster mode
SPARSE_IMPLS = ("fused", "reference", "pyg")


def _ok(cases: list[dict]) -> list[dict]:
    return [c for c in cases if c.get("status") == "ok"]


def _by_group(cases: list[dict]) -> dict[str, dict[str, dict]]:
    """group -> impl -> case, for the cases that ran or failed, in first-seen order (a
    failed case keeps its place, with no time, so that what needs it is not decided)."""
    groups: dict[str, dict[str, dict]] = defaultdict(dict)
    for case in cases:
        if case.get("status") == "ok":
            groups[case["group"]][case["impl"]] = case
        elif _failed(case):
            groups[case["group"]].setdefault(case["impl"], _no_time(case))
    return dict(groups)


def _no_time(case: dict) -> dict:
    """A failed case, with no time or memory to take a ratio of."""
    return {**case, "median_seconds": None, "peak_extra_bytes": None}


def _failed(case: dict) -> bool:
    return case.get("status") == "failed"


def usable_time(seconds: float | None) -> bool:
    """Whether ``seconds`` is a time a ratio can be taken of: finite and positive."""
    return seconds is not None and math.isfinite(seconds) and seconds > 0


def _time_ratio(top: dict, bottom: dict) -> float | None:
    """``top / bottom`` median time; None unless both are usable."""
    a, b = top.get("median_seconds"), bottom.get("median_seconds")
    return a / b if usable_time(a) and usable_time(b) else None


def _ratio(a: float | None, b: float | None) -> float | None:
    """``a / b``; None when either is missing or not finite, or ``b`` is not positive."""
    if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)) or b <= 0:
        return None
    return a / b


def pair_ratios(cases: list[dict], numerator: str, denominator: str) -> list[dict]:
    """Time and extra-peak-memory ratio ``numerator / denominator`` for every group."""
    rows = []
    for group, impls in _by_group(cases).items():
        top, bottom = impls.get(numerator), impls.get(denominator)
        if top is None or bottom is None:
            continue
        row = {
            "group": group,
            "suite": top.get("suite", bottom.get("suite")),
            "num_nodes": top.get("num_nodes", bottom.get("num_nodes")),
            "num_edges": top.get("num_edges", bottom.get("num_edges")),
            "time_ratio": _time_ratio(top, bottom),
            "memory_ratio": _ratio(top.get("peak_extra_bytes"), bottom.get("peak_extra_bytes")),
        }
        unusable = _unusable(impls, (numerator, denominator))
        if unusable:
            row["note"] = f"unusable: {', '.join(unusable)}"
        rows.append(row)
    return rows


def _sparse_case(impls: dict[str, dict]) -> dict | None:
    """Sparse mode as measured: the faster of the fused and the reference kernel.

    ``kernel="auto"`` may run neither: on CPU it also picks the Numba or the gather
    kernel (:func:`graphattn.ops.cost.choose_kernel`), which the bench does not time
    on their own. Where auto runs one of those, ``auto / best`` can be below 1, and a
    wrong pick of dense over such a kernel is judged against a slower sparse mode.
    """
    measured = [impls[k] for k in ("fused", "reference") if k in impls]
    measured = [c for c in measured if usable_time(c.get("median_seconds"))]
    return min(measured, key=lambda c: c["median_seconds"], default=None)


def _unusable(impls: dict[str, dict], names: tuple[str, ...]) -> list[str]:
    """For each of ``names`` that failed, ``"impl failed (reason)"``; that ran with an
    unusable time, ``"impl=value"``."""
    out = []
    for k in names:
        case = impls.get(k)
        if case is not None and _failed(case):
            out.append(f"{k} failed ({case.get('reason')})")
        elif case is not None and not usable_time(case.get("median_seconds")):
            out.append(f"{k}={case.get('median_seconds')}")
    return out


def _auto_row(group: str, impls: dict[str, dict]) -> dict | None:
    """auto against the faster mode of one group (None without auto or modes); when auto
    or a mode failed or has an unusable time, which mode is faster is not known:
    ``ratio`` and ``within_10_percent`` are None and ``note`` says which."""
    auto = impls.get("auto")
    if auto is None or not {"fused", "reference", "dense"} & impls.keys():
        return None
    modes = {"sparse": _sparse_case(impls), "dense": impls.get("dense")}
    modes = {m: c for m, c in modes.items() if c and usable_time(c.get("median_seconds"))}
    best_mode = min(modes, key=lambda m: modes[m]["median_seconds"], default=None)
    row = {
        "group": group,
        "density": auto.get("density"),
        "auto_choice": auto.get("auto_choice"),
        "best_mode": best_mode,
        "same_mode_as_best": None if best_mode is None else auto.get("auto_choice") == best_mode,
        "auto_seconds": auto["median_seconds"] if usable_time(auto["median_seconds"]) else None,
        "best_seconds": modes[best_mode]["median_seconds"] if best_mode else None,
    }
    unusable = _unusable(impls, ("auto", "fused", "reference", "dense"))
    ratio = None if unusable else _ratio(row["auto_seconds"], row["best_seconds"])
    row["ratio"] = ratio
    row["within_10_percent"] = None if ratio is None else ratio <= AUTO_TOLERANCE
    if unusable:  # which mode is faster is not known
        row.update(best_mode=None, same_mode_as_best=None, best_seconds=None)
        row["note"] = f"unusable (failed, or a time not finite and positive): {', '.join(unusable)}"
    return row


def auto_vs_best(cases: list[dict], failed_elsewhere: list[dict] | None = None) -> list[dict]:
    """For every group with an ``auto`` run: its time against the faster of sparse/dense.

    ``failed_elsewhere``: cases that failed in another phase (the isolated cases, for the
    paired phase, which then skips them); where such a case did not run here, the group
    is not decided either.
    """
    groups = _by_group(cases)
    for case in failed_elsewhere or []:
        if _failed(case) and case["group"] in groups:
            groups[case["group"]].setdefault(case["impl"], _no_time(case))
    rows = [_auto_row(group, impls) for group, impls in groups.items()]
    return [r for r in rows if r is not None]


def density_sweep_nodes(cases: list[dict]) -> list[int]:
    """The N of every density sweep that ran, ascending."""
    return sorted({c["num_nodes"] for c in _ok(cases) if c.get("suite") == "density"})


def _density_points(
    cases: list[dict], num_nodes: int | None = None
) -> tuple[list[dict], list[dict]]:
    """Density sweep points (of the sweep at ``num_nodes``, if given) with both modes
    measured, by increasing density, and the points dropped because a time (of fused,
    reference or dense) or the density was not a finite positive number."""
    points, dropped = [], []
    sweep = [
        c for c in cases if c.get("suite") == "density" and num_nodes in (None, c.get("num_nodes"))
    ]
    for group, impls in _by_group(sweep).items():
        if "dense" not in impls or not {"fused", "reference"} & impls.keys():
            continue
        unusable = _unusable(impls, ("fused", "reference", "dense"))
        density = next(iter(impls.values())).get("density")
        if not usable_time(density):  # same test: finite and positive
            unusable.append(f"density={density}")
        if unusable:
            dropped.append({"group": group, "reason": ", ".join(unusable)})
            continue
        sparse, dense = _sparse_case(impls), impls["dense"]
        points.append(
            {
                "num_nodes": sparse["num_nodes"],
                "density": density,
                "in_degree": sparse.get("in_degree"),
                "sparse_seconds": sparse["median_seconds"],
                "dense_seconds": dense["median_seconds"],
                "dense_over_sparse": dense["median_seconds"] / sparse["median_seconds"],
            }
        )
    return sorted(points, key=lambda p: p["density"]), dropped


def _log_interpolate(a: dict, b: dict) -> float:
    """Density where log(dense/sparse) reaches 0 on the log-log line from ``a`` to ``b``."""
    ra, rb = math.log(a["dense_over_sparse"]), math.log(b["dense_over_sparse"])
    da, db = math.log(a["density"]), math.log(b["density"])
    if ra == rb:
        return b["density"]
    return math.exp(da + (db - da) * ra / (ra - rb))


def crossover_density(
    cases: list[dict], configured: float | None = None, num_nodes: int | None = None
) -> dict:
    """The density above which dense stays faster than sparse on the sweep at
    ``num_nodes`` (default: the largest N swept).

    The smallest sweep point from which dense is faster at every higher density, its
    crossing interpolated on a log-log scale with the point before it.
    """
    swept = density_sweep_nodes(cases)
    if num_nodes is None and swept:
        num_nodes = swept[-1]
    points, dropped = _density_points(cases, num_nodes)
    result: dict = {
        "num_nodes": num_nodes,
        "points": points,
        "dropped_points": dropped,
        "configured": configured,
        "measured": None,
    }
    result["status"] = _crossing(points, result)
    if dropped:
        groups = "; ".join(f"{d['group']} ({d['reason']})" for d in dropped)
        result["status"] += f"; {len(dropped)} point(s) left out, unusable time: {groups}"
    return result


def _crossing(points: list[dict], result: dict) -> str:
    """Set ``result["measured"]`` from usable ``points``; returns the status text."""
    if not points:
        return "no density sweep measured"
    first = len(points)
    while first > 0 and points[first - 1]["dense_over_sparse"] <= 1.0:
        first -= 1
    if first == len(points):
        return f"sparse faster at every density up to {points[-1]['density']:.3g}"
    if first == 0:
        result["measured"] = points[0]["density"]
        return "dense faster at every density (the value is an upper bound)"
    result["measured"] = _log_interpolate(points[first - 1], points[first])
    return "interpolated"


def _training_ratio(cases: list[dict]) -> dict | None:
    rows = [r for r in pair_ratios(cases, "graphattn", "pyg") if r["suite"] == "training"]
    return rows[0] if rows else None


def _check(value: float | None, limit: float, note: str | None = None) -> dict:
    check = {"value": value, "limit": limit, "met": None if value is None else value <= limit}
    if note:
        check["note"] = note
    return check


# (time, memory) limits of fused / PyG per device and N: the CPU targets are for 2 cores
# at N=20k and 100k, the CUDA target for N=1M / E=10M.
SCALING_TARGETS = {
    "cpu": {20_000: (0.5, 0.25), 100_000: (0.5, 0.25)},
    "cuda": {1_000_000: (0.33, 0.2)},
}


def target_checks(
    ratios: list[dict],
    training: dict | None,
    auto: list[dict],
    auto_paired: list[dict] | None = None,
    device_type: str = "cpu",
    cases: list[dict] | None = None,
) -> dict:
    """The published targets: fused vs PyG at the sizes of :data:`SCALING_TARGETS`,
    training step, auto (from the isolated cases and, when there is a paired phase,
    from its timings). With ``cases``, a target whose cases were in the run but did not
    all run is listed, not decided (``met`` None, with a note)."""
    cases = cases or []
    checks = {}
    for n, (time_limit, memory_limit) in SCALING_TARGETS[device_type].items():
        row = next((r for r in ratios if r["suite"] == "scaling" and r["num_nodes"] == n), None)
        in_run = [c for c in cases if c.get("suite") == "scaling" and c.get("num_nodes") == n]
        for kind, key, limit in (
            ("time", "time_ratio", time_limit),
            ("memory", "memory_ratio", memory_limit),
        ):
            check = _ratio_check(row, key, limit, in_run, ("fused", "pyg"))
            if check is not None:
                checks[f"fused_over_pyg_{kind}_N{n}"] = check
    in_run = [c for c in cases if c.get("suite") == "training"]
    check = _ratio_check(training, "time_ratio", 0.7, in_run, ("graphattn", "pyg"))
    if check is not None:
        checks["training_step_over_pyg_time"] = check
    if auto:
        checks["auto_over_best_worst"] = _worst_auto_check(auto)
    if auto_paired:
        checks["auto_over_best_paired_worst"] = _worst_auto_check(auto_paired)
    return checks


def _ratio_check(
    row: dict | None, key: str, limit: float, in_run: list[dict], impls: tuple[str, ...]
) -> dict | None:
    """The check of ``row[key]`` against ``limit``; without a row, undecided with a note
    saying which of ``impls`` did not run, or None when the run had none of its cases."""
    if row is None:
        return _check(None, limit, _not_run_note(in_run, impls)) if in_run else None
    return _check(row[key], limit, row.get("note"))


def _not_run_note(cases: list[dict], impls: tuple[str, ...]) -> str:
    """Which of ``impls`` did not run among ``cases`` (their reasons are listed with the
    skipped and failed cases)."""
    runs = {c["impl"]: c for c in cases if c.get("impl") in impls}
    missing = [
        f"{impl} {runs[impl].get('status')}" if impl in runs else f"{impl} not in the run"
        for impl in impls
        if runs.get(impl, {}).get("status") != "ok"
    ]
    return "not measured: " + ", ".join(missing)


def _worst_auto_check(rows: list[dict]) -> dict:
    """The worst auto / best ratio against the tolerance; not decided (``met`` None,
    with a ``note``) when a group's ratio could not be computed, unless a computed
    one already fails."""
    ratios = [r["ratio"] for r in rows if r["ratio"] is not None]
    check = _check(max(ratios, default=None), AUTO_TOLERANCE)
    missing = [r["group"] for r in rows if r["ratio"] is None]
    if missing:
        check["note"] = f"no usable ratio for {', '.join(missing)}"
        if check["met"]:
            check["met"] = None
    return check


def edge_traffic_bytes(num_nodes: float, allowed_pairs: float, channels: int) -> float:
    """Estimated minimum bytes moved by edge attention forward + backward (float32).

    Node tensors: forward reads q and writes the output; backward reads q, the output
    and its gradient and writes dq, dk, dv (8 N C floats). Per edge: k and v are
    gathered in the forward, gathered again and their gradients scattered in the
    backward (6 E C floats), plus one int64 index per edge and pass. The linear
    projections are not counted.
    """
    return 4.0 * channels * (8 * num_nodes + 6 * allowed_pairs) + 16.0 * allowed_pairs


def add_bandwidth(cases: list[dict], channels: int) -> None:
    """Add ``traffic_bytes`` and ``bandwidth_gb_s`` to sparse cases on random graphs."""
    for case in _ok(cases):
        sparse = case["impl"] in SPARSE_IMPLS or case.get("auto_choice") == "sparse"
        if not sparse or case["suite"] not in ("scaling", "density"):
            continue
        if not usable_time(case.get("median_seconds")):
            continue  # no bandwidth from a NaN/inf/zero time: the case keeps its time
        traffic = edge_traffic_bytes(case["num_nodes"], case["allowed_pairs"], channels)
        case["traffic_bytes"] = traffic
        case["bandwidth_gb_s"] = traffic / case["median_seconds"] / 1e9


def bandwidth_summary(cases: list[dict], peak_gb_s: float | None = None) -> list[dict]:
    """Effective bandwidth of the fused kernel on the scaling suite (see :func:`add_bandwidth`),
    and its fraction of ``peak_gb_s`` (the measured copy bandwidth of the GPU) when given."""
    rows = [
        {
            "group": c["group"],
            "num_nodes": c["num_nodes"],
            "allowed_pairs": c["allowed_pairs"],
            "traffic_bytes": c["traffic_bytes"],
            "bandwidth_gb_s": c["bandwidth_gb_s"],
        }
        for c in _ok(cases)
        if c["suite"] == "scaling" and c["impl"] == "fused" and "bandwidth_gb_s" in c
    ]
    if peak_gb_s:
        for row in rows:
            row["fraction_of_copy_bandwidth"] = row["bandwidth_gb_s"] / peak_gb_s
    return rows


def derive(
    cases: list[dict],
    configured_crossover: float | None = None,
    paired: list[dict] | None = None,
    device_type: str = "cpu",
    peak_bandwidth_gb_s: float | None = None,
) -> dict:
    """Every derived number of ``bench.json`` (``paired``: the paired phase's records;
    ``peak_bandwidth_gb_s``: the GPU's measured copy bandwidth, for the bandwidth table)."""
    ratios = pair_ratios(cases, "fused", "pyg")
    training = _training_ratio(cases)
    auto = auto_vs_best(cases)
    auto_paired = auto_vs_best(paired, failed_elsewhere=cases) if paired else []
    return {
        "fused_vs_pyg": ratios,
        "reference_vs_pyg": pair_ratios(cases, "reference", "pyg"),
        "training_vs_pyg": training,
        "auto_vs_best": auto,
        "auto_vs_best_paired": auto_paired,
        "crossover_density": crossover_density(cases, configured_crossover),
        "crossover_by_nodes": [
            crossover_density(cases, configured_crossover, n) for n in density_sweep_nodes(cases)
        ],
        "fused_bandwidth": bandwidth_summary(cases, peak_bandwidth_gb_s),
        "targets": target_checks(ratios, training, auto, auto_paired, device_type, cases),
    }
