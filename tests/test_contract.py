"""The committed contract files and sample must be what the code generates."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from registry.contract import SCHEMA_DIR, contract_files
from registry.storage.canonical import canonical_json_reference
from registry.storage.digest import digest_bytes
from tests.conftest import FIXTURES, QUICKSTART


@pytest.mark.parametrize("name", sorted(contract_files()))
def test_committed_contract_file_matches_models(name):
    committed = (SCHEMA_DIR / name).read_bytes()
    assert committed == contract_files()[name], (
        f"schemas/{name} drifted from the models; run `python -m registry.contract`"
    )


def test_vectors_agree_with_reference_canonicalisation():
    vectors = json.loads((SCHEMA_DIR / "digest-vectors.json").read_text())["vectors"]
    assert len(vectors) >= 3
    for vector in vectors:
        record = vector["record_with_defaults"]
        assert canonical_json_reference(record).decode() == vector["attempt_id"]["canonical"]
        assert digest_bytes(canonical_json_reference(record)) == vector["attempt_id"]["digest"]
        cohort = json.loads(vector["cohort"]["canonical"])
        assert cohort["scheme"] == "registry.cohort/1"
        assert digest_bytes(canonical_json_reference(cohort)) == vector["cohort"]["cohort_key"]
        identity = json.loads(vector["terminal_identity"]["canonical"])
        assert identity["cohort_key"] == vector["cohort"]["cohort_key"]
        assert sorted(identity) == [
            "cohort_key",
            "envelope",
            "experiment_id",
            "repeat_index",
            "task_id",
            "terminal_class",
        ]


def test_json_schema_rejects_unknown_fields():
    schema = json.loads((SCHEMA_DIR / "attempt.schema.json").read_text())
    assert schema["additionalProperties"] is False
    assert len(schema["properties"]["terminal_class"]["$ref"]) > 0
    classes = schema["$defs"]["TerminalClass"]["enum"]
    assert len(classes) == 9


def test_quickstart_sample_is_what_the_generator_writes(tmp_path: Path):
    code = (
        "import runpy, sys, pathlib; "
        f"m = runpy.run_path({str(FIXTURES / 'generate_quickstart.py')!r}); "
        "print('\\n'.join(__import__('json').dumps(r, sort_keys=True) for r in m['generate']()))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == QUICKSTART.read_text()
