"""Frozen evaluation plans: decide the matrix, the bar and the rule before the first result.

A plan (`registry_schemas.Plan`) is read from JSON or YAML, validated, and frozen: its
document is the canonical JSON (RFC 8785) of the validated plan with `tasks_digest` filled
in, its digest (`plan_id`) is blake3 of those bytes, and it is written once under
`plans/<hex>.json` and recorded by a `plan` commit. Freezing the same plan again finds the
same object and the same commit. A frozen plan is never edited: an edit is a new plan whose
`replaces` names the digest of the plan it replaces (a plan whose `name` is already frozen
must name its predecessor).

`plan_status` counts, per task × arm cell, the planned and the valid attempts among those that
claim the plan (`plan_id`); an attempt claiming the plan falls outside it when its task is
not in the plan, its system is not an arm, a held-fixed cohort input differs, or it ran
above the plan's budget (runtime, cost or tokens per attempt). Attempts outside the plan
fill no cell. The evidence rule (`registry.evidence.rule`) decides which attempts count at all.
"""

from __future__ import annotations

import importlib
import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from registry.errors import IntegrityError, ObjectNotFoundError, RegistryError
from registry.evidence.rule import ENVELOPE_KEYS, INVALID, observed_identity, system_label
from registry.evidence.selection import (
    Scope,
    Selector,
    SelectorError,
    parse_selector,
    read_evidence,
)
from registry.storage import ledger
from registry.storage.canonical import canonical_json
from registry.storage.digest import digest_bytes, digest_json, hex_of
from registry.storage.store import Store
from registry_schemas import Plan

PLANS_DIR = "plans"
MIN_PREFIX = 8
"""Shortest hex prefix that names a frozen plan (shorter text is a plain plan_id label)."""
_SYSTEM_KEYS = {"agent_system", "agent_system_digest", *ENVELOPE_KEYS}


class PlanError(RegistryError, ValueError):
    """A plan is malformed, unknown, or a call contradicts a frozen plan."""


@dataclass(frozen=True)
class FrozenPlan:
    """A plan as the ledger records it."""

    plan_id: str
    plan: Plan
    path: str
    commit_seq: int
    created_at: str

    @property
    def replaces(self) -> str | None:
        """The digest of the plan this one replaces, if any."""
        return self.plan.replaces


def plan_path(digest: str) -> str:
    """Return the root-relative path of a frozen plan object."""
    return f"{PLANS_DIR}/{hex_of(digest)}.json"


def read_plan_file(path: Path) -> Plan:
    """Read and validate a plan file: JSON, or YAML when named `*.yaml`/`*.yml`.

    Raises:
        PlanError: unreadable, not an object, or invalid (one line naming the field).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanError(f"{path}: cannot read plan ({exc})") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        data = _parse_yaml(text, path)
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PlanError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    return validate_plan(data, str(path))


def validate_plan(data: Any, source: str = "plan") -> Plan:
    """Validate a plan document; every error is one line naming the field.

    Raises:
        PlanError: a required field is missing (e.g. `threshold`, `decision_rule`), a split
            names an unknown task, an arm selector names no system, or a value is invalid.
    """
    if not isinstance(data, dict):
        raise PlanError(f"{source}: a plan is an object with tasks, arms, attempts_per_task, …")
    try:
        plan = Plan.model_validate(data)
    except ValidationError as exc:
        raise PlanError(f"{source}: {_first_error(exc)}") from None
    for role, text in [("baseline", plan.arms.baseline)] + [
        ("candidate", c) for c in plan.arms.candidates
    ]:
        try:
            selector = parse_selector(text)
        except SelectorError as exc:
            raise PlanError(f"{source}: arms.{role}: {exc}") from None
        if not {key for key, _ in selector.terms} & _SYSTEM_KEYS:
            raise PlanError(
                f"{source}: arms.{role} '{text}' names no system; give agent_system=… or an "
                f"observed identity ({', '.join(ENVELOPE_KEYS)})"
            )
    arms = [plan.arms.baseline, *plan.arms.candidates]
    if len(set(arms)) != len(arms):
        raise PlanError(f"{source}: arms: a selector appears twice; every arm is distinct")
    if plan.tasks_digest is not None and plan.tasks_digest != digest_json(plan.tasks):
        raise PlanError(
            f"{source}: tasks_digest does not match the task list; omit it (freeze fills it in)"
        )
    return plan


def plan_document(plan: Plan) -> dict[str, Any]:
    """Return the document a plan is frozen as: the validated plan with its tasks digest."""
    document: dict[str, Any] = plan.model_dump(mode="json", by_alias=True)
    document["tasks_digest"] = digest_json(plan.tasks)
    return document


def plan_digest(plan: Plan) -> str:
    """Return a plan's id: blake3 of the canonical JSON of its document."""
    return digest_bytes(canonical_json(plan_document(plan)))


def freeze_plan(store: Store, plan: Plan) -> tuple[FrozenPlan, bool]:
    """Store a plan once and record it by a `plan` commit; return it and whether it is new.

    Raises:
        PlanError: `replaces` names no frozen plan, or the plan's name is already frozen
            under another digest and the plan does not name that predecessor.
    """
    document = plan_document(plan)
    data = canonical_json(document)
    digest = digest_bytes(data)
    frozen = list_plans(store)
    if plan.replaces is not None and not any(p.plan_id == plan.replaces for p in frozen):
        raise PlanError(f"replaces {plan.replaces}: no such frozen plan; see registry plan list")
    if plan.name is not None and plan.replaces is None:
        earlier = [p for p in frozen if p.plan.name == plan.name and p.plan_id != digest]
        if earlier:
            raise PlanError(
                f"plan '{plan.name}' is already frozen as {earlier[-1].plan_id}; a frozen plan "
                f"is never edited: name it in 'replaces' (or --replaces) to freeze the edit"
            )
    path = plan_path(digest)
    with store.temp_area() as area:
        store.put_bytes(data, path, area)

    def recorded() -> ledger.LedgerEntry | None:
        for entry in ledger.read_ledger(store):
            if entry.commit.plan is not None and entry.commit.plan.digest == digest:
                return entry
        return None

    fields = {"kind": "plan", "plan": {"digest": digest, "path": path, "replaces": plan.replaces}}
    entry, created = ledger.append(store, fields, already=recorded)
    return FrozenPlan(digest, validate_plan(document), path, entry.seq, entry.commit.created_at), (
        created
    )


def list_plans(store: Store, as_of: str | int | None = None) -> list[FrozenPlan]:
    """Return every frozen plan, oldest first, each checked against its digest.

    Raises:
        IntegrityError: a plan object is missing or no longer matches its digest.
    """
    entries = ledger.entries_as_of(ledger.read_ledger(store), as_of)
    plans: list[FrozenPlan] = []
    seen: set[str] = set()
    for entry in entries:
        recorded = entry.commit.plan
        if recorded is None or recorded.digest in seen:
            continue
        seen.add(recorded.digest)
        plan = _read_object(store, recorded.path, recorded.digest)
        plans.append(
            FrozenPlan(recorded.digest, plan, recorded.path, entry.seq, entry.commit.created_at)
        )
    return plans


def find_plan(store: Store, ident: str, as_of: str | int | None = None) -> FrozenPlan | None:
    """Return the frozen plan `ident` names (digest, hex or a unique hex prefix), or None.

    Text that is not at least `MIN_PREFIX` hex digits (after an optional `blake3:`) names no
    frozen plan: it is a plain `plan_id` label.

    Raises:
        PlanError: the prefix matches several frozen plans.
    """
    wanted = hex_of(ident.strip()).lower()
    if len(wanted) < MIN_PREFIX or any(c not in "0123456789abcdef" for c in wanted):
        return None
    matches = [p for p in list_plans(store, as_of) if hex_of(p.plan_id).startswith(wanted)]
    if len(matches) > 1:
        raise PlanError(f"plan '{ident}' matches {len(matches)} frozen plans; give more digits")
    return matches[0] if matches else None


def load_plan(store: Store, ident: str, as_of: str | int | None = None) -> FrozenPlan:
    """Return the frozen plan `ident` names.

    Raises:
        ObjectNotFoundError: no frozen plan matches.
        PlanError: the prefix is ambiguous.
    """
    found = find_plan(store, ident, as_of)
    if found is None:
        raise ObjectNotFoundError(
            f"no frozen plan matches '{ident}'; list them with: registry plan list"
        )
    return found


def outside_reasons(plan: Plan, row: dict[str, Any]) -> list[str]:
    """Return why an attempt claiming the plan falls outside it (task, held-fixed, budget).

    Whether its system is an arm is decided by the arm selectors (see `plan_status`).
    """
    reasons = []
    if row["task_id"] not in plan.tasks:
        reasons.append("task not in the plan")
    for key, held in sorted(plan.held_fixed.items()):
        given = row["inputs"].get(key)
        if given != held:
            reasons.append(f"{key} is {_shown(given)}, the plan holds {_shown(held)}")
    budget = plan.budget
    runtime, cost = row.get("runtime_seconds"), row.get("cost_usd")
    if budget.time_seconds is not None and runtime is not None and runtime > budget.time_seconds:
        reasons.append(f"runtime {runtime:g} s above the budget of {budget.time_seconds:g} s")
    if budget.cost_usd is not None and cost is not None and cost > budget.cost_usd:
        reasons.append(f"cost ${cost:g} above the budget of ${budget.cost_usd:g}")
    tokens = [row.get("input_tokens"), row.get("output_tokens")]
    if budget.tokens is not None and any(t is not None for t in tokens):
        used = sum(t for t in tokens if t is not None)
        if used > budget.tokens:
            reasons.append(f"{used} tokens above the budget of {budget.tokens}")
    return reasons


def outside_clause(plan: Plan) -> tuple[str, list[Any]]:
    """Return a SQL condition over `attempts` that holds where `outside_reasons` is non-empty.

    The same rule as `outside_reasons`, for grouping inside DuckDB; a test checks they agree.
    """
    parts = ["NOT list_contains(?, task_id)"]
    params: list[Any] = [list(plan.tasks)]
    for key, held in sorted(plan.held_fixed.items()):
        if key == "budget":
            parts.append("inputs.budget IS DISTINCT FROM ?")
            params.append(canonical_json(held).decode())
        elif isinstance(held, str):
            parts.append(f"inputs.{key} IS DISTINCT FROM ?")
            params.append(held)
        else:
            parts.append("true")  # a cohort input is text: a non-text value never matches
    budget = plan.budget
    if budget.time_seconds is not None:
        parts.append("coalesce(runtime_seconds > ?, false)")
        params.append(budget.time_seconds)
    if budget.cost_usd is not None:
        parts.append("coalesce(cost_usd > ?, false)")
        params.append(budget.cost_usd)
    if budget.tokens is not None:
        parts.append(
            "(coalesce(input_tokens, output_tokens) IS NOT NULL"
            " AND coalesce(input_tokens, 0) + coalesce(output_tokens, 0) > ?)"
        )
        params.append(budget.tokens)
    return "(" + " OR ".join(parts) + ")", params


def arm_selectors(plan: Plan) -> list[tuple[str, Selector]]:
    """Return (arm name, selector) for the baseline and each candidate."""
    arms = [("baseline", parse_selector(plan.arms.baseline))]
    return arms + [
        (f"candidate {i}" if len(plan.arms.candidates) > 1 else "candidate", parse_selector(c))
        for i, c in enumerate(plan.arms.candidates, start=1)
    ]


@dataclass(frozen=True)
class Cell:
    """One task × arm cell of a plan: planned against valid attempts."""

    task_id: str
    arm: str
    selector: str
    planned: int
    valid: int
    invalid: dict[str, int]

    @property
    def missing(self) -> int:
        """Valid attempts still to run (0 when the cell is full)."""
        return max(0, self.planned - self.valid)


@dataclass(frozen=True)
class PlanStatus:
    """How far a plan's evidence has come, and what claims the plan but falls outside it."""

    plan: FrozenPlan
    cells: list[Cell]
    outside: list[dict[str, Any]]
    """Attempts claiming the plan outside it: attempt_id, task_id, system, arm, reasons."""
    totals: dict[str, Any] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Whether every cell holds its planned valid attempts."""
        return all(c.missing == 0 for c in self.cells)

    def as_json(self) -> dict[str, Any]:
        """Return the status as a JSON object."""
        reasons = Counter(_kind(r) for o in self.outside for r in o["reasons"])
        return {
            "plan_id": self.plan.plan_id,
            "name": self.plan.plan.name,
            "complete": self.complete,
            "cells_planned": len(self.cells),
            "cells_complete": sum(c.missing == 0 for c in self.cells),
            "attempts_planned": sum(c.planned for c in self.cells),
            "attempts_valid": sum(min(c.valid, c.planned) for c in self.cells),
            "attempts_missing": sum(c.missing for c in self.cells),
            "cells": [
                {
                    "task_id": c.task_id,
                    "arm": c.arm,
                    "selector": c.selector,
                    "planned": c.planned,
                    "valid": c.valid,
                    "missing": c.missing,
                    "invalid": dict(sorted(c.invalid.items())),
                }
                for c in self.cells
            ],
            "outside": self.outside,
            "outside_counts": {k: reasons.get(k, 0) for k in _OUTSIDE_KINDS},
            "extra_tasks": sorted(
                {o["task_id"] for o in self.outside if "task not in the plan" in o["reasons"]}
            ),
            "systems_not_arms": sorted(
                {o["system"] for o in self.outside if "system not an arm" in o["reasons"]}
            ),
            "totals": self.totals,
        }


_OUTSIDE_KINDS = ("extra_task", "system_not_arm", "held_fixed", "budget")


def plan_status(
    store: Store,
    frozen: FrozenPlan,
    *,
    as_of: str | int | None = None,
    include_retracted: bool = False,
) -> PlanStatus:
    """Count planned vs valid attempts per task × arm among the attempts claiming the plan.

    Under an `excused` timeout policy a timeout fills no cell and is counted as invalid.
    """
    plan = frozen.plan
    evidence = read_evidence(
        store, Scope(plan=frozen.plan_id), as_of=as_of, include_retracted=include_retracted
    )
    arms = arm_selectors(plan)
    excused = plan.timeout_policy.timeouts == "excused"
    valid: Counter[tuple[str, str]] = Counter()
    invalid: dict[tuple[str, str], Counter[str]] = {}
    outside = []
    for row in evidence.rows:
        reasons = outside_reasons(plan, row)
        matched = [name for name, selector in arms if selector.matches(row)]
        if not matched:
            reasons.append("system not an arm")
        if reasons:
            outside.append(
                {
                    "attempt_id": row["attempt_id"],
                    "task_id": row["task_id"],
                    "system": system_label(observed_identity(row), row["run"]),
                    "arm": matched[0] if matched else None,
                    "terminal_class": row["terminal_class"],
                    "reasons": reasons,
                }
            )
            continue
        cell = (row["task_id"], matched[0])
        outcome = row["terminal_class"]
        if outcome in INVALID or (excused and outcome == "timeout"):
            invalid.setdefault(cell, Counter())[outcome] += 1
        else:
            valid[cell] += 1
    cells = [
        Cell(
            task,
            arm,
            selector.text,
            plan.attempts_per_task,
            valid[(task, arm)],
            dict(invalid.get((task, arm), {})),
        )
        for task in plan.tasks
        for arm, selector in arms
    ]
    claimed = evidence.rows
    runtime = [r["runtime_seconds"] for r in claimed if r["runtime_seconds"] is not None]
    cost = [r["cost_usd"] for r in claimed if r["cost_usd"] is not None]
    totals = {
        "attempts_claiming_plan": len(claimed),
        "slot_conflicts": len(evidence.conflicting),
        "runtime_seconds": math.fsum(runtime) if runtime else None,
        "cost_usd": math.fsum(cost) if cost else None,
        "cost_unavailable": len(claimed) - len(cost),
    }
    outside.sort(key=lambda o: (o["task_id"], o["attempt_id"]))
    return PlanStatus(frozen, cells, outside, totals)


def system_rates(
    store: Store,
    system: Selector,
    scope: Scope | None = None,
    *,
    as_of: str | int | None = None,
    include_retracted: bool = False,
) -> dict[str, float]:
    """Return a system's measured per-task resolved rates, exactly as `registry noise` reads them.

    Raises:
        SelectorError: the selector matches no task with a valid attempt, or several suite units.
    """
    from registry.analysis.noise import noise_floor

    floor = noise_floor(
        store,
        system,
        scope,
        simulations=1,
        attempts=(1,),
        as_of=as_of,
        include_retracted=include_retracted,
    )
    return dict(sorted(floor.rates.items()))


def size_figures(
    *,
    rates: tuple[float, float] | None = None,
    power: float = 0.8,
    alpha: float = 0.05,
    discordant: float | None = None,
    rate: float | None = None,
    runs: int = 5,
    measured: dict[str, float] | None = None,
    tasks: Sequence[int] = (),
    attempts: Sequence[int] = (),
    task_sd: float = 0.0,
) -> dict[str, Any]:
    """Return the planning figures asked for (STATISTICS.md §4), as a JSON object.

    `rates` gives `attempts_per_arm` (two independent proportions), `discordant` gives
    `discordant_pairs` (the first n at which the exact sign test on discordant pairs reaches
    the power), `rate` gives the binomial facts of `runs` attempts, and `measured` per-task
    rates give the MDD of every T tasks × K attempts (T defaults to the measured task count).

    Raises:
        PlanError: nothing was asked for, or a figure's arguments are out of range.
    """
    from registry.analysis import planning

    if rates is None and discordant is None and rate is None and measured is None:
        raise PlanError("give --rates P1 P2, --discordant PSI, --rate P [--runs K] or --system SEL")
    out: dict[str, Any] = {"power": power, "alpha": alpha}
    try:
        if rates is not None:
            size = planning.sample_size_two_proportions(rates[0], rates[1], alpha, power)
            out["rates"] = list(rates)
            out["attempts_per_arm"] = size.n_per_arm
            out["attempts_per_arm_raw"] = size.n_per_arm_raw
        if discordant is not None:
            pairs = planning.sample_size_mcnemar_discordant(discordant, alpha, power)
            out["psi"] = discordant
            out["discordant_pairs"] = pairs.exact_first_n
            out["discordant"] = {
                "exact_first_n": pairs.exact_first_n,
                "exact_stable_n": pairs.exact_stable_n,
                "crude": pairs.crude_raw,
                "crude_ceil": pairs.crude_ceil,
                "normal_alt_variance": pairs.normal_alt_variance_raw,
                "normal_alt_variance_ceil": pairs.normal_alt_variance_ceil,
            }
        if rate is not None:
            facts = planning.binomial_facts(rate, runs)
            out["binomial"] = {
                "rate": facts.rate,
                "runs": facts.runs,
                "minority": facts.minority,
                "all_pass": facts.all_pass,
                "any_failure": facts.any_failure,
                "none_pass": facts.none_pass,
            }
        if measured is not None:
            probabilities = [measured[t] for t in sorted(measured)]
            grid = planning.mdd_what_if(
                probabilities,
                list(tasks) or [len(probabilities)],
                list(attempts) or [1, 2, 3, 5, 10],
                task_sd,
            )
            out["measured_tasks"] = len(probabilities)
            out["task_sd"] = task_sd
            out["mdd"] = [
                {
                    "tasks": c.tasks,
                    "attempts": c.attempts,
                    "attempts_per_arm": c.attempts_per_arm,
                    "mdd": c.mdd,
                }
                for c in grid
            ]
    except ValueError as exc:
        raise PlanError(f"plan size: {exc}") from None
    return out


def _kind(reason: str) -> str:
    if reason == "task not in the plan":
        return "extra_task"
    if reason == "system not an arm":
        return "system_not_arm"
    if "above the budget" in reason:
        return "budget"
    return "held_fixed"


def _read_object(store: Store, path: str, digest: str) -> Plan:
    try:
        data = store.resolve(path).read_bytes()
    except OSError:
        raise IntegrityError(f"{path}: frozen plan missing; run registry verify") from None
    if digest_bytes(data) != digest:
        raise IntegrityError(f"{path}: altered; its bytes no longer match its digest")
    try:
        return Plan.model_validate_json(data)
    except ValidationError as exc:
        raise IntegrityError(f"{path}: not a valid plan ({_first_error(exc)})") from None


def _parse_yaml(text: str, path: Path) -> Any:
    try:
        yaml: Any = importlib.import_module("yaml")
    except ImportError:
        raise PlanError(
            f"{path}: YAML plans need PyYAML (pip install pyyaml); or use JSON"
        ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        first = str(exc).replace("\n", " ")
        raise PlanError(f"{path}: not YAML ({first})") from None


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    place = ".".join(str(p) for p in error["loc"]) or "plan"
    if error["type"] == "missing":
        return (
            f"{place}: missing (a plan needs tasks, arms, attempts_per_task, alpha, "
            "threshold, decision_rule and stop_rule)"
        )
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{place}: {message}"


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def missing_summary(status: PlanStatus) -> list[str]:
    """Return one line per incomplete cell: task, arm, valid of planned."""
    return [
        f"{c.task_id} × {c.arm}: {c.valid} of {c.planned} valid attempts"
        for c in status.cells
        if c.missing
    ]


__all__ = [
    "FrozenPlan",
    "PlanError",
    "PlanStatus",
    "find_plan",
    "freeze_plan",
    "list_plans",
    "load_plan",
    "plan_digest",
    "plan_document",
    "plan_status",
    "size_figures",
    "system_rates",
    "read_plan_file",
    "validate_plan",
]
