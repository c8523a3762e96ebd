"""`registry compare`, `registry summary` and `registry noise`: suite-level questions."""

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
    ExperimentOption,
    IncludeRetractedOption,
    OutputFileOption,
    PlanOption,
    ReportFormat,
    RootOption,
    TaskOption,
    TasksFileOption,
    emit,
    record_or_warn,
    scope_of,
    unrecorded,
)
from .output import printable, to_json


class FailOn(StrEnum):
    """Verdicts that make `registry compare` exit 1, for gating CI."""

    behind = "behind"
    different = "different"


_FAILING = {FailOn.behind: {"behind"}, FailOn.different: {"behind", "ahead"}}


def _record(
    kind: str,
    result: BaseModel,
    store: registry.Store,
    recorder: Callable[[], tuple[registry.LayerVersion, bool]],
    as_of: str | None,
    include_retracted: bool,
) -> Callable[[], None]:
    if as_of is not None or include_retracted:
        return unrecorded(kind, result.model_dump(mode="json", by_alias=True), as_of)
    return record_or_warn(kind, recorder)


def compare(
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            metavar="SELECTOR",
            help="Baseline arm, e.g. experiment=exp-1 or model=m (default: the plan's).",
        ),
    ] = None,
    candidate: Annotated[
        list[str] | None,
        typer.Option(
            "--candidate",
            metavar="SELECTOR",
            help="Candidate arm (repeatable; Holm-adjusted; default: the plan's).",
        ),
    ] = None,
    root: RootOption = DEFAULT_ROOT,
    task: TaskOption = None,
    tasks_file: TasksFileOption = None,
    plan: Annotated[
        str | None,
        typer.Option(
            "--plan",
            metavar="PLAN",
            help="Apply this frozen plan (digest or a unique prefix of 8+ hex digits); any "
            "other text restricts to attempts with this plan_id.",
        ),
    ] = None,
    exploratory: Annotated[
        bool,
        typer.Option(
            "--exploratory",
            help="Allow overriding the frozen plan; the layer is marked exploratory.",
        ),
    ] = False,
    timeouts: Annotated[
        str | None,
        typer.Option(
            "--timeouts",
            metavar="POLICY",
            help="model_failure (default) or excused (timeouts dropped from both arms).",
        ),
    ] = None,
    experiment: ExperimentOption = None,
    vary: Annotated[
        str,
        typer.Option(
            "--vary", metavar="INPUT", help="The one cohort input the arms may differ in."
        ),
    ] = "agent_system_digest",
    seed: Annotated[
        int, typer.Option("--seed", metavar="N", min=0, help="Bootstrap seed (recorded).")
    ] = 0,
    resamples: Annotated[
        int, typer.Option("--resamples", metavar="N", min=1, help="Bootstrap resamples.")
    ] = 10_000,
    output: Annotated[
        ReportFormat, typer.Option("--format", help="Output format.")
    ] = ReportFormat.table,
    output_file: OutputFileOption = None,
    fail_on: Annotated[
        FailOn | None,
        typer.Option(
            "--fail-on",
            help="Exit 1 when a candidate is behind (behind) or ahead or behind (different).",
        ),
    ] = None,
    as_of: AsOfOption = None,
    include_retracted: IncludeRetractedOption = False,
) -> None:
    """Compare a baseline with candidates task by task: did the change do anything?

    With --fail-on, the exit code gates CI: 1 when a candidate's verdict is `behind`
    (or, for `different`, `ahead` or `behind`), 0 otherwise; the output is the same.
    With --plan naming a frozen plan, the plan's arms, reporting tasks, timeout policy and
    decision rule apply; overriding them needs --exploratory. Every comparison is numbered
    as a look at its pair; a second or later look is flagged.
    """
    store = registry.open_store(root)
    frozen = registry.find_plan(store, plan, as_of) if plan is not None else None
    if frozen is not None:
        baseline = baseline or frozen.plan.arms.baseline
        candidate = candidate or list(frozen.plan.arms.candidates)
    if baseline is None or not candidate:
        raise registry.SelectorError(
            "give --baseline and --candidate, or --plan naming a frozen plan (registry plan list)"
        )
    result = registry.compare(
        store,
        registry.parse_selector(baseline),
        [registry.parse_selector(c) for c in candidate],
        scope_of(task, tasks_file, None if frozen else plan, experiment),
        vary=vary,
        seed=seed,
        resamples=resamples,
        as_of=as_of,
        include_retracted=include_retracted,
        plan=frozen,
        exploratory=exploratory,
        timeouts=timeouts,
    )
    announce = _record(
        "comparison",
        result,
        store,
        lambda: registry.record_comparison(store, result),
        as_of,
        include_retracted,
    )
    renderers = {
        ReportFormat.table: registry.render_comparison_table,
        ReportFormat.markdown: registry.render_comparison_markdown,
        ReportFormat.html: registry.render_comparison_html,
    }
    if output is ReportFormat.json:
        text = to_json(result.model_dump(mode="json", by_alias=True)) + "\n"
    else:
        text = renderers[output](result)
    emit(text, output_file)
    announce()
    failing = [c for c in result.comparisons if fail_on and c.verdict.code in _FAILING[fail_on]]
    if failing:
        typer.echo(
            printable(
                f"failing (--fail-on {fail_on}): "
                + "; ".join(f"{c.candidate.selector}: {c.verdict.text}" for c in failing)
            ),
            err=True,
        )
        raise typer.Exit(1)


def summary(
    root: RootOption = DEFAULT_ROOT,
    system: Annotated[
        str | None,
        typer.Option("--system", metavar="SELECTOR", help="Only systems matching this selector."),
    ] = None,
    task: TaskOption = None,
    tasks_file: TasksFileOption = None,
    plan: PlanOption = None,
    experiment: ExperimentOption = None,
    output: Annotated[
        ReportFormat, typer.Option("--format", help="Output format.")
    ] = ReportFormat.table,
    output_file: OutputFileOption = None,
    as_of: AsOfOption = None,
    include_retracted: IncludeRetractedOption = False,
) -> None:
    """Summarize a suite per system: pooled and task-mean rates, clustered SE, pass@k."""
    store = registry.open_store(root)
    selector = registry.parse_selector(system) if system else None
    result = registry.summarize(
        store,
        scope_of(task, tasks_file, plan, experiment),
        selector,
        as_of=as_of,
        include_retracted=include_retracted,
    )
    announce = _record(
        "summary",
        result,
        store,
        lambda: registry.record_summary(store, result),
        as_of,
        include_retracted,
    )
    _print_layer(result, SUMMARY_RENDERERS, output, output_file)
    announce()


def noise(
    system: Annotated[
        str, typer.Option("--system", metavar="SELECTOR", help="The system, as a selector.")
    ],
    root: RootOption = DEFAULT_ROOT,
    task: TaskOption = None,
    tasks_file: TasksFileOption = None,
    plan: PlanOption = None,
    experiment: ExperimentOption = None,
    simulations: Annotated[
        int,
        typer.Option(
            "--simulations", metavar="N", min=1, help="Simulated pairs of identical runs."
        ),
    ] = 100_000,  # registry.DEFAULT_SIMULATIONS, written out so --help imports no engine
    seed: Annotated[
        int, typer.Option("--seed", metavar="N", min=0, help="Simulation seed (recorded).")
    ] = 0,
    attempts: Annotated[
        list[int] | None,
        typer.Option(
            "--attempts",
            metavar="K",
            min=1,
            help="Attempts per task to give the MDD for (repeatable).",
        ),
    ] = None,
    output: Annotated[
        ReportFormat, typer.Option("--format", help="Output format.")
    ] = ReportFormat.table,
    output_file: OutputFileOption = None,
    as_of: AsOfOption = None,
    include_retracted: IncludeRetractedOption = False,
) -> None:
    """Show a system's noise floor: flips and net change between identical evaluations."""
    store = registry.open_store(root)
    result = registry.noise_floor(
        store,
        registry.parse_selector(system),
        scope_of(task, tasks_file, plan, experiment),
        simulations=simulations,
        seed=seed,
        attempts=attempts or registry.DEFAULT_ATTEMPTS,
        as_of=as_of,
        include_retracted=include_retracted,
    )
    announce = _record(
        "noise floor",
        result,
        store,
        lambda: registry.record_noise(store, result),
        as_of,
        include_retracted,
    )
    _print_layer(result, NOISE_RENDERERS, output, output_file)
    announce()


SUMMARY_RENDERERS = {
    ReportFormat.table: "render_summary_table",
    ReportFormat.markdown: "render_summary_markdown",
    ReportFormat.html: "render_summary_html",
}
NOISE_RENDERERS = {
    ReportFormat.table: "render_noise_table",
    ReportFormat.markdown: "render_noise_markdown",
    ReportFormat.html: "render_noise_html",
}
"""Renderer names in `registry.render.suite`, per format (JSON is the document itself)."""


def _print_layer(
    result: BaseModel,
    renderers: dict[ReportFormat, str],
    output: ReportFormat,
    output_file: Path | None,
) -> None:
    if output is ReportFormat.json:
        emit(to_json(result.model_dump(mode="json", by_alias=True)) + "\n", output_file)
        return
    from registry.render import suite as render_suite

    render: Callable[[Any], str] = getattr(render_suite, renderers[output])
    emit(render(result), output_file)


__all__ = ["compare", "noise", "summary"]
