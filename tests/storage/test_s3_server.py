"""What the registry's commit protocol relies on, checked against a real S3 server (SeaweedFS).

These tests use obstore directly: create-if-absent (`put(mode="create")`), per-writer metadata
read back after a lost acknowledgement, one winner among racing writers, listing by prefix, and
the exception classes a storage backend has to translate.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import obstore
import pytest
from obstore.exceptions import (
    AlreadyExistsError,
    GenericError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionError,
)
from obstore.store import S3Store, from_url

from tests import s3server
from tests.s3server import S3Server, SeaweedServer
from tests.storage.conftest import S3Prefix

WRITERS = 8
ROUNDS = 2  # the conformance suite races whole commits, 20 rounds under -m race


def names(store: Any, prefix: str | None = None) -> list[str]:
    return sorted(meta["path"] for batch in obstore.list(store, prefix=prefix) for meta in batch)


def test_server_started_on_loopback_with_its_own_ports(s3_server: S3Server) -> None:
    print(f"\nSeaweedFS weed mini ready after {s3_server.startup_seconds:.2f} s")
    assert s3_server.endpoint.startswith("http://127.0.0.1:")
    assert not s3_server.endpoint.endswith(":8333")
    if not sys.platform.startswith("linux"):
        return
    addresses = listening_addresses(s3_server.pid)
    assert addresses, "the server listens on no TCP socket"
    assert {host for host, _ in addresses} == {"127.0.0.1"}, addresses
    port = int(s3_server.endpoint.rsplit(":", 1)[1])
    assert ("127.0.0.1", port) in addresses


def listening_addresses(pid: int) -> set[tuple[str, int]]:
    """(host, port) of every TCP socket process `pid` listens on, from /proc."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found: set[tuple[str, int]] = set()
    for table in ("tcp", "tcp6"):
        lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A" or inode not in inodes:  # 0A: LISTEN
                continue
            host_hex, port_hex = local.split(":")
            if table == "tcp":
                host = ".".join(str(b) for b in reversed(bytes.fromhex(host_hex)))
            else:
                host = "ipv6:" + host_hex
            found.add((host, int(port_hex, 16)))
    return found


def test_requests_must_be_signed_with_the_configured_key(s3_prefix: S3Prefix) -> None:
    options = s3_prefix.server.store_options()
    anonymous = S3Store(
        s3_prefix.bucket,
        prefix=s3_prefix.prefix,
        endpoint=options["endpoint"],
        region=options["region"],
        client_options=options["client_options"],
        skip_signature=True,
    )
    wrong = S3Store(
        s3_prefix.bucket, prefix=s3_prefix.prefix, **{**options, "secret_access_key": "wrong"}
    )
    obstore.put(s3_prefix.store(), "a", b"x")
    for store in (anonymous, wrong):
        with pytest.raises(PermissionDeniedError):
            obstore.put(store, "b", b"x")
        with pytest.raises(PermissionDeniedError):
            obstore.get(store, "a")
    assert names(s3_prefix.store()) == ["a"]


def test_create_on_an_existing_name_raises_already_exists(s3_prefix: S3Prefix) -> None:
    store = s3_prefix.store()
    result = obstore.put(store, "ledger/000001", b"first", mode="create")
    assert result["e_tag"]
    with pytest.raises(AlreadyExistsError) as raised:
        obstore.put(store, "ledger/000001", b"second", mode="create")
    # 412 from the server (If-None-Match: *) becomes AlreadyExistsError, not PreconditionError
    assert not isinstance(raised.value, PreconditionError)
    assert "412" in str(raised.value)
    assert bytes(obstore.get(store, "ledger/000001").bytes()) == b"first"


def test_create_does_not_fall_back_to_overwrite_for_equal_bytes(s3_prefix: S3Prefix) -> None:
    store = s3_prefix.store()
    obstore.put(store, "segments/abc", b"same", mode="create")
    with pytest.raises(AlreadyExistsError):
        obstore.put(store, "segments/abc", b"same", mode="create")


def test_writer_id_in_metadata_tells_a_lost_acknowledgement_from_a_lost_race(
    s3_prefix: S3Prefix,
) -> None:
    store = s3_prefix.store()
    mine, theirs = uuid.uuid4().hex, uuid.uuid4().hex
    obstore.put(store, "ledger/000007", b"commit", mode="create", attributes={"writer": mine})
    # the retry after a lost acknowledgement finds the name taken...
    with pytest.raises(AlreadyExistsError):
        obstore.put(store, "ledger/000007", b"commit", mode="create", attributes={"writer": mine})
    with pytest.raises(AlreadyExistsError):
        obstore.put(store, "ledger/000007", b"other", mode="create", attributes={"writer": theirs})
    # ...and the stored writer id says whose commit it is
    assert obstore.get(store, "ledger/000007").attributes["writer"] == mine


def test_user_metadata_round_trip(s3_prefix: S3Prefix) -> None:
    store = s3_prefix.store()
    attributes = {
        "writer": "w-0123456789abcdef",
        "Writer-Attempt": "Mixed Case Value 7",
        "Content-Type": "application/octet-stream",
    }
    obstore.put(store, "obj", b"payload", mode="create", attributes=attributes)
    expected = {
        "writer": "w-0123456789abcdef",
        # user metadata keys come back lower-cased (x-amz-meta-*); values are kept as written
        "writer-attempt": "Mixed Case Value 7",
        "Content-Type": "application/octet-stream",
    }
    result = obstore.get(store, "obj")
    assert result.attributes == expected
    assert bytes(result.bytes()) == b"payload"
    # a HEAD request through get(..., head=True) returns the metadata without the body
    assert obstore.get(store, "obj", options={"head": True}).attributes == expected
    # obstore.head returns ObjectMeta only: no attributes
    meta = obstore.head(store, "obj")
    assert meta["path"] == "obj" and meta["size"] == len(b"payload")
    assert "attributes" not in meta


def test_update_if_match_is_honoured(s3_prefix: S3Prefix) -> None:
    store = s3_prefix.store()
    first = obstore.put(store, "head", b"v1", mode="create")
    second = obstore.put(store, "head", b"v2", mode={"e_tag": first["e_tag"]})
    assert second["e_tag"] != first["e_tag"]
    with pytest.raises(PreconditionError):
        obstore.put(store, "head", b"v3", mode={"e_tag": first["e_tag"]})
    with pytest.raises(PreconditionError):
        obstore.put(store, "absent", b"v1", mode={"e_tag": first["e_tag"]})
    assert bytes(obstore.get(store, "head").bytes()) == b"v2"


def race_worker(
    store_options: dict[str, Any],
    bucket: str,
    prefix: str,
    writer: str,
    barrier: Any,
    results: Any,
) -> None:
    """One racing writer: try to create every round's name, report which it won."""
    store = S3Store(bucket, prefix=prefix, **store_options)
    for round_ in range(ROUNDS):
        barrier.wait()
        name = f"ledger/{round_:06d}"
        try:
            obstore.put(store, name, writer.encode(), mode="create", attributes={"writer": writer})
            outcome = "won"
        except AlreadyExistsError:
            outcome = "lost"
        except Exception as error:
            outcome = f"{type(error).__name__}: {error}"
        results.put((round_, writer, outcome))


def test_racing_writers_exactly_one_create_wins(s3_prefix: S3Prefix) -> None:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(WRITERS)
    results = context.Queue()
    writers = [f"writer-{i}" for i in range(WRITERS)]
    processes = [
        context.Process(
            target=race_worker,
            args=(
                s3_prefix.server.store_options(),
                s3_prefix.bucket,
                s3_prefix.prefix,
                writer,
                barrier,
                results,
            ),
        )
        for writer in writers
    ]
    for process in processes:
        process.start()
    outcomes = [results.get() for _ in range(WRITERS * ROUNDS)]
    for process in processes:
        process.join()
        assert process.exitcode == 0
    unexpected = [o for o in outcomes if o[2] not in {"won", "lost"}]
    assert unexpected == []
    store = s3_prefix.store()
    for round_ in range(ROUNDS):
        winners = [w for r, w, o in outcomes if r == round_ and o == "won"]
        assert len(winners) == 1, (round_, winners)
        stored = obstore.get(store, f"ledger/{round_:06d}")
        assert bytes(stored.bytes()) == winners[0].encode()
        assert stored.attributes["writer"] == winners[0]
    assert names(store) == [f"ledger/{r:06d}" for r in range(ROUNDS)]


def test_list_is_relative_to_the_store_prefix(s3_prefix: S3Prefix, s3_server: S3Server) -> None:
    store = s3_prefix.store()
    for name in ("ledger/000001", "ledger/000002", "ledgers/x", "segments/ab/cd", "marker"):
        obstore.put(store, name, b"x", mode="create")
    assert names(store) == [
        "ledger/000001",
        "ledger/000002",
        "ledgers/x",
        "marker",
        "segments/ab/cd",
    ]
    # a list prefix is a whole path segment: "ledger" does not match "ledgers/x"
    assert names(store, "ledger") == ["ledger/000001", "ledger/000002"]
    assert names(store, "segments") == ["segments/ab/cd"]
    # nor an object named exactly like the prefix
    assert names(store, "marker") == []
    # a missing prefix lists empty, in a prefixed store and in the bucket
    assert names(store, "absent") == []
    assert names(s3_server.store(f"never-written-{uuid.uuid4().hex}")) == []
    # the bucket-rooted store sees the full names
    assert names(s3_server.store(), s3_prefix.prefix)[0] == f"{s3_prefix.prefix}/ledger/000001"


def test_missing_object_raises_file_not_found(s3_prefix: S3Prefix) -> None:
    store = s3_prefix.store()
    # obstore raises the builtin FileNotFoundError, not obstore.exceptions.NotFoundError
    for call in (
        lambda: obstore.get(store, "absent"),
        lambda: obstore.get(store, "absent", options={"head": True}),
        lambda: obstore.head(store, "absent"),
    ):
        with pytest.raises(FileNotFoundError) as raised:
            call()
        assert not isinstance(raised.value, NotFoundError)
        assert "404" in str(raised.value)


def test_environment_alone_reaches_the_server(
    s3_prefix: S3Prefix, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    for key, value in s3_prefix.env.items():
        monkeypatch.setenv(key, value)
    store = from_url(s3_prefix.url)
    obstore.put(store, "via-env", b"x", mode="create")
    assert names(store) == ["via-env"]
    # without AWS_ALLOW_HTTP obstore refuses the plain-http endpoint before sending anything
    monkeypatch.delenv("AWS_ALLOW_HTTP")
    with pytest.raises(GenericError):
        obstore.get(from_url(s3_prefix.url), "via-env")


def test_a_second_server_coexists_and_is_stopped_when_the_block_fails(
    s3_server: S3Server,
) -> None:
    runner = SeaweedServer()
    with pytest.raises(RuntimeError, match="test body failed"), runner as other:
        assert other.endpoint != s3_server.endpoint
        assert listening_ports(other.pid).isdisjoint(listening_ports(s3_server.pid))
        obstore.put(other.store(), "only-here", b"x", mode="create")
        assert names(other.store()) == ["only-here"]
        assert "only-here" not in names(s3_server.store())
        grpc_ports = [port + s3server.GRPC_OFFSET for port in runner.ports.values()]
        raise RuntimeError("test body failed")
    with pytest.raises(ProcessLookupError):
        os.kill(other.pid, 0)
    assert not other.data_dir.exists()
    left = [path for path in Path("/tmp").glob("seaweedfs-*-grpc-*.sock")]
    assert [path for path in left if int(path.stem.rsplit("-", 1)[1]) in grpc_ports] == []


def listening_ports(pid: int) -> set[int]:
    if not sys.platform.startswith("linux"):
        return set()
    return {port for _, port in listening_addresses(pid)}


@pytest.mark.parametrize("ci", ["", "true"])
def test_a_missing_weed_skips_locally_and_fails_under_ci(
    ci: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(s3server.shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", ci)
    expected = pytest.fail.Exception if ci else pytest.skip.Exception
    with pytest.raises(expected, match="weed"):
        s3server.require_weed()
