"""`registry.commit/1`: one entry of the ledger, the single source of truth for visibility."""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from .attempt import DIGEST_PATTERN
from .plan import PlanEntry

COMMIT_SCHEMA: Final = "registry.commit/1"

_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True, use_attribute_docstrings=True)
Digest = Annotated[str, Field(pattern=DIGEST_PATTERN)]


class SegmentEntry(BaseModel):
    """One immutable Parquet segment a commit makes visible."""

    model_config = _STRICT

    path: str
    """Path relative to the registry root, `attempts/cohort=<hex>/<hex>.parquet`."""
    digest: Digest
    """blake3 of the file bytes (also its file name)."""
    rows: int
    """Number of attempts in the segment."""
    cohort_key: Digest
    """Cohort key shared by every attempt in the segment."""
    task_ids: list[str]
    """Task ids the segment holds, sorted."""


class SourceEntry(BaseModel):
    """One input the commit was ingested from."""

    model_config = _STRICT

    path: str
    """The path as given on the command line (`-` for standard input)."""
    digest: Digest
    """blake3 of the input bytes."""
    records: int
    """Records read from it."""


class LayerEntry(BaseModel):
    """A derived layer (a report, a comparison) a commit records."""

    model_config = _STRICT

    kind: str
    """Layer kind, e.g. `report`."""
    subject: str
    """What the layer is about, e.g. the task id of a report."""
    path: str
    """Path relative to the registry root."""
    digest: Digest
    """blake3 of the layer's canonical JSON bytes."""


class RetractionEntry(BaseModel):
    """Attempts a `retraction` commit withdraws from every view; their bytes stay."""

    model_config = _STRICT

    attempt_ids: list[Digest] = Field(min_length=1)
    """Attempt ids retracted by this commit, sorted, none retracted by an earlier commit."""
    reason: str = Field(min_length=1)
    """Why the attempts were withdrawn, as the user gave it."""
    commit_seq: int | None = None
    """The ingest commit retracted as a whole, or null when attempts were named one by one."""


class Commit(BaseModel):
    """A ledger entry: sequence-numbered, hash-chained to its predecessor."""

    model_config = _STRICT

    schema_: Literal["registry.commit/1"] = Field(COMMIT_SCHEMA, alias="schema")
    """Format tag."""
    seq: int
    """Sequence number, starting at 1 with no gaps."""
    prev: Digest | None
    """Digest of the previous commit's bytes; null for the first commit."""
    kind: Literal["ingest", "layer", "retraction", "plan"]
    """`ingest` adds attempts; `layer` records a derived layer; `retraction` withdraws attempts;
    `plan` records a frozen evaluation plan."""
    created_at: str
    """UTC time the commit was written (RFC 3339)."""
    sources: list[SourceEntry] = Field(default_factory=list)
    """Inputs of an ingest."""
    segments: list[SegmentEntry] = Field(default_factory=list)
    """Segments an ingest makes visible."""
    attempts_read: int = 0
    """Records read by an ingest."""
    attempts_new: int = 0
    """Attempts an ingest added."""
    attempts_present: int = 0
    """Attempts an ingest found already present."""
    layer: LayerEntry | None = None
    """The derived layer a `layer` commit records."""
    retraction: RetractionEntry | None = None
    """The attempts a `retraction` commit withdraws, and why."""
    plan: PlanEntry | None = None
    """The frozen plan a `plan` commit records."""
