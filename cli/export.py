"""`registry export`: the SQL views as a DuckDB database file or a directory of Parquet files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

import registry

from .options import DEFAULT_ROOT, AsOfOption, IncludeRetractedOption, RootOption
from .output import printable


def export(
    ctx: typer.Context,
    duckdb_file: Annotated[
        Path | None,
        typer.Option("--duckdb", metavar="FILE", help="Write a new DuckDB database file."),
    ] = None,
    parquet_dir: Annotated[
        Path | None,
        typer.Option("--parquet", metavar="DIR", help="Write a new directory of Parquet files."),
    ] = None,
    as_of: AsOfOption = None,
    include_retracted: IncludeRetractedOption = False,
    root: RootOption = DEFAULT_ROOT,
) -> None:
    """Materialise every SQL view for notebooks and BI tools; never overwrites a target."""
    if (duckdb_file is None) == (parquet_dir is None):
        ctx.fail("give exactly one of --duckdb FILE or --parquet DIR")
    store = registry.open_store(root)
    if duckdb_file is not None:
        result = registry.export_duckdb(
            store, duckdb_file, as_of=as_of, include_retracted=include_retracted
        )
    else:
        assert parquet_dir is not None
        result = registry.export_parquet(
            store, parquet_dir, as_of=as_of, include_retracted=include_retracted
        )
    width = max(len(view) for view in result.rows)
    for view, count in result.rows.items():
        typer.echo(f"{view:<{width}}  {count} {'row' if count == 1 else 'rows'}")
    typer.echo(f"wrote {printable(result.target)} ({result.format}, {len(result.rows)} views)")
