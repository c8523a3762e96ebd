"""The published contract files under `schemas/`: JSON Schemas and digest test vectors.

`python -m registry.contract` rewrites them from the pydantic models; a test fails when the
committed files drift from what this module generates.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from registry.evidence.keys import IDENTITY_FIELDS, record_json
from registry.storage.canonical import canonical_json
from registry.storage.digest import digest_bytes
from registry_schemas import (
    COHORT_SCHEME,
    AttemptRecord,
    Checkpoint,
    Commit,
    Comparison,
    NoiseFloor,
    Plan,
    RegressionReport,
    Summary,
    TaskReport,
)

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"

_INPUTS = {
    "case_digest": "blake3:" + "c" * 64,
    "prompt_digest": "blake3:" + "1" * 64,
    "source_digest": "git:8f2e7c1",
    "wiki_digest": "none",
    "tool_policy_digest": "blake3:" + "2" * 64,
    "budget": "default",
    "harness_package": "swebench==4.0.3",
    "grader_version": "grader-1.0",
    "agent_system_digest": "blake3:" + "a" * 64,
    "environment_digest": "blake3:" + "e" * 64,
}
VECTOR_RECORDS: list[dict[str, Any]] = [
    {
        "experiment_id": "exp-1",
        "task_id": "django__django-11099",
        "repeat_index": 0,
        "inputs": _INPUTS,
        "terminal_class": "resolved",
        "envelope": {"agent": "coder", "model": "m-1"},
        "runtime_seconds": 12,
    },
    {
        "experiment_id": "exp-2",
        "task_id": "tâche/ünïcode ✓ 😀",
        "repeat_index": 3,
        "inputs": {**_INPUTS, "budget": {"turns": 50, "cost_usd": 2.5, "time_s": 1e3}},
        "terminal_class": "timeout",
        "envelope": {
            "agent": "coder",
            "agent_version": "2.4",
            "provider": "p",
            "model": "m",
            "harness_version": "h-1",
        },
        "runtime_seconds": 1800.25,
        "started_at": "2026-11-02T10:00:00+01:00",
        "finished_at": "2026-11-02T09:30:00.25Z",
        "cost_usd": 0.000123,
        "input_tokens": 120000,
        "output_tokens": 3400,
        "cached_input_tokens": 0,
        "plan_id": "plan-7",
        "labels": {"temperature": "0.7", "Zeta": '\u0001"\\'},
        "artifacts": {"patch": "blake3:" + "f" * 64},
    },
    {
        "experiment_id": "exp-3",
        "task_id": "../../x' OR '1'='1",
        "repeat_index": 1,
        "inputs": _INPUTS,
        "terminal_class": "harness_failure",
        "envelope": {},
        "runtime_seconds": 0.1,
        "cost_usd": None,
    },
]


def digest_vectors() -> list[dict[str, Any]]:
    """Return input -> canonical bytes -> digest vectors for every key of the contract."""
    vectors = []
    for given in VECTOR_RECORDS:
        record = record_json(AttemptRecord.model_validate_json(orjson.dumps(given)))
        cohort_input = {"scheme": COHORT_SCHEME, "task_id": record["task_id"], **record["inputs"]}
        cohort_bytes = canonical_json(cohort_input)
        cohort_key = digest_bytes(cohort_bytes)
        identity_input = {name: record[name] for name in IDENTITY_FIELDS if name != "cohort_key"}
        identity_input["cohort_key"] = cohort_key
        identity_bytes = canonical_json(identity_input)
        with_identity = {**record, "terminal_identity": digest_bytes(identity_bytes)}
        vectors.append(
            {
                "input": given,
                "record_with_defaults": record,
                "cohort": {"canonical": cohort_bytes.decode(), "cohort_key": cohort_key},
                "terminal_identity": {
                    "canonical": identity_bytes.decode(),
                    "digest": digest_bytes(identity_bytes),
                },
                "attempt_id": {
                    "canonical": canonical_json(record).decode(),
                    "digest": digest_bytes(canonical_json(record)),
                },
                "attempt_id_with_terminal_identity": digest_bytes(canonical_json(with_identity)),
            }
        )
    return vectors


def contract_files() -> dict[str, bytes]:
    """Return file name -> bytes of every generated contract file."""
    documents = {
        "attempt.schema.json": AttemptRecord.model_json_schema(),
        "commit.schema.json": Commit.model_json_schema(by_alias=True),
        "checkpoint.schema.json": Checkpoint.model_json_schema(by_alias=True),
        "report.schema.json": TaskReport.model_json_schema(by_alias=True),
        "comparison.schema.json": Comparison.model_json_schema(by_alias=True),
        "summary.schema.json": Summary.model_json_schema(by_alias=True),
        "noise.schema.json": NoiseFloor.model_json_schema(by_alias=True),
        "regressions.schema.json": RegressionReport.model_json_schema(by_alias=True),
        "plan.schema.json": Plan.model_json_schema(by_alias=True),
        "digest-vectors.json": {
            "schema": "registry.digest-vectors/1",
            "vectors": digest_vectors(),
        },
    }
    options = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
    return {name: orjson.dumps(doc, option=options) + b"\n" for name, doc in documents.items()}


def write_contract_files(directory: Path = SCHEMA_DIR) -> list[Path]:
    """Write the generated contract files into `directory`; return their paths."""
    written = []
    for name, data in contract_files().items():
        path = directory / name
        path.write_bytes(data)
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write_contract_files():
        print(path)
