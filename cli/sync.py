"""`registry sync SRC DST`: copy a registry between roots (directory <-> bucket)."""

from __future__ import annotations

from typing import Annotated

import typer

import registry

from .options import SummaryFormat
from .output import to_json


def sync(
    source: Annotated[str, typer.Argument(metavar="SRC", help="Root to copy from.")],
    destination: Annotated[
        str, typer.Argument(metavar="DST", help="Root to copy to (created if absent).")
    ],
    output: Annotated[
        SummaryFormat, typer.Option("--format", help="Output format.")
    ] = SummaryFormat.table,
) -> None:
    """Copy every commit SRC has and DST lacks, with the objects it names, byte for byte.

    Roots are directories or s3://bucket/prefix. Run it again to resume; a DST with a
    history of its own is refused, naming the first commit that differs.
    """
    result = registry.sync(
        registry.open_store(source), registry.open_store(destination, create=True)
    )
    if output is SummaryFormat.json:
        typer.echo(
            to_json(
                {
                    "commits_copied": result.commits_copied,
                    "objects_copied": result.objects_copied,
                    "objects_present": result.objects_present,
                    "head_seq": result.head_seq,
                }
            )
        )
        return
    typer.echo(
        f"copied {result.commits_copied} commits and {result.objects_copied} objects "
        f"({result.objects_present} already there); {destination} is at commit "
        f"{result.head_seq}"
    )
