"""`registry.summary/1` and `registry.noise/1`: suite-level figures per system."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import ConfigDict, Field

from ._base import SchemaModel
from .report import CostStats, Generator, Rate, RuntimeStats

SUMMARY_SCHEMA: Final = "registry.summary/1"
NOISE_SCHEMA: Final = "registry.noise/1"
_CONFIG = ConfigDict(extra="forbid", frozen=True)


class PassK(SchemaModel):
    """Mean over tasks of a per-task estimate, and which tasks could not contribute."""

    model_config = _CONFIG

    mean: float | None
    """Unweighted mean over tasks with valid >= k."""
    tasks: int
    """Tasks included (valid >= k)."""
    excluded: int
    """Tasks excluded for having fewer than k valid attempts."""


class SystemSummary(SchemaModel):
    """One observed system under one suite configuration."""

    model_config = _CONFIG

    system: dict[str, str | None]
    """Observed identity (provider `unobserved` for legacy evidence)."""
    run: str | None
    """For a model-unobserved system, the one run (experiment) it comes from; else null."""
    configuration: dict[str, Any]
    """Cohort inputs shared by every task (all but task_id, case_digest, source_digest)."""
    configuration_digest: str
    """Digest of `configuration`: rows with different digests are never pooled."""
    tasks: int
    tasks_with_valid: int
    attempts: int
    valid: int
    invalid: int
    resolved: int
    pooled_resolved_rate: Rate
    """Σ resolved / Σ valid (attempt-weighted) with a NAIVE Wilson interval that treats
    attempts as independent; it understates uncertainty because attempts cluster in tasks."""
    task_mean_resolved_rate: float | None
    """Unweighted mean of per-task rates over tasks with valid >= 1."""
    clustered_se: float | None
    """CR1 clustered standard error of the pooled rate (clusters = tasks); null below 2 tasks."""
    clustered_interval: Rate
    """Pooled rate ± z·clustered SE, clipped to [0, 1]: the interval to quote."""
    pass_at_k: dict[str, PassK]
    pass_hat_k: dict[str, PassK]
    invalid_rate: Rate
    """Invalid / attempts with Wilson 95%."""
    runtime_seconds: RuntimeStats
    cost_usd: CostStats
    attempts_per_task: float | None
    """Median valid attempts per task (null without a valid attempt)."""
    expected_flips: float | None
    """Σ 2p(1−p): tasks expected to flip between two identical single-run evaluations; null
    when the median valid attempts per task is below 3 (too few to estimate per-task rates)."""
    undefined: dict[str, str]
    """Why a value is null."""


class Summary(SchemaModel):
    """`registry.summary/1`."""

    model_config = _CONFIG

    schema_: Literal["registry.summary/1"] = Field(SUMMARY_SCHEMA, alias="schema")
    scope: dict[str, Any]
    system_filter: str | None
    snapshot: dict[str, Any]
    generator: Generator
    systems: list[SystemSummary]


class NoiseFloor(SchemaModel):
    """`registry.noise/1`: what two identical evaluations of one system would disagree by."""

    model_config = _CONFIG

    schema_: Literal["registry.noise/1"] = Field(NOISE_SCHEMA, alias="schema")
    system: str
    """Selector of the system."""
    identity: dict[str, str | None]
    """The one observed system the selector matched (provider `unobserved` for legacy)."""
    run: str | None
    """For a model-unobserved system, the one run it comes from; else null."""
    configuration_digest: str
    """The one suite configuration the selector matched."""
    scope: dict[str, Any]
    snapshot: dict[str, Any]
    generator: Generator
    tasks: int
    """Tasks with at least one valid attempt."""
    attempts_per_task: float
    """Median valid attempts per task; below 3 the noise floor cannot be measured."""
    rates: dict[str, float]
    """Plug-in per-task resolved rate p_t = resolved / valid."""
    counts: dict[str, list[int]]
    """Per task: [resolved, valid]."""
    expected_flips: float | None
    """Σ_t 2 p_t (1 − p_t)."""
    expected_flips_unbiased: float | None
    """Σ_t 2 c (n − c) / (n (n − 1)) over tasks with n >= 2 valid attempts."""
    simulations: int
    seed: int
    net_change: dict[str, Any] | None
    """Distribution of (resolved count of run 1 − run 2) over simulated single-run pairs."""
    p_move_at_least: dict[str, float] | None
    """P(|net change| >= m) for m = 1, 2, 3, 5, 10."""
    mdd_by_attempts: dict[str, float | None] | None
    """MDD (2.8 · SE of d̄ between two identical configurations) for K attempts per task."""
    undefined: dict[str, str]
    """Why a figure is null (e.g. fewer than 3 valid attempts per task)."""
