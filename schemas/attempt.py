"""`registry.attempt/1`: one isolated run of one agent system on one task."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Final

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    model_validator,
)

from ._base import SchemaModel

ATTEMPT_SCHEMA: Final = "registry.attempt/1"
COHORT_SCHEME = "registry.cohort/1"
TASK_INPUTS = ("task_id", "case_digest", "source_digest")
"""Cohort inputs that name the task itself: its id, its own content and its starting source."""
CONFIGURATION_INPUTS = (
    "prompt_digest",
    "wiki_digest",
    "tool_policy_digest",
    "budget",
    "harness_package",
    "grader_version",
    "agent_system_digest",
    "environment_digest",
)
"""Every other cohort input: the suite configuration, the same for every task of a suite."""
MAX_SAFE_INTEGER = 2**53 - 1
DIGEST_PATTERN = r"^blake3:[0-9a-f]{64}$"


class TerminalClass(StrEnum):
    """How an attempt ended. Four are valid outcomes, five are infrastructure-invalid."""

    RESOLVED = "resolved"
    MODEL_FAILURE = "model_failure"
    SAFETY_FAILURE = "safety_failure"
    TIMEOUT = "timeout"
    HARNESS_FAILURE = "harness_failure"
    ENVIRONMENT_FAILURE = "environment_failure"
    GRADER_FAILURE = "grader_failure"
    INVALID_CASE = "invalid_case"
    CANCELLED = "cancelled"


VALID_CLASSES: tuple[TerminalClass, ...] = (
    TerminalClass.RESOLVED,
    TerminalClass.MODEL_FAILURE,
    TerminalClass.SAFETY_FAILURE,
    TerminalClass.TIMEOUT,
)
"""Classes counted in the reliability denominator (a timeout is the candidate's failure)."""

INVALID_CLASSES: tuple[TerminalClass, ...] = (
    TerminalClass.HARNESS_FAILURE,
    TerminalClass.ENVIRONMENT_FAILURE,
    TerminalClass.GRADER_FAILURE,
    TerminalClass.INVALID_CASE,
    TerminalClass.CANCELLED,
)
"""Infrastructure-invalid classes: retained as evidence, held out of the denominator."""


CONTROL_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f]")
"""What `task_id` may not contain (C0 and C1 controls and DEL)."""


def _reject_control_characters(value: str) -> str:
    if CONTROL_CHARACTERS.search(value):
        raise ValueError("must not contain control characters")
    return value


def _check_json_value(value: Any) -> Any:
    """Reject values RFC 8785 cannot encode: non-finite floats and unsafe integers."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise ValueError(f"integer {value} is outside the JSON safe range (|n| < 2**53)")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("numbers must be finite")
        if abs(value) > MAX_SAFE_INTEGER:
            raise ValueError(f"number {value} is outside the JSON safe range (|n| < 2**53)")
        return value
    if isinstance(value, dict):
        return {key: _check_json_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_check_json_value(item) for item in value]
    raise ValueError(f"{type(value).__name__} is not a JSON value")


_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def _require_timestamp_text(value: Any) -> Any:
    # Lax datetime parsing would accept Unix numbers (even as strings); the contract says
    # RFC 3339 text with an offset.
    if value is None or isinstance(value, datetime):
        return value
    if isinstance(value, str) and _RFC3339.fullmatch(value):
        return value
    raise ValueError("must be an RFC 3339 timestamp with an offset, e.g. 2026-11-02T09:00:00Z")


def _to_utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("timestamp is out of range once converted to UTC") from None


def format_timestamp(value: datetime) -> str:
    """Return the canonical form of a timestamp: UTC, RFC 3339, `Z` suffix."""
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


NonEmpty = Annotated[str, Field(min_length=1)]
Digest = Annotated[str, Field(pattern=DIGEST_PATTERN)]
Count = Annotated[int, Field(ge=0, le=MAX_SAFE_INTEGER)]
Timestamp = Annotated[
    AwareDatetime,
    Field(strict=False),
    BeforeValidator(_require_timestamp_text),
    AfterValidator(_to_utc),
    PlainSerializer(format_timestamp, return_type=str),
]
Budget = Annotated[str | dict[str, Any], AfterValidator(_check_json_value)]

_STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)


class CohortInputs(SchemaModel):
    """Cohort inputs 2–11.

    With `task_id` they form the cohort key: only attempts whose eleven inputs are identical
    are ever pooled.
    """

    model_config = _STRICT

    case_digest: NonEmpty
    """Task definition: statement, tests, base commit."""
    prompt_digest: NonEmpty
    """Exact prompt bytes."""
    source_digest: NonEmpty
    """Repository revision the attempt starts from."""
    wiki_digest: NonEmpty
    """Selected wiki / context bundle (`"none"` when there is none)."""
    tool_policy_digest: NonEmpty
    """Tool surface and permissions."""
    budget: Budget
    """Time, turn, token and cost limits; an object is canonicalised (RFC 8785)."""
    harness_package: NonEmpty
    """Benchmark package version."""
    grader_version: NonEmpty
    """Grader bytes / version. A regrade has a new one, hence a new cohort."""
    agent_system_digest: NonEmpty
    """Declared agent-system configuration."""
    environment_digest: NonEmpty
    """Runner image / environment."""


class Envelope(SchemaModel):
    """The observed execution identity: what actually ran, which may differ from the plan."""

    model_config = _STRICT

    agent: str | None = None
    """Agent name as observed."""
    agent_version: str | None = None
    """Agent version as observed."""
    provider: str | None = None
    """Model provider as observed."""
    model: str | None = None
    """Model name as observed."""
    harness_version: str | None = None
    """Harness version as observed."""


class AttemptRecord(SchemaModel):
    """`registry.attempt/1`: one isolated run of one agent system on one task."""

    model_config = _STRICT

    experiment_id: Annotated[str, Field(min_length=1, max_length=200)]
    """The experiment (run of a harness) the attempt came from; 1–200 characters."""
    task_id: Annotated[
        str, Field(min_length=1, max_length=500), AfterValidator(_reject_control_characters)
    ]
    """Task identifier; cohort input 1; 1–500 characters, no control characters."""
    repeat_index: Count
    """Which repeat of the task this attempt is (0-based)."""
    inputs: CohortInputs
    """Cohort inputs 2–11."""
    terminal_class: TerminalClass
    """How the attempt ended: one of the nine terminal classes."""
    envelope: Envelope
    """Observed execution identity."""
    terminal_identity: Annotated[str, Field(pattern=DIGEST_PATTERN)] | None = None
    """Digest binding outcome to identity; absent or null marks legacy evidence."""
    runtime_seconds: Annotated[float, Field(ge=0, le=MAX_SAFE_INTEGER)] | None
    """Wall-clock runtime in seconds, finite and non-negative; null means unavailable (the
    source records no timing) and is never treated as zero."""
    started_at: Timestamp | None = None
    """Start time, RFC 3339 with offset; stored in UTC."""
    finished_at: Timestamp | None = None
    """Finish time, RFC 3339 with offset; stored in UTC; not before `started_at`."""
    cost_usd: Annotated[float, Field(ge=0, le=MAX_SAFE_INTEGER)] | None = None
    """Cost in US dollars; null means unavailable and is never treated as zero."""
    input_tokens: Count | None = None
    """Input tokens; null when unavailable."""
    output_tokens: Count | None = None
    """Output tokens; null when unavailable."""
    cached_input_tokens: Count | None = None
    """Cached input tokens; null when unavailable."""
    plan_id: NonEmpty | None = None
    """The frozen plan this attempt executes."""
    derived_from: Digest | None = None
    """Attempt id of the record this one re-grades."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Free key/value annotations, e.g. sampling temperature."""
    artifacts: dict[str, str] = Field(default_factory=dict)
    """Artifact name -> content digest of stored evidence (patch, transcript, logs)."""

    @model_validator(mode="after")
    def _finished_not_before_started(self) -> AttemptRecord:
        if self.started_at and self.finished_at and self.finished_at < self.started_at:
            raise ValueError("finished_at must not be earlier than started_at")
        return self

    @property
    def is_valid(self) -> bool:
        """Whether the attempt counts in the reliability denominator."""
        return self.terminal_class in VALID_CLASSES
