"""Delimited text tables: the parsing under the node-graph readers of
:mod:`graphattn.datasets.social`.

:func:`read_table` reads a file's data lines as ``(line number, fields)`` rows,
sniffs the delimiter and decides whether the first line is a header; the helpers
below it find columns and check a table's width, with errors that name the file and
line. The rules (comments, delimiters, quoting, header detection) are documented in
the :mod:`graphattn.datasets.social` module docstring, where users read them.
"""

from __future__ import annotations

import csv
import functools
import gc
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from graphattn.datasets.csv_file import RecordLines, not_csv_error
from graphattn.errors import GraphInputError, not_utf8_error

__all__ = [
    "WHITESPACE",
    "Column",
    "Table",
    "check_header_width",
    "check_whitespace_width",
    "column_index",
    "column_name",
    "field_at",
    "gc_paused",
    "is_float",
    "is_int",
    "node_id_at",
    "read_table",
]

log = logging.getLogger(__name__)

PathLike = str | Path
Column = int | str

KNOWN_COLUMNS = frozenset(
    ("id", "node", "node_id", "nodeid", "name", "src", "source", "dst", "target",
     "destination", "from", "to", "id_1", "id_2", "id1", "id2", "node1", "node2",
     "node_1", "node_2", "source_id", "target_id")
)  # fmt: skip
_CANONICAL_INT = re.compile(r"(0|-?[1-9][0-9]*)\Z")
_DIGITS = re.compile(r"[0-9]+")
_INTEGER = re.compile(r"-?[0-9]+\Z")


def gc_paused(function: Callable) -> Callable:
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


WHITESPACE = "whitespace"


@dataclass
class Table:
    """The data rows of a text file: ``(line number, fields)`` pairs and its header."""

    path: Path
    rows: list[tuple[int, list[str]]]
    header: list[str] | None
    delimiter: str


def _open_rows(
    path: Path, delimiter: str | None
) -> tuple[list[tuple[int, list[str]]], str, list[int]]:
    """``(line number, fields)`` of the data lines of ``path`` (fields stripped), the
    delimiter used, and the numbers of the comment lines skipped."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise not_utf8_error(path, err) from err
    # Lines end at \n, \r\n or \r only (read_text's universal newlines turn each into
    # \n): str.splitlines() also breaks at U+2028, form feeds and other characters that
    # scraped page names hold.
    lines = text.removesuffix("\n").split("\n")
    if delimiter is None:
        delimiter = _sniff_delimiter(lines)
        if delimiter == WHITESPACE:
            _note_mixed_delimiters(path, lines)
    if delimiter in (WHITESPACE, " "):
        rows = [(n, ln.split()) for n, ln in enumerate(lines, 1) if _is_data(ln)]
        return rows, WHITESPACE, _comment_lines(lines)
    rows, comments = _csv_rows(path, lines, delimiter)
    if any(c in text for c in " \t"):
        rows = [(n, [f.strip() for f in fields]) for n, fields in rows]
    return _drop_empty_rows(path, rows), delimiter, comments


def _comment_lines(lines: list[str]) -> list[int]:
    return [n for n, line in enumerate(lines, 1) if line.strip() and not _is_data(line)]


def _note_comments(path: Path, comments: list[int], rows: list[tuple[int, list[str]]]) -> None:
    """Count the comment lines skipped: a warning for those after the first data row
    (``rows``: the header taken out), where an id that starts with ``#`` or ``%``, a
    hashtag say, would be lost unseen; else at info level (the header comments of SNAP
    and KONECT files)."""
    if not comments:
        return
    among = [n for n in comments if n > rows[0][0]] if rows else []
    if among:
        log.warning(
            "%s: %d line(s) after the first data line start with # or %% and were skipped "
            "as comments (first: line %d); in a comma- or tab-separated file, quote an id "
            'that starts with # or %% ("#tag") to read it as data',
            path,
            len(among),
            among[0],
        )
    if len(among) < len(comments):
        log.info("%s: %d comment line(s) skipped", path, len(comments) - len(among))


def _sniff_delimiter(lines: list[str]) -> str:
    """Tab if every data line has one, else comma if every one has one, else
    whitespace; lines holding a single field are not looked at."""
    split = [ln for ln in lines if _is_data(ln) and _splits(ln)]
    for delimiter in ("\t", ","):
        if split and all(delimiter in ln for ln in split):
            return delimiter
    return WHITESPACE


def _splits(line: str) -> bool:
    """Whether a data line holds more than one field under some delimiter."""
    return "," in line or len(line.split(None, 1)) > 1


def _note_mixed_delimiters(path: Path, lines: list[str]) -> None:
    """Warn when some data lines are tab-separated with spaces inside their fields and
    others hold no tab: the file was read as whitespace-separated (not every line has
    a tab), so those fields, ids with spaces say, were split apart."""
    data = [(n, ln) for n, ln in enumerate(lines, 1) if _is_data(ln)]
    spaced = [n for n, ln in data if "\t" in ln and any(" " in f.strip() for f in ln.split("\t"))]
    if not spaced:
        return
    first = next(n for n, ln in data if "\t" not in ln and _splits(ln))
    log.warning(
        "%s: %d tab-separated line(s) hold spaces inside fields (first: line %d), but "
        "line %d has no tab: read as whitespace-separated, so those fields were split at "
        "their spaces; pass delimiter='\\t' (CLI --delimiter tab) to split at tabs only",
        path,
        len(spaced),
        spaced[0],
        first,
    )


def _csv_rows(
    path: Path, lines: list[str], delimiter: str
) -> tuple[list[tuple[int, list[str]]], list[int]]:
    """Parse the data lines as CSV, numbering each record by the line it starts on;
    also the numbers of the comment lines skipped."""
    if not any('"' in line for line in lines):  # no quoted field: a record is a line
        numbers = [n for n, line in enumerate(lines, 1) if _is_data(line)]
        numbered = []
        try:
            for fields in csv.reader([lines[n - 1] for n in numbers], delimiter=delimiter):
                numbered.append((numbers[len(numbered)], fields))
        except csv.Error as err:  # a field over csv.field_size_limit(), say
            raise not_csv_error(path, numbers[len(numbered)], err, quoted=False) from err
        return numbered, _comment_lines(lines)
    feed = RecordLines(lines, _is_data)
    numbered = []
    try:
        for fields in csv.reader(feed, delimiter=delimiter):
            start, _ = feed.row_read()
            numbered.append((start, fields))
    except csv.Error as err:
        raise not_csv_error(path, feed.line, err) from err
    feed.warn_multiline(path)
    return numbered, feed.skipped


def _drop_empty_rows(path: Path, rows: list[tuple[int, list[str]]]) -> list[tuple[int, list[str]]]:
    kept = [(n, fields) for n, fields in rows if any(fields)]
    if len(kept) < len(rows):
        first = next(n for n, fields in rows if not any(fields))
        log.warning(
            "%s: %d line(s) with only empty fields skipped (first: line %d)",
            path,
            len(rows) - len(kept),
            first,
        )
    return kept


def _is_data(line: str) -> bool:
    stripped = line.lstrip()
    return bool(stripped) and stripped[0] not in "#%"


def read_table(
    path: PathLike,
    delimiter: str | None,
    has_header: bool | None,
    id_cols: Sequence[int],
    checked: Sequence[int] | None,
    parses: Callable[[str], bool],
    label_col: int | Literal["any"] | None = None,
) -> Table:
    """Read the data rows of ``path``; decide on a header from the node id columns
    ``id_cols``, the columns ``checked`` (``None``: every column but the ids) and, for
    a label file, its label column ``label_col`` (``"any"``: the label column is not
    chosen, so any column named ``label`` would be it)."""
    path = Path(path)
    rows, delimiter, comments = _open_rows(path, delimiter)
    if checked is None:
        width = len(rows[0][1]) if rows else 0
        checked = tuple(c for c in range(width) if c not in id_cols)
    detected = has_header is None
    if detected:
        has_header = _looks_like_header(path, rows, id_cols, checked, parses, label_col)
    header = None
    if has_header and rows:
        (line, header), rows = rows[0], rows[1:]
        if detected:
            log.warning(
                "%s: line %d read as a header, not data: %s (pass has_header=False, "
                "CLI --header no, if it is data)",
                path,
                line,
                header,
            )
        elif _ids_recur(_pick(header, id_cols), rows, id_cols):
            log.warning(
                "%s: line %d read as a header, as asked, but its ids %s are node ids (or "
                "shaped like them) of other lines: if it is data, it is lost (CLI --header "
                "auto detects the header of each file; in Python, has_header=None)",
                path,
                line,
                header,
            )
        else:
            log.info("%s: line %d read as a header: %s", path, line, header)
    _note_comments(path, comments, rows)
    return Table(path, rows, header, delimiter)


def _looks_like_header(
    path: Path,
    rows: list[tuple[int, list[str]]],
    id_cols: Sequence[int],
    checked: Sequence[int],
    parses: Callable[[str], bool],
    label_col: int | Literal["any"] | None,
) -> bool:
    if not rows or not _header_like(rows, id_cols, checked, parses, label_col):
        if rows and isinstance(label_col, int) and _names_a_label_column(rows, id_cols, "any"):
            why = f"names a column 'label' other than the label column {label_col}"
            _note_read_as_data(path, rows[0], why)
        return False
    ids = _pick(rows[0][1], id_cols)
    if not _ids_recur(ids, rows[1:], id_cols):
        return True
    why = "looks like column names but matches the node ids of other lines"
    _note_read_as_data(path, rows[0], why)
    return False


def _note_read_as_data(path: Path, row: tuple[int, list[str]], why: str) -> None:
    log.warning(
        "%s: line %d %s %s: read as data (pass has_header=True, CLI --header yes, if it is "
        "a header)",
        path,
        row[0],
        row[1],
        why,
    )


def _header_like(
    rows: list[tuple[int, list[str]]],
    id_cols: Sequence[int],
    checked: Sequence[int],
    parses: Callable[[str], bool],
    label_col: int | Literal["any"] | None,
) -> bool:
    """Column names in the id fields or the checked fields, ``label`` in the label
    column where no other line holds it, or checked fields that fail to parse where the
    second line's parse."""
    first_ids = _pick(rows[0][1], id_cols)
    first = _pick(rows[0][1], checked)
    for names in (first_ids, first):
        if names and all(f.lower() in KNOWN_COLUMNS for f in names):
            return True
    if label_col is not None and _names_a_label_column(rows, id_cols, label_col):
        return True
    if len(rows) < 2 or all(parses(f) for f in first):
        return False
    second = _pick(rows[1][1], checked)
    return len(second) == len(first) and all(parses(f) for f in second)


def _names_a_label_column(
    rows: list[tuple[int, list[str]]], id_cols: Sequence[int], label_col: int | Literal["any"]
) -> bool:
    """Whether the first line's label field (with ``"any"``, a field outside the id
    columns) is ``label`` (any case) where no other line has that value: ``user,label``
    over string ids."""
    width = len(rows[0][1])
    ids = {c % width for c in id_cols if -width <= c < width}
    if label_col == "any":
        columns = [c for c in range(width) if c not in ids]
    else:
        columns = [label_col % width] if -width <= label_col < width else []
    for c in columns:
        if rows[0][1][c].lower() != "label":
            continue
        if not any(c < len(fields) and fields[c].lower() == "label" for _, fields in rows[1:]):
            return True
    return False


def _ids_recur(ids: list[str], rows: list[tuple[int, list[str]]], id_cols: Sequence[int]) -> bool:
    """Whether one of ``ids`` is a node id of ``rows``, or shaped like one: the same
    text once digit runs are blanked (``node1`` and ``node7``; ``007``, ``-1`` and ``8``:
    a first line that is data with a bad field is not taken for column names)."""
    others = {fields[c] for _, fields in rows for c in id_cols if c < len(fields)}
    if any(i in others for i in ids):
        return True
    shapes = {_shape(i) for i in ids if _DIGITS.search(i)}
    return bool(shapes) and any(_shape(o) in shapes for o in others)


def _shape(text: str) -> str:
    """``text`` with its digit runs blanked; every integer (``8``, ``007``, ``-1``) is one."""
    return "0" if _INTEGER.match(text) else _DIGITS.sub("0", text)


def _pick(fields: list[str], columns: Sequence[int]) -> list[str]:
    try:
        return [fields[c] for c in columns]
    except IndexError:
        return []


def is_int(text: str) -> bool:
    """Whether ``text`` is a canonical decimal integer (``"7"``, ``"-3"``; not ``"07"``
    or ``"-0"``, which would number like ``"7"`` and ``"0"``)."""
    return bool(_CANONICAL_INT.match(text))


def is_float(text: str) -> bool:
    """Whether ``float`` parses ``text``."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def column_index(column: Column, header: list[str] | None, path: Path, role: str) -> int:
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
    if header.count(column) > 1:
        places = [i for i, name in enumerate(header) if name == column]
        raise GraphInputError(
            f"{path}: {role} column {column!r} appears more than once in the header "
            f"(columns {places}): {header}; rename one, or pass a column index"
        )
    return header.index(column)


def column_name(table: Table, column: int) -> Column:
    """The header name of ``column`` when there is one, else its index."""
    if table.header and -len(table.header) <= column < len(table.header):
        return table.header[column]
    return column


def field_at(fields: list[str], column: int, path: Path, line: int, role: str) -> str:
    """``fields[column]``; a row without it is an error naming the file, line and role."""
    try:
        value = fields[column]
    except IndexError:
        raise GraphInputError(
            f"{path}, line {line}: malformed line, no {role} column {column} "
            f"in {len(fields)} field(s): {fields}"
        ) from None
    return value


def node_id_at(fields: list[str], column: int, path: Path, line: int) -> str:
    """The node id in ``fields[column]``; a missing or empty one is an error naming the
    file and line (an empty id would become a node named ``''``)."""
    node = field_at(fields, column, path, line, "id")
    if not node:
        raise GraphInputError(f"{path}, line {line}: empty node id in column {column}: {fields}")
    return node


def check_whitespace_width(table: Table, used: Sequence[int], what: str) -> None:
    """In a whitespace-separated file, no line may have more fields than the header,
    or than the ``used`` columns need: the extra fields would be lost."""
    if any(c < 0 for c in used):
        return
    width = len(table.header) if table.header else max(used) + 1
    for line, fields in table.rows:
        if len(fields) > width:
            raise GraphInputError(
                f"{table.path}, line {line}: {len(fields)} whitespace-separated fields "
                f"where {width} are expected: {fields}; {what} is ambiguous here: pass "
                "delimiter='\\t' or ',' (CLI --delimiter tab|comma) if the file uses one, "
                "or select the columns"
            )


def check_header_width(table: Table, used: Sequence[int] = ()) -> None:
    """In a delimited file, no line may have more fields than the header, or, without
    one, than the first line and the ``used`` columns: the extra fields (an unquoted
    delimiter inside a text, say) would shift or be lost."""
    if table.header is not None:
        width, source = len(table.header), "the header has"
    elif table.rows and all(c >= 0 for c in used):
        first_line, first = table.rows[0]
        width = max(len(first), max(used, default=-1) + 1)
        source = f"line {first_line} has" if width == len(first) else "the columns read need"
    else:
        return
    for line, fields in table.rows:
        if len(fields) > width:
            raise GraphInputError(
                f"{table.path}, line {line}: {len(fields)} fields where {source} {width}: "
                f"{fields}; quote fields that hold the delimiter"
            )
