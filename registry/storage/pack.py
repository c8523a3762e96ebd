"""`registry pack`: merge each cohort's small segments into one, so reads open few files.

A registry fed by many small ingests holds one segment per cohort per ingest. Packing reads
the *live* segments of every cohort that has more than one (a segment is live when no
later `pack` commit supersedes it), checks each against its digest, and writes their rows as
one segment, sorted by task id and then by the commit that added each row (ledger order
otherwise kept). The packed file holds one more column than an ingest segment, `commit_seq`:
the ingest commit that first added the row, so the views attribute every row to the same
commit (sequence, digest, source, time) before and after the pack, and the evidence rule
(earliest commit wins) is unchanged.

A `pack` commit names each packed segment and the segments it supersedes. The superseded
files stay (nothing is deleted); readers use the packed segment instead; `registry verify`
checks that a packed segment holds exactly the rows it replaces. Packing a registry with
nothing to merge writes nothing. A checkpoint is written at the pack commit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from registry.storage import ledger
from registry.storage.digest import digest_file
from registry.storage.store import Store
from registry_schemas import SegmentEntry

if TYPE_CHECKING:
    import pyarrow as pa


def commit_seq_field() -> pa.Field:
    """The column a packed segment adds: the ingest commit that first added each row."""
    import pyarrow as pa

    return pa.field("commit_seq", pa.int64(), False)


def __getattr__(name: str) -> Any:
    """`COMMIT_SEQ`: `commit_seq_field()`, made on first use.

    pyarrow loads only where tables are built, not where the live segments are listed.
    """
    if name == "COMMIT_SEQ":
        return commit_seq_field()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class PackResult:
    """What a pack did."""

    commit: ledger.LedgerEntry | None
    cohorts: int = 0
    segments_before: int = 0
    segments_after: int = 0
    rows: int = 0
    checkpoint: str | None = None
    packed: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class LiveSegment:
    """A segment readers read, with the commit that wrote it."""

    segment: SegmentEntry
    entry: ledger.LedgerEntry

    @property
    def packed(self) -> bool:
        """Whether a `pack` commit wrote it (its rows carry their own `commit_seq`)."""
        return self.entry.commit.pack is not None


def live_segments(entries: Iterable[ledger.LedgerEntry]) -> list[LiveSegment]:
    """Return the segments readers read, in ledger order: none a pack of `entries` supersedes."""
    entries = list(entries)
    superseded = {
        path
        for entry in entries
        if entry.commit.pack is not None
        for segment in entry.commit.pack.segments
        for path in segment.supersedes
    }
    live: list[LiveSegment] = []
    for entry in entries:
        written: list[SegmentEntry] = list(entry.commit.segments)
        if entry.commit.pack is not None:
            written.extend(entry.commit.pack.segments)
        live.extend(LiveSegment(s, entry) for s in written if s.path not in superseded)
    return live


def attributed_table(store: Store, live: LiveSegment, check: bool = True) -> pa.Table:
    """Read a live segment with the `commit_seq` column (its own, or its commit's).

    Raises:
        IntegrityError: the file is missing or not the bytes its commit names.
    """
    import pyarrow as pa

    from registry.storage.tables import read_segment

    if check:
        path = store.checked_segment(live.segment.path, live.segment.digest)
    else:
        path = store.resolve(live.segment.path)
    table = read_segment(path)
    if live.packed:
        return table
    seqs = pa.array([live.entry.seq] * len(table), pa.int64())
    return table.append_column(commit_seq_field(), seqs)


def merge(tables: list[pa.Table]) -> pa.Table:
    """Merge attributed tables: sorted by task id, then commit; ledger order otherwise."""
    import pyarrow as pa

    merged = pa.concat_tables(tables)
    return merged.sort_by([("task_id", "ascending"), ("commit_seq", "ascending")])


def pack(store: Store) -> PackResult:
    """Merge the live segments of every cohort that has more than one; commit the result.

    Returns a result without a commit when no cohort has more than one live segment.

    Raises:
        IntegrityError: the ledger or a segment to merge is damaged.
        StorageError: the file system refused a write.
    """
    from registry.storage import checkpoints
    from registry.storage.tables import write_segment

    entries = ledger.read_ledger(store)
    base = len(entries)
    by_cohort: dict[str, list[LiveSegment]] = {}
    for live in live_segments(entries):
        by_cohort.setdefault(live.segment.cohort_key, []).append(live)
    groups = {key: group for key, group in sorted(by_cohort.items()) if len(group) > 1}
    result = PackResult(None, segments_before=sum(len(g) for g in by_cohort.values()))
    result.segments_after = result.segments_before
    if not groups:
        return result
    packed: list[dict[str, Any]] = []
    with store.temp_area() as area:
        for key, group in groups.items():
            table = merge([attributed_table(store, live) for live in group])
            temp = area / f"pack-{len(packed)}.parquet"
            write_segment(table, temp)
            digest = digest_file(temp)
            relative = store.segment_path(key, digest)
            store.put_file(temp, relative)
            packed.append(
                {
                    "path": relative,
                    "digest": digest,
                    "rows": len(table),
                    "cohort_key": key,
                    "task_ids": sorted(set(table.column("task_id").to_pylist())),
                    "supersedes": [live.segment.path for live in group],
                }
            )
        superseded = {path for segment in packed for path in segment["supersedes"]}

        def raced() -> ledger.LedgerEntry | None:
            """Another writer's pack of the same segments, committed meanwhile."""
            for entry in ledger.read_ledger(store)[base:]:
                if entry.commit.pack is not None and any(
                    superseded.intersection(s.supersedes) for s in entry.commit.pack.segments
                ):
                    return entry
            return None

        commit, written = ledger.append(
            store, {"kind": "pack", "pack": {"segments": packed}}, raced
        )
    result.commit = commit if written else None
    if written:
        result.cohorts = len(packed)
        result.rows = sum(int(s["rows"]) for s in packed)
        result.segments_after = result.segments_before - len(superseded) + len(packed)
        result.packed = packed
        result.checkpoint = checkpoints.write_checkpoint(store, commit.seq).path
    return result


pack_segments = pack
"""Public name of `pack` (`registry.pack` would be ambiguous beside a module of that name)."""
