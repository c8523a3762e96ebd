"""The three digests of the contract: cohort key, terminal identity and attempt id."""

from __future__ import annotations

from operator import itemgetter
from typing import Any

import orjson

from registry.storage.canonical import (
    canonical_budget,
    canonical_identity,
    canonical_record,
    canonical_validated,
)
from registry.storage.digest import digest_bytes, digest_json
from registry_schemas import COHORT_SCHEME, AttemptRecord

# Every attempt of a cohort repeats its inputs: canonicalise and hash them once per cohort.
# The memo is keyed by an exact serialisation, so a miss (e.g. 2 vs 2.0) only costs time.
_MEMO_SIZE = 65536
_COHORT_MEMO: dict[tuple[str, bytes], str] = {}

IDENTITY_FIELDS = (
    "cohort_key",
    "envelope",
    "experiment_id",
    "repeat_index",
    "task_id",
    "terminal_class",
)


def cohort_key_of(task_id: str, inputs: dict[str, Any]) -> str:
    """Return the cohort key of a task and its ten cohort inputs (JSON form)."""
    try:
        memo = (task_id, orjson.dumps(inputs, option=orjson.OPT_SORT_KEYS))
    except orjson.JSONEncodeError:
        return _cohort_key(task_id, inputs)
    key = _COHORT_MEMO.get(memo)
    if key is None:
        if len(_COHORT_MEMO) >= _MEMO_SIZE:
            _COHORT_MEMO.clear()
        key = _COHORT_MEMO[memo] = _cohort_key(task_id, inputs)
    return key


def _cohort_key(task_id: str, inputs: dict[str, Any]) -> str:
    return digest_json({"scheme": COHORT_SCHEME, "task_id": task_id, **inputs})


def terminal_identity_of(record: dict[str, Any], cohort_key: str) -> str:
    """Return the terminal identity binding a record's outcome to its envelope and cohort."""
    return digest_bytes(
        canonical_identity(
            {
                "cohort_key": cohort_key,
                "envelope": record["envelope"],
                "experiment_id": record["experiment_id"],
                "repeat_index": record["repeat_index"],
                "task_id": record["task_id"],
                "terminal_class": record["terminal_class"],
            }
        )
    )


def attempt_id_of(record: dict[str, Any]) -> str:
    """Return the attempt id: the digest of the canonical record with defaults applied."""
    return digest_bytes(canonical_record(record))


def record_json(record: AttemptRecord) -> dict[str, Any]:
    """Return the canonical JSON form of a validated record (every field, defaults applied)."""
    return record.model_dump(mode="json")


def derive_keys(record: dict[str, Any]) -> tuple[str, str | None, str]:
    """Return `(cohort_key, expected terminal identity or None, attempt_id)` of a record.

    The terminal identity is only derived for records that carry one: legacy evidence stays
    legacy rather than acquiring an identity it never claimed.
    """
    cohort = cohort_key_of(record["task_id"], record["inputs"])
    identity = None
    if record.get("terminal_identity") is not None:
        identity = terminal_identity_of(record, cohort)
    return cohort, identity, attempt_id_of(record)


_CONFIGURATION = itemgetter(
    "case_digest",
    "prompt_digest",
    "source_digest",
    "wiki_digest",
    "tool_policy_digest",
    "harness_package",
    "grader_version",
    "agent_system_digest",
    "environment_digest",
)
"""The nine text inputs (every input but the budget), in a fixed order."""
_VALIDATED_MEMO: dict[tuple[Any, ...], str] = {}


def validated_keys(record: dict[str, Any]) -> tuple[str, str | None, str, str]:
    """`derive_keys` of a validated record, and the canonical text of its budget.

    For records just validated (`checked_payload`, then `--envelope`): the budget is encoded
    once for the cohort key, the attempt id and the segment row, and the record's types are
    taken as validation left them (`canonical_validated`). `tests/test_fast_records.py`
    checks the result equals `derive_keys` on every record the model accepts.
    """
    task = record["task_id"]
    inputs = record["inputs"]
    budget_text, fragment = canonical_budget(inputs["budget"])
    memo = (task, budget_text, _CONFIGURATION(inputs))
    cohort = _VALIDATED_MEMO.get(memo)
    if cohort is None:
        if len(_VALIDATED_MEMO) >= _MEMO_SIZE:
            _VALIDATED_MEMO.clear()
        cohort = _VALIDATED_MEMO[memo] = _cohort_key(task, inputs)
    identity = None
    if record["terminal_identity"] is not None:
        identity = terminal_identity_of(record, cohort)
    attempt = digest_bytes(canonical_validated(record, fragment))
    return cohort, identity, attempt, budget_text
