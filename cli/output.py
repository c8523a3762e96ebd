"""Rendering helpers of the command line: JSON, CSV and terminal tables of query results.

Evidence is data, never terminal control: every text that reaches a terminal goes through
`printable`, which escapes control characters (ESC and OSC sequences, CR, other C0 and C1
characters, and the Unicode line separators and bidirectional overrides) so that one value
can neither recolour, retitle or hyperlink the terminal nor break a line or row.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import orjson

import registry

if TYPE_CHECKING:
    from rich.console import Console


def printable(text: object) -> str:
    r"""Return `text` with every control character as a visible escape (ESC becomes `\x1b`)."""
    return registry.inert(text)


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def to_json(value: Any, *, sort_keys: bool = True) -> str:
    """Return indented JSON text for machine output (keys sorted unless `sort_keys` is off).

    Control characters in strings are written as JSON escapes: JSON is inert on a terminal.
    """
    options = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS
    if sort_keys:
        options |= orjson.OPT_SORT_KEYS
    return orjson.dumps(value, default=_default, option=options).decode()


def unique_columns(columns: Sequence[str]) -> list[str]:
    """Return column names made unique (`a`, `a_2`, ...) so no value is lost in an object."""
    seen = set(columns)
    used: set[str] = set()
    out = []
    for name in columns:
        candidate, n = name, 1
        while candidate in used or (candidate != name and candidate in seen):
            n += 1
            candidate = f"{name}_{n}"
        used.add(candidate)
        out.append(candidate)
    return out


def rows_as_dicts(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """Return query rows as column -> value objects, keys in the SELECT's column order."""
    names = unique_columns(columns)
    return [dict(zip(names, row, strict=True)) for row in rows]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict | list | tuple):
        return orjson.dumps(value, default=_default, option=orjson.OPT_NON_STR_KEYS).decode()
    return str(value)


def to_csv(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], *, for_terminal: bool = False
) -> str:
    """Return CSV text with a header row; nested values are written as JSON.

    A field holding a line break is quoted, so every record stays one CSV record. The csv
    module quotes LF (the line terminator) but not a bare CR, so a row holding one is written
    with every field quoted. CSV is data and keeps every character, unless it is meant for a
    terminal (`for_terminal`): then control characters are escaped as in tables.
    """
    show = printable if for_terminal else str
    buffer = io.StringIO()
    minimal = csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    quoted = csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_ALL)
    header = [show(c) for c in columns]
    for row in [header, *([show(_cell(v)) for v in row] for row in rows)]:
        writer = quoted if any("\r" in str(cell) for cell in row) else minimal
        writer.writerow(row)
    return buffer.getvalue()


def print_table(console: Console, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print rows as a terminal table; cells are evidence, printed verbatim but inert."""
    from rich.table import Table
    from rich.text import Text

    table = Table(show_lines=False)
    for column in columns:
        table.add_column(Text(printable(column)))
    for row in rows:  # Text() never interprets markup; printable() escapes control characters
        table.add_row(*(Text(printable(_cell(v)) if v is not None else "NULL") for v in row))
    console.print(table)
