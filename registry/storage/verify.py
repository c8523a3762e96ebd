"""`registry verify`: re-hash every object, re-derive every attempt id, walk the ledger chain.

Problems (exit 1): a commit that does not parse, a gap or a broken link in the chain, a path
a commit names that is not the well-formed path of its object inside the root, a segment
named by two commits, a missing or altered segment or layer, a segment whose rows are not
the count and task ids its commit records, a row whose content no longer yields its attempt
id, a retraction naming an attempt that no earlier commit added (or not in the commit it
names), a packed segment that does not hold exactly the rows of the segments it supersedes,
a commit whose Merkle tree fields differ from the tree over the attempt ids before it, a
checkpoint that differs from the one rebuilt from the commits, and, given an expected head,
a ledger that no longer extends it.
Retracted attempts are still checked like every other: a retraction withdraws, never deletes.
Unreferenced files are listed separately: an interrupted or in-flight writer leaves fully
written objects that no commit names yet; queries never read them, so they are not damage.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from registry.errors import IntegrityError
from registry.evidence.keys import derive_keys
from registry.evidence.retract import retracted_ids
from registry.storage import checkpoints, ledger, merkle
from registry.storage.digest import digest_file
from registry.storage.store import MARKER, Store
from registry.storage.tables import read_segment, table_to_records
from registry_schemas import Commit, SegmentEntry
from registry_schemas.ledger import PackedSegment


@dataclass
class VerifyReport:
    """Outcome of a verification."""

    commits: int = 0
    segments: int = 0
    attempts: int = 0
    layers: int = 0
    retractions: int = 0
    """Retraction commits checked."""
    retracted: int = 0
    """Distinct attempts the retraction commits withdraw."""
    packs: int = 0
    """Pack commits checked."""
    checkpoints: int = 0
    """Checkpoints checked."""
    problems: list[str] = field(default_factory=list)
    unreferenced: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no problem was found (unreferenced files are not problems)."""
        return not self.problems


def verify(store: Store, expect_head: str | tuple[int, str] | None = None) -> VerifyReport:
    """Check every commit, segment, layer and row of the registry.

    With `expect_head` (`SEQ:DIGEST` as `registry head` printed it earlier, or the pair),
    also check that the ledger still extends that head: commit SEQ exists and still has
    that digest. Nothing inside the registry can show a rolled-back or rewritten tail; an
    anchor kept outside it can.

    Raises:
        HeadFormatError: `expect_head` is not written as `SEQ:DIGEST`.
    """
    expected = ledger.parse_head(expect_head) if isinstance(expect_head, str) else expect_head
    with store.fresh_reads() as fresh:  # on a bucket: its own bytes, not the local cache
        return _verify(fresh, expected)


def _verify(store: Store, expected: tuple[int, str] | None) -> VerifyReport:
    report = VerifyReport()
    referenced = {MARKER}
    entries = _walk_chain(store, report)
    if expected is not None:
        _check_head(entries, expected, report)
    retractions = _Retractions(entries)
    tree = _Tree()
    claimed: dict[str, int] = {}
    for entry in entries:
        referenced.add(ledger.commit_name(entry.seq))
        retractions.check(entry, report)
        _check_pack(store, entries, entry, report)
        for segment in _packed(entry.commit):
            referenced.add(segment.path)
            first = claimed.setdefault(segment.path, entry.seq)
            if first != entry.seq:
                report.problems.append(
                    f"{ledger.commit_name(entry.seq)}: names segment {segment.path}, "
                    f"already named by commit {first}"
                )
            report.segments += 1
        for segment in entry.commit.segments:
            referenced.add(segment.path)
            first = claimed.setdefault(segment.path, entry.seq)
            if first != entry.seq:
                report.problems.append(
                    f"{ledger.commit_name(entry.seq)}: names segment {segment.path}, "
                    f"already named by commit {first}"
                )
            if ledger.SEGMENT_PATH.fullmatch(segment.path) is None:
                report.segments += 1
                retractions.add(entry.seq, None)
                tree.add(None)
                continue  # never read a path that may lie outside the root
            ids = _check_segment(store, segment, report)
            retractions.add(entry.seq, ids)
            tree.add(ids if entry.commit.kind == "ingest" else [])
        tree.check(entry, report)
        layer = entry.commit.layer
        if layer is not None:
            referenced.add(layer.path)
            report.layers += 1
            if ledger.LAYER_PATH.fullmatch(layer.path) is not None:
                _check_object(store, layer.path, layer.digest, report)
        plan = entry.commit.plan
        if plan is not None:
            referenced.add(plan.path)
            if ledger.PLAN_PATH.fullmatch(plan.path) is not None:
                _check_object(store, plan.path, plan.digest, report)
    problems, good = checkpoints.checkpoint_problems(store, entries)
    report.problems.extend(problems)
    referenced.update(good)
    report.checkpoints = len(good) + len(problems)
    report.unreferenced = _unreferenced(store, referenced)
    report.retracted = len(retracted_ids(entries))
    return report


class _Retractions:
    """Checks each retraction against the attempts the commits before it added.

    Only the ids some retraction names are remembered, with the commits holding them, so
    memory follows the retractions, not the size of the registry.
    """

    def __init__(self, entries: list[ledger.LedgerEntry]) -> None:
        self.named = {
            attempt_id
            for entry in entries
            if entry.commit.retraction is not None
            for attempt_id in entry.commit.retraction.attempt_ids
        }
        self.kinds = {entry.seq: entry.commit.kind for entry in entries}
        self.added: dict[str, set[int]] = {}
        self.damaged: set[int] = set()

    def add(self, seq: int, attempt_ids: list[str] | None) -> None:
        """Record the ids a segment of commit `seq` holds (None: it could not be read)."""
        if attempt_ids is None:
            self.damaged.add(seq)
            return
        for attempt_id in attempt_ids:
            if attempt_id in self.named:
                self.added.setdefault(attempt_id, set()).add(seq)

    def check(self, entry: ledger.LedgerEntry, report: VerifyReport) -> None:
        """Check one commit's retraction (before its own segments are added)."""
        commit, relative = entry.commit, ledger.commit_name(entry.seq)
        retraction = commit.retraction
        if (commit.kind == "retraction") != (retraction is not None):
            what = "names no attempts" if retraction is None else "is not a retraction"
            report.problems.append(
                f"{relative}: kind {commit.kind} but the retraction field {what}"
            )
        if retraction is None:
            return
        report.retractions += 1
        if commit.segments or commit.sources or commit.layer is not None:
            report.problems.append(f"{relative}: a retraction commit also adds evidence")
        if retraction.attempt_ids != sorted(set(retraction.attempt_ids)):
            report.problems.append(f"{relative}: retracted attempt ids not sorted and unique")
        if self.damaged:  # the damage is reported already; ids in it cannot be told apart
            return
        unknown = [i for i in retraction.attempt_ids if not self.added.get(i)]
        if unknown:
            more = f" and {len(unknown) - 1} more" if unknown[1:] else ""
            report.problems.append(
                f"{relative}: retracts attempt {unknown[0]}{more}, which no earlier commit added"
            )
        target = retraction.commit_seq
        if target is None:
            return
        if target >= entry.seq or self.kinds.get(target) != "ingest":
            report.problems.append(
                f"{relative}: retracts commit {target}, which is not an earlier ingest commit"
            )
            return
        outside = [i for i in retraction.attempt_ids if target not in self.added.get(i, ())]
        if outside:
            more = f" and {len(outside) - 1} more" if outside[1:] else ""
            report.problems.append(
                f"{relative}: retracts attempt {outside[0]}{more} as part of commit {target}, "
                "which does not hold it"
            )


class _Tree:
    """The RFC 9162 tree over the attempt ids of the ingest segments, as the walk reads them."""

    def __init__(self) -> None:
        self.frontier: list[bytes] = []
        self.size = 0
        self.broken = False
        """A segment could not be read: the tree after it is unknown (damage reported)."""

    def add(self, attempt_ids: list[str] | None) -> None:
        """Append the ids of one segment (None: it could not be read)."""
        if attempt_ids is None:
            self.broken = True
            return
        hashes = (merkle.leaf_hash(merkle.leaf_of(i)) for i in attempt_ids)
        self.frontier, self.size = merkle.extend(self.frontier, self.size, hashes)

    def check(self, entry: ledger.LedgerEntry, report: VerifyReport) -> None:
        """Compare a commit's Merkle fields (where it has them) with the tree so far."""
        commit = entry.commit
        if self.broken or commit.merkle_size is None and commit.merkle_root is None:
            return
        recorded = (commit.merkle_size, commit.merkle_root, commit.merkle_frontier)
        actual = (
            self.size,
            merkle.as_digest(merkle.root_of_frontier(self.frontier)),
            [merkle.as_digest(h) for h in self.frontier],
        )
        if recorded != actual:
            report.problems.append(
                f"{ledger.commit_name(entry.seq)}: Merkle tree fields (size "
                f"{commit.merkle_size}, root {commit.merkle_root}) differ from the tree over "
                f"the attempt ids up to it (size {actual[0]}, root {actual[1]})"
            )


def _packed(commit: Commit) -> list[PackedSegment]:
    return list(commit.pack.segments) if commit.pack is not None else []


def _check_pack(
    store: Store,
    entries: list[ledger.LedgerEntry],
    entry: ledger.LedgerEntry,
    report: VerifyReport,
) -> None:
    """Check a pack commit: each packed segment holds exactly the rows it supersedes."""
    from registry.storage import pack

    commit, relative = entry.commit, ledger.commit_name(entry.seq)
    if (commit.kind == "pack") != (commit.pack is not None):
        what = "names no packed segments" if commit.pack is None else "is not a pack"
        report.problems.append(f"{relative}: kind {commit.kind} but the pack field {what}")
    if commit.pack is None:
        return
    report.packs += 1
    if commit.segments or commit.sources or commit.layer is not None:
        report.problems.append(f"{relative}: a pack commit also adds evidence")
    live = {item.segment.path: item for item in pack.live_segments(entries[: entry.seq - 1])}
    for segment in commit.pack.segments:
        missing = [p for p in segment.supersedes if p not in live]
        if missing or len(set(segment.supersedes)) != len(segment.supersedes):
            report.problems.append(
                f"{relative}: packed segment {segment.path} supersedes "
                f"{missing[0] if missing else 'a segment twice'}, which is not a live segment "
                "before it"
            )
            continue
        paths = [segment.path, *segment.supersedes]
        if any(ledger.SEGMENT_PATH.fullmatch(path) is None for path in paths):
            continue  # named by the path check; never read a path that may lie outside the root
        if not _check_object(store, segment.path, segment.digest, report):
            continue
        try:
            replaced = [pack.attributed_table(store, live[p]) for p in segment.supersedes]
            packed = read_segment(store.resolve(segment.path))
        except (IntegrityError, pa.ArrowException, OSError):
            report.problems.append(
                f"{segment.path}: cannot compare with the segments it supersedes (one is "
                "missing, damaged or unreadable)"
            )
            continue
        task_ids = sorted(set(packed.column("task_id").to_pylist()))
        if len(packed) != segment.rows or task_ids != segment.task_ids:
            report.problems.append(
                f"{segment.path}: {len(packed)} rows of tasks {_listed(task_ids)}, ledger says "
                f"{segment.rows} rows of tasks {_listed(segment.task_ids)}"
            )
        keys = [("attempt_id", "ascending"), ("commit_seq", "ascending")]
        if not _same_rows(pa.concat_tables(replaced), packed, keys):
            report.problems.append(
                f"{segment.path}: does not hold exactly the rows (attempt ids, content and "
                "commits) of the segments it supersedes"
            )


def _same_rows(expected: pa.Table, actual: pa.Table, keys: list[tuple[str, str]]) -> bool:
    if expected.schema != actual.schema or len(expected) != len(actual):
        return False
    return bool(expected.sort_by(keys).equals(actual.sort_by(keys)))


def _walk_chain(store: Store, report: VerifyReport) -> list[ledger.LedgerEntry]:
    entries = []
    prev_digest: str | None = None
    for expected_seq, name in enumerate(ledger.commit_names(store), start=1):
        relative = f"ledger/{name}"
        try:
            entry = ledger.read_entry(store, relative)
        except IntegrityError:
            report.problems.append(f"{relative}: commit does not parse as registry.commit/1")
            prev_digest = None
            continue
        if ledger.commit_name(entry.seq) != relative or entry.seq != expected_seq:
            report.problems.append(f"{relative}: sequence number {entry.seq} out of place")
        if entry.seq > 1 and prev_digest is not None and entry.commit.prev != prev_digest:
            report.problems.append(
                f"{relative}: chain broken, prev does not match the digest of commit "
                f"{entry.seq - 1} (an earlier commit was edited or replaced)"
            )
        if expected_seq == 1 and entry.commit.prev is not None:
            report.problems.append(f"{relative}: chain broken, the first commit has a prev")
        _check_counts(relative, entry.commit, report)
        for problem in ledger.path_problems(entry.commit):
            report.problems.append(f"{relative}: {problem}")
        entries.append(entry)
        prev_digest = entry.digest
        report.commits += 1
    return entries


def _check_head(
    entries: list[ledger.LedgerEntry], expected: tuple[int, str], report: VerifyReport
) -> None:
    seq, digest = expected
    found = {entry.seq: entry.digest for entry in entries}.get(seq)
    if found == digest:
        return
    relative = ledger.commit_name(seq)
    what = "is missing" if found is None else f"has digest {found}"
    report.problems.append(
        f"{relative}: expected head {seq}:{digest}, but commit {seq} {what}; the ledger no "
        "longer extends that head (rolled back or rewritten)"
    )


def _check_counts(relative: str, commit: Commit, report: VerifyReport) -> None:
    rows = sum(segment.rows for segment in commit.segments)
    records = sum(source.records for source in commit.sources)
    consistent = (
        commit.attempts_new == rows
        and commit.attempts_read == commit.attempts_new + commit.attempts_present
        and (not commit.sources or records == commit.attempts_read)
    )
    if not consistent:
        report.problems.append(
            f"{relative}: counts disagree (read {commit.attempts_read}, new "
            f"{commit.attempts_new}, present {commit.attempts_present}, segment rows {rows}, "
            f"source records {records})"
        )


def _check_object(store: Store, relative: str, digest: str, report: VerifyReport) -> bool:
    path = store.resolve(relative)
    if not path.is_file():
        report.problems.append(f"{relative}: missing (named by the ledger)")
        return False
    actual = digest_file(path)
    if actual != digest:
        report.problems.append(f"{relative}: altered, blake3 is {actual}, ledger says {digest}")
        return False
    return True


def _check_segment(store: Store, segment: SegmentEntry, report: VerifyReport) -> list[str] | None:
    """Check one segment; return the attempt ids it holds (None when it cannot be trusted)."""
    report.segments += 1
    if not _check_object(store, segment.path, segment.digest, report):
        return None
    try:
        table = read_segment(store.resolve(segment.path))
    except (pa.ArrowException, OSError) as exc:
        report.problems.append(f"{segment.path}: unreadable Parquet ({exc})")
        return None
    attempt_ids = []
    if len(table) != segment.rows:
        report.problems.append(f"{segment.path}: {len(table)} rows, ledger says {segment.rows}")
    task_ids = sorted(set(table.column("task_id").to_pylist()))
    if task_ids != segment.task_ids:
        report.problems.append(
            f"{segment.path}: rows hold tasks {_listed(task_ids)}, "
            f"ledger says {_listed(segment.task_ids)}"
        )
    for row, (attempt_id, cohort_key, record) in enumerate(table_to_records(table), start=1):
        report.attempts += 1
        attempt_ids.append(attempt_id)
        derived_cohort, _, derived_id = derive_keys(record)
        stored = (attempt_id, cohort_key, segment.cohort_key)
        if stored != (derived_id, derived_cohort, derived_cohort):
            report.problems.append(
                f"{segment.path}: row {row} content does not yield its attempt id {attempt_id}"
            )
    return attempt_ids


def _listed(task_ids: list[str]) -> str:
    shown = ", ".join(repr(t) for t in task_ids[:3])
    return f"[{shown}{', ...' if task_ids[3:] else ''}]"


def _unreferenced(store: Store, referenced: set[str]) -> list[str]:
    """Every object under the root that no commit names (nor is a checked checkpoint)."""
    return [relative for relative in store.names("") if relative not in referenced]
