"""Attention ablation: one factor at a time from the library defaults, ESOL and facebook-pages.

Factors (each variant changes exactly one of them; everything else stays the default):

* positional encoding: none (default) / ``lap`` / ``rw`` (k = 8);
* hops: 1 (default, the edges) / 2 / 3 (``attention={"hops": h}``: every node within h
  steps, the pairs precomputed and cached once per graph);
* attend: edges (default) / global (every pair of the graph) / hybrid (molecules:
  ``layer_type="hybrid"``, edge-restricted + global attention in each layer);
* normaliser: softmax (default) / relu.

Tasks:

* ``esol``: the molecule model, ``train_molecule_model`` with ``MoleculeTrainConfig(seed)``
  (+ ``DATASET_DEFAULTS["esol"]`` if any, but one model instead of its ensemble of 3),
  random 80/10/10 splits; metric: test RMSE.
  The PE goes through the model's own ``pe`` option.
* ``facebook``: the node model, ``train_node_model`` with ``NodeTrainConfig(seed)`` (+ the
  library's facebook defaults if any), random 60/20/20 masks; metric: test accuracy. A PE
  is extra feature columns concatenated to ``x`` (LapPE scaled by sqrt(N) to unit mean
  square, RWPE standardised per column). A variant whose attention pairs exceed
  ``--pair-limit`` (global attention is N(N-1) = 5e8 pairs on 22k nodes) is recorded as
  skipped with the pair count instead of run; k-hop pairs are counted exactly first
  (``khop_edges`` for h - 1 hops, then the h-th hop in row blocks, stopping past the limit).

Writes ``ablation.json``, ``ablation.md`` and ``ablation.png`` into ``--out``. ``--smoke``:
one seed, one epoch, 120 ESOL molecules, the first 1,500 facebook nodes, pair limit 2e5.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
from dataclasses import asdict, dataclass, fields

import matplotlib
import numpy as np
import scipy.sparse as sp
import torch
from _common import (
    Timer,
    add_common_args,
    finish,
    fmt,
    fmt_mean_std,
    machine_info,
    machine_line,
    markdown_table,
    positive_int,
    require_datasets,
    run_main,
    setup,
    summarize,
    write_outputs,
)
from torch_geometric.data import Data
from torch_geometric.utils import subgraph

from graphattn.datasets.molecules import load_molecule_dataset
from graphattn.datasets.social import load_node_dataset
from graphattn.models.node import NodeModelConfig
from graphattn.ops.khop import khop_edges
from graphattn.splits.nodes import node_split_masks
from graphattn.train.molecules import DATASET_DEFAULTS as MOLECULE_DEFAULTS
from graphattn.train.molecules import MoleculeTrainConfig, train_molecule_model
from graphattn.train.nodes import DATASET_DEFAULTS as NODE_DEFAULTS
from graphattn.train.nodes import NodeTrainConfig, train_node_model
from graphattn.transforms import laplacian_pe, random_walk_pe

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

log = logging.getLogger("benchmarks.ablation")

TASKS = ("esol", "facebook")
FACEBOOK = "facebook-pages"
METRIC = {"esol": ("rmse", "test RMSE", False), "facebook": ("accuracy", "test accuracy", True)}
PE_DIM = 8
PAIR_LIMIT = 2e7
PAIR_BLOCK_ROWS = 2048
SMOKE = {"epochs": 1, "molecules": 120, "nodes": 1500, "pair_limit": 2e5}


@dataclass(frozen=True)
class Variant:
    """One point of the ablation: the default with at most one factor changed."""

    factor: str
    pe: str | None = None
    hops: int = 1
    attend: str = "edges"
    normalize: str = "softmax"

    @property
    def name(self) -> str:
        if self.factor == "default":
            return "default"
        value = {"pe": self.pe, "hops": self.hops, "attend": self.attend}.get(
            self.factor, self.normalize
        )
        return f"{self.factor}={value}"

    def attention(self) -> dict:
        """Keyword arguments of ``GraphSelfAttention`` that differ from its defaults."""
        kwargs: dict = {}
        if self.hops > 1:
            kwargs["hops"] = self.hops
        if self.attend == "global":
            kwargs["attend"] = "global"
        if self.normalize != "softmax":
            kwargs["normalize"] = self.normalize
        return kwargs


VARIANTS = (
    Variant("default"),
    Variant("pe", pe="lap"),
    Variant("pe", pe="rw"),
    Variant("hops", hops=2),
    Variant("hops", hops=3),
    Variant("attend", attend="global"),
    Variant("attend", attend="hybrid"),
    Variant("normalize", normalize="relu"),
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser, seeds=(0, 1, 2))
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument(
        "--epochs", type=positive_int, help="override the maximum epochs of every run"
    )
    parser.add_argument(
        "--facebook-epochs",
        type=positive_int,
        help="override the maximum epochs of the facebook runs only (wins over --epochs)",
    )
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=[v.name for v in VARIANTS],
        help="run only these variants (default: all)",
    )
    parser.add_argument(
        "--pair-limit",
        type=float,
        default=PAIR_LIMIT,
        help=f"facebook: skip variants with more attention pairs (default {PAIR_LIMIT:.0e})",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.epochs = args.epochs or SMOKE["epochs"]
        args.pair_limit = min(args.pair_limit, SMOKE["pair_limit"])
    return args


# ---------------------------------------------------------------------------------- ESOL


def esol_config(variant: Variant, seed: int, epochs: int | None) -> MoleculeTrainConfig:
    """The library's ESOL configuration with ``variant``'s change."""
    settings = dict(MOLECULE_DEFAULTS.get("esol", {}))
    settings.pop("ensemble", None)  # one model per variant: it compares layers, and costs 1/3
    model = dict(settings.pop("model", {}))
    if variant.pe:
        model["pe"] = variant.pe
    if variant.attend == "hybrid":
        model["layer_type"] = "hybrid"
    if variant.attention():
        model["attention"] = {**model.get("attention", {}), **variant.attention()}
    if epochs is not None:
        settings["epochs"] = epochs
    return MoleculeTrainConfig(seed=seed, model=model, **settings)


def run_esol(dataset, variant: Variant, seed: int, epochs: int | None) -> dict:
    """One ESOL training run; the fields the ablation keeps."""
    config = esol_config(variant, seed, epochs)
    metrics = train_molecule_model(dataset, config, dataset_name="esol", progress=False)
    return _run_record(seed, metrics, ("rmse", "mae", "r2"))


# ------------------------------------------------------------------------------ facebook


def facebook_graph(args: argparse.Namespace) -> Data:
    """facebook-pages (its first 1,500 nodes with ``--smoke``)."""
    data = load_node_dataset(FACEBOOK, data_dir=args.data_dir)
    if not args.smoke:
        return Data(x=data.x, edge_index=data.edge_index, y=data.y, num_nodes=data.num_nodes)
    keep = torch.arange(SMOKE["nodes"])
    edge_index, _ = subgraph(keep, data.edge_index, relabel_nodes=True, num_nodes=data.num_nodes)
    return Data(x=data.x[keep], edge_index=edge_index, y=data.y[keep], num_nodes=keep.numel())


def node_pe(kind: str, data: Data) -> torch.Tensor:
    """PE columns for the node model: LapPE x sqrt(N), or RWPE standardised per column."""
    n = data.num_nodes
    if kind == "lap":
        return laplacian_pe(data.edge_index, n, PE_DIM).float() * math.sqrt(n)
    pe = random_walk_pe(data.edge_index, n, PE_DIM).float()
    return (pe - pe.mean(0)) / pe.std(0).clamp(min=1e-6)


def _adjacency(edge_index: torch.Tensor, num_nodes: int, extra_diagonal: bool) -> sp.csr_matrix:
    """0/1 matrix ``A[i, j] = 1`` iff j -> i (diagonal dropped, or all ones if asked)."""
    src, dst = edge_index.cpu().numpy()
    keep = src != dst
    adj = sp.csr_matrix(
        (np.ones(int(keep.sum()), np.int32), (dst[keep], src[keep])), shape=(num_nodes,) * 2
    )
    if extra_diagonal:
        adj = adj + sp.identity(num_nodes, dtype=np.int32, format="csr")
    adj.data[:] = 1
    return adj.tocsr()


def count_khop_pairs(
    edge_index: torch.Tensor, num_nodes: int, hops: int, limit: float
) -> tuple[int, bool]:
    """Pairs j -> i, j != i, within ``hops`` steps: ``(count, exact)``.

    ``khop_edges`` gives the pairs within ``hops - 1``; the last hop is the support of
    ``A @ (R + I)``, formed ``PAIR_BLOCK_ROWS`` target rows at a time so memory stays
    small. Counting stops once it passes ``limit`` (then ``exact`` is False and the count
    is a lower bound).
    """
    inner, _ = khop_edges(edge_index, num_nodes, max(hops - 1, 1))
    if hops == 1 or inner.size(1) > limit:
        return int(inner.size(1)), hops == 1
    adj = _adjacency(edge_index, num_nodes, extra_diagonal=False)
    reach = _adjacency(inner, num_nodes, extra_diagonal=True)
    count = 0
    for start in range(0, num_nodes, PAIR_BLOCK_ROWS):
        block = (adj[start : start + PAIR_BLOCK_ROWS] @ reach).tocoo()
        count += int((block.row + start != block.col).sum())
        if count > limit:
            return count, False
    return count, True


def attention_pairs(variant: Variant, data: Data, limit: float) -> tuple[int, bool]:
    """How many (target, source) pairs the variant attends over, self-loops excluded."""
    n = data.num_nodes
    if variant.attend in ("global", "hybrid"):
        return n * (n - 1), True
    return count_khop_pairs(data.edge_index, n, variant.hops, limit)


def node_model_overrides(variant: Variant) -> dict:
    """``NodeModelConfig`` fields the variant sets (attention kwargs, layer type)."""
    overrides: dict = {}
    if variant.attention():
        overrides["attention"] = variant.attention()
    if variant.attend == "hybrid":
        overrides["layer_type"] = "hybrid"
    return overrides


def skip_reason(variant: Variant, pairs: int, exact: bool, limit: float) -> str | None:
    """Why a facebook variant is not run, or None."""
    if pairs > limit:
        what = "global attention, N(N-1)" if variant.attend != "edges" else "attention"
        bound = "" if exact else "at least "
        return f"{what} = {bound}{pairs:.3g} pairs > limit {limit:.3g}"
    missing = set(node_model_overrides(variant)) - {f.name for f in fields(NodeModelConfig)}
    if missing:
        return f"the node model has no {', '.join(sorted(missing))} option"
    return None


def facebook_config(seed: int, epochs: int | None, variant: Variant) -> NodeTrainConfig:
    """The library's facebook configuration (``NodeTrainConfig`` + defaults, if any)."""
    settings = dict(NODE_DEFAULTS.get(FACEBOOK, {}))
    if epochs is not None:
        settings["epochs"] = epochs
    settings["attention"] = {**settings.get("attention", {}), **variant.attention()}
    return NodeTrainConfig(seed=seed, **settings)


def run_facebook(data: Data, variant: Variant, seed: int, epochs: int | None) -> dict:
    """One facebook training run on ``data`` (PE columns already in ``x``)."""
    config = facebook_config(seed, epochs, variant)
    parts = node_split_masks(data.y, fractions=config.fractions, seed=seed)
    masks = dict(zip(("train", "val", "test"), parts, strict=True))
    metrics = train_node_model(data, masks, config, dataset_name=FACEBOOK, progress=False)
    return _run_record(seed, metrics, ("accuracy", "macro_f1"))


# -------------------------------------------------------------------------------- running


def _run_record(seed: int, metrics: dict, keys: tuple[str, ...]) -> dict:
    epochs = max(int(metrics["epochs_run"]), 1)
    return {
        "seed": seed,
        **{key: metrics["test"][key] for key in keys},
        "train_seconds": metrics["train_seconds"],
        "epochs_run": metrics["epochs_run"],
        "best_epoch": metrics["best_epoch"],
        "seconds_per_epoch": metrics["train_seconds"] / epochs,
    }


def _result(task: str, variant: Variant, runs: list[dict], **extra) -> dict:
    metric = METRIC[task][0]
    return {
        "task": task,
        "variant": variant.name,
        "factor": variant.factor,
        "settings": asdict(variant),
        "status": "ok" if runs else "skipped",
        **extra,
        "runs": runs,
        "metric": metric,
        "test": summarize(r[metric] for r in runs),
        "seconds_per_epoch": summarize(r["seconds_per_epoch"] for r in runs),
        "epochs_run": summarize(r["epochs_run"] for r in runs),
    }


def ablate_esol(args: argparse.Namespace, variants: list[Variant], payload: dict) -> None:
    limit = SMOKE["molecules"] if args.smoke else None
    dataset = load_molecule_dataset("esol", data_dir=args.data_dir, limit=limit)
    for variant in variants:
        runs = []
        for seed in args.seeds:
            runs.append(run_esol(dataset, variant, seed, args.epochs))
            _log_run("esol", variant, runs[-1])
        payload["results"].append(_result("esol", variant, runs))
        write_outputs(args.out, "ablation", payload)


def ablate_facebook(args: argparse.Namespace, variants: list[Variant], payload: dict) -> None:
    data = facebook_graph(args)
    for variant in variants:
        with Timer() as timer:
            pairs, exact = attention_pairs(variant, data, args.pair_limit)
        extra = {"pairs": pairs, "pairs_exact": exact, "count_seconds": round(timer.seconds, 2)}
        reason = skip_reason(variant, pairs, exact, args.pair_limit)
        runs = []
        if reason is None:
            runs = _facebook_runs(data, variant, args)
        else:
            log.info("facebook %s: skipped (%s)", variant.name, reason)
            extra["reason"] = reason
        payload["results"].append(_result("facebook", variant, runs, **extra))
        write_outputs(args.out, "ablation", payload)


def _facebook_runs(data: Data, variant: Variant, args: argparse.Namespace) -> list[dict]:
    if variant.pe:
        with Timer() as timer:
            extra = node_pe(variant.pe, data)
        log.info("facebook %s: PE computed in %.1f s", variant.name, timer.seconds)
        data = Data(x=torch.cat([data.x.float(), extra], 1), edge_index=data.edge_index, y=data.y)
    runs = []
    for seed in args.seeds:
        runs.append(run_facebook(data, variant, seed, args.facebook_epochs or args.epochs))
        _log_run("facebook", variant, runs[-1])
    return runs


def _log_run(task: str, variant: Variant, run: dict) -> None:
    metric = METRIC[task][0]
    log.info(
        "%s %s seed %d: %s %.4f, %.2f s/epoch, %d epochs",
        *(task, variant.name, run["seed"], metric, run[metric]),
        *(run["seconds_per_epoch"], run["epochs_run"]),
    )


# ------------------------------------------------------------------------ markdown / plot


def _delta(result: dict, default: dict | None) -> str:
    if default is None or result["test"]["mean"] is None or default["test"]["mean"] is None:
        return "—"
    if result["variant"] == "default":
        return "—"
    return f"{result['test']['mean'] - default['test']['mean']:+.3f}"


def _epoch_line(settings: dict) -> str:
    """Which maximum-epoch budgets the runs used (library defaults unless overridden)."""
    esol = settings.get("epochs")
    facebook = settings.get("facebook_epochs") or esol
    esol, facebook = ("library default" if n is None else str(n) for n in (esol, facebook))
    return (
        f"Maximum epochs: ESOL {esol}, facebook {facebook} "
        "(early stopping on validation as in the library)."
    )


def render_markdown(payload: dict) -> str:
    """The ablation table (one per task) plus settings."""
    parts = [
        "# Attention ablation (one factor at a time from the defaults)",
        machine_line(payload["machine"], payload["settings"]["smoke"]),
        f"Mean ± sample std over seeds {payload['settings']['seeds']}; s/epoch = "
        "train_seconds / epochs_run (validation pass included). ESOL: test RMSE, lower is "
        "better; facebook-pages: test accuracy, higher is better.",
        _epoch_line(payload["settings"]),
    ]
    for task in payload["settings"]["tasks"]:
        results = [r for r in payload["results"] if r["task"] == task]
        default = next((r for r in results if r["variant"] == "default"), None)
        rows = [
            [
                r["variant"],
                fmt_mean_std(r["test"]),
                _delta(r, default),
                fmt_mean_std(r["seconds_per_epoch"], 2),
                fmt(r["epochs_run"]["mean"], 1),
                _note(r),
            ]
            for r in results
        ]
        headers = ["variant", METRIC[task][1], "Δ vs default", "s / epoch", "epochs", "note"]
        parts += [f"## {task}", markdown_table(headers, rows)]
    return "\n\n".join(parts)


def _note(result: dict) -> str:
    if result["status"] == "skipped":
        return f"skipped: {result['reason']}"
    if "pairs" in result:
        return f"{result['pairs']:,} pairs"
    return ""


def plot(payload: dict, path) -> None:
    """Per task: test metric (points, error bars) and seconds per epoch (bars)."""
    tasks = payload["settings"]["tasks"]
    fig, axes = plt.subplots(len(tasks), 2, figsize=(11, 3.2 * len(tasks)), squeeze=False)
    for row, task in zip(axes, tasks, strict=True):
        results = [r for r in payload["results"] if r["task"] == task]
        _plot_panel(row[0], results, "test", METRIC[task][1], task)
        _plot_panel(row[1], results, "seconds_per_epoch", "seconds per epoch", task)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_panel(ax, results: list[dict], key: str, label: str, task: str) -> None:
    names = [r["variant"] for r in results]
    y = np.arange(len(results))
    means = [r[key]["mean"] for r in results]
    errors = [r[key]["std"] or 0.0 for r in results]
    ok = [m is not None for m in means]
    values = [m if m is not None else 0.0 for m in means]
    colors = ["tab:orange" if n == "default" else "tab:blue" for n in names]
    if key == "test":
        for i in np.flatnonzero(ok):
            ax.errorbar(values[i], y[i], xerr=errors[i], fmt="o", color=colors[i], capsize=3)
        if ok and ok[0] and names[0] == "default":  # the default's value, if it ran
            ax.axvline(values[0], color="tab:orange", linestyle=":", linewidth=1)
    else:
        ax.barh(
            y[ok],
            np.array(values)[ok],
            xerr=np.array(errors)[ok],
            color=np.array(colors)[ok],
            capsize=3,
        )
    for i in np.flatnonzero(~np.array(ok)):
        ax.text(
            0.02,
            y[i],
            "skipped",
            transform=ax.get_yaxis_transform(),
            va="center",
            color="gray",
            fontsize=8,
        )
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set_xlabel(label)
    ax.set_title(f"{task}: {label}")
    ax.grid(axis="x", alpha=0.3)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    require_datasets([{"esol": "esol", "facebook": FACEBOOK}[t] for t in args.tasks], args.data_dir)
    setup(args)
    chosen = args.variants or [v.name for v in VARIANTS]
    variants = [v for v in VARIANTS if v.name in chosen]
    payload = {
        "complete": False,
        "machine": machine_info(),
        "settings": {
            "tasks": args.tasks,
            "seeds": args.seeds,
            "epochs": args.epochs,
            "facebook_epochs": args.facebook_epochs,
            "pair_limit": args.pair_limit,
            "pe_dim": PE_DIM,
            "smoke": args.smoke,
            "variants": [{"name": v.name, **asdict(v)} for v in variants],
        },
        "results": [],
    }
    if "esol" in args.tasks:
        ablate_esol(args, variants, payload)
    if "facebook" in args.tasks:
        ablate_facebook(args, variants, payload)
    code = finish(args.out, "ablation", payload, render_markdown)
    plot(payload, args.out / "ablation.png")
    return code


if __name__ == "__main__":
    sys.exit(run_main(main))
