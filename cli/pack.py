"""`registry pack`: merge each cohort's small segments into one; write a checkpoint."""

from __future__ import annotations

from typing import Annotated

import typer

import registry

from .options import DEFAULT_ROOT, RootOption, SummaryFormat
from .output import to_json


def pack(
    root: RootOption = DEFAULT_ROOT,
    checkpoint_only: Annotated[
        bool,
        typer.Option(
            "--checkpoint-only",
            help="Merge nothing; only write a checkpoint of the ledger at its head.",
        ),
    ] = False,
    output: Annotated[
        SummaryFormat, typer.Option("--format", help="Output format.")
    ] = SummaryFormat.table,
) -> None:
    """Merge each cohort's segments into one (a pack commit) and checkpoint the ledger.

    Rows keep the commit that added them; the merged files stay and 'registry verify'
    checks that each packed segment holds exactly their rows. Nothing to merge: no commit.
    """
    store = registry.open_store(root)
    result = registry.PackResult(None) if checkpoint_only else registry.pack_segments(store)
    checkpoint = registry.write_checkpoint(store)
    entry = result.commit
    if output is SummaryFormat.json:
        summary = {
            "commit": None if entry is None else entry.digest,
            "commit_seq": None if entry is None else entry.seq,
            "cohorts": result.cohorts,
            "rows": result.rows,
            "segments_before": result.segments_before,
            "segments_after": result.segments_after,
            "checkpoint": checkpoint.path,
            "checkpoint_seq": checkpoint.seq,
            "merkle_size": checkpoint.merkle_size,
            "merkle_root": checkpoint.merkle_root,
        }
        typer.echo(to_json(summary))
        return
    if entry is None and not checkpoint_only:
        typer.echo(f"nothing to pack: {result.segments_before} segments, one per cohort")
    elif entry is not None:
        typer.echo(
            f"packed {result.rows} rows of {result.cohorts} cohorts: "
            f"{result.segments_before} -> {result.segments_after} segments "
            f"(commit {entry.seq})"
        )
    state = "written" if checkpoint.created else "present"
    typer.echo(
        f"checkpoint {checkpoint.path} {state} at commit {checkpoint.seq}: Merkle tree of "
        f"{checkpoint.merkle_size} attempts, root {checkpoint.merkle_root}"
    )
