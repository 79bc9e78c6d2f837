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
from collections.abc import Iterator
from pathlib import Path

from graphattn.errors import GraphInputError, not_utf8_error

__all__ = ["CsvRows", "not_csv_error", "warn_multiline_rows"]

log = logging.getLogger(__name__)


def warn_multiline_rows(path: Path, count: int, start: int, end: int) -> None:
    """Log that ``count`` rows hold a line break in a quoted field, the first on lines
    ``start``-``end``."""
    log.warning(
        "%s: %d row(s) hold a line break inside a quoted field (first: the row on lines "
        "%d-%d); if a quote there is never closed, the lines after it were read into that "
        "one field",
        path,
        count,
        start,
        end,
    )


def not_csv_error(path: Path, line: int, err: csv.Error) -> GraphInputError:
    """A :class:`GraphInputError` for a ``csv`` parse error at ``line`` of ``path``."""
    return GraphInputError(
        f'{path}, line {line}: not valid CSV ({err}); an unclosed quote (") makes the '
        "reader run on to the end of the file"
    )


class CsvRows:
    """Iterate over the rows (lists of fields) of a CSV file; use as a context manager.

    Args:
        path: the file.
        comment: lines starting with this prefix are skipped.

    Attributes:
        line: the physical line (counted from 1) on which the last row read ends.
        multiline: rows read so far that hold a line break inside a quoted field.
    """

    def __init__(self, path: str | Path, comment: str | None = None) -> None:
        self.path = Path(path)
        self.comment = comment
        self.line = 0
        self.multiline = 0
        self._first_multiline: tuple[int, int] | None = None
        self._row_start: int | None = None  # the line the row being read started on
        self._handle = None

    def __enter__(self) -> CsvRows:
        self._handle = open(self.path, newline="", encoding="utf-8-sig")
        return self

    def __exit__(self, *exc_info) -> None:
        self._handle.close()
        if self._first_multiline is not None:
            warn_multiline_rows(self.path, self.multiline, *self._first_multiline)

    def _lines(self) -> Iterator[str]:
        """The lines fed to the csv reader: blank and comment lines are skipped where a
        row starts, never inside a quoted field."""
        for number, text in enumerate(self._handle, start=1):
            self.line = number
            if self._row_start is None:
                if not text.strip() or (self.comment and text.startswith(self.comment)):
                    continue
                self._row_start = number
            yield text

    def __iter__(self) -> Iterator[list[str]]:
        reader = csv.reader(self._lines())
        try:
            for fields in reader:
                start, end = self._row_start, self.line
                self._row_start = None
                if end > start:  # a quoted field held a line break
                    self.multiline += 1
                    self._first_multiline = self._first_multiline or (start, end)
                yield fields
        except UnicodeDecodeError as err:
            raise not_utf8_error(self.path, err) from err
        except csv.Error as err:
            raise not_csv_error(self.path, self.line, err) from err
