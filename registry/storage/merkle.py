"""RFC 9162 §2.1 Merkle trees over the registry's attempt ids, hashed with blake3.

The tree is a log of every attempt the ledger added, in ledger order:

* **Leaves.** For each `ingest` commit in sequence order, for each segment in the order the
  commit lists them, for each row in the segment file's row order: the 32 raw bytes of the
  row's attempt id (the digest behind `blake3:`). Other commits (layers, retractions, plans,
  packs) add no leaf: a retraction withdraws an attempt from the views, never from the log,
  and a pack only rearranges rows that are already leaves.
* **Hashes** (RFC 9162 §2.1.1, with blake3 as the hash): the empty tree's hash is
  `blake3("")`, a leaf's is `blake3(0x00 || leaf)`, an interior node's is
  `blake3(0x01 || left || right)`, and a tree of n > 1 leaves splits at the largest power
  of two below n.
* **State.** A tree of size n is summed up by its *frontier*: the roots of the perfect
  subtrees of the binary decomposition of n, largest first. Appending leaves only needs the
  frontier, and the root is the frontier folded from the right. Every commit records
  `merkle_size`, `merkle_root` and `merkle_frontier`, so a writer extends the tree from the
  previous commit without reading earlier segments.

Proofs are RFC 9162's audit paths (§2.1.3.1) and consistency proofs (§2.1.4.1); the
functions `verify_inclusion` and `verify_consistency` are the verification algorithms of
§2.1.3.2 and §2.1.4.2.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import blake3

from registry.errors import IntegrityError, ObjectNotFoundError, RegistryError
from registry.storage.digest import PREFIX, hex_of

if TYPE_CHECKING:
    from registry.storage.ledger import LedgerEntry
    from registry.storage.store import Store
    from registry_schemas import SegmentEntry

EMPTY_ROOT = blake3.blake3(b"").digest()
"""The hash of the empty tree (RFC 9162: the hash of an empty string)."""


def leaf_of(attempt_id: str) -> bytes:
    """Return the leaf bytes of an attempt id: its 32 raw digest bytes."""
    return bytes.fromhex(hex_of(attempt_id))


def leaf_hash(leaf: bytes) -> bytes:
    """Return `blake3(0x00 || leaf)`."""
    return blake3.blake3(b"\x00" + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """Return `blake3(0x01 || left || right)`."""
    return blake3.blake3(b"\x01" + left + right).digest()


def as_digest(value: bytes) -> str:
    """Return a hash in the registry's `blake3:<hex>` form."""
    return PREFIX + value.hex()


def from_digest(text: str) -> bytes:
    """Return the raw bytes of a `blake3:<hex>` hash."""
    return bytes.fromhex(hex_of(text))


def _largest_power_below(n: int) -> int:
    """Return the largest power of two strictly below `n` (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def root_of(hashes: Sequence[bytes]) -> bytes:
    """Return the root of the tree whose leaf hashes are `hashes` (RFC 9162 MTH)."""
    if not hashes:
        return EMPTY_ROOT
    level = list(hashes)
    # Bottom-up: pairing neighbours level by level and carrying an odd last node up unchanged
    # yields exactly the RFC's split at the largest power of two.
    while len(level) > 1:
        paired = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


def extend(frontier: list[bytes], size: int, hashes: Iterable[bytes]) -> tuple[list[bytes], int]:
    """Append leaf hashes to a tree given by its frontier; return the new frontier and size."""
    frontier = list(frontier)
    for value in hashes:
        frontier.append(value)
        size += 1
        merged = size
        while merged % 2 == 0:  # each trailing zero bit of the new size merges two subtrees
            right = frontier.pop()
            frontier[-1] = node_hash(frontier[-1], right)
            merged //= 2
    return frontier, size


def root_of_frontier(frontier: Sequence[bytes]) -> bytes:
    """Return the root of a tree from its frontier (folded from the right)."""
    if not frontier:
        return EMPTY_ROOT
    root = frontier[-1]
    for value in reversed(frontier[:-1]):
        root = node_hash(value, root)
    return root


def inclusion_proof(hashes: Sequence[bytes], index: int, size: int) -> list[bytes]:
    """Return the audit path of leaf `index` in the tree of the first `size` leaf hashes."""
    if not 0 <= index < size <= len(hashes):
        raise ValueError(f"leaf {index} is not in a tree of size {size}")
    return _path(index, hashes[:size])


def _path(index: int, hashes: Sequence[bytes]) -> list[bytes]:
    n = len(hashes)
    if n <= 1:
        return []
    k = _largest_power_below(n)
    if index < k:
        return [*_path(index, hashes[:k]), root_of(hashes[k:])]
    return [*_path(index - k, hashes[k:]), root_of(hashes[:k])]


def consistency_proof(hashes: Sequence[bytes], old: int, new: int) -> list[bytes]:
    """Return the consistency proof between the trees of the first `old` and `new` leaves."""
    if not 0 <= old <= new <= len(hashes):
        raise ValueError(f"no consistency proof between sizes {old} and {new}")
    if old == 0 or old == new:
        return []
    return _subproof(old, hashes[:new], True)


def _subproof(m: int, hashes: Sequence[bytes], complete: bool) -> list[bytes]:
    n = len(hashes)
    if m == n:
        return [] if complete else [root_of(hashes)]
    k = _largest_power_below(n)
    if m <= k:
        return [*_subproof(m, hashes[:k], complete), root_of(hashes[k:])]
    return [*_subproof(m - k, hashes[k:], False), root_of(hashes[:k])]


def verify_inclusion(
    leaf: bytes, index: int, size: int, path: Sequence[bytes], root: bytes
) -> bool:
    """RFC 9162 §2.1.3.2: whether `path` proves `leaf` is leaf `index` of the tree `root`."""
    if index >= size:
        return False
    fn, sn = index, size - 1
    r = leaf_hash(leaf)
    for p in path:
        if sn == 0:
            return False
        if fn % 2 == 1 or fn == sn:
            r = node_hash(p, r)
            if fn % 2 == 0:
                while fn % 2 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(
    old: int, new: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """RFC 9162 §2.1.4.2: whether `proof` shows tree `new_root` extends tree `old_root`."""
    if old > new:
        return False
    if old == new:
        return not proof and old_root == new_root
    if old == 0:
        return not proof
    path = list(proof)
    if old & (old - 1) == 0:  # a power of two: the old root is the first node of the path
        path.insert(0, old_root)
    if not path:
        return False
    fn, sn = old - 1, new - 1
    while fn % 2 == 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn % 2 == 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if fn % 2 == 0:
                while fn % 2 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == old_root and sr == new_root


_WRITTEN: dict[str, Any] = {}
"""Attempt ids of the segments this process wrote, by path (a path names its bytes for good),
each kept as the Arrow column it was written from: no Python object per attempt while an
ingest of a million attempts waits to commit."""


def remember_ids(path: str, attempt_ids: Any) -> None:
    """Record the ids (an Arrow column) of a segment just written, for the commit's tree."""
    _WRITTEN[path] = attempt_ids


def forget_ids() -> None:
    """Drop the remembered ids (once the commit naming the segments is written)."""
    _WRITTEN.clear()


def ids_of_segment(store: Store, path: str) -> list[str]:
    """Return the attempt ids of a segment file in row order.

    Raises:
        IntegrityError: the file is missing or unreadable.
    """
    if path in _WRITTEN:  # content-addressed: the ids this process wrote at that path
        written: list[str] = _WRITTEN[path].to_pylist()
        return written
    import pyarrow as pa

    from registry.storage.tables import read_segment

    try:
        table = read_segment(store.resolve(path), ["attempt_id"])
    except (OSError, pa.ArrowException) as exc:
        raise IntegrityError(
            f"segment {path} cannot be read ({exc}); run 'registry verify'"
        ) from None
    ids: list[str] = table.column("attempt_id").to_pylist()
    return ids


def path_leaf_hashes(store: Store, paths: Iterable[str]) -> Iterator[bytes]:
    """Yield the leaf hashes of the rows of segment files, in order."""
    for path in paths:
        for attempt_id in ids_of_segment(store, path):
            yield leaf_hash(leaf_of(attempt_id))


def leaf_ids(store: Store, entries: Iterable[LedgerEntry]) -> Iterator[str]:
    """Yield the attempt ids that are the tree's leaves, in tree order, for these commits."""
    for entry in entries:
        if entry.commit.kind == "ingest":
            for segment in entry.commit.segments:
                yield from ids_of_segment(store, segment.path)


def leaf_hashes(store: Store, entries: Iterable[LedgerEntry]) -> Iterator[bytes]:
    """Yield the leaf hashes of the tree, in tree order, for these commits."""
    for attempt_id in leaf_ids(store, entries):
        yield leaf_hash(leaf_of(attempt_id))


class ProofError(RegistryError, ValueError):
    """A proof was asked for an attempt or commits the registry does not hold."""

    exit_code = 2


@dataclass(frozen=True)
class InclusionProof:
    """An RFC 9162 audit path: attempt `attempt_id` is leaf `leaf_index` of the tree at `seq`."""

    attempt_id: str
    leaf_index: int
    tree_size: int
    seq: int
    commit_digest: str
    root: str
    path: list[str]


@dataclass(frozen=True)
class ConsistencyProof:
    """An RFC 9162 consistency proof: the tree at `new_seq` extends the tree at `old_seq`."""

    old_seq: int
    new_seq: int
    old_size: int
    new_size: int
    old_root: str
    new_root: str
    path: list[str]


def _checked_ids(store: Store, segment: SegmentEntry) -> list[str]:
    """Return a segment's attempt ids after checking its bytes against its digest."""
    store.checked_segment(segment.path, segment.digest)
    return ids_of_segment(store, segment.path)


def _tree(store: Store, entries: list[LedgerEntry]) -> tuple[list[str], list[bytes], list[int]]:
    """Return the leaf ids, leaf hashes and size after each commit of `entries`.

    Every segment is checked against its digest before it is read.

    Raises:
        IntegrityError: a segment is damaged, or a commit's recorded tree disagrees with it.
    """
    ids: list[str] = []
    hashes: list[bytes] = []
    sizes: list[int] = []
    for entry in entries:
        if entry.commit.kind == "ingest":
            for segment in entry.commit.segments:
                found = _checked_ids(store, segment)
                ids.extend(found)
                hashes.extend(leaf_hash(leaf_of(i)) for i in found)
        recorded = entry.commit.merkle_root
        if recorded is not None and (
            entry.commit.merkle_size != len(hashes) or from_digest(recorded) != root_of(hashes)
        ):
            raise IntegrityError(
                f"commit ledger/{entry.seq:012d}.json records a Merkle tree that differs from "
                "its attempt ids; run 'registry verify'"
            )
        sizes.append(len(hashes))
    return ids, hashes, sizes


def inclusion(store: Store, attempt_id: str, at: str | int | None = None) -> InclusionProof:
    """Return the audit path proving an attempt is in the tree at commit `at` (the head).

    Raises:
        ObjectNotFoundError: the attempt is not in the tree at that commit.
        ProofError: the ledger is empty.
        AsOfError: `at` names no commit of the ledger.
        IntegrityError: the ledger or a segment is damaged.
    """
    from registry.storage.ledger import entries_as_of, read_ledger

    entries = entries_as_of(read_ledger(store), at)
    if not entries:
        raise ProofError("proof inclusion: the ledger is empty; ingest attempts first")
    wanted = PREFIX + hex_of(attempt_id.strip().lower())
    ids, hashes, _ = _tree(store, entries)
    try:
        index = ids.index(wanted)
    except ValueError:
        where = f"at commit {entries[-1].seq}" if at is not None else "in the registry"
        raise ObjectNotFoundError(
            f"proof inclusion {attempt_id}: no attempt with that id {where}"
        ) from None
    return InclusionProof(
        attempt_id=wanted,
        leaf_index=index,
        tree_size=len(hashes),
        seq=entries[-1].seq,
        commit_digest=entries[-1].digest,
        root=as_digest(root_of(hashes)),
        path=[as_digest(h) for h in inclusion_proof(hashes, index, len(hashes))],
    )


def consistency(store: Store, old: int, new: int) -> ConsistencyProof:
    """Return the proof that the tree at commit `new` extends the tree at commit `old`.

    Raises:
        ProofError: the commits are not `1 <= old <= new <= head`.
        IntegrityError: the ledger or a segment is damaged.
    """
    from registry.storage.ledger import read_ledger

    entries = read_ledger(store)
    if not 1 <= old <= new <= len(entries):
        raise ProofError(
            f"proof consistency {old} {new}: give two commits OLD <= NEW of 1..{len(entries)}"
        )
    _, hashes, sizes = _tree(store, entries[:new])
    old_size = sizes[old - 1]
    return ConsistencyProof(
        old_seq=old,
        new_seq=new,
        old_size=old_size,
        new_size=len(hashes),
        old_root=as_digest(root_of(hashes[:old_size])),
        new_root=as_digest(root_of(hashes)),
        path=[as_digest(h) for h in consistency_proof(hashes, old_size, len(hashes))],
    )


prove_inclusion = inclusion
"""Public name of `inclusion`: the audit path of an attempt at a commit."""
prove_consistency = consistency
"""Public name of `consistency`: the proof that a later tree extends an earlier one."""
