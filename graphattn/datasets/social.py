"""Read node-classification graphs from text files, and the named node data sets.

File formats (edge lists, label files, node feature files):

* Text in UTF-8 (a byte-order mark is ignored). Blank lines and lines starting with
  ``#`` or ``%`` (SNAP and KONECT comments) are skipped.
* Delimiter: a comma when the first data line contains one (parsed with the
  ``csv`` module, so quoted fields may hold commas), otherwise any run of
  whitespace. Pass ``delimiter`` to override (``","``, ``"\\t"``, ``";"`` or
  ``"whitespace"``).
* Header: the first data line is a header when every checked field of it (the two
  endpoints of an edge list, the id column of a label file, the value columns of a
  feature file) is a well-known column name (``src``, ``target``, ``id``, ``node``,
  ...), or when one of those fields fails to parse (an integer id, a number) while
  the same fields of the second line parse. String node ids with an unusual header
  cannot be told apart from data: pass ``has_header=True``. A detected header is
  logged.
* Node ids are kept as strings. When every id is a canonical decimal integer
  (``"7"``, not ``"07"``), nodes are numbered in integer order, so ids 0..N-1 map
  to themselves; otherwise in sorted string order.

Policies: self-loops and duplicate edges are kept as read (the attention layers
merge duplicates and add missing self-loops), counted in the graph's
:class:`~graphattn.featurize.graph.GraphReport` and logged as warnings. Nodes that
appear only in a label or feature file are added as isolated nodes (a page with no
edges is still a page), with a warning saying how many.
"""

from __future__ import annotations

import csv
import functools
import gc
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data

from graphattn.datasets.files import resolve_file
from graphattn.errors import GraphInputError
from graphattn.featurize.graph import (
    GraphReport,
    edges_from_pairs,
    encode_labels,
    from_networkx,
    structural_features,
    text_features,
)

__all__ = [
    "NODE_DATASETS",
    "NodeTable",
    "load_node_dataset",
    "load_node_graph",
    "order_node_ids",
    "read_edge_list",
    "read_labels",
    "read_node_features",
]

log = logging.getLogger(__name__)

PathLike = str | Path
Column = int | str

KNOWN_COLUMNS = frozenset(
    ("id", "node", "node_id", "nodeid", "name", "src", "source", "dst", "target",
     "destination", "from", "to", "id_1", "id_2", "id1", "id2", "node1", "node2",
     "node_1", "node_2", "source_id", "target_id")
)  # fmt: skip
_CANONICAL_INT = re.compile(r"-?(0|[1-9][0-9]*)\Z")


# ----------------------------------------------------------------------------- rows


def _gc_paused(function: Callable) -> Callable:
    """Run ``function`` with the cyclic garbage collector paused.

    Parsing creates hundreds of thousands of small lists and strings, none of them
    cyclic; with torch loaded, the collector's repeated full scans made reading the
    Facebook edge list about six times slower.
    """

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        enabled = gc.isenabled()
        gc.disable()
        try:
            return function(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    return wrapper


@dataclass
class _Rows:
    """The data rows of a text file: ``(line number, fields)`` pairs and its header."""

    path: Path
    rows: list[tuple[int, list[str]]]
    header: list[str] | None


def _open_rows(path: PathLike, delimiter: str | None) -> list[tuple[int, list[str]]]:
    """``(line number, fields)`` of the data lines of ``path`` (fields stripped)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise GraphInputError(f"{path}: not UTF-8 text ({err})") from err
    lines = text.splitlines()
    if delimiter is None:
        first = next((ln for ln in lines if _is_data(ln)), "")
        delimiter = "," if "," in first else "whitespace"
    if delimiter in ("whitespace", " "):
        return [(n, ln.split()) for n, ln in enumerate(lines, 1) if _is_data(ln)]
    rows = _csv_rows(lines, delimiter)
    if any(c in text for c in " \t"):
        rows = [(n, [f.strip() for f in fields]) for n, fields in rows]
    return [(n, f) for n, f in rows if any(f) and f[0][:1] not in ("#", "%")]


def _csv_rows(lines: list[str], delimiter: str) -> list[tuple[int, list[str]]]:
    """Parse ``lines`` as CSV, numbering each record by the line it starts on."""
    records = list(csv.reader(lines, delimiter=delimiter))
    if len(records) == len(lines):  # no quoted field spans lines: record k is line k + 1
        return list(enumerate(records, 1))
    reader = csv.reader(lines, delimiter=delimiter)
    numbered, line = [], 1
    for fields in reader:
        numbered.append((line, fields))
        line = reader.line_num + 1
    return numbered


def _is_data(line: str) -> bool:
    stripped = line.lstrip()
    return bool(stripped) and stripped[0] not in "#%"


def _read_rows(
    path: PathLike,
    delimiter: str | None,
    has_header: bool | None,
    checked: Sequence[int] | None,
    parses,
) -> _Rows:
    """Read the data rows of ``path``; decide on a header from columns ``checked``.

    ``checked=None`` checks every column but the first.
    """
    rows = _open_rows(path, delimiter)
    if checked is None:
        checked = tuple(range(1, len(rows[0][1]))) if rows else ()
    if has_header is None:
        has_header = _looks_like_header(rows, checked, parses)
    header = None
    if has_header and rows:
        (line, header), rows = rows[0], rows[1:]
        log.info("%s: line %d read as a header: %s", path, line, header)
    return _Rows(Path(path), rows, header)


def _looks_like_header(rows: list[tuple[int, list[str]]], checked: Sequence[int], parses) -> bool:
    if not rows:
        return False
    first = _pick(rows[0][1], checked)
    if first and all(f.lower() in KNOWN_COLUMNS for f in first):
        return True
    if len(rows) < 2 or all(parses(f) for f in first):
        return False
    second = _pick(rows[1][1], checked)
    return len(second) == len(first) and all(parses(f) for f in second)


def _pick(fields: list[str], columns: Sequence[int]) -> list[str]:
    try:
        return [fields[c] for c in columns]
    except IndexError:
        return []


def _is_int(text: str) -> bool:
    return bool(_CANONICAL_INT.match(text))


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _column_index(column: Column, header: list[str] | None, path: Path, role: str) -> int:
    """Position of ``column`` (an index, or a header name) in the rows of ``path``."""
    if isinstance(column, int):
        return column
    if header is None:
        raise GraphInputError(
            f"{path}: {role} column {column!r} is a name but the file has no header "
            "(pass has_header=True or a column index)"
        )
    if column not in header:
        raise GraphInputError(f"{path}: no {role} column {column!r}; header is {header}")
    return header.index(column)


def _field(fields: list[str], column: int, path: Path, line: int, role: str) -> str:
    try:
        value = fields[column]
    except IndexError:
        raise GraphInputError(
            f"{path}, line {line}: malformed line, no {role} column {column} "
            f"in {len(fields)} field(s): {fields}"
        ) from None
    return value


# ----------------------------------------------------------------------------- ids


def order_node_ids(ids: Sequence[str] | set[str]) -> list[str]:
    """Node ids in numbering order: integer order if all are integers, else sorted.

    Args:
        ids: distinct node ids (strings).

    Returns:
        The ids as a list; position = node number.
    """
    ids = set(ids)
    if all(_is_int(i) for i in ids):
        return sorted(ids, key=int)
    return sorted(ids)


def _node_index(node_ids: Sequence[str]) -> dict[str, int]:
    index = {str(key): i for i, key in enumerate(node_ids)}
    if len(index) != len(node_ids):
        seen: set[str] = set()
        repeated = next(str(k) for k in node_ids if str(k) in seen or seen.add(str(k)))
        raise GraphInputError(f"node_ids lists node {repeated!r} more than once")
    return index


# ----------------------------------------------------------------------------- edges


@dataclass
class _EdgeRows:
    path: Path
    src: list[str]
    dst: list[str]
    lines: list[int]


def _read_edge_rows(
    path: PathLike, delimiter: str | None = None, has_header: bool | None = None
) -> _EdgeRows:
    table = _read_rows(path, delimiter, has_header, (0, 1), _is_int)
    for line, fields in table.rows:
        if len(fields) < 2 or not fields[0] or not fields[1]:
            raise GraphInputError(
                f"{table.path}, line {line}: malformed line, expected two node ids "
                f"(source, target), got {fields}"
            )
    extra = sum(len(fields) > 2 for _, fields in table.rows)
    if extra:
        log.warning(
            "%s: %d line(s) have more than two fields; extra columns ignored", table.path, extra
        )
    return _EdgeRows(
        table.path,
        src=[fields[0] for _, fields in table.rows],
        dst=[fields[1] for _, fields in table.rows],
        lines=[line for line, _ in table.rows],
    )


def _edges_to_index(
    rows: _EdgeRows, node_ids: Sequence[str], directed: bool
) -> tuple[Tensor, GraphReport]:
    index = _node_index(node_ids)
    src = _map_ids(rows.src, index, rows)
    dst = _map_ids(rows.dst, index, rows)
    return edges_from_pairs(
        src,
        dst,
        len(node_ids),
        directed=directed,
        source=str(rows.path),
        describe=lambda k: f"line {rows.lines[k]}",
    )


def _map_ids(ids: list[str], index: dict[str, int], rows: _EdgeRows) -> Tensor:
    try:
        return torch.tensor([index[i] for i in ids], dtype=torch.long)
    except KeyError as err:
        k = ids.index(err.args[0])
        raise GraphInputError(
            f"{rows.path}, line {rows.lines[k]}: unknown node id {err.args[0]!r} "
            f"(not among the {len(index)} given nodes)"
        ) from None


@_gc_paused
def read_edge_list(
    path: PathLike,
    directed: bool = False,
    node_ids: Sequence[str] | None = None,
    delimiter: str | None = None,
    has_header: bool | None = None,
) -> tuple[Tensor, list[str], GraphReport]:
    """Read an edge list (CSV or whitespace text, two node ids per line).

    See the module docstring for delimiter, header and id-order rules. Columns
    after the first two (weights, times) are ignored with a warning. Self-loops and
    duplicates are kept and reported.

    Args:
        path: the file.
        directed: keep each line's direction; otherwise add the reverse edge.
        node_ids: the node list to number by (position = node number); an edge
            naming a node outside it is an error. Default: the ids in the file.
        delimiter: ``None`` (detect), ``","``, ``"\\t"``, ``"whitespace"``, ...
        has_header: ``None`` (detect), ``True`` or ``False``.

    Returns:
        ``edge_index`` ``[2, E]`` long, the node ids (list of str, position = node
        number) and a :class:`GraphReport`.

    Raises:
        GraphInputError: a malformed line or unknown node id (with its line number),
            or a file without edges when no ``node_ids`` are given.
    """
    rows = _read_edge_rows(path, delimiter, has_header)
    if node_ids is None:
        if not rows.src:
            raise GraphInputError(f"{rows.path}: empty graph, no edges found")
        node_ids = order_node_ids(set(rows.src) | set(rows.dst))
    node_ids = [str(i) for i in node_ids]
    edge_index, report = _edges_to_index(rows, node_ids, directed)
    return edge_index, node_ids, report


# ----------------------------------------------------------------------------- labels


@_gc_paused
def read_labels(
    path: PathLike,
    id_col: Column | None = None,
    label_col: Column | None = None,
    delimiter: str | None = None,
    has_header: bool | None = None,
) -> dict[str, str]:
    """Read node labels (one node per line); the file may cover only some nodes.

    Args:
        path: CSV or whitespace text, with or without a header.
        id_col: node id column, index or header name (default: the first).
        label_col: label column, index or header name (default: the last).
        delimiter: as in :func:`read_edge_list`.
        has_header: ``None`` detects (a name in ``id_col``/``label_col`` implies
            ``True``).

    Returns:
        node id -> label (both str). Lines with an empty label are skipped with a
        warning; a repeated id with the same label is warned about.

    Raises:
        GraphInputError: a malformed line, or an id given two different labels
            (naming the id, both labels and both lines).
    """
    if has_header is None and (isinstance(id_col, str) or isinstance(label_col, str)):
        has_header = True
    id_pos = 0 if id_col is None else id_col
    checked = (id_pos,) if isinstance(id_pos, int) else (0,)
    table = _read_rows(path, delimiter, has_header, checked, _is_int)
    id_at = _column_index(id_pos, table.header, table.path, "id")
    label_at = _column_index(
        -1 if label_col is None else label_col, table.header, table.path, "label"
    )
    return _collect_labels(table, id_at, label_at)


def _collect_labels(table: _Rows, id_at: int, label_at: int) -> dict[str, str]:
    labels: dict[str, str] = {}
    seen_at: dict[str, int] = {}
    repeated, empty = [], 0
    for line, fields in table.rows:
        node = _field(fields, id_at, table.path, line, "id")
        label = _field(fields, label_at, table.path, line, "label")
        if not label:
            empty += 1
        elif node not in labels:
            labels[node], seen_at[node] = label, line
        elif labels[node] == label:
            repeated.append(node)
        else:
            raise GraphInputError(
                f"{table.path}: conflicting labels for node {node!r}: {labels[node]!r} "
                f"(line {seen_at[node]}) and {label!r} (line {line})"
            )
    if repeated:
        log.warning(
            "%s: %d repeated label line(s) with the same label (first: node %r)",
            table.path,
            len(repeated),
            repeated[0],
        )
    if empty:
        log.warning("%s: %d line(s) with an empty label skipped", table.path, empty)
    return labels


# ----------------------------------------------------------------------------- features


@dataclass
class NodeTable:
    """Per-node values read from a feature file.

    Attributes:
        ids: M node ids (str), in file order.
        values: ``[M, F]`` float32 numeric features, or ``None``.
        texts: M strings from the text column, or ``None``.
        columns: names (or indices as str) of the F numeric columns.
        source: the file read.
    """

    ids: list[str]
    values: Tensor | None
    texts: list[str] | None
    columns: list[str]
    source: str = ""


@_gc_paused
def read_node_features(
    path: PathLike,
    id_col: Column = 0,
    text_col: Column | None = None,
    feature_cols: Sequence[Column] | None = None,
    delimiter: str | None = None,
    has_header: bool | None = None,
) -> NodeTable:
    """Read numeric node features and/or a text column, one node per line.

    Args:
        path: CSV or whitespace text.
        id_col: node id column, index or header name.
        text_col: a text column (e.g. a page name), index or header name.
        feature_cols: numeric columns. Default: every column but the id when no
            ``text_col`` is given; none when it is.
        delimiter: as in :func:`read_edge_list`.
        has_header: ``None`` detects (a column name given implies ``True``).

    Returns:
        A :class:`NodeTable`.

    Raises:
        GraphInputError: a malformed line, a repeated node id, or a value that is
            not a finite number (naming the line and column).
    """
    named = [c for c in (id_col, text_col, *(feature_cols or ())) if isinstance(c, str)]
    if has_header is None and named:
        has_header = True
    table = _read_rows(path, delimiter, has_header, None, _is_float)
    id_at = _column_index(id_col, table.header, table.path, "id")
    text_at = (
        None if text_col is None else _column_index(text_col, table.header, table.path, "text")
    )
    value_at = _feature_columns(table, id_at, text_at, feature_cols)
    ids = _unique_ids(table, id_at)
    texts = None
    if text_at is not None:
        texts = [_field(fields, text_at, table.path, line, "text") for line, fields in table.rows]
    values = None
    if value_at:
        rows = [[_number(fields, c, table, line) for c in value_at] for line, fields in table.rows]
        values = torch.tensor(rows, dtype=torch.float32).reshape(len(ids), len(value_at))
    names = [table.header[c] if table.header else str(c) for c in value_at]
    return NodeTable(ids, values, texts, names, source=str(table.path))


def _unique_ids(table: _Rows, id_at: int) -> list[str]:
    first_line: dict[str, int] = {}
    for line, fields in table.rows:
        node = _field(fields, id_at, table.path, line, "id")
        if node in first_line:
            raise GraphInputError(
                f"{table.path}, line {line}: node {node!r} repeated (first on line "
                f"{first_line[node]})"
            )
        first_line[node] = line
    return list(first_line)


def _feature_columns(
    table: _Rows, id_at: int, text_at: int | None, feature_cols: Sequence[Column] | None
) -> list[int]:
    if feature_cols is not None:
        return [_column_index(c, table.header, table.path, "feature") for c in feature_cols]
    if text_at is not None:
        return []
    width = len(table.header) if table.header else len(table.rows[0][1]) if table.rows else 0
    return [c for c in range(width) if c != id_at]


def _number(fields: list[str], column: int, table: _Rows, line: int) -> float:
    text = _field(fields, column, table.path, line, "feature")
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not np.isfinite(value):
        name = table.header[column] if table.header else column
        raise GraphInputError(
            f"{table.path}, line {line}: feature column {name!r} holds {text!r}, "
            "not a finite number"
        )
    return value


# ----------------------------------------------------------------------------- graphs


@_gc_paused
def load_node_graph(
    edges: PathLike,
    labels: PathLike | Mapping[str, str] | None = None,
    features: PathLike | None = None,
    text_col: Column | None = None,
    directed: bool = False,
    *,
    id_col: Column | None = None,
    label_col: Column | None = None,
    feature_cols: Sequence[Column] | None = None,
    text_dim: int = 1024,
    text_method: str = "hashing",
    structural: bool | None = None,
    walk_length: int = 8,
) -> Data:
    """Build a node-classification graph from an edge list and optional node files.

    The nodes are the ids of the edge list plus those of the label and feature
    files (added as isolated nodes, with a warning), numbered by
    :func:`order_node_ids`. ``x`` concatenates, in this order, the numeric features
    of ``features``, hashed text features of ``text_col`` (taken from ``features``,
    or from ``labels`` when no feature file is given) and structural features
    (:func:`~graphattn.featurize.graph.structural_features`).

    Args:
        edges: edge list file (see :func:`read_edge_list`).
        labels: label file (see :func:`read_labels`) or a dict id -> label.
        features: feature file (see :func:`read_node_features`).
        text_col: text column turned into ``text_dim`` bag-of-words features.
        directed: read the edge list as directed.
        id_col: id column of the label and feature files (default: the first).
        label_col: label column of the label file (default: the last).
        feature_cols: numeric columns of the feature file (see
            :func:`read_node_features`).
        text_dim: width of the text features.
        text_method: ``"hashing"`` or ``"tfidf"`` (see
            :func:`~graphattn.featurize.graph.text_features`).
        structural: add structural features; ``None`` adds them only when there are
            no other node features, so attention always has something to score.
        walk_length: random-walk steps of the structural features.

    Returns:
        ``Data`` with ``x`` ``[N, F]`` float32, ``edge_index`` ``[2, E]``, ``y`` ``[N]``
        long (-1 = unlabelled), ``label_names`` (sorted), ``node_ids`` (list of str),
        ``x_blocks`` (block name -> (start, stop) columns of ``x``) and
        ``graph_report``.

    Raises:
        GraphInputError: bad files (see the readers), a node of the graph missing
            from a numeric feature file, or no features at all with
            ``structural=False``.
    """
    rows = _read_edge_rows(edges)
    label_map = _label_map(labels, id_col, label_col)
    text_source = features if features is not None else labels
    table = _node_table(features, text_source, id_col, text_col, feature_cols)
    node_ids = _all_node_ids(rows, label_map, table)
    edge_index, report = _edges_to_index(rows, node_ids, directed)
    _note_added_nodes(report, rows, node_ids)
    blocks = _feature_blocks(table, node_ids, text_dim, text_method, report)
    if structural or (structural is None and not blocks):
        blocks["structural"] = structural_features(edge_index, len(node_ids), walk_length)
    if not blocks:
        raise GraphInputError(
            f"{edges}: no node features (no feature file, no text column and "
            "structural=False); attention needs something to score"
        )
    y, names = encode_labels([label_map.get(i) for i in node_ids])
    data = Data(x=torch.cat(list(blocks.values()), dim=1), edge_index=edge_index, y=y)
    data.label_names = names
    data.node_ids = node_ids
    data.x_blocks = _block_bounds(blocks)
    data.graph_report = report
    return data


def _label_map(
    labels: PathLike | Mapping[str, str] | None, id_col: Column | None, label_col: Column | None
) -> dict[str, str]:
    if labels is None:
        return {}
    if isinstance(labels, Mapping):
        return {str(k): str(v) for k, v in labels.items() if v is not None}
    return read_labels(labels, id_col=id_col, label_col=label_col)


def _node_table(
    features: PathLike | None,
    text_source: PathLike | Mapping | None,
    id_col: Column | None,
    text_col: Column | None,
    feature_cols: Sequence[Column] | None,
) -> NodeTable | None:
    id_col = 0 if id_col is None else id_col
    if features is not None:
        return read_node_features(features, id_col, text_col, feature_cols)
    if text_col is None:
        return None
    if text_source is None or isinstance(text_source, Mapping):
        raise GraphInputError(
            f"text_col={text_col!r} needs a feature file or a label file to read it from"
        )
    return read_node_features(text_source, id_col, text_col, feature_cols=[])


def _all_node_ids(rows: _EdgeRows, labels: Mapping[str, str], table: NodeTable | None) -> list:
    ids = set(rows.src) | set(rows.dst) | set(labels)
    if table is not None:
        ids |= set(table.ids)
    if not ids:
        raise GraphInputError(f"{rows.path}: empty graph, no edges and no nodes found")
    return order_node_ids(ids)


def _note_added_nodes(report: GraphReport, rows: _EdgeRows, node_ids: list[str]) -> None:
    added = len(node_ids) - len(set(rows.src) | set(rows.dst))
    if added:
        report.note(
            f"{report.source}: {added} node(s) found only in the label/feature files "
            "were added as isolated nodes"
        )


def _feature_blocks(
    table: NodeTable | None,
    node_ids: list[str],
    text_dim: int,
    text_method: str,
    report: GraphReport,
) -> dict[str, Tensor]:
    if table is None:
        return {}
    row_of = {node: r for r, node in enumerate(table.ids)}
    blocks = {}
    if table.values is not None and table.values.size(1):
        missing = [i for i in node_ids if i not in row_of]
        if missing:
            raise GraphInputError(
                f"{table.source}: {len(missing)} node(s) of the graph have no row in this "
                f"feature file (first: {missing[0]!r})"
            )
        blocks["features"] = table.values[[row_of[i] for i in node_ids]]
    if table.texts is not None:
        missing = sum(i not in row_of for i in node_ids)
        if missing:
            report.note(f"{missing} node(s) have no text; they get a zero text vector")
        texts = [table.texts[row_of[i]] if i in row_of else "" for i in node_ids]
        blocks["text"] = text_features(texts, text_dim, text_method)
    return blocks


def _block_bounds(blocks: Mapping[str, Tensor]) -> dict[str, tuple[int, int]]:
    bounds, start = {}, 0
    for name, block in blocks.items():
        bounds[name] = (start, start + block.size(1))
        start += block.size(1)
    return bounds


# ----------------------------------------------------------------------------- named sets


KARATE_EIGENVECTORS = 2

NODE_DATASETS: dict[str, dict] = {
    "karate": {
        "description": "Zachary's karate club: 34 members, 78 friendships, "
        "which of two clubs each member joined after the split",
        "task": "node classification (2 classes: Mr. Hi, Officer)",
        "num_nodes": 34,
        "num_classes": 2,
        "features": "one-hot node identity [34, 34] + 2 Laplacian eigenvectors [34, 2]",
        "source": "networkx.karate_club_graph()",
        "card": "datasets/karate.md",
    },
    "facebook-pages": {
        "description": "Facebook page-page graph (MUSAE): verified pages, mutual likes",
        "task": "node classification (4 classes: company, government, politician, tvshow)",
        "num_nodes": 22470,
        "num_classes": 4,
        "features": "hashed page-name words (1024) + structural (9)",
        "source": "https://snap.stanford.edu/data/facebook_large.zip",
        "card": "datasets/facebook-pages.md",
    },
}


def load_node_dataset(
    name: str,
    data_dir: PathLike | None = None,
    text_dim: int = 1024,
    walk_length: int = 8,
) -> Data:
    """Load a named node-classification graph (a key of :data:`NODE_DATASETS`).

    Args:
        name: ``"karate"`` or ``"facebook-pages"``.
        data_dir: folder with the data files (see
            :func:`~graphattn.datasets.files.resolve_file`); unused for karate.
        text_dim: hashed page-name features (facebook-pages).
        walk_length: random-walk steps of the structural features (facebook-pages).

    Returns:
        ``Data`` as from :func:`load_node_graph`. Karate: ``x`` is the identity
        ``[34, 34]`` next to the 2 smallest non-trivial Laplacian eigenvectors (scaled
        to unit mean square), labels from the ``club`` attribute, and ``default_train_nodes``
        ``[0, 33]`` (the two leaders: the usual semi-supervised setting). Facebook:
        labels ``page_type``, ``x`` = hashed ``page_name`` + structural features.
    """
    if name == "karate":
        return _load_karate()
    if name == "facebook-pages":
        edges = resolve_file(name, "musae_facebook_edges.csv", data_dir)
        target = resolve_file(name, "musae_facebook_target.csv", data_dir)
        return load_node_graph(
            edges,
            labels=target,
            features=target,
            text_col="page_name",
            id_col="id",
            label_col="page_type",
            text_dim=text_dim,
            structural=True,
            walk_length=walk_length,
        )
    raise KeyError(f"unknown node data set {name!r}; known: {sorted(NODE_DATASETS)}")


def _load_karate() -> Data:
    from graphattn.transforms import laplacian_pe

    data = from_networkx(nx.karate_club_graph(), label_attr="club")
    n = data.num_nodes
    # Identity features alone leave the nodes far from both leaders to chance; the
    # Fiedler-like eigenvectors give attention a smooth notion of "which side".
    spectral = laplacian_pe(data.edge_index, n, KARATE_EIGENVECTORS) * n**0.5
    data.x = torch.cat([torch.eye(n), spectral], dim=1)
    data.x_blocks = {"identity": (0, n), "laplacian_pe": (n, n + KARATE_EIGENVECTORS)}
    data.default_train_nodes = [0, 33]
    return data
