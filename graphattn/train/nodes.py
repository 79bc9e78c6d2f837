"""Semi-supervised node classification: full-graph training with node masks.

Data path: edge list / networkx -> ``Data`` (x, edge_index, y with -1 = unlabelled)
-> train / val / test masks over the labelled nodes -> :class:`NodeClassifier`
-> cross-entropy on the training nodes -> early stopping on validation accuracy (never
on test) -> metrics on the test nodes.
"""

from __future__ import annotations

import argparse
import copy
import csv
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.metrics import confusion_matrix
from torch_geometric.data import Data
from tqdm.auto import tqdm

from graphattn.errors import GraphInputError
from graphattn.featurize.graph import structural_features
from graphattn.models.node import NodeClassifier, NodeModelConfig
from graphattn.ops.graph import check_finite
from graphattn.optim import adamw
from graphattn.train.checkpoint import save_checkpoint
from graphattn.train.loop import (
    EarlyStopping,
    check_config_json,
    check_finite_loss,
    check_run_folder,
    check_training_settings,
    divergence_named,
    keeps_global_rng,
    seed_everything,
    start_run_folder,
    to_json,
    torch_seed,
    training_device,
    write_json,
)
from graphattn.train.metrics import node_metrics
from graphattn.train.plots import plot_confusion_matrix, plot_graph, plot_learning_curve

__all__ = ["DATASET_DEFAULTS", "NodeTrainConfig", "train_node_model", "train_node_model_cli"]

log = logging.getLogger(__name__)

MAX_DRAWN_NODES = 3000

# Tuned defaults per named data set (what `graphattn train --dataset NAME` uses).
# Karate: 2 labelled nodes and no validation set, so a small, strongly regularised
# model with a fixed schedule; 3 layers reach every node from one of the leaders.
DATASET_DEFAULTS: dict[str, dict] = {
    "karate": {"layers": 3, "hidden": 32, "dropout": 0.5, "input_dropout": 0.0, "epochs": 100},
}


@dataclass
class NodeTrainConfig:
    """How :func:`train_node_model` trains. The defaults are the tuned ones.

    Attributes:
        epochs: maximum epochs (full-graph steps).
        lr: AdamW learning rate (constant: node training has no schedule).
        weight_decay: AdamW weight decay.
        patience: early-stopping patience on validation accuracy (ignored without
            validation nodes: then the fixed schedule runs to the end).
        seed: seeds the split, the initialisation and dropout.
            Training seeds the global generators of Python, NumPy and torch with it,
            and gives the caller's back as they were when it returns.
        fractions: train / val / test fractions of the labelled nodes.
        labels_per_class: instead, k training labels per class. These two make the
            masks of ``graphattn train``; :func:`train_node_model` takes its masks as
            an argument and does not read them.
        hidden, layers, heads, dropout, input_dropout: the model (:class:`NodeModelConfig`).
        mode: attention mode.
        label_inputs: known training labels as inputs (masked label prediction);
            ``None`` = on when at least 30% of the labelled nodes are for training.
        label_mask_rate: share of training labels hidden (and scored) each epoch.
        attention: extra keyword arguments of every :class:`GraphSelfAttention`
            (``hops``, ``attend``, ``normalize``, ``score``, ``kernel``, ...).
        device: ``"cpu"``, ``"cuda"`` (``"cuda:N"``) or ``"auto"`` (CUDA when torch sees
            a GPU). The checkpoint holds CPU weights either way.
    """

    epochs: int = 300
    lr: float = 5e-3
    weight_decay: float = 5e-4
    patience: int = 60
    seed: int = 0
    fractions: tuple[float, float, float] = (0.6, 0.2, 0.2)
    labels_per_class: int | None = None
    hidden: int = 64
    layers: int = 2
    heads: int = 4
    dropout: float = 0.2
    input_dropout: float = 0.2
    mode: str = "sparse"
    label_inputs: bool | None = None
    label_mask_rate: float = 0.5
    attention: dict = field(default_factory=dict)
    device: str = "cpu"


def _use_label_inputs(config: NodeTrainConfig, masks: dict[str, torch.Tensor]) -> bool:
    if config.label_inputs is not None:
        return config.label_inputs
    labelled = sum(int(m.sum()) for m in masks.values())
    return int(masks["train"].sum()) >= 0.3 * max(labelled, 1)


def _train_inputs(
    y: torch.Tensor, train: torch.Tensor, rate: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Hide a random ``rate`` of the training labels: ``(known_labels, scored_mask)``.
    At least one is hidden, so that a small rate on few nodes still scores a node."""
    hidden = train & (torch.rand(y.size(0), generator=generator) < rate)
    if not bool(hidden.any()):
        candidates = train.nonzero().flatten()
        hidden[candidates[torch.randint(candidates.numel(), (1,), generator=generator)]] = True
    known = torch.where(train & ~hidden, y, torch.full_like(y, -1))
    return known, hidden


def _node_features(data) -> torch.Tensor:
    """``data.x``; for a graph without node features, structural ones (as
    :func:`~graphattn.datasets.social.load_node_graph` adds them)."""
    if getattr(data, "x", None) is not None:
        if data.x.dim() != 2 or data.x.size(0) != data.num_nodes:
            raise GraphInputError(
                f"data.x must be [num_nodes, F] = [{data.num_nodes}, F], got {list(data.x.shape)}"
            )
        return data.x.float()
    log.info("the graph has no node features x: using structural features (degree, walks)")
    return structural_features(data.edge_index, int(data.num_nodes))


PARTS = ("train", "val", "test")


def _mask_dict(masks, y: torch.Tensor) -> dict[str, torch.Tensor]:
    """``{"train", "val", "test"}`` boolean ``[N]`` masks from a dict or a 3-tuple (as
    :func:`~graphattn.splits.nodes.node_split_masks` returns), once they are known to be
    disjoint and to select labelled nodes only (an unlabelled node would be scored)."""
    if not isinstance(masks, dict):
        masks = dict(zip(PARTS, masks, strict=True))
    if set(masks) != set(PARTS):
        raise GraphInputError(f"masks must have the keys {PARTS}, got {sorted(masks)}")
    for part, mask in masks.items():
        if mask.dtype != torch.bool or mask.shape != y.shape:
            raise GraphInputError(
                f"masks[{part!r}] must be a bool tensor of shape [{y.numel()}], got "
                f"{mask.dtype} {list(mask.shape)}"
            )
        unlabelled = torch.nonzero(mask & (y < 0)).flatten()
        if unlabelled.numel():
            raise GraphInputError(
                f"masks[{part!r}] selects {unlabelled.numel()} unlabelled node(s) (y = -1), "
                f"e.g. node {int(unlabelled[0])}: only labelled nodes can be scored"
            )
    for i, first in enumerate(PARTS):
        for second in PARTS[i + 1 :]:
            shared = torch.nonzero(masks[first] & masks[second]).flatten()
            if shared.numel():
                raise GraphInputError(
                    f"masks[{first!r}] and masks[{second!r}] share {shared.numel()} node(s), "
                    f"e.g. node {int(shared[0])}: the parts must be disjoint"
                )
    if not bool(masks["train"].any()):
        raise GraphInputError("masks['train'] selects no node: there is nothing to train on")
    if not bool(masks["test"].any()):
        log.warning(
            "the test part (masks['test']) selects no node: the run reports no test metrics"
        )
    return {part: masks[part] for part in PARTS}


def _checked_names(data: Data, y: torch.Tensor) -> Data:
    """``data`` (a shallow copy) with ``label_names`` and ``node_ids`` as lists, checked
    against ``y`` (the checked labels) and the node count before training: a tensor of
    ids or too few names used to fail after training, while writing the run folder."""
    names, ids = getattr(data, "label_names", None), getattr(data, "node_ids", None)
    if names is None and ids is None:
        return data
    data = copy.copy(data)
    if names is not None:
        names = _as_list(names)
        needed = int(y.max()) + 1
        if len(names) < needed:
            raise GraphInputError(
                f"data.label_names has {len(names)} name(s), but y holds class "
                f"{needed - 1}: give one name per class, {needed} or more"
            )
        data.label_names = names
    if ids is not None:
        ids = _as_list(ids)
        if len(ids) != data.num_nodes:
            raise GraphInputError(
                f"data.node_ids has {len(ids)} id(s) for the graph's {data.num_nodes} nodes"
            )
        data.node_ids = ids
    return data


def _as_list(values) -> list:
    return values.tolist() if isinstance(values, torch.Tensor | np.ndarray) else list(values)


def _node_count_source(data) -> str:
    """Where PyG took ``data.num_nodes`` from, when that may be the surprise."""
    if "num_nodes" in data:
        return ""
    if getattr(data, "x", None) is not None:
        return " (the node count is data.x's number of rows)"
    return (
        " (without data.x, the node count comes from the edge list, which leaves out "
        "isolated nodes at the end: set data.num_nodes)"
    )


def _check_labels(data) -> torch.Tensor:
    """``data.y`` as long, once it is known to hold at least two classes."""
    if int(data.num_nodes or 0) == 0:
        raise GraphInputError("the graph has no nodes")
    if getattr(data, "y", None) is None:
        raise GraphInputError(
            "the graph has no labels y (from_networkx(..., label_attr=NAME) or a label file "
            "gives them)"
        )
    y = data.y
    num_nodes = int(data.num_nodes)
    if y.dim() != 1 or y.size(0) != num_nodes:
        raise GraphInputError(
            f"data.y must hold one label per node, shape [{num_nodes}], got {list(y.shape)}"
            + _node_count_source(data)
        )
    if y.is_floating_point():  # NaN marks an unlabelled node; casting it is CPU-dependent
        known = y.isfinite()
        fractional = (known & (y != y.round())).nonzero()
        if len(fractional):
            bad = int(fractional[0])
            raise GraphInputError(f"y[{bad}] = {float(y[bad]):g} is not a whole class number")
        y = torch.where(known, y, torch.full_like(y, -1))
    y = y.long()
    classes = torch.unique(y[y >= 0]).tolist()
    if len(classes) < 2:
        names = getattr(data, "label_names", None)
        names = [] if names is None else _as_list(names)
        found = [names[c] if c < len(names) else c for c in classes]
        raise GraphInputError(
            f"node classification needs at least 2 classes among the labelled nodes; "
            f"found {len(classes)}: {found}"
        )
    return y


@keeps_global_rng
def train_node_model(
    data: Data,
    masks: dict[str, torch.Tensor] | tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    config: NodeTrainConfig | None = None,
    run_dir: str | Path | None = None,
    dataset_name: str = "custom",
    progress: bool = True,
    split_name: str | None = None,
) -> dict:
    """Train a node classifier on one graph and (optionally) write a run folder.

    Args:
        data: ``Data`` with ``edge_index``, ``y [N]`` (-1 = unlabelled, at least two
            classes) and ``x [N, F]`` (without ``x``: structural features, see
            :func:`~graphattn.featurize.graph.structural_features`); optional
            ``label_names`` (one per class) and ``node_ids`` (one per node), each a
            list, tensor or array, checked before training.
        masks: ``{"train", "val", "test"}`` boolean ``[N]`` masks (disjoint), or the
            ``(train, val, test)`` tuple of :func:`~graphattn.splits.nodes.node_split_masks`.
        config: training settings.
        run_dir: folder for ``model.pt``, ``metrics.json``, ``history.json``,
            ``predictions.csv``, ``confusion_matrix.png`` (with test nodes), ``graph.png``
            (up to :data:`MAX_DRAWN_NODES` = 3,000 nodes) and, with a validation set,
            ``learning_curve.png``.
        dataset_name: recorded in ``metrics.json``.
        progress: show a progress bar.
        split_name: how ``masks`` were made, recorded in ``metrics.json`` as ``split``
            (default: ``"custom"``; ``graphattn train`` records ``"random"``,
            ``"labels_per_class"`` or ``"fixed_train_nodes"``).

    Returns:
        The metrics dictionary, plus (not written) the trained model under ``"model"``
        and, for a model with label inputs (``metrics["label_inputs"]``), the labels it
        reads under ``"known_labels"`` (``[N]``: the training labels, -1 elsewhere;
        ``None`` without label inputs). Such a model refuses a call without them;
        ``model.eval()(x, data.edge_index, known_labels)``, with ``x = data.x.float()``
        (for a graph without ``x``, the features the model was trained on:
        ``structural_features(data.edge_index, data.num_nodes)``, from
        :mod:`graphattn.featurize.graph`),
        gives ``predictions.csv``'s values for every node outside training (its
        training rows are scored without their own labels: :func:`final_logits`).
        Without label inputs the model takes ``(x, data.edge_index)``.
    """
    config = config or NodeTrainConfig()
    check_training_settings(
        config.epochs, config.lr, config.weight_decay, config.patience, config.seed
    )
    check_config_json(config)
    check_run_folder(run_dir)
    if not 0 < config.label_mask_rate <= 1:  # 0 would score no node
        raise GraphInputError(
            f"label_mask_rate must be above 0 and at most 1, got {config.label_mask_rate}"
        )
    device = training_device(config.device)
    seed_everything(config.seed)
    y = _check_labels(data)
    data = _checked_names(data, y)
    masks = _mask_dict(masks, y)
    features = _node_features(data)
    check_finite(**{"data.x": features})  # named as given, before the model projects it
    # a named class that no node carries (its labels removed) still gets an output
    num_classes = max(int(y.max()) + 1, len(getattr(data, "label_names", None) or ()))
    label_inputs = _use_label_inputs(config, masks)
    model = NodeClassifier(
        NodeModelConfig(
            in_channels=features.size(1),
            num_classes=num_classes,
            hidden=config.hidden,
            layers=config.layers,
            heads=config.heads,
            dropout=config.dropout,
            input_dropout=config.input_dropout,
            mode=config.mode,
            label_inputs=label_inputs,
            attention=dict(config.attention),
        )
    ).to(device)
    optimizer = adamw(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    has_val = bool(masks["val"].any())
    stopper = EarlyStopping(config.patience if has_val else None, higher_is_better=True)
    generator = torch.Generator().manual_seed(torch_seed(config.seed))
    eval_known = torch.where(masks["train"], y, torch.full_like(y, -1))
    # Labels and masks stay on the CPU for the label masking and the metrics; the
    # model's inputs and the loss's labels go to the device, once.
    x, edge_index = features.to(device), data.edge_index.to(device)
    y_device, train_device = y.to(device), masks["train"].to(device)
    eval_inputs = eval_known.to(device) if label_inputs else None
    history = []
    start = time.perf_counter()
    bar = tqdm(
        range(1, config.epochs + 1),
        desc=f"train {dataset_name}",
        unit="epoch",
        disable=not progress,
    )
    for epoch in bar:
        model.train()
        optimizer.zero_grad()
        if label_inputs:
            known, scored = _train_inputs(y, masks["train"], config.label_mask_rate, generator)
            known, scored = known.to(device), scored.to(device)
        else:
            known, scored = None, train_device
        with divergence_named(epoch, epoch - 1, config.lr, model, (x,)):  # one step an epoch
            logits = model(x, edge_index, known)
        loss = F.cross_entropy(logits[scored], y_device[scored])
        loss.backward()
        optimizer.step()
        record = {"epoch": epoch, "train_loss": loss.item()}
        check_finite_loss(record["train_loss"], epoch, config.lr, {"data.x": x})
        if has_val:
            with divergence_named(epoch, epoch, config.lr, model, (x,)):
                pred = _predict(model, x, edge_index, eval_inputs)
            record["val_accuracy"] = float((pred[masks["val"]] == y[masks["val"]]).double().mean())
            record["best"] = stopper.step(record["val_accuracy"], epoch, model)
            bar.set_postfix(loss=f"{loss.item():.4f}", val_acc=f"{record['val_accuracy']:.4f}")
        else:
            bar.set_postfix(loss=f"{loss.item():.4f}")
        history.append(record)
        if stopper.should_stop:
            break
    train_seconds = time.perf_counter() - start
    stopper.restore(model)  # no-op for a fixed schedule (no validation nodes)

    logits = final_logits(model, x, edge_index, eval_inputs, train_device, config.label_mask_rate)
    pred = logits.argmax(-1)
    results = {part: node_metrics(y[m].numpy(), pred[m].numpy()) for part, m in masks.items()}
    metrics = {
        "task": "node-classification",
        "dataset": dataset_name,
        "split": split_name or "custom",
        "seed": config.seed,
        "num_nodes": int(data.num_nodes),
        "num_edges": int(edge_index.size(1)),
        "num_classes": num_classes,
        "num_labelled": {part: int(m.sum()) for part, m in masks.items()},
        "test": results["test"],
        "val": results["val"],
        "train": results["train"],
        "label_inputs": label_inputs,
        "best_epoch": stopper.best_epoch if has_val else len(history),
        "epochs_run": len(history),
        "train_seconds": round(train_seconds, 2),
        "device": str(device),
        "config": asdict(config),
    }
    if run_dir is not None:
        probs = torch.softmax(logits, -1).numpy()
        _write_run(Path(run_dir), model, data, y, masks, pred, probs, history, metrics)
    return {**metrics, "model": model, "known_labels": eval_known if label_inputs else None}


@torch.no_grad()
def _predict(model, x, edge_index, known) -> torch.Tensor:
    """``[N]`` predicted classes, on the CPU."""
    model.eval()
    return model(x, edge_index, known).argmax(-1).cpu()


MAX_SCORING_FOLDS = 10


@torch.no_grad()
def final_logits(
    model: NodeClassifier,
    x: torch.Tensor,
    edge_index: torch.Tensor,
    known: torch.Tensor | None,
    train: torch.Tensor,
    label_mask_rate: float,
) -> torch.Tensor:
    """``[N, C]`` CPU logits of every node, each training node's without its own label.

    With label inputs (``known``: the training labels, -1 elsewhere) the other nodes are
    scored from all training labels. The training nodes are scored in
    ``round(1 / label_mask_rate)`` folds (at most :data:`MAX_SCORING_FOLDS`), each pass
    hiding one fold's labels, as training hid them: a node never reads its own label,
    so the train metrics and the training rows of ``predictions.csv`` are not inflated.
    """
    model.eval()
    logits = model(x, edge_index, known)
    if known is None:
        return logits.cpu()
    members = train.nonzero().flatten()
    folds = min(MAX_SCORING_FOLDS, max(1, round(1 / label_mask_rate)))
    for fold in range(folds):
        hidden = members[fold::folds]
        masked = known.clone()
        masked[hidden] = -1
        logits[hidden] = model(x, edge_index, masked)[hidden]
    return logits.cpu()


def _label_names(data, num_classes: int) -> list[str]:
    names = getattr(data, "label_names", None)
    return [str(n) for n in names] if names else [str(c) for c in range(num_classes)]


def _write_run(run_dir: Path, model, data, y, masks, pred, probs, history, metrics) -> None:
    """The run folder, with ``y`` (the checked labels, -1 = unlabelled) as the labels:
    the NaN of a float ``data.y``'s unlabelled nodes is not a class number."""
    data = copy.copy(data)
    data.y = y
    to_json(metrics)  # raises before start_run_folder deletes an earlier run's files
    start_run_folder(run_dir)
    names = _label_names(data, metrics["num_classes"])
    save_checkpoint(
        run_dir,
        model,
        kind="node",
        model_config=model.config.to_dict(),
        label_names=names,
        task=metrics["task"],
    )
    write_json(run_dir / "metrics.json", metrics)
    write_json(run_dir / "history.json", {"history": history})
    if "val_accuracy" in history[0]:
        plot_learning_curve(history, "accuracy", run_dir / "learning_curve.png")
    node_ids = getattr(data, "node_ids", None) or list(range(data.num_nodes))
    part = np.full(data.num_nodes, "unlabelled", dtype=object)
    for name, mask in masks.items():
        part[mask.numpy()] = name
    with open(run_dir / "predictions.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            ["node", "node_id", "split", "label", "predicted", *[f"prob_{n}" for n in names]]
        )
        for n in range(data.num_nodes):
            label = names[int(data.y[n])] if int(data.y[n]) >= 0 else ""
            writer.writerow(
                [
                    n,
                    node_ids[n],
                    part[n],
                    label,
                    names[int(pred[n])],
                    *(round(float(p), 5) for p in probs[n]),  # float32 -> short decimals
                ]
            )
    test = masks["test"].numpy()
    if test.any():
        matrix = confusion_matrix(
            data.y.numpy()[test], pred.numpy()[test], labels=list(range(len(names)))
        )
        plot_confusion_matrix(matrix, names, run_dir / "confusion_matrix.png")
    if data.num_nodes <= MAX_DRAWN_NODES:
        from graphattn.featurize.graph import to_networkx

        accuracy = metrics["test"]["accuracy"]
        scored = f"test accuracy {accuracy:.3f}" if test.any() else "no test nodes"
        plot_graph(
            to_networkx(data),
            pred.tolist(),
            names,
            run_dir / "graph.png",
            title=f"{metrics['dataset']}: predicted labels ({scored})",
        )


# The CLI's --delimiter and --header words, as load_node_graph's arguments.
CLI_DELIMITERS = {"comma": ",", "tab": "\t", "semicolon": ";", "whitespace": "whitespace"}
CLI_HEADERS = {"auto": None, "yes": True, "no": False}


def _load_cli_data(args):
    """The graph and its name for ``graphattn train`` on nodes."""
    from graphattn.datasets.files import file_title
    from graphattn.datasets.social import load_node_dataset, load_node_graph

    if args.edges is not None:
        data = load_node_graph(
            args.edges,
            labels=args.labels,
            features=args.features,
            text_col=args.text_col,
            label_col=args.label_col,
            delimiter=CLI_DELIMITERS.get(args.delimiter),
            has_header=CLI_HEADERS[args.header or "auto"],
        )
        return data, file_title(args.edges)
    return load_node_dataset(args.dataset, data_dir=args.data_dir), args.dataset


def train_node_model_cli(args: argparse.Namespace, config: NodeTrainConfig) -> dict:
    """``graphattn train`` for node sets: load, split, train, write ``args.out``."""
    from graphattn.splits.nodes import fixed_train_masks, node_split_masks

    data, name = _load_cli_data(args)
    default_train = getattr(data, "default_train_nodes", None)
    user_split = args.split_fractions is not None or args.labels_per_class is not None
    if default_train is not None and not user_split:
        masks = fixed_train_masks(data.y, default_train)
        split_name = "fixed_train_nodes"
    else:
        masks = node_split_masks(
            data.y,
            fractions=config.fractions,
            labels_per_class=config.labels_per_class,
            seed=config.seed,
            class_names=getattr(data, "label_names", None),
        )
        split_name = "labels_per_class" if config.labels_per_class else "random"
    metrics = train_node_model(
        data,
        masks,
        config,
        run_dir=args.out,
        dataset_name=name,
        progress=not args.no_progress,
        split_name=split_name,
    )
    metrics.pop("model")
    metrics.pop("known_labels")
    return metrics
