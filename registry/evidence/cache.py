"""The evidence of a whole registry, computed once and kept as one local Parquet file.

Whole-registry questions (`registry sql`, `summary`, `compare`, `noise`, `regressions`,
`export`) read every visible attempt through the evidence views of `registry.evidence.rule`:
deduplication by attempt id, the provenance of each row, lineage depth, the slot rule.
Evaluating those views over a million attempts costs seconds, and every query of a command
paid it again. Once the ledger read holds at least `MIN_ATTEMPTS` attempts, the first
whole-registry read writes the rule's result, `_evidence` plus the slot rule's verdict both
with and without retracted attempts, to one Parquet file, and every later whole-registry read
of the same evidence reads that file instead of the segments. One-task reads
(`report --task`) read the task's segments as before.

The file is derived, never authoritative:

* it is named by the blake3 digest of its bytes and checked against that name before every
  read; a file that does not match, or has gone, is rebuilt from the (digest-checked)
  segments;
* it is keyed by the digest of the last commit in the ledger read that changes evidence
  (`ingest`, `pack`, `retraction`): the ledger is hash-chained, so that digest names the whole
  evidence history, while report, comparison and plan commits leave the key unchanged;
* it lives in the local cache (`REGISTRY_CACHE`, by default
  ~/.cache/agent-evidence-registry, one folder per registry location), never in the registry,
  so removing the cache folder loses nothing; files unused for `KEEP_SECONDS` are removed when
  a newer one is written. Where the cache cannot be written, the views are evaluated as
  before.

`tests/test_evidence_cache.py` checks that every view and every command answers the same with
and without the file.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from registry.evidence.rule import stored_evidence
from registry.storage.digest import digest_file, hex_of
from registry.storage.store import Store, cache_dir

if TYPE_CHECKING:
    from registry.storage.ledger import LedgerEntry

MIN_ATTEMPTS = 50_000
"""Below this many attempts in the ledger read the views are evaluated directly: cheaper
than writing and then reading the file."""
BUILD_MEMORY = "600MB"
"""DuckDB memory while the file is written (it spills beyond that when it may)."""
KEEP_SECONDS = 3600
"""A cached file unused for this long is removed when another one is written."""
FORMAT = "1"
"""Version of the file's layout; part of the key, so a new layout never reads an old file."""
EVIDENCE_KINDS = frozenset({"ingest", "pack", "retraction"})
"""Commit kinds that change which attempts are visible or what they carry."""


def evidence_key(entries: Sequence[LedgerEntry]) -> str | None:
    """Return the key of the evidence `entries` hold: the last evidence commit's digest."""
    for entry in reversed(entries):
        if entry.commit.kind in EVIDENCE_KINDS:
            return f"{FORMAT}-{hex_of(entry.digest)}"
    return None


def wanted(entries: Sequence[LedgerEntry]) -> bool:
    """Whether a whole-registry read of `entries` should go through the cached file."""
    rows = sum(s.rows for e in entries for s in e.commit.segments)
    return rows >= MIN_ATTEMPTS


def folder(store: Store) -> Path:
    """The folder of this registry's cached evidence files."""
    return cache_dir(store.location) / "evidence"


def cached_file(store: Store, key: str) -> Path | None:
    """Return the cached file for `key` after checking its bytes, or None when there is none.

    A file whose bytes do not match its name is removed (it is rebuilt by `write`).
    """
    where = folder(store)
    try:
        name = (where / f"key-{key}").read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    path = where / f"{name}.parquet"
    try:
        actual = hex_of(digest_file(path))
    except OSError:
        return None
    if actual != name:
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # in use: not removed for another KEEP_SECONDS
    return path


def write(store: Store, key: str, con: duckdb.DuckDBPyConnection) -> Path | None:
    """Write the evidence views of `con` to the cache under `key`; None if it cannot be written.

    `con` holds `_evidence` as `registry.evidence.rule.register_evidence` builds it, with
    retracted attempts included (their slot verdicts are stored both ways).
    """
    where = folder(store)
    temp = where / f".{uuid.uuid4().hex}.tmp"
    spill = where / f".{uuid.uuid4().hex}.spill"
    try:
        where.mkdir(parents=True, exist_ok=True)
        con.execute("SET preserve_insertion_order = false")
        con.execute("SET temp_directory = ?", [str(spill)])
        con.execute("SET memory_limit = ?", [BUILD_MEMORY])
        # zstd: 84 MB instead of Snappy's 145 MB at 1M attempts, as fast to write and to
        # query, and the file is hashed before every read
        con.execute(f"COPY ({stored_evidence(con)}) TO '{temp}' (FORMAT parquet, COMPRESSION zstd)")
        name = hex_of(digest_file(temp))
        path = where / f"{name}.parquet"
        os.replace(temp, path)
        pointer = where / f".key-{key}.{uuid.uuid4().hex}.tmp"
        pointer.write_text(name + "\n")
        os.replace(pointer, where / f"key-{key}")
    except (OSError, duckdb.Error):
        with contextlib.suppress(OSError):
            temp.unlink()
        return None
    finally:
        shutil.rmtree(spill, ignore_errors=True)
    _evict(where, keep=path)
    return path


def _evict(where: Path, keep: Path) -> None:
    """Remove files unused for `KEEP_SECONDS` (and leftovers) and pointers to removed files."""
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(where):
            with contextlib.suppress(OSError):
                old = now - entry.stat().st_mtime > KEEP_SECONDS
                if old and entry.path != str(keep) and not entry.name.startswith("key-"):
                    if entry.is_dir():
                        shutil.rmtree(entry.path, ignore_errors=True)
                    else:
                        os.unlink(entry.path)
        for entry in os.scandir(where):
            with contextlib.suppress(OSError):
                if entry.name.startswith("key-"):
                    target = Path(entry.path).read_text().strip()
                    if not (where / f"{target}.parquet").exists():
                        os.unlink(entry.path)
