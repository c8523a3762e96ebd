"""`registry.comparison/1`: paired, task-by-task comparisons of a baseline with candidates."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import ConfigDict, Field

from ._base import SchemaModel
from .report import Generator, Rate

COMPARISON_SCHEMA: Final = "registry.comparison/1"
_CONFIG = ConfigDict(extra="forbid", frozen=True)


class ArmCounts(SchemaModel):
    """Attempt counts of one arm on one paired task (or over the whole comparison)."""

    model_config = _CONFIG

    attempts: int
    valid: int
    invalid: int
    resolved: int


class ArmSummary(SchemaModel):
    """What an arm selected, over the tasks present in both arms."""

    model_config = _CONFIG

    selector: str
    """The selector text, e.g. `experiment=exp-1`."""
    counts: ArmCounts
    """Counts over tasks present in both arms."""
    invalid_rate: Rate
    """Invalid / attempts with Wilson 95%."""
    systems: list[dict[str, Any]]
    """Observed systems (identity and attempts) the arm's attempts came from."""
    experiments: list[str]
    """Experiments the arm's attempts came from."""


class PairedTask(SchemaModel):
    """One task rated by both arms."""

    model_config = _CONFIG

    task_id: str
    baseline: ArmCounts
    candidate: ArmCounts
    rate_baseline: float
    """resolved / valid of the baseline."""
    rate_candidate: float
    """resolved / valid of the candidate."""
    difference: float
    """rate_candidate − rate_baseline."""


class DroppedTask(SchemaModel):
    """A task that could not be paired, and why."""

    model_config = _CONFIG

    task_id: str
    reason: str
    differing_inputs: list[str] = Field(default_factory=list)
    """For a refused pairing: the cohort inputs that differ besides the varied one."""


class ExactTest(SchemaModel):
    """An exact binomial test with its Holm-adjusted p-value within this comparison set."""

    model_config = _CONFIG

    positive: int
    """Sign test: tasks with d > 0. McNemar: gained (baseline unresolved, candidate resolved)."""
    negative: int
    """Sign test: tasks with d < 0. McNemar: lost."""
    ties: int
    """Tasks without a direction (dropped from the test)."""
    p: float
    """Two-sided exact p-value."""
    p_holm: float
    """Holm–Bonferroni adjusted over the comparisons shown together."""


class Verdict(SchemaModel):
    """The decision-table outcome, never a bare point estimate."""

    model_config = _CONFIG

    code: Literal[
        "no_detectable_difference",
        "ahead",
        "behind",
        "heavy_tasks",
        "saturated",
        "too_few_tasks",
    ]
    text: str
    flags: list[str]
    """Conditions a reader must see beside the verdict: `single_run` (K = 1: noise and effect
    cannot be separated), `saturated` (most paired tasks at 0/K or K/K in both arms)."""
    notes: list[str]
    """One-line explanations where the figures could mislead (e.g. SE = 0, or a bootstrap
    interval that excludes zero under a "no detectable difference" verdict)."""


class CandidateComparison(SchemaModel):
    """Baseline vs one candidate."""

    model_config = _CONFIG

    candidate: ArmSummary
    """The candidate arm over the compared tasks and configuration."""
    baseline: ArmSummary
    """The baseline arm over the compared tasks and configuration."""
    excluded_attempts: dict[str, int]
    """Attempts of each arm not counted: tasks in one arm only, unshared or ambiguous cohorts."""
    tasks: list[PairedTask]
    dropped: list[DroppedTask]
    attempts_per_task: int | None
    """K: the smaller median of valid attempts per paired task across the two arms; null when
    no task pairs."""
    mean_difference: float | None
    """d̄ = mean over paired tasks of rate_candidate − rate_baseline."""
    sd: float | None
    se: float | None
    """sd(d, ddof=1) / sqrt(T)."""
    mdd: float | None
    """Minimum detectable difference = 2.8 · SE (α = 0.05 two-sided, power 0.8)."""
    bootstrap: dict[str, Any]
    """Paired percentile bootstrap of d̄: `low`, `high`, `seed`, `resamples`."""
    sign_test: ExactTest
    mcnemar: ExactTest
    """On binary task outcomes: a task counts as resolved iff its rate > 0.5."""
    invalid_independence_p: float | None
    """Fisher exact test of invalid vs valid counts between the arms."""
    warnings: list[str]
    verdict: Verdict
    look: int | None = None
    """How many comparisons of this candidate against this baseline (under this plan, or
    without one) the registry held, this one included; a look after the first is flagged."""
    looks_allowed: int | None = None
    """Looks the plan's stop rule allows; null without a plan."""
    baseline_inputs: dict[str, list[Any]] = Field(default_factory=dict)
    """The baseline arm's suite-configuration cohort inputs: input -> its distinct values."""
    candidate_inputs: dict[str, list[Any]] = Field(default_factory=dict)
    """The candidate arm's suite-configuration cohort inputs: input -> its distinct values."""
    decision: str | None = None
    """Under a plan: `adopt`, `reject` or `unproven`, by the plan's decision rule and threshold."""
    decision_text: str | None = None
    """Why the plan's decision rule gives that decision."""


class ComparisonSnapshot(SchemaModel):
    """The evidence a comparison covers."""

    model_config = _CONFIG

    evidence_digest: str
    attempts: int
    last_commit_seq: int


class Comparison(SchemaModel):
    """`registry.comparison/1`."""

    model_config = _CONFIG

    schema_: Literal["registry.comparison/1"] = Field(COMPARISON_SCHEMA, alias="schema")
    baseline: str
    """Baseline selector."""
    scope: dict[str, Any]
    """Restrictions applied to every arm (tasks, plan, experiment)."""
    vary: str
    """The one cohort input the arms may differ in (default `agent_system_digest`)."""
    snapshot: ComparisonSnapshot
    generator: Generator
    comparisons: list[CandidateComparison]
    plan_id: str | None = None
    """The frozen plan applied (its digest), or null."""
    exploratory: bool = False
    """Whether the call overrode the plan (`--exploratory`): never the plan's answer."""
    overrides: list[str] = Field(default_factory=list)
    """What an exploratory call changed from the plan (arms, tasks, timeout policy, …)."""
    post_hoc: bool = False
    """Whether the task scope is narrower than the plan's reporting split."""
    planned_tasks: int | None = None
    """Tasks of the plan's reporting split; null without a plan."""
