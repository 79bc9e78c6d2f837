"""Sparse (fused / reference) vs dense vs auto vs PyG TransformerConv: the full benchmark.

A thin command line over :func:`graphattn.bench.runner.run_benchmarks`, with the flags
of ``graphattn bench`` plus ``--data-dir`` and a few knobs. See ``benchmarks/README.md``.

Usage::

    python benchmarks/attention_bench.py --quick --out bench_out      # seconds
    python benchmarks/attention_bench.py --out bench_out --data-dir ../shared/datasets
    python benchmarks/attention_bench.py --device cuda --out bench_gpu
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _common import nonnegative_int, positive_float, positive_int, run_main

from graphattn.bench.cases import SUITES
from graphattn.bench.runner import exit_status, run_benchmarks, written_line


def build_parser() -> argparse.ArgumentParser:
    """The command line: ``graphattn bench``'s flags plus ``--data-dir`` and knobs."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny grid (seconds), for CI")
    p.add_argument("--out", type=Path, default=Path("bench_out"), help="output folder")
    p.add_argument("--repeats", type=positive_int, help="timed repeats per case (median reported)")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--data-dir", type=Path, help="folder with esol/delaney-processed.csv")
    p.add_argument(
        "--threads", type=positive_int, help="torch threads per case (default: all cores)"
    )
    p.add_argument(
        "--max-dense-bytes",
        type=nonnegative_int,
        help="dense mode's memory budget in bytes (0: never dense)",
    )
    p.add_argument(
        "--suite",
        "--suites",
        action="extend",
        nargs="+",
        choices=SUITES,
        help="run only these suites (repeatable)",
    )
    p.add_argument(
        "--paired-rounds",
        type=nonnegative_int,
        help="rounds of the paired phase (default 12, 2 with --quick; 0 skips it)",
    )
    p.add_argument(
        "--case-timeout",
        type=positive_float,
        help="seconds before an isolated (CPU) case is killed (default 120 with --quick,\n"
        "else 1800); cases run in the main process (CUDA, the paired phase) cannot be\n"
        "interrupted",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the derived target checks."""
    args = build_parser().parse_args(argv)
    result = run_benchmarks(
        out_dir=args.out,
        quick=args.quick,
        repeats=args.repeats,
        device=args.device,
        progress=not args.no_progress,
        data_dir=args.data_dir,
        max_dense_bytes=args.max_dense_bytes,
        threads=args.threads,
        case_timeout=args.case_timeout,
        suites=args.suite,
        paired_rounds=args.paired_rounds,
    )
    print(json.dumps(result["derived"]["targets"], indent=2))
    print(written_line(result, args.out))
    return exit_status(result, "attention_bench.py")


if __name__ == "__main__":
    raise SystemExit(run_main(main))
