"""Is ``mode="auto"`` within 10% of the faster mode? Paired timing on the bench grid.

``graphattn bench`` times every implementation in its own fresh process (needed for
peak RSS). On a shared or virtual machine two processes running the *same* kernel can
differ by more than 10%, which blurs the one target that compares near-equal times:
auto against the faster of sparse and dense. This script takes the layer cases of the
same grid (random graphs N = 1,000 ... 100,000 at in-degree 10, the density sweep at
N = 2,000, ESOL batches of 128) and, per size, times the fused, reference, dense and auto
layers **interleaved in one process** (:func:`graphattn.bench.worker.paired_layer_times`):
each round runs one forward + backward pass of each, in a rotating order.

"Sparse mode" is the faster of the fused and reference kernels (auto may run either);
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
    add_common_args(parser, seeds=(0,))
    parser.add_argument("--rounds", type=int, default=12, help="timed rounds per size")
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
            c["best_mode"],
            fmt(c["ratio"], 3),
            yes_no(c["within_10_percent"]),
        ]
        for c in payload["comparisons"]
    ]
    within = sum(c["within_10_percent"] for c in payload["comparisons"])
    right = sum(c["same_mode_as_best"] for c in payload["comparisons"])
    total = len(payload["comparisons"])
    return "\n\n".join(
        [
            "# mode='auto' against the faster mode (paired timing, one process)",
            machine_line(payload["machine"], payload["smoke"]),
            f"Median of {payload['rounds']} interleaved forward + backward passes, ms "
            f"(— : dense over its memory budget). Auto within 10% of the faster mode in "
            f"**{within}/{total}** sizes; it chose the faster mode in {right}/{total}.",
            markdown_table(
                ["size", *PAIRED_IMPLS, "auto chose", "faster mode", "auto / faster", "within 10%"],
                rows,
            ),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup(args)
    grid = quick_grid() if args.smoke else full_grid("cpu")
    grid = dataclasses.replace(grid, suites=LAYER_SUITES)
    budget = default_dense_budget("cpu")
    specs = build_cases(grid, "cpu", budget, args.threads)
    molecules, why = load_molecule_data(grid, args.data_dir, download=False)
    paired = run_paired(specs, molecules, args.rounds, progress=True)
    payload = {
        "machine": machine_info(),
        "smoke": args.smoke,
        "rounds": args.rounds,
        "dense_budget_bytes": budget,
        "molecules_skipped": why,
        "paired": paired,
        "comparisons": auto_vs_best(paired),
    }
    return finish(args.out, "auto_choice", payload, render_markdown)


if __name__ == "__main__":
    sys.exit(main())
