"""The ledger: sequence-numbered commits, each created only if absent, chained by digest.

Writers race for the next sequence number: a commit object is created only if absent (a hard
link on a directory, a conditional create in a bucket), which fails if another writer took the
number first; the loser re-reads the head and retries.
No batch is lost and none is half-visible, because segments are in place before the commit
that names them exists.
"""

from __future__ import annotations

import contextlib
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from pydantic import ValidationError

from registry.errors import IntegrityError, LedgerConflictError, RegistryError, StorageError
from registry.storage.canonical import canonical_json
from registry.storage.digest import PREFIX, digest_bytes, hex_of
from registry.storage.store import Store, segment_path_of
from registry_schemas import Commit

MAX_ATTEMPTS = 1000
_HEX = "[0-9a-f]{64}"
SEGMENT_PATH = re.compile(rf"attempts/cohort=({_HEX})/({_HEX})\.parquet")
"""The only form of a segment path a commit may name (cohort key hex, file digest hex)."""
LAYER_PATH = re.compile(rf"layers/([a-z][a-z0-9_]*)/({_HEX})\.json")
"""The only form of a layer path a commit may name (layer kind, document digest hex)."""
PLAN_PATH = re.compile(rf"plans/({_HEX})\.json")
"""The only form of a frozen plan's path a commit may name (plan digest hex)."""


@dataclass(frozen=True)
class LedgerEntry:
    """A commit as read from the ledger, with the digest of its bytes."""

    commit: Commit
    digest: str
    path: str
    """Root-relative name of the commit object (`ledger/<seq:012d>.json`)."""

    @property
    def seq(self) -> int:
        """The commit's sequence number."""
        return self.commit.seq


def commit_name(seq: int) -> str:
    """Return the root-relative path of commit number `seq`."""
    return f"ledger/{seq:012d}.json"


def encode_commit(commit: Commit) -> bytes:
    """Return the canonical bytes a commit is stored as."""
    return canonical_json(commit.model_dump(mode="json", by_alias=True))


def read_entry(store: Store, relative: str) -> LedgerEntry:
    """Read and parse one commit object.

    Raises:
        IntegrityError: the object is not a valid commit.
        FileNotFoundError: there is no such commit.
    """
    return parse_entry(store.read_bytes(relative), relative, store.location)


def parse_entry(data: bytes, relative: str, location: str = "") -> LedgerEntry:
    """Parse the bytes of the commit object at `relative`.

    Raises:
        IntegrityError: the bytes are not a valid commit.
    """
    try:
        commit = Commit.model_validate(orjson.loads(data))
    except (orjson.JSONDecodeError, ValidationError) as exc:
        first = str(exc).splitlines()[0]
        where = f"{location}/{relative}" if location else relative
        raise IntegrityError(f"{where}: not a valid commit ({first})") from None
    return LedgerEntry(commit, digest_bytes(data), relative)


def commit_names(store: Store) -> list[str]:
    """File names (`<12 digits>.json`) of every commit object in `ledger/`, sorted."""
    names = (relative.removeprefix("ledger/") for relative in store.names("ledger"))
    return sorted(name for name in names if is_commit_name(name))


def read_ledger(store: Store) -> list[LedgerEntry]:
    """Return every commit in sequence order, refusing a ledger that is not intact.

    Every reader goes through here, so no command answers from a damaged ledger: sequence
    numbers run from 1 without a gap, each commit's `prev` is the digest of the previous
    commit's bytes, every path a commit names is well formed and inside the root, and no
    segment is named by two commits. `registry verify` walks the ledger on its own, so it
    can name every problem instead of stopping at the first.

    Commits up to the newest usable checkpoint are taken from it (one file per checkpoint
    instead of one per commit): its commits are re-hashed, their `prev` chain checked, and
    its last commit's digest compared with the commit file on disk. A checkpoint that fails
    any check is not used (the commit files are read instead; `registry verify` names it).

    Raises:
        IntegrityError: a commit does not parse, is out of place, breaks the chain or names
            a path that is not the well-formed path of its object.
    """
    from registry.storage.checkpoints import load_checkpointed

    names = commit_names(store)
    entries = load_checkpointed(store, names)
    claimed: set[str] = set()
    for expected, entry in enumerate(entries, start=1):
        _check_entry(entry, expected, entries[expected - 2].digest if expected > 1 else None)
        _claim(entry, claimed)
    for expected, name in enumerate(names[len(entries) :], start=len(entries) + 1):
        entry = _read_next(
            store, f"ledger/{name}", expected, entries[-1].digest if entries else None
        )
        _claim(entry, claimed)
        entries.append(entry)
    return entries


class LedgerSnapshot:
    """The ledger as one command read it, extended (never re-read) as commits are added.

    A command that reads the ledger and then records something (a report read, then the
    lookup of its layer) reads the ledger once: `refresh` lists the ledger and reads only
    the commits after the known head, checked as `read_ledger` checks them (sequence, `prev`
    chain, path forms, no segment named twice). A ledger that no longer starts with the
    known commits is read again in full.
    """

    def __init__(self, store: Store, entries: list[LedgerEntry] | None = None) -> None:
        self.store = store
        self.entries = read_ledger(store) if entries is None else entries
        self._claimed: set[str] | None = None

    @property
    def head(self) -> tuple[int, str | None]:
        """The sequence number and digest of the newest known commit ((0, None) when empty)."""
        return (self.entries[-1].seq, self.entries[-1].digest) if self.entries else (0, None)

    def refresh(self) -> list[LedgerEntry]:
        """Read the commits written since the last read; return the whole ledger.

        Raises:
            IntegrityError: the ledger is not intact (see `read_ledger`).
        """
        names = commit_names(self.store)
        known = len(self.entries)
        if names[:known] != [f"{seq:012d}.json" for seq in range(1, known + 1)]:
            self.entries, self._claimed = read_ledger(self.store), None
            return self.entries
        if self._claimed is None and len(names) > known:
            self._claimed = set()
            for entry in self.entries:
                _claim(entry, self._claimed)
        for expected, name in enumerate(names[known:], start=known + 1):
            entry = _read_next(self.store, f"ledger/{name}", expected, self.head[1])
            assert self._claimed is not None
            _claim(entry, self._claimed)
            self.entries.append(entry)
        return self.entries


def _read_next(store: Store, relative: str, expected: int, prev: str | None) -> LedgerEntry:
    """Read the commit file at `relative`, which must be commit `expected` chained to `prev`."""
    try:
        entry = read_entry(store, relative)
    except IntegrityError:
        raise _damaged(relative, "it does not parse as registry.commit/1") from None
    if entry.seq != expected or commit_name(entry.seq) != relative:
        name = relative.removeprefix("ledger/")
        missing = f"commit {expected} is missing" if int(name[:12]) > expected else ""
        raise _damaged(relative, missing or f"sequence number {entry.seq} out of place")
    _check_entry(entry, expected, prev)
    return entry


def _check_entry(entry: LedgerEntry, expected: int, prev: str | None) -> None:
    relative = commit_name(entry.seq)
    if entry.commit.prev != prev:
        raise _damaged(relative, f"prev does not match the digest of commit {expected - 1}")
    problems = path_problems(entry.commit)
    if problems:
        raise _damaged(relative, problems[0])


def _claim(entry: LedgerEntry, claimed: set[str]) -> None:
    paths = segment_paths(entry.commit)
    if claimed.isdisjoint(paths) and len(set(paths)) == len(paths):
        claimed.update(paths)
        return
    for path in paths:  # a path named twice: the first one, for the message
        if path in claimed:
            raise _damaged(commit_name(entry.seq), f"{path} is already named by an earlier commit")
        claimed.add(path)


def segment_paths(commit: Commit) -> list[str]:
    """Return the paths of the segments a commit writes (ingest segments or packed ones)."""
    if commit.pack is not None:
        return [segment.path for segment in commit.pack.segments]
    return [segment.path for segment in commit.segments]


def _damaged(relative: str, why: str) -> IntegrityError:
    return IntegrityError(f"commit {relative} is damaged ({why}); run 'registry verify'")


def path_problems(commit: Commit) -> list[str]:
    """Return what is wrong with the paths a commit names (empty when every one is sound).

    A segment path must be `attempts/cohort=<cohort key hex>/<digest hex>.parquet` for the
    segment's own cohort key and digest; a layer path `layers/<kind>/<digest hex>.json` for
    its own kind and digest; a frozen plan's `plans/<digest hex>.json`. Nothing else is
    accepted, so no commit can point outside the root (`..`, an absolute path) or at another
    object's file.
    """
    problems = []
    packed = commit.pack.segments if commit.pack is not None else []
    for segment in [*commit.segments, *packed]:
        # The model holds both digests to `blake3:` + 64 lowercase hex, so a path equal to the
        # one they spell is well formed; only another path is parsed, to say what is wrong.
        if segment.path == segment_path_of(segment.cohort_key, segment.digest):
            continue
        match = SEGMENT_PATH.fullmatch(segment.path)
        expected = (hex_of(segment.cohort_key), hex_of(segment.digest))
        if match is None:
            problems.append(
                f"segment path {segment.path!r} is not attempts/cohort=<64 hex>/<64 hex>.parquet"
            )
        elif match.groups() != expected:
            problems.append(f"segment path {segment.path} does not match its cohort key and digest")
    for packed_segment in packed:
        for path in packed_segment.supersedes:
            found = SEGMENT_PATH.fullmatch(path)
            if found is None or found.group(1) != hex_of(packed_segment.cohort_key):
                problems.append(
                    f"superseded path {path!r} is not a segment path of cohort "
                    f"{hex_of(packed_segment.cohort_key)[:12]}"
                )
    layer = commit.layer
    if layer is not None:
        match = LAYER_PATH.fullmatch(layer.path)
        if match is None:
            problems.append(f"layer path {layer.path!r} is not layers/<kind>/<64 hex>.json")
        elif match.groups() != (layer.kind, hex_of(layer.digest)):
            problems.append(f"layer path {layer.path} does not match its kind and digest")
    plan = commit.plan
    if plan is not None:
        match = PLAN_PATH.fullmatch(plan.path)
        if match is None:
            problems.append(f"plan path {plan.path!r} is not plans/<64 hex>.json")
        elif match.group(1) != hex_of(plan.digest):
            problems.append(f"plan path {plan.path} does not match its digest")
    return problems


def head(store: Store) -> tuple[int, str | None]:
    """Return the sequence number and digest of the newest commit ((0, None) when empty).

    Raises:
        IntegrityError: the ledger is not intact (see `read_ledger`).
    """
    entries = read_ledger(store)
    return (entries[-1].seq, entries[-1].digest) if entries else (0, None)


class HeadFormatError(RegistryError, ValueError):
    """An expected ledger head is not written as `SEQ:DIGEST` (a usage error)."""

    exit_code = 2


def parse_head(text: str) -> tuple[int, str]:
    """Parse `SEQ:DIGEST` as `registry head` prints it (`DIGEST` with or without `blake3:`).

    Raises:
        HeadFormatError: the text is not of that form.
    """
    seq, _, digest = text.strip().lower().partition(":")
    digest = PREFIX + hex_of(digest)
    if not seq.isdigit() or int(seq) < 1 or re.fullmatch(rf"{PREFIX}{_HEX}", digest) is None:
        raise HeadFormatError(
            f"--expect-head {text!r}: expected SEQ:DIGEST as 'registry head' prints it, "
            "e.g. 12:blake3:<64 hex>"
        )
    return int(seq), digest


class AsOfError(RegistryError, ValueError):
    """`--as-of` names no commit of the ledger."""


def entries_as_of(entries: list[LedgerEntry], as_of: str | int | None) -> list[LedgerEntry]:
    """Return the ledger as it stood at a commit: a sequence number or an RFC 3339 date/time.

    A date (`2026-11-09`) means the end of that day in UTC; a date-time keeps every commit
    created at or before it. The answer is what every reader would have seen then.

    Raises:
        AsOfError: the text is neither, or names a sequence number beyond the head.
    """
    if as_of is None:
        return entries
    text = str(as_of).strip()
    head = entries[-1].seq if entries else 0
    if text.isdigit():
        seq = int(text)
        if seq > head or seq < 1:
            raise AsOfError(
                f"--as-of {text}: the ledger holds commits 1..{head}; give one of those or a date"
            )
        return [e for e in entries if e.seq <= seq]
    limit = _as_of_time(text)
    return [e for e in entries if _parse_time(e.commit.created_at) <= limit]


def _as_of_time(text: str) -> datetime:
    try:
        if len(text) == 10:
            day = datetime.fromisoformat(text).replace(tzinfo=UTC)
            return day.replace(hour=23, minute=59, second=59, microsecond=999999)
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise AsOfError(
            f"--as-of {text!r}: expected a commit sequence number, a date (2026-11-09) or an "
            "RFC 3339 date-time with offset (2026-11-09T12:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        raise AsOfError(f"--as-of {text!r}: a date-time needs an offset, e.g. Z or +02:00")
    return moment.astimezone(UTC)


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def head_seq(store: Store) -> int:
    """Return the highest committed sequence number (0 for an empty ledger)."""
    names = commit_names(store)
    return int(names[-1][:12]) if names else 0


def now_utc() -> str:
    """Return the current UTC time in RFC 3339 form, as commits record it."""
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def try_append(store: Store, seq: int, prev: str | None, fields: dict[str, Any]) -> str | None:
    """Publish commit `seq` chained to `prev` if that number is free; return its digest.

    The commit records the attempt-id Merkle tree after it (`merkle_size`, `merkle_root`,
    `merkle_frontier`): the previous commit's tree, extended by the attempt ids of an ingest
    commit's segments, which must already be published. When `seq` is a multiple of
    `checkpoints.INTERVAL`, a checkpoint covering it is written afterwards (create if absent;
    a checkpoint the file system refuses is left for a later writer or `registry checkpoint`).
    Returns None when another writer already holds `seq` (the caller re-reads and retries).
    """
    from registry.storage import checkpoints

    tree = merkle_fields(store, seq, prev, fields)
    commit = Commit.model_validate(
        {"seq": seq, "prev": prev, "created_at": now_utc(), **fields, **tree}, strict=False
    )
    data = encode_commit(commit)
    with store.temp_area() as area:
        if not store.put_bytes(data, commit_name(seq), area):
            return None
    if seq % checkpoints.INTERVAL == 0:
        with contextlib.suppress(StorageError):
            checkpoints.write_checkpoint(store, seq)
    return digest_bytes(data)


def merkle_fields(
    store: Store, seq: int, prev: str | None, fields: dict[str, Any]
) -> dict[str, Any]:
    """Return the Merkle fields of commit `seq` whose predecessor has digest `prev`.

    Empty (the commit records no tree) when a segment the tree needs is missing, unreadable
    or not at a well-formed path: the ledger is damaged and `registry verify` names it.
    """
    from registry.storage import merkle

    frontier: list[bytes] = []
    size = 0
    try:
        if seq > 1:
            before = entry_at(store, seq - 1)
            commit = before.commit
            if before.digest == prev and commit.merkle_frontier is not None:
                frontier = [merkle.from_digest(h) for h in commit.merkle_frontier]
                size = commit.merkle_size or 0
            else:  # written before commits carried the tree: derive it once from the ledger
                earlier = [e for e in read_ledger(store) if e.seq < seq]
                frontier, size = merkle.extend([], 0, merkle.leaf_hashes(store, earlier))
        if fields.get("kind") == "ingest":
            paths = [str(segment["path"]) for segment in fields.get("segments", [])]
            if any(SEGMENT_PATH.fullmatch(path) is None for path in paths):
                return {}
            frontier, size = merkle.extend(frontier, size, merkle.path_leaf_hashes(store, paths))
    except (IntegrityError, OSError):
        return {}
    return {
        "merkle_size": size,
        "merkle_root": merkle.as_digest(merkle.root_of_frontier(frontier)),
        "merkle_frontier": [merkle.as_digest(h) for h in frontier],
    }


def digest_at(store: Store, seq: int) -> str | None:
    """Return the digest of commit `seq` (None for 0, the empty ledger)."""
    return read_entry(store, commit_name(seq)).digest if seq else None


def entry_at(store: Store, seq: int) -> LedgerEntry:
    """Return commit `seq`."""
    return read_entry(store, commit_name(seq))


def append(
    store: Store,
    fields: dict[str, Any],
    already: Callable[[], LedgerEntry | None] | None = None,
) -> tuple[LedgerEntry, bool]:
    """Append a commit with `fields` at the next free sequence number, retrying races.

    `already`, if given, is asked before every attempt whether an equivalent commit now
    exists (another writer may have just made it); if so that one is returned instead.
    Returns the commit and whether this call wrote it.

    Raises:
        LedgerConflictError: the race was lost `MAX_ATTEMPTS` times in a row.
    """
    for _ in range(MAX_ATTEMPTS):
        seq = head_seq(store)
        if already is not None and (existing := already()) is not None:
            return existing, False
        if try_append(store, seq + 1, digest_at(store, seq), fields) is not None:
            return entry_at(store, seq + 1), True
        backoff()
    raise LedgerConflictError(f"could not append to the ledger after {MAX_ATTEMPTS} attempts")


def backoff() -> None:
    """Sleep a short random time after losing a race for a sequence number."""
    time.sleep(random.uniform(0.001, 0.02))


def is_commit_name(name: str) -> bool:
    """Whether a file name in `ledger/` is a commit's (`<12 digits>.json`)."""
    return len(name) == 17 and name.endswith(".json") and name[:12].isdigit()
