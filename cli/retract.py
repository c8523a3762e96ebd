"""`registry retract`: withdraw attempts from every view with a reason; the bytes stay."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

import registry

from .options import DEFAULT_ROOT, RootOption, SummaryFormat
from .output import to_json


def retract(
    ctx: typer.Context,
    reason: Annotated[
        str, typer.Option("--reason", help="Why the attempts are withdrawn (recorded).")
    ],
    attempts_file: Annotated[
        Path | None,
        typer.Option(
            "--attempts",
            help="File of attempt ids: one a line, JSON Lines or the JSON of registry sql "
            "(- reads stdin).",
        ),
    ] = None,
    commit: Annotated[
        int | None,
        typer.Option("--commit", min=1, help="Retract every attempt this ingest commit added."),
    ] = None,
    root: RootOption = DEFAULT_ROOT,
    output: Annotated[
        SummaryFormat, typer.Option("--format", help="Output format.")
    ] = SummaryFormat.table,
) -> None:
    """Withdraw attempts from every view and report; verify still checks their bytes."""
    if (attempts_file is None) == (commit is None):
        ctx.fail("give exactly one of --attempts FILE or --commit SEQ")
    store = registry.open_store(root)
    if attempts_file is not None:
        ids = registry.read_attempt_ids_file(attempts_file)
        result = registry.retract(store, ids, reason)
    else:
        result = registry.retract(store, [], reason, commit_seq=commit)
    entry = result.commit
    if output is SummaryFormat.json:
        summary = {
            "retracted": len(result.retracted),
            "already_retracted": len(result.already_retracted),
            "attempt_ids": result.retracted,
            "already_retracted_ids": result.already_retracted,
            "reason": result.reason,
            "retracted_commit_seq": result.commit_seq,
            "commit": None if entry is None else entry.digest,
            "commit_seq": None if entry is None else entry.seq,
        }
        typer.echo(to_json(summary))
        return
    typer.echo(
        f"retracted {len(result.retracted)} attempts, "
        f"{len(result.already_retracted)} already retracted"
    )
    if entry is None:
        typer.echo("commit: none (nothing new to retract)")
    else:
        typer.echo(f"commit {entry.seq}: {entry.digest}")
