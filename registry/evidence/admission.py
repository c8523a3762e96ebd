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
from operator import itemgetter
from typing import Any, NamedTuple

from registry.errors import InvalidRecordError
from registry.evidence.rule import ENVELOPE_KEYS, INVALID, UNOBSERVED, observed_identity
from registry.storage.ledger import LedgerEntry
from registry.storage.store import Store
from registry.storage.tables import read_segment

Slot = tuple[Any, ...]
_SYSTEM = itemgetter(*ENVELOPE_KEYS)


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


class Fact(NamedTuple):
    """What admission reads of one valid record of an input (`fact_of`)."""

    key: bytes | str
    """The attempt id (`id_key`)."""
    cohort_key: str
    task_id: str
    experiment_id: str
    repeat_index: int
    system: tuple[str | None, ...]
    """The observed system (`observed_identity`), as a tuple of its values."""
    valid: bool
    """Whether the outcome is valid (counted), so that it takes its slot."""
    grader_version: str
    derived_from: str | None


def fact_of(
    record: dict[str, Any], attempt_id: str, cohort_key: str, shared: dict[Any, Any]
) -> Fact:
    """Return the admission facts of a validated record (JSON form).

    Values equal to one already in `shared` are replaced by that object, so the facts of
    many records hold each distinct text once.
    """
    system = _SYSTEM(record["envelope"])
    if record["terminal_identity"] is None:  # legacy evidence: `observed_identity`
        system = (*system[:2], UNOBSERVED, *system[3:])
    return Fact(
        id_key(attempt_id),
        shared.setdefault(cohort_key, cohort_key),
        shared.setdefault(record["task_id"], record["task_id"]),
        shared.setdefault(record["experiment_id"], record["experiment_id"]),
        record["repeat_index"],
        shared.setdefault(system, system),
        record["terminal_class"] not in INVALID,
        shared.setdefault(record["inputs"]["grader_version"], record["inputs"]["grader_version"]),
        record["derived_from"],
    )


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
    """This input's admitted attempt ids (`id_key`) -> (task id, grader version), for
    regrades named in it; also what tells an attempt seen earlier in the input."""
    shared: dict[Any, Any] = field(default_factory=dict)
    """One object per distinct value kept above (task ids, systems, pairs): a million
    attempts repeat a few thousand of them, and each record parsed its own copy."""

    def admitted(self, key: bytes | str) -> bool:
        """Whether an attempt (`id_key`) of this input was admitted already."""
        return key in self.graders

    def admit(self, label: str, location: str, fact: Fact) -> bytes | str:
        """Check one new record; remember its slot and what it regrades; return its `id_key`.

        Raises:
            InvalidRecordError: its slot already holds a valid outcome.
        """
        shared = self.shared
        task = shared.setdefault(fact.task_id, fact.task_id)
        pair = (task, fact.grader_version)
        key = fact.key
        self.graders[key] = shared.setdefault(pair, pair)
        if fact.derived_from is not None:
            self.regrades.append(
                _Regrade(label, location, fact.task_id, fact.grader_version, fact.derived_from)
            )
        if not fact.valid:
            return key
        slots = self._slots(fact.cohort_key)
        slot = (
            shared.setdefault(fact.experiment_id, fact.experiment_id),
            task,
            fact.repeat_index,
            shared.setdefault(fact.system, fact.system),
        )
        holder = slots.get(slot)
        if holder is not None and holder != key:
            raise InvalidRecordError(
                label,
                location,
                "repeat_index",
                f"experiment {fact.experiment_id!r}, task {fact.task_id!r}, repeat "
                f"{fact.repeat_index} already has a valid outcome for this cohort and "
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
