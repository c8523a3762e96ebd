"""`registry head`: the ledger head in one line, to keep outside the registry as an anchor."""

from __future__ import annotations

from typing import Annotated

import typer

import registry

from .options import DEFAULT_ROOT, RootOption, SummaryFormat
from .output import to_json


def head(
    root: RootOption = DEFAULT_ROOT,
    output: Annotated[
        SummaryFormat, typer.Option("--format", help="Output format.")
    ] = SummaryFormat.table,
) -> None:
    """Print the ledger head as SEQ:DIGEST; later, 'registry verify --expect-head' checks it.

    Publish the line (a CI log, a release note): a registry that was rolled back or whose
    newest commits were rewritten no longer extends it. The ledger chain is checked first;
    a damaged ledger has no head to publish.
    """
    entries = registry.read_ledger(registry.open_store(root))
    seq, digest = (entries[-1].seq, entries[-1].digest) if entries else (0, None)
    if output is SummaryFormat.json:
        typer.echo(to_json({"seq": seq, "digest": digest}))
    else:
        typer.echo(f"{seq}:{digest or 'none'}")
