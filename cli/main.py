"""The `registry` command: parse arguments, call the library, render. No computation here."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn
from typer.core import TyperGroup

import registry

from . import reports, retract, suite
from .options import (
    DEFAULT_ROOT,
    InputFormat,
    RootOption,
    SummaryFormat,
    TableFormat,
    stderr,
    stdout,
)
from .output import print_table, rows_as_dicts, to_csv, to_json

PROGRESS_MIN_BYTES = 16 << 20


class ReportingGroup(TyperGroup):
    """Turns every `RegistryError` into one `Error: …` line and its exit code."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except registry.RegistryError as exc:
            if os.environ.get("REGISTRY_DEBUG") == "1":
                raise
            typer.echo(f"Error: {exc}", err=True)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            typer.echo("Error: interrupted", err=True)
            raise typer.Exit(130) from None


app = typer.Typer(
    cls=ReportingGroup,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
    help="A content-addressed evidence registry for coding-agent evaluation attempts.",
)


def _progress_factory(enabled: bool) -> Any:
    def start(total: int) -> Any:
        if not enabled or total < PROGRESS_MIN_BYTES:
            return None
        bar = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            DownloadColumn(),
            TimeRemainingColumn(),
            console=stderr,
            transient=True,
        )
        bar.start()
        task = bar.add_task("ingesting", total=total)

        def tick(count: int) -> None:
            bar.advance(task, count)
            if bar.finished:
                bar.stop()

        return tick

    return start


@app.command()
def ingest(
    paths: Annotated[
        list[str],
        typer.Argument(help="Files or directories to ingest; - reads JSON Lines from stdin."),
    ],
    root: RootOption = DEFAULT_ROOT,
    input_format: Annotated[
        InputFormat,
        typer.Option("--format", help="Input format; auto detects by name and content."),
    ] = InputFormat.auto,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the summary as JSON (for scripts).")
    ] = False,
    input_values: Annotated[
        list[str] | None,
        typer.Option(
            "--input", help="Cohort input a harness did not record, KEY=VALUE (repeatable)."
        ),
    ] = None,
    inputs_file: Annotated[
        Path | None, typer.Option("--inputs", help="JSON object of cohort inputs to supply.")
    ] = None,
    envelope: Annotated[
        list[str] | None,
        typer.Option(
            "--envelope",
            help="Observed identity the source leaves empty, KEY=VALUE for agent, "
            "agent_version, provider, model, harness_version (repeatable); never overrides "
            "a recorded value.",
        ),
    ] = None,
) -> None:
    """Validate attempt records (or harness output) and commit the new ones, all or nothing."""
    result = registry.ingest(
        root,
        paths,
        input_format.value,
        progress=_progress_factory(sys.stderr.isatty()),
        overrides=registry.parse_overrides(input_values or [], inputs_file),
        envelope=envelope or [],
    )
    for warning in result.warnings:
        typer.echo(f"warning: {warning}", err=True)
    summary = {
        "read": result.read,
        "new": result.new,
        "already_present": result.present,
        "commit": None if result.commit is None else result.commit.digest,
        "commit_seq": None if result.commit is None else result.commit.seq,
        "warnings": result.warnings,
        "sources": [
            {"path": s.label, "digest": s.digest, "records": s.records} for s in result.sources
        ],
    }
    if as_json:
        typer.echo(to_json(summary))
        return
    typer.echo(f"read {result.read} attempts: {result.new} new, {result.present} already present")
    if result.commit is None:
        typer.echo("commit: none (nothing new)")
    else:
        typer.echo(f"commit {result.commit.seq}: {result.commit.digest}")


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="One read-only SELECT over the registry views.")],
    root: RootOption = DEFAULT_ROOT,
    output: Annotated[
        TableFormat, typer.Option("--format", help="Output format.")
    ] = TableFormat.table,
) -> None:
    """Run a read-only SQL query over the views attempts, commits, cohorts and systems."""
    result = registry.run_query(registry.open_store(root), query)
    if output is TableFormat.json:
        typer.echo(to_json(rows_as_dicts(result.columns, result.rows)))
    elif output is TableFormat.csv:
        typer.echo(to_csv(result.columns, result.rows), nl=False)
    else:
        print_table(stdout, result.columns, result.rows)


@app.command()
def verify(
    root: RootOption = DEFAULT_ROOT,
    output: Annotated[
        SummaryFormat, typer.Option("--format", help="Output format.")
    ] = SummaryFormat.table,
) -> None:
    """Re-hash every object, re-derive every attempt id and walk the ledger chain."""
    report = registry.verify(registry.open_store(root))
    if output is SummaryFormat.json:
        typer.echo(
            to_json(
                {
                    "ok": report.ok,
                    "commits": report.commits,
                    "segments": report.segments,
                    "attempts": report.attempts,
                    "layers": report.layers,
                    "problems": report.problems,
                    "unreferenced": report.unreferenced,
                }
            )
        )
    else:
        for line in report.problems:
            typer.echo(f"problem: {line}")
        for line in report.unreferenced:
            typer.echo(f"unreferenced: {line} (not in the ledger; ignored by queries)")
        state = "ok" if report.ok else f"{len(report.problems)} problem(s)"
        typer.echo(
            f"{state}: {report.commits} commits, {report.segments} segments, "
            f"{report.attempts} attempts, {report.layers} layers checked"
        )
    if not report.ok:
        raise typer.Exit(1)


app.command()(reports.report)
app.add_typer(reports.reports_app, name="reports")
app.command()(suite.compare)
app.command()(suite.summary)
app.command()(suite.noise)
app.command()(retract.retract)


def main() -> None:
    """Entry point of the `registry` console script."""
    app()
