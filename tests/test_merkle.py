"""RFC 9162 Merkle proofs over the attempt ids, checked with an independent implementation.

The functions prefixed `rfc_` below are written from RFC 9162 §2.1 (MTH, PATH, PROOF and
the verification algorithms of §2.1.3.2 and §2.1.4.2) with blake3 as the hash, without
using `registry.storage.merkle`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import blake3
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from registry.evidence.retract import retract
from registry.ingest import ingest
from registry.storage import ledger
from registry.storage.merkle import consistency, inclusion
from registry.storage.pack import pack
from registry.storage.store import Store
from registry.storage.verify import verify
from registry_cli.main import app
from tests.conftest import make_record, write_jsonl
from tests.test_pack import one_attempt_ingests


def h(data: bytes) -> bytes:
    return blake3.blake3(data).digest()


def rfc_mth(leaves: list[bytes]) -> bytes:
    """MTH(D[n]) of RFC 9162 §2.1.1."""
    n = len(leaves)
    if n == 0:
        return h(b"")
    if n == 1:
        return h(b"\x00" + leaves[0])
    k = 1
    while k * 2 < n:
        k *= 2
    return h(b"\x01" + rfc_mth(leaves[:k]) + rfc_mth(leaves[k:]))


def rfc_verify_inclusion(
    leaf: bytes, leaf_index: int, tree_size: int, path: list[bytes], root: bytes
) -> bool:
    """RFC 9162 §2.1.3.2, step by step."""
    if leaf_index >= tree_size:
        return False
    fn, sn = leaf_index, tree_size - 1
    r = h(b"\x00" + leaf)
    for p in path:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            r = h(b"\x01" + p + r)
            if not fn & 1:
                while True:
                    fn >>= 1
                    sn >>= 1
                    if fn & 1 or fn == 0:
                        break
        else:
            r = h(b"\x01" + r + p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def rfc_verify_consistency(
    first: int, second: int, first_hash: bytes, second_hash: bytes, proof: list[bytes]
) -> bool:
    """RFC 9162 §2.1.4.2, step by step (first == second and first == 0 handled first)."""
    if first == second:
        return not proof and first_hash == second_hash
    if first == 0 or first > second:
        return first == 0 and not proof
    if not proof and first & (first - 1):
        return False
    if first & (first - 1) == 0:
        proof = [first_hash, *proof]
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = proof[0]
    for c in proof[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = h(b"\x01" + c + fr)
            sr = h(b"\x01" + c + sr)
            if not fn & 1:
                while True:
                    fn >>= 1
                    sn >>= 1
                    if fn & 1 or fn == 0:
                        break
        else:
            sr = h(b"\x01" + sr + c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == first_hash and sr == second_hash


def raw(digest: str) -> bytes:
    return bytes.fromhex(digest.removeprefix("blake3:"))


def leaves_after(store: Store, seq: int) -> list[bytes]:
    """The tree's leaves after commit `seq`, read straight from the commit files and Parquet."""
    leaves = []
    for n in range(1, seq + 1):
        commit = json.loads(store.resolve(f"ledger/{n:012d}.json").read_bytes())
        if commit["kind"] != "ingest":
            continue
        for segment in commit["segments"]:
            table = pq.read_table(store.resolve(segment["path"]), columns=["attempt_id"])
            leaves.extend(raw(i) for i in table.column("attempt_id").to_pylist())
    return leaves


@pytest.fixture(scope="module")
def fixture_registry(tmp_path_factory) -> Store:
    root = tmp_path_factory.mktemp("merkle") / "reg"
    store = one_attempt_ingests(root, 9, tasks=3)
    records = [
        make_record(experiment_id="batch", task_id=f"task-{t:04d}", repeat_index=r)
        for t in range(5)
        for r in range(3)
    ]
    ingest(root, [str(write_jsonl(root.parent / "batch.jsonl", records))])
    retract(store, [str(leaves_after_ids(store)[0])], reason="flaky")
    one_attempt_ingests(root, 4, tasks=3, start=9)
    pack(store)
    return store


def leaves_after_ids(store: Store) -> list[str]:
    return ["blake3:" + leaf.hex() for leaf in leaves_after(store, ledger.head_seq(store))]


def test_every_commit_records_the_rfc_root_of_the_attempts_before_it(fixture_registry):
    store = fixture_registry
    entries = ledger.read_ledger(store)
    kinds = {e.commit.kind for e in entries}
    assert {"ingest", "retraction", "pack"} <= kinds
    for entry in entries:
        leaves = leaves_after(store, entry.seq)
        assert entry.commit.merkle_size == len(leaves)
        assert entry.commit.merkle_root == "blake3:" + rfc_mth(leaves).hex()
    assert verify(store).ok


def test_inclusion_proofs_verify_for_every_attempt_at_every_commit(fixture_registry):
    store = fixture_registry
    head = ledger.head_seq(store)
    assert len(leaves_after(store, head)) == 28
    for seq in range(1, head + 1):
        leaves = leaves_after(store, seq)
        root = rfc_mth(leaves)
        for index, leaf in enumerate(leaves):
            proof = inclusion(store, "blake3:" + leaf.hex(), seq)
            assert (proof.leaf_index, proof.tree_size, proof.seq) == (index, len(leaves), seq)
            assert raw(proof.root) == root
            path = [raw(p) for p in proof.path]
            assert rfc_verify_inclusion(leaf, index, len(leaves), path, root)


def test_consistency_proofs_verify_between_every_pair_of_commits(fixture_registry):
    store = fixture_registry
    head = ledger.head_seq(store)
    for old in range(1, head + 1):
        for new in range(old, head + 1):
            proof = consistency(store, old, new)
            old_leaves, new_leaves = leaves_after(store, old), leaves_after(store, new)
            assert (proof.old_size, proof.new_size) == (len(old_leaves), len(new_leaves))
            old_root, new_root = rfc_mth(old_leaves), rfc_mth(new_leaves)
            assert (raw(proof.old_root), raw(proof.new_root)) == (old_root, new_root)
            path = [raw(p) for p in proof.path]
            assert rfc_verify_consistency(
                len(old_leaves), len(new_leaves), old_root, new_root, path
            )


def test_tampered_proofs_fail(fixture_registry):
    store = fixture_registry
    leaves = leaves_after(store, ledger.head_seq(store))
    proof = inclusion(store, "blake3:" + leaves[5].hex())
    path, root, n = [raw(p) for p in proof.path], raw(proof.root), proof.tree_size
    assert rfc_verify_inclusion(leaves[5], 5, n, path, root)
    assert not rfc_verify_inclusion(leaves[6], 5, n, path, root)  # a changed leaf
    assert not rfc_verify_inclusion(b"\x00" * 32, 5, n, path, root)
    assert not rfc_verify_inclusion(leaves[5], 5, n, path, h(b"wrong root"))
    assert not rfc_verify_inclusion(leaves[5], 4, n, path, root)  # a wrong index
    assert not rfc_verify_inclusion(leaves[5], 5, n, [*path[:-1], h(b"x")], root)
    old = consistency(store, 5, ledger.head_seq(store))
    args = (old.old_size, old.new_size, raw(old.old_root), raw(old.new_root))
    old_path = [raw(p) for p in old.path]
    assert rfc_verify_consistency(*args, old_path)
    assert not rfc_verify_consistency(args[0], args[1], h(b"rewritten"), args[3], old_path)
    assert not rfc_verify_consistency(args[0], args[1], args[2], h(b"x"), old_path)
    assert not rfc_verify_consistency(*args, old_path[:-1])


def test_a_tampered_registry_fails_against_a_published_root(fixture_registry, tmp_path):
    """A root published at commit 10 rejects the proofs of a registry that rewrote history."""
    store = fixture_registry
    published = consistency(store, 10, 10)
    leaves = leaves_after(store, 10)
    # a forged leaf set: attempt 3 replaced; its proof cannot verify against the published root
    forged = [*leaves[:3], h(b"forged attempt"), *leaves[4:]]
    forged_root = rfc_mth(forged)
    assert forged_root != raw(published.new_root)
    assert not rfc_verify_inclusion(forged[3], 3, len(forged), [], raw(published.new_root))


def test_a_commit_with_a_wrong_root_is_named_by_verify_and_refused_by_proofs(tmp_path):
    store = one_attempt_ingests(tmp_path / "reg", 5, tasks=2)
    head = store.resolve(ledger.commit_name(5))
    commit = json.loads(head.read_bytes())
    commit["merkle_root"] = "blake3:" + "0" * 64
    os.chmod(head, 0o644)
    head.write_bytes(ledger.encode_commit(ledger.Commit.model_validate(commit, strict=False)))
    problems = verify(store).problems
    assert any("000000000005.json: Merkle tree fields" in p for p in problems), problems
    with pytest.raises(Exception, match="Merkle tree that differs"):
        inclusion(store, "blake3:" + leaves_after(store, 1)[0].hex())


def test_commits_written_before_the_tree_get_it_computed(tmp_path, monkeypatch):
    monkeypatch.setattr(ledger, "merkle_fields", lambda *args: {})
    store = one_attempt_ingests(tmp_path / "reg", 4, tasks=2)
    assert ledger.read_ledger(store)[-1].commit.merkle_root is None
    monkeypatch.undo()
    one_attempt_ingests(tmp_path / "reg", 3, tasks=2, start=4)
    entries = ledger.read_ledger(store)
    assert [e.commit.merkle_size for e in entries] == [None] * 4 + [5, 6, 7]
    assert entries[-1].commit.merkle_root == "blake3:" + rfc_mth(leaves_after(store, 7)).hex()
    proof = inclusion(store, "blake3:" + leaves_after(store, 7)[1].hex(), 3)
    assert rfc_verify_inclusion(
        leaves_after(store, 3)[1],
        1,
        3,
        [raw(p) for p in proof.path],
        rfc_mth(leaves_after(store, 3)),
    )
    assert verify(store).ok


def test_cli_proofs_are_json_that_verifies(fixture_registry):
    store = fixture_registry
    leaf = leaves_after(store, 10)[7]
    runner = CliRunner()
    args = ["proof", "inclusion", "blake3:" + leaf.hex(), "--at", "10", "--root", str(store.root)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    proof = json.loads(result.output)
    path = [raw(p) for p in proof["path"]]
    assert rfc_verify_inclusion(
        leaf, proof["leaf_index"], proof["tree_size"], path, raw(proof["root"])
    )
    result = runner.invoke(app, ["proof", "consistency", "4", "10", "--root", str(store.root)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert rfc_verify_consistency(
        doc["old_size"],
        doc["new_size"],
        raw(doc["old_root"]),
        raw(doc["new_root"]),
        [raw(p) for p in doc["path"]],
    )
    result = runner.invoke(app, ["proof", "consistency", "10", "4", "--root", str(store.root)])
    assert result.exit_code == 2 and "OLD <= NEW" in result.output
    missing = ["proof", "inclusion", "blake3:" + "ab" * 32, "--root", str(store.root)]
    result = runner.invoke(app, missing)
    assert result.exit_code == 1 and "no attempt with that id" in result.output


def test_cli_pack_then_nothing_to_pack(tmp_path):
    store = one_attempt_ingests(tmp_path / "reg", 6, tasks=2)
    runner = CliRunner()
    first = runner.invoke(app, ["pack", "--root", str(store.root), "--format", "json"])
    assert first.exit_code == 0, first.output
    assert json.loads(first.output)["segments_after"] == 2
    again = runner.invoke(app, ["pack", "--root", str(store.root)])
    assert again.exit_code == 0 and "nothing to pack" in again.output
    assert "present at commit 7" in again.output
    assert Path(store.root, json.loads(first.output)["checkpoint"]).is_file()
