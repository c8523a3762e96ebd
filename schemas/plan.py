"""`registry.plan/1`: a frozen evaluation plan, decided before the first result.

A plan fixes what a comparison will look at and how it will decide: the task list (with named
splits, so a team can tune on one and report on another), the arms, the cohort inputs held
fixed across arms, attempts per task per arm, the budget, the primary metric, the reliability
threshold, alpha and the multiple-comparison policy, the timeout policy, the decision rule and
the stop rule. `registry plan freeze` stores it as a content-addressed object; its digest is
the `plan_id` the plan's attempts carry.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import ConfigDict, Field, model_validator

from ._base import SchemaModel
from .attempt import CONFIGURATION_INPUTS, DIGEST_PATTERN

PLAN_SCHEMA: Final = "registry.plan/1"
VERDICT_TABLE: Final = "registry.compare/2"
"""The verdict table `registry compare` applies (d̄ against the MDD, Holm-adjusted sign test)."""
HELD_FIXED_INPUTS = CONFIGURATION_INPUTS
"""Cohort inputs a plan may hold fixed across its arms (the task's own inputs vary by task)."""

_CONFIG = ConfigDict(extra="forbid", frozen=True)
_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)
Digest = Annotated[str, Field(pattern=DIGEST_PATTERN)]
NonEmpty = Annotated[str, Field(min_length=1)]
Probability = Annotated[float, Field(gt=0.0, lt=1.0)]
VerdictCode = Literal[
    "no_detectable_difference",
    "ahead",
    "behind",
    "heavy_tasks",
    "saturated",
    "too_few_tasks",
]


class PlanArms(SchemaModel):
    """The arms, as `registry compare` selectors naming a system."""

    model_config = _CONFIG

    baseline: NonEmpty
    """Baseline selector, e.g. `agent_system=blake3:…` or `agent=coder,model=m-1`."""
    candidates: list[NonEmpty] = Field(min_length=1)
    """Candidate selectors (Holm-adjusted together)."""


class PrimaryMetric(SchemaModel):
    """What the plan measures per task."""

    model_config = _CONFIG

    name: Literal["resolved_rate", "pass_at_k", "pass_hat_k"] = "resolved_rate"
    """`resolved_rate` (resolved / valid), `pass_at_k` or `pass_hat_k` (needs `k`)."""
    k: Annotated[int, Field(ge=1)] | None = None
    """k of pass@k or pass^k; null for the resolved rate."""

    @model_validator(mode="after")
    def _k_matches(self) -> PrimaryMetric:
        if self.name == "resolved_rate" and self.k is not None:
            raise ValueError("resolved_rate takes no k")
        if self.name != "resolved_rate" and self.k is None:
            raise ValueError(f"{self.name} needs k")
        return self


class Threshold(SchemaModel):
    """The reliability bar the primary metric must clear, and the category it belongs to."""

    model_config = _CONFIG

    value: Annotated[float, Field(ge=0.0, le=1.0)]
    """The bar, as a proportion (0.6 = 60%)."""
    category: NonEmpty
    """What the bar is for, e.g. `release gate` or `internal tooling`."""


class Budget(SchemaModel):
    """Limits per attempt (null: no limit). An attempt above a limit falls outside the plan."""

    model_config = _CONFIG

    time_seconds: Annotated[float, Field(gt=0)] | None = None
    """Runtime per attempt."""
    cost_usd: Annotated[float, Field(ge=0)] | None = None
    """Cost per attempt."""
    tokens: Annotated[int, Field(ge=0)] | None = None
    """Input plus output tokens per attempt."""


class TimeoutPolicy(SchemaModel):
    """How a timeout counts: the model's failure (default) or excused (dropped as invalid)."""

    model_config = _CONFIG

    timeouts: Literal["model_failure", "excused"] = "model_failure"
    rationale: str | None = None
    """Why timeouts are excused; required when they are."""

    @model_validator(mode="after")
    def _argued(self) -> TimeoutPolicy:
        if self.timeouts == "excused" and not (self.rationale or "").strip():
            raise ValueError("excused timeouts need a rationale")
        return self


def _adopt_default() -> list[VerdictCode]:
    return ["ahead"]


def _reject_default() -> list[VerdictCode]:
    return ["behind"]


class DecisionRule(SchemaModel):
    """How a comparison's verdict becomes a decision."""

    model_config = _CONFIG

    table: Literal["registry.compare/2"] = VERDICT_TABLE
    """The verdict table applied (the registry's: d̄ vs MDD and the Holm-adjusted sign test)."""
    adopt_if: list[VerdictCode] = Field(default_factory=_adopt_default, min_length=1)
    """Verdicts that adopt the candidate (when it also clears the threshold)."""
    reject_if: list[VerdictCode] = Field(default_factory=_reject_default)
    """Verdicts that reject the candidate; any other verdict leaves it unproven."""

    @model_validator(mode="after")
    def _disjoint(self) -> DecisionRule:
        both = sorted(set(self.adopt_if) & set(self.reject_if))
        if both:
            raise ValueError(f"verdicts {both} both adopt and reject")
        return self


class StopRule(SchemaModel):
    """When the plan stops: how many looks it allows and what ends it."""

    model_config = _CONFIG

    max_looks: Annotated[int, Field(ge=1)] = 1
    """Comparisons the plan allows of each candidate against the baseline."""
    text: NonEmpty
    """The rule in words, e.g. `stop after the planned attempts; no early stopping`."""


class Plan(SchemaModel):
    """`registry.plan/1`: an experiment spec, frozen before its first comparison."""

    model_config = _CONFIG

    schema_: Literal["registry.plan/1"] = Field(PLAN_SCHEMA, alias="schema")
    name: str | None = None
    """A human label; the plan is identified by its digest."""
    tasks: list[NonEmpty] = Field(min_length=1)
    """Every task of the plan, explicitly, without duplicates."""
    tasks_digest: Digest | None = None
    """blake3 of the canonical JSON of `tasks` (filled in when frozen)."""
    splits: dict[str, list[NonEmpty]] = Field(default_factory=dict)
    """Named subsets of `tasks`, e.g. `development` and `reporting`."""
    reporting_split: str | None = None
    """The split comparisons report on (default: `reporting` when present, else every task)."""
    arms: PlanArms
    held_fixed: dict[str, Any] = Field(default_factory=dict)
    """Cohort inputs every arm's attempts must have, e.g. `{"grader_version": "grader-1.0"}`."""
    attempts_per_task: Annotated[int, Field(ge=1)]
    """Attempts per task per arm."""
    budget: Budget = Field(default_factory=Budget)
    primary_metric: PrimaryMetric = Field(default_factory=PrimaryMetric)
    threshold: Threshold
    alpha: Probability
    """Two-sided significance level of the decision."""
    multiple_comparisons: Literal["holm"] = "holm"
    """How p-values are adjusted across candidates."""
    timeout_policy: TimeoutPolicy = Field(default_factory=TimeoutPolicy)
    decision_rule: DecisionRule
    stop_rule: StopRule
    replaces: Digest | None = None
    """The plan this one replaces (its digest), when it is an edit of an earlier plan."""

    @model_validator(mode="after")
    def _consistent(self) -> Plan:
        seen: set[str] = set()
        for task in self.tasks:
            if task in seen:
                raise ValueError(f"task '{task}' is listed twice")
            seen.add(task)
        for name, members in self.splits.items():
            unknown = [t for t in members if t not in seen]
            if unknown:
                raise ValueError(f"split '{name}' names unknown task '{unknown[0]}'")
        if self.reporting_split is not None and self.reporting_split not in self.splits:
            raise ValueError(f"reporting_split '{self.reporting_split}' is not a split")
        foreign = sorted(set(self.held_fixed) - set(HELD_FIXED_INPUTS))
        if foreign:
            raise ValueError(
                f"held_fixed input '{foreign[0]}' is not one of {', '.join(HELD_FIXED_INPUTS)}"
            )
        return self

    def reporting_tasks(self) -> list[str]:
        """Return the tasks comparisons report on: the reporting split, or every task."""
        name = self.reporting_split or ("reporting" if "reporting" in self.splits else None)
        return list(self.splits[name]) if name is not None else list(self.tasks)


class PlanEntry(SchemaModel):
    """A frozen plan a `plan` commit records."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    digest: Digest
    """blake3 of the plan's canonical JSON bytes (the `plan_id` its attempts carry)."""
    path: str
    """Path relative to the registry root, `plans/<hex>.json`."""
    replaces: Digest | None = None
    """The plan this one replaces, if any."""
