"""`registry sync` between a directory and a bucket, and reads from a bucket through the cache."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import registry
from registry_cli.main import app
from tests.conftest import make_record, write_jsonl


@pytest.fixture
def bucket(s3_prefix, tmp_path, monkeypatch):
    for key, value in s3_prefix.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("REGISTRY_CACHE", str(tmp_path / "cache"))
    return s3_prefix


def run(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def local_objects(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.relative_to(root).as_posix().startswith("tmp/")
    }


def fill(root: str, tmp_path: Path) -> None:
    """Three ingests over 4 tasks, a report layer, and a pack (so checkpoints exist)."""
    for n in range(3):
        records = [
            make_record(experiment_id=f"exp-{n}", task_id=f"task-{t}", repeat_index=r)
            for t in range(4)
            for r in range(2)
        ]
        run("ingest", str(write_jsonl(tmp_path / f"in-{n}.jsonl", records)), "--root", root)
    run("report", "--task", "task-1", "--root", root)
    run("pack", "--root", root)


def report_digest(root: str, task: str) -> str:
    result = CliRunner().invoke(app, ["report", "--task", task, "--root", root])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.stderr.splitlines() if x.startswith("layer "))
    return line.split()[1]


def test_local_to_bucket_and_back_is_byte_for_byte(bucket, tmp_path):
    source = tmp_path / "reg"
    fill(str(source), tmp_path)

    first = json.loads(run("sync", str(source), bucket.url, "--format", "json"))
    assert first["commits_copied"] == len(registry.read_ledger(registry.open_store(source)))
    again = json.loads(run("sync", str(source), bucket.url, "--format", "json"))
    assert again["commits_copied"] == 0 and again["objects_copied"] == 0  # idempotent

    back = tmp_path / "back"
    run("sync", bucket.url, str(back))
    assert local_objects(back) == local_objects(source)

    for root in (str(source), bucket.url, str(back)):
        check = json.loads(run("verify", "--root", root, "--format", "json"))
        assert check["ok"] and check["unreferenced"] == [], (root, check)

    # a report on the bucket is the very layer the directory holds
    assert report_digest(bucket.url, "task-2") == report_digest(str(source), "task-2")


def test_sync_resumes_after_an_interrupted_copy(bucket, tmp_path):
    source = tmp_path / "reg"
    fill(str(source), tmp_path)
    store = registry.open_store(source)
    entries = registry.read_ledger(store)
    # as if a sync stopped after its first commit: objects of commit 1 and the commit itself
    partial = tmp_path / "partial"
    partial_store = registry.open_store(partial, create=True)
    for segment in entries[0].commit.segments:
        with partial_store.temp_area() as area:
            partial_store.put_bytes(store.read_bytes(segment.path), segment.path, area)
    with partial_store.temp_area() as area:
        partial_store.put_bytes(store.read_bytes(entries[0].path), entries[0].path, area)

    done = json.loads(run("sync", str(source), str(partial), "--format", "json"))
    assert done["commits_copied"] == len(entries) - 1
    assert local_objects(partial) == local_objects(source)


def test_a_diverged_destination_is_refused_naming_the_commit(bucket, tmp_path):
    source = tmp_path / "reg"
    fill(str(source), tmp_path)
    other = [make_record(experiment_id="elsewhere", task_id="task-9")]
    run("ingest", str(write_jsonl(tmp_path / "other.jsonl", other)), "--root", bucket.url)
    before = sorted(registry.open_store(bucket.url).names(""))

    result = CliRunner().invoke(app, ["sync", str(source), bucket.url])

    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert lines == [
        f"Error: {bucket.url}: diverged from the source at commit 1 (a different commit holds "
        "that number); sync copies one history, never merges two"
    ]
    assert sorted(registry.open_store(bucket.url).names("")) == before  # nothing written


def test_report_on_a_bucket_fetches_only_that_tasks_segments(bucket, tmp_path):
    records = [
        make_record(experiment_id=f"exp-{t}", task_id=f"task-{t}", repeat_index=r)
        for t in range(3)
        for r in range(2)
    ]
    for t in range(3):
        mine = [r for r in records if r["task_id"] == f"task-{t}"]
        run("ingest", str(write_jsonl(tmp_path / f"t{t}.jsonl", mine)), "--root", bucket.url)
    store = registry.open_store(bucket.url)
    cache = store.root
    segments = {
        e.commit.segments[0].task_ids[0]: e.commit.segments[0].path
        for e in registry.read_ledger(store)
    }
    shutil.rmtree(cache)  # cold: another machine, or a cleared cache

    run("report", "--task", "task-1", "--root", bucket.url)

    fetched = sorted(
        p.relative_to(cache).as_posix() for p in (cache / "attempts").rglob("*.parquet")
    )
    assert fetched == [segments["task-1"]]
    # a second, warm report fetches nothing more
    run("report", "--task", "task-1", "--root", bucket.url)
    assert (
        sorted(p.relative_to(cache).as_posix() for p in (cache / "attempts").rglob("*.parquet"))
        == fetched
    )


def test_a_cached_object_with_the_wrong_bytes_is_refused(bucket, tmp_path):
    records = [make_record(experiment_id="exp", task_id="task-1", repeat_index=r) for r in range(2)]
    run("ingest", str(write_jsonl(tmp_path / "a.jsonl", records)), "--root", bucket.url)
    store = registry.open_store(bucket.url)
    segment = registry.read_ledger(store)[0].commit.segments[0].path
    import obstore

    data = bytearray(bytes(obstore.get(bucket.store(), segment).bytes()))
    data[-20] ^= 0xFF
    obstore.put(bucket.store(), segment, bytes(data))  # tampered in the bucket
    shutil.rmtree(store.root)  # read from another machine: nothing cached yet

    result = CliRunner().invoke(app, ["report", "--task", "task-1", "--root", bucket.url])
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"Error: {bucket.url}/{segment}: the object's bytes do not match the digest in its "
        "name; run registry verify"
    )
    assert not (store.root / segment).exists()  # nothing wrong enters the cache
