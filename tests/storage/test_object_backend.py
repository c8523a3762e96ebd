"""The bucket backend's create protocol, one failure at a time, against the test S3 server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

import registry
from registry.errors import StorageError
from registry.storage import backends
from registry_cli.main import app


@pytest.fixture
def backend(s3_prefix, monkeypatch, tmp_path):
    for key, value in s3_prefix.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(backends.time, "sleep", lambda seconds: None)
    return backends.object_backend(s3_prefix.url)


def source(tmp_path, data: bytes = b"commit"):
    path = tmp_path / "source"
    path.write_bytes(data)
    return path


def test_a_conflict_is_retried_until_the_create_lands(backend, tmp_path, monkeypatch):
    real, calls = backend._put, []

    def conflicted_once(relative, data, writer):
        calls.append(writer)
        if len(calls) == 1:
            raise ConnectionError("409 Conflict: a concurrent write is in flight")
        real(relative, data, writer)

    monkeypatch.setattr(backends.ObjectBackend, "_put", lambda self, *a: conflicted_once(*a))
    assert backend.create("ledger/000000000001.json", source(tmp_path)) is True
    assert len(calls) == 2 and calls[0] == calls[1]  # one writer id for the whole create
    assert backend.read("ledger/000000000001.json") == b"commit"


def test_a_lost_acknowledgement_is_won_by_its_writer(backend, tmp_path, monkeypatch):
    real, calls = backend._put, []

    def written_then_lost(relative, data, writer):
        calls.append(writer)
        real(relative, data, writer)
        if len(calls) == 1:
            raise ConnectionError("connection reset after the request was sent")

    monkeypatch.setattr(backends.ObjectBackend, "_put", lambda self, *a: written_then_lost(*a))
    assert backend.create("ledger/000000000001.json", source(tmp_path)) is True
    assert len(calls) == 2  # the retry met its own object (412) and read its writer id back


def test_a_name_another_writer_holds_is_lost(backend, tmp_path):
    assert backend.create("ledger/000000000001.json", source(tmp_path, b"theirs")) is True
    assert backend.create("ledger/000000000001.json", source(tmp_path, b"mine")) is False
    assert backend.read("ledger/000000000001.json") == b"theirs"


def test_a_taken_name_with_nothing_stored_is_retried(backend, tmp_path, monkeypatch):
    from obstore.exceptions import AlreadyExistsError

    real, calls = backend._put, []

    def taken_but_empty(relative, data, writer):
        calls.append(writer)
        if len(calls) == 1:
            raise AlreadyExistsError("409 reported as taken; nothing stored")
        real(relative, data, writer)

    monkeypatch.setattr(backends.ObjectBackend, "_put", lambda self, *a: taken_but_empty(*a))
    assert backend.create("ledger/000000000001.json", source(tmp_path)) is True
    assert len(calls) == 2


def test_refused_credentials_are_one_line(s3_prefix, monkeypatch, tmp_path):
    for key, value in s3_prefix.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    backend = backends.object_backend(s3_prefix.url)
    with pytest.raises(StorageError) as raised:
        backend.create("ledger/000000000001.json", source(tmp_path))
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"{s3_prefix.url}/ledger/000000000001.json: could not write")


def test_endpoint_option_names_the_server(s3_prefix, monkeypatch, tmp_path):
    env = {k: v for k, v in s3_prefix.env.items() if k != "AWS_ENDPOINT_URL"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("REGISTRY_S3_ENDPOINT", raising=False)
    monkeypatch.setenv("REGISTRY_CACHE", str(tmp_path / "cache"))
    query = ["sql", "SELECT count(*) AS n FROM attempts", "--root", s3_prefix.url, "--format"]
    query.append("json")
    monkeypatch.setenv("REGISTRY_S3_ENDPOINT", s3_prefix.endpoint)
    registry.open_store(s3_prefix.url, create=True)
    monkeypatch.delenv("REGISTRY_S3_ENDPOINT")

    without = CliRunner().invoke(app, query)  # no endpoint: AWS itself, which is unreachable
    assert without.exit_code == 1 and "could not read the object" in without.output

    result = CliRunner().invoke(app, ["--endpoint", s3_prefix.endpoint, *query])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [{"n": 0}]


def test_a_prefix_holding_other_objects_is_not_made_a_registry(s3_prefix, monkeypatch, tmp_path):
    import obstore

    for key, value in s3_prefix.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("REGISTRY_CACHE", str(tmp_path / "cache"))
    obstore.put(s3_prefix.store(), "data/report.csv", b"a,b\n")
    with pytest.raises(registry.RegistryRootError) as raised:
        registry.open_store(s3_prefix.url, create=True)
    assert str(raised.value) == (
        f"{s3_prefix.url} holds objects that are not a registry (data/report.csv); "
        "choose an empty prefix"
    )
    assert [m["path"] for b in obstore.list(s3_prefix.store()) for m in b] == ["data/report.csv"]


def test_ingest_into_a_bucket_never_forks_workers(s3_prefix, monkeypatch, tmp_path):
    import importlib

    from tests.conftest import make_record, write_jsonl

    ingest_module = importlib.import_module("registry.ingest")  # `registry.ingest` is a function

    for key, value in s3_prefix.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("REGISTRY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(ingest_module, "_spare_core", lambda: True)
    monkeypatch.setattr(ingest_module, "_single_threaded", lambda: True)
    monkeypatch.setattr(ingest_module, "PARALLEL_MIN_BYTES", 0)
    forked: list[str] = []
    original = ingest_module._feed

    def feed(batch: Any, pool: Any, source: Any, tick: Any) -> None:
        if pool is not None:
            forked.append("fork")
        original(batch, pool, source, tick)

    monkeypatch.setattr(ingest_module, "_feed", feed)
    records = [make_record(task_id=f"task-{t}") for t in range(3)]

    result = registry.ingest(s3_prefix.url, [str(write_jsonl(tmp_path / "a.jsonl", records))])

    assert forked == [] and result.new == 3
