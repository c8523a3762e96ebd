"""`registry site`: write a static, self-contained site of the registry into a directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

import registry

from .options import DEFAULT_ROOT, AsOfOption, RootOption
from .output import printable


def site(
    output: Annotated[
        Path,
        typer.Option(
            "--output", metavar="DIR", help="Directory to write the site into (created if absent)."
        ),
    ],
    root: RootOption = DEFAULT_ROOT,
    as_of: AsOfOption = None,
) -> None:
    """Write a browsable static site: index, tasks, systems, trends, comparisons.

    Plain HTML with inline SVG and one stylesheet: no scripts, no network. Every number is
    the one the matching command prints; regenerating on unchanged evidence rewrites nothing.
    """
    result = registry.build_site(registry.open_store(root), output, as_of=as_of)
    typer.echo(
        printable(
            f"site {output}: {result.files} files ({result.written} written, "
            f"{result.unchanged} unchanged, {result.removed} removed) at ledger commit "
            f"{result.head_seq}"
        )
    )


__all__ = ["site"]
