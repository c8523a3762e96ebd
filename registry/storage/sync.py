"""`registry sync SRC DST`: copy a registry's objects from one root to another.

Every object a commit of the source names (segments, packed segments, layers, plans) is
copied before the commit itself, in ledger order, so the destination is a valid registry at
every moment: a commit never names an object that is not there yet. Checkpoints follow the
commits. Objects keep their names and bytes; commits are copied as they are, never re-chained.

Idempotent and resumable: an object or commit already at the destination is left alone
(digest-named objects are checked against their digest as they are read), so an interrupted
sync continues where it stopped. A destination whose ledger is not a prefix of the source's
(its own, diverged history) is refused with the first commit that differs.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from registry.errors import IntegrityError, RegistryError
from registry.storage import checkpoints, ledger
from registry.storage.digest import digest_bytes, digest_file
from registry.storage.store import Store, named_digest


class SyncError(RegistryError, ValueError):
    """The destination cannot take the source's history (it has diverged or is ahead)."""


@dataclass(frozen=True)
class SyncResult:
    """What one sync did."""

    commits_copied: int
    objects_copied: int
    objects_present: int
    head_seq: int
    """The destination's head after the sync (the source's head)."""


def sync(source: Store, destination: Store) -> SyncResult:
    """Copy every commit of `source` that `destination` lacks, objects first.

    Raises:
        SyncError: the destination holds a commit that differs from the source's commit of
            the same number, or commits beyond the source's head.
        IntegrityError: the source ledger is damaged, or a source object does not hold the
            bytes its name or commit states.
        StorageError: either root refused a read or a write.
    """
    entries = ledger.read_ledger(source)
    have = _check_prefix(source, destination, entries)
    present = set(destination.names(""))
    copied = skipped = 0
    for entry in entries:
        for relative, digest in _objects(entry):
            if relative in present:
                skipped += 1
                continue
            _copy(source, destination, relative, digest)
            present.add(relative)
            copied += 1
    for entry in entries[have:]:
        data = source.read_bytes(entry.path)
        if digest_bytes(data) != entry.digest:
            raise IntegrityError(f"{source.location}/{entry.path}: changed while it was read")
        with destination.temp_area() as area:
            created = destination.put_bytes(data, entry.path, area)
        if not created and ledger.read_entry(destination, entry.path).digest != entry.digest:
            raise _diverged(destination, entry.seq)
    for _, relative in checkpoints.list_checkpoints(source):
        if relative not in present:
            _copy(source, destination, relative, named_digest(relative))
            copied += 1
    return SyncResult(len(entries) - have, copied, skipped, len(entries))


def _check_prefix(source: Store, destination: Store, entries: list[ledger.LedgerEntry]) -> int:
    """Return how many commits the destination already has, refusing a diverged one."""
    names = ledger.commit_names(destination)
    for expected, name in enumerate(names, start=1):
        seq = int(name[:12])
        if seq != expected:
            raise SyncError(
                f"{destination.location}: its ledger has a gap at commit {expected}; "
                "run registry verify there"
            )
        if seq > len(entries):
            raise SyncError(
                f"{destination.location}: holds commit {seq}, beyond the head of "
                f"{source.location} (commit {len(entries)}); sync copies one history, never "
                "merges two"
            )
        if ledger.read_entry(destination, f"ledger/{name}").digest != entries[seq - 1].digest:
            raise _diverged(destination, seq)
    return len(names)


def _diverged(destination: Store, seq: int) -> SyncError:
    return SyncError(
        f"{destination.location}: diverged from the source at commit {seq} (a different "
        "commit holds that number); sync copies one history, never merges two"
    )


def _objects(entry: ledger.LedgerEntry) -> list[tuple[str, str | None]]:
    """(path, digest) of every object a commit names."""
    commit = entry.commit
    found: list[tuple[str, str | None]] = [(s.path, s.digest) for s in commit.segments]
    if commit.pack is not None:
        found += [(s.path, s.digest) for s in commit.pack.segments]
    if commit.layer is not None:
        found.append((commit.layer.path, commit.layer.digest))
    if commit.plan is not None:
        found.append((commit.plan.path, commit.plan.digest))
    return found


def _copy(source: Store, destination: Store, relative: str, digest: str | None) -> None:
    """Copy one object, checking its bytes against the digest the ledger or its name states."""
    with destination.temp_area() as area:
        temp = area / "object"
        try:
            shutil.copyfile(source.resolve(relative), temp)
        except FileNotFoundError:
            raise IntegrityError(
                f"{source.location}/{relative}: missing (named by the ledger); run registry "
                "verify there"
            ) from None
        expected = digest or named_digest(relative)
        if expected is not None and digest_file(temp) != expected:
            raise IntegrityError(
                f"{source.location}/{relative}: does not hold the bytes its commit names; "
                "run registry verify there"
            )
        destination.put_file(temp, relative)
