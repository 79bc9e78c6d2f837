"""The rows of a CSV file of molecules, read with the standard ``csv`` module plus the
checks it leaves to its caller.

Used by :class:`~graphattn.datasets.MoleculeCSV` and by ``graphattn predict`` and
``evaluate``, so that all three read a file the same way:

- UTF-8 with or without a byte-order mark; anything else is an error naming the line;
- blank lines, and lines of only spaces or tabs, are not rows;
- a quoted field may hold a line break (that is valid CSV), but a row holding one is
  reported in a warning: a quote left open swallows the lines after it into one field,
  and those rows would otherwise vanish without a word;
- a parse error of the ``csv`` module (such as a field over its 131,072-character
  limit, which an unclosed quote also causes) is a :class:`GraphInputError` naming the
  file and line.
"""

from __future__ import annotations

import csv
import logging
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from graphattn.errors import GraphInputError, not_utf8_error

__all__ = ["MISSING_TARGET_CELLS", "CsvRows", "RecordLines", "not_csv_error"]

log = logging.getLogger(__name__)


# Cells that mean "no value" (any case): empty, and the markers pandas reads as missing
# by default that a number never spells, such as R's NA and a spreadsheet's #N/A.
MISSING_TARGET_CELLS = frozenset({"", "nan", "na", "n/a", "#n/a", "<na>", "null", "none"})


def not_csv_error(path: Path, line: int, err: csv.Error, quoted: bool = True) -> GraphInputError:
    """A :class:`GraphInputError` for a ``csv`` parse error at ``line`` of ``path``;
    ``quoted``: whether the file holds a quote, so the hint about one applies."""
    hint = '; an unclosed quote (") makes the reader run on to the end of the file'
    return GraphInputError(f"{path}, line {line}: not valid CSV ({err}){hint if quoted else ''}")


class RecordLines:
    """The lines fed to ``csv.reader``, numbered from 1. Lines that ``is_data`` rejects
    (blank, comment) are skipped where a row starts, never inside a quoted field.

    Call :meth:`row_read` after each row the reader returns: it gives the row's first
    and last line, and counts the rows that span several lines (a quoted line break),
    which :meth:`warn_multiline` reports.
    """

    def __init__(self, lines: Iterable[str], is_data: Callable[[str], bool]) -> None:
        self._numbered = enumerate(lines, 1)
        self._is_data = is_data
        self.at_row_start = True
        self.start_line = self.line = 0
        self.multiline = 0
        self.first_multiline: tuple[int, int] | None = None
        self.skipped: list[int] = []  # numbers of the non-blank lines skipped (comments)

    def __iter__(self) -> RecordLines:
        return self

    def __next__(self) -> str:
        for number, line in self._numbered:
            self.line = number
            if not self.at_row_start:
                return line
            if self._is_data(line):
                self.at_row_start, self.start_line = False, number
                return line
            if line.strip():
                self.skipped.append(number)
        raise StopIteration

    def row_read(self) -> tuple[int, int]:
        """``(first line, last line)`` of the row just read; the next line starts a row."""
        span = (self.start_line, self.line)
        self.at_row_start = True
        if span[1] > span[0]:
            self.multiline += 1
            self.first_multiline = self.first_multiline or span
        return span

    def warn_multiline(self, path: Path) -> None:
        """Log the rows that held a line break inside a quoted field, if any."""
        if self.first_multiline is None:
            return
        log.warning(
            "%s: %d row(s) hold a line break inside a quoted field (first: the row on "
            "lines %d-%d); if a quote there is never closed, the lines after it were read "
            "into that one field",
            path,
            self.multiline,
            *self.first_multiline,
        )


class CsvRows:
    """Iterate over the rows (lists of fields) of a CSV file; use as a context manager.

    Args:
        path: the file.
        comment: lines starting with this prefix are skipped where a row starts.
    """

    def __init__(self, path: str | Path, comment: str | None = None) -> None:
        self.path = Path(path)
        self.comment = comment
        self._handle = None
        self._lines: RecordLines | None = None

    def _is_data(self, text: str) -> bool:
        return bool(text.strip()) and not (self.comment and text.startswith(self.comment))

    def __enter__(self) -> CsvRows:
        self._handle = open(self.path, newline="", encoding="utf-8-sig")
        self._lines = RecordLines(self._handle, self._is_data)
        return self

    def __exit__(self, *exc_info) -> None:
        self._handle.close()
        self._lines.warn_multiline(self.path)

    def __iter__(self) -> Iterator[list[str]]:
        try:
            for fields in csv.reader(self._lines):
                self._lines.row_read()
                yield fields
        except UnicodeDecodeError as err:
            raise not_utf8_error(self.path, err) from err
        except csv.Error as err:
            raise not_csv_error(self.path, self._lines.line, err) from err
