"""``bench.md``: the benchmark result as markdown tables."""

from __future__ import annotations

from collections import defaultdict

from graphattn.bench.cases import LAYER_IMPLS

__all__ = ["markdown_report"]


def _table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds * 1e3:.1f}"


def _mb(nbytes: float | None) -> str:
    return "–" if nbytes is None else f"{nbytes / 2**20:.1f}"


def _one_line(text: str | None) -> str:
    """A reason on one line: a multi-line one (the offline data-set message) would end
    its markdown list item, or table row, at its first line break."""
    return " ".join(str(text).split())


def _num(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}g}"


OTHER_METHOD_MARK = "†"


def _other_method(case: dict, probe: str | None) -> bool:
    """Whether ``case`` measured its memory otherwise than the run's ``memory_probe``."""
    method = case.get("memory_method")
    return probe is not None and method is not None and method != probe


def _cell(case: dict | None, key: str, probe: str | None = None) -> str:
    """A time (ms) or memory (MiB) cell; ``skip``/``fail`` for cases that did not run;
    a memory measured by another method than ``probe`` is marked with ``†``."""
    if case is None:
        return "–"
    if case.get("status") != "ok":
        return "skip" if case.get("status") == "skipped" else "fail"
    if key == "time":
        return _ms(case["median_seconds"])
    mark = OTHER_METHOD_MARK if _other_method(case, probe) else ""
    return _mb(case["peak_extra_bytes"]) + mark


def _groups(cases: list[dict], suite: str) -> dict[str, dict[str, dict]]:
    groups: dict[str, dict[str, dict]] = defaultdict(dict)
    for case in cases:
        if case["suite"] == suite:
            groups[case["group"]][case["impl"]] = case
    return dict(groups)


def _size_columns(impls: dict[str, dict]) -> list[str]:
    ran = next((c for c in impls.values() if c.get("status") == "ok"), None)
    first = next(iter(impls.values()))
    if ran is None:
        return [str(first.get("num_nodes") or "–"), "–", "–"]
    return [
        _num(ran.get("num_nodes"), 6),
        _num(ran.get("num_edges"), 7),
        _num(ran.get("density"), 3),
    ]


def _suite_section(
    cases: list[dict], suite: str, title: str, impls: tuple[str, ...], probe: str | None = None
) -> str:
    groups = _groups(cases, suite)
    if not groups:
        return ""
    headers = ["N", "E", "density", *impls]
    parts = [f"## {title}"]
    for key, label in (("time", "median time (ms)"), ("memory", "extra peak memory (MiB)")):
        rows = [
            _size_columns(found) + [_cell(found.get(i), key, probe) for i in impls]
            for found in groups.values()
        ]
        parts += [f"\n{label}, forward + backward:\n", _table(headers, rows)]
    return "\n".join(parts)


def _memory_method_section(cases: list[dict], probe: str | None) -> str:
    """The cases whose memory was measured otherwise than the run's setting, and how."""
    other = [c for c in cases if c.get("status") == "ok" and _other_method(c, probe)]
    if not other:
        return ""
    lines = [f"- `{c['name']}`: {c['memory_method']}" for c in other]
    return (
        f"## Memory measured by another method ({OTHER_METHOD_MARK})\n\n"
        f"The run's method is `{probe}`; these cases used another (an upper bound "
        "says the value can exceed the pass's own extra peak):\n\n" + "\n".join(lines)
    )


def _machine_section(result: dict) -> str:
    m, s = result["machine"], result["settings"]
    cuda = m.get("cuda") or {}
    lines = [
        "# graphattn attention benchmark",
        "",
        f"- device: **{s['device']}**" + (f" ({cuda['name']})" if cuda else ""),
        *(
            [f"- measured copy bandwidth: {_num(cuda['copy_bandwidth_gb_s'])} GB/s (read + write)"]
            if cuda.get("copy_bandwidth_gb_s")
            else []
        ),
        f"- CPU: {m['cpu_model']}, {m['usable_cores']} usable cores, torch threads per case "
        f"{s['threads'] or m['torch_threads']}, load average {m.get('load_average_1_5_15')}",
        f"- torch {m['torch']}, torch_geometric {m['torch_geometric']}, " + _code_line(m),
        f"- quick: {s['quick']}, repeats: {s['repeats']}, warm-up passes: {s['warmup']}, "
        f"dense budget: {_mb(s['max_dense_bytes'])} MiB, memory: {s['memory_method']}",
    ]
    return "\n".join(lines)


def _code_line(machine: dict) -> str:
    """Which graphattn code ran: its commit, or for an installed copy (no commit) its
    version."""
    commit = machine.get("graphattn_commit")
    if commit is None and machine.get("graphattn"):
        return f"graphattn {machine['graphattn']} (installed, no git commit)"
    changed = " with uncommitted changes" if machine.get("graphattn_uncommitted_changes") else ""
    return f"commit {commit}{changed}"


def _targets_section(targets: dict) -> str:
    if not targets:
        return ""
    rows = [
        [
            name,
            _num(t["value"]) + (f" ({_one_line(t['note'])})" if t.get("note") else ""),
            f"≤ {t['limit']}",
            {True: "yes", False: "NO"}.get(t["met"], "–"),
        ]
        for name, t in targets.items()
    ]
    return "## Targets\n\n" + _table(["check", "value", "limit", "met"], rows)


def _ratio_section(rows: list[dict], title: str) -> str:
    if not rows:
        return ""
    body = [
        [r["group"], _num(r["time_ratio"]), _num(r["memory_ratio"])]
        for r in rows
        if r["suite"] != "training"
    ]
    return f"## {title}\n\n" + _table(["case", "time ratio", "memory ratio"], body)


def _auto_section(rows: list[dict], paired: bool = False) -> str:
    if not rows:
        return ""
    body = [
        [
            r["group"],
            _num(r["density"]),
            str(r["auto_choice"]),
            r["best_mode"] or "–",
            _num(r["ratio"]),
            {True: "yes", False: "NO"}.get(r["within_10_percent"], "–"),
        ]
        for r in rows
    ]
    headers = ["case", "density", "auto chose", "faster mode", "auto / best", "within 10%"]
    notes = "".join(f"\n- `{r['group']}`: {_one_line(r['note'])}" for r in rows if r.get("note"))
    if paired:
        title = "## mode='auto' against the faster mode, paired timing (one process)"
        note = (
            "The fused, reference, dense and auto layers of each size timed interleaved "
            "in one process; the decisive comparison for the 10% criterion.\n\n"
        )
        return f"{title}\n\n{note}" + _table(headers, body) + notes
    title = "## mode='auto' against the faster mode, separate processes"
    return f"{title}\n\n" + _table(headers, body) + notes


def _crossover_section(crossover: dict, by_nodes: list[dict]) -> str:
    lines = [
        f"- sweep at N={r['num_nodes']}: measured **{_num(r.get('measured'))}** ({r.get('status')})"
        for r in by_nodes
    ]
    return (
        "## Crossover density (dense faster above)\n\n"
        + ("\n".join(lines) + "\n\n" if len(by_nodes) > 1 else "")
        + f"measured: **{_num(crossover.get('measured'))}** ({crossover.get('status')}"
        + (f", sweep at N={crossover['num_nodes']}" if crossover.get("num_nodes") else "")
        + f"); configured in graphattn.ops.cost: {_num(crossover.get('configured'))}"
    )


def _training_section(cases: list[dict], training: dict | None, probe: str | None) -> str:
    rows = [
        [c["impl"], _cell(c, "time"), _cell(c, "memory", probe), str(c.get("parameters", "–"))]
        for c in cases
        if c["suite"] == "training"
    ]
    if not rows:
        return ""
    ratio = "" if training is None else f"\n\ngraphattn / PyG time: {_num(training['time_ratio'])}"
    headers = ["model", "median step (ms)", "extra peak (MiB)", "parameters"]
    return "## Training step of the molecule model\n\n" + _table(headers, rows) + ratio


def _bandwidth_section(rows: list[dict]) -> str:
    if not rows:
        return ""
    body = [
        [
            r["group"],
            _num(r["allowed_pairs"], 7),
            _mb(r["traffic_bytes"]),
            _num(r["bandwidth_gb_s"]),
        ]
        + ([_num(r["fraction_of_copy_bandwidth"])] if "fraction_of_copy_bandwidth" in r else [])
        for r in rows
    ]
    headers = ["case", "allowed pairs", "traffic estimate (MiB)", "GB/s"]
    if "fraction_of_copy_bandwidth" in rows[0]:
        headers.append("of measured copy bandwidth")
    return "## Fused kernel: effective memory bandwidth (estimate)\n\n" + _table(headers, body)


def _skipped_section(cases: list[dict]) -> str:
    skipped = [c for c in cases if c.get("status") != "ok"]
    if not skipped:
        return ""
    lines = [f"- `{c['name']}` ({c['status']}): {_one_line(c.get('reason'))}" for c in skipped]
    return "## Skipped or failed cases\n\n" + "\n".join(lines)


def _paired_skipped_section(paired: list[dict]) -> str:
    skipped = [r for r in paired if r.get("status") != "ok"]
    if not skipped:
        return ""
    lines = [
        f"- `{r['group']}` {r['impl']} ({r['status']}): {_one_line(r.get('reason'))}"
        for r in skipped
    ]
    return "## Skipped or failed in the paired phase\n\n" + "\n".join(lines)


def markdown_report(result: dict) -> str:
    """The whole ``bench.md`` text of a :func:`~graphattn.bench.runner.run_benchmarks` result."""
    cases, derived = result["cases"], result["derived"]
    probe = result["settings"].get("memory_probe")
    sections = [
        _machine_section(result),
        _targets_section(derived["targets"]),
        _suite_section(cases, "scaling", "Scaling: random graphs", LAYER_IMPLS, probe),
        _suite_section(cases, "density", "Density sweep", LAYER_IMPLS, probe),
        _crossover_section(derived["crossover_density"], derived.get("crossover_by_nodes", [])),
        _suite_section(cases, "molecules", "ESOL batches (one layer)", LAYER_IMPLS, probe),
        _training_section(cases, derived["training_vs_pyg"], probe),
        _memory_method_section(cases, probe),
        _ratio_section(derived["fused_vs_pyg"], "fused / PyG TransformerConv"),
        _auto_section(derived["auto_vs_best"]),
        _auto_section(derived.get("auto_vs_best_paired", []), paired=True),
        _bandwidth_section(derived["fused_bandwidth"]),
        _skipped_section(cases),
        _paired_skipped_section(result.get("paired") or []),
    ]
    return "\n\n".join(s for s in sections if s) + "\n"
