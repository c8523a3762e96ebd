"""`registry publish iceberg`: the published tables hold the same rows as `registry sql`.

Every check reads the tables back through PyIceberg's own catalog and scan (and DuckDB over
the scanned Arrow tables), never through the registry's code; a Spark read is opt-in (slow).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
import typer
from pyiceberg.catalog import load_catalog
from pyiceberg.table import Table
from typer.testing import CliRunner

import registry
from registry.storage.iceberg import (
    HEAD_PROPERTY,
    SEQ_PROPERTY,
    PublishError,
    iceberg_sql,
    open_catalog,
    publish_iceberg,
    registry_sql,
    s3_properties,
)
from registry.storage.pack import live_segments
from registry_cli.main import ReportingGroup
from registry_cli.publish import publish_app

from .conftest import make_record, write_jsonl

TABLE = "evidence.attempts"


@pytest.fixture
def catalog_uri(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'iceberg' / 'catalog.db'}"


def open_tables(catalog_uri: str, table: str = TABLE) -> tuple[Table, Table]:
    """Load the evidence and retractions tables through PyIceberg alone."""
    database = Path(catalog_uri.removeprefix("sqlite:///"))
    catalog = load_catalog(
        "registry", type="sql", uri=catalog_uri, warehouse=f"file://{database.parent}/warehouse"
    )
    return catalog.load_table(table), catalog.load_table(table + "_retractions")


def snapshot_at(table: Table, seq: int) -> int:
    """Return the id of the snapshot that published ledger commit `seq`."""
    found = [
        s.snapshot_id
        for s in table.snapshots()
        if s.summary is not None and s.summary.get(SEQ_PROPERTY) == str(seq)
    ]
    assert len(found) == 1, found
    return found[0]


def scanned(catalog_uri: str, seq: int | None = None) -> tuple[pa.Table, pa.Table]:
    """Scan both tables (at the snapshots of commit `seq`, or their current ones)."""
    evidence, retractions = open_tables(catalog_uri)
    if seq is None:
        return evidence.scan().to_arrow(), retractions.scan().to_arrow()
    return (
        evidence.scan(snapshot_id=snapshot_at(evidence, seq)).to_arrow(),
        retractions.scan(snapshot_id=snapshot_at(retractions, seq)).to_arrow(),
    )


def iceberg_rows(
    catalog_uri: str, seq: int | None = None, include_retracted: bool = False
) -> list[tuple[Any, ...]]:
    """Run the documented query with DuckDB over the Arrow tables PyIceberg scanned."""
    evidence, retractions = scanned(catalog_uri, seq)
    con = duckdb.connect()
    con.register("evidence", evidence)
    con.register("retractions", retractions)
    sql = iceberg_sql("evidence", "retractions", include_retracted)
    return con.execute(sql + " ORDER BY attempt_id").fetchall()


def registry_rows(store: registry.Store, **options: Any) -> list[tuple[Any, ...]]:
    return registry.run_query(store, registry_sql() + " ORDER BY attempt_id", **options).rows


def assert_same_rows(store: registry.Store, catalog_uri: str) -> None:
    expected = registry_rows(store)
    assert expected
    assert iceberg_rows(catalog_uri) == expected
    # The table itself holds each attempt once: no segment is registered beside its pack.
    evidence, _ = scanned(catalog_uri)
    ids = evidence.column("attempt_id").to_pylist()
    assert len(ids) == len(set(ids))
    assert sorted(ids) == sorted(row[0] for row in registry_rows(store, include_retracted=True))


def data_files(catalog_uri: str) -> set[str]:
    evidence, _ = open_tables(catalog_uri)
    return {task.file.file_path for task in evidence.scan().plan_files()}


def live_uris(store: registry.Store) -> set[str]:
    live = live_segments(registry.read_ledger(store))
    return {f"file://{store.resolve(s.segment.path).resolve()}" for s in live}


def ingest_records(root: Path, tmp_path: Path, name: str, records: list[dict[str, Any]]) -> None:
    result = registry.ingest(root, [str(write_jsonl(tmp_path / name, records))])
    assert result.new == len(records)


def test_published_table_has_the_rows_of_registry_sql(loaded_root, catalog_uri):
    store = registry.open_store(loaded_root)
    seq, digest = registry.head(store)
    result = publish_iceberg(store, catalog_uri, TABLE)
    assert result.published and result.operation == "append"
    assert (result.seq, result.head) == (seq, digest)
    assert result.rows == 112 and result.segments == len(live_uris(store))

    assert_same_rows(store, catalog_uri)
    # The segments are registered where they are: no Parquet file was written or copied.
    assert data_files(catalog_uri) == live_uris(store)
    evidence, _ = open_tables(catalog_uri)
    snapshot = evidence.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary.get(SEQ_PROPERTY) == str(seq)
    assert snapshot.summary.get(HEAD_PROPERTY) == digest
    assert not list((Path(catalog_uri.removeprefix("sqlite:///")).parent).rglob("*.parquet"))


def test_the_schema_is_the_segments_with_timestamps_structs_and_maps(loaded_root, catalog_uri):
    publish_iceberg(registry.open_store(loaded_root), catalog_uri, TABLE)
    evidence, _ = open_tables(catalog_uri)
    types = {f.name: str(f.field_type) for f in evidence.schema().fields}
    assert types["started_at"] == "timestamptz"
    assert types["labels"] == "map<string, string>"
    assert types["inputs"].startswith("struct<")
    assert types["commit_seq"] == "long"
    assert evidence.schema().find_field("attempt_id").required
    assert not evidence.schema().find_field("commit_seq").required
    # Files without field ids are read through the name mapping written with the table.
    assert evidence.metadata.name_mapping() is not None


def test_publishing_twice_at_one_head_adds_no_snapshot(loaded_root, catalog_uri):
    store = registry.open_store(loaded_root)
    first = publish_iceberg(store, catalog_uri, TABLE)
    evidence, retractions = open_tables(catalog_uri)
    before = (len(evidence.snapshots()), len(retractions.snapshots()))
    again = publish_iceberg(store, catalog_uri, TABLE)
    assert not again.published and again.added == [] and again.removed == []
    assert again.snapshot_id == first.snapshot_id
    evidence, retractions = open_tables(catalog_uri)
    assert (len(evidence.snapshots()), len(retractions.snapshots())) == before == (1, 1)
    # Nothing was written either: the tables' directories hold the same files.
    warehouse = Path(catalog_uri.removeprefix("sqlite:///")).parent / "warehouse"
    files = sorted(p for p in warehouse.rglob("*") if p.is_file())
    publish_iceberg(store, catalog_uri, TABLE)
    assert sorted(p for p in warehouse.rglob("*") if p.is_file()) == files


def test_more_evidence_adds_one_snapshot_with_only_the_new_segments(
    loaded_root, catalog_uri, tmp_path
):
    store = registry.open_store(loaded_root)
    first = publish_iceberg(store, catalog_uri, TABLE)
    published_before = data_files(catalog_uri)
    ingest_records(loaded_root, tmp_path, "more.jsonl", [make_record(task_id="task-new")])
    seq, digest = registry.head(store)
    result = publish_iceberg(store, catalog_uri, TABLE)
    assert result.published and result.previous_seq == first.seq and result.seq == seq
    assert result.operation == "append" and len(result.added) == 1 and result.removed == []
    evidence, _ = open_tables(catalog_uri)
    assert len(evidence.snapshots()) == 2
    summary = evidence.current_snapshot().summary
    assert (summary.get(SEQ_PROPERTY), summary.get(HEAD_PROPERTY)) == (str(seq), digest)
    assert summary.get("added-data-files") == "1"
    assert data_files(catalog_uri) - published_before == {
        f"file://{store.resolve(result.added[0]).resolve()}"
    }
    assert_same_rows(store, catalog_uri)
    # Time travel: the first snapshot is the registry as of the first commit.
    assert iceberg_rows(catalog_uri, first.seq) == registry_rows(store, as_of=first.seq)
    assert len(iceberg_rows(catalog_uri, first.seq)) == 112


def test_a_pack_replaces_its_segments_in_one_overwrite_snapshot(loaded_root, catalog_uri, tmp_path):
    store = registry.open_store(loaded_root)
    ingest_records(loaded_root, tmp_path, "a.jsonl", [make_record(repeat_index=0)])
    ingest_records(loaded_root, tmp_path, "b.jsonl", [make_record(repeat_index=1)])
    before = publish_iceberg(store, catalog_uri, TABLE)
    packed = registry.pack_segments(store)
    assert packed.commit is not None
    superseded = {p for s in packed.packed for p in s["supersedes"]}
    assert len(superseded) == 2
    result = publish_iceberg(store, catalog_uri, TABLE)
    assert result.published and result.operation == "overwrite"
    assert set(result.removed) == superseded
    assert result.added == [s["path"] for s in packed.packed]
    evidence, _ = open_tables(catalog_uri)
    assert len(evidence.snapshots()) == 2
    snapshot = evidence.current_snapshot()
    assert snapshot.parent_snapshot_id == before.snapshot_id
    assert snapshot.summary.get(SEQ_PROPERTY) == str(packed.commit.seq)
    assert snapshot.summary.get("deleted-data-files") == "2"
    assert data_files(catalog_uri) == live_uris(store)
    assert_same_rows(store, catalog_uri)
    # Packed rows carry their ingest commit; rows of unpacked segments read it as null.
    rows = scanned(catalog_uri)[0].select(["task_id", "commit_seq"]).to_pylist()
    assert {r["commit_seq"] for r in rows if r["task_id"] == "task-1"} == {2, 3}
    assert {r["commit_seq"] for r in rows if r["task_id"] != "task-1"} == {None}


def test_retracted_attempts_are_filtered_by_the_retractions_table(loaded_root, catalog_uri):
    store = registry.open_store(loaded_root)
    ids = [row[0] for row in registry_rows(store)[:3]]
    registry.retract(store, ids[:2], "duplicate upload")
    first = publish_iceberg(store, catalog_uri, TABLE)
    assert first.retractions_added == 2 and first.retractions == 2
    assert_same_rows(store, catalog_uri)
    assert len(iceberg_rows(catalog_uri)) == 110
    assert iceberg_rows(catalog_uri, include_retracted=True) == registry_rows(
        store, include_retracted=True
    )
    registry.retract(store, ids[1:], "grader bug")  # ids[1] was retracted already
    second = publish_iceberg(store, catalog_uri, TABLE)
    assert second.retractions_added == 1 and second.retractions == 3
    assert second.operation == "append" and second.added == []  # a new head, no new segment
    assert_same_rows(store, catalog_uri)
    _, retractions = scanned(catalog_uri)
    assert sorted(retractions.column("attempt_id").to_pylist()) == sorted(ids)
    assert iceberg_rows(catalog_uri, first.seq) == registry_rows(store, as_of=first.seq)


def test_a_table_of_another_ledger_is_refused(tmp_path, loaded_root, catalog_uri):
    publish_iceberg(registry.open_store(loaded_root), catalog_uri, TABLE)
    other = tmp_path / "other"
    ingest_records(other, tmp_path, "one.jsonl", [make_record()])
    with pytest.raises(PublishError, match="not in this registry's ledger") as caught:
        publish_iceberg(registry.open_store(other), catalog_uri, TABLE)
    assert "\n" not in str(caught.value)


def test_a_damaged_segment_is_not_published(loaded_root, catalog_uri):
    store = registry.open_store(loaded_root)
    path = store.resolve(live_segments(registry.read_ledger(store))[0].segment.path)
    path.chmod(0o644)
    path.write_bytes(path.read_bytes()[:-1] + b"\0")
    with pytest.raises(registry.IntegrityError, match="digest mismatch"):
        publish_iceberg(store, catalog_uri, TABLE)
    evidence, _ = open_tables(catalog_uri)
    assert evidence.current_snapshot() is None


@pytest.mark.parametrize(
    ("catalog", "table", "message"),
    [
        ("sqlite:///{tmp}/c.db", "attempts", "expected NAMESPACE.TABLE"),
        ("sqlite:///{tmp}/c.db", "a.b.c", "expected NAMESPACE.TABLE"),
        ("sqlite://", TABLE, "needs a file"),
        ("ftp://host/x", TABLE, "unknown scheme 'ftp'"),
        ("no such/catalog", TABLE, "expected sqlite:///PATH"),
        ("undefined_catalog", TABLE, "catalog undefined_catalog"),
    ],
)
def test_bad_catalogs_and_names_are_one_line_errors(
    loaded_root, tmp_path, monkeypatch, catalog, table, message
):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.pyiceberg.yaml defines a catalog
    monkeypatch.delenv("PYICEBERG_HOME", raising=False)
    store = registry.open_store(loaded_root)
    with pytest.raises(PublishError, match=message) as caught:
        publish_iceberg(store, catalog.format(tmp=tmp_path), table)
    assert "\n" not in str(caught.value)


def test_s3_properties_come_from_the_registry_environment():
    env = {
        "AWS_ACCESS_KEY_ID": "key",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "AWS_DEFAULT_REGION": "eu-west-1",
        "AWS_ENDPOINT_URL": "http://aws-endpoint:9000",
        "REGISTRY_S3_ENDPOINT": "http://127.0.0.1:8333",
    }
    assert s3_properties(env) == {
        "s3.access-key-id": "key",
        "s3.secret-access-key": "secret",
        "s3.region": "eu-west-1",
        "s3.endpoint": "http://127.0.0.1:8333",  # the registry's endpoint wins, as for roots
        "s3.force-virtual-addressing": "false",
    }
    # AWS itself: no endpoint, the registry's default region, nothing else invented.
    assert s3_properties({}) == {"s3.region": "us-east-1"}
    assert s3_properties({"AWS_SESSION_TOKEN": "t", "AWS_REGION": "x"}) == {
        "s3.session-token": "t",
        "s3.region": "x",
    }


def test_io_properties_never_override_the_catalogs_configuration(tmp_path, monkeypatch):
    monkeypatch.setenv("PYICEBERG_CATALOG__REGISTRY__S3__ENDPOINT", "http://configured:1")
    catalog = open_catalog(
        f"sqlite:///{tmp_path / 'c.db'}",
        io_properties={"s3.endpoint": "http://from-env:2", "s3.region": "r"},
    )
    assert catalog.properties["s3.endpoint"] == "http://configured:1"
    assert catalog.properties["s3.region"] == "r"


def test_an_empty_registry_publishes_nothing(tmp_path, catalog_uri):
    store = registry.open_store(tmp_path / "empty", create=True)
    with pytest.raises(PublishError, match="no commits"):
        publish_iceberg(store, catalog_uri, TABLE)


def test_without_pyiceberg_the_error_names_the_extra(loaded_root, catalog_uri, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyiceberg", None)
    with pytest.raises(PublishError, match=r"pip install 'agent-evidence-registry\[iceberg\]'"):
        publish_iceberg(registry.open_store(loaded_root), catalog_uri, TABLE)


def cli() -> typer.Typer:
    app = typer.Typer(cls=ReportingGroup, rich_markup_mode=None)

    @app.callback()
    def main() -> None:
        """Test app."""

    app.add_typer(publish_app, name="publish")
    return app


def test_command_publishes_then_finds_nothing_new(loaded_root, catalog_uri):
    runner = CliRunner()
    args = ["publish", "iceberg", "--catalog", catalog_uri, "--table", TABLE]
    args += ["--root", str(loaded_root)]
    first = runner.invoke(cli(), [*args, "--format", "json"])
    assert first.exit_code == 0, first.output
    summary = json.loads(first.stdout)
    seq, digest = registry.head(registry.open_store(loaded_root))
    assert summary["published"] is True
    assert (summary["commit_seq"], summary["commit"]) == (seq, digest)
    assert summary["rows"] == 112 and summary["operation"] == "append"
    again = runner.invoke(cli(), args)
    assert again.exit_code == 0, again.output
    assert again.stdout.startswith(f"{TABLE} already at commit {seq}: nothing published")
    bad = runner.invoke(cli(), [*args[:-3], "nodot", "--root", str(loaded_root)])
    assert bad.exit_code == 1
    assert bad.stderr.strip().splitlines() == [
        "Error: --table 'nodot': expected NAMESPACE.TABLE, each a letter or underscore "
        "followed by letters, digits or underscores"
    ]


def test_the_command_module_imports_no_engine():
    code = (
        "import sys, registry_cli.publish\n"
        "heavy = {'pyiceberg', 'pyarrow', 'duckdb', 'sqlalchemy'} & "
        "{m.split('.')[0] for m in sys.modules}\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def _spark_session() -> Any:
    pyspark_sql = pytest.importorskip("pyspark.sql")
    return (
        pyspark_sql.SparkSession.builder.master("local[2]")
        .appName("registry-iceberg")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        .config("spark.hadoop.fs.defaultFS", "file:///")
        .getOrCreate()
    )


@pytest.mark.slow
def test_spark_reads_the_files_the_iceberg_table_lists(loaded_root, catalog_uri, tmp_path):
    """Spark over the data files of the table's current snapshot (listed by PyIceberg).

    No Iceberg runtime jar is available offline, so Spark reads the Parquet files the
    snapshot names rather than the table through a Spark catalog; the query is the same.
    """
    pytest.importorskip("pyspark.sql")
    store = registry.open_store(loaded_root)
    ingest_records(loaded_root, tmp_path, "a.jsonl", [make_record(repeat_index=0)])
    ingest_records(loaded_root, tmp_path, "b.jsonl", [make_record(repeat_index=1)])
    registry.pack_segments(store)
    ids = [row[0] for row in registry_rows(store)[:2]]
    registry.retract(store, ids, "test")
    publish_iceberg(store, catalog_uri, TABLE)
    evidence, retractions = open_tables(catalog_uri)
    files = [task.file.file_path for task in evidence.scan().plan_files()]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = _spark_session()
    try:
        frame = spark.read.option("mergeSchema", "true").parquet(*files)
        # Partition discovery would add `cohort` from the `cohort=<hex>` directories.
        frame.drop("cohort").createOrReplaceTempView("evidence")
        spark.createDataFrame(
            [(a,) for a in retractions.scan().to_arrow().column("attempt_id").to_pylist()],
            "attempt_id string",
        ).createOrReplaceTempView("retractions")
        got = spark.sql(iceberg_sql("evidence", "retractions")).collect()
    finally:
        spark.stop()
    expected = registry_rows(store)
    assert len(got) == len(expected) == 114 - 2
    assert sorted(r["attempt_id"] for r in got) == [row[0] for row in expected]
    by_id = {r["attempt_id"]: r for r in got}
    for row in expected:
        spark_row = by_id[row[0]]
        assert spark_row["task_id"] == row[3] and spark_row["terminal_class"] == row[6]
        assert spark_row["started_at"] == row[10].astimezone().replace(tzinfo=None)
        assert dict(spark_row["labels"]) == row[-2]
