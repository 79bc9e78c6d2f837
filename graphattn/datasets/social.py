"""Read node-classification graphs from text files, and the named node data sets.

File formats (edge lists, label files, node feature files):

* Text in UTF-8 (a byte-order mark is ignored). Blank lines and lines starting with
  ``#`` or ``%`` (SNAP and KONECT comments) are skipped before any parsing, so a
  quote in a comment cannot join lines; error messages give the lines' numbers in
  the file. Comment lines after the first data line are counted in a warning: an id
  that starts with ``#`` or ``%`` (a hashtag) must be quoted in a comma- or
  tab-separated file.
* Delimiter, sniffed from the data lines (a line holding a single field says
  nothing and is not looked at): a tab when every data line has one, else a comma
  when every data line has one, else any run of whitespace. Tab- and
  comma-separated files are parsed with the ``csv`` module, so quoted fields may
  hold the delimiter. Pass ``delimiter`` to override (``","``, ``"\\t"``, ``";"``
  or ``"whitespace"``), e.g. for a CSV file with quoted fields spanning lines.
* Whitespace-separated files cannot hold a label or text with spaces: a line with
  more fields than the header (or, without a header, than the selected columns
  need) is an error, not a guess.
* Header: the first data line is a header when its node id fields (the two
  endpoints of an edge list, the id column of a label or feature file) are
  well-known column names (``src``, ``target``, ``id``, ``node``, ...), or the
  value columns of a feature file are, or a label file's label column reads ``label``
  (any case, and no other line has it there; with no label column chosen, any column
  does, and with one chosen, ``label`` in another column is warned about), or when
  one of the checked fields fails to parse (an integer id, a number) while the same
  fields of the second line parse.
  It is read as data after all when one of its id fields is also a node id of
  another line of the file, or has the same shape (digits aside) as one: ``node1``
  next to ``node2``, ``007`` or ``-1`` next to ``8`` (a first data line with a bad
  field is then an error naming it). A column that is read by its name (or is the
  default ``label`` column) and named twice in the header is an error. A
  detected header is logged as a warning; so is a row of column names read as data.
  String node ids with an unusual header cannot be told apart from data: pass
  ``has_header``.
* Node ids are kept as strings; an empty one is an error. When every id is a
  canonical decimal integer (``"7"``, not ``"07"`` or ``"-0"``), nodes are numbered
  in integer order, so ids 0..N-1 map to themselves; otherwise in sorted string order.

Policies: self-loops and duplicate edges are kept as read (the attention layers
merge duplicates and add missing self-loops), counted in the graph's
:class:`~graphattn.featurize.graph.GraphReport` and logged as warnings. Nodes that
appear only in a label or feature file are added as isolated nodes (a page with no
edges is still a page), with a warning saying how many. Label lines without a label
(an empty or missing label field) leave the node unlabelled, counted in a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import networkx as nx
import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data

from graphattn.datasets.csv_file import MISSING_TARGET_CELLS
from graphattn.datasets.files import resolve_file
from graphattn.datasets.text_table import (
    WHITESPACE,
    Column,
    Table,
    check_header_width,
    check_whitespace_width,
    column_index,
    column_name,
    field_at,
    gc_paused,
    is_float,
    is_int,
    node_id_at,
    read_table,
)
from graphattn.errors import GraphInputError
from graphattn.featurize.graph import (
    GraphReport,
    edges_from_pairs,
    encode_labels,
    from_networkx,
    is_missing_label,
    ordered_names,
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


# ----------------------------------------------------------------------------- ids


def order_node_ids(ids: Sequence[str] | set[str]) -> list[str]:
    """Node ids in numbering order: integer order if all are integers, else sorted.

    Args:
        ids: distinct node ids (strings).

    Returns:
        The ids as a list; position = node number.
    """
    ids = set(ids)
    if all(is_int(i) for i in ids):
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
    table = read_table(path, delimiter, has_header, (0, 1), (0, 1), is_int)
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


@gc_paused
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


@gc_paused
def read_labels(
    path: PathLike,
    id_col: Column | None = None,
    label_col: Column | None = None,
    delimiter: str | None = None,
    has_header: bool | None = None,
) -> dict[str, str]:
    """Read node labels (one node per line); the file may cover only some nodes.

    Args:
        path: CSV, tab- or whitespace-separated text, with or without a header.
        id_col: node id column, index or header name (default: the first).
        label_col: label column, index or header name. Default: the column named
            ``label`` (any case) when the header has one, else the header's last
            column; without a header, the last column of the first line, or in a
            whitespace-separated file the column after the id.
        delimiter: as in :func:`read_edge_list`.
        has_header: ``None`` detects (a name in ``id_col``/``label_col`` implies
            ``True``).

    Returns:
        node id -> label (both str). Lines with an empty or missing label leave
        the node unlabelled and are counted in a warning.

    Raises:
        GraphInputError: a malformed line; in a whitespace-separated file, a line
            with more fields than expected (a label with spaces is ambiguous); an id
            on two label lines, with or without a label (naming the id and both
            lines, and both labels when they differ).
    """
    return _read_labels(path, id_col, label_col, delimiter, has_header).labels


@dataclass
class _LabelFile:
    """What :func:`load_node_graph` needs of a label file (or dict).

    Attributes:
        labels: node id -> label, for the labelled nodes.
        unlabelled: ids whose label is empty or missing (they stay in the graph).
        column: the label column of the file (``None`` for a dict).
        has_header: whether the file was read with a header (``None`` for a dict), so
            a second read of the same file (its text or feature columns) agrees.
    """

    labels: dict[str, str]
    unlabelled: list[str]
    column: int | None = None
    has_header: bool | None = None


def _read_labels(
    path: PathLike,
    id_col: Column | None,
    label_col: Column | None,
    delimiter: str | None,
    has_header: bool | None,
    text_col: Column | None = None,
) -> _LabelFile:
    """:func:`read_labels`; ``text_col`` is a column also read from the file (as
    text), so it is not an extra field and cannot be the default label."""
    if has_header is None and any(isinstance(c, str) for c in (id_col, label_col, text_col)):
        has_header = True
    id_pos = 0 if id_col is None else id_col
    id_cols = (id_pos,) if isinstance(id_pos, int) else (0,)
    label_hint = label_col if isinstance(label_col, int) else "any"
    table = read_table(path, delimiter, has_header, id_cols, id_cols, is_int, label_hint)
    id_at = column_index(id_pos, table.header, table.path, "id")
    label_at = (
        _default_label_column(table, id_at)
        if label_col is None
        else column_index(label_col, table.header, table.path, "label")
    )
    text_at = None if text_col is None else column_index(text_col, table.header, table.path, "text")
    _check_label_columns(table, id_at, label_at, text_at, label_col is None)
    used = (id_at, label_at) if text_at is None else (id_at, label_at, text_at)
    if table.delimiter == WHITESPACE:
        check_whitespace_width(table, used, "a label or text with spaces")
    else:
        check_header_width(table, used)
    labels, unlabelled = _collect_labels(table, id_at, label_at)
    return _LabelFile(labels, unlabelled, label_at, table.header is not None)


def _default_label_column(table: Table, id_at: int) -> int:
    if table.header is not None:
        lowered = [name.lower() for name in table.header]
        if lowered.count("label") > 1:
            raise GraphInputError(
                f"{table.path}: more than one column is named 'label' (any case): "
                f"{table.header}; pass label_col (CLI --label-col) or rename one"
            )
        return lowered.index("label") if "label" in lowered else len(table.header) - 1
    if table.delimiter == WHITESPACE or not table.rows:
        return id_at + 1
    return max(len(table.rows[0][1]) - 1, id_at + 1)


def _width(table: Table) -> int:
    """Columns of a table: its header's, else its first row's (0 when empty)."""
    return len(table.header) if table.header else len(table.rows[0][1]) if table.rows else 0


def _same_column(a: int | None, b: int | None, table: Table) -> bool:
    """Whether two column positions name one field on some line (-1 is each line's
    last field, so lines of every width present are checked; a position past a line's
    end names nothing there)."""
    if a is None or b is None:
        return False
    if a >= 0 and b >= 0:
        return a == b
    widths = {len(fields) for _, fields in table.rows} | (
        {len(table.header)} if table.header else set()
    )
    return any(-w <= a < w and -w <= b < w and a % w == b % w for w in widths)


def _check_label_columns(
    table: Table, id_at: int, label_at: int, text_at: int | None, defaulted: bool
) -> None:
    name = column_name(table, label_at)
    if _same_column(label_at, id_at, table):
        raise GraphInputError(f"{table.path}: the label column {name!r} is the id column")
    if table.rows and all(len(fields) <= label_at for _, fields in table.rows):
        raise GraphInputError(f"{table.path}: no line has a label column {name!r}")
    if _same_column(label_at, text_at, table):
        if defaulted:
            raise GraphInputError(
                f"{table.path}: the default label column {name!r} is the text column; "
                "pass label_col (CLI --label-col)"
            )
        raise GraphInputError(
            f"{table.path}: the label column {name!r} is also the text column, so each "
            "node's label would be its own input; pass another text_col (CLI --text-col)"
        )


def _collect_labels(table: Table, id_at: int, label_at: int) -> tuple[dict[str, str], list[str]]:
    """``(labels, unlabelled ids)`` of a label file's lines."""
    labels: dict[str, str] = {}
    seen: dict[str, tuple[int, str]] = {}  # node -> (first line, its label or "")
    unlabelled, unlabelled_ids = [], []
    for line, fields in table.rows:
        node = node_id_at(fields, id_at, table.path, line)
        label = fields[label_at] if -len(fields) <= label_at < len(fields) else ""
        if node in seen:
            _repeated_node(table.path, node, seen[node], (line, label))
        seen[node] = (line, label)
        if label:
            labels[node] = label
        else:
            unlabelled.append(line)
            unlabelled_ids.append(node)
    _note_missing_markers(table, labels)
    if unlabelled:
        log.warning(
            "%s: %d line(s) with an empty or missing label skipped, their nodes left "
            "unlabelled (first: line %d)",
            table.path,
            len(unlabelled),
            unlabelled[0],
        )
    return labels, unlabelled_ids


def _note_missing_markers(table: Table, labels: dict[str, str]) -> None:
    """Warn about classes named like a missing value (``NA``, ``nan``, ...): R and NumPy
    write those for a missing label, which a label file marks with an empty cell."""
    markers = sorted({v for v in labels.values() if v.lower() in MISSING_TARGET_CELLS})
    if markers:
        count = sum(v in markers for v in labels.values())
        log.warning(
            "%s: %d node(s) have the label %s, which is read as a class, not as missing; "
            "leave the cell empty for an unlabelled node",
            table.path,
            count,
            " or ".join(repr(m) for m in markers),
        )


def _repeated_node(path: Path, node: str, first: tuple[int, str], again: tuple[int, str]) -> None:
    """Raise for a node on two label lines, given as ``(line, label)`` ("" for none)."""
    (line, label), (other_line, other) = first, again
    if label and other and label != other:
        raise GraphInputError(
            f"{path}: conflicting labels for node {node!r}: {label!r} "
            f"(line {line}) and {other!r} (line {other_line})"
        )
    if label == other:
        said = f"same label {label!r}" if label else "no label on either"
    else:
        said = f"label {label or other!r} on line {line if label else other_line} only"
    raise GraphInputError(
        f"{path}: node {node!r} is repeated: line {line} and line {other_line} "
        f"({said}); give each node one label line"
    )


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


@gc_paused
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
            not a finite float32 number (naming the line and column).
    """
    return _read_node_table(path, id_col, text_col, feature_cols, delimiter, has_header)


def _read_node_table(
    path: PathLike,
    id_col: Column,
    text_col: Column | None,
    feature_cols: Sequence[Column] | None,
    delimiter: str | None,
    has_header: bool | None,
    check_width: bool = True,
    skip_cols: Sequence[int] = (),
) -> NodeTable:
    """:func:`read_node_features`; ``check_width=False`` when the file's width was
    checked already (a label file read for its text column); ``skip_cols`` are left out
    of the default feature columns (the label column, when the labels are in the file)."""
    feature_cols = ordered_names("feature_cols", feature_cols)
    named = [c for c in (id_col, text_col, *(feature_cols or ())) if isinstance(c, str)]
    if has_header is None and named:
        has_header = True
    id_cols = (id_col,) if isinstance(id_col, int) else (0,)
    table = read_table(path, delimiter, has_header, id_cols, None, is_float)
    id_at = column_index(id_col, table.header, table.path, "id")
    text_at = None if text_col is None else column_index(text_col, table.header, table.path, "text")
    value_at = _feature_columns(table, id_at, text_at, feature_cols, skip_cols)
    used = [id_at, *value_at] + ([] if text_at is None else [text_at])
    if check_width and table.delimiter == WHITESPACE:
        check_whitespace_width(table, used, "a text or value with spaces")
    elif check_width:
        check_header_width(table, used)
    if check_width and text_at is not None and feature_cols is None:
        _note_unused_columns(table, [id_at, text_at], skip_cols)
    ids = _unique_ids(table, id_at)
    texts = None
    if text_at is not None:
        texts = [field_at(fields, text_at, table.path, line, "text") for line, fields in table.rows]
    values = None
    if value_at:
        rows = [[_number(fields, c, table, line) for c in value_at] for line, fields in table.rows]
        values = torch.tensor(rows, dtype=torch.float32).reshape(len(ids), len(value_at))
    names = [table.header[c] if table.header else str(c) for c in value_at]
    return NodeTable(ids, values, texts, names, source=str(table.path))


def _note_unused_columns(table: Table, used: list[int], labels: Sequence[int] = ()) -> None:
    """Warn about the columns of a feature file that a text column leaves unread (the
    ``labels`` column of a label file that is also the feature file is read)."""
    width = _width(table)
    read = {c % width for c in (*used, *labels)} if width else set()
    unused = [column_name(table, c) for c in range(width) if c not in read]
    if unused:
        log.warning(
            "%s: only the text column %r becomes features; columns %s are not read (in "
            "Python, feature_cols=[...] reads numeric columns next to the text)",
            table.path,
            column_name(table, used[1]),
            unused,
        )


def _unique_ids(table: Table, id_at: int) -> list[str]:
    first_line: dict[str, int] = {}
    for line, fields in table.rows:
        node = node_id_at(fields, id_at, table.path, line)
        if node in first_line:
            raise GraphInputError(
                f"{table.path}, line {line}: node {node!r} repeated (first on line "
                f"{first_line[node]})"
            )
        first_line[node] = line
    return list(first_line)


def _feature_columns(
    table: Table,
    id_at: int,
    text_at: int | None,
    feature_cols: Sequence[Column] | None,
    skip_cols: Sequence[int] = (),
) -> list[int]:
    width = _width(table)
    skipped = sorted({c % width for c in skip_cols}) if width else []  # -1: the last
    if feature_cols is not None:
        chosen = [column_index(c, table.header, table.path, "feature") for c in feature_cols]
        for column in chosen:
            if width and column % width in skipped:
                raise GraphInputError(
                    f"{table.path}: feature column {column_name(table, column)!r} is the "
                    "label column, and a label is never an input; leave it out of "
                    "feature_cols"
                )
        return chosen
    if text_at is not None:
        return []
    if skipped:
        log.info(
            "%s: the label column %s is left out of the features (labels are never inputs)",
            table.path,
            ", ".join(repr(column_name(table, c)) for c in skipped),
        )
    return [c for c in range(width) if c != id_at and c not in skipped]


_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _number(fields: list[str], column: int, table: Table, line: int) -> float:
    text = field_at(fields, column, table.path, line, "feature")
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not abs(value) <= _FLOAT32_MAX:  # features are float32: 1e39 would become inf
        name = column_name(table, column)
        raise GraphInputError(
            f"{table.path}, line {line}: feature column {name!r} holds {text!r}, "
            "not a finite float32 number"
        )
    return value


# ----------------------------------------------------------------------------- graphs


@gc_paused
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
    delimiter: str | None = None,
    has_header: bool | None = None,
) -> Data:
    """Build a node-classification graph from an edge list and optional node files.

    The nodes are the ids of the edge list plus those of the label and feature
    files (added as isolated nodes, with a warning; label lines without a label
    included), numbered by
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
        label_col: label column of the label file (default: the column named
            ``label`` when the header has one, else as in :func:`read_labels`).
        feature_cols: numeric columns of the feature file (see
            :func:`read_node_features`). When the feature file is the label file,
            the default leaves its label column out: a label is never an input, and
            naming it here or as ``text_col`` raises :class:`GraphInputError`.
        text_dim: width of the text features.
        text_method: ``"hashing"`` or ``"tfidf"`` (see
            :func:`~graphattn.featurize.graph.text_features`).
        structural: add structural features; ``None`` adds them only when there are
            no other node features, so attention always has something to score.
        walk_length: random-walk steps of the structural features.
        delimiter: delimiter of all three files (default: sniffed per file; see
            :func:`read_edge_list`).
        has_header: whether all three files have a header (default: detected per
            file).

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
    layout = _Layout(delimiter, has_header)
    rows = _read_edge_rows(edges, delimiter, has_header)
    same_file = _same_file(features, labels)
    text_in_labels = text_col if features is None or same_file else None
    label_file = _label_map(labels, id_col, label_col, text_in_labels, layout)
    label_map = label_file.labels
    _check_labels_meet_edges(rows, label_map, labels)
    skip_cols = [label_file.column] if same_file else []
    if same_file or (features is None and label_file.has_header is not None):
        layout = _Layout(delimiter, label_file.has_header)  # the label read's header decision
    table = _node_table(features, labels, id_col, text_col, feature_cols, layout, skip_cols)
    if table is not None:
        _check_ids_meet_edges(rows, table.ids, table.source, "node ids", "its rows")
    node_ids = _all_node_ids(rows, [*label_map, *label_file.unlabelled], table)
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
    y, names = encode_labels([label_map.get(i) for i in node_ids], node_ids)
    data = Data(x=torch.cat(list(blocks.values()), dim=1), edge_index=edge_index, y=y)
    data.label_names = names
    data.node_ids = node_ids
    data.x_blocks = _block_bounds(blocks)
    data.graph_report = report
    return data


@dataclass
class _Layout:
    """How the files of :func:`load_node_graph` are laid out (``None``: detect)."""

    delimiter: str | None
    has_header: bool | None


def _label_map(
    labels: PathLike | Mapping[str, str] | None,
    id_col: Column | None,
    label_col: Column | None,
    text_col: Column | None,
    layout: _Layout,
) -> _LabelFile:
    if labels is None:
        return _LabelFile({}, [])
    if isinstance(labels, Mapping):
        _check_distinct_keys(labels)
        known = {str(k): str(v) for k, v in labels.items() if not is_missing_label(v)}
        missing = [str(k) for k, v in labels.items() if is_missing_label(v)]
        return _LabelFile(known, missing)
    return _read_labels(labels, id_col, label_col, layout.delimiter, layout.has_header, text_col)


def _check_distinct_keys(labels: Mapping) -> None:
    """Node ids are matched as text: keys ``1`` and ``"1"`` of a label dict are one node."""
    first: dict[str, object] = {}
    for key in labels:
        if str(key) in first:
            raise GraphInputError(
                f"the label dict has keys {first[str(key)]!r} and {key!r}, both node "
                f"{str(key)!r} (node ids are matched as text); give each node one key"
            )
        first[str(key)] = key


def _same_file(features: PathLike | None, labels: PathLike | Mapping | None) -> bool:
    """Whether the feature file is the label file."""
    if features is None or labels is None or isinstance(labels, Mapping):
        return False
    return Path(features).resolve() == Path(labels).resolve()


def _check_labels_meet_edges(
    rows: _EdgeRows, label_map: Mapping[str, str], labels: PathLike | Mapping
) -> None:
    """Raise when not one labelled node is in the edge list: the two files write the ids
    differently (``100`` and ``100.0``), and every labelled node would be isolated."""
    source = "the label dict" if isinstance(labels, Mapping) else str(labels)
    _check_ids_meet_edges(rows, list(label_map), source, "labelled node ids", "labels")


def _check_ids_meet_edges(
    rows: _EdgeRows, ids: Sequence[str], source: str, what: str, short: str
) -> None:
    """Raise when none of ``ids`` (read from ``source``) is a node of the edge list."""
    if not ids or not rows.src:
        return
    wanted = set(ids)
    if any(n in wanted for n in chain(rows.src, rows.dst)):
        return
    in_edges = set(rows.src) | set(rows.dst)
    raise GraphInputError(
        f"{source}: none of its {len(wanted)} {what} is a node of the edge list "
        f"{rows.path} (ids are matched as text: {short} have {list(ids)[:2]}, "
        f"the edge list {sorted(in_edges)[:2]}); write the ids the same way in both"
    )


def _node_table(
    features: PathLike | None,
    labels: PathLike | Mapping | None,
    id_col: Column | None,
    text_col: Column | None,
    feature_cols: Sequence[Column] | None,
    layout: _Layout,
    skip_cols: Sequence[int] = (),
) -> NodeTable | None:
    """The feature file, or the text column of the label file when there is none."""
    id_col = 0 if id_col is None else id_col
    if features is not None:
        return _read_node_table(
            features,
            id_col,
            text_col,
            feature_cols,
            layout.delimiter,
            layout.has_header,
            skip_cols=skip_cols,
        )
    if text_col is None:
        return None
    if labels is None or isinstance(labels, Mapping):
        raise GraphInputError(
            f"text_col={text_col!r} needs a feature file or a label file to read it from"
        )
    return _read_node_table(
        labels, id_col, text_col, [], layout.delimiter, layout.has_header, check_width=False
    )


def _all_node_ids(rows: _EdgeRows, labelled: Sequence[str], table: NodeTable | None) -> list:
    """The ids of the edge list, the label file (labelled or not) and the feature file."""
    ids = set(rows.src) | set(rows.dst) | set(labelled)
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
            feature_cols=[],  # the other columns are the id and the label
            id_col="id",
            label_col="page_type",
            text_dim=text_dim,
            structural=True,
            walk_length=walk_length,
            has_header=True,
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
