"""`registry publish iceberg`: the registry's segments as an Apache Iceberg table, in place.

The evidence table references the Parquet segments where the registry keeps them (registered as
PyIceberg's `add_files` does: nothing is copied or rewritten) and holds exactly the *live*
segments of the ledger head: after a `pack` commit the packed segment replaces the segments it
supersedes, so no row is ever there twice. Each publication of a new ledger head is one Iceberg
snapshot whose summary carries `registry.ledger.seq` and `registry.ledger.head` (the commit's
digest); a snapshot that adds segments is an `append`, one that also drops superseded segments
is an `overwrite` (both in one commit), and a head that changed no segment (a retraction, a
stored layer) is an `append` of nothing. Publishing again at the same head adds no snapshot; a
table whose last snapshot names a commit that is not in this ledger is refused.

**What the tables hold.** The evidence table `NS.TABLE` holds the rows of the live segments:
the columns of a segment (`attempt_id`, `cohort_key`, the record's fields; `inputs` and
`envelope` as structs, `labels` and `artifacts` as maps, timestamps as `timestamptz`) plus
`commit_seq`, which only packed segments carry (the ingest commit that added the row; null in
rows of unpacked segments). Retractions withdraw attempts without touching their segments, so
they are a second table, `NS.TABLE_retractions` (`attempt_id`, `commit_seq`, `commit_digest`,
`reason`, `created_at`: the `retractions` view of `registry sql`), appended to at every
publication and snapshotted at the same heads. At a published head, the query `iceberg_sql`
returns over the two tables exactly the rows `registry sql` returns for `registry_sql`; an
attempt stored twice (two writers racing) is one row there, so the query keeps one row per
`attempt_id` (all its rows are equal: the id is the digest of the whole record). Without the
retraction filter it equals `registry sql --include-retracted`; a snapshot of an earlier head
(time travel) equals `registry sql --as-of SEQ` at that head.

**Catalogs.** `sqlite:///path/catalog.db` (any SQLAlchemy URL: `postgresql+psycopg2://...`
is the same catalog schema as Iceberg's JDBC catalog) is PyIceberg's SQL catalog, with the
warehouse (where table metadata is written) in `warehouse/` beside the database file unless
given; `http(s)://...` is a REST catalog; a bare name (`glue`, `prod`) is a catalog configured
in `~/.pyiceberg.yaml` or `PYICEBERG_CATALOG__<NAME>__<KEY>` variables. The URI forms take
further properties (credentials, tokens, `s3.endpoint`) from
`PYICEBERG_CATALOG__REGISTRY__<KEY>`. A SQL catalog keys its tables by catalog name, and
the URI forms' name is `registry`: readers load that catalog under the name `registry`.

**Where the data files are.** A table names each segment where the registry keeps it: on a
directory root a `file://` path (every reader must see the root at the same path: a shared or
mounted directory), on a bucket root the object's own URL, `s3://bucket/prefix/attempts/...`
(never this machine's cached copy). A root moved elsewhere republishes every segment under its
new path. The Iceberg statistics of a new data file (row count, sizes, column bounds) are read
from the footer of the segment's local copy after its bytes have been checked against the
digest in its name, which on a bucket root is the very object the URL names: nothing is read
twice, and the statistics describe exactly the bytes the ledger commits to. Readers open the
`s3://` files with their own credentials: in PyIceberg the FileIO properties `s3_properties()`
derives from the registry's environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
`AWS_SESSION_TOKEN`, `AWS_REGION`, and `REGISTRY_S3_ENDPOINT` or `AWS_ENDPOINT_URL`), passed to
`load_catalog` or set as `PYICEBERG_CATALOG__REGISTRY__S3__ENDPOINT`-style variables. When
publishing from a bucket root, or to a warehouse in a bucket, the catalog gets the same
properties, except those its own configuration sets.

PyIceberg is imported only when publishing (`pip install 'agent-evidence-registry[iceberg]'`).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from registry.errors import RegistryError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyiceberg.io import FileIO
    from pyiceberg.table import Table

    from registry.storage.ledger import LedgerEntry
    from registry.storage.store import Store

SEQ_PROPERTY = "registry.ledger.seq"
"""Snapshot summary key: the sequence number of the ledger head the snapshot publishes."""
HEAD_PROPERTY = "registry.ledger.head"
"""Snapshot summary key: the digest of that commit (`blake3:...`)."""
RETRACTIONS_SUFFIX = "_retractions"
"""The retractions table is the evidence table's name with this suffix, in its namespace."""
CATALOG_NAME = "registry"
"""PyIceberg catalog name of URI catalogs (its `PYICEBERG_CATALOG__REGISTRY__*` variables)."""
INSTALL_HINT = "pip install 'agent-evidence-registry[iceberg]'"

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SQL_SCHEMES = ("sqlite", "postgresql", "postgres", "mysql", "mariadb", "mssql", "oracle")


class PublishError(RegistryError):
    """An Iceberg publication cannot be made (catalog, table name, foreign table, PyIceberg)."""


@dataclass
class PublishResult:
    """What a publication did."""

    table: str
    retractions_table: str
    seq: int
    head: str
    published: bool
    """False when the table already held this head (nothing was written)."""
    previous_seq: int | None = None
    """The head the table held before (None: it held none)."""
    snapshot_id: int | None = None
    """The evidence table's current snapshot (the new one when `published`)."""
    operation: str | None = None
    """`append` or `overwrite` (superseded segments dropped) when `published`."""
    added: list[str] = field(default_factory=list)
    """Segments (root-relative) added by this publication."""
    removed: list[str] = field(default_factory=list)
    """Data files dropped by this publication (segments a pack superseded)."""
    segments: int = 0
    """Data files of the evidence table at this head (the live segments)."""
    rows: int = 0
    """Rows of the evidence table at this head."""
    retractions_added: int = 0
    retractions: int = 0
    """Rows of the retractions table at this head."""
    metadata_location: str | None = None


def segment_columns() -> list[str]:
    """Return the columns of an ingest segment, in file order (the `attempts` view's first)."""
    from registry.storage.tables import ATTEMPT_SCHEMA

    return list(ATTEMPT_SCHEMA.names)


def registry_sql() -> str:
    """Return the `registry sql` query whose rows the published tables hold."""
    return f"SELECT {_column_list()} FROM attempts"


def iceberg_sql(table: str, retractions: str | None, include_retracted: bool = False) -> str:
    """Return the query over the published tables that gives `registry_sql()`'s rows.

    `table` and `retractions` are the names the engine knows the two tables by (in Spark or
    Trino `catalog.ns.table` and `catalog.ns.table_retractions`). The query keeps one row per
    attempt id and, unless `include_retracted`, drops the retracted ids. Standard SQL:
    DuckDB, Spark and Trino run it as written.
    """
    columns = _column_list()
    where = "n = 1"
    if not include_retracted:
        if retractions is None:
            raise ValueError("retractions table needed unless include_retracted")
        where += f" AND attempt_id NOT IN (SELECT attempt_id FROM {retractions})"
    return (
        f"SELECT {columns} FROM (SELECT {columns}, row_number() OVER "
        f"(PARTITION BY attempt_id ORDER BY commit_seq) AS n FROM {table}) AS t WHERE {where}"
    )


def _column_list() -> str:
    return ", ".join(segment_columns())


def publish_iceberg(
    store: Store, catalog_uri: str, table: str, warehouse: str | None = None
) -> PublishResult:
    """Publish the ledger head: register its live segments in `table` of the catalog.

    Creates the namespace, the evidence table and the retractions table when missing.
    Nothing is written when the evidence table already holds this head.

    Raises:
        PublishError: PyIceberg is missing, the catalog cannot be used, the table name is
            not `NS.TABLE`, the table was published from another ledger or does not have the
            segment schema, or another publisher committed first.
        IntegrityError: the ledger, or a segment to register, is damaged or missing.
    """
    namespace, name = _split_name(table)
    try:
        import pyiceberg  # noqa: F401
    except ImportError:
        raise PublishError(f"publishing to Iceberg needs PyIceberg: {INSTALL_HINT}") from None
    from registry.storage.ledger import read_ledger

    entries = read_ledger(store)
    if not entries:
        raise PublishError("the registry has no commits yet: nothing to publish; ingest first")
    head = entries[-1]
    in_bucket = not store.is_local or (warehouse or "").lower().startswith("s3://")
    catalog = open_catalog(catalog_uri, warehouse, s3_properties() if in_bucket else None)
    evidence_name = f"{namespace}.{name}"
    retractions_name = f"{namespace}.{name}{RETRACTIONS_SUFFIX}"
    from registry.evidence.retract import retractions_schema

    with _catalog_errors(catalog_uri, evidence_name):
        catalog.create_namespace_if_not_exists(namespace)
        evidence = _load_or_create(catalog, evidence_name, _evidence_schema())
        retracted = _load_or_create(catalog, retractions_name, retractions_schema())
    previous = _published_head(evidence, evidence_name, entries)
    result = PublishResult(evidence_name, retractions_name, head.seq, head.digest, False)
    result.previous_seq = previous
    properties = {SEQ_PROPERTY: str(head.seq), HEAD_PROPERTY: head.digest}
    with _catalog_errors(catalog_uri, retractions_name):
        # The retractions first: the evidence table's snapshot is the mark of a finished
        # publication, so a publication stopped between the two is completed by the next.
        result.retractions_added = _publish_retractions(retracted, retractions_name, entries)
    with _catalog_errors(catalog_uri, evidence_name):
        if previous != head.seq:
            _publish_segments(store, evidence, evidence_name, entries, properties, result)
            result.published = True
        snapshot = evidence.current_snapshot()
        result.snapshot_id = None if snapshot is None else snapshot.snapshot_id
        result.metadata_location = evidence.metadata_location
        if snapshot is not None and snapshot.summary is not None:
            summary = snapshot.summary
            result.segments = int(summary.get("total-data-files") or 0)
            result.rows = int(summary.get("total-records") or 0)
        retracted_now = retracted.current_snapshot()
        if retracted_now is not None and retracted_now.summary is not None:
            result.retractions = int(retracted_now.summary.get("total-records") or 0)
    return result


def _load_or_create(catalog: Catalog, name: str, schema: pa.Schema) -> Table:
    # Not `create_table_if_not_exists`: it writes a metadata file before finding the table
    # exists, which would leave one orphan file in the table's directory per publication.
    from pyiceberg.exceptions import TableAlreadyExistsError

    if catalog.table_exists(name):
        return catalog.load_table(name)
    try:
        return catalog.create_table(name, schema=schema)
    except TableAlreadyExistsError:  # another publisher created it meanwhile
        return catalog.load_table(name)


def s3_properties(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return PyIceberg FileIO properties that reach the registry's bucket.

    They come from the environment an `s3://` root is opened with (`os.environ` unless
    `environ` is given): credentials from `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and
    `AWS_SESSION_TOKEN`, the region from `AWS_REGION` or `AWS_DEFAULT_REGION` (else
    `us-east-1`, as the registry assumes; a set region also spares PyIceberg a request to AWS
    to find the bucket's), and the endpoint from `REGISTRY_S3_ENDPOINT` or `AWS_ENDPOINT_URL`
    with path-style addressing, which S3-compatible servers expect. Readers pass them to
    `load_catalog(..., **s3_properties())` to scan tables whose data files are `s3://` URLs.
    """
    env = os.environ if environ is None else environ
    found = {
        "s3.access-key-id": env.get("AWS_ACCESS_KEY_ID"),
        "s3.secret-access-key": env.get("AWS_SECRET_ACCESS_KEY"),
        "s3.session-token": env.get("AWS_SESSION_TOKEN"),
        "s3.region": env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1",
    }
    endpoint = env.get("REGISTRY_S3_ENDPOINT") or env.get("AWS_ENDPOINT_URL")
    if endpoint:
        found["s3.endpoint"] = endpoint
        found["s3.force-virtual-addressing"] = "false"
    return {key: value for key, value in found.items() if value}


def open_catalog(
    catalog_uri: str, warehouse: str | None = None, io_properties: Mapping[str, str] | None = None
) -> Catalog:
    """Return the PyIceberg catalog a `--catalog` value names (see the module docstring).

    `io_properties` (such as `s3_properties()`) are added to the catalog's properties, except
    the keys its configuration (`~/.pyiceberg.yaml`, `PYICEBERG_CATALOG__<NAME>__*`) sets.

    Raises:
        PublishError: the value names no usable catalog.
    """
    from pyiceberg.catalog import load_catalog
    from pyiceberg.utils.config import Config

    match = _SCHEME.match(catalog_uri)
    scheme = match.group(1).lower().split("+")[0] if match else None
    properties: dict[str, str] = {}
    name = CATALOG_NAME
    if scheme is None:
        if not _NAME.match(catalog_uri):
            raise PublishError(
                f"--catalog {catalog_uri!r}: expected sqlite:///PATH, another SQLAlchemy URL, "
                "http(s)://REST-URI, or the name of a catalog in ~/.pyiceberg.yaml"
            )
        name = catalog_uri
    elif scheme in _SQL_SCHEMES:
        properties = {"type": "sql", "uri": catalog_uri}
        if scheme == "sqlite":
            database = _sqlite_path(catalog_uri)
            database.parent.mkdir(parents=True, exist_ok=True)
            if warehouse is None:
                warehouse = str(database.parent / "warehouse")
    elif scheme in ("http", "https"):
        properties = {"type": "rest", "uri": catalog_uri}
    else:
        raise PublishError(
            f"--catalog {catalog_uri!r}: unknown scheme {scheme!r}; expected sqlite:///PATH, "
            "another SQLAlchemy URL, http(s)://REST-URI, or a configured catalog name"
        )
    if warehouse is not None:
        properties["warehouse"] = _warehouse_uri(warehouse)
    with _catalog_errors(catalog_uri, None):
        configured = Config().get_catalog_config(name) or {}
        for key, value in (io_properties or {}).items():
            setting = configured.get(key, value)  # the configuration as it is now
            properties.setdefault(key, setting if isinstance(setting, str) else value)
        catalog = load_catalog(name, **properties)
    return catalog


def _sqlite_path(catalog_uri: str) -> Path:
    path = re.sub(r"^sqlite(\+[^:]*)?:///", "", catalog_uri, count=1).split("?", 1)[0]
    if path == catalog_uri or path in ("", ":memory:"):
        raise PublishError(
            f"--catalog {catalog_uri!r}: a SQLite catalog needs a file, sqlite:///PATH/catalog.db"
        )
    return Path(path)


def _warehouse_uri(warehouse: str) -> str:
    if _SCHEME.match(warehouse):
        return warehouse
    path = Path(warehouse).absolute()
    path.mkdir(parents=True, exist_ok=True)
    return f"file://{path}"


def _split_name(table: str) -> tuple[str, str]:
    parts = table.split(".")
    if len(parts) != 2 or not all(_NAME.match(p) for p in parts):
        raise PublishError(
            f"--table {table!r}: expected NAMESPACE.TABLE, each a letter or underscore followed "
            "by letters, digits or underscores"
        )
    return parts[0], parts[1]


@contextlib.contextmanager
def _catalog_errors(catalog_uri: str, table: str | None) -> Iterator[None]:
    """Turn a catalog's or PyIceberg's failure into a one-line `PublishError`."""
    where = f"catalog {catalog_uri}" + (f", table {table}" if table else "")
    try:
        yield
    except RegistryError:
        raise
    except Exception as exc:
        from pyiceberg.exceptions import CommitFailedException

        if isinstance(exc, CommitFailedException):
            raise PublishError(
                f"{where}: the table changed while publishing (another publisher); "
                "run the command again"
            ) from exc
        text = " ".join(str(exc).split()) or type(exc).__name__
        text = text if len(text) <= 300 else text[:297] + "..."
        raise PublishError(f"{where}: {type(exc).__name__}: {text}") from exc


def _evidence_schema() -> pa.Schema:
    """The evidence table's schema: a segment's columns plus a packed segment's `commit_seq`.

    Optional, since unpacked segments do not have it (Iceberg reads a missing column as null).
    """
    from registry.storage.pack import COMMIT_SEQ
    from registry.storage.tables import ATTEMPT_SCHEMA

    return ATTEMPT_SCHEMA.append(COMMIT_SEQ.with_nullable(True))


def _published_head(table: Table, name: str, entries: list[LedgerEntry]) -> int | None:
    """Return the ledger sequence `table` was last published at (None: never).

    Raises:
        PublishError: the table holds snapshots of something else, or of another ledger.
    """
    snapshot = table.current_snapshot()
    if snapshot is None:
        return None
    summary = snapshot.summary
    seq_text = None if summary is None else summary.get(SEQ_PROPERTY)
    digest = None if summary is None else summary.get(HEAD_PROPERTY)
    if seq_text is None or digest is None or not seq_text.isdigit():
        raise PublishError(
            f"table {name}: its current snapshot {snapshot.snapshot_id} was not published by "
            f"a registry (no {SEQ_PROPERTY} in its summary); choose another table"
        )
    seq = int(seq_text)
    if not 1 <= seq <= len(entries) or entries[seq - 1].digest != digest:
        raise PublishError(
            f"table {name}: published at commit {seq} ({digest}), which is not in this "
            f"registry's ledger (head {entries[-1].seq}); publish another registry to "
            "another table"
        )
    return seq


def _publish_retractions(table: Table, name: str, entries: list[LedgerEntry]) -> int:
    """Append the retractions committed since the table's last head; return how many."""
    import pyarrow as pa

    from registry.evidence.retract import retracted_ids, retractions_schema

    head = entries[-1]
    previous = _published_head(table, name, entries) or 0
    if previous == head.seq:
        return 0
    fresh = sorted(
        (info.commit_seq, attempt_id, info)
        for attempt_id, info in retracted_ids(entries).items()
        if info.commit_seq > previous
    )
    schema = retractions_schema()
    rows = pa.table(
        {
            "attempt_id": [a for _, a, _ in fresh],
            "commit_seq": [seq for seq, _, _ in fresh],
            "commit_digest": [i.commit_digest for _, _, i in fresh],
            "reason": [i.reason for _, _, i in fresh],
            "created_at": pa.array([i.created_at for _, _, i in fresh], pa.string()).cast(
                schema.field("created_at").type
            ),
        },
        schema=schema,
    )
    properties = {SEQ_PROPERTY: str(head.seq), HEAD_PROPERTY: head.digest}
    with table.transaction() as tx:
        if len(rows):
            tx.append(rows, snapshot_properties=properties)
        else:  # a snapshot still marks the head, so both tables time-travel alike
            with tx.update_snapshot(snapshot_properties=properties).fast_append():
                pass
    return len(rows)


def _file_uri(path: Path) -> str:
    # Not `Path.as_uri()`: it escapes `=` in `cohort=<hex>`, and Iceberg paths are not decoded.
    return f"file://{path.resolve()}"


def _data_uri(store: Store, relative: str) -> str:
    """The URI a table names a segment by: its file in a directory, or its object's URL."""
    if store.is_local:
        return _file_uri(store.resolve(relative))
    return f"{store.location}/{relative}"


def _verified_copies_io(local: dict[str, Path]) -> FileIO:
    """A FileIO that opens each data file URI of `local` as its checked local copy.

    `parquet_file_to_data_file` names the data file by the URI it is given and reads the
    footer (statistics, size) through the FileIO: so the table names the segment's own URI
    while the statistics come from the bytes whose digest was just checked.
    """
    from pyiceberg.io import FileIO, InputFile, OutputFile
    from pyiceberg.io.pyarrow import PyArrowFileIO

    class VerifiedCopies(FileIO):
        def __init__(self) -> None:
            super().__init__()
            self.files = PyArrowFileIO()

        def new_input(self, location: str) -> InputFile:
            return self.files.new_input(_file_uri(local[location]))

        def new_output(self, location: str) -> OutputFile:
            raise PermissionError(f"{location}: segments are never written while publishing")

        def delete(self, location: str | InputFile | OutputFile) -> None:
            raise PermissionError(f"{location}: segments are never deleted while publishing")

    return VerifiedCopies()


def _publish_segments(
    store: Store,
    table: Table,
    name: str,
    entries: list[LedgerEntry],
    properties: dict[str, str],
    result: PublishResult,
) -> None:
    """Make the table's data files the live segments of `entries`, in one snapshot."""
    from pyiceberg.io.pyarrow import parquet_file_to_data_file
    from pyiceberg.table import TableProperties

    from registry.storage.pack import live_segments

    live = live_segments(entries)
    wanted = {_data_uri(store, s.segment.path): s.segment for s in live}
    current = {task.file.file_path: task.file for task in table.scan().plan_files()}
    added = sorted(uri for uri in wanted if uri not in current)
    removed = sorted(uri for uri in current if uri not in wanted)
    local: dict[str, Path] = {}
    for uri in added:
        segment = wanted[uri]
        # On a bucket root: fetched into the cache (checked against its name) when absent.
        local[uri] = store.checked_segment(segment.path, segment.digest)
    copies = _verified_copies_io(local)
    with table.transaction() as tx:
        if tx.table_metadata.name_mapping() is None:
            mapping = tx.table_metadata.schema().name_mapping.model_dump_json()
            tx.set_properties({TableProperties.DEFAULT_NAME_MAPPING: mapping})
        try:
            files = [parquet_file_to_data_file(copies, tx.table_metadata, uri) for uri in added]
            update = tx.update_snapshot(snapshot_properties=properties)
            if not removed:
                with update.fast_append() as append:
                    for data_file in files:
                        append.append_data_file(data_file)
                result.operation = "append"
            else:
                with update.overwrite() as change:
                    for uri in removed:
                        change.delete_data_file(current[uri])
                    for data_file in files:
                        change.append_data_file(data_file)
                result.operation = "overwrite"
        except ValueError as exc:  # PyIceberg's schema check of a file against the table
            text = " ".join(str(exc).split())
            raise PublishError(
                f"table {name}: a segment does not fit the table's schema ({text}); "
                "publish to a new table"
            ) from exc
    result.added = [wanted[uri].path for uri in added]
    known = {_data_uri(store, path): path for path in _segment_paths(entries)}
    result.removed = [known.get(uri, uri) for uri in removed]


def _segment_paths(entries: list[LedgerEntry]) -> list[str]:
    """Every segment any commit of `entries` wrote, live or superseded."""
    paths: list[str] = []
    for entry in entries:
        paths.extend(s.path for s in entry.commit.segments)
        if entry.commit.pack is not None:
            paths.extend(s.path for s in entry.commit.pack.segments)
    return paths
