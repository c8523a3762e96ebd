"""The `registry` command: parse arguments, call the library, render. No computation here."""

from __future__ import annotations

import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn
from typer.core import TyperGroup

import registry
from registry_cli.output import print_table, rows_as_dicts, to_csv, to_json

PROGRESS_MIN_BYTES = 16 << 20


class _ReportingGroup(TyperGroup):
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
    cls=_ReportingGroup,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
    help="A content-addressed evidence registry for coding-agent evaluation attempts.",
)
# Off a terminal rich would assume 80 columns and cut table cells; pipes get the full width.
stdout = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 400)
stderr = Console(stderr=True, soft_wrap=True)

RootOption = Annotated[
    Path,
    typer.Option(
        "--root",
        envvar="REGISTRY_ROOT",
        help="Registry root directory (env REGISTRY_ROOT).",
        show_default=True,
    ),
]
DEFAULT_ROOT = Path(".registry")


class InputFormat(StrEnum):
    """Input formats `registry ingest` reads."""

    auto = "auto"
    jsonl = "jsonl"
    json = "json"
    parquet = "parquet"


class TableFormat(StrEnum):
    """Output formats of data-printing commands."""

    table = "table"
    json = "json"
    csv = "csv"


class SummaryFormat(StrEnum):
    """Output formats of commands that print a summary."""

    table = "table"
    json = "json"


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
) -> None:
    """Validate attempt records and commit the new ones, all or nothing."""
    result = registry.ingest(
        root, paths, input_format.value, progress=_progress_factory(sys.stderr.isatty())
    )
    summary = {
        "read": result.read,
        "new": result.new,
        "already_present": result.present,
        "commit": None if result.commit is None else result.commit.digest,
        "commit_seq": None if result.commit is None else result.commit.seq,
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


class ReportFormat(StrEnum):
    """Output formats of a report."""

    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"


def _render(report: Any, output: ReportFormat) -> str:
    if output is ReportFormat.json:
        return to_json(registry.report_document(report)) + "\n"
    renderers = {
        ReportFormat.table: registry.render_table,
        ReportFormat.markdown: registry.render_markdown,
        ReportFormat.html: registry.render_html,
    }
    return renderers[output](report)


def _emit(text: str, output_file: Path | None) -> None:
    if output_file is None:
        typer.echo(text, nl=False)
    else:
        output_file.write_text(text, encoding="utf-8")


@app.command()
def report(
    task: Annotated[str, typer.Option("--task", help="Task id to report on.")],
    root: RootOption = DEFAULT_ROOT,
    output: Annotated[
        ReportFormat, typer.Option("--format", help="Output format.")
    ] = ReportFormat.table,
    output_file: Annotated[
        Path | None, typer.Option("--output", help="Write the report to this file.")
    ] = None,
) -> None:
    """Report a task per cohort and observed system, and store it as a versioned layer."""
    result, layer, created = registry.record_report(registry.open_store(root), task)
    _emit(_render(result, output), output_file)
    state = "new" if created else "unchanged evidence, existing"
    line = f"layer {layer.digest} ({state}, commit {layer.commit_seq})"
    to_stderr = output_file is None and output in (ReportFormat.json, ReportFormat.html)
    typer.echo(line, err=to_stderr)


reports_app = typer.Typer(
    cls=_ReportingGroup,
    help="List and show stored report layers (every version stays readable).",
    invoke_without_command=True,
)
app.add_typer(reports_app, name="reports")


@reports_app.callback()
def reports(
    ctx: typer.Context,
    task: Annotated[str | None, typer.Option("--task", help="Only this task's reports.")] = None,
    root: RootOption = DEFAULT_ROOT,
    output: Annotated[
        SummaryFormat, typer.Option("--format", help="Output format.")
    ] = SummaryFormat.table,
) -> None:
    """List report versions, newest first."""
    if ctx.invoked_subcommand is not None:
        return
    store = registry.open_store(root)
    rows = []
    for version in reversed(registry.list_layers(store, registry.REPORT_LAYER, task)):
        _, document = registry.read_layer(store, version.digest, registry.REPORT_LAYER)
        rows.append(
            {
                "digest": version.digest,
                "task_id": version.subject,
                "commit_seq": version.commit_seq,
                "created_at": version.created_at,
                "evidence_digest": document["snapshot"]["evidence_digest"],
                "attempts": document["snapshot"]["attempts"],
                "last_commit_seq": document["snapshot"]["last_commit_seq"],
            }
        )
    if output is SummaryFormat.json:
        typer.echo(to_json(rows))
        return
    columns = ["digest", "task_id", "commit_seq", "created_at", "attempts", "last_commit_seq"]
    shown = [[registry.short(r["digest"])] + [r[c] for c in columns[1:]] for r in rows]
    print_table(stdout, columns, shown)


@reports_app.command("show")
def reports_show(
    digest: Annotated[str, typer.Argument(help="Layer digest, or a unique prefix of its hex.")],
    root: RootOption = DEFAULT_ROOT,
    output: Annotated[
        ReportFormat, typer.Option("--format", help="Output format.")
    ] = ReportFormat.json,
    output_file: Annotated[
        Path | None, typer.Option("--output", help="Write the report to this file.")
    ] = None,
) -> None:
    """Print one stored report version."""
    _, stored = registry.load_report(registry.open_store(root), digest)
    _emit(_render(stored, output), output_file)


def main() -> None:
    """Entry point of the `registry` console script."""
    app()
