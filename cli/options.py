"""Options, formats and output helpers shared by the command modules."""

from __future__ import annotations

import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

import registry

from .output import printable

if TYPE_CHECKING:
    from rich.console import Console


class _LazyConsole:
    """A rich `Console` made on first use: a command that prints no table never imports rich."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Console | None = None

    def get(self) -> Console:
        """The console itself (for rich APIs that want a `Console`)."""
        if self._console is None:
            from rich.console import Console

            options = dict(self._options)
            if options.pop("width_of_stdout", False):
                # Off a terminal rich would assume 80 columns and cut table cells; pipes get
                # the full width.
                options["width"] = None if sys.stdout.isatty() else 400
            self._console = Console(**options)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self.get(), name)


stdout = cast("Console", _LazyConsole(soft_wrap=True, width_of_stdout=True))
stderr = cast("Console", _LazyConsole(stderr=True, soft_wrap=True))


def console_of(console: Console) -> Console:
    """The real console behind `stdout` or `stderr`."""
    return console.get() if isinstance(console, _LazyConsole) else console


RootOption = Annotated[
    Path,
    typer.Option(
        "--root",
        metavar="ROOT",
        envvar="REGISTRY_ROOT",
        help="Registry root: a directory or s3://bucket/prefix (env REGISTRY_ROOT).",
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
    inspect = "inspect"
    harbor = "harbor"
    terminal_bench = "terminal-bench"
    swebench = "swebench"


class TableFormat(StrEnum):
    """Output formats of data-printing commands."""

    table = "table"
    json = "json"
    csv = "csv"


class SummaryFormat(StrEnum):
    """Output formats of commands that print a summary."""

    table = "table"
    json = "json"


class ReportFormat(StrEnum):
    """Output formats of reports and comparisons."""

    table = "table"
    json = "json"
    markdown = "markdown"
    html = "html"


OutputFileOption = Annotated[
    Path | None,
    typer.Option("--output", metavar="FILE", help="Write to this file instead of stdout."),
]


def emit(text: str, output_file: Path | None) -> None:
    """Write rendered text to stdout or to a file."""
    if output_file is None:
        typer.echo(text, nl=False)
        return
    try:
        output_file.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise registry.RegistryError(f"cannot write {output_file}: {exc.strerror}") from None


def announce_layer(layer: registry.LayerVersion, created: bool) -> None:
    """Say on stderr which derived layer holds the result, so stdout is only the result."""
    state = "new" if created else "unchanged evidence, existing"
    typer.echo(f"layer {layer.digest} ({state}, commit {layer.commit_seq})", err=True)


def record_or_warn(
    kind: str, record: Callable[[], tuple[registry.LayerVersion, bool]]
) -> Callable[[], None]:
    """Store a derived layer; return what to say about it once the result is printed.

    A registry that cannot be written (read-only file system, disk full, permission denied)
    still answers: the result is printed and a warning says the layer was not recorded.
    """
    try:
        layer, created = record()
    except OSError as exc:  # registry.StorageError is an OSError too
        reason = str(exc) if isinstance(exc, registry.RegistryError) else exc.strerror or exc
        message = printable(f"warning: {kind} not recorded as a layer: {reason}")
        return lambda: typer.echo(message, err=True)
    return lambda: announce_layer(layer, created)


AsOfOption = Annotated[
    str | None,
    typer.Option(
        "--as-of",
        metavar="SEQ|DATE",
        help="Answer as the registry stood at this commit or date (nothing is recorded).",
    ),
]
IncludeRetractedOption = Annotated[
    bool,
    typer.Option(
        "--include-retracted",
        help="Count retracted attempts too (nothing is recorded).",
    ),
]


def unrecorded(kind: str, document: Any, as_of: str | None) -> Callable[[], None]:
    """Say on stderr that a time-travel or retraction-inclusive answer was not recorded."""
    digest = registry.digest_json(document)
    why = f"as of {as_of}" if as_of is not None else "retracted attempts included"
    message = f"{kind} {digest} ({why}; not recorded as a layer)"
    return lambda: typer.echo(message, err=True)


TaskOption = Annotated[
    list[str] | None,
    typer.Option("--task", metavar="TASK", help="Restrict to this task (repeatable)."),
]
TasksFileOption = Annotated[
    Path | None,
    typer.Option(
        "--tasks", metavar="FILE", help="Restrict to the task ids in this file, one a line."
    ),
]
PlanOption = Annotated[
    str | None, typer.Option("--plan", metavar="PLAN", help="Restrict to this plan id.")
]
ExperimentOption = Annotated[
    str | None,
    typer.Option("--experiment", metavar="EXPERIMENT", help="Restrict to this experiment."),
]


def scope_of(
    task: list[str] | None, tasks_file: Path | None, plan: str | None, experiment: str | None
) -> registry.Scope:
    """Build the scope every arm or system is restricted to."""
    tasks = list(task or [])
    if tasks_file is not None:
        try:
            lines = tasks_file.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise registry.SelectorError(f"{tasks_file}: cannot read task list ({exc})") from None
        tasks += registry.read_task_list(lines)
    return registry.Scope(tasks=tuple(tasks), plan=plan, experiment=experiment)
