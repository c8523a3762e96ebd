"""`registry publish iceberg` from a bucket root: the table names the bucket's own objects.

A local SQLite catalog and warehouse hold the table; its data files are the segments'
`s3://bucket/prefix/attempts/...` URLs. Every read-back goes through PyIceberg's own catalog
and scan, with the FileIO properties a reader derives from the registry's environment
(`s3_properties()`), and after this machine's cache is deleted, so the rows can only come from
the bucket.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.table import Table
from typer.testing import CliRunner

import registry
from registry.storage.iceberg import (
    SEQ_PROPERTY,
    iceberg_sql,
    publish_iceberg,
    registry_sql,
    s3_properties,
)
from registry.storage.pack import live_segments
from registry_cli.main import app
from tests.conftest import QUICKSTART, make_record, write_jsonl

TABLE = "evidence.attempts"


@pytest.fixture
def bucket(s3_prefix, tmp_path, monkeypatch):
    """The test server's environment, as a CI machine would set it, and a private cache."""
    for key, value in s3_prefix.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("REGISTRY_CACHE", str(tmp_path / "cache"))
    return s3_prefix


def sqlite_uri(directory: Path) -> str:
    return f"sqlite:///{directory / 'catalog.db'}"


def open_tables(catalog_uri: str, **io: str) -> tuple[Table, Table]:
    """Load both tables through PyIceberg alone; `io` are the reader's FileIO properties."""
    database = Path(catalog_uri.removeprefix("sqlite:///"))
    catalog = load_catalog(
        "registry",
        type="sql",
        uri=catalog_uri,
        warehouse=f"file://{database.parent}/warehouse",
        **io,
    )
    return catalog.load_table(TABLE), catalog.load_table(TABLE + "_retractions")


def scanned(catalog_uri: str, seq: int | None = None) -> tuple[pa.Table, pa.Table]:
    """Scan both tables (at commit `seq`'s snapshots, or the current ones) as a reader would."""
    evidence, retractions = open_tables(catalog_uri, **s3_properties())
    if seq is None:
        return evidence.scan().to_arrow(), retractions.scan().to_arrow()

    def at(table: Table) -> int:
        (found,) = [
            s.snapshot_id
            for s in table.snapshots()
            if s.summary is not None and s.summary.get(SEQ_PROPERTY) == str(seq)
        ]
        return found

    return (
        evidence.scan(snapshot_id=at(evidence)).to_arrow(),
        retractions.scan(snapshot_id=at(retractions)).to_arrow(),
    )


def iceberg_rows(catalog_uri: str, seq: int | None = None) -> list[tuple[Any, ...]]:
    """The documented query, run by DuckDB over the Arrow tables PyIceberg scanned."""
    evidence, retractions = scanned(catalog_uri, seq)
    con = duckdb.connect()
    con.register("evidence", evidence)
    con.register("retractions", retractions)
    return con.execute(iceberg_sql("evidence", "retractions") + " ORDER BY attempt_id").fetchall()


def registry_rows(store: registry.Store, **options: Any) -> list[tuple[Any, ...]]:
    return registry.run_query(store, registry_sql() + " ORDER BY attempt_id", **options).rows


def data_files(catalog_uri: str) -> set[str]:
    evidence, _ = open_tables(catalog_uri)  # planning reads only the local manifests
    return {task.file.file_path for task in evidence.scan().plan_files()}


def live_objects(store: registry.Store) -> set[str]:
    live = live_segments(registry.read_ledger(store))
    return {f"{store.location}/{s.segment.path}" for s in live}


def drop_cache(tmp_path: Path) -> None:
    shutil.rmtree(tmp_path / "cache")


def fill(url: str, tmp_path: Path) -> registry.Store:
    """The quickstart, two ingests of one cohort (a pack joins them), and two retractions."""
    registry.ingest(url, [str(QUICKSTART)])  # type: ignore[arg-type]
    for r in range(2):
        more = write_jsonl(tmp_path / f"more-{r}.jsonl", [make_record(repeat_index=r)])
        registry.ingest(url, [str(more)])  # type: ignore[arg-type]
    store = registry.open_store(url)
    registry.retract(store, [row[0] for row in registry_rows(store)[:2]], "duplicate upload")
    return store


def test_a_bucket_root_publishes_its_objects_urls_and_reads_back(bucket, tmp_path):
    store = fill(bucket.url, tmp_path)
    expected = registry_rows(store)
    seq, digest = registry.head(store)
    catalog = sqlite_uri(tmp_path / "iceberg")

    drop_cache(tmp_path)  # publishing fetches what it registers, and checks its digest
    result = publish_iceberg(store, catalog, TABLE)
    assert result.published and (result.seq, result.head) == (seq, digest)
    assert result.operation == "append" and result.retractions == 2
    assert result.rows == 114 and len(expected) == 112

    # The table names the bucket's objects, never this machine's cached copies.
    files = data_files(catalog)
    assert files == live_objects(store) and len(files) == result.segments
    assert all(f.startswith(f"{bucket.url}/attempts/cohort=") for f in files)
    assert not any(str(tmp_path) in f for f in files)
    assert sorted(result.added) == sorted(f.removeprefix(bucket.url + "/") for f in files)
    # Nothing was copied: the evidence table's directory holds metadata only.
    assert not list(
        (tmp_path / "iceberg" / "warehouse" / "evidence" / "attempts").rglob("*.parquet")
    )

    # A reader with the FileIO properties from the environment reads the bucket itself.
    drop_cache(tmp_path)
    assert iceberg_rows(catalog) == expected
    assert not (tmp_path / "cache").exists()
    ids = scanned(catalog)[0].column("attempt_id").to_pylist()
    assert sorted(ids) == sorted(row[0] for row in registry_rows(store, include_retracted=True))


def test_a_reader_configured_by_pyiceberg_variables_alone(bucket, tmp_path):
    """The reader recipe of the README: `PYICEBERG_CATALOG__REGISTRY__*`, no Python options."""
    registry.ingest(bucket.url, [str(QUICKSTART)])  # type: ignore[arg-type]
    store = registry.open_store(bucket.url)
    catalog = sqlite_uri(tmp_path / "iceberg")
    publish_iceberg(store, catalog, TABLE)
    expected = sorted(row[0] for row in registry_rows(store))
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYICEBERG_CATALOG__REGISTRY__TYPE": "sql",
        "PYICEBERG_CATALOG__REGISTRY__URI": catalog,
    }
    for key, value in s3_properties(bucket.env).items():
        env["PYICEBERG_CATALOG__REGISTRY__" + key.upper().replace(".", "__").replace("-", "_")] = (
            value
        )
    code = (
        "import json; from pyiceberg.catalog import load_catalog\n"
        f"table = load_catalog('registry').load_table({TABLE!r})\n"
        "print(json.dumps(sorted(table.scan().to_arrow().column('attempt_id').to_pylist())))\n"
    )
    drop_cache(tmp_path)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == expected


def test_publishing_again_at_one_head_adds_nothing_then_a_pack_overwrites(bucket, tmp_path):
    store = fill(bucket.url, tmp_path)
    catalog = sqlite_uri(tmp_path / "iceberg")
    args = ["publish", "iceberg", "--root", bucket.url, "--catalog", catalog, "--table", TABLE]
    first = CliRunner().invoke(app, [*args, "--format", "json"])
    assert first.exit_code == 0, first.output
    summary = json.loads(first.stdout)
    assert summary["published"] is True and summary["operation"] == "append"

    warehouse = tmp_path / "iceberg" / "warehouse"
    files = sorted(p for p in warehouse.rglob("*") if p.is_file())
    drop_cache(tmp_path)
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert again.stdout.startswith(f"{TABLE} already at commit {summary['commit_seq']}: nothing")
    evidence, retractions = open_tables(catalog)
    assert (len(evidence.snapshots()), len(retractions.snapshots())) == (1, 1)
    assert sorted(p for p in warehouse.rglob("*") if p.is_file()) == files
    # Nothing to register, so no segment was fetched either.
    assert not list((tmp_path / "cache").rglob("*.parquet"))

    packed = registry.pack_segments(store)
    assert packed.commit is not None
    superseded = {p for s in packed.packed for p in s["supersedes"]}
    result = publish_iceberg(store, catalog, TABLE)
    assert result.published and result.operation == "overwrite"
    assert set(result.removed) == superseded  # root-relative, like the ledger names them
    assert result.added == [s["path"] for s in packed.packed]
    assert data_files(catalog) == live_objects(store)
    drop_cache(tmp_path)
    assert iceberg_rows(catalog) == registry_rows(store)
    # Time travel to the first publication reads the superseded objects, still in the bucket.
    assert iceberg_rows(catalog, summary["commit_seq"]) == registry_rows(
        store, as_of=summary["commit_seq"]
    )


def test_a_synced_directory_publishes_the_same_rows(bucket, tmp_path):
    store = fill(bucket.url, tmp_path)
    from_bucket = sqlite_uri(tmp_path / "from-bucket")
    publish_iceberg(store, from_bucket, TABLE)

    copy = tmp_path / "copy"
    synced = CliRunner().invoke(app, ["sync", bucket.url, str(copy)])
    assert synced.exit_code == 0, synced.output
    from_directory = sqlite_uri(tmp_path / "from-directory")
    local = registry.open_store(copy)
    result = publish_iceberg(local, from_directory, TABLE)
    assert (result.seq, result.head) == registry.head(store)

    in_directory = {f.removeprefix(f"file://{copy.resolve()}/") for f in data_files(from_directory)}
    in_bucket = {f.removeprefix(f"{bucket.url}/") for f in data_files(from_bucket)}
    assert in_directory == in_bucket and all(f.startswith("attempts/") for f in in_bucket)
    drop_cache(tmp_path)
    assert iceberg_rows(from_directory) == iceberg_rows(from_bucket) == registry_rows(local)


def test_a_cached_copy_that_differs_from_its_digest_is_not_published(bucket, tmp_path):
    registry.ingest(bucket.url, [str(QUICKSTART)])  # type: ignore[arg-type]
    store = registry.open_store(bucket.url)
    path = store.resolve(live_segments(registry.read_ledger(store))[0].segment.path)
    assert path.is_relative_to(tmp_path / "cache")
    path.chmod(0o644)
    path.write_bytes(path.read_bytes()[:-1] + b"\0")
    catalog = sqlite_uri(tmp_path / "iceberg")
    with pytest.raises(registry.IntegrityError, match="digest mismatch"):
        publish_iceberg(store, catalog, TABLE)
    evidence, _ = open_tables(catalog)
    assert evidence.current_snapshot() is None


def test_the_table_metadata_can_live_in_the_bucket_too(bucket, tmp_path):
    """`--warehouse s3://…`: the publisher's catalog writes metadata with the same properties."""
    registry.ingest(bucket.url, [str(QUICKSTART)])  # type: ignore[arg-type]
    store = registry.open_store(bucket.url)
    catalog = sqlite_uri(tmp_path / "iceberg")
    warehouse = f"{bucket.url}-iceberg"  # beside the registry's prefix, never inside it
    result = publish_iceberg(store, catalog, TABLE, warehouse=warehouse)
    assert result.metadata_location is not None
    assert result.metadata_location.startswith(f"{warehouse}/evidence/attempts/metadata/")
    assert not list((tmp_path / "iceberg").rglob("*.json"))
    check = registry.verify(store)
    assert check.ok and check.unreferenced == []  # nothing written under the registry's prefix
    drop_cache(tmp_path)
    evidence = load_catalog(
        "registry", type="sql", uri=catalog, warehouse=warehouse, **s3_properties()
    ).load_table(TABLE)
    assert sorted(evidence.scan().to_arrow().column("attempt_id").to_pylist()) == sorted(
        row[0] for row in registry_rows(store)
    )
    again = publish_iceberg(store, catalog, TABLE, warehouse=warehouse)
    assert not again.published and again.snapshot_id == result.snapshot_id
