"""`registry.regressions/1`: per task, a tracked system's newest sample against an older one."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import ConfigDict, Field

from ._base import SchemaModel
from .report import Rate

REGRESSIONS_SCHEMA: Final = "registry.regressions/1"
_CONFIG = ConfigDict(extra="forbid", frozen=True)

Direction = Literal["down", "up", "steady"]


class SampleCounts(SchemaModel):
    """One sample (task × cohort × observed system) as a regression check sees it."""

    model_config = _CONFIG

    cohort_key: str
    """Cohort key of the sample (all cohort inputs, task included)."""
    system: dict[str, str | None]
    """Observed system: agent, agent_version, provider (`unobserved` for legacy evidence),
    model and harness_version."""
    run: str | None
    """For a model-unobserved system, the run (experiment) the sample comes from; else null."""
    system_label: str
    """One-line label naming every observed-system field."""
    generation: int
    """Ledger sequence of the commit that first made the sample's oldest attempt visible."""
    lineage_depth: int
    """Regrade depth (0 for original evidence, 1 for a regrade of it, ...)."""
    first_commit_seq: int
    """Lowest commit sequence among the sample's attempts."""
    last_commit_seq: int
    """Highest commit sequence among the sample's attempts."""
    attempts: int
    """Attempts in the sample, invalid ones included."""
    valid: int
    """Attempts in the reliability denominator."""
    resolved: int
    """Valid attempts that resolved the task."""
    resolved_rate: Rate
    """resolved / valid with its Wilson 95% interval; null when valid is 0."""
    inputs: dict[str, Any]
    """The sample's cohort inputs."""


class Change(SchemaModel):
    """One field that differs between the older and the newer sample."""

    model_config = _CONFIG

    kind: Literal["input", "system"]
    """`input` for a cohort input, `system` for an observed-system field (or the run)."""
    field: str
    """Name of the cohort input or observed-system field."""
    before: Any
    """Value in the older sample."""
    after: Any
    """Value in the newer sample."""


class TaskRegression(SchemaModel):
    """A task whose tracked system has two samples to compare."""

    model_config = _CONFIG

    task_id: str
    track: str
    """The tracked system: `agent_system_digest <digest>` or the `--track` selector."""
    before: SampleCounts
    """The older sample."""
    after: SampleCounts
    """The newer sample."""
    changes: list[Change]
    """Cohort inputs and observed-system fields that differ between the samples."""
    difference: float
    """after resolved rate − before resolved rate."""
    p: float
    """Fisher exact two-sided p-value of resolved vs unresolved over valid attempts."""
    p_holm: float
    """`p` Holm-adjusted across every task comparison of this report."""
    direction: Direction
    """`down`: the newer Wilson interval lies entirely below the older one and p_holm < alpha;
    `up` symmetrically; otherwise `steady`."""


class NotExamined(SchemaModel):
    """A task (of a track) that could not be compared, and why."""

    model_config = _CONFIG

    task_id: str
    track: str
    samples: int
    """Samples of the task in this track (in `--since` mode: on both sides together)."""
    reason: str


class RegressionCounts(SchemaModel):
    """How many task comparisons went each way."""

    model_config = _CONFIG

    down: int
    up: int
    steady: int
    not_examined: int


class RegressionReport(SchemaModel):
    """`registry.regressions/1`."""

    model_config = _CONFIG

    schema_: Literal["registry.regressions/1"] = Field(REGRESSIONS_SCHEMA, alias="schema")
    tracks: list[str]
    """The tracked systems: selectors given with `--track`, else one per agent_system_digest."""
    mode: Literal["generations", "since"]
    """`generations`: newest sample against the one before it; `since`: the newest sample
    committed at or before `since_commit_seq` against the newest committed after it."""
    since: str | None
    """The `--since` value as given (a commit sequence or a date), or null."""
    since_commit_seq: int | None
    """The commit sequence `since` resolves to (0 when no commit precedes the date)."""
    as_of: str | None
    """The `--as-of` value as given, or null for the whole ledger."""
    tasks: list[str]
    """Tasks the report was restricted to (empty: every task)."""
    include_retracted: bool
    alpha: float
    """Significance level applied to Holm-adjusted p-values."""
    adjustment: str
    """How p-values were adjusted, e.g. `Holm-adjusted across 6 tasks`."""
    comparisons: int
    """Number of task comparisons the adjustment spans."""
    snapshot: dict[str, Any]
    """Evidence digest, attempt count and newest commit of the evidence read."""
    counts: RegressionCounts
    examined: list[TaskRegression]
    not_examined: list[NotExamined]
