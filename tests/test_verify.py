"""`registry verify`: tampering with any named object fails with a line naming the file;
`--deep` re-derives attempt ids and catches rows that lie (the default re-hashes bytes and
does not read rows); unreferenced files are listed, not fatal."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import registry
from registry.evidence.keys import derive_keys, record_json
from registry.storage import ledger
from registry.storage.tables import read_segment, rows_to_table, to_row, write_segment
from registry_schemas import AttemptRecord
from tests.conftest import QUICKSTART, make_record, write_jsonl

WRONG_ID = "blake3:" + "0" * 64


@pytest.fixture
def two_commits(root: Path, tmp_path: Path) -> registry.Store:
    """A registry holding the quickstart batch (commit 1) and a second batch (commit 2)."""
    registry.ingest(root, [str(QUICKSTART)])
    extra = [make_record(task_id=f"task-{t}", repeat_index=r) for t in range(3) for r in range(2)]
    registry.ingest(root, [str(write_jsonl(tmp_path / "extra.jsonl", extra))])
    store = registry.open_store(root)
    assert [e.seq for e in registry.read_ledger(store)] == [1, 2]
    return store


def _first_segment(store: registry.Store) -> str:
    return registry.read_ledger(store)[0].commit.segments[0].path


def _writable(path: Path) -> Path:
    path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return path


def _problems(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("problem: ")]


def _flip_byte(store: registry.Store) -> str:
    relative = _first_segment(store)
    path = _writable(store.resolve(relative))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    return f"problem: {relative}: altered"


def _delete_segment(store: registry.Store) -> str:
    relative = _first_segment(store)
    store.resolve(relative).unlink()
    return f"problem: {relative}: missing"


def _replace_segment(store: registry.Store) -> str:
    # Same rows, valid Parquet, different bytes: only the digest can tell.
    relative = _first_segment(store)
    path = store.resolve(relative)
    table = read_segment(path)
    replacement = path.with_name("replacement.tmp")
    pq.write_table(table, replacement, compression="none")
    assert pq.read_table(replacement).equals(table)
    os.replace(replacement, path)
    return f"problem: {relative}: altered"


def _edit_commit_number(store: registry.Store) -> str:
    path = _writable(store.resolve(ledger.commit_name(1)))
    data, edits = re.subn(rb'"attempts_read":(\d+)', rb'"attempts_read":9\1', path.read_bytes())
    assert edits == 1
    path.write_bytes(data)
    # Commit 1 still parses; its edit shows as the broken link from commit 2.
    return (
        "problem: ledger/000000000002.json: chain broken, "
        "prev does not match the digest of commit 1"
    )


def _corrupt_commit(store: registry.Store) -> str:
    path = _writable(store.resolve(ledger.commit_name(1)))
    path.write_bytes(path.read_bytes()[:-5])
    return "problem: ledger/000000000001.json: commit does not parse"


def _delete_commit(store: registry.Store) -> str:
    store.resolve(ledger.commit_name(1)).unlink()
    return "problem: ledger/000000000002.json: sequence number 2 out of place"


TAMPERING: dict[str, Callable[[registry.Store], str]] = {
    "segment-byte-flipped": _flip_byte,
    "segment-deleted": _delete_segment,
    "segment-replaced-same-rows": _replace_segment,
    "commit-number-edited": _edit_commit_number,
    "commit-truncated": _corrupt_commit,
    "commit-deleted": _delete_commit,
}


def test_clean_registry_verifies(two_commits, invoke):
    result = invoke("verify")
    assert result.exit_code == 0, result.output
    assert _problems(result.output) == []
    assert result.output.splitlines()[-1].startswith("ok: 2 commits, ")


@pytest.mark.parametrize("tamper", TAMPERING.values(), ids=TAMPERING.keys())
def test_tampering_fails_verify_naming_the_file(two_commits, invoke, tamper):
    assert invoke("verify").exit_code == 0
    expected = tamper(two_commits)

    result = invoke("verify")

    assert result.exit_code == 1, result.output
    assert any(line.startswith(expected) for line in _problems(result.output)), result.output
    assert not result.output.splitlines()[-1].startswith("ok:")


def _segment_of(
    store: registry.Store, records: list[dict], attempt_ids: list[str], scratch: Path
) -> tuple[Path, dict]:
    """Write a one-cohort segment whose rows claim `attempt_ids`; return it and its entry."""
    rows, cohort = [], None
    for record, attempt_id in zip(records, attempt_ids, strict=True):
        canonical = record_json(AttemptRecord.model_validate_json(json.dumps(record)))
        cohort, _, _ = derive_keys(canonical)
        rows.append(to_row(canonical, attempt_id, cohort))
    path = scratch / "segment.parquet"
    write_segment(rows_to_table(rows), path)
    digest = registry.digest_file(path)
    entry = {
        "path": store.segment_path(cohort, digest),
        "digest": digest,
        "rows": len(rows),
        "cohort_key": cohort,
        "task_ids": sorted({r["task_id"] for r in records}),
    }
    return path, entry


def _true_id(record: dict) -> str:
    return derive_keys(record_json(AttemptRecord.model_validate_json(json.dumps(record))))[2]


def _publish(store: registry.Store, path: Path, entry: dict) -> None:
    """Publish a segment and a commit naming it, with the correct file digest."""
    assert store.put_file(path, entry["path"])
    rows = entry["rows"]
    ledger.append(
        store,
        {
            "kind": "ingest",
            "segments": [entry],
            "attempts_read": rows,
            "attempts_new": rows,
            "attempts_present": 0,
        },
    )


@pytest.mark.parametrize("lie", ["wrong-attempt-id", "altered-content"])
def test_verify_rederives_attempt_ids(two_commits, invoke, tmp_path, lie):
    honest = make_record(experiment_id="exp-x", repeat_index=0)
    liar = make_record(experiment_id="exp-x", repeat_index=1)
    ids = [_true_id(honest), _true_id(liar)]
    if lie == "wrong-attempt-id":
        ids[1] = WRONG_ID
    else:  # the row keeps the id of the record it was, but its content changed
        liar = {**liar, "cost_usd": liar["cost_usd"] + 1}
    path, entry = _segment_of(two_commits, [honest, liar], ids, tmp_path)
    _publish(two_commits, path, entry)

    result = invoke("verify", "--deep")
    default = invoke("verify")

    assert result.exit_code == 1, result.output
    prefix = f"problem: {entry['path']}: row"
    assert _problems(result.output) == [
        f"{prefix} 2 content does not yield its attempt id {ids[1]}"
    ]
    # The default depth proves the bytes are as committed, not that the writer derived the
    # ids right: every digest in this hand-written commit is consistent, so it passes.
    assert default.exit_code == 0, default.output


def test_honest_hand_written_segment_verifies(two_commits, invoke, tmp_path):
    # Control for the test above: the same construction with true ids is accepted.
    records = [make_record(experiment_id="exp-x", repeat_index=i) for i in range(2)]
    path, entry = _segment_of(two_commits, records, [_true_id(r) for r in records], tmp_path)
    _publish(two_commits, path, entry)

    for depth in ((), ("--deep",)):
        result = invoke("verify", *depth)
        assert result.exit_code == 0, result.output
        assert result.output.splitlines()[-1].startswith("ok: 3 commits, ")


def test_unreferenced_segment_is_listed_not_fatal_and_not_queried(two_commits, invoke, tmp_path):
    before = invoke("sql", "SELECT count(*) AS n FROM attempts", "--format", "json")
    assert before.exit_code == 0, before.output
    # Rows that are in no commit, placed where a crashed writer would have left them.
    records = [make_record(experiment_id="exp-stray", repeat_index=i) for i in range(3)]
    path, entry = _segment_of(two_commits, records, [_true_id(r) for r in records], tmp_path)
    assert two_commits.put_file(path, entry["path"])
    copied = two_commits.resolve("attempts/cohort=x/stray.parquet")
    copied.parent.mkdir()
    shutil.copyfile(path, copied)

    result = invoke("verify")

    assert result.exit_code == 0, result.output
    assert _problems(result.output) == []
    for stray in (entry["path"], "attempts/cohort=x/stray.parquet"):
        assert f"unreferenced: {stray} (not in the ledger" in result.output
    assert result.output.splitlines()[-1].startswith("ok: 2 commits, ")
    after = invoke("sql", "SELECT count(*) AS n FROM attempts", "--format", "json")
    assert after.exit_code == 0, after.output
    assert json.loads(after.stdout) == json.loads(before.stdout)
    stray = invoke(
        "sql",
        "SELECT count(*) AS n FROM attempts WHERE experiment_id = 'exp-stray'",
        "--format",
        "json",
    )
    assert json.loads(stray.stdout) == [{"n": 0}]


@pytest.mark.parametrize("deep", [False, True])
def test_json_says_which_depth_ran_and_counts_agree(two_commits, invoke, deep):
    result = invoke("verify", "--format", "json", *(["--deep"] if deep else []))

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["depth"] == ("deep" if deep else "default")
    assert set(report) == {
        "ok",
        "depth",
        "commits",
        "segments",
        "attempts",
        "layers",
        "problems",
        "unreferenced",
    }
    rows = sum(s.rows for e in registry.read_ledger(two_commits) for s in e.commit.segments)
    assert (report["ok"], report["commits"], report["attempts"]) == (True, 2, rows)


def _hand_written_commit(store: registry.Store, data: bytes, scratch: Path) -> str:
    """Publish `data` as a one-row segment of the quickstart cohort, with consistent digests."""
    first = registry.read_ledger(store)[0].commit.segments[0]
    path = scratch / "forged.parquet"
    path.write_bytes(data)
    digest = registry.digest_file(path)
    entry = {
        "path": store.segment_path(first.cohort_key, digest),
        "digest": digest,
        "rows": 1,
        "cohort_key": first.cohort_key,
        "task_ids": first.task_ids,
    }
    _publish(store, path, entry)
    return entry["path"]


def test_a_segment_that_is_not_parquet_is_named_only_by_deep(two_commits, invoke, tmp_path):
    # Not written by the registry's writer: bytes that were never Parquet, committed with
    # their true digest. The default proves they are the committed bytes; --deep reads them.
    relative = _hand_written_commit(two_commits, b"not parquet", tmp_path)

    default = invoke("verify")
    deep = invoke("verify", "--deep")

    assert default.exit_code == 0, default.output
    assert deep.exit_code == 1, deep.output
    assert any(f"{relative}: unreadable Parquet" in line for line in _problems(deep.output))


def test_parquet_without_segment_columns_is_named_by_deep(two_commits, invoke, tmp_path):
    pq.write_table(pa.table({"task_id": ["t"]}), tmp_path / "other.parquet")
    data = (tmp_path / "other.parquet").read_bytes()
    relative = _hand_written_commit(two_commits, data, tmp_path)

    deep = invoke("verify", "--deep")

    assert deep.exit_code == 1, deep.output
    assert f"problem: {relative}: not a segment, it has no column attempt_id" in deep.output


def test_segment_rows_and_tasks_that_differ_from_the_commit_are_named_by_deep(
    two_commits, invoke, tmp_path
):
    first = registry.read_ledger(two_commits)[0].commit.segments[0]
    table = read_segment(two_commits.resolve(first.path)).slice(0, 2)  # 2 rows, not 1
    write_segment(table, tmp_path / "two.parquet")
    relative = _hand_written_commit(two_commits, (tmp_path / "two.parquet").read_bytes(), tmp_path)

    deep = invoke("verify", "--deep")

    assert deep.exit_code == 1, deep.output
    assert f"problem: {relative}: 2 rows, ledger says 1" in _problems(deep.output)


def _rewrite_head(store: registry.Store, edit: Callable[[dict], None]) -> str:
    seq = len(registry.read_ledger(store))
    path = _writable(store.resolve(ledger.commit_name(seq)))
    document = json.loads(path.read_bytes())
    edit(document)
    path.write_bytes(ledger.encode_commit(ledger.Commit.model_validate(document, strict=False)))
    return ledger.commit_name(seq)


def _other_tree(document: dict) -> None:
    """A self-consistent tree of the same size over other leaves (root = fold of frontier)."""
    from registry.storage import merkle

    frontier = [merkle.node_hash(b"x", merkle.from_digest(h)) for h in document["merkle_frontier"]]
    document["merkle_frontier"] = [merkle.as_digest(h) for h in frontier]
    document["merkle_root"] = merkle.as_digest(merkle.root_of_frontier(frontier))


MERKLE_EDITS: dict[str, tuple[Callable[[dict], None], str]] = {
    "root": (lambda d: d.update(merkle_root="blake3:" + "0" * 64), "root of their own frontier"),
    "size": (lambda d: d.update(merkle_size=d["merkle_size"] + 1), "rows the ingest commits"),
    "frontier-dropped": (lambda d: d.update(merkle_frontier=d["merkle_frontier"][1:]), "hold"),
    "other-tree": (_other_tree, "do not extend the tree of commit 1"),
}


@pytest.mark.parametrize("edit", MERKLE_EDITS.values(), ids=MERKLE_EDITS.keys())
def test_merkle_fields_of_the_head_are_checked_at_both_depths(two_commits, invoke, edit):
    change, named = edit
    relative = _rewrite_head(two_commits, change)

    for depth in ((), ("--deep",)):
        result = invoke("verify", *depth)
        assert result.exit_code == 1, result.output
        lines = [line for line in _problems(result.output) if "Merkle tree fields" in line]
        assert lines and lines[0].startswith(f"problem: {relative}: Merkle tree fields")
        if not depth:
            assert named in lines[0], lines


def test_file_digest_is_blake3_of_the_bytes_for_small_and_large_files(tmp_path):
    import blake3

    from registry.storage.digest import LARGE_FROM

    for size in (0, 1, LARGE_FROM - 1, LARGE_FROM, 3 * LARGE_FROM + 12345):
        path = tmp_path / f"f{size}"
        data = os.urandom(size)
        path.write_bytes(data)
        assert registry.digest_file(path) == "blake3:" + blake3.blake3(data).hexdigest(), size
    with pytest.raises(FileNotFoundError):
        registry.digest_file(tmp_path / "absent")


def test_local_listing_names_every_file_at_any_depth(two_commits, tmp_path):
    (two_commits.root / "attempts" / "deep" / "er").mkdir(parents=True)
    (two_commits.root / "attempts" / "deep" / "er" / "stray").write_bytes(b"x")
    (two_commits.root / "attempts" / "empty").mkdir()

    expected = sorted(
        p.relative_to(two_commits.root).as_posix()
        for p in two_commits.root.rglob("*")
        if p.is_file()
    )
    assert two_commits.names("") == expected
    assert two_commits.names("attempts") == [n for n in expected if n.startswith("attempts/")]
    assert two_commits.names("absent") == []
