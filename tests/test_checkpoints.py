"""Checkpoints: readers load them instead of commit files, refuse damaged or forged ones."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from registry.errors import IntegrityError
from registry.evidence.query import run_query
from registry.storage import checkpoints, ledger
from registry.storage.canonical import canonical_json
from registry.storage.digest import digest_bytes
from registry.storage.store import Store
from registry.storage.verify import verify
from tests.test_pack import one_attempt_ingests


@pytest.fixture(autouse=True)
def small_interval(monkeypatch):
    monkeypatch.setattr(checkpoints, "INTERVAL", 10)


def _walk(store: Store) -> list[ledger.LedgerEntry]:
    """The ledger read commit file by commit file."""
    names = sorted(n for n in os.listdir(store.ledger_dir) if ledger.is_commit_name(n))
    return [ledger.read_entry(store, f"ledger/{n}") for n in names]


def _count_reads(monkeypatch) -> list[str]:
    reads: list[str] = []
    original = ledger.read_entry

    def counting(store, relative: str) -> ledger.LedgerEntry:
        reads.append(relative)
        return original(store, relative)

    monkeypatch.setattr(ledger, "read_entry", counting)
    return reads


def _writable(path: Path) -> Path:
    os.chmod(path, 0o644)
    return path


def test_writers_create_checkpoints_and_readers_use_them(tmp_path, monkeypatch):
    store = one_attempt_ingests(tmp_path / "reg", 35, tasks=5)
    found = checkpoints.list_checkpoints(store)
    assert [seq for seq, _ in found] == [30, 20, 10]
    walked = [(e.seq, e.digest, e.commit) for e in _walk(store)]
    reads = _count_reads(monkeypatch)
    entries = ledger.read_ledger(store)
    assert [(e.seq, e.digest, e.commit) for e in entries] == walked
    # commit 30 (the anchor of the newest checkpoint) and 31..35 are the only files read
    assert sorted(reads) == [f"ledger/{s:012d}.json" for s in range(30, 36)]
    report = verify(store)
    assert report.ok and report.checkpoints == 3 and not report.unreferenced


def test_a_checkpoint_chains_to_the_one_before_it(tmp_path):
    store = one_attempt_ingests(tmp_path / "reg", 20, tasks=5)
    newest = checkpoints.load_checkpoint(store, checkpoints.list_checkpoints(store)[0][1])
    assert newest is not None
    document = newest.checkpoint
    assert (document.seq, document.first_seq, len(document.commits)) == (20, 11, 10)
    assert document.previous == checkpoints.list_checkpoints(store)[1][1]
    assert document.digest == ledger.read_ledger(store)[19].digest
    commit = ledger.read_ledger(store)[19].commit
    assert (document.merkle_size, document.merkle_root) == (commit.merkle_size, commit.merkle_root)
    assert document.merkle_size == 20


def test_on_demand_checkpoint_at_the_head_is_create_if_absent(tmp_path):
    store = one_attempt_ingests(tmp_path / "reg", 13, tasks=5)
    first = checkpoints.write_checkpoint(store)
    again = checkpoints.write_checkpoint(store)
    assert first.seq == 13 and first.created and not again.created and first.path == again.path
    assert checkpoints.load_checkpoint(store, first.path) is not None
    assert verify(store).ok
    with pytest.raises(checkpoints.CheckpointError, match="1..13"):
        checkpoints.write_checkpoint(store, 14)


def _newest(store: Store) -> Path:
    return store.resolve(checkpoints.list_checkpoints(store)[0][1])


def _answers(store: Store) -> list[tuple[object, ...]]:
    return run_query(store, "SELECT attempt_id, commit_seq, source FROM attempts ORDER BY 1").rows


def test_a_damaged_checkpoint_is_not_used_and_verify_names_it(tmp_path, monkeypatch):
    store = one_attempt_ingests(tmp_path / "reg", 12, tasks=3)
    expected = _answers(store)
    path = _writable(_newest(store))
    data = path.read_bytes()
    path.write_bytes(data.replace(b"ci-3.jsonl", b"ci-9.jsonl"))
    reads = _count_reads(monkeypatch)
    assert _answers(store) == expected
    assert len(reads) >= 12  # the commit files were read instead
    problems = verify(store).problems
    assert len(problems) == 1 and "damaged checkpoint" in problems[0], problems


def _forge(store: Store, edit: bytes) -> str:
    """Write a checkpoint whose commit 3 is edited, named by the hash of its own bytes."""
    loaded = checkpoints.load_checkpoint(store, checkpoints.list_checkpoints(store)[0][1])
    assert loaded is not None
    document = loaded.checkpoint.model_dump(mode="json", by_alias=True)
    document["commits"][2] = document["commits"][2].replace("ci-2.jsonl", edit.decode())
    data = canonical_json(document)
    relative = checkpoints.checkpoint_path(loaded.checkpoint.seq, digest_bytes(data))
    with store.temp_area() as area:
        assert store.put_bytes(data, relative, area)
    return relative


def test_a_forged_checkpoint_is_refused_by_readers(tmp_path, monkeypatch):
    store = one_attempt_ingests(tmp_path / "reg", 10, tasks=3)
    expected = _answers(store)
    real = _newest(store)
    forged = _forge(store, b"forged.jsonl")
    _writable(real).unlink()  # only the forged one remains
    assert checkpoints.load_checkpoint(store, forged) is None  # the chain no longer links
    reads = _count_reads(monkeypatch)
    assert _answers(store) == expected
    assert len(reads) == 10
    problems = verify(store).problems
    assert any(forged in p for p in problems), problems


def test_a_forged_checkpoint_of_a_rewritten_history_does_not_match_the_disk(tmp_path):
    store = one_attempt_ingests(tmp_path / "reg", 10, tasks=3)
    expected = _answers(store)
    loaded = checkpoints.load_checkpoint(store, checkpoints.list_checkpoints(store)[0][1])
    assert loaded is not None
    _writable(_newest(store)).unlink()
    # a self-consistent rewritten chain: every commit re-hashed and re-linked
    texts, prev = [], None
    for text in loaded.checkpoint.commits:
        commit = orjson.loads(text)
        commit["prev"] = prev
        commit["sources"][0]["path"] = "rewritten.jsonl"
        raw = canonical_json(commit)
        texts.append(raw.decode())
        prev = digest_bytes(raw)
    document = loaded.checkpoint.model_dump(mode="json", by_alias=True)
    document |= {"commits": texts, "digest": prev}
    data = canonical_json(document)
    relative = checkpoints.checkpoint_path(10, digest_bytes(data))
    with store.temp_area() as area:
        store.put_bytes(data, relative, area)
    assert checkpoints.load_checkpoint(store, relative) is not None  # consistent on its own
    assert _answers(store) == expected  # but commit 10 on disk has another digest
    assert any(relative in p and "commit 10" in p for p in verify(store).problems)


def test_an_edited_commit_behind_a_checkpoint_is_named_by_verify(tmp_path):
    store = one_attempt_ingests(tmp_path / "reg", 12, tasks=3)
    expected = _answers(store)
    path = _writable(store.resolve(ledger.commit_name(4)))
    path.write_bytes(path.read_bytes().replace(b"ci-3.jsonl", b"ci-X.jsonl"))
    # readers answer from the checkpoint's copy, which the chain ties to commit 10 on disk
    assert _answers(store) == expected
    problems = verify(store).problems
    assert any("ledger/000000000005.json: chain broken" in p for p in problems), problems
    assert any("differs from the checkpoint rebuilt" in p for p in problems), problems


def test_a_gap_in_the_ledger_is_refused_even_with_a_checkpoint(tmp_path):
    store = one_attempt_ingests(tmp_path / "reg", 12, tasks=3)
    _writable(store.resolve(ledger.commit_name(5))).unlink()
    with pytest.raises(IntegrityError, match="missing"):
        ledger.read_ledger(store)


def test_racing_writers_write_the_same_checkpoint(tmp_path):
    store = one_attempt_ingests(tmp_path / "reg", 10, tasks=3)
    path = checkpoints.list_checkpoints(store)[0][1]
    data = store.resolve(path).read_bytes()
    entries = ledger.read_ledger(store)
    previous = None
    assert checkpoints.build_checkpoint(store, entries, 10, previous) == data
    assert not checkpoints.write_checkpoint(store, 10).created
