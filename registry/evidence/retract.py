"""`registry retract`: withdraw attempts from every view without rewriting history.

A retraction is a ledger commit of kind `retraction` naming attempt ids and a reason. Nothing
is deleted or rewritten: the segments holding the attempts stay where they are, `verify`
still re-hashes them, and the ledger shows when and why they were withdrawn. Readers take the
retracted set from the ledger entries they pinned (`retracted_ids`), so a view as of an
earlier commit shows what was visible then.

Retracting is idempotent: ids an earlier retraction already covers are reported, never
recorded twice, and a call that would retract nothing new writes no commit.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from registry._faults import checkpoint
from registry.errors import IntegrityError, RegistryError
from registry.storage import ledger
from registry.storage.ledger import LedgerEntry
from registry.storage.store import Store
from registry_schemas import SegmentEntry
from registry_schemas.attempt import DIGEST_PATTERN

if TYPE_CHECKING:
    import pyarrow as pa

_ATTEMPT_ID = re.compile(DIGEST_PATTERN)
_ID_HINT = "expected blake3:<64 lowercase hex digits>"
_FILE_HINT = "expected one id a line, JSON Lines or a JSON array with attempt_id"


def retractions_schema() -> pa.Schema:
    """Arrow schema of the `retractions` view: one row per retracted attempt."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("attempt_id", pa.string(), False),
            pa.field("commit_seq", pa.int64(), False),
            pa.field("commit_digest", pa.string(), False),
            pa.field("reason", pa.string(), False),
            pa.field("created_at", pa.timestamp("us", tz="UTC"), False),
        ]
    )


def __getattr__(name: str) -> Any:
    """`RETRACTIONS_SCHEMA`: `retractions_schema()`, made on first use.

    pyarrow loads only where tables are built, not where the retracted ids are looked up.
    """
    if name == "RETRACTIONS_SCHEMA":
        return retractions_schema()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class RetractionError(RegistryError, ValueError):
    """A retraction request names nothing retractable, or gives no reason."""


@dataclass(frozen=True)
class RetractionInfo:
    """Why and by which commit an attempt was retracted (its first retraction)."""

    commit_seq: int
    """Sequence number of the retraction commit."""
    reason: str
    """The reason the retraction gives."""
    commit_digest: str
    """Digest of the retraction commit."""
    created_at: str
    """When the retraction was committed (RFC 3339 UTC)."""
    retracted_commit: int | None = None
    """The ingest commit retracted as a whole, if the retraction named one."""


@dataclass(frozen=True)
class RetractionResult:
    """Outcome of `retract`."""

    retracted: list[str]
    """Ids this call retracted, sorted (empty when all were retracted before)."""
    already_retracted: list[str]
    """Ids named that an earlier retraction already covers, sorted."""
    reason: str
    """The reason recorded (stripped of surrounding white space)."""
    commit: LedgerEntry | None
    """The retraction commit this call wrote, or None when nothing new was retracted."""
    commit_seq: int | None = None
    """The ingest commit retracted, when retracting by commit."""


def retract(
    store: Store,
    attempt_ids: Sequence[str],
    reason: str,
    *,
    commit_seq: int | None = None,
) -> RetractionResult:
    """Withdraw attempts from every view by appending one `retraction` commit.

    Name the attempts either by id (`attempt_ids`) or as the whole ingest commit
    `commit_seq` (then `attempt_ids` must be empty). Ids already retracted are reported in
    the result and not recorded again; when nothing new remains, no commit is written.

    Raises:
        RetractionError: the reason is empty; no attempt is named; an id is malformed or
            names no attempt in the registry; `commit_seq` is not an ingest commit.
        IntegrityError: a segment the ledger names cannot be read.
    """
    text = reason.strip()
    if not text:
        raise RetractionError("the retraction reason is empty; say why (--reason TEXT)")
    entries = ledger.read_ledger(store)
    if commit_seq is not None:
        if attempt_ids:
            raise RetractionError("retract either attempt ids or a commit, not both")
        wanted = _commit_attempt_ids(store, entries, commit_seq)
    else:
        wanted = _checked_ids(store, entries, attempt_ids)
    retracted = retracted_ids(entries)
    already = sorted(i for i in wanted if i in retracted)
    new = sorted(i for i in wanted if i not in retracted)
    if not new:
        return RetractionResult([], already, text, None, commit_seq)
    fields: dict[str, Any] = {
        "kind": "retraction",
        "retraction": {"attempt_ids": new, "reason": text, "commit_seq": commit_seq},
    }
    base = entries[-1].seq if entries else 0
    checkpoint("retract-before-commit")
    entry, written = ledger.append(store, fields, already=lambda: _covered(store, base, new))
    checkpoint("retract-after-commit")
    if not written:  # another writer retracted all of them meanwhile
        return RetractionResult([], sorted(wanted), text, None, commit_seq)
    return RetractionResult(new, already, text, entry, commit_seq)


def retracted_ids(entries: Iterable[LedgerEntry]) -> dict[str, RetractionInfo]:
    """Return attempt id -> its first retraction, over the given ledger entries.

    Pass a ledger truncated at some commit to get the retractions in force at that commit.
    """
    found: dict[str, RetractionInfo] = {}
    for entry in entries:
        retraction = entry.commit.retraction
        if entry.commit.kind != "retraction" or retraction is None:
            continue
        info = RetractionInfo(
            entry.seq,
            retraction.reason,
            entry.digest,
            entry.commit.created_at,
            retraction.commit_seq,
        )
        for attempt_id in retraction.attempt_ids:
            found.setdefault(attempt_id, info)
    return found


def retraction_table(entries: Iterable[LedgerEntry]) -> pa.Table:
    """Return the `retractions` view: one row per retracted attempt, by commit then id."""
    import pyarrow as pa

    schema = retractions_schema()
    infos = sorted(retracted_ids(entries).items(), key=lambda item: (item[1].commit_seq, item[0]))
    columns = {
        "attempt_id": [attempt_id for attempt_id, _ in infos],
        "commit_seq": [info.commit_seq for _, info in infos],
        "commit_digest": [info.commit_digest for _, info in infos],
        "reason": [info.reason for _, info in infos],
        "created_at": pa.array([info.created_at for _, info in infos], pa.string()).cast(
            schema.field("created_at").type
        ),
    }
    return pa.Table.from_pydict(columns, schema=schema)


def read_attempt_ids_file(path: str | Path) -> list[str]:
    """Read the attempt ids a file lists (`-` reads standard input), in order, once each.

    Accepted: one id a line (blank lines and `#` comments ignored; a first line
    `attempt_id`, as `registry sql --format csv` writes, is skipped); JSON Lines of objects
    with an `attempt_id`; a JSON array of ids or of such objects (`registry sql --format json`).

    Raises:
        RetractionError: the file cannot be read, is in none of these forms, holds a
            malformed id, or lists no id.
    """
    label = "standard input" if str(path) == "-" else str(path)
    try:
        data = sys.stdin.buffer.read() if str(path) == "-" else Path(path).read_bytes()
        text = data.decode("utf-8-sig")
    except OSError as exc:
        raise RetractionError(f"{label}: cannot read attempt ids ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise RetractionError(f"{label}: not UTF-8 text; {_FILE_HINT}") from None
    start = text.lstrip()[:1]
    if start == "[":
        ids = _ids_of_json_array(label, text)
    elif start == "{":
        ids = _ids_of_json_lines(label, text)
    else:
        ids = _ids_of_lines(label, text)
    if not ids:
        raise RetractionError(f"{label}: lists no attempt id; {_FILE_HINT}")
    return list(dict.fromkeys(ids))


def _ids_of_lines(label: str, text: str) -> list[str]:
    ids: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        value = line.split("#", 1)[0].strip()
        if not value or (value == "attempt_id" and not ids):
            continue
        if not _ATTEMPT_ID.match(value):
            shown = value if len(value) <= 80 else value[:77] + "..."
            raise RetractionError(
                f"{label}:line {number}: {shown!r} is not an attempt id ({_ID_HINT}); {_FILE_HINT}"
            )
        ids.append(value)
    return ids


def _ids_of_json_array(label: str, text: str) -> list[str]:
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise RetractionError(f"{label}: not a valid JSON array ({exc})") from None
    if not isinstance(document, list):
        raise RetractionError(f"{label}: not a JSON array; {_FILE_HINT}")
    return [_id_of_json(f"{label}:element {n}", item) for n, item in enumerate(document, 1)]


def _ids_of_json_lines(label: str, text: str) -> list[str]:
    ids: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{label}:line {number}"
        try:
            item = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise RetractionError(f"{where}: not a JSON object ({exc}); {_FILE_HINT}") from None
        ids.append(_id_of_json(where, item))
    return ids


def _id_of_json(where: str, item: object) -> str:
    value = item.get("attempt_id") if isinstance(item, dict) else item
    if not isinstance(value, str):
        raise RetractionError(f"{where}: no attempt_id string; {_FILE_HINT}")
    if not _ATTEMPT_ID.match(value):
        raise RetractionError(f"{where}: {value[:80]!r} is not an attempt id ({_ID_HINT})")
    return value


def _checked_ids(store: Store, entries: list[LedgerEntry], attempt_ids: Sequence[str]) -> set[str]:
    wanted = set(attempt_ids)
    if not wanted:
        raise RetractionError("no attempt ids to retract; name at least one")
    malformed = sorted(i for i in wanted if not _ATTEMPT_ID.match(i))
    if malformed:
        raise RetractionError(f"{malformed[0][:80]!r} is not an attempt id ({_ID_HINT})")
    known = _segment_ids(store, (s for e in entries for s in e.commit.segments))
    unknown = sorted(wanted - known)
    if unknown:
        others = f" (and {len(unknown) - 1} more of the {len(wanted)} ids)" if unknown[1:] else ""
        raise RetractionError(
            f"attempt {unknown[0]} is not in the registry{others}; nothing was retracted"
        )
    return wanted


def _commit_attempt_ids(store: Store, entries: list[LedgerEntry], seq: int) -> set[str]:
    by_seq = {entry.seq: entry for entry in entries}
    entry = by_seq.get(seq)
    if entry is None:
        head = entries[-1].seq if entries else 0
        raise RetractionError(f"commit {seq} does not exist; the ledger has commits 1 to {head}")
    if entry.commit.kind != "ingest":
        raise RetractionError(
            f"commit {seq} is a {entry.commit.kind} commit; only an ingest commit's attempts "
            "can be retracted"
        )
    ids = _segment_ids(store, entry.commit.segments)
    if not ids:
        raise RetractionError(f"commit {seq} added no attempts; nothing to retract")
    return ids


def _segment_ids(store: Store, segments: Iterable[SegmentEntry]) -> set[str]:
    import pyarrow as pa

    from registry.storage.tables import read_segment

    ids: set[str] = set()
    for segment in segments:
        try:
            table = read_segment(store.resolve(segment.path), ["attempt_id"])
        except (pa.ArrowException, OSError) as exc:
            raise IntegrityError(
                f"{segment.path}: cannot read the segment ({' '.join(str(exc).split())}); "
                "run registry verify"
            ) from None
        ids.update(table.column("attempt_id").to_pylist())
    return ids


def _covered(store: Store, base_seq: int, ids: list[str]) -> LedgerEntry | None:
    """The newest retraction covering every id in `ids`, if commits after `base_seq` did."""
    if ledger.head_seq(store) == base_seq:
        return None
    retracted = retracted_ids(ledger.read_ledger(store))
    if not all(i in retracted for i in ids):
        return None
    return ledger.entry_at(store, max(retracted[i].commit_seq for i in ids))
