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
    slots: dict[str, dict[Slot, str]] = field(default_factory=dict)
    """cohort key -> slot -> attempt id of its valid outcome (registry, then this input)."""
    regrades: list[_Regrade] = field(default_factory=list)
    graders: dict[str, tuple[str, str]] = field(default_factory=dict)
    """This input's attempt ids -> (task id, grader version), for regrades named in it."""

    def admit(
        self, label: str, location: str, record: dict[str, Any], attempt_id: str, cohort_key: str
    ) -> None:
        """Check one new record; remember its slot and what it regrades.

        Raises:
            InvalidRecordError: its slot already holds a valid outcome.
        """
        grader = record["inputs"]["grader_version"]
        self.graders[attempt_id] = (record["task_id"], grader)
        if record["derived_from"] is not None:
            self.regrades.append(
                _Regrade(label, location, record["task_id"], grader, record["derived_from"])
            )
        if record["terminal_class"] in INVALID:
            return
        slots = self._slots(cohort_key)
        slot = (
            record["experiment_id"],
            record["task_id"],
            record["repeat_index"],
            *observed_identity(record).values(),
        )
        holder = slots.get(slot)
        if holder is not None and holder != attempt_id:
            raise InvalidRecordError(
                label,
                location,
                "repeat_index",
                f"experiment {record['experiment_id']!r}, task {record['task_id']!r}, repeat "
                f"{record['repeat_index']} already has a valid outcome for this cohort and "
                f"system (attempt {holder}); a retry needs its own repeat_index, a correction a "
                "retraction (registry retract)",
            )
        slots[slot] = attempt_id

    def check_regrades(self) -> None:
        """Check every regrade of the input against its original.

        Raises:
            InvalidRecordError: a regrade names no attempt, another task's attempt, or one
                graded by the same grader version.
        """
        missing = {r.original for r in self.regrades if r.original not in self.graders}
        stored = self._stored_graders(missing, {r.task_id for r in self.regrades})
        for regrade in self.regrades:
            original = self.graders.get(regrade.original) or stored.get(regrade.original)
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

    def _slots(self, cohort_key: str) -> dict[Slot, str]:
        if cohort_key not in self.slots:
            slots: dict[Slot, str] = {}
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
                        key = (
                            row["experiment_id"],
                            row["task_id"],
                            row["repeat_index"],
                            *observed_identity(row).values(),
                        )
                        slots.setdefault(key, row["attempt_id"])
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
