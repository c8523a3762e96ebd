"""`registry report` and `registry reports`: per-task evidence reports as versioned layers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

import registry

from .options import (
    DEFAULT_ROOT,
    OutputFileOption,
    ReportFormat,
    RootOption,
    SummaryFormat,
    announce_layer,
    emit,
    stdout,
)
from .output import print_table, to_json


def _render(report: Any, output: ReportFormat) -> str:
    if output is ReportFormat.json:
        return to_json(registry.report_document(report)) + "\n"
    renderers = {
        ReportFormat.table: registry.render_table,
        ReportFormat.markdown: registry.render_markdown,
        ReportFormat.html: registry.render_html,
    }
    return renderers[output](report)


def report(
    task: Annotated[str, typer.Option("--task", help="Task id to report on.")],
    root: RootOption = DEFAULT_ROOT,
    output: Annotated[
        ReportFormat, typer.Option("--format", help="Output format.")
    ] = ReportFormat.table,
    output_file: OutputFileOption = None,
) -> None:
    """Report a task per cohort and observed system, and store it as a versioned layer."""
    result, layer, created = registry.record_report(registry.open_store(root), task)
    emit(_render(result, output), output_file)
    to_stderr = output_file is None and output in (ReportFormat.json, ReportFormat.html)
    announce_layer(layer, created, to_stderr)


reports_app = typer.Typer(
    help="List and show stored report layers (every version stays readable).",
    invoke_without_command=True,
)


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
    ctx.obj = {"root": root}  # `registry reports --root R show D` reads R
    if ctx.invoked_subcommand is not None:
        return
    store = registry.open_store(root)
    rows = []
    for version in reversed(registry.list_layers(store, registry.REPORT_LAYER, task)):
        document = registry.layer_document(store, version)
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
    ctx: typer.Context,
    digest: Annotated[str, typer.Argument(help="Layer digest, or a unique prefix of its hex.")],
    root: Annotated[
        Path | None,
        typer.Option("--root", help="Registry root (default: the one given to `reports`)."),
    ] = None,
    output: Annotated[
        ReportFormat, typer.Option("--format", help="Output format.")
    ] = ReportFormat.json,
    output_file: OutputFileOption = None,
) -> None:
    """Print one stored report version."""
    chosen = root or (ctx.obj or {}).get("root", DEFAULT_ROOT)
    _, stored = registry.load_report(registry.open_store(chosen), digest)
    emit(_render(stored, output), output_file)
