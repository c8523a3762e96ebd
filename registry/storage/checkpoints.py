"""Checkpoints: the ledger up to a commit in a few derived objects, so reads stay flat.

A checkpoint (`registry.checkpoint/1`, `checkpoints/<seq:012d>-<digest hex>.json`, named by
the blake3 of its bytes) holds the exact bytes of the commits after the previous checkpoint,
whose path it names; the chain of checkpoints holds every commit up to its `seq`, so a
reader opens one file per checkpoint plus the commits after the newest one instead of one
file per commit. Each checkpoint holds only the commits since the one before it, so their
total size grows with the ledger, not with its square.

A checkpoint is derived, never authoritative. A reader uses one only when every check
passes: its bytes hash to its name, it parses, it holds exactly the commits after its
predecessor, every commit it holds hashes to the next one's `prev`, and its last commit's
digest is the `digest` it names and the digest of that commit file on disk (so commit
`seq + 1`, whose `prev` the reader checks, extends it). Otherwise the reader reads the
commit files, as if the checkpoint were absent; `registry verify` rebuilds every
checkpoint from the commits and names any that differs.

Writers create one whenever the ledger reaches a multiple of `INTERVAL` commits (create if
absent: two writers racing write the same bytes under the same name); `registry checkpoint`
writes one at the head on demand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import blake3
import orjson
from pydantic import ValidationError

from registry.errors import IntegrityError, RegistryError
from registry.storage import ledger
from registry.storage.canonical import canonical_json
from registry.storage.digest import PREFIX, digest_bytes, hex_of
from registry.storage.store import Store
from registry_schemas import Commit
from registry_schemas.ledger import Checkpoint

INTERVAL = 1000
"""Writers create a checkpoint at every multiple of this many commits."""
DIRECTORY = "checkpoints"
NAME = re.compile(r"(\d{12})-([0-9a-f]{64})\.json")


@dataclass(frozen=True)
class LoadedCheckpoint:
    """A checkpoint that passed every check, with the commits it holds."""

    path: str
    checkpoint: Checkpoint
    entries: list[ledger.LedgerEntry]


@dataclass(frozen=True)
class CheckpointResult:
    """What `write_checkpoint` did."""

    path: str
    seq: int
    created: bool
    merkle_size: int
    merkle_root: str


def checkpoint_path(seq: int, digest: str) -> str:
    """Return the root-relative path of a checkpoint of commit `seq` with bytes `digest`."""
    return f"{DIRECTORY}/{seq:012d}-{hex_of(digest)}.json"


def list_checkpoints(store: Store) -> list[tuple[int, str]]:
    """Return `(seq, relative path)` of every file named like a checkpoint, newest first."""
    names = [relative.removeprefix(f"{DIRECTORY}/") for relative in store.names(DIRECTORY)]
    found = [(int(m.group(1)), f"{DIRECTORY}/{n}") for n in names if (m := NAME.fullmatch(n))]
    return sorted(found, reverse=True)


def load_checkpointed(store: Store, names: list[str]) -> list[ledger.LedgerEntry]:
    """Return commits 1..k from the newest usable checkpoint chain (empty if there is none).

    `names` are the commit file names of the ledger, sorted; a checkpoint beyond them, or
    one that fails a check, is passed over.
    """
    if not names or int(names[-1][:12]) != len(names):
        return []  # a gap: the per-file walk names it
    for seq, path in list_checkpoints(store):
        if seq > len(names):
            continue
        chain = _load_chain(store, path, set())
        if chain is None:
            continue
        last = chain[-1]
        try:
            on_disk = ledger.read_entry(store, f"ledger/{names[seq - 1]}").digest
        except (IntegrityError, OSError):
            return []
        if on_disk == last.checkpoint.digest:
            return [entry for loaded in chain for entry in loaded.entries]
    return []


def _load_chain(store: Store, path: str, seen: set[str]) -> list[LoadedCheckpoint] | None:
    """Load a checkpoint and its predecessors, oldest first; None if any check fails."""
    if path in seen:
        return None
    seen.add(path)
    loaded = load_checkpoint(store, path)
    if loaded is None:
        return None
    checkpoint = loaded.checkpoint
    chain: list[LoadedCheckpoint] = []
    prev: str | None = None
    if checkpoint.previous is not None:
        before = _load_chain(store, checkpoint.previous, seen)
        if before is None:
            return None
        chain, prev = before, before[-1].checkpoint.digest
        if before[-1].checkpoint.seq + 1 != checkpoint.first_seq:
            return None
    elif checkpoint.first_seq != 1:
        return None
    if loaded.entries[0].commit.prev != prev:
        return None
    return [*chain, loaded]


def load_checkpoint(store: Store, path: str) -> LoadedCheckpoint | None:
    """Load one checkpoint and check it on its own; None if it fails a check.

    Checked: the path is a checkpoint's, the bytes hash to the name, the document parses,
    holds commits `first_seq`..`seq` in order, each commit's `prev` is the digest of the
    one before it, and the last one's digest is `digest`.
    """
    match = NAME.fullmatch(path.removeprefix(f"{DIRECTORY}/"))
    if match is None or not path.startswith(f"{DIRECTORY}/"):
        return None
    try:
        data = store.read_bytes(path)
    except (OSError, IntegrityError):
        return None
    if blake3.blake3(data).hexdigest() != match.group(2):
        return None
    try:
        checkpoint = Checkpoint.model_validate(orjson.loads(data))
    except (orjson.JSONDecodeError, ValidationError):
        return None
    if int(match.group(1)) != checkpoint.seq:
        return None
    if len(checkpoint.commits) != checkpoint.seq - checkpoint.first_seq + 1:
        return None
    entries = []
    prev: str | None = None
    for seq, text in enumerate(checkpoint.commits, start=checkpoint.first_seq):
        raw = text.encode()
        try:
            commit = Commit.model_validate_json(raw, strict=True)
        except ValidationError:
            return None
        digest = PREFIX + blake3.blake3(raw).hexdigest()
        if commit.seq != seq or (prev is not None and commit.prev != prev):
            return None
        entries.append(ledger.LedgerEntry(commit, digest, ledger.commit_name(seq)))
        prev = digest
    if prev != checkpoint.digest:
        return None
    return LoadedCheckpoint(path, checkpoint, entries)


def build_checkpoint(
    store: Store, entries: list[ledger.LedgerEntry], seq: int, previous: LoadedCheckpoint | None
) -> bytes:
    """Return the canonical bytes of the checkpoint of commit `seq`, chained to `previous`.

    `entries` is the ledger (at least up to `seq`). The commits' bytes are read from their
    files and must hash to the digests in `entries`.

    Raises:
        IntegrityError: a commit file no longer has the bytes the ledger was read with.
    """
    from registry.storage import merkle

    first = previous.checkpoint.seq + 1 if previous is not None else 1
    texts = []
    for entry in entries[first - 1 : seq]:
        raw = store.read_bytes(entry.path)
        if digest_bytes(raw) != entry.digest:
            raise IntegrityError(
                f"commit {ledger.commit_name(entry.seq)} changed while it was read; "
                "run 'registry verify'"
            )
        texts.append(raw.decode())
    size, root, frontier = tree_at(store, entries[:seq])
    document = Checkpoint.model_validate(
        {
            "schema": "registry.checkpoint/1",
            "seq": seq,
            "digest": entries[seq - 1].digest,
            "previous": previous.path if previous is not None else None,
            "first_seq": first,
            "commits": texts,
            "merkle_size": size,
            "merkle_root": merkle.as_digest(root),
            "merkle_frontier": [merkle.as_digest(h) for h in frontier],
        }
    )
    return canonical_json(document.model_dump(mode="json", by_alias=True))


def tree_at(store: Store, entries: list[ledger.LedgerEntry]) -> tuple[int, bytes, list[bytes]]:
    """Return the size, root and frontier of the attempt-id tree after the last of `entries`.

    Taken from the last commit that records it, extended by the ingest commits after it;
    computed from the segments when no commit records it (ledgers written before the tree).
    """
    from registry.storage import merkle

    start, frontier, size = 0, [], 0
    for index in range(len(entries) - 1, -1, -1):
        commit = entries[index].commit
        if commit.merkle_frontier is not None and commit.merkle_size is not None:
            start, size = index + 1, commit.merkle_size
            frontier = [merkle.from_digest(h) for h in commit.merkle_frontier]
            break
    frontier, size = merkle.extend(frontier, size, merkle.leaf_hashes(store, entries[start:]))
    return size, merkle.root_of_frontier(frontier), frontier


def write_checkpoint(store: Store, seq: int | None = None) -> CheckpointResult:
    """Write the checkpoint of commit `seq` (the head by default) if it is absent.

    Chained to the newest usable checkpoint before `seq`. Create if absent: a writer racing
    for the same checkpoint writes the same bytes under the same name.

    Raises:
        IntegrityError: the ledger is damaged (see `ledger.read_ledger`).
        CheckpointError: `seq` names no commit of the ledger.
        StorageError: the file system refused the write.
    """
    entries = ledger.read_ledger(store)
    head = len(entries)
    seq = head if seq is None else seq
    if not 1 <= seq <= head:
        raise CheckpointError(
            f"checkpoint at commit {seq}: the ledger holds commits 1..{head}"
            if head
            else "checkpoint: the ledger is empty; ingest attempts first"
        )
    previous = None
    for found_seq, path in list_checkpoints(store):
        chain = _load_chain(store, path, set()) if found_seq < seq else None
        if chain is not None and chain[-1].checkpoint.digest == entries[found_seq - 1].digest:
            previous = chain[-1]
            break
    data = build_checkpoint(store, entries, seq, previous)
    relative = checkpoint_path(seq, digest_bytes(data))
    with store.temp_area() as area:
        created = store.put_bytes(data, relative, area)
    document = Checkpoint.model_validate(orjson.loads(data))
    return CheckpointResult(relative, seq, created, document.merkle_size, document.merkle_root)


class CheckpointError(RegistryError, ValueError):
    """A checkpoint was asked for at a commit the ledger does not hold (a usage error)."""

    exit_code = 2


def checkpoint_problems(
    store: Store, entries: list[ledger.LedgerEntry]
) -> tuple[list[str], set[str]]:
    """Rebuild every checkpoint from the commits and compare; return problems and good paths.

    `entries` is the ledger as `verify` walked it (commit files, not checkpoints).
    """
    problems: list[str] = []
    good: set[str] = set()
    digests = {entry.seq: entry.digest for entry in entries}
    intact = 0  # commits 1..intact sit at their positions in `entries`
    while intact < len(entries) and entries[intact].seq == intact + 1:
        intact += 1
    loaded_by_path: dict[str, LoadedCheckpoint | None] = {}

    def load(path: str) -> LoadedCheckpoint | None:  # each one is parsed once, not twice
        if path not in loaded_by_path:
            loaded_by_path[path] = load_checkpoint(store, path)
        return loaded_by_path[path]

    for seq, path in sorted(list_checkpoints(store)):
        loaded = load(path)
        if loaded is None:
            problems.append(
                f"{path}: damaged checkpoint (its bytes do not hash to its name, it does not "
                "parse, or its commits do not chain); readers do not use it"
            )
            continue
        if digests.get(seq) != loaded.checkpoint.digest:
            problems.append(
                f"{path}: checkpoint names commit {seq} with digest {loaded.checkpoint.digest}, "
                f"but the ledger's commit {seq} "
                + ("is missing" if seq not in digests else f"has {digests[seq]}")
            )
            continue
        if seq > intact:
            continue  # the ledger before it is damaged: verify names that already
        previous = None
        if loaded.checkpoint.previous is not None:
            previous = load(loaded.checkpoint.previous)
            if previous is None:
                problems.append(
                    f"{path}: the checkpoint it chains to, {loaded.checkpoint.previous}, "
                    "is missing or damaged"
                )
                continue
        try:
            rebuilt = build_checkpoint(store, entries, seq, previous)
        except (IntegrityError, OSError) as exc:
            problems.append(f"{path}: cannot be rebuilt from the commits ({exc})")
            continue
        if rebuilt != store.read_bytes(path):
            problems.append(
                f"{path}: differs from the checkpoint rebuilt from the commits (commits or "
                "Merkle tree); readers must not trust it"
            )
            continue
        good.add(path)
    return problems, good
