"""`registry verify`: re-hash every object, walk the ledger chain, check what commits record.

Two depths. The default proves that no stored byte changed since it was committed: every
object a commit names (segments, layers, plans) is re-hashed and must have the blake3 digest
the commit records, and the commits are walked as a hash chain (each `prev` is the digest of
the previous commit's bytes), so an edit anywhere but the newest commit breaks a link, and
`expect_head` (a head kept outside the registry) covers the newest. `deep=True` also reads
every row of every segment and re-derives what the writer derived from the rows at ingest:
each row's attempt id and cohort key, the segment's row count and task ids as its commit
records them, and the Merkle tree over the attempt ids. Those checks find a writer that
computed something wrong, or a hand-crafted commit naming a segment whose digest is right but
whose rows do not yield what the commit says; they cost per row, the default costs per byte.

Problems at both depths (exit 1): a commit that does not parse, a gap or a broken link in the
chain, a path a commit names that is not the well-formed path of its object inside the root,
a segment named by two commits, a missing or altered segment or layer or plan, counts in a
commit that disagree with each other, a retraction naming an attempt that no earlier commit
added (or not in the commit it names), a packed segment that does not hold exactly the rows
of the segments it supersedes, a commit whose Merkle tree fields are not a tree of as many
leaves as the ingest commits before it record rows, whose root is not the root of its
frontier, or that does not extend the tree of the commit before it, a checkpoint that differs
from the one rebuilt from the commits, and, given an expected head, a ledger that no longer
extends it. At deep depth also: an unreadable segment, a segment whose rows are not the count
and task ids its commit records, a row whose content no longer yields its attempt id, and a
commit whose Merkle tree fields differ from the tree over the attempt ids before it.
Retracted attempts are still checked like every other: a retraction withdraws, never deletes.
Unreferenced files are listed separately: an interrupted or in-flight writer leaves fully
written objects that no commit names yet; queries never read them, so they are not damage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from registry.errors import IntegrityError
from registry.evidence.keys import derive_keys
from registry.evidence.retract import retracted_ids
from registry.evidence.rule import register_rows
from registry.storage import checkpoints, ledger, merkle
from registry.storage.digest import digest_file
from registry.storage.store import MARKER, Store
from registry.storage.tables import ATTEMPT_SCHEMA, read_segment, table_to_records
from registry_schemas import Commit, SegmentEntry
from registry_schemas.ledger import PackedSegment

if TYPE_CHECKING:
    from registry.storage.pack import LiveSegment


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
    deep: bool = False
    """Every row was read and re-derived (`verify(deep=True)`)."""
    problems: list[str] = field(default_factory=list)
    unreferenced: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no problem was found (unreferenced files are not problems)."""
        return not self.problems


def verify(
    store: Store, expect_head: str | tuple[int, str] | None = None, *, deep: bool = False
) -> VerifyReport:
    """Check every commit and the bytes of every object; with `deep`, every row too.

    `attempts` counts the rows the ledger records for the ingest segments whose bytes are
    intact (with `deep`: the rows read). With `expect_head` (`SEQ:DIGEST` as `registry
    head` printed it earlier, or the pair), also check that the ledger still extends that
    head: commit SEQ exists and still has that digest. Nothing inside the registry can show
    a rolled-back or rewritten tail; an anchor kept outside it can.

    Raises:
        HeadFormatError: `expect_head` is not written as `SEQ:DIGEST`.
    """
    expected = ledger.parse_head(expect_head) if isinstance(expect_head, str) else expect_head
    with store.fresh_reads() as fresh:  # on a bucket: its own bytes, not the local cache
        return _verify(fresh, expected, deep)


def _verify(store: Store, expected: tuple[int, str] | None, deep: bool) -> VerifyReport:
    report = VerifyReport(deep=deep)
    referenced = {MARKER}
    entries = _walk_chain(store, report)
    if expected is not None:
        _check_head(entries, expected, report)
    retractions = _Retractions(entries)
    tree: _Tree | _TreeFields = _Tree() if deep else _TreeFields()
    claimed: dict[str, int] = {}
    intact: set[str] = set()  # segments whose bytes checked out (and rows, when deep)
    for entry in entries:
        referenced.add(ledger.commit_name(entry.seq))
        retractions.check(entry, report)
        _check_pack(store, entries, entry, report, intact)
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
            if deep:
                ids = _check_segment(store, segment, report)
            else:
                ids = _check_segment_bytes(store, segment, report, retractions.wants(entry.seq))
            if ids is not None:
                intact.add(segment.path)
            retractions.add(entry.seq, ids)
            tree.add(ids if entry.commit.kind == "ingest" else [])
        if isinstance(tree, _TreeFields):
            tree.add_rows(entry.commit)
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
        self.last = max((e.seq for e in entries if e.commit.retraction is not None), default=0)
        self.added: dict[str, set[int]] = {}
        self.damaged: set[int] = set()

    def wants(self, seq: int) -> bool:
        """True when some retraction after commit `seq` needs the ids its segments hold."""
        return bool(self.named) and seq < self.last

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


class _TreeFields:
    """The default depth's Merkle check: each commit's fields, without hashing any leaf.

    A commit's tree must have as many leaves as the ingest commits up to it record rows,
    as many frontier hashes as its size has bits set, the root its frontier folds to, and
    it must extend the tree of the last commit before it that records one: every perfect
    subtree of that tree that no appended leaf merged into is still in the frontier,
    unchanged. That the leaves are the attempt ids the segments hold is the deep check.
    """

    def __init__(self) -> None:
        self.rows = 0
        self.previous: tuple[int, int, list[str]] | None = None
        """Sequence number, size and frontier of the last commit recording a tree."""

    def add(self, attempt_ids: list[str] | None) -> None:
        """Leaves are not hashed at this depth (the rows come from `add_rows`)."""

    def add_rows(self, commit: Commit) -> None:
        """Count the rows an ingest commit records (its leaves)."""
        if commit.kind == "ingest":
            self.rows += sum(segment.rows for segment in commit.segments)

    def check(self, entry: ledger.LedgerEntry, report: VerifyReport) -> None:
        """Check a commit's Merkle fields (where it has them)."""
        commit = entry.commit
        size, root, frontier = commit.merkle_size, commit.merkle_root, commit.merkle_frontier
        if size is None and root is None and frontier is None:
            return
        wrong = self._problem(size, root, frontier)
        if wrong is not None:
            report.problems.append(
                f"{ledger.commit_name(entry.seq)}: Merkle tree fields (size {size}, root "
                f"{root}) {wrong}"
            )
        if size is not None and frontier is not None:
            self.previous = (entry.seq, size, frontier)

    def _problem(
        self, size: int | None, root: str | None, frontier: list[str] | None
    ) -> str | None:
        if size is None or root is None or frontier is None:
            return "are incomplete (size, root and frontier go together)"
        if size != self.rows:
            return f"differ from the {self.rows} rows the ingest commits up to it record"
        if len(frontier) != size.bit_count():
            count = size.bit_count()
            return f"hold {len(frontier)} frontier hashes, a tree of size {size} has {count}"
        try:
            folded = merkle.as_digest(
                merkle.root_of_frontier([merkle.from_digest(h) for h in frontier])
            )
        except ValueError:
            return "hold a frontier hash that is not a blake3 digest"
        if folded != root:
            return f"differ from the root of their own frontier ({folded})"
        if self.previous is not None:
            seq, old_size, old_frontier = self.previous
            kept = sum(
                1
                for bit in range(old_size.bit_length())
                if old_size >> bit & 1 and size >> bit == old_size >> bit
            )
            if size < old_size or frontier[:kept] != old_frontier[:kept]:
                return f"do not extend the tree of commit {seq} (size {old_size})"
        return None


def _packed(commit: Commit) -> list[PackedSegment]:
    return list(commit.pack.segments) if commit.pack is not None else []


def _check_pack(
    store: Store,
    entries: list[ledger.LedgerEntry],
    entry: ledger.LedgerEntry,
    report: VerifyReport,
    intact: set[str],
) -> None:
    """Check a pack commit: each packed segment holds exactly the rows it supersedes.

    The segments it supersedes were named by earlier commits and checked then (`intact`),
    so their rows are read without hashing them again; the rows of every packed segment of
    the commit are compared in one pass (`_superseded_rows`).
    """
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
    comparable: list[PackedSegment] = []
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
        intact.add(segment.path)  # its bytes: a later pack may supersede it
        if not intact.issuperset(segment.supersedes):  # a damaged one is named already
            _cannot_compare(segment, report)
            continue
        comparable.append(segment)
    if not comparable:
        return
    try:
        expected, actual = _superseded_rows(store, live, comparable)
        every_one = expected.equals(actual)  # the common case: no segment to look at alone
    except (pa.ArrowException, OSError, duckdb.Error):
        expected = actual = None
        every_one = False
    for segment in comparable:
        path = store.resolve(segment.path)
        try:
            schema = pq.read_schema(path)
            # Its rows: the comparison read them already (unless it failed).
            packed = read_segment(path) if actual is None else _rows_of(actual, segment.path)
        except (pa.ArrowException, OSError):
            _cannot_compare(segment, report)
            continue
        task_ids = sorted(set(packed.column("task_id").to_pylist()))
        if len(packed) != segment.rows or task_ids != segment.task_ids:
            report.problems.append(
                f"{segment.path}: {len(packed)} rows of tasks {_listed(task_ids)}, ledger says "
                f"{segment.rows} rows of tasks {_listed(segment.task_ids)}"
            )
        if expected is None or actual is None:
            _cannot_compare(segment, report)
        elif schema != _packed_schema() or not (
            every_one or _rows_of(expected, segment.path).equals(packed)
        ):
            report.problems.append(
                f"{segment.path}: does not hold exactly the rows (attempt ids, content and "
                "commits) of the segments it supersedes"
            )


def _cannot_compare(segment: PackedSegment, report: VerifyReport) -> None:
    report.problems.append(
        f"{segment.path}: cannot compare with the segments it supersedes (one is missing, "
        "damaged or unreadable)"
    )


def _packed_schema() -> pa.Schema:
    """The schema of a packed segment: a segment's, with the commit of each row."""
    from registry.storage.pack import commit_seq_field

    return ATTEMPT_SCHEMA.append(commit_seq_field())


def _superseded_rows(
    store: Store, live: dict[str, LiveSegment], packed: list[PackedSegment]
) -> tuple[pa.Table, pa.Table]:
    """The rows packed segments should hold and the rows they hold, as two tables.

    Both carry every column, the commit each row came from (its own `commit_seq` for a
    segment packed before, its ingest commit's otherwise) and `_pack`, the packed segment
    the row belongs to, and are sorted by (`_pack`, attempt id, commit). DuckDB reads every
    file in one query per side: many small files at a fraction of the cost of one pyarrow
    read each. Paths are bound as parameters and are segment paths inside the root (checked
    by the caller).
    """
    columns = ", ".join(f'"{name}"' for name in ATTEMPT_SCHEMA.names)
    files: list[tuple[str, str, int | None]] = []  # (file, packed segment, commit or None)
    plain: list[str] = []  # ingest segments: the commit is their commit's
    repacked: list[str] = []  # packed before: each row carries its commit
    mine: list[str] = []  # the packed segments themselves
    for segment in packed:
        for path in (segment.path, *segment.supersedes):
            file = str(store.resolve(path))
            item = live[path] if path != segment.path else None
            seq = item.entry.seq if item is not None and not item.packed else None
            files.append((file, segment.path, seq))
            (mine if item is None else repacked if item.packed else plain).append(file)

    def rows(commit_seq: str) -> str:
        return (
            f"SELECT {columns}, {commit_seq} AS commit_seq, f.pack AS _pack"
            " FROM read_parquet(?, filename = true) s JOIN _files f ON s.filename = f.file"
        )

    order = " ORDER BY _pack, attempt_id, commit_seq"
    sides = (("f.seq", plain), ("s.commit_seq", repacked))
    parts = [(rows(commit_seq), side) for commit_seq, side in sides if side]
    con = duckdb.connect()
    try:
        # Bound as lists: registering an Arrow table would import pandas (about 0.6 s).
        register_rows(
            con, "_files", [("file", "VARCHAR"), ("pack", "VARCHAR"), ("seq", "BIGINT")], files
        )
        expected = con.sql(
            f"SELECT * FROM ({' UNION ALL '.join(sql for sql, _ in parts)}){order}",
            params=[side for _, side in parts],
        ).to_arrow_table()
        actual = con.sql(rows("s.commit_seq") + order, params=[mine]).to_arrow_table()
    finally:
        con.close()
    return expected, actual


def _rows_of(table: pa.Table, pack: str) -> pa.Table:
    """The rows of one packed segment in a `_superseded_rows` table, without `_pack`."""
    import pyarrow.compute as pc

    rows = table.filter(pc.equal(table.column("_pack"), pack))
    return rows.drop_columns(["_pack"])


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
    # A local root's file by string: `store.resolve` builds a Path per object, which costs
    # a tenth of hashing a small segment.
    path = f"{store.root}/{relative}" if store.is_local else store.resolve(relative)
    try:
        actual = digest_file(path)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        report.problems.append(f"{relative}: missing (named by the ledger)")
        return False
    except OSError as exc:
        report.problems.append(f"{relative}: cannot be read ({exc.strerror or exc})")
        return False
    if actual != digest:
        report.problems.append(f"{relative}: altered, blake3 is {actual}, ledger says {digest}")
        return False
    return True


def _check_segment_bytes(
    store: Store, segment: SegmentEntry, report: VerifyReport, want_ids: bool
) -> list[str] | None:
    """Default depth: check one segment's bytes; return its attempt ids if wanted.

    Returns None when the segment cannot be trusted, else its attempt ids (read from the
    `attempt_id` column only when `want_ids`, for the retraction checks; [] otherwise).
    """
    report.segments += 1
    if not _check_object(store, segment.path, segment.digest, report):
        return None
    report.attempts += segment.rows
    if not want_ids:
        return []
    try:
        with pq.ParquetFile(store.resolve(segment.path)) as handle:
            column = handle.read(columns=["attempt_id"]).column("attempt_id")
    except (pa.ArrowException, OSError, KeyError) as exc:
        report.problems.append(f"{segment.path}: unreadable Parquet ({exc})")
        return None
    return [str(value) for value in column.to_pylist()]


def _check_segment(store: Store, segment: SegmentEntry, report: VerifyReport) -> list[str] | None:
    """Deep: check one segment and each row; return its attempt ids (None: cannot be trusted)."""
    report.segments += 1
    if not _check_object(store, segment.path, segment.digest, report):
        return None
    try:  # one file, no dataset discovery: a third of `read_segment`'s time per segment
        with pq.ParquetFile(store.resolve(segment.path)) as handle:
            table = handle.read()
    except (pa.ArrowException, OSError) as exc:
        report.problems.append(f"{segment.path}: unreadable Parquet ({exc})")
        return None
    missing = [name for name in ATTEMPT_SCHEMA.names if name not in table.column_names]
    if missing:
        report.problems.append(f"{segment.path}: not a segment, it has no column {missing[0]}")
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
