"""One evidence rule, applied the same way by report, compare, summary, noise and the views."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

import registry
from registry import attempt_id_of, cohort_key_of, terminal_identity_of
from registry_schemas import AttemptRecord
from tests.conftest import INPUTS, make_record, tree_snapshot, write_jsonl

SAMPLES_SQL = (
    "SELECT task_id, cohort_key, configuration_digest, system, run, attempts, valid, resolved,"
    " inputs.agent_system_digest AS agent_system, inputs.grader_version AS grader"
    " FROM samples ORDER BY task_id, cohort_key, attempts"
)


def _samples(store: registry.Store) -> list[dict]:
    result = registry.run_query(store, SAMPLES_SQL)
    return [dict(zip(result.columns, row, strict=True)) for row in result.rows]


def _selector(sample: dict) -> str:
    system = sample["system"]
    terms = [f"agent_system={sample['agent_system'][7:]}", f"grader_version={sample['grader']}"]
    terms += [f"{k}={v}" for k, v in system.items() if v is not None]
    return ",".join(terms)


def _counts(item) -> tuple[int, int, int]:
    return (item.attempts, item.valid, item.resolved)


def test_every_command_agrees_with_the_samples_view(loaded_root):
    store = registry.open_store(loaded_root)
    samples = _samples(store)
    by_sample = {(s["task_id"], s["cohort_key"], tuple(s["system"].values())): s for s in samples}
    # report: one entry per task x cohort x observed system, same counts
    seen = 0
    for task in sorted({s["task_id"] for s in samples}):
        report = registry.build_report(store, task)
        for cohort in report.cohorts:
            for system in cohort.systems:
                key = (task, cohort.cohort_key, tuple(system.system.model_dump().values()))
                sample = by_sample[key]
                assert _counts(system) == (sample["attempts"], sample["valid"], sample["resolved"])
                seen += 1
    assert seen == len(samples)
    # summary: one row per suite unit, the sum of its samples
    units: dict[tuple, list[dict]] = defaultdict(list)
    for s in samples:
        units[(s["configuration_digest"], tuple(s["system"].values()))].append(s)
    summary = registry.summarize(store)
    assert len(summary.systems) == len(units)
    for row in summary.systems:
        members = units[(row.configuration_digest, tuple(row.system.values()))]
        assert row.tasks == len(members)
        assert (row.attempts, row.valid, row.resolved) == tuple(
            sum(m[k] for m in members) for k in ("attempts", "valid", "resolved")
        )
    # noise: a selector naming one unit sees exactly its samples' per-task counts
    for members in units.values():
        if not any(m["valid"] for m in members):
            continue
        floor = registry.noise_floor(
            store, registry.parse_selector(_selector(members[0])), simulations=200
        )
        assert floor.counts == {
            m["task_id"]: [m["resolved"], m["valid"]] for m in members if m["valid"]
        }
    # compare: the paired per-task arm counts are the samples of each arm's unit
    base = next(m for m in samples if m["system"]["model"] == "claude-sonnet-4-1")
    base = next(
        m
        for m in samples
        if m["agent_system"] == base["agent_system"]
        and m["system"]["model"] == "claude-sonnet-4"
        and m["system"]["provider"] == "anthropic"
        and m["grader"] == "grader-1.0"
    )
    cand = next(m for m in samples if m["agent_system"] != base["agent_system"])
    comparison = registry.compare(
        store,
        registry.parse_selector(_selector(base)),
        [registry.parse_selector(_selector(cand))],
    )
    (c,) = comparison.comparisons
    for paired in c.tasks:
        for arm, sample in (("baseline", base), ("candidate", cand)):
            expected = next(
                m
                for m in samples
                if m["task_id"] == paired.task_id and _selector(m) == _selector(sample)
            )
            counts = getattr(paired, arm)
            assert (counts.attempts, counts.valid, counts.resolved) == (
                expected["attempts"],
                expected["valid"],
                expected["resolved"],
            )


def test_a_model_swap_is_never_pooled_by_any_command(loaded_root):
    store = registry.open_store(loaded_root)
    selector = registry.parse_selector("experiment=exp-baseline-1109")
    report = registry.build_report(store, "astropy__astropy-12907")
    models = {
        s.system.model
        for c in report.cohorts
        for s in c.systems
        if any(p.experiment_id == "exp-baseline-1109" for p in s.provenance)
    }
    assert models == {"claude-sonnet-4", "claude-sonnet-4-1"}
    summary = registry.summarize(store, system=selector)
    assert sorted(s.system["model"] for s in summary.systems) == [
        "claude-sonnet-4",
        "claude-sonnet-4-1",
    ]
    with pytest.raises(registry.SelectorError, match="2 systems or configurations"):
        registry.noise_floor(store, selector, simulations=100)
    with pytest.raises(registry.SelectorError, match="spans 2 observed systems"):
        registry.compare(store, selector, [registry.parse_selector("agent_system=bbbb")])
    rows = registry.run_query(
        store,
        "SELECT count(*) FROM samples WHERE list_contains(experiments, 'exp-baseline-1109')"
        " AND task_id = 'astropy__astropy-12907'",
    ).rows
    assert rows[0][0] == 2


def test_a_regrade_is_never_pooled_with_what_it_regraded(loaded_root):
    store = registry.open_store(loaded_root)
    selector = registry.parse_selector("agent_system=aaaa,provider=anthropic,model=claude-sonnet-4")
    report = registry.build_report(store, "astropy__astropy-12907")
    graders = {c.inputs["grader_version"] for c in report.cohorts}
    assert graders == {"grader-1.0", "grader-1.1"}
    regrade = next(c for c in report.cohorts if c.inputs["grader_version"] == "grader-1.1")
    assert regrade.regrades  # names the cohort it re-grades
    summary = registry.summarize(store, system=selector)
    assert sorted(s.configuration["grader_version"] for s in summary.systems) == [
        "grader-1.0",
        "grader-1.1",
    ]
    with pytest.raises(registry.SelectorError, match="they differ in grader_version"):
        registry.noise_floor(store, selector, simulations=100)
    floor = registry.noise_floor(
        store,
        registry.parse_selector(selector.text + ",grader_version=grader-1.0"),
        simulations=100,
    )
    assert floor.tasks == 6  # not 8: the regraded generation adds no tasks
    rows = registry.run_query(
        store,
        "SELECT inputs.grader_version, lineage_depth, count(*) FROM samples"
        " WHERE system.model = 'claude-sonnet-4' AND system.provider = 'anthropic'"
        " AND inputs.agent_system_digest LIKE 'blake3:aaaa%' GROUP BY ALL ORDER BY ALL",
    ).rows
    assert rows == [("grader-1.0", 0, 6), ("grader-1.1", 1, 2)]


def test_generation_orders_a_regrade_after_what_it_regraded(loaded_root):
    store = registry.open_store(loaded_root)
    rows = registry.run_query(
        store,
        "SELECT l.attempt_id, a.started_at = o.started_at, a.generation >= o.generation,"
        " a.lineage_depth - o.lineage_depth, o.regraded"
        " FROM lineage l JOIN attempts a USING (attempt_id)"
        " JOIN attempts o ON o.attempt_id = l.derived_from",
    ).rows
    assert len(rows) == 10
    for _, same_start, later, depth, regraded in rows:
        assert same_start and later and depth == 1 and regraded
    ordered = registry.run_query(
        store,
        "SELECT lineage_depth FROM attempts WHERE task_id = 'astropy__astropy-12907'"
        " ORDER BY generation, lineage_depth",
    ).rows
    depths = [d for (d,) in ordered]
    assert depths == sorted(depths)


def _regrade_of(original: dict, **changes) -> dict:
    again = json.loads(json.dumps(original))
    again.update(experiment_id="regrade", **changes)
    again["derived_from"] = attempt_id_of(
        AttemptRecord.model_validate_json(json.dumps(original)).model_dump(mode="json")
    )
    return again


def _with_identity(record: dict) -> dict:
    cohort = cohort_key_of(record["task_id"], record["inputs"])
    record["terminal_identity"] = terminal_identity_of(record, cohort)
    return record


def test_a_regrade_must_name_an_attempt_that_exists(invoke, root, tmp_path):
    original = make_record()
    invoke("ingest", str(write_jsonl(tmp_path / "a.jsonl", [original])))
    before = tree_snapshot(root)
    ghost = make_record(repeat_index=1, derived_from="blake3:" + "9" * 64)
    result = invoke("ingest", str(write_jsonl(tmp_path / "b.jsonl", [ghost])))
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {tmp_path / 'b.jsonl'}:line 1: field 'derived_from': names no attempt in the "
        f"registry or in this input (blake3:{'9' * 64}); a regrade must name the attempt it "
        "re-grades\n"
    )
    assert tree_snapshot(root) == before


def test_a_regrade_must_change_the_grader_version(invoke, root, tmp_path):
    original = make_record()
    invoke("ingest", str(write_jsonl(tmp_path / "a.jsonl", [original])))
    same = _with_identity(_regrade_of(original, terminal_class="model_failure"))
    result = invoke("ingest", str(write_jsonl(tmp_path / "b.jsonl", [same])))
    assert result.exit_code == 1
    assert "field 'derived_from': a regrade needs another grader version" in result.stderr
    regraded = _regrade_of(original, terminal_class="model_failure")
    regraded["inputs"] = {**regraded["inputs"], "grader_version": "grader-2.0"}
    result = invoke("ingest", str(write_jsonl(tmp_path / "c.jsonl", [_with_identity(regraded)])))
    assert result.exit_code == 0, result.output


def test_a_regrade_in_the_same_input_as_its_original_is_accepted(invoke, tmp_path):
    original = make_record()
    regraded = _regrade_of(original)
    regraded["inputs"] = {**regraded["inputs"], "grader_version": "grader-2.0"}
    path = write_jsonl(tmp_path / "a.jsonl", [_with_identity(regraded), original])
    assert invoke("ingest", str(path)).exit_code == 0


def test_two_valid_outcomes_in_one_slot_are_refused(invoke, root, tmp_path):
    first = make_record(terminal_class="model_failure")
    invoke("ingest", str(write_jsonl(tmp_path / "a.jsonl", [first])))
    before = tree_snapshot(root)
    retry = make_record(terminal_class="resolved", runtime_seconds=30.0)
    result = invoke("ingest", str(write_jsonl(tmp_path / "b.jsonl", [retry])))
    assert result.exit_code == 1
    assert result.stderr.startswith(
        f"Error: {tmp_path / 'b.jsonl'}:line 1: field 'repeat_index': experiment 'exp-1', "
        "task 'task-1', repeat 0 already has a valid outcome for this cohort and system "
        "(attempt blake3:"
    )
    assert result.stderr.endswith(
        "a retry needs its own repeat_index, a correction a retraction (registry retract)\n"
    )
    assert tree_snapshot(root) == before
    both = [
        make_record(experiment_id="exp-2", terminal_class="resolved"),
        make_record(experiment_id="exp-2", terminal_class="timeout"),
    ]
    result = invoke("ingest", str(write_jsonl(tmp_path / "c.jsonl", both)))
    assert result.exit_code == 1 and "line 2: field 'repeat_index'" in result.stderr


def test_a_retried_infrastructure_failure_shares_its_slot(invoke, root):
    records = [make_record(terminal_class="harness_failure"), make_record(runtime_seconds=3.0)]
    assert registry.ingest(root, [str(write_jsonl(root.parent / "a.jsonl", records))]).new == 2
    (system,) = registry.build_report(registry.open_store(root), "task-1").cohorts[0].systems
    assert (system.attempts, system.valid, system.invalid, system.resolved) == (2, 1, 1, 1)


def test_conflicting_slots_stored_before_the_rule_count_neither(root, tmp_path, monkeypatch):
    from registry.evidence.admission import Admission

    monkeypatch.setattr(Admission, "admit", lambda *args, **kwargs: None)
    records = [
        make_record(terminal_class="model_failure"),
        make_record(terminal_class="resolved", runtime_seconds=30.0),
        make_record(repeat_index=1),
    ]
    registry.ingest(root, [str(write_jsonl(tmp_path / "a.jsonl", records))])
    monkeypatch.undo()
    store = registry.open_store(root)
    report = registry.build_report(store, "task-1")
    (system,) = report.cohorts[0].systems
    assert (system.attempts, system.valid, system.resolved) == (1, 1, 1)
    assert report.held_out == {"retracted": 0, "slot_conflict": 2}
    rows = registry.run_query(store, "SELECT attempts, valid FROM samples").rows
    assert rows == [(1, 1)]
    conflicts = registry.run_query(store, "SELECT count(*) FROM attempts WHERE slot_conflict").rows
    assert conflicts == [(2,)]


def test_noise_from_one_attempt_per_task_is_null_with_a_reason(root, tmp_path):
    records = [
        make_record(task_id=f"t{i}", terminal_class="resolved" if i % 2 else "model_failure")
        for i in range(10)
    ]
    registry.ingest(root, [str(write_jsonl(tmp_path / "a.jsonl", records))])
    store = registry.open_store(root)
    floor = registry.noise_floor(store, registry.parse_selector("agent=coder"))
    assert floor.expected_flips is None and floor.mdd_by_attempts is None
    assert floor.net_change is None and floor.p_move_at_least is None
    assert floor.undefined["expected_flips"].startswith("median valid attempts per task is 1;")
    (row,) = registry.summarize(store).systems
    assert row.expected_flips is None and "fewer than 3" in row.undefined["expected_flips"]


def test_noise_cli_prints_na_with_the_reason(invoke, root, tmp_path):
    records = [make_record(task_id=f"t{i}") for i in range(4)]
    registry.ingest(root, [str(write_jsonl(tmp_path / "a.jsonl", records))])
    result = invoke("noise", "--system", "agent=coder")
    assert result.exit_code == 0
    assert "expected flips between two identical single-run evaluations: n/a" in result.stdout
    assert "0.000" not in result.stdout and "[+0, +0]" not in result.stdout


def test_unobserved_models_never_pool_across_runs(root, tmp_path):
    records = []
    for run, outcome in (("run-a", "resolved"), ("run-b", "model_failure")):
        for k in range(3):
            record = make_record(experiment_id=run, repeat_index=k, terminal_class=outcome)
            record["envelope"] = {**record["envelope"], "model": None}
            records.append(_with_identity(record))
    registry.ingest(root, [str(write_jsonl(tmp_path / "a.jsonl", records))])
    store = registry.open_store(root)
    (cohort,) = registry.build_report(store, "task-1").cohorts
    assert sorted((s.run, s.resolved) for s in cohort.systems) == [("run-a", 3), ("run-b", 0)]
    assert all("model_unobserved" in s.flags for s in cohort.systems)
    assert len(registry.summarize(store).systems) == 2
    assert registry.run_query(store, "SELECT count(*) FROM samples").rows == [(2,)]


def test_stored_layers_are_readable_from_sql(loaded_root):
    store = registry.open_store(loaded_root)
    registry.record_report(store, "astropy__astropy-12907")
    registry.ingest(loaded_root, [str(_one_more(loaded_root.parent))])
    registry.record_report(store, "astropy__astropy-12907")
    rows = registry.run_query(
        store,
        "SELECT subject, commit_seq, evidence_attempts, len(systems),"
        " document->>'$.task_id' FROM reports ORDER BY commit_seq",
    ).rows
    assert [r[0] for r in rows] == ["astropy__astropy-12907"] * 2
    assert rows[1][2] == rows[0][2] + 1 and rows[0][4] == "astropy__astropy-12907"


def _one_more(directory: Path) -> Path:
    record = make_record(task_id="astropy__astropy-12907", experiment_id="exp-extra")
    return write_jsonl(directory / "extra.jsonl", [record])


def test_as_of_reproduces_an_earlier_layer_byte_for_byte(loaded_root):
    store = registry.open_store(loaded_root)
    _, first, _ = registry.record_report(store, "astropy__astropy-12907")
    registry.ingest(loaded_root, [str(_one_more(loaded_root.parent))])
    _, second, _ = registry.record_report(store, "astropy__astropy-12907")
    assert second.digest != first.digest
    old = registry.build_report(store, "astropy__astropy-12907", as_of=first.commit_seq)
    stored = store.resolve(first.path).read_bytes()
    assert registry.canonical_json(registry.report_document(old)) == stored
    with pytest.raises(registry.AsOfError, match="the ledger holds commits 1..4"):
        registry.build_report(store, "astropy__astropy-12907", as_of=99)


def test_interval_macros(loaded_root):
    store = registry.open_store(loaded_root)
    rows = registry.run_query(
        store,
        "SELECT interval_below(1, 10, 10, 10), interval_above(10, 10, 1, 10),"
        " interval_below(5, 10, 6, 10), interval_above(1, 10, 10, 10)",
    ).rows
    assert rows == [(True, True, False, False)]


def test_samples_view_matches_the_report_figures(loaded_root):
    store = registry.open_store(loaded_root)
    report = registry.build_report(store, "django__django-11099")
    rows = registry.run_query(
        store,
        "SELECT cohort_key, system, resolved_low, resolved_high, consistency, runtime_median,"
        " runtime_p95, cost_known, cost_unavailable FROM samples"
        " WHERE task_id = 'django__django-11099'",
    ).rows
    figures = {(r[0], tuple(r[1].values())): r[2:] for r in rows}
    for cohort in report.cohorts:
        for s in cohort.systems:
            low, high, consistency, median, p95, known, unavailable = figures[
                (cohort.cohort_key, tuple(s.system.model_dump().values()))
            ]
            assert low == pytest.approx(s.resolved_rate.low)
            assert high == pytest.approx(s.resolved_rate.high)
            assert consistency == pytest.approx(s.consistency)
            assert median == pytest.approx(s.runtime_seconds.median)
            assert p95 == pytest.approx(s.runtime_seconds.p95)
            assert (known, unavailable) == (s.cost_usd.known, s.cost_usd.unavailable)


INPUTS_B = {**INPUTS, "agent_system_digest": "blake3:" + "b" * 64}
