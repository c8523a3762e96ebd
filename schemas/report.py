"""`registry.report/1`: the per-task evidence report (a derived, content-addressed layer)."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import ConfigDict, Field

from ._base import SchemaModel

REPORT_SCHEMA: Final = "registry.report/1"

_CONFIG = ConfigDict(extra="forbid", frozen=True)


class Rate(SchemaModel):
    """A proportion with its Wilson 95% interval; all null when the denominator is zero."""

    model_config = _CONFIG

    estimate: float | None
    """Point estimate."""
    low: float | None
    """Lower bound of the Wilson 95% score interval."""
    high: float | None
    """Upper bound of the Wilson 95% score interval."""


class RuntimeStats(SchemaModel):
    """Runtime over retained attempts (invalid ones included) whose runtime is known.

    Unavailable runtimes are counted, never treated as zero; every figure is null when none
    is known.
    """

    model_config = _CONFIG

    mean: float | None
    """Arithmetic mean of known runtimes, exactly summed."""
    median: float | None
    """Middle known value, or the mean of the two middle values."""
    p95: float | None
    """Nearest-rank 95th percentile of known runtimes: the ceil(0.95 n)-th smallest value."""
    known: int
    """Attempts with a recorded runtime."""
    unavailable: int
    """Attempts whose runtime is unavailable (null)."""


class CostStats(SchemaModel):
    """Cost over attempts whose cost is known; unavailable costs are counted, never zero."""

    model_config = _CONFIG

    total: float | None
    """Sum of known costs; null when none is known."""
    mean: float | None
    """Mean of known costs; null when none is known."""
    known: int
    """Attempts with a recorded cost."""
    unavailable: int
    """Attempts whose cost is unavailable (null)."""


class TokenStats(SchemaModel):
    """Token counts of one kind over attempts where they are known."""

    model_config = _CONFIG

    total: int | None
    """Sum of known counts; null when none is known."""
    mean: float | None
    """Mean of known counts; null when none is known."""
    known: int
    """Attempts with a recorded count."""
    unavailable: int
    """Attempts whose count is unavailable (null)."""


class CommitRef(SchemaModel):
    """A ledger commit that contributed evidence."""

    model_config = _CONFIG

    seq: int
    """Sequence number."""
    digest: str
    """Digest of the commit's bytes."""


class ExperimentProvenance(SchemaModel):
    """How much of a system's evidence came from one experiment, and from which commits."""

    model_config = _CONFIG

    experiment_id: str
    """The experiment."""
    attempts: int
    """Retained attempts from it."""
    valid: int
    """Valid attempts from it."""
    resolved: int
    """Resolved attempts from it."""
    retracted: int
    """Attempts of this experiment and system retracted from the evidence (not counted above)."""
    commits: list[CommitRef]
    """Commits its attempts were ingested in."""


class SystemIdentity(SchemaModel):
    """An observed system: `provider` is `unobserved` for evidence without terminal identity."""

    model_config = _CONFIG

    agent: str | None
    agent_version: str | None
    provider: str | None
    model: str | None
    harness_version: str | None


class SystemReport(SchemaModel):
    """The numbers of one observed system within one cohort."""

    model_config = _CONFIG

    system: SystemIdentity
    """Observed identity the attempts were grouped by."""
    run: str | None
    """For a model-unobserved system, the one run (experiment) its attempts come from: runs
    that record no model never pool. Null when the model is observed."""
    attempts: int
    """Retained attempts."""
    valid: int
    """Attempts in a valid terminal class (the reliability denominator)."""
    invalid: int
    """Infrastructure-invalid attempts."""
    resolved: int
    """Resolved attempts."""
    classes: dict[str, int]
    """Count per terminal class (all nine names)."""
    resolved_rate: Rate
    """Resolved / valid with Wilson 95%."""
    invalid_rate: Rate
    """Invalid / attempts with Wilson 95%."""
    consistency: float | None
    """max(resolved, valid - resolved) / valid."""
    runtime_seconds: RuntimeStats
    """Runtime statistics."""
    cost_usd: CostStats
    """Cost statistics."""
    tokens: dict[str, TokenStats]
    """`input`, `output`, `cached_input` token statistics."""
    pass_at_k: dict[str, float | None]
    """Unbiased pass@k for k = 1..min(valid, 10)."""
    pass_hat_k: dict[str, float | None]
    """pass^k (all k attempts succeed) for k = 1..min(valid, 10)."""
    undefined: dict[str, str]
    """Why a value is null, e.g. `{"resolved_rate": "0 valid attempts"}`."""
    flags: list[str]
    """Warnings a reader should see next to the numbers (small sample, unobserved provider)."""
    derived_from: list[str]
    """Attempt ids these attempts re-grade (regraded generations only)."""
    provenance: list[ExperimentProvenance]
    """Per experiment: counts and commits."""


class CohortReport(SchemaModel):
    """All systems observed in one cohort (identical eleven inputs)."""

    model_config = _CONFIG

    cohort_key: str
    """The cohort key."""
    inputs: dict[str, Any]
    """The eleven cohort inputs (task id and the ten `inputs`)."""
    regrades: list[str]
    """Cohort keys of the evidence this cohort re-grades (via `derived_from`), if any."""
    systems: list[SystemReport]
    """One entry per observed system."""


class Snapshot(SchemaModel):
    """The evidence a report covers."""

    model_config = _CONFIG

    evidence_digest: str
    """Digest of the sorted list of attempt ids covered."""
    attempts: int
    """Number of attempts covered."""
    last_commit_seq: int
    """Newest ledger commit that contributed one of them (not the ledger head)."""


class Generator(SchemaModel):
    """What produced the report; a new version may change the bytes for the same evidence."""

    model_config = _CONFIG

    name: str
    version: str


class TaskReport(SchemaModel):
    """`registry.report/1`."""

    model_config = _CONFIG

    schema_: Literal["registry.report/1"] = Field(REPORT_SCHEMA, alias="schema")
    """Format tag."""
    task_id: str
    """The task reported on."""
    snapshot: Snapshot
    """Evidence covered."""
    generator: Generator
    """Report generator and version."""
    held_out: dict[str, int]
    """Attempts of the task the evidence rule does not count: `retracted` (withdrawn by a
    retraction commit) and `slot_conflict` (two valid outcomes recorded for one experiment,
    task, repeat index, cohort and observed system: neither counts until one is retracted)."""
    cohorts: list[CohortReport]
    """One entry per cohort of the task."""
