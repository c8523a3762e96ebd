"""`registry report`: grouping, numbers, provenance, golden output, layers, determinism."""

from __future__ import annotations

import html
import json
import random
import re
from pathlib import Path

import pytest

import registry
from registry.analysis.report import read_task_rows, report_document, report_from_rows
from tests.conftest import FIXTURES, make_record, tree_snapshot, write_jsonl

TASK = "astropy__astropy-12907"  # two experiments, a regrade, a model swap, legacy records
GOLDEN = FIXTURES / "expected"
FORMATS = {"json": "json", "table": "txt", "markdown": "md", "html": "html"}
REFERENCE = json.loads((Path(__file__).parent / "data" / "statistics-reference.json").read_text())


def _normalise(text: str, root: Path) -> str:
    """Replace commit digests (they include ingest time) with stable placeholders."""
    for entry in registry.read_ledger(registry.open_store(root)):
        text = text.replace(entry.digest, f"<commit-{entry.seq}>")
    return text


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_golden_output(fmt, invoke, loaded_root, request):
    result = invoke("report", "--task", TASK, "--format", fmt)
    assert result.exit_code == 0, result.output
    text = result.stdout if fmt in ("json", "html") else result.stdout.rsplit("layer ", 1)[0]
    text = _normalise(text, loaded_root)
    golden = GOLDEN / f"report-{TASK}.{FORMATS[fmt]}"
    if request.config.getoption("--update-golden"):
        golden.write_text(text)
    assert text == golden.read_text(), f"{golden} differs; rerun with --update-golden to accept"


def _report(root: Path, task: str = TASK) -> dict:
    return report_document(registry.build_report(registry.open_store(root), task))


def test_pools_experiments_and_separates_regrade_swap_and_legacy(loaded_root):
    report = _report(loaded_root)
    cohorts = {
        c["inputs"]["grader_version"] + "/" + c["inputs"]["agent_system_digest"][7:9]: c
        for c in report["cohorts"]
    }
    base = cohorts["grader-1.0/aa"]
    systems = {(s["system"]["provider"], s["system"]["model"]): s for s in base["systems"]}
    pooled = systems[("anthropic", "claude-sonnet-4")]
    assert [p["experiment_id"] for p in pooled["provenance"]] == [
        "exp-baseline-1102",
        "exp-baseline-1109",
    ]
    assert sum(p["attempts"] for p in pooled["provenance"]) == pooled["attempts"] == 8
    swapped = systems[("anthropic", "claude-sonnet-4-1")]
    assert swapped["attempts"] == 2 and "small_sample" in swapped["flags"]
    legacy = systems[("unobserved", "claude-sonnet-4")]
    assert "unobserved_provider" in legacy["flags"]
    assert [p["experiment_id"] for p in legacy["provenance"]] == ["exp-legacy-1003"]
    regrade = cohorts["grader-1.1/aa"]
    assert regrade["regrades"] == [base["cohort_key"]]
    regraded = regrade["systems"][0]
    assert len(regraded["derived_from"]) == regraded["attempts"] == 5
    original_ids = {
        r["attempt_id"]
        for r in read_task_rows(registry.open_store(loaded_root), TASK)
        if r["cohort_key"] == base["cohort_key"]
    }
    assert set(regraded["derived_from"]) <= original_ids
    assert len(report["cohorts"]) == 3  # baseline, regrade, candidate system
    assert report["snapshot"]["attempts"] == sum(
        s["attempts"] for c in report["cohorts"] for s in c["systems"]
    )


def _records_from_case(case: dict, task: str) -> list[dict]:
    classes = {"resolved": "resolved", "unresolved": "model_failure", "invalid": "harness_failure"}
    return [
        make_record(
            task_id=task,
            repeat_index=i,
            terminal_class=classes[a["outcome"]],
            runtime_seconds=a["runtime_s"],
            finished_at=None,
        )
        for i, a in enumerate(case["input"]["attempts"])
    ]


@pytest.mark.parametrize("case_id", ["task-report-example", "task-report-all-invalid"])
def test_report_reproduces_reference_case(case_id, root, tmp_path):
    case = next(c for c in REFERENCE["cases"] if c["id"] == case_id)
    registry.ingest(root, [str(write_jsonl(tmp_path / "x.jsonl", _records_from_case(case, "t")))])
    (system,) = _report(root, "t")["cohorts"][0]["systems"]
    want, tol = case["expected"], case["abs_tol"]
    assert (system["attempts"], system["valid"], system["resolved"], system["invalid"]) == (
        want["attempts_total"],
        want["valid"],
        want["resolved"],
        want["invalid"],
    )
    pairs = [
        (system["resolved_rate"]["estimate"], want["resolved_rate"]),
        (system["resolved_rate"]["low"], want["wilson_low"]),
        (system["resolved_rate"]["high"], want["wilson_high"]),
        (system["invalid_rate"]["estimate"], want["invalid_rate"]),
        (system["consistency"], want["repeat_consistency"]),
        (system["runtime_seconds"]["mean"], want["runtime_mean"]),
        (system["runtime_seconds"]["median"], want["runtime_median"]),
        (system["runtime_seconds"]["p95"], want["runtime_p95"]),
    ]
    for k in want["pass_at_k"]:
        if k in system["pass_at_k"]:
            pairs.append((system["pass_at_k"][k], want["pass_at_k"][k]))
            pairs.append((system["pass_hat_k"][k], want["pass_hat_k"][k]))
    for got, expected in pairs:
        assert (got is None) == (expected is None)
        if expected is not None:
            assert abs(got - expected) <= tol


def test_all_invalid_task_reports_nulls_with_reasons(invoke, root, tmp_path):
    records = [
        make_record(task_id="broken", repeat_index=i, terminal_class=c)
        for i, c in enumerate(["harness_failure", "environment_failure", "cancelled"])
    ]
    registry.ingest(root, [str(write_jsonl(tmp_path / "x.jsonl", records))])
    (system,) = _report(root, "broken")["cohorts"][0]["systems"]
    assert system["invalid_rate"]["estimate"] == 1.0
    assert system["resolved_rate"] == {"estimate": None, "low": None, "high": None}
    assert system["consistency"] is None
    assert system["pass_at_k"] == {"1": None} and system["pass_hat_k"] == {"1": None}
    for name in ("resolved_rate", "consistency", "pass_at_k"):
        assert system["undefined"][name].startswith("0 valid attempts")
    assert "all_invalid" in system["flags"]
    table = invoke("report", "--task", "broken").stdout
    assert "resolved     0/0 n/a (0 valid attempts" in table
    assert "invalid      3/3 100.0%" in table


def test_unknown_cost_is_null_never_zero(root, tmp_path):
    records = [make_record(task_id="c", repeat_index=i, cost_usd=None) for i in range(3)]
    registry.ingest(root, [str(write_jsonl(tmp_path / "x.jsonl", records))])
    (system,) = _report(root, "c")["cohorts"][0]["systems"]
    assert system["cost_usd"] == {"total": None, "mean": None, "known": 0, "unavailable": 3}
    assert "cost_usd" in system["undefined"]


def test_report_twice_is_one_layer_and_new_evidence_adds_a_version(invoke, loaded_root, tmp_path):
    first = invoke("report", "--task", TASK, "--format", "json")
    assert first.exit_code == 0
    store = registry.open_store(loaded_root)
    (version,) = registry.list_layers(store, "report", TASK)
    stored = store.resolve(version.path).read_bytes()
    commits = len(registry.read_ledger(store))
    again = invoke("report", "--task", TASK, "--format", "json")
    assert again.stdout == first.stdout and "unchanged evidence" in again.stderr
    assert len(registry.read_ledger(store)) == commits
    assert len(registry.list_layers(store, "report", TASK)) == 1

    extra = make_record(task_id=TASK, experiment_id="exp-more", repeat_index=9)
    registry.ingest(loaded_root, [str(write_jsonl(tmp_path / "more.jsonl", [extra]))])
    assert invoke("report", "--task", TASK, "--format", "json").exit_code == 0
    versions = registry.list_layers(store, "report", TASK)
    assert len(versions) == 2 and versions[0].digest == version.digest
    assert store.resolve(version.path).read_bytes() == stored
    listing = json.loads(invoke("reports", "--task", TASK, "--format", "json").stdout)
    assert [r["digest"] for r in listing] == [versions[1].digest, versions[0].digest]
    assert listing[0]["attempts"] == listing[1]["attempts"] + 1
    shown = invoke("reports", "show", version.digest[7:19], "--format", "json")
    assert json.loads(shown.stdout) == json.loads(first.stdout)


def test_report_bytes_do_not_depend_on_row_order(loaded_root):
    rows = read_task_rows(registry.open_store(loaded_root), TASK)
    reference = registry.canonical_json(report_document(report_from_rows(TASK, rows)))
    rng = random.Random(3)
    for _ in range(20):
        shuffled = rows[:]
        rng.shuffle(shuffled)
        assert (
            registry.canonical_json(report_document(report_from_rows(TASK, shuffled))) == reference
        )


def test_report_ignores_other_tasks_and_ledger_head(loaded_root, tmp_path):
    before = registry.canonical_json(_report(loaded_root))
    other = make_record(task_id="another-task")
    registry.ingest(loaded_root, [str(write_jsonl(tmp_path / "o.jsonl", [other]))])
    registry.record_report(registry.open_store(loaded_root), "another-task")
    assert registry.canonical_json(_report(loaded_root)) == before


HOSTILE = ["../../x", "x' OR '1'='1", 'tâche "ünï" ✓ <b>&amp;</b>']


@pytest.mark.parametrize("task", HOSTILE, ids=["traversal", "sql-quote", "unicode-html"])
def test_hostile_task_id_reports_inside_root(task, invoke, root, tmp_path):
    records = [make_record(task_id=task, repeat_index=i) for i in range(3)]
    registry.ingest(root, [str(write_jsonl(tmp_path / "h.jsonl", records))])
    outside = sorted(p.name for p in tmp_path.iterdir())
    for fmt in FORMATS:
        result = invoke("report", "--task", task, "--format", fmt)
        assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == outside
    page = invoke("report", "--task", task, "--format", "html").stdout
    assert "<b>" not in page and html.escape(task) in page  # escaped, never raw markup
    report = _report(root, task)
    assert report["task_id"] == task and report["cohorts"][0]["systems"][0]["attempts"] == 3
    for path in root.rglob("*"):
        assert "x'" not in path.name and ".." not in path.relative_to(root).parts


def test_unknown_task_is_a_clear_error(invoke, loaded_root):
    before = tree_snapshot(loaded_root)
    result = invoke("report", "--task", "no-such-task")
    assert result.exit_code == 1
    assert result.stderr == (
        'Error: no attempts for task "no-such-task" in the registry; list tasks with: '
        'registry sql "SELECT DISTINCT task_id FROM attempts"\n'
    )
    assert tree_snapshot(loaded_root) == before


def test_report_reads_only_the_tasks_segments(loaded_root, monkeypatch):
    import registry.evidence.query as query

    opened: list[list[str]] = []
    original = query.connect

    def spy(store, task_ids=None, **options):
        con = original(store, task_ids, **options)
        opened.append(
            re.findall(
                r"cohort=[0-9a-f]+",
                str(con.execute("SELECT list(path) FROM _segments").fetchone()[0]),
            )
        )
        return con

    monkeypatch.setattr("registry.evidence.selection.connect", spy)
    registry.build_report(registry.open_store(loaded_root), TASK)
    segments = [
        s for e in registry.read_ledger(registry.open_store(loaded_root)) for s in e.commit.segments
    ]
    holding = {"cohort=" + s.cohort_key[7:] for s in segments if TASK in s.task_ids}
    assert set(opened[0]) == holding and len(holding) < len(segments)


def test_reports_root_option_reaches_show_and_missing_layer_is_one_line(
    runner, loaded_root, tmp_path, monkeypatch
):
    from registry_cli.main import app

    monkeypatch.chdir(tmp_path)  # no ./.registry here
    report = registry.record_report(registry.open_store(loaded_root), TASK)[1]
    shown = runner.invoke(app, ["reports", "--root", str(loaded_root), "show", report.digest])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["task_id"] == TASK
    path = registry.open_store(loaded_root).resolve(report.path)
    path.chmod(0o644)
    path.unlink()
    listing = runner.invoke(app, ["reports", "--root", str(loaded_root)])
    assert listing.exit_code == 1
    assert listing.stderr == f"Error: layer {report.path} is missing; run 'registry verify'\n"


@pytest.mark.parametrize("fmt", ["markdown", "html"])
def test_markdown_and_html_show_every_outcome_class(fmt, invoke, loaded_root):
    result = invoke("report", "--task", TASK, "--format", fmt)
    assert result.exit_code == 0
    for name in (
        "resolved",
        "model_failure",
        "safety_failure",
        "timeout",
        "harness_failure",
        "environment_failure",
        "grader_failure",
        "invalid_case",
        "cancelled",
    ):
        assert name in result.stdout
