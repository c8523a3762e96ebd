"""One conformance suite, two backends: a local directory and a bucket on a real S3 server.

Every test runs against both roots through the same commands: ingest, report, verify, racing
writers, a writer killed between the segment upload and the commit, a lost acknowledgement of
the commit, a stray object in the root, and tampered bytes. The S3 server is SeaweedFS on
loopback, started by the fixtures in `tests/storage/conftest.py`.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import registry
from registry import _faults
from registry_cli.main import app
from tests.conftest import make_record, write_jsonl

BACKENDS = ["local", "s3"]
CLI = "from registry_cli.main import main; main()"


class Root:
    """A registry root on one backend, with raw access to its objects for the fault tests."""

    def __init__(self, kind: str, location: str, env: dict[str, str], prefix: Any = None):
        self.kind, self.location, self.env, self.prefix = kind, location, env, prefix

    def raw_put(self, relative: str, data: bytes) -> None:
        """Write an object behind the registry's back (overwriting is allowed here)."""
        if self.kind == "local":
            path = Path(self.location, relative)
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.exists():
                os.chmod(path, 0o644)
            path.write_bytes(data)
            return
        import obstore

        obstore.put(self.prefix.store(), relative, data)

    def raw_get(self, relative: str) -> bytes:
        if self.kind == "local":
            return Path(self.location, relative).read_bytes()
        import obstore

        return bytes(obstore.get(self.prefix.store(), relative).bytes())

    def objects(self) -> dict[str, bytes]:
        """Every object of the registry (the local temporary area excluded) and its bytes."""
        store = registry.open_store(self.location)
        return {name: self.raw_get(name) for name in store.names("") if not name.startswith("tmp/")}


@pytest.fixture(params=BACKENDS)
def root(request, tmp_path, monkeypatch) -> Root:
    monkeypatch.setenv("REGISTRY_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("REGISTRY_INJECT", raising=False)
    monkeypatch.delenv("REGISTRY_CRASH_AT", raising=False)
    _faults._INJECTED.clear()
    if request.param == "local":
        return Root("local", str(tmp_path / "reg"), {"REGISTRY_CACHE": str(tmp_path / "cache")})
    prefix = request.getfixturevalue("s3_prefix")
    env = {**prefix.env, "REGISTRY_CACHE": str(tmp_path / "cache")}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return Root("s3", prefix.url, env, prefix)


def cli(root: Root, *args: str) -> Any:
    result = CliRunner().invoke(app, [*args, "--root", root.location])
    return result


def records(experiment: str, tasks: int = 3, repeats: int = 2, **fields: Any) -> list[dict]:
    return [
        make_record(experiment_id=experiment, task_id=f"task-{t}", repeat_index=r, **fields)
        for t in range(tasks)
        for r in range(repeats)
    ]


def ingest_file(root: Root, path: Path) -> dict:
    result = cli(root, "ingest", str(path), "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def verified(root: Root) -> dict:
    result = cli(root, "verify", "--format", "json")
    return {"exit": result.exit_code, **json.loads(result.stdout)}


def test_ingest_report_verify(root, tmp_path):
    summary = ingest_file(root, write_jsonl(tmp_path / "a.jsonl", records("exp-a")))
    assert summary["new"] == 6

    report = cli(root, "report", "--task", "task-1", "--format", "json")
    assert report.exit_code == 0, report.output
    document = json.loads(report.stdout)
    assert document["task_id"] == "task-1"
    assert [s["valid"] for c in document["cohorts"] for s in c["systems"]] == [2]

    check = verified(root)
    assert check["exit"] == 0 and check["problems"] == [] and check["attempts"] == 6
    assert check["unreferenced"] == []

    again = ingest_file(root, write_jsonl(tmp_path / "a.jsonl", records("exp-a")))
    assert again["new"] == 0 and again["already_present"] == 6


def test_sql_reads_the_same_rows_on_both_backends(root, tmp_path):
    ingest_file(root, write_jsonl(tmp_path / "a.jsonl", records("exp-a")))
    ingest_file(root, write_jsonl(tmp_path / "b.jsonl", records("exp-b", tasks=2)))
    result = cli(root, "sql", "SELECT task_id, count(*) AS n FROM attempts GROUP BY 1 ORDER BY 1")
    assert result.exit_code == 0, result.output
    assert "task-0" in result.stdout and "task-2" in result.stdout
    rows = registry.run_query(
        registry.open_store(root.location), "SELECT count(*) FROM attempts"
    ).rows
    assert rows == [(10,)]


def test_a_stray_object_is_listed_and_changes_nothing(root, tmp_path):
    ingest_file(root, write_jsonl(tmp_path / "a.jsonl", records("exp-a")))
    before = cli(root, "sql", "SELECT count(*) FROM attempts").stdout
    root.raw_put("attempts/cohort=stray/stray.parquet", b"not parquet")
    root.raw_put("notes.txt", b"left here by someone")

    check = verified(root)
    assert check["exit"] == 0 and check["problems"] == []
    assert set(check["unreferenced"]) == {"attempts/cohort=stray/stray.parquet", "notes.txt"}
    assert cli(root, "sql", "SELECT count(*) FROM attempts").stdout == before


def test_tampered_bytes_are_caught_by_verify(root, tmp_path):
    ingest_file(root, write_jsonl(tmp_path / "a.jsonl", records("exp-a")))
    store = registry.open_store(root.location)
    segment = registry.read_ledger(store)[0].commit.segments[0].path
    data = bytearray(root.raw_get(segment))
    data[len(data) // 2] ^= 0xFF
    root.raw_put(segment, bytes(data))

    check = verified(root)
    assert check["exit"] == 1
    assert any(p.startswith(f"{segment}: altered") for p in check["problems"]), check["problems"]


def test_a_lost_acknowledgement_never_duplicates_the_commit(root, tmp_path, monkeypatch):
    monkeypatch.setenv("REGISTRY_INJECT", "lost-ack")
    summary = ingest_file(root, write_jsonl(tmp_path / "a.jsonl", records("exp-a")))
    monkeypatch.delenv("REGISTRY_INJECT")
    assert "lost-ack" in _faults._INJECTED  # the fault was really reached

    entries = registry.read_ledger(registry.open_store(root.location))
    assert [e.seq for e in entries] == [1]
    assert summary["commit_seq"] == 1
    check = verified(root)
    assert check["exit"] == 0 and check["attempts"] == 6


def test_a_writer_killed_between_upload_and_commit(root, tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", records("exp-a"))
    env = {**os.environ, **root.env, "REGISTRY_CRASH_AT": "after-segments-published"}
    killed = subprocess.run(
        [sys.executable, "-c", CLI, "ingest", str(path), "--root", root.location],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == -9, killed.stderr

    check = verified(root)
    assert check["exit"] == 0 and check["commits"] == 0
    # the uploaded segments wait for a commit (and a local writer's temporary area remains)
    assert any(name.startswith("attempts/") for name in check["unreferenced"])
    assert all(name.startswith(("attempts/", "tmp/")) for name in check["unreferenced"])
    assert cli(root, "sql", "SELECT count(*) AS n FROM attempts", "--format", "json").stdout

    summary = ingest_file(root, path)
    assert summary["new"] == 6
    check = verified(root)
    assert check["exit"] == 0 and check["attempts"] == 6
    # the rerun committed the very segments the killed writer uploaded (same bytes, same name)
    assert all(name.startswith("tmp/") for name in check["unreferenced"])


def _racer(location: str, env: dict[str, str], files: list[str], barrier: Any) -> None:
    os.environ.update(env)
    for path in files:
        barrier.wait()
        registry.ingest(location, [path])


def race(root: Root, tmp_path: Path, writers: int, rounds: int) -> None:
    """`writers` processes ingest one file each per round, released together every round."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(writers)
    files = [
        [
            str(
                write_jsonl(
                    tmp_path / f"w{w}-r{r}.jsonl", records(f"w{w}-r{r}", tasks=2, repeats=1)
                )
            )
            for r in range(rounds)
        ]
        for w in range(writers)
    ]
    procs = [
        context.Process(target=_racer, args=(root.location, root.env, files[w], barrier))
        for w in range(writers)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    assert [proc.exitcode for proc in procs] == [0] * writers

    store = registry.open_store(root.location)
    entries = registry.read_ledger(store)
    assert [e.seq for e in entries] == list(range(1, writers * rounds + 1))  # no gap, no dup
    experiments = sorted(
        e.commit.sources[0].path.rsplit("/", 1)[-1] for e in entries if e.commit.kind == "ingest"
    )
    assert experiments == sorted(Path(f).name for per in files for f in per)
    rows = registry.run_query(store, "SELECT count(*), count(DISTINCT attempt_id) FROM attempts")
    assert rows.rows == [(writers * rounds * 2, writers * rounds * 2)]  # nothing lost or twice
    check = verified(root)
    assert check["exit"] == 0 and check["problems"] == []


def test_racing_writers(root, tmp_path):
    race(root, tmp_path, writers=8, rounds=1)  # 20 rounds: -m race


@pytest.mark.race
@pytest.mark.timeout(1800)  # 160 racing ingests; a loaded CI machine can take minutes per root
def test_racing_writers_many_rounds(root, tmp_path):
    race(root, tmp_path, writers=8, rounds=20)
