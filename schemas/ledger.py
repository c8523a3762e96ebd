"""`registry.commit/1`: one entry of the ledger, the single source of truth for visibility."""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import ConfigDict, Field

from ._base import SchemaModel
from .attempt import DIGEST_PATTERN
from .plan import PlanEntry

COMMIT_SCHEMA: Final = "registry.commit/1"
CHECKPOINT_SCHEMA: Final = "registry.checkpoint/1"

_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)
Digest = Annotated[str, Field(pattern=DIGEST_PATTERN)]


class SegmentEntry(SchemaModel):
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


class SourceEntry(SchemaModel):
    """One input the commit was ingested from."""

    model_config = _STRICT

    path: str
    """The path as given on the command line (`-` for standard input)."""
    digest: Digest
    """blake3 of the input bytes."""
    records: int
    """Records read from it."""
    format: str | None = None
    """The format it was read as (`jsonl`, `json`, `parquet` or an importer's name); null in
    commits written before the format was recorded."""
    envelope: dict[str, str] | None = None
    """The `--envelope` values it was read with (`{}` for none); null in commits written
    before they were recorded. With `format` and `digest`, says how the records were made from
    the bytes: the same bytes read the same way again hold only attempts already present."""


class LayerEntry(SchemaModel):
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


class RetractionEntry(SchemaModel):
    """Attempts a `retraction` commit withdraws from every view; their bytes stay."""

    model_config = _STRICT

    attempt_ids: list[Digest] = Field(min_length=1)
    """Attempt ids retracted by this commit, sorted, none retracted by an earlier commit."""
    reason: str = Field(min_length=1)
    """Why the attempts were withdrawn, as the user gave it."""
    commit_seq: int | None = None
    """The ingest commit retracted as a whole, or null when attempts were named one by one."""


class PackedSegment(SegmentEntry):
    """A segment a `pack` commit writes: the rows of the segments it supersedes, merged.

    Its Parquet file holds one more column than an ingest segment, `commit_seq`, the
    sequence number of the ingest commit that first added each row, so every view attributes
    a row to the same commit before and after the pack.
    """

    supersedes: list[str] = Field(min_length=2)
    """Paths of the segments (of this cohort) it replaces for readers; their files stay."""


class PackEntry(SchemaModel):
    """What a `pack` commit merged."""

    model_config = _STRICT

    segments: list[PackedSegment] = Field(min_length=1)
    """One merged segment per cohort packed, sorted by cohort key."""


class Commit(SchemaModel):
    """A ledger entry: sequence-numbered, hash-chained to its predecessor."""

    model_config = _STRICT

    schema_: Literal["registry.commit/1"] = Field(COMMIT_SCHEMA, alias="schema")
    """Format tag."""
    seq: int
    """Sequence number, starting at 1 with no gaps."""
    prev: Digest | None
    """Digest of the previous commit's bytes; null for the first commit."""
    kind: Literal["ingest", "layer", "retraction", "plan", "pack"]
    """`ingest` adds attempts; `layer` records a derived layer; `retraction` withdraws attempts;
    `plan` records a frozen evaluation plan; `pack` merges small segments for readers."""
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
    pack: PackEntry | None = None
    """The merged segments a `pack` commit records."""
    merkle_size: int | None = Field(None, ge=0)
    """Leaves of the RFC 9162 tree over every attempt id added up to this commit (null on
    commits written before the registry kept the tree; readers compute it then)."""
    merkle_root: Digest | None = None
    """Root of that tree (blake3, RFC 9162 §2.1.1 domain separation)."""
    merkle_frontier: list[Digest] | None = None
    """Roots of the perfect subtrees of that tree, largest first: what the next commit
    extends the tree from without reading earlier segments."""


class Checkpoint(SchemaModel):
    """`registry.checkpoint/1`: the ledger up to a commit, in one derived object.

    Stored at `checkpoints/<seq:012d>-<digest hex>.json`, named by the blake3 of its bytes.
    It holds the exact bytes of the commits after the previous checkpoint (whose path it
    names), so the chain of checkpoints holds every commit up to `seq`: segments with their
    cohorts and task ids, layers, retractions, plans and packs. Never authoritative: a
    reader re-hashes every commit it holds, checks the `prev` chain and that commit `seq`
    on disk has `digest`, and otherwise reads the commit files; `registry verify` rebuilds
    it from the commits and compares.
    """

    model_config = _STRICT

    schema_: Literal["registry.checkpoint/1"] = Field(CHECKPOINT_SCHEMA, alias="schema")
    """Format tag."""
    seq: int = Field(ge=1)
    """The last commit it covers."""
    digest: Digest
    """Digest of commit `seq`'s bytes (commit `seq + 1` names it as its `prev`)."""
    previous: str | None
    """Path of the checkpoint before it, or null for the first."""
    first_seq: int = Field(ge=1)
    """The first commit it holds (one after the previous checkpoint's `seq`)."""
    commits: list[str]
    """The exact bytes (UTF-8 text) of commits `first_seq` .. `seq`."""
    merkle_size: int = Field(ge=0)
    """Leaves of the attempt-id tree at `seq`."""
    merkle_root: Digest
    """Root of the attempt-id tree at `seq`."""
    merkle_frontier: list[Digest]
    """Frontier of the attempt-id tree at `seq` (see `Commit.merkle_frontier`)."""
