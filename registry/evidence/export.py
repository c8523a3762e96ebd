"""The registry views materialised for notebooks and BI tools: a DuckDB file or Parquet files.

Every view `registry sql` offers is read through the same confined connection (so the same
evidence rule, `as_of` and retraction handling apply) and streamed into one table per view of
a DuckDB database file, together with the SQL macros, or into one Parquet file per view. The
target is written under a temporary name beside it and moved into place only when complete, so
a failed export leaves nothing behind; an existing target is never overwritten.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from registry.errors import QueryError, RegistryError, storage_error
from registry.evidence.layer_views import LAYER_VIEWS
from registry.evidence.query import connect, fetch, open_database
from registry.storage.store import Store

if TYPE_CHECKING:
    import duckdb

EXPORT_VIEWS = (
    "attempts",
    "commits",
    "cohorts",
    "systems",
    "samples",
    "lineage",
    "retractions",
    *LAYER_VIEWS,
)
"""Every view of `registry sql`, in the order they are exported."""

_DATABASE = "export.duckdb"
JSON_COLUMNS = {name: "document" for name in LAYER_VIEWS}
"""Views whose column holds JSON (kept as DuckDB's JSON type in a database export)."""


class ExportError(RegistryError):
    """An export target cannot be used (it exists, or its directory cannot be written)."""


@dataclass(frozen=True)
class ExportResult:
    """Where the views went and how many rows each one holds."""

    target: Path
    format: str
    rows: dict[str, int]


def export_duckdb(
    store: Store,
    target: Path,
    *,
    as_of: str | int | None = None,
    include_retracted: bool = False,
) -> ExportResult:
    """Write every view as a table of a new DuckDB database file, with the SQL macros.

    Raises:
        ExportError: `target` exists, or its directory does not.
        AsOfError: `as_of` names no commit of this ledger.
    """
    _check_target(target)
    with _source(store, as_of, include_retracted) as source:
        return _publish(target, "duckdb", lambda tmp: _write_duckdb(source, tmp), _link_file)


def export_parquet(
    store: Store,
    target: Path,
    *,
    as_of: str | int | None = None,
    include_retracted: bool = False,
) -> ExportResult:
    """Write every view as `<view>.parquet` in a new directory `target`.

    Raises:
        ExportError: `target` exists, or its parent directory does not.
        AsOfError: `as_of` names no commit of this ledger.
    """
    _check_target(target)
    with _source(store, as_of, include_retracted) as source:
        return _publish(target, "parquet", lambda tmp: _write_parquet(source, tmp), _move_dir)


@contextlib.contextmanager
def _source(
    store: Store, as_of: str | int | None, include_retracted: bool
) -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect(store, as_of=as_of, include_retracted=include_retracted, layer_views=LAYER_VIEWS)
    try:
        yield con
    finally:
        con.close()


def _check_target(target: Path) -> None:
    if target.exists() or target.is_symlink():
        raise ExportError(f"{target}: already exists; export never overwrites, name a new target")
    if not target.parent.is_dir():
        raise ExportError(f"{target}: directory {target.parent} does not exist")


def _publish(
    target: Path,
    kind: str,
    write: Callable[[Path], dict[str, int]],
    place: Callable[[Path, Path], None],
) -> ExportResult:
    work = target.parent / f".{target.name}.{uuid.uuid4().hex}.tmp"
    try:
        work.mkdir()
        rows = write(work)
        place(work, target)
    except OSError as exc:
        raise storage_error(exc, target) from None
    except QueryError as exc:
        raise ExportError(f"{target}: cannot export: {exc}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return ExportResult(target, kind, rows)


def _write_duckdb(source: duckdb.DuckDBPyConnection, work: Path) -> dict[str, int]:
    out = open_database(str(work / _DATABASE))
    try:
        rows = {}
        for view in EXPORT_VIEWS:
            out.register("_view", _reader(source, view))
            json_column = JSON_COLUMNS.get(view)
            select = f"* REPLACE ({json_column}::JSON AS {json_column})" if json_column else "*"
            fetch(out, f"CREATE TABLE {view} AS SELECT {select} FROM _view")
            out.unregister("_view")
            rows[view] = _count(out, view)
        fetch(out, "CHECKPOINT")
        return rows
    finally:
        out.close()


def _write_parquet(source: duckdb.DuckDBPyConnection, path: Path) -> dict[str, int]:
    out = open_database()
    try:
        rows = {}
        for view in EXPORT_VIEWS:
            out.register("_view", _reader(source, view))
            file = _sql_text(str(path / f"{view}.parquet"))
            fetch(out, f"COPY (SELECT * FROM _view) TO {file} (FORMAT parquet)")
            out.unregister("_view")
            rows[view] = _count(out, f"read_parquet({file})")
        return rows
    finally:
        out.close()


def _reader(source: duckdb.DuckDBPyConnection, view: str) -> Any:
    """Stream a view's rows as Arrow record batches (no copy of the whole view in memory)."""
    relation = source.sql(f"SELECT * FROM {view}")
    stream = getattr(relation, "to_arrow_reader", None) or relation.fetch_arrow_reader
    return stream()


def _count(con: duckdb.DuckDBPyConnection, relation: str) -> int:
    return int(fetch(con, f"SELECT count(*) FROM {relation}").rows[0][0])


def _sql_text(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _link_file(work: Path, target: Path) -> None:
    """Give the finished file its name; a link never replaces a name that appeared meanwhile."""
    tmp = work / _DATABASE
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise ExportError(f"{target}: created while exporting; nothing was written") from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV):
            raise
        _move_dir(tmp, target)  # a file system without hard links


def _move_dir(tmp: Path, target: Path) -> None:
    if target.exists() or target.is_symlink():
        raise ExportError(f"{target}: created while exporting; nothing was written")
    os.rename(tmp, target)
