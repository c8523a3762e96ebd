"""`registry proof`: RFC 9162 inclusion and consistency proofs over the attempt ids."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import typer

import registry

from .options import DEFAULT_ROOT, RootOption
from .output import to_json

proof_app = typer.Typer(
    help="Prove an attempt is in the registry, or that the registry only grew (RFC 9162).",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@proof_app.command("inclusion")
def inclusion(
    attempt_id: Annotated[str, typer.Argument(help="The attempt id (blake3:<64 hex>).")],
    at: Annotated[
        str | None,
        typer.Option(
            "--at", metavar="SEQ", help="The commit to prove it at (a sequence or a date)."
        ),
    ] = None,
    root: RootOption = DEFAULT_ROOT,
) -> None:
    """Print the audit path proving ATTEMPT_ID is a leaf of the tree at a commit (JSON).

    Verify it offline with RFC 9162 section 2.1.3.2 (blake3; the README gives the steps).
    """
    proof = registry.prove_inclusion(registry.open_store(root), attempt_id, at)
    document = {"proof": "inclusion", "hash": "blake3", "rfc": "9162 2.1.3", **asdict(proof)}
    typer.echo(to_json(document, sort_keys=False))


@proof_app.command("consistency")
def consistency(
    old: Annotated[int, typer.Argument(min=1, help="The earlier commit sequence number.")],
    new: Annotated[int, typer.Argument(min=1, help="The later commit sequence number.")],
    root: RootOption = DEFAULT_ROOT,
) -> None:
    """Print the proof that the tree at commit NEW extends the tree at OLD (JSON).

    Verify it offline with RFC 9162 section 2.1.4.2 (blake3; the README gives the steps).
    """
    proof = registry.prove_consistency(registry.open_store(root), old, new)
    document = {"proof": "consistency", "hash": "blake3", "rfc": "9162 2.1.4", **asdict(proof)}
    typer.echo(to_json(document, sort_keys=False))
