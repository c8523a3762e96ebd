"""`registry regressions`: which tasks moved down (or up) beyond their intervals."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

import registry

from .options import (
    DEFAULT_ROOT,
    AsOfOption,
    IncludeRetractedOption,
    OutputFileOption,
    RootOption,
    TaskOption,
    emit,
)
from .output import to_json


class RegressionFormat(StrEnum):
    """Output formats of `registry regressions`."""

    table = "table"
    json = "json"
    markdown = "markdown"


def regressions(
    root: RootOption = DEFAULT_ROOT,
    track: Annotated[
        list[str] | None,
        typer.Option(
            "--track",
            metavar="SELECTOR",
            help="Track the attempts this selector matches as one system (repeatable); "
            "default: each agent_system_digest.",
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="SEQ|DATE",
            help="Compare the newest sample committed at or before this commit or date with "
            "the newest committed after it.",
        ),
    ] = None,
    as_of: AsOfOption = None,
    alpha: Annotated[
        float,
        typer.Option("--alpha", metavar="A", help="Significance level for Holm-adjusted p-values."),
    ] = 0.05,
    task: TaskOption = None,
    include_retracted: IncludeRetractedOption = False,
    output: Annotated[
        RegressionFormat, typer.Option("--format", help="Output format.")
    ] = RegressionFormat.table,
    output_file: OutputFileOption = None,
) -> None:
    """Per task, compare a system's newest sample with the one before; exit 1 on a regression."""
    result = registry.find_regressions(
        registry.open_store(root),
        track=[registry.parse_selector(t) for t in track or []],
        since=since,
        as_of=as_of,
        alpha=alpha,
        include_retracted=include_retracted,
        tasks=task or [],
    )
    if output is RegressionFormat.json:
        text = to_json(result.model_dump(mode="json", by_alias=True)) + "\n"
    elif output is RegressionFormat.markdown:
        text = registry.render_regressions_markdown(result)
    else:
        text = registry.render_regressions_table(result)
    emit(text, output_file)
    if result.counts.down:
        raise typer.Exit(1)


__all__ = ["regressions"]
