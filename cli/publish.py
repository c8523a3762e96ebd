"""`registry publish iceberg`: register the live segments in an Apache Iceberg table."""

from __future__ import annotations

from typing import Annotated

import typer

import registry

from .options import DEFAULT_ROOT, RootOption, SummaryFormat
from .output import printable, to_json

publish_app = typer.Typer(
    help="Publish the evidence for other engines (Iceberg: Spark, Trino, DuckDB).",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@publish_app.command("iceberg")
def iceberg(
    catalog: Annotated[
        str,
        typer.Option(
            "--catalog",
            metavar="URI",
            help="sqlite:///PATH/catalog.db, another SQLAlchemy URL, http(s)://REST-URI, "
            "or the name of a catalog in ~/.pyiceberg.yaml.",
        ),
    ],
    table: Annotated[
        str,
        typer.Option(
            "--table",
            metavar="NS.TABLE",
            help="Table to publish to (created with its namespace when missing); retractions "
            "go to NS.TABLE_retractions.",
        ),
    ],
    warehouse: Annotated[
        str | None,
        typer.Option(
            "--warehouse",
            metavar="DIR|URI",
            help="Where new tables' metadata goes (SQLite default: warehouse/ beside the file).",
        ),
    ] = None,
    root: RootOption = DEFAULT_ROOT,
    output: Annotated[
        SummaryFormat, typer.Option("--format", help="Output format.")
    ] = SummaryFormat.table,
) -> None:
    """Register the ledger head's live segments in an Iceberg table: one snapshot per head.

    The Parquet segments are referenced where they are, with no copy: file:// paths of a
    directory root, the objects' own s3:// URLs of a bucket root (readers pass the same
    S3 settings, see the README). The snapshot summary carries registry.ledger.seq and
    registry.ledger.head; publishing again at the same head adds nothing. Needs
    pip install 'agent-evidence-registry[iceberg]'.
    """
    from registry.storage.iceberg import publish_iceberg

    store = registry.open_store(root)
    result = publish_iceberg(store, catalog, table, warehouse)
    if output is SummaryFormat.json:
        summary = {
            "table": result.table,
            "retractions_table": result.retractions_table,
            "published": result.published,
            "commit_seq": result.seq,
            "commit": result.head,
            "previous_commit_seq": result.previous_seq,
            "snapshot_id": result.snapshot_id,
            "operation": result.operation,
            "added": result.added,
            "removed": result.removed,
            "segments": result.segments,
            "rows": result.rows,
            "retractions_added": result.retractions_added,
            "retractions": result.retractions,
            "metadata_location": result.metadata_location,
        }
        typer.echo(to_json(summary, sort_keys=False))
        return
    if not result.published:
        typer.echo(
            f"{printable(result.table)} already at commit {result.seq}: nothing published "
            f"(snapshot {result.snapshot_id}, {result.segments} segments, {result.rows} rows)"
        )
        return
    since = "" if result.previous_seq is None else f" (was at commit {result.previous_seq})"
    typer.echo(
        f"published commit {result.seq} to {printable(result.table)}{since}: snapshot "
        f"{result.snapshot_id} ({result.operation}), +{len(result.added)} -{len(result.removed)} "
        f"segments, {result.segments} segments, {result.rows} rows; "
        f"{result.retractions} retractions (+{result.retractions_added}) in "
        f"{printable(result.retractions_table)}"
    )
