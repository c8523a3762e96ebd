"""`registry plan`: freeze, list, show and check evaluation plans; size an experiment."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

import registry

if TYPE_CHECKING:
    from registry import FrozenPlan

from .options import (
    DEFAULT_ROOT,
    AsOfOption,
    ExperimentOption,
    IncludeRetractedOption,
    PlanOption,
    RootOption,
    SummaryFormat,
    TaskOption,
    TasksFileOption,
    scope_of,
    stdout,
)
from .output import print_table, printable, to_json

plan_app = typer.Typer(
    help="Freeze an evaluation plan before the first result; check and size it.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

FormatOption = Annotated[SummaryFormat, typer.Option("--format", help="Output format.")]


@plan_app.command("freeze")
def freeze(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="The plan, as JSON or YAML.")],
    root: RootOption = DEFAULT_ROOT,
    replaces: Annotated[
        str | None,
        typer.Option(
            "--replaces", metavar="PLAN", help="The frozen plan this one edits (digest or prefix)."
        ),
    ] = None,
    output: FormatOption = SummaryFormat.table,
) -> None:
    """Validate a plan and freeze it: stored once by digest, recorded by a `plan` commit."""
    plan = registry.read_plan_file(file)
    store = registry.open_store(root, create=True)
    if replaces is not None:
        previous = registry.load_plan(store, replaces)
        if plan.replaces not in (None, previous.plan_id):
            raise registry.RegistryError(
                f"--replaces {replaces}: {file} already names {plan.replaces} as its predecessor"
            )
        plan = plan.model_copy(update={"replaces": previous.plan_id})
    frozen, created = registry.freeze_plan(store, plan)
    summary = {
        "plan_id": frozen.plan_id,
        "created": created,
        "commit_seq": frozen.commit_seq,
        "name": frozen.plan.name,
        "replaces": frozen.replaces,
        "tasks": len(frozen.plan.tasks),
        "tasks_digest": frozen.plan.tasks_digest,
    }
    if output is SummaryFormat.json:
        typer.echo(to_json(summary))
        return
    state = "frozen" if created else "already frozen"
    typer.echo(f"plan {frozen.plan_id} ({state}, commit {frozen.commit_seq})")
    if frozen.replaces:
        typer.echo(f"replaces {frozen.replaces}")
    typer.echo("attempts of this plan carry this digest as their plan_id")


@plan_app.command("list")
def list_(
    root: RootOption = DEFAULT_ROOT,
    output: FormatOption = SummaryFormat.table,
    as_of: AsOfOption = None,
) -> None:
    """List frozen plans, oldest first, with the plan each one replaces."""
    plans = registry.list_plans(registry.open_store(root), as_of)
    replaced_by = {p.replaces: p.plan_id for p in plans if p.replaces}
    rows = [_row(p, replaced_by.get(p.plan_id)) for p in plans]
    if output is SummaryFormat.json:
        typer.echo(to_json(rows))
        return
    columns = ["plan_id", "name", "tasks", "arms", "commit_seq", "replaces", "replaced_by"]
    shown = [
        [
            registry.short(r["plan_id"]),
            r["name"],
            r["tasks"],
            r["arms"],
            r["commit_seq"],
            registry.short(r["replaces"]) if r["replaces"] else None,
            registry.short(r["replaced_by"]) if r["replaced_by"] else None,
        ]
        for r in rows
    ]
    print_table(stdout, columns, shown)


@plan_app.command("show")
def show(
    plan: Annotated[str, typer.Argument(metavar="PLAN", help="Plan digest or a unique prefix.")],
    root: RootOption = DEFAULT_ROOT,
    output: FormatOption = SummaryFormat.json,
) -> None:
    """Print a frozen plan (its document is exactly what its digest covers)."""
    frozen = registry.load_plan(registry.open_store(root), plan)
    document = registry.plan_document(frozen.plan)
    if output is SummaryFormat.json:
        typer.echo(to_json({"plan_id": frozen.plan_id, "plan": document}))
        return
    spec = frozen.plan
    lines = [
        f"plan       {frozen.plan_id} (commit {frozen.commit_seq}, {frozen.created_at})",
        f"name       {spec.name}",
        f"tasks      {len(spec.tasks)} ({spec.tasks_digest}); reporting on "
        f"{len(spec.reporting_tasks())}",
        f"baseline   {spec.arms.baseline}",
        *(f"candidate  {c}" for c in spec.arms.candidates),
        f"attempts   {spec.attempts_per_task} per task per arm",
        f"held fixed {to_json(spec.held_fixed)}",
        f"metric     {spec.primary_metric.name}"
        + (f" k={spec.primary_metric.k}" if spec.primary_metric.k else ""),
        f"threshold  {spec.threshold.value:g} ({spec.threshold.category})",
        f"alpha      {spec.alpha:g}, {spec.multiple_comparisons}",
        f"timeouts   {spec.timeout_policy.timeouts}",
        f"decision   adopt if {', '.join(spec.decision_rule.adopt_if)}; reject if "
        f"{', '.join(spec.decision_rule.reject_if) or 'never'}",
        f"stop       {spec.stop_rule.text} (looks allowed: {spec.stop_rule.max_looks})",
    ]
    if spec.replaces:
        lines.append(f"replaces   {spec.replaces}")
    for line in lines:
        typer.echo(printable(line))


@plan_app.command("status")
def status(
    plan: Annotated[str, typer.Argument(metavar="PLAN", help="Plan digest or a unique prefix.")],
    root: RootOption = DEFAULT_ROOT,
    require_complete: Annotated[
        bool,
        typer.Option("--require-complete", help="Exit 1 unless every cell is complete."),
    ] = False,
    output: FormatOption = SummaryFormat.table,
    as_of: AsOfOption = None,
    include_retracted: IncludeRetractedOption = False,
) -> None:
    """Planned vs valid attempts per task × arm, and attempts outside the plan."""
    store = registry.open_store(root)
    frozen = registry.load_plan(store, plan, as_of)
    result = registry.plan_status(store, frozen, as_of=as_of, include_retracted=include_retracted)
    document = result.as_json()
    if output is SummaryFormat.json:
        typer.echo(to_json(document))
    else:
        _print_status(document)
    if require_complete and not result.complete:
        typer.echo(
            f"incomplete (--require-complete): {document['attempts_missing']} planned valid "
            f"attempts missing in {document['cells_planned'] - document['cells_complete']} cells",
            err=True,
        )
        raise typer.Exit(1)


@plan_app.command("size")
def size(
    rates: Annotated[
        tuple[float, float] | None,
        typer.Option("--rates", metavar="P1 P2", help="Attempts per arm to tell P1 from P2."),
    ] = None,
    power: Annotated[float, typer.Option("--power", min=0.01, max=0.999)] = 0.8,
    alpha: Annotated[float, typer.Option("--alpha", min=1e-6, max=0.5)] = 0.05,
    discordant: Annotated[
        float | None,
        typer.Option(
            "--discordant",
            metavar="PSI",
            help="Discordant pairs McNemar needs when a discordant pair favours one arm "
            "with probability PSI.",
        ),
    ] = None,
    rate: Annotated[
        float | None,
        typer.Option("--rate", metavar="P", help="Binomial facts of an agent at success rate P."),
    ] = None,
    runs: Annotated[
        int, typer.Option("--runs", metavar="K", min=1, help="Runs for the binomial facts.")
    ] = 5,
    system: Annotated[
        str | None,
        typer.Option(
            "--system",
            metavar="SELECTOR",
            help="MDD what-if from this system's measured per-task rates (as registry noise).",
        ),
    ] = None,
    tasks_count: Annotated[
        list[int] | None,
        typer.Option(
            "--tasks-count", metavar="T", min=1, help="Tasks in the what-if (repeatable)."
        ),
    ] = None,
    attempts: Annotated[
        list[int] | None,
        typer.Option(
            "--attempts", metavar="K", min=1, help="Attempts per task in the what-if (repeatable)."
        ),
    ] = None,
    task_sd: Annotated[
        float,
        typer.Option(
            "--task-sd",
            metavar="S",
            min=0.0,
            help="SD of true per-task effects (0: chance only, as registry noise).",
        ),
    ] = 0.0,
    root: RootOption = DEFAULT_ROOT,
    task: TaskOption = None,
    tasks_file: TasksFileOption = None,
    plan: PlanOption = None,
    experiment: ExperimentOption = None,
    output: FormatOption = SummaryFormat.table,
    as_of: AsOfOption = None,
    include_retracted: IncludeRetractedOption = False,
) -> None:
    """Size an experiment before spending on it: attempts per arm, discordant pairs, MDD."""
    measured = None
    if system is not None:
        store = registry.open_store(root)
        measured = registry.system_rates(
            store,
            registry.parse_selector(system),
            scope_of(task, tasks_file, plan, experiment),
            as_of=as_of,
            include_retracted=include_retracted,
        )
    figures = registry.size_figures(
        rates=rates,
        power=power,
        alpha=alpha,
        discordant=discordant,
        rate=rate,
        runs=runs,
        measured=measured,
        tasks=tasks_count or [],
        attempts=attempts or [],
        task_sd=task_sd,
    )
    if system is not None:
        figures["system"] = system
    if output is SummaryFormat.json:
        typer.echo(to_json(figures))
        return
    _print_size(figures)


def _row(frozen: FrozenPlan, replaced_by: str | None) -> dict[str, Any]:
    spec = frozen.plan
    return {
        "plan_id": frozen.plan_id,
        "name": spec.name,
        "tasks": len(spec.tasks),
        "arms": 1 + len(spec.arms.candidates),
        "commit_seq": frozen.commit_seq,
        "created_at": frozen.created_at,
        "replaces": frozen.replaces,
        "replaced_by": replaced_by,
    }


def _print_status(document: dict[str, Any]) -> None:
    state = "complete" if document["complete"] else "incomplete"
    typer.echo(
        f"plan {document['plan_id']}: {state}, {document['cells_complete']} of "
        f"{document['cells_planned']} cells, {document['attempts_valid']} of "
        f"{document['attempts_planned']} planned valid attempts"
    )
    columns = ["task_id", "arm", "planned", "valid", "missing", "invalid"]
    rows = [
        [
            c["task_id"],
            c["arm"],
            c["planned"],
            c["valid"],
            c["missing"],
            ", ".join(f"{k} {n}" for k, n in c["invalid"].items()) or "none",
        ]
        for c in document["cells"]
    ]
    print_table(stdout, columns, rows)
    if document["outside"]:
        typer.echo(f"{len(document['outside'])} attempts claim the plan but fall outside it:")
        print_table(
            stdout,
            ["attempt", "task_id", "system", "reasons"],
            [
                [
                    registry.short(o["attempt_id"]),
                    o["task_id"],
                    o["system"],
                    "; ".join(o["reasons"]),
                ]
                for o in document["outside"]
            ],
        )


def _print_size(figures: dict[str, Any]) -> None:
    lines = []
    if "attempts_per_arm" in figures:
        p1, p2 = figures["rates"]
        lines.append(
            f"attempts per arm to tell {p1:g} from {p2:g} (power {figures['power']:g}, "
            f"alpha {figures['alpha']:g}): {figures['attempts_per_arm']}"
        )
    if "discordant_pairs" in figures:
        d = figures["discordant"]
        lines.append(
            f"discordant pairs at psi {figures['psi']:g}: {figures['discordant_pairs']} "
            f"(exact sign test; power stays above target from {d['exact_stable_n']}; "
            f"crude formula {d['crude']:.2f})"
        )
    if "binomial" in figures:
        b = figures["binomial"]
        lines.append(
            f"an agent at {b['rate']:g} over {b['runs']} runs reads as a minority "
            f"{100 * b['minority']:.1f}% of the time, passes every run {100 * b['all_pass']:.1f}%, "
            f"fails at least once {100 * b['any_failure']:.1f}%"
        )
    for line in lines:
        typer.echo(line)
    if "mdd" in figures:
        typer.echo(
            f"MDD from {figures['measured_tasks']} measured task rates of {figures['system']} "
            f"(task SD {figures['task_sd']:g}):"
        )
        print_table(
            stdout,
            ["tasks", "attempts", "attempts_per_arm", "mdd"],
            [
                [c["tasks"], c["attempts"], c["attempts_per_arm"], _points(c["mdd"])]
                for c in figures["mdd"]
            ],
        )


def _points(value: float | None) -> str:
    return "undefined" if value is None else f"{100 * value:.1f} points"


__all__ = ["plan_app"]
