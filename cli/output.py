"""Rendering helpers of the command line: JSON, CSV and terminal tables of query results."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

import orjson
from rich.console import Console
from rich.table import Table
from rich.text import Text


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def to_json(value: Any) -> str:
    """Return stable, indented JSON text (sorted keys) for machine output."""
    options = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
    return orjson.dumps(value, default=_default, option=options).decode()


def rows_as_dicts(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """Return query rows as a list of column -> value objects."""
    return [dict(zip(columns, row, strict=True)) for row in rows]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict | list | tuple):
        return orjson.dumps(value, default=_default, option=orjson.OPT_NON_STR_KEYS).decode()
    return str(value)


def to_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Return CSV text with a header row; nested values are written as JSON."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([_cell(v) for v in row] for row in rows)
    return buffer.getvalue()


def print_table(console: Console, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print rows as a terminal table."""
    table = Table(show_lines=False)
    for column in columns:
        table.add_column(Text(column))
    for row in rows:  # cells are evidence, never markup: Text() prints them verbatim
        table.add_row(*(Text(_cell(v) if v is not None else "NULL") for v in row))
    console.print(table)
