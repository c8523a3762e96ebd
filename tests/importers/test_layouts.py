"""terminal-bench leaderboard layouts, observed identity a source lacks (`--envelope`)."""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest

import registry
from registry.importers import EnvelopeConflictError, ImportContext, parse_envelope
from registry.importers.terminal_bench import IMPORTER
from tests.conftest import FIXTURES, make_record, tree_snapshot, write_jsonl

HERE = FIXTURES / "importers" / "terminal-bench"
BOARD = HERE / "leaderboard"
SUBMISSIONS = BOARD / "results" / "terminal-bench-core@0.1.1"
THREE = HERE / "three-models"
MODELS = {
    "run-opus": "claude-opus-4-1",
    "run-sonnet": "claude-sonnet-4",
    "run-haiku": "claude-3-5-haiku",
}

# experiment id -> (attempts, resolved, agent, model): what each submission's files say.
BOARD_RUNS = {
    "2025-08-01__10-00-00": (3, 1, "terminus", "gpt-4.1"),  # tb run folder
    "2025-08-02__10-00-00": (3, 1, None, None),  # run-level list and trial folders only
    "2025-08-02__14-00-00": (3, 2, None, None),
    "2025-08-03__10-00-00": (3, 1, None, None),  # trial folders only
    "2025-08-04__10-00-00": (3, 1, None, None),  # bare *_results.json
    "2025-08-04__14-00-00": (3, 1, None, None),  # bare *__results.json
    "2025-08-05__10-00-00": (3, 2, "mini-swe-agent", "claude-sonnet-4-20250514"),
    "2025-08-05__09-00-00": (3, 1, "mini-swe-agent", "claude-sonnet-4-20250514"),  # 2 copies
}


def _rows(invoke, query: str = "SELECT * FROM attempts ORDER BY attempt_id") -> list[dict]:
    result = invoke("sql", query, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _runs(invoke) -> dict[str, tuple]:
    rows = _rows(
        invoke,
        "SELECT experiment_id, count(*) AS n, sum((terminal_class = 'resolved')::INT) AS r,"
        " any_value(envelope.agent) AS agent, any_value(envelope.model) AS model,"
        " count(DISTINCT envelope.model) AS models FROM attempts GROUP BY experiment_id",
    )
    return {r["experiment_id"]: (r["n"], r["r"], r["agent"], r["model"]) for r in rows}


@pytest.mark.parametrize("fmt", [None, "terminal-bench"])
def test_leaderboard_tree_imports_every_run_once(invoke, fmt):
    args = ["ingest", str(BOARD / "results"), *(["--format", fmt] if fmt else [])]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert "read 24 attempts: 24 new, 0 already present" in result.stdout
    assert _runs(invoke) == BOARD_RUNS
    warnings = result.stderr
    notes = SUBMISSIONS / "20250804_goose_claude-4-opus" / "notes_results.json"
    assert f"warning: {notes}: neither a run's trial list (BenchmarkResults) nor a trial " in (
        warnings
    )
    nested = SUBMISSIONS / "20250805_mini_claude-4-sonnet" / "2025-08-05__10-00-00"
    assert f"warning: {nested / '2025-08-05__09-00-00'}: same terminal-bench run as " in warnings
    folders_only = SUBMISSIONS / "20250803_codex_o3" / "2025-08-03__10-00-00"
    assert f"{folders_only}: no run-level results.json; 3 trial(s) read" in warnings
    for name in ("run1_2025-08-02__10-00-00", "run2_2025-08-02__14-00-00"):
        assert f"{SUBMISSIONS / '20250802_cursor_claude-4-sonnet' / name}: no run_metadata" in (
            warnings
        )
    line = next(w for w in warnings.splitlines() if "record no model" in w)
    assert line.startswith("warning: 15 attempts in 5 runs record no model (model unobserved): ")
    for run, (_, _, _, model) in BOARD_RUNS.items():
        assert (run in line) == (model is None)


def test_leaderboard_tree_is_detected_but_mixed_data_is_not(tmp_path):
    assert IMPORTER.detect(BOARD) and IMPORTER.detect(BOARD / "results")
    bare = SUBMISSIONS / "20250804_goose_claude-4-opus" / "2025-08-04__10-00-00_results.json"
    assert IMPORTER.detect(bare)
    assert not IMPORTER.detect(SUBMISSIONS / "20250804_goose_claude-4-opus" / "notes_results.json")
    mixed = tmp_path / "mixed"
    shutil.copytree(SUBMISSIONS / "20250803_codex_o3", mixed / "codex")
    assert IMPORTER.detect(mixed)
    write_jsonl(mixed / "attempts.jsonl", [make_record()])
    assert not IMPORTER.detect(mixed)  # native records are never swallowed by an importer


def test_each_layout_imports_on_its_own(invoke):
    cases = {
        SUBMISSIONS / "20250802_cursor_claude-4-sonnet": 6,
        SUBMISSIONS / "20250803_codex_o3" / "2025-08-03__10-00-00": 3,
        SUBMISSIONS / "20250804_goose_claude-4-opus" / "2025-08-04__14-00-00__results.json": 3,
        SUBMISSIONS / "20250805_mini_claude-4-sonnet": 6,
    }
    for path, attempts in cases.items():
        result = invoke("ingest", str(path))
        assert result.exit_code == 0, result.output
        assert f"read {attempts} attempts: {attempts} new" in result.stdout, path


def test_a_copy_without_metadata_joins_its_run_and_takes_its_identity(invoke, tmp_path):
    run = SUBMISSIONS / "20250801_terminus_gpt-4.1" / "run-1"
    tree = tmp_path / "tree"
    shutil.copytree(run, tree / "run-1")
    shutil.copyfile(run / "results.json", tree / "2025-08-01__10-00-00_results.json")
    result = invoke("ingest", str(tree))
    assert result.exit_code == 0, result.output
    assert "read 3 attempts: 3 new" in result.stdout
    assert "imported once" in result.stderr and "record no model" not in result.stderr
    assert {r["envelope"]["agent"] for r in _rows(invoke)} == {"terminus"}


def test_runs_that_only_share_a_run_id_stay_apart(tmp_path):
    board = SUBMISSIONS / "20250802_cursor_claude-4-sonnet" / "run1_2025-08-02__10-00-00"
    tree = tmp_path / "tree"
    shutil.copytree(board, tree / "a")
    document = json.loads((board / "results.json").read_text())
    for trial in document["results"]:
        trial["id"] = trial["id"][:-4] + "ffff"  # another run, same timestamp
    (tree / "b_results.json").write_text(json.dumps(document))
    context = ImportContext()
    records = [record for _, record in IMPORTER.read(tree, context)]
    assert len(records) == 6
    assert not any("imported once" in w for w in context.warnings)


def test_three_models_warn_and_never_become_one_system_with_envelope(invoke):
    result = invoke("ingest", str(THREE))
    assert result.exit_code == 0, result.output
    line = next(w for w in result.stderr.splitlines() if "record no model" in w)
    assert line == (
        "warning: 9 attempts in 3 runs record no model (model unobserved): "
        "2025-08-10__10-00-00, 2025-08-11__10-00-00, 2025-08-12__10-00-00; they are never "
        "pooled across runs; supply it with --envelope model=NAME"
    )
    assert {r["envelope"]["model"] for r in _rows(invoke)} == {None}


def test_envelope_per_run_makes_three_systems(invoke):
    for run, model in MODELS.items():
        result = invoke(
            "ingest",
            str(THREE / run),
            "--envelope",
            f"model={model}",
            "--envelope",
            "provider=anthropic",
        )
        assert result.exit_code == 0, result.output
        assert "record no model" not in result.stderr
    rows = _rows(invoke)
    systems = {
        (r["envelope"]["agent"], r["envelope"]["provider"], r["envelope"]["model"]) for r in rows
    }
    assert systems == {("claude-code", "anthropic", m) for m in MODELS.values()}
    assert all(r["terminal_identity"] for r in rows)
    check = invoke("verify")
    assert check.exit_code == 0, check.output


def test_envelope_never_overrides_what_the_source_records(invoke, root):
    run = SUBMISSIONS / "20250801_terminus_gpt-4.1" / "run-1"
    same = invoke(
        "ingest", str(run), "--envelope", "model=gpt-4.1", "--envelope", "agent_version=1.2"
    )
    assert same.exit_code == 0, same.output
    assert {r["envelope"]["agent_version"] for r in _rows(invoke)} == {"1.2"}
    before = tree_snapshot(root)
    other = invoke("ingest", str(run), "--envelope", "model=gpt-5")
    assert other.exit_code == 1
    assert other.stderr.count("\n") == 1
    assert "field 'envelope.model': the source records 'gpt-4.1', not 'gpt-5'" in other.stderr
    assert tree_snapshot(root) == before


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        (["modle=x"], "unknown key 'modle'; valid keys: agent, agent_version, provider, model"),
        (["model"], "'model' is not KEY=VALUE"),
        (["model="], "empty value"),
        (["model=a", "model=b"], "given twice"),
    ],
)
def test_bad_envelope_pairs_are_one_line_errors(invoke, pairs, message):
    args = [a for pair in pairs for a in ("--envelope", pair)]
    result = invoke("ingest", str(THREE / "run-opus"), *args)
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: --envelope") and message in result.stderr
    assert result.stderr.count("\n") == 1
    with pytest.raises(registry.InputFormatError):
        parse_envelope(pairs)


def test_envelope_fills_native_records_whose_field_is_null(tmp_path, root):
    envelope = {
        "agent": "coder",
        "agent_version": None,
        "provider": None,
        "model": None,
        "harness_version": None,
    }
    legacy = make_record(with_identity=False, envelope=envelope)
    bound = make_record(experiment_id="exp-2", envelope=envelope)
    path = write_jsonl(tmp_path / "a.jsonl", [legacy])
    result = registry.ingest(root, [str(path)], envelope=["model=m-9"])
    assert result.new == 1 and not any("record no model" in w for w in result.warnings)
    (stored,) = registry.run_query(registry.open_store(root), "SELECT envelope FROM attempts").rows
    assert stored[0]["model"] == "m-9"
    path = write_jsonl(tmp_path / "b.jsonl", [bound])
    with pytest.raises(registry.InvalidRecordError, match="cannot fill envelope.model"):
        registry.ingest(root, [str(path)], envelope=["model=m-9"])
    with pytest.raises(EnvelopeConflictError):
        registry.ingest(root, [str(path)], envelope=["agent=other"])
    warned = registry.ingest(tmp_path / "other", [str(path)])
    assert any(w.startswith("1 attempt in 1 run record no model") for w in warned.warnings)


def test_layout_fixture_is_what_generate_layouts_py_writes(tmp_path):
    spec = importlib.util.spec_from_file_location("tb_layouts", HERE / "generate_layouts.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(tmp_path)
    for name in ("leaderboard", "three-models"):
        committed, written = HERE / name, tmp_path / name
        files = sorted(p.relative_to(committed) for p in committed.rglob("*"))
        assert files == sorted(p.relative_to(written) for p in written.rglob("*"))
        for rel in files:
            if (committed / rel).is_file():
                assert (committed / rel).read_bytes() == (written / rel).read_bytes(), rel
