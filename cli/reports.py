"""`registry report` and `registry reports`: per-task evidence reports as versioned layers."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

import registry

if TYPE_CHECKING:
    from pydantic import BaseModel

from .options import (
    DEFAULT_ROOT,
    AsOfOption,
    IncludeRetractedOption,
    OutputFileOption,
    ReportFormat,
    RootOption,
    SummaryFormat,
    emit,
    record_or_warn,
    stdout,
    unrecorded,
)
from .output import print_table, to_json

RENDERERS: dict[tuple[str, ReportFormat], str] = {
    ("report", ReportFormat.table): "render_table",
    ("report", ReportFormat.markdown): "render_markdown",
    ("report", ReportFormat.html): "render_html",
    ("comparison", ReportFormat.table): "render_comparison_table",
    ("comparison", ReportFormat.markdown): "render_comparison_markdown",
    ("comparison", ReportFormat.html): "render_comparison_html",
    ("summary", ReportFormat.table): "render_summary_table",
    ("summary", ReportFormat.markdown): "render_summary_markdown",
    ("summary", ReportFormat.html): "render_summary_html",
    ("noise", ReportFormat.table): "render_noise_table",
    ("noise", ReportFormat.markdown): "render_noise_markdown",
    ("noise", ReportFormat.html): "render_noise_html",
}
"""How each layer kind renders (names in `registry`, looked up only when rendering, so the
command starts without the renderers); JSON is every kind's document."""


def _render(layer: BaseModel, output: ReportFormat, kind: str = "report") -> str:
    if output is ReportFormat.json:
        return to_json(layer.model_dump(mode="json", by_alias=True)) + "\n"
    renderer = RENDERERS.get((kind, output))
    if renderer is None:
        raise registry.RegistryError(
            f"a {kind} layer has no {output} rendering; use --format json"
            + (" or table" if (kind, ReportFormat.table) in RENDERERS else "")
        )
    render: Callable[[Any], str] = getattr(registry, renderer)
    return render(layer)


class LayerKind(StrEnum):
    """Kinds of derived layer `registry reports` can list."""

    all = "all"
    report = "report"
    comparison = "comparison"
    summary = "summary"
    noise = "noise"


def report(
    task: Annotated[str, typer.Option("--task", metavar="TASK", help="Task id to report on.")],
    root: RootOption = DEFAULT_ROOT,
    output: Annotated[
        ReportFormat, typer.Option("--format", help="Output format.")
    ] = ReportFormat.table,
    output_file: OutputFileOption = None,
    as_of: AsOfOption = None,
    include_retracted: IncludeRetractedOption = False,
) -> None:
    """Report a task per cohort and observed system, and store it as a versioned layer.

    With --as-of the report is the one the registry gave at that commit (byte for byte the
    layer stored then, for the same generator version); it is printed, not recorded.
    """
    store = registry.open_store(root)
    if as_of is not None or include_retracted:
        built = registry.build_report(store, task, as_of=as_of, include_retracted=include_retracted)
        emit(_render(built, output), output_file)
        unrecorded("report", registry.report_document(built), as_of)()
        return
    recorded: list[BaseModel] = []

    def record() -> tuple[registry.LayerVersion, bool]:
        result, layer, created = registry.record_report(store, task)
        recorded.append(result)
        return layer, created

    announce = record_or_warn("report", record)
    # A registry that cannot be written still answers: the report is built without storing.
    result = recorded[0] if recorded else registry.build_report(store, task)
    emit(_render(result, output), output_file)
    announce()


reports_app = typer.Typer(
    help="List and show stored derived layers (every version stays readable).",
    invoke_without_command=True,
    rich_markup_mode=None,
)


@reports_app.callback()
def reports(
    ctx: typer.Context,
    task: Annotated[
        str | None, typer.Option("--task", metavar="TASK", help="Only this task's reports.")
    ] = None,
    kind: Annotated[
        LayerKind, typer.Option("--kind", help="Only layers of this kind.")
    ] = LayerKind.all,
    root: RootOption = DEFAULT_ROOT,
    output: Annotated[
        SummaryFormat, typer.Option("--format", help="Output format.")
    ] = SummaryFormat.table,
) -> None:
    """List derived layers (reports, comparisons, summaries, noise floors), newest first."""
    ctx.obj = {"root": root}  # `registry reports --root R show D` reads R
    if ctx.invoked_subcommand is not None:
        return
    store = registry.open_store(root)
    rows = []
    chosen_kind = None if kind is LayerKind.all else kind.value
    if task is not None:
        chosen_kind = registry.REPORT_LAYER
    for version in reversed(registry.list_layers(store, chosen_kind, task)):
        document = registry.layer_document(store, version)
        rows.append(
            {
                "digest": version.digest,
                "kind": version.kind,
                "subject": version.subject,
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
    columns = [
        "digest",
        "kind",
        "subject",
        "commit_seq",
        "created_at",
        "attempts",
        "last_commit_seq",
    ]
    shown = [[registry.short(r["digest"])] + [r[c] for c in columns[1:]] for r in rows]
    print_table(stdout, columns, shown)


@reports_app.command("show")
def reports_show(
    ctx: typer.Context,
    digest: Annotated[str, typer.Argument(help="Layer digest, or a unique prefix of its hex.")],
    root: Annotated[
        Path | None,
        typer.Option(
            "--root", metavar="DIR", help="Registry root (default: the one given to `reports`)."
        ),
    ] = None,
    output: Annotated[
        ReportFormat, typer.Option("--format", help="Output format.")
    ] = ReportFormat.json,
    output_file: OutputFileOption = None,
) -> None:
    """Print one stored layer version (a report, comparison, summary or noise floor)."""
    chosen = root or (ctx.obj or {}).get("root", DEFAULT_ROOT)
    version, stored = registry.load_layer(registry.open_store(chosen), digest)
    emit(_render(stored, output, version.kind), output_file)
