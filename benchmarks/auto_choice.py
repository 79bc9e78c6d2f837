"""Is ``mode="auto"`` within 10% of the faster mode? Paired timing on the bench grid.

``graphattn bench`` times every implementation in its own fresh process (needed for
peak RSS). On a shared or virtual machine two processes running the *same* kernel can
differ by more than 10%, which blurs the one target that compares near-equal times:
auto against the faster of sparse and dense. This script takes the layer cases of the
same grid (random graphs N = 1,000 ... 100,000 at in-degree 10, the density sweep at
N = 2,000, ESOL batches of 128) and, per size, times the fused, reference, dense and auto
layers **interleaved in one process** (:func:`graphattn.bench.worker.paired_layer_times`):
each round runs one forward + backward pass of each, in a rotating order.

"Sparse mode" is the faster of the fused and reference kernels (auto may also run the
Numba or gather kernel, not timed here, so auto / faster can fall below 1);
dense cases over the memory budget are skipped with the reason, and auto is then
compared with sparse mode. ``graphattn bench`` runs the same paired phase after its
isolated cases (``--paired-rounds``); this script runs only that phase. Writes
``auto_choice.json`` / ``.md`` and prints the markdown.

Usage::

    python benchmarks/auto_choice.py --data-dir ../shared/datasets --threads 2
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from _common import (
    add_common_args,
    finish,
    fmt,
    machine_info,
    machine_line,
    markdown_table,
    positive_int,
    run_main,
    setup,
    yes_no,
)

from graphattn.bench.analysis import auto_vs_best
from graphattn.bench.cases import build_cases, full_grid, quick_grid
from graphattn.bench.runner import (
    PAIRED_IMPLS,
    default_dense_budget,
    load_molecule_data,
    run_paired,
)

LAYER_SUITES = ("scaling", "density", "molecules")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser, seeds=None)
    parser.add_argument("--rounds", type=positive_int, default=12, help="timed rounds per size")
    args = parser.parse_args(argv)
    if args.smoke:
        args.rounds = 2
    return args


def render_markdown(payload: dict) -> str:
    medians = {
        (r["group"], r["impl"]): r["median_seconds"] * 1e3
        for r in payload["paired"]
        if r["status"] == "ok"
    }
    rows = [
        [
            c["group"],
            *(fmt(medians.get((c["group"], impl)), 2) for impl in PAIRED_IMPLS),
            c["auto_choice"],
            c["best_mode"] or "—",
            fmt(c["ratio"], 3),
            yes_no(c["within_10_percent"]),
        ]
        for c in payload["comparisons"]
    ]
    within = sum(bool(c["within_10_percent"]) for c in payload["comparisons"])
    right = sum(bool(c["same_mode_as_best"]) for c in payload["comparisons"])
    total = len(payload["comparisons"])
    return "\n\n".join(
        [
            "# mode='auto' against the faster mode (paired timing, one process)",
            machine_line(payload["machine"], payload["smoke"]),
            f"Median of {payload['rounds']} interleaved forward + backward passes, ms "
            "(— : not timed: dense over its memory budget, out of memory or failed; "
            f"see below). Auto within 10% of the faster mode in **{within}/{total}** "
            f"sizes; it chose the faster mode in {right}/{total}.",
            markdown_table(
                ["size", *PAIRED_IMPLS, "auto chose", "faster mode", "auto / faster", "within 10%"],
                rows,
            ),
            not_timed_section(payload),
        ]
    )


def not_timed_section(payload: dict) -> str:
    """What was not timed and why: the ESOL batches (when their data was missing) and
    every implementation/size skipped or failed in the paired phase, with a count."""
    skipped = [r for r in payload["paired"] if r["status"] != "ok"]
    lines = [f"- `{r['group']}` {r['impl']} ({r['status']}): {r.get('reason')}" for r in skipped]
    if payload.get("molecules_skipped"):
        lines.insert(0, f"- ESOL batches (molecules), every mode: {payload['molecules_skipped']}")
    count = f"{len(skipped)} of {len(payload['paired'])} implementation/size pairs not timed"
    molecules = "; ESOL batches not run" if payload.get("molecules_skipped") else ""
    return "\n".join([f"## Not timed\n\n{count}{molecules}.", *lines])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup(args)
    grid = quick_grid() if args.smoke else full_grid("cpu")
    grid = dataclasses.replace(grid, suites=LAYER_SUITES)
    budget = default_dense_budget("cpu")
    specs = build_cases(grid, "cpu", budget, args.threads)
    molecules, why = load_molecule_data(grid, args.data_dir, download=False)
    machine = machine_info()  # before the timing: its load average is the machine's own
    paired = run_paired(specs, molecules, args.rounds, progress=True)
    payload = {
        "machine": machine,
        "smoke": args.smoke,
        "rounds": args.rounds,
        "dense_budget_bytes": budget,
        "molecules_skipped": why,
        "paired": paired,
        "comparisons": auto_vs_best(paired),
    }
    return finish(args.out, "auto_choice", payload, render_markdown)


if __name__ == "__main__":
    sys.exit(run_main(main))
