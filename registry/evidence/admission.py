"""What ingest refuses so that the evidence rule (`registry.evidence.rule`) holds for new evidence.

* **One valid outcome per slot.** An (experiment, task, repeat index, cohort, observed
  system) slot holds at most one valid outcome. A second one, in the same input or already
  in the registry, is refused: a retry needs its own repeat index, a correction needs a
  retraction. Retried infrastructure failures (invalid outcomes) may share the slot with the
  outcome that followed them. Two writers racing can still both commit one; readers then
  count neither.
* **Regrades name what they regrade.** `derived_from` must name an attempt of the same task,
  in the registry or in the same input, graded by another grader version: a "regrade" with
  the same grader would pool with its original as if it were new evidence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from registry.errors import InvalidRecordError
from registry.evidence.rule import INVALID, observed_identity
from registry.storage.ledger import LedgerEntry
from registry.storage.store import Store
from registry.storage.tables import read_segment

Slot = tuple[Any, ...]


def id_key(attempt_id: str) -> bytes | str:
    """Return the compact form an ingest keeps of an attempt id: its 32 digest bytes.

    A million attempt ids held as `str` cost about 120 MB; as bytes, half. An id that is not
    a `blake3:` digest (a malformed `derived_from`, say) is kept as it is.
    """
    try:
        return bytes.fromhex(attempt_id[7:]) if attempt_id.startswith("blake3:") else attempt_id
    except ValueError:
        return attempt_id


def id_text(key: bytes | str) -> str:
    """Return the attempt id of a compact key (`id_key`)."""
    return "blake3:" + key.hex() if isinstance(key, bytes) else key


@dataclass
class _Regrade:
    label: str
    location: str
    task_id: str
    grader_version: str
    original: str


@dataclass
class Admission:
    """The slots and regrades of one ingest, checked against the registry it extends."""

    store: Store
    segments_of_cohort: Callable[[str], list[str]]
    entries: list[LedgerEntry]
    slots: dict[str, dict[Slot, bytes | str]] = field(default_factory=dict)
    """cohort key -> slot -> attempt id (`id_key`) of its valid outcome (registry, then this
    input)."""
    regrades: list[_Regrade] = field(default_factory=list)
    graders: dict[bytes | str, tuple[str, str]] = field(default_factory=dict)
    """This input's attempt ids (`id_key`) -> (task id, grader version), for regrades named
    in it."""
    shared: dict[Any, Any] = field(default_factory=dict)
    """One object per distinct value kept above (task ids, systems, pairs): a million
    attempts repeat a few thousand of them, and each record parsed its own copy."""

    def admit(
        self, label: str, location: str, record: dict[str, Any], attempt_id: str, cohort_key: str
    ) -> bytes | str:
        """Check one new record; remember its slot and what it regrades; return its `id_key`.

        Raises:
            InvalidRecordError: its slot already holds a valid outcome.
        """
        grader = record["inputs"]["grader_version"]
        pair = (record["task_id"], grader)
        key = id_key(attempt_id)
        self.graders[key] = self.shared.setdefault(pair, pair)
        if record["derived_from"] is not None:
            self.regrades.append(
                _Regrade(label, location, record["task_id"], grader, record["derived_from"])
            )
        if record["terminal_class"] in INVALID:
            return key
        slots = self._slots(cohort_key)
        slot = self._slot_of(record)
        holder = slots.get(slot)
        if holder is not None and holder != key:
            raise InvalidRecordError(
                label,
                location,
                "repeat_index",
                f"experiment {record['experiment_id']!r}, task {record['task_id']!r}, repeat "
                f"{record['repeat_index']} already has a valid outcome for this cohort and "
                f"system (attempt {id_text(holder)}); a retry needs its own repeat_index, a "
                "correction a retraction (registry retract)",
            )
        slots[slot] = key
        return key

    def check_regrades(self) -> None:
        """Check every regrade of the input against its original.

        Raises:
            InvalidRecordError: a regrade names no attempt, another task's attempt, or one
                graded by the same grader version.
        """
        missing = {r.original for r in self.regrades if id_key(r.original) not in self.graders}
        stored = self._stored_graders(missing, {r.task_id for r in self.regrades})
        for regrade in self.regrades:
            original = self.graders.get(id_key(regrade.original)) or stored.get(regrade.original)
            if original is None:
                problem = (
                    f"names no attempt in the registry or in this input ({regrade.original}); "
                    "a regrade must name the attempt it re-grades"
                )
            elif original[0] != regrade.task_id:
                problem = f"re-grades an attempt of another task ({original[0]!r})"
            elif original[1] == regrade.grader_version:
                problem = (
                    f"a regrade needs another grader version than the attempt it re-grades "
                    f"(both {regrade.grader_version!r}); without one it would pool with its "
                    "original"
                )
            else:
                continue
            raise InvalidRecordError(regrade.label, regrade.location, "derived_from", problem)

    def _slot_of(self, row: dict[str, Any]) -> Slot:
        """Return the slot of an attempt (its cohort aside), built of shared objects."""
        shared = self.shared
        system = tuple(shared.setdefault(v, v) for v in observed_identity(row).values())
        return (
            shared.setdefault(row["experiment_id"], row["experiment_id"]),
            shared.setdefault(row["task_id"], row["task_id"]),
            row["repeat_index"],
            shared.setdefault(system, system),
        )

    def _slots(self, cohort_key: str) -> dict[Slot, bytes | str]:
        if cohort_key not in self.slots:
            slots: dict[Slot, bytes | str] = {}
            columns = [
                "attempt_id",
                "experiment_id",
                "task_id",
                "repeat_index",
                "terminal_class",
                "envelope",
                "terminal_identity",
            ]
            for path in self.segments_of_cohort(cohort_key):
                table = read_segment(self.store.resolve(path), columns).to_pylist()
                for row in sorted(table, key=lambda r: r["attempt_id"]):
                    if row["terminal_class"] not in INVALID:
                        slots.setdefault(self._slot_of(row), id_key(row["attempt_id"]))
            self.slots[cohort_key] = slots
        return self.slots[cohort_key]

    def _stored_graders(self, ids: set[str], tasks: Iterable[str]) -> dict[str, tuple[str, str]]:
        found: dict[str, tuple[str, str]] = {}
        if not ids:
            return found
        wanted = set(tasks)
        for entry in self.entries:
            for segment in entry.commit.segments:
                if wanted.isdisjoint(segment.task_ids):
                    continue
                table = read_segment(self.store.resolve(segment.path), ["attempt_id", "task_id"])
                hits = [i for i in table.column("attempt_id").to_pylist() if i in ids]
                if hits:
                    full = read_segment(self.store.resolve(segment.path)).to_pylist()
                    for row in full:
                        if row["attempt_id"] in ids:
                            found[row["attempt_id"]] = (
                                row["task_id"],
                                row["inputs"]["grader_version"],
                            )
        return found
