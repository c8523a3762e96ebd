"""DuckDB over the segments the ledger lists: the `attempts` and `commits` views, read-only SQL.

The only importer of duckdb. Views are built over the explicit file list of the ledger (never
a glob, so an unreferenced file left by a crash is invisible), rows are deduplicated by
`attempt_id` keeping the earliest commit (a segment a `pack` commit supersedes is not read: the
packed one is, and each of its rows keeps the commit that added it), and the connection is
confined before any user SQL runs: external access is off except for reading the segment
directory, the configuration is locked, and only a single SELECT statement is accepted.

Every segment a connection reads is hashed first and compared with the digest its commit
records (the ledger itself is checked by `read_ledger`), so no answer is ever computed from
bytes that do not match their digest. User SQL runs under a time limit and a memory limit;
DuckDB spills to a private directory under `<root>/tmp/` that is removed afterwards (never
to the working directory, which DuckDB would otherwise make readable as `.tmp/`).
"""

from __future__ import annotations

import contextlib
import errno
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from registry.errors import QueryError, ReadOnlyQueryError, StorageError
from registry.evidence.rule import register_evidence, register_rows, register_stored_evidence
from registry.storage.ledger import (
    LedgerEntry,
    LedgerSnapshot,
    entries_as_of,
    read_ledger,
    segment_paths,
)
from registry.storage.store import Store
from registry_schemas import AttemptRecord, SegmentEntry

if TYPE_CHECKING:
    from registry.evidence.retract import RetractionInfo

SEGMENT_COLUMNS = ("attempt_id", "cohort_key", *AttemptRecord.model_fields)
"""Column names of a segment, in order (`registry.storage.tables.ATTEMPT_SCHEMA`'s names,
without importing pyarrow: a read that DuckDB answers alone never loads it)."""

# An attempt stored twice (two writers raced, or a pack copied rows that a later ingest
# stored again) counts once, as the copy of its earliest commit: `_stored_twins` lists every
# other copy. Attempt ids are grouped first so that only ids stored more than once are ranked,
# and the (usually empty) list is a table computed once per connection: every query then
# pays only an anti-join with it, where ranking all rows by attempt id cost every query
# seconds at a million attempts.
_TWINS = """
CREATE {kind} _stored_twins AS
SELECT attempt_id, filename FROM (
    SELECT r.attempt_id, r.filename, row_number() OVER (
               PARTITION BY r.attempt_id
               ORDER BY coalesce(r.commit_seq, s.commit_seq), r.filename) AS copy
    FROM _attempt_rows r JOIN _segments s ON r.filename = s.path
    WHERE r.attempt_id IN (
        SELECT attempt_id FROM _attempt_rows GROUP BY attempt_id HAVING count(*) > 1))
WHERE copy > 1
"""
# Each row is attributed to the commit that added it: its segment's commit, or for a packed
# segment (which merges rows of many commits) the `commit_seq` the row carries.
_ATTEMPTS_ALL = """
CREATE {kind} _attempts_all AS
SELECT r.* EXCLUDE (filename, commit_seq), c.commit_seq, c.commit_digest, c.source,
       c.ingested_at
FROM _attempt_rows r JOIN _segments s ON r.filename = s.path
JOIN _provenance c ON c.commit_seq = coalesce(r.commit_seq, s.commit_seq)
ANTI JOIN _stored_twins t ON t.attempt_id = r.attempt_id AND t.filename = r.filename
"""


_COHORTS_VIEW = """
CREATE VIEW cohorts AS
SELECT cohort_key, any_value(task_id) AS task_id, any_value(configuration_digest)
           AS configuration_digest, any_value(inputs) AS inputs,
       count(*) AS attempts, count(DISTINCT experiment_id) AS experiments,
       min(commit_seq) AS first_commit_seq, max(commit_seq) AS last_commit_seq
FROM attempts GROUP BY cohort_key
"""

_SYSTEMS_VIEW = """
CREATE VIEW systems AS
SELECT system.agent AS agent, system.agent_version AS agent_version,
       system.provider AS provider, system.model AS model,
       system.harness_version AS harness_version, run,
       count(*) AS attempts, count(DISTINCT task_id) AS tasks
FROM attempts GROUP BY ALL
"""

# Wilson 95% score interval (STATISTICS.md §1.1) as SQL macros, for longitudinal queries such
# as "resolved rate per week with its interval". NULL when n = 0; exact 0 / 1 at the edges.
_Z = "1.959963984540054"
_MACROS = f"""
CREATE MACRO wilson_center(x, n) AS
    (x / n + {_Z} * {_Z} / (2 * n)) / (1 + {_Z} * {_Z} / n);
CREATE MACRO wilson_half(x, n) AS
    {_Z} / (1 + {_Z} * {_Z} / n) * sqrt((x / n) * (1 - x / n) / n + {_Z} * {_Z} / (4 * n * n));
CREATE MACRO wilson_low(x, n) AS CASE WHEN n = 0 THEN NULL WHEN x = 0 THEN 0.0
    ELSE greatest(0.0, wilson_center(x, n) - wilson_half(x, n)) END;
CREATE MACRO wilson_high(x, n) AS CASE WHEN n = 0 THEN NULL WHEN x = n THEN 1.0
    ELSE least(1.0, wilson_center(x, n) + wilson_half(x, n)) END;
CREATE MACRO is_valid(terminal_class) AS terminal_class IN
    ('resolved', 'model_failure', 'safety_failure', 'timeout');
CREATE MACRO interval_below(x1, n1, x0, n0) AS wilson_high(x1, n1) < wilson_low(x0, n0);
CREATE MACRO interval_above(x1, n1, x0, n0) AS wilson_low(x1, n1) > wilson_high(x0, n0);
"""
_IS_VALID_MACRO = next(m for m in _MACROS.split(";") if "MACRO is_valid" in m)
"""The one macro the `attempts` view needs (an evidence-only connection creates only it)."""

READ_ONLY_TYPES = {duckdb.StatementType.SELECT}
DEFAULT_TIMEOUT = 60.0
"""Seconds a `registry sql` query may run before it is stopped."""
DEFAULT_MEMORY_LIMIT = "2GB"
"""Memory a `registry sql` query may use (DuckDB size syntax: 512MB, 2GB, ...)."""
_UNWRITABLE = {errno.EROFS, errno.EACCES, errno.EPERM}
_MEMORY_LIMIT = re.compile(r"\d+(\.\d+)?\s*(B|KB|KIB|MB|MIB|GB|GIB|TB|TIB)", re.IGNORECASE)


@dataclass(frozen=True)
class QueryResult:
    """Column names and rows of a query."""

    columns: list[str]
    rows: list[tuple[Any, ...]]


def connect(
    store: Store,
    task_ids: Iterable[str] | None = None,
    *,
    as_of: str | int | None = None,
    include_retracted: bool = False,
    layer_views: Iterable[str] = (),
    temp_directory: Path | None = None,
    memory_limit: str | None = None,
    evidence_only: bool = False,
    snapshot: LedgerSnapshot | None = None,
) -> duckdb.DuckDBPyConnection:
    """Return a confined connection with the registry views.

    With `task_ids`, only segments holding one of those tasks are read (the ledger records
    which tasks each segment holds), so the cost follows the tasks' evidence. `as_of` reads
    the ledger as it stood at a commit sequence or date (see `ledger.entries_as_of`);
    `layer_views` names the stored-layer views to build (`reports`, `comparisons`, ...).
    Every segment read is checked against its digest first. DuckDB spills to
    `temp_directory` (a private area the caller removes); without one it does not spill.
    `memory_limit` caps DuckDB's memory (its own default otherwise). With `evidence_only`,
    only `attempts` and `_evidence` are created (what `selection.read_evidence` reads), and
    with `task_ids` too the visible rows are read from their segments once, into a temporary
    table the evidence views are then built on, instead of once per query. `snapshot` is the
    ledger as the calling command already read it (read here otherwise).

    Raises:
        AsOfError: `as_of` names no commit of this ledger.
        IntegrityError: the ledger, a segment or a layer read is damaged or missing.
    """
    entries = entries_as_of(
        list(snapshot.entries) if snapshot is not None else read_ledger(store), as_of
    )
    wanted = None if task_ids is None else set(task_ids)
    stored = None if wanted is not None else _stored_evidence(store, entries)
    segments = [] if stored is not None else _segment_table(store, entries, wanted)
    con = duckdb.connect(":memory:", config={"threads": 2})
    try:
        if evidence_only:
            _build_evidence(con, entries, segments, include_retracted, wanted is not None, stored)
        else:
            _build(con, store, entries, segments, include_retracted, layer_views, stored)
        _confine(con, store, temp_directory, memory_limit, stored)
    except BaseException:
        con.close()
        raise
    return con


def _build(
    con: duckdb.DuckDBPyConnection,
    store: Store,
    entries: list[LedgerEntry],
    segments: list[tuple[str, int, bool]],
    include_retracted: bool,
    layer_views: Iterable[str],
    stored: Path | None,
) -> None:
    # Helper tables are bound as DuckDB lists: converting Python values to Arrow would
    # import pandas (when installed) on every command.
    _register_commits(con, entries)
    retracted = _retracted_ids(entries)
    _register_retractions(con, retracted)
    con.execute(_MACROS)
    if stored is not None:
        register_stored_evidence(con, str(stored), retracted, include_retracted)
    else:
        _register_rows_and_provenance(con, entries, segments)
        con.execute(_TWINS.format(kind="TEMP TABLE"))
        con.execute(_ATTEMPTS_ALL.format(kind="VIEW"))
        register_evidence(con, retracted, include_retracted, rows="_attempt_rows")
    for sql in (
        _COHORTS_VIEW,
        _SYSTEMS_VIEW,
        "CREATE VIEW commits AS SELECT * REPLACE (created_at::TIMESTAMPTZ AS created_at)"
        " FROM _commits",
        "CREATE VIEW retractions AS SELECT * REPLACE (created_at::TIMESTAMPTZ AS created_at)"
        " FROM _retractions",
    ):
        con.execute(sql)
    wanted_layers = set(layer_views)
    if wanted_layers:
        from registry.evidence.layer_views import layer_tables

        for name, table in layer_tables(store, entries, wanted_layers).items():
            con.register(f"_{name}", table)
            con.execute(
                f"CREATE VIEW {name} AS SELECT * REPLACE (document::JSON AS document) FROM _{name}"
            )


def _build_evidence(
    con: duckdb.DuckDBPyConnection,
    entries: list[LedgerEntry],
    segments: list[tuple[str, int, bool]],
    include_retracted: bool,
    materialize: bool,
    stored: Path | None = None,
) -> None:
    """Create `_attempts_all`, `_evidence` and `attempts` only (see `connect`)."""
    con.execute(_IS_VALID_MACRO)
    if stored is not None:
        retracted = _retracted_ids(entries)
        register_stored_evidence(con, str(stored), retracted, include_retracted, derived=False)
        return
    _register_rows_and_provenance(con, entries, segments)
    # Task-scoped reads keep the task's rows in a table (the twins are found once, for it).
    con.execute(_TWINS.format(kind="VIEW" if materialize else "TEMP TABLE"))
    con.execute(_ATTEMPTS_ALL.format(kind="TEMP TABLE" if materialize else "VIEW"))
    rows = "_attempts_all" if materialize else "_attempt_rows"
    register_evidence(con, _retracted_ids(entries), include_retracted, derived=False, rows=rows)


def _register_rows_and_provenance(
    con: duckdb.DuckDBPyConnection,
    entries: list[LedgerEntry],
    segments: list[tuple[str, int, bool]],
) -> None:
    """Create `_attempt_rows` over the segments and the tables `_ATTEMPTS_ALL` joins."""
    register_rows(
        con, "_segments", [("path", "VARCHAR"), ("commit_seq", "BIGINT"), ("packed", "BOOLEAN")],
        segments,
    )  # fmt: skip
    _attempt_rows(con, segments).create_view("_attempt_rows")
    _register_provenance(con, entries)


def _stored_evidence(store: Store, entries: list[LedgerEntry]) -> Path | None:
    """Return the cached evidence file of `entries`, written first if it is missing.

    None when the ledger read is too small for the file to pay off or the cache cannot be
    written (`registry.evidence.cache`): the views are then built over the segments.
    """
    from registry.evidence import cache

    if not cache.wanted(entries):
        return None
    key = cache.evidence_key(entries)
    if key is None:
        return None
    path = cache.cached_file(store, key)
    if path is not None:
        return path
    segments = _segment_table(store, entries, None)
    con = duckdb.connect(":memory:", config={"threads": 2})
    try:
        _build_evidence(con, entries, segments, True, False)
        return cache.write(store, key, con)
    finally:
        con.close()


def open_database(path: str = ":memory:") -> duckdb.DuckDBPyConnection:
    """Return a plain, unconfined DuckDB connection to `path` holding the registry macros.

    For `registry export` only, which writes the views where it is told; user SQL never runs
    on it (user SQL runs on `connect`'s confined connection).
    """
    con = duckdb.connect(path, config={"threads": 2})
    con.execute(_MACROS)
    return con


def layer_views_in(sql: str) -> set[str]:
    """Return the stored-layer views a query mentions (only those are built)."""
    from registry.evidence.layer_views import LAYER_VIEWS

    words = set(re.findall(r"[a-z_]+", sql.lower()))
    return words & set(LAYER_VIEWS)


def run_query(
    store: Store,
    sql: str,
    params: Sequence[Any] | None = None,
    *,
    as_of: str | int | None = None,
    include_retracted: bool = False,
    timeout: float | None = DEFAULT_TIMEOUT,
    memory_limit: str | None = DEFAULT_MEMORY_LIMIT,
) -> QueryResult:
    """Run one read-only statement against the registry views, bounded in time and memory.

    The query is stopped after `timeout` seconds (None: no limit) and may use at most
    `memory_limit`; DuckDB spills to a private area under `<root>/tmp/`, removed afterwards
    (on a registry that cannot be written, it does not spill).

    Raises:
        ReadOnlyQueryError: the text is not exactly one SELECT statement.
        QueryError: DuckDB rejected the query, or it exceeded the time or memory limit.
        IntegrityError: the ledger, a segment or a layer read is damaged or missing.
    """
    check_read_only(sql)
    limit = _memory_limit(memory_limit)
    if timeout is not None and not timeout > 0:
        raise QueryError(f"--timeout {timeout:g}: give a number of seconds above 0")
    try:
        with store.temp_area() as area:
            return _bounded(store, sql, params, as_of, include_retracted, timeout, limit, area)
    except StorageError as exc:
        if exc.errno not in _UNWRITABLE:
            raise
    return _bounded(store, sql, params, as_of, include_retracted, timeout, limit, None)


def _bounded(
    store: Store,
    sql: str,
    params: Sequence[Any] | None,
    as_of: str | int | None,
    include_retracted: bool,
    timeout: float | None,
    memory_limit: str | None,
    area: Path | None,
) -> QueryResult:
    con = connect(
        store,
        as_of=as_of,
        include_retracted=include_retracted,
        layer_views=layer_views_in(sql),
        temp_directory=area,
        memory_limit=memory_limit,
    )
    stopped = threading.Event()

    def stop() -> None:
        stopped.set()
        with contextlib.suppress(duckdb.Error):
            con.interrupt()

    timer = None if timeout is None else threading.Timer(timeout, stop)
    try:
        if timer is not None:
            timer.daemon = True
            timer.start()
        return _fetch(con, sql, params, memory_limit)
    except QueryError:
        if stopped.is_set():
            raise QueryError(
                f"query stopped after {timeout:g} s (--timeout); narrow it or raise the limit"
            ) from None
        raise
    finally:
        if timer is not None:
            timer.cancel()
            timer.join()  # a timer that already fired finishes before the connection closes
        con.close()


def _memory_limit(text: str | None) -> str | None:
    if text is None:
        return None
    if _MEMORY_LIMIT.fullmatch(text.strip()) is None:
        raise QueryError(f"--memory-limit {text!r}: expected a size such as 512MB, 2GB or 1.5GiB")
    return text.strip()


def _fetch(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    params: Sequence[Any] | None,
    memory_limit: str | None,
) -> QueryResult:
    try:
        cursor = con.execute(sql, params or [])
        columns = [d[0] for d in cursor.description or []]
        return QueryResult(columns, cursor.fetchall())
    except duckdb.OutOfMemoryException:
        raise QueryError(
            f"query stopped: it needs more memory than the limit of {memory_limit or 'DuckDB'} "
            "(--memory-limit); narrow it or raise the limit"
        ) from None
    except duckdb.Error as exc:
        raise QueryError(_one_line(exc)) from None


def fetch(
    con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | None = None
) -> QueryResult:
    """Run a statement with bound parameters and return its columns and rows.

    Raises:
        QueryError: DuckDB rejected the query.
    """
    try:
        cursor = con.execute(sql, params or [])
        columns = [d[0] for d in cursor.description or []]
        return QueryResult(columns, cursor.fetchall())
    except duckdb.Error as exc:
        raise QueryError(_one_line(exc)) from None


def fetch_batches(
    con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any], rows: int
) -> Iterator[list[tuple[Any, ...]]]:
    """Run a statement with bound parameters and yield its rows, `rows` at a time.

    Raises:
        QueryError: DuckDB rejected the query.
    """
    try:
        cursor = con.execute(sql, params)
        while batch := cursor.fetchmany(rows):
            yield batch
    except duckdb.Error as exc:
        raise QueryError(_one_line(exc)) from None


def check_read_only(sql: str) -> None:
    """Accept exactly one SELECT statement; refuse anything that could write.

    Raises:
        ReadOnlyQueryError: several statements, or a statement that is not a SELECT.
    """
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(_one_line(exc)) from None
    if len(statements) != 1:
        raise ReadOnlyQueryError(
            f"expected exactly one SQL statement, got {len(statements)}; run them one at a time"
        )
    kind = statements[0].type
    if kind not in READ_ONLY_TYPES:
        name = str(kind).rsplit(".", 1)[-1].removesuffix("_STATEMENT")
        raise ReadOnlyQueryError(
            f"registry sql is read-only: {name} statements are refused; only SELECT is allowed"
        )


def _confine(
    con: duckdb.DuckDBPyConnection,
    store: Store,
    temp_directory: Path | None,
    memory_limit: str | None,
    stored: Path | None = None,
) -> None:
    # The temporary directory is set before access is confined: DuckDB allows reading it
    # implicitly, and its default is `<working directory>/.tmp`. An empty value: no spilling.
    con.execute("SET temp_directory = ?", [str(temp_directory) if temp_directory else ""])
    if memory_limit is not None:
        con.execute("SET memory_limit = ?", [memory_limit])
    allowed = [str(store.attempts_dir) + "/"]
    if stored is not None:
        allowed.append(str(stored.parent) + "/")
    con.execute("SET allowed_directories = ?", [allowed])
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def _segment_table(
    store: Store, entries: list[LedgerEntry], wanted: set[str] | None
) -> list[tuple[str, int, bool]]:
    """Return the live segments to read (path, commit, packed), each checked against its digest.

    A segment superseded by a `pack` commit of `entries` is not read: the packed one is.
    """
    rows = []
    for segment, seq, packed in _live_segments(entries):
        if wanted is not None and wanted.isdisjoint(segment.task_ids):
            continue
        store.checked_segment(segment.path, segment.digest)
        rows.append((str(store.resolve(segment.path)), seq, packed))
    return rows


def _live_segments(entries: list[LedgerEntry]) -> list[tuple[SegmentEntry, int, bool]]:
    """Return (segment, commit, packed) of the segments to read (`pack.live_segments`).

    A ledger without `pack` commits supersedes nothing: every segment of every commit is
    live, in ledger order, and the pack module is not loaded.
    """
    if all(entry.commit.pack is None for entry in entries):
        return [(s, entry.seq, False) for entry in entries for s in entry.commit.segments]
    from registry.storage.pack import live_segments

    return [(live.segment, live.entry.seq, live.packed) for live in live_segments(entries)]


def _retracted_ids(entries: list[LedgerEntry]) -> dict[str, RetractionInfo]:
    """Return `retract.retracted_ids(entries)`, loading that module only when it is needed."""
    if all(entry.commit.kind != "retraction" for entry in entries):
        return {}
    from registry.evidence.retract import retracted_ids

    return retracted_ids(entries)


def _attempt_rows(
    con: duckdb.DuckDBPyConnection, segments: list[tuple[str, int, bool]]
) -> duckdb.DuckDBPyRelation:
    """Return the rows of the segments, with `filename` and each row's own `commit_seq`.

    Ingest segments have no `commit_seq` column (NULL: their commit's); packed ones do.
    """
    names = ", ".join(f'"{name}"' for name in SEGMENT_COLUMNS)
    plain = [path for path, _, packed in segments if not packed]
    merged = [path for path, _, packed in segments if packed]
    relations = []
    if plain:
        relation = con.read_parquet(plain, filename=True)
        relations.append(relation.project(f"{names}, filename, NULL::BIGINT AS commit_seq"))
    if merged:
        relation = con.read_parquet(merged, filename=True)
        relations.append(relation.project(f"{names}, filename, commit_seq"))
    if not relations:
        import pyarrow as pa

        from registry.storage.tables import ATTEMPT_SCHEMA

        empty = pa.schema(
            [*ATTEMPT_SCHEMA, pa.field("filename", pa.string()), pa.field("commit_seq", pa.int64())]
        ).empty_table()
        return con.from_arrow(empty)
    return relations[0] if len(relations) == 1 else relations[0].union(relations[1])


def _register_provenance(con: duckdb.DuckDBPyConnection, entries: list[LedgerEntry]) -> None:
    """Register the commit, digest, sources and time of every ingest commit, by sequence."""
    rows = [
        (e.seq, e.digest, "; ".join(s.path for s in e.commit.sources), e.commit.created_at)
        for e in entries
        if e.commit.kind == "ingest"
    ]
    columns = [("commit_seq", "BIGINT"), ("commit_digest", "VARCHAR"), ("source", "VARCHAR")]
    register_rows(con, "_provenance_text", [*columns, ("ingested_at", "VARCHAR")], rows)
    con.execute(
        "CREATE TEMP TABLE _provenance AS SELECT * REPLACE"
        " (ingested_at::TIMESTAMPTZ AS ingested_at) FROM _provenance_text"
    )


def _register_commits(con: duckdb.DuckDBPyConnection, entries: list[LedgerEntry]) -> None:
    rows = [
        (
            e.seq,
            e.digest,
            e.commit.prev,
            e.commit.kind,
            e.commit.created_at,
            [s.path for s in e.commit.sources],
            len(segment_paths(e.commit)),
            e.commit.attempts_read,
            e.commit.attempts_new,
            e.commit.attempts_present,
            e.commit.layer.kind if e.commit.layer else None,
            e.commit.layer.subject if e.commit.layer else None,
            e.commit.layer.digest if e.commit.layer else None,
        )
        for e in entries
    ]
    columns = [
        ("seq", "BIGINT"),
        ("digest", "VARCHAR"),
        ("prev", "VARCHAR"),
        ("kind", "VARCHAR"),
        ("created_at", "VARCHAR"),
        ("sources", "VARCHAR[]"),
        ("segments", "BIGINT"),
        ("attempts_read", "BIGINT"),
        ("attempts_new", "BIGINT"),
        ("attempts_present", "BIGINT"),
        ("layer_kind", "VARCHAR"),
        ("layer_subject", "VARCHAR"),
        ("layer_digest", "VARCHAR"),
    ]
    register_rows(con, "_commits", columns, rows)


def _register_retractions(
    con: duckdb.DuckDBPyConnection, retracted: dict[str, RetractionInfo]
) -> None:
    rows = [
        (attempt, info.commit_seq, info.commit_digest, info.reason, info.created_at)
        for attempt, info in sorted(retracted.items())
    ]
    columns = [
        ("attempt_id", "VARCHAR"),
        ("commit_seq", "BIGINT"),
        ("commit_digest", "VARCHAR"),
        ("reason", "VARCHAR"),
        ("created_at", "VARCHAR"),
    ]
    register_rows(con, "_retractions", columns, rows)


def _one_line(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."
