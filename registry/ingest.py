"""`registry ingest`: harness output in, immutable Parquet segments and one commit out.

All or nothing: every record of every input is validated before anything becomes visible.
Records are checked in chunks (`_check_chunk`: validation, `--envelope`, digests, the chunk's
segment rows built column by column), here or, for large native inputs, by two worker
processes, while this process reads, deduplicates and admits the records in input order (see
`_feed`). The checked chunks wait in memory as Arrow; every `spill_rows` admitted rows are
gathered, sorted by cohort, into one part file in the writer's temp area. At the end one
segment per cohort is written to the temp area, segments are published create-if-absent,
and only then is the commit that names them appended. A failure at any point leaves at most
the temp area, which is removed.

A cohort with rows in a part file keeps the schema a Parquet round trip gives (map entries
named after their column), one without keeps the schema `records_to_table` builds: segments are
byte-identical to those of earlier versions for the same input and `spill_rows`.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from registry._faults import checkpoint
from registry.errors import InvalidRecordError, LedgerConflictError, RegistryError
from registry.evidence.admission import Admission, Fact, fact_of, id_key
from registry.evidence.keys import validated_keys
from registry.evidence.retract import retracted_ids
from registry.importers import ImportContext, parse_envelope
from registry.importers.sources import (
    NATIVE_FORMATS,
    ProgressFn,
    Source,
    checked_payload,
    complete_envelope,
    iter_payloads,
    resolve_sources,
)
from registry.storage import ledger, merkle
from registry.storage.digest import digest_file
from registry.storage.store import MARKER, Store, is_url, open_store, remove_empty_store
from registry.storage.tables import (
    ATTEMPT_SCHEMA,
    MAP_FIELDS,
    PART_OPTIONS,
    read_segment,
    records_to_table,
    write_segment,
)

SPILL_ROWS = 100_000
_DEAD_ROWS = 8192
"""Held rows that were not admitted (already present) before they are dropped (`_compact`)."""
_THREADS = 2
"""Segments written and published at once (Parquet encoding and fsync release the GIL)."""


@dataclass
class IngestResult:
    """What an ingest did."""

    read: int
    new: int
    present: int
    commit: ledger.LedgerEntry | None
    sources: list[Source]
    warnings: list[str] = field(default_factory=list)
    retracted: int = 0
    """Attempts of the input already present and retracted: they stay retracted."""


@dataclass
class _Cohort:
    """Rows of one cohort waiting to become a segment."""

    key: str
    parts: list[tuple[int, int, int]] = field(default_factory=list)
    """(part file, first row, rows) of each spill that held rows of this cohort, in order."""
    tail: tuple[int, int] | None = None
    """(first row, rows) of this cohort's rows after the last spill in `_Batch.tail`."""
    task_ids: set[str] = field(default_factory=set)
    spilled: bool = False
    """Whether rows of this cohort were due to be spilled (written to a part file)."""


@dataclass
class _Batch:
    store: Store
    area: Path
    spill_rows: int
    cohorts: dict[str, _Cohort] = field(default_factory=dict)
    checked: list[pa.Table] = field(default_factory=list)
    """Arrow rows of the checked chunks since the last spill (admitted or not)."""
    checked_rows: int = 0
    kept: list[tuple[str, int]] = field(default_factory=list)
    """(cohort key, row of the concatenated `checked` tables) of each row admitted since the
    last spill, in input order."""
    tail: pa.Table | None = None
    """The rows admitted after the last spill, sorted by cohort (`_write_segments`)."""
    spilled_tail: pa.Table | None = None
    """`tail` with the schema a part file gives, made once when a cohort needs it."""
    parts: list[Path] = field(default_factory=list)
    spill_due: bool = False
    """`spill_rows` rows have been buffered: the part file is written when the next one comes
    (never if the input ends first: the rows go straight to their segments)."""
    known: dict[str, set[bytes | str]] = field(default_factory=dict)
    """Attempt ids (`id_key`) stored per cohort, loaded on first use (`_known_ids`)."""
    unread: dict[str, list[str]] = field(default_factory=dict)
    """Segments committed by other writers since a cohort's `known` ids were loaded."""
    segments_by_cohort: dict[str, list[str]] = field(default_factory=dict)
    base_seq: int = 0
    snapshot: ledger.LedgerSnapshot | None = None
    """The ledger as this ingest read it, extended by the commits of writers it raced."""
    sources: dict[tuple[str, str, tuple[tuple[str, str], ...]], tuple[int, int]] = field(
        default_factory=dict
    )
    """(digest, *`Source.reading`) of each input an earlier ingest read -> (commit, records)."""
    read: int = 0
    present: int = 0
    buffered: int = 0
    admission: Admission | None = None
    retracted: set[bytes | str] = field(default_factory=set)
    """Attempt ids (`id_key`) the ledger retracts."""
    resurrections: int = 0


def ingest(
    root: Path,
    paths: list[str],
    fmt: str = "auto",
    progress: Callable[[int], ProgressFn | None] | None = None,
    spill_rows: int = SPILL_ROWS,
    overrides: dict[str, Any] | None = None,
    envelope: list[str] | None = None,
) -> IngestResult:
    """Validate every record of `paths` and commit the new ones as one batch.

    `overrides` supplies cohort inputs that a harness importer could not find (the native
    formats ignore it: their records carry their inputs). `progress`, if given, is called
    once with the total input size in bytes and returns a callback that receives byte counts
    as they are read (or None for no progress). `envelope` holds `KEY=VALUE` pairs of observed
    identity (`agent`, `agent_version`, `provider`, `model`, `harness_version`) that fill the
    records' null envelope fields; a value that differs from a recorded one is an error.

    Raises:
        InputFormatError: an input is missing, empty or in an unknown format.
        InvalidRecordError: a record is invalid; nothing is committed.
    """
    sources = resolve_sources(paths, fmt)
    context = ImportContext(
        overrides=dict(overrides or {}), envelope=parse_envelope(envelope or [])
    )
    for source in sources:
        source.context = context
    local = not is_url(root)  # an object root's marker stays: nothing is ever deleted there
    fresh = local and not Path(root, MARKER).exists()
    root_existed = not local or Path(root).exists()
    store = open_store(root, create=True)
    tick = progress(sum(s.size for s in sources)) if progress else None
    try:
        with store.temp_area() as area:
            batch = _Batch(store, area, spill_rows)
            batch.snapshot = ledger.LedgerSnapshot(store)
            entries = list(batch.snapshot.entries)
            _index_ledger(batch, entries)
            batch.admission = Admission(
                store, lambda key: batch.segments_by_cohort.get(key, []), entries
            )
            batch.retracted = {id_key(i) for i in retracted_ids(entries)}
            with _checker_pool(sources, context, forkable=local) as pool:
                for source in sources:
                    if _read_before(batch, source, tick):
                        continue
                    native = pool is not None and source.format in NATIVE_FORMATS
                    _feed(batch, pool if native else None, source, tick)
            batch.admission.check_regrades()
            batch.admission = None  # its per-attempt state is done with: free it before writing
            segments = _write_segments(batch)
            checkpoint("after-temp-segments")
            try:
                commit, segments = _commit(batch, sources, segments)
            finally:
                merkle.forget_ids()
            checkpoint("after-commit")
    except BaseException:
        if fresh and ledger.head_seq(store) == 0:
            remove_empty_store(store, remove_root=not root_existed)  # leave no empty registry
        raise
    new = sum(s["rows"] for s in segments)
    warnings = context.summary()
    if batch.resurrections:
        warnings.append(
            f"{batch.resurrections} attempt(s) of this input were retracted earlier; they stay "
            "retracted (counted as already present, not restored)"
        )
    result = IngestResult(batch.read, new, batch.read - new, commit, sources, warnings)
    result.retracted = batch.resurrections
    return result


def _index_ledger(batch: _Batch, entries: list[ledger.LedgerEntry]) -> None:
    for entry in entries:
        for read in entry.commit.sources:
            if read.format is not None and read.envelope is not None:
                how = (read.digest, read.format, tuple(sorted(read.envelope.items())))
                batch.sources.setdefault(how, (entry.seq, read.records))
        for segment in entry.commit.segments:
            batch.segments_by_cohort.setdefault(segment.cohort_key, []).append(segment.path)
            if segment.cohort_key in batch.known:  # read with the cohort's next lookup
                batch.unread.setdefault(segment.cohort_key, []).append(segment.path)
        batch.base_seq = entry.seq


def _known_ids(batch: _Batch, cohort_key: str) -> set[bytes | str]:
    """The attempt ids (`id_key`) of a cohort's committed segments (each segment read once)."""
    if cohort_key in batch.known:
        ids, paths = batch.known[cohort_key], batch.unread.pop(cohort_key, [])
    else:
        ids, paths = set(), batch.segments_by_cohort.get(cohort_key, [])
        batch.known[cohort_key] = ids
    for path in paths:
        table = read_segment(batch.store.resolve(path), ["attempt_id"])
        ids.update(map(id_key, table.column("attempt_id").to_pylist()))
    return ids


def _read_before(batch: _Batch, source: Source, tick: ProgressFn | None) -> bool:
    """Count a source an earlier ingest read the same way as present, without reading it.

    The same bytes (blake3 of the file), read in the same native format with the same
    `--envelope` values, make the same records, and the ingest that read them accounted for
    every one (committed or already present); attempts are never removed, so all of them are
    present now. Only for files (standard input cannot be hashed before it is read) and
    only while nothing is retracted: a re-ingest reports how many of its attempts are
    retracted, which needs their ids. The digest is taken only when some earlier input was
    read in this format with these values.
    """
    if source.path is None or source.format not in NATIVE_FORMATS or batch.retracted:
        return False
    how = source.reading
    if not any(known[1:] == how for known in batch.sources):
        return False
    try:
        digest = digest_file(source.path)
    except OSError:
        return False  # the reader reports it
    found = batch.sources.get((digest, *how))
    if found is None:
        return False
    seq, records = found
    source._digest, source.records, source.read_before = digest, records, seq
    batch.read += records
    batch.present += records
    if tick is not None:
        tick(source.size)
    return True


def _identity_mismatch(label: str, location: str, identity: str) -> InvalidRecordError:
    return InvalidRecordError(
        label,
        location,
        "terminal_identity",
        f"does not match the record; the digest of its cohort_key, envelope, experiment_id,"
        f" repeat_index, task_id and terminal_class is {identity}",
    )


def _admit(batch: _Batch, label: str, location: str, fact: Fact) -> bool:
    """Count a valid record; True if it is new (admitted), False if already present."""
    batch.read += 1
    key = fact.key
    assert batch.admission is not None
    if batch.admission.admitted(key) or key in _known_ids(batch, fact.cohort_key):
        batch.present += 1
        if key in batch.retracted:
            batch.resurrections += 1
        return False
    batch.admission.admit(label, location, fact)
    cohort = batch.cohorts.get(fact.cohort_key)
    if cohort is None:
        cohort = batch.cohorts[fact.cohort_key] = _Cohort(fact.cohort_key)
    cohort.task_ids.add(fact.task_id)
    return True


def _after_row(batch: _Batch) -> None:
    """Count an admitted row; after `spill_rows` of them a spill is due.

    The part file is written when the next row comes (`_take`), never if the input ends
    first: those rows go straight to their segments. The cohorts holding rows at that point
    are marked spilled (their segments keep the schema a part file gives).
    """
    batch.buffered += 1
    if batch.buffered < batch.spill_rows:
        return
    for key in {key for key, _ in batch.kept}:
        batch.cohorts[key].spilled = True
    batch.buffered = 0
    batch.spill_due = True


# --- validation in worker processes ---------------------------------------------------------
#
# Validation, canonical JSON and digests are pure functions of a record: for large native
# inputs, worker processes run them on chunks of records (and build the chunk's Arrow rows),
# while this process reads, deduplicates, admits and writes, in input order. A chunk stops at
# its first invalid record; every error is raised exactly where the sequential path would
# raise it, so messages and outcomes are the same.

PARALLEL_MIN_BYTES = 4 << 20
"""Inputs smaller than this (in total) are validated in this process."""
_CHUNK_RECORDS = 1024
_WORKERS = 2


@contextlib.contextmanager
def _checker_pool(
    sources: list[Source], context: ImportContext, forkable: bool
) -> Iterator[ProcessPoolExecutor | None]:
    """Worker processes for `_check_chunk`, or None where the sequential path must run.

    Only for large native inputs, when a core is idle, from a process with no other thread
    (forking a threaded process can deadlock). `forkable` is false on an object root: its
    client runs threads that `threading` does not see.
    """
    native = sum(s.size for s in sources if s.format in NATIVE_FORMATS and s.path)
    usable = (
        forkable
        and native >= PARALLEL_MIN_BYTES
        and _spare_core()
        and "fork" in mp.get_all_start_methods()
        and _single_threaded()
    )
    if not usable:
        yield None
        return
    pool = ProcessPoolExecutor(_WORKERS, mp_context=mp.get_context("fork"))
    try:
        yield pool
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _single_threaded() -> bool:
    """Whether this process runs no other Python thread (forking a threaded one can deadlock)."""
    return threading.active_count() == 1


def _spare_core() -> bool:
    """Whether another core is idle (by the 1-minute load average).

    The workers cost about a third more CPU in all than validating in this process, which
    only pays when they run beside it, not in turn with it on a busy machine.
    """
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:
        return False
    return cores > 1 and load <= cores - 1


@dataclass
class _Checked:
    """What checking a chunk of records gives: per valid record its facts, and their rows."""

    facts: list[Fact]
    """What admission reads of each valid record, in input order, up to the first error."""
    table: pa.Table | None
    """The segment rows of those records."""
    unobserved: dict[str, int]
    """Records whose envelope names no model, per experiment (run)."""
    error: tuple[type[RegistryError], tuple[Any, ...]] | None
    """The first error (its class and arguments), raised where the record is admitted."""


def _check_chunk(
    label: str, fmt: str, envelope: dict[str, str], items: list[tuple[str, bytes]]
) -> _Checked:
    """Validate and digest a chunk of records (in this process or a worker).

    Each record is validated, completed with `--envelope` values, and digested; the chunk
    stops at its first invalid record. Returns what admission needs of each valid record
    (strings shared within the chunk, so that passing it between processes is cheap) and
    the records' segment rows, built column by column.
    """
    source = Source(label, None, fmt, context=ImportContext(envelope=envelope))
    facts: list[Fact] = []
    records: list[dict[str, Any]] = []
    ids: list[str] = []
    cohorts: list[str] = []
    budgets: list[str] = []
    shared: dict[Any, Any] = {}
    error: tuple[type[RegistryError], tuple[Any, ...]] | None = None
    for location, payload in items:
        try:
            record = complete_envelope(source, location, checked_payload(source, location, payload))
            cohort_key, identity, attempt_id, budget = validated_keys(record)
            if identity is not None and identity != record["terminal_identity"]:
                raise _identity_mismatch(label, location, identity)
        except InvalidRecordError as exc:
            error = (InvalidRecordError, (exc.source, exc.location, exc.field, exc.problem))
            break
        except RegistryError as exc:
            error = (type(exc), (str(exc),))
            break
        facts.append(fact_of(record, attempt_id, cohort_key, shared))
        records.append(record)
        ids.append(attempt_id)
        cohorts.append(cohort_key)
        budgets.append(budget)
    table = records_to_table(records, ids, cohorts, budgets) if records else None
    return _Checked(facts, table, source.context.unobserved_model, error)


def _feed(
    batch: _Batch, pool: ProcessPoolExecutor | None, source: Source, tick: ProgressFn | None
) -> None:
    """Ingest one source in chunks, in input order: checked here, or by the worker processes.

    The reader runs here either way; a chunk is checked here (`pool` None) or by a worker,
    with at most `2 * _WORKERS` chunks in flight, and admitted in input order. An error the
    reader raises comes after those of the records before it.
    """
    envelope = source.context.envelope
    window: deque[tuple[list[tuple[str, bytes]], Future[_Checked]]] = deque()
    chunk: list[tuple[str, bytes]] = []

    def check(items: list[tuple[str, bytes]]) -> None:
        if pool is None:
            _take(batch, source, items, _check_chunk(source.label, source.format, envelope, items))
            return
        future = pool.submit(_check_chunk, source.label, source.format, envelope, items)
        window.append((items, future))
        if len(window) > 2 * _WORKERS:
            done, future = window.popleft()
            _take(batch, source, done, future.result())

    try:
        for item in iter_payloads(source, tick):
            chunk.append(item)
            if len(chunk) >= _CHUNK_RECORDS:
                check(chunk)
                chunk = []
    except Exception:
        # The input is unreadable past this point: the records before it come first.
        while window:
            done, future = window.popleft()
            _take(batch, source, done, future.result())
        if chunk:
            _take(batch, source, chunk, _check_chunk(source.label, source.format, envelope, chunk))
        raise
    if chunk:
        check(chunk)
    while window:
        done, future = window.popleft()
        _take(batch, source, done, future.result())


def _take(batch: _Batch, source: Source, items: list[tuple[str, bytes]], checked: _Checked) -> None:
    """Admit a checked chunk's records in order; raise its error where it occurred."""
    counts = source.context.unobserved_model
    for run, count in checked.unobserved.items():
        counts[run] = counts.get(run, 0) + count
    table = checked.table
    if not batch.kept:  # nothing of the held chunks was new: drop them
        batch.checked, batch.checked_rows = [], 0
    base = batch.checked_rows
    if table is not None:
        batch.checked.append(table)
        batch.checked_rows += len(table)
    for index, fact in enumerate(checked.facts):
        if not _admit(batch, source.label, items[index][0], fact):
            continue
        if batch.spill_due:
            assert table is not None
            _spill(batch)  # the rows before this one; this chunk stays held
            batch.checked, batch.checked_rows, base = [table], len(table), 0
        batch.kept.append((fact.cohort_key, base + index))
        _after_row(batch)
    if batch.checked_rows - len(batch.kept) >= _DEAD_ROWS:
        _compact(batch)
    if checked.error is not None:
        kind, args = checked.error
        raise kind(*args)


def _held(batch: _Batch, by_cohort: bool) -> pa.Table:
    """The rows admitted since the last spill, contiguous: in input order, or by cohort.

    One `take` over the held chunks; by cohort, rows keep input order within a cohort.
    """
    kept = sorted(batch.kept, key=lambda row: row[0]) if by_cohort else batch.kept
    table = pa.concat_tables(batch.checked)
    return table.take(pa.array([row for _, row in kept], pa.int64()))


def _compact(batch: _Batch) -> None:
    """Drop held rows that were not admitted (already present); keep the admitted ones."""
    table = _held(batch, by_cohort=False)
    batch.kept = [(key, row) for row, (key, _) in enumerate(batch.kept)]
    batch.checked, batch.checked_rows = [table], len(table)


def _spill(batch: _Batch) -> None:
    """Write the rows admitted since the last spill to one part file, sorted by cohort.

    Segments are later written in cohort order, so each part file is read once, front to
    back (`_PartReader`), whatever the number of cohorts. The rows are gathered into one
    contiguous table first: a table of thousands of small slices writes ten times slower.
    """
    index = len(batch.parts)
    part = batch.area / f"part-{index}.parquet"
    table = _held(batch, by_cohort=True)
    for key, first, rows in _ranges(sorted(key for key, _ in batch.kept)):
        batch.cohorts[key].parts.append((index, first, rows))
    pq.write_table(table, part, row_group_size=_PART_ROWS, **PART_OPTIONS)
    del table
    batch.parts.append(part)
    batch.checked, batch.checked_rows, batch.kept = [], 0, []
    batch.spill_due = False
    checkpoint("after-spill")


def _ranges(keys: list[str]) -> Iterator[tuple[str, int, int]]:
    """(key, first row, rows) of each run of equal keys in a sorted list."""
    first = 0
    for position in range(1, len(keys) + 1):
        if position == len(keys) or keys[position] != keys[first]:
            yield keys[first], first, position - first
            first = position


_PART_ROWS = 8192


class _PartReader:
    """Rows of one part file, read in order, one row group at a time."""

    def __init__(self, path: Path) -> None:
        self._file = pq.ParquetFile(path)
        self._batches = self._file.iter_batches(batch_size=_PART_ROWS)
        self._held: list[pa.RecordBatch] = []
        self._start = 0  # row of the part at which `_held` starts
        self._end = 0

    def rows(self, offset: int, length: int) -> pa.Table:
        """Return rows `offset` to `offset + length` (offsets only ever increase)."""
        while self._end < offset + length:
            batch = next(self._batches)
            self._held.append(batch)
            self._end += batch.num_rows
        while self._held and self._start + self._held[0].num_rows <= offset:
            self._start += self._held.pop(0).num_rows
        table = pa.Table.from_batches(self._held, schema=self._file.schema_arrow)
        return table.slice(offset - self._start, length)

    def close(self) -> None:
        self._file.close()


def _cohort_table(batch: _Batch, cohort: _Cohort, readers: dict[int, _PartReader]) -> pa.Table:
    """The rows of one cohort's segment, each column one contiguous chunk.

    A cohort whose rows were due to be spilled gets the schema a part file gives even when
    the input ended before the part was written, so a segment's bytes do not depend on when
    the input ended; the tail is cast once for all such cohorts, not once per cohort.
    """
    tables = []
    for index, offset, rows in cohort.parts:
        if index not in readers:
            readers[index] = _PartReader(batch.parts[index])
        tables.append(readers[index].rows(offset, rows))
    if cohort.tail is not None:
        assert batch.tail is not None
        tail = batch.tail
        if cohort.spilled and not cohort.parts:  # as if read back from the part file
            if batch.spilled_tail is None:
                batch.spilled_tail = _as_spilled(batch.tail)
            tail = batch.spilled_tail
        tables.append(tail.slice(*cohort.tail))
    if len(tables) == 1 and all(column.num_chunks == 1 for column in tables[0].columns):
        return tables[0]  # one slice of one contiguous table: nothing to gather
    return pa.concat_tables(tables).combine_chunks()


def _as_spilled(table: pa.Table) -> pa.Table:
    """`table` with the map columns' types as a Parquet round trip gives them."""
    for name in MAP_FIELDS:
        index = table.schema.get_field_index(name)
        target = _spilled_schema().field(name)
        table = table.set_column(index, target, table.column(name).cast(target.type))
    return table


@cache
def _spilled_schema() -> pa.Schema:
    """The segment schema as a Parquet round trip gives it (map entries named by column)."""
    sink = pa.BufferOutputStream()
    pq.write_table(ATTEMPT_SCHEMA.empty_table(), sink)
    return pq.read_schema(pa.BufferReader(sink.getvalue()))


def _write_segments(batch: _Batch) -> list[dict[str, Any]]:
    """Write one temp segment per cohort; return their descriptions, sorted by cohort.

    Tables are assembled in this thread, in cohort order, and written by a small pool; at
    most `2 * _THREADS` tables are held at once.
    """
    if batch.kept:
        batch.tail = _held(batch, by_cohort=True)
        for key, first, rows in _ranges(sorted(key for key, _ in batch.kept)):
            batch.cohorts[key].tail = (first, rows)
        batch.checked, batch.checked_rows, batch.kept = [], 0, []
    readers: dict[int, _PartReader] = {}
    segments: list[dict[str, Any]] = []
    try:
        with ThreadPoolExecutor(_THREADS) as pool:
            window: deque[Future[dict[str, Any]]] = deque()
            for key in sorted(batch.cohorts):
                cohort = batch.cohorts[key]
                table = _cohort_table(batch, cohort, readers)
                window.append(pool.submit(_describe, batch, cohort, table))
                if len(window) >= 2 * _THREADS:
                    segments.append(window.popleft().result())
            segments.extend(future.result() for future in window)
    finally:
        for reader in readers.values():
            reader.close()
    return segments


def _describe(
    batch: _Batch, cohort: _Cohort, table: pa.Table, task_ids: set[str] | None = None
) -> dict[str, Any]:
    temp = batch.area / f"segment-{cohort.key[7:]}-{len(table)}.parquet"
    temp.unlink(missing_ok=True)
    write_segment(table, temp)
    digest = digest_file(temp)
    if task_ids is None:
        task_ids = cohort.task_ids
    path = batch.store.segment_path(cohort.key, digest)
    merkle.remember_ids(path, table.column("attempt_id"))
    return {
        "_temp": temp,
        "_schema": table.schema,
        "path": path,
        "digest": digest,
        "rows": len(table),
        "cohort_key": cohort.key,
        "task_ids": sorted(task_ids),
    }


def _commit(
    batch: _Batch, sources: list[Source], segments: list[dict[str, Any]]
) -> tuple[ledger.LedgerEntry | None, list[dict[str, Any]]]:
    """Publish the segments and append the commit, re-checking for races with other writers."""
    for _ in range(ledger.MAX_ATTEMPTS):
        segments = _drop_raced(batch, segments)
        if not segments:
            return None, []
        _publish(batch.store, segments)
        checkpoint("after-segments-published")
        fields = _commit_fields(batch, sources, segments)
        assert batch.snapshot is not None and batch.snapshot.head[0] == batch.base_seq
        prev = batch.snapshot.head[1]
        if ledger.try_append(batch.store, batch.base_seq + 1, prev, fields) is not None:
            entry = ledger.entry_at(batch.store, batch.base_seq + 1)
            return entry, segments
        ledger.backoff()
    raise LedgerConflictError("could not append to the ledger after repeated races")


def _publish(store: Store, segments: list[dict[str, Any]]) -> None:
    """Publish the temp segments create-if-absent: the first alone, the others in parallel."""
    store.put_file(segments[0]["_temp"], segments[0]["path"])
    checkpoint("after-first-segment-published")
    rest = segments[1:]
    if not store.is_local or len(rest) < 2:
        for segment in rest:
            store.put_file(segment["_temp"], segment["path"])
        return
    with ThreadPoolExecutor(_THREADS) as pool:
        # fsync releases the GIL; list() re-raises the first failure
        list(pool.map(lambda s: store.put_file(s["_temp"], s["path"]), rest))


def _drop_raced(batch: _Batch, segments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Remove attempts another writer committed since this batch read the ledger.

    Only the commits written since the last look are read (the ledger snapshot is extended),
    and only the segments they add, so a writer that loses many races in a row on a long
    ledger pays for what changed, not for the whole history each time.
    """
    assert batch.snapshot is not None
    newer = [e for e in batch.snapshot.refresh() if e.seq > batch.base_seq]
    if not newer:
        return segments
    _index_ledger(batch, newer)
    kept = []
    for segment in segments:
        ids = _known_ids(batch, segment["cohort_key"])
        table = read_segment(segment["_temp"]).cast(segment["_schema"])
        keys = [id_key(i) for i in table.column("attempt_id").to_pylist()]
        if ids.isdisjoint(keys):
            kept.append(segment)
            continue
        mask = pa.array([k not in ids for k in keys])
        remaining = table.filter(mask)
        if len(remaining):
            tasks = set(remaining.column("task_id").to_pylist())
            kept.append(_describe(batch, batch.cohorts[segment["cohort_key"]], remaining, tasks))
    return kept


def _commit_fields(
    batch: _Batch, sources: list[Source], segments: list[dict[str, Any]]
) -> dict[str, Any]:
    new = sum(s["rows"] for s in segments)
    return {
        "kind": "ingest",
        "sources": [
            {
                "path": s.label,
                "digest": s.digest,
                "records": s.records,
                "format": s.format,
                "envelope": dict(sorted(s.context.envelope.items())),
            }
            for s in sources
        ],
        "segments": [{k: v for k, v in s.items() if not k.startswith("_")} for s in segments],
        "attempts_read": batch.read,
        "attempts_new": new,
        "attempts_present": batch.read - new,
    }
