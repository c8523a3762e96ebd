"""Frozen evaluation plans: freezing, status, compare under a plan, look numbers, sizing."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

import registry
from registry.analysis import planning
from registry.analysis.plans import (
    PlanError,
    find_plan,
    freeze_plan,
    list_plans,
    plan_digest,
    plan_status,
    read_plan_file,
    size_figures,
    system_rates,
    validate_plan,
)
from tests.conftest import FIXTURES

HERE = FIXTURES / "plans"
PLAN = json.loads((HERE / "plan.json").read_text())


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("generate_plans", HERE / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _frozen(root: Path, evidence: str | None = "attempts.jsonl") -> tuple[registry.Store, Any]:
    store = registry.open_store(root, create=True)
    frozen, _ = freeze_plan(store, validate_plan(PLAN))
    if evidence is not None:
        registry.ingest(root, [str(HERE / evidence)])
    return store, frozen


def _compare(store: registry.Store, frozen: Any, **kwargs: Any) -> registry.Comparison:
    spec = frozen.plan
    baseline = kwargs.pop("baseline", spec.arms.baseline)
    candidates = kwargs.pop("candidates", spec.arms.candidates)
    return registry.compare(
        store,
        registry.parse_selector(baseline),
        [registry.parse_selector(c) for c in candidates],
        kwargs.pop("scope", None),
        plan=frozen,
        resamples=kwargs.pop("resamples", 2000),
        **kwargs,
    )


def test_committed_fixture_is_what_the_generator_writes():
    module = _generator()
    assert json.loads((HERE / "plan.json").read_text()) == module.PLAN
    for name, records in (
        ("attempts.jsonl", module.complete()),
        ("incomplete.jsonl", module.incomplete()),
    ):
        lines = [json.dumps(r, sort_keys=True) for r in records]
        assert (HERE / name).read_text() == "\n".join(lines) + "\n", name
    plan_ids = {json.loads(line)["plan_id"] for line in (HERE / "attempts.jsonl").open()}
    assert plan_ids == {plan_digest(validate_plan(PLAN))}


# --- freezing --------------------------------------------------------------------------------


def test_freezing_the_same_plan_twice_is_one_object_and_one_commit(root):
    store = registry.open_store(root, create=True)
    first, created = freeze_plan(store, validate_plan(PLAN))
    again, created_again = freeze_plan(store, validate_plan(copy.deepcopy(PLAN)))
    assert (created, created_again) == (True, False)
    assert first.plan_id == again.plan_id and first.commit_seq == again.commit_seq == 1
    assert [e.commit.kind for e in registry.read_ledger(store)] == ["plan"]
    assert sorted(p.name for p in (root / "plans").iterdir()) == [
        first.plan_id.removeprefix("blake3:") + ".json"
    ]
    stored = (root / first.path).read_bytes()
    assert registry.digest_bytes(stored) == first.plan_id
    assert json.loads(stored)["tasks_digest"] == registry.digest_json(PLAN["tasks"])
    assert registry.verify(store).ok


def test_key_order_and_whitespace_do_not_change_the_digest(tmp_path):
    reordered = dict(reversed(list(PLAN.items())))
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(reordered))
    assert plan_digest(read_plan_file(path)) == plan_digest(validate_plan(PLAN))


def test_yaml_plan_freezes_to_the_same_digest(tmp_path):
    yaml = pytest.importorskip("yaml")
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(PLAN))
    assert plan_digest(read_plan_file(path)) == plan_digest(validate_plan(PLAN))


def test_an_edit_is_a_new_plan_that_names_its_predecessor(root):
    store = registry.open_store(root, create=True)
    first, _ = freeze_plan(store, validate_plan(PLAN))
    edited = {**PLAN, "attempts_per_task": 10}
    with pytest.raises(PlanError, match="already frozen as .*name it in 'replaces'"):
        freeze_plan(store, validate_plan(edited))
    second, created = freeze_plan(store, validate_plan({**edited, "replaces": first.plan_id}))
    assert created and second.plan_id != first.plan_id and second.replaces == first.plan_id
    assert [p.plan_id for p in list_plans(store)] == [first.plan_id, second.plan_id]
    # the first plan is untouched: same bytes, same digest
    assert registry.digest_bytes((root / first.path).read_bytes()) == first.plan_id
    with pytest.raises(PlanError, match="no such frozen plan"):
        freeze_plan(store, validate_plan({**edited, "name": "x", "replaces": "blake3:" + "0" * 64}))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"threshold": None}, r"threshold: missing"),
        ({"decision_rule": None}, r"decision_rule: missing"),
        ({"stop_rule": None}, r"stop_rule: missing"),
        (
            {"splits": {"reporting": ["p-03", "nope"]}},
            r"split 'reporting' names unknown task 'nope'",
        ),
        ({"arms": {"baseline": "experiment=e1", "candidates": ["model=m"]}}, r"names no system"),
        ({"arms": {"baseline": "colour=red", "candidates": ["model=m"]}}, r"unknown key 'colour'"),
        ({"held_fixed": {"task_id": "x"}}, r"held_fixed input 'task_id' is not one of"),
        ({"timeout_policy": {"timeouts": "excused"}}, r"excused timeouts need a rationale"),
        ({"primary_metric": {"name": "pass_at_k"}}, r"pass_at_k needs k"),
        ({"tasks": ["a", "a"]}, r"task 'a' is listed twice"),
    ],
)
def test_invalid_plans_are_one_line_errors(change, message):
    document = {k: v for k, v in {**PLAN, **change}.items() if v is not None}
    with pytest.raises(PlanError, match=message) as caught:
        validate_plan(document, "plan.json")
    assert "\n" not in str(caught.value) and str(caught.value).startswith("plan.json: ")


def test_a_prefix_names_a_frozen_plan_and_short_text_is_a_label(root):
    store, frozen = _frozen(root, None)
    hex_id = frozen.plan_id.removeprefix("blake3:")
    assert find_plan(store, hex_id[:8]) == frozen
    assert find_plan(store, frozen.plan_id) == frozen
    assert find_plan(store, hex_id[:7]) is None  # too short: a plain plan_id label
    assert find_plan(store, "plan-7") is None


# --- status ----------------------------------------------------------------------------------


def test_status_of_complete_evidence(root):
    store, frozen = _frozen(root)
    status = plan_status(store, frozen)
    document = status.as_json()
    assert status.complete and document["cells_planned"] == 24
    assert document["attempts_valid"] == document["attempts_planned"] == 120
    assert document["outside"] == []
    cell = next(c for c in document["cells"] if (c["task_id"], c["arm"]) == ("p-05", "baseline"))
    assert cell["invalid"] == {"environment_failure": 1} and cell["valid"] == 5


def test_status_reports_each_problem_of_the_incomplete_fixture(root):
    store, frozen = _frozen(root, "incomplete.jsonl")
    status = plan_status(store, frozen)
    document = status.as_json()
    assert not status.complete
    missing = [c for c in document["cells"] if c["missing"]]
    assert [(c["task_id"], c["arm"], c["valid"], c["missing"]) for c in missing] == [
        ("p-12", "candidate", 0, 5)
    ]
    assert document["extra_tasks"] == ["p-extra"]
    assert document["systems_not_arms"] == ["coder 9.9.9 anthropic/m-1 harness h-1.0"]
    assert document["outside_counts"] == {
        "extra_task": 1,
        "system_not_arm": 1,
        "held_fixed": 1,
        "budget": 1,
    }
    reasons = {o["task_id"]: o["reasons"] for o in document["outside"]}
    assert reasons["p-06"] == ["grader_version is grader-1.1, the plan holds grader-1.0"]
    assert reasons["p-07"] == ["runtime 1250 s above the budget of 900 s"]
    # attempts outside the plan fill no cell
    p06 = next(c for c in document["cells"] if (c["task_id"], c["arm"]) == ("p-06", "candidate"))
    assert p06["valid"] == 5


def test_excused_timeouts_fill_no_cell(root):
    store = registry.open_store(root, create=True)
    excused = {
        **PLAN,
        "name": None,
        "timeout_policy": {"timeouts": "excused", "rationale": "the sandbox clock is unreliable"},
    }
    frozen, _ = freeze_plan(store, validate_plan(excused))
    records = [
        {**json.loads(line), "plan_id": frozen.plan_id}
        for line in (HERE / "attempts.jsonl").read_text().splitlines()
    ]
    for record in records:
        record.pop("terminal_identity")
    path = root.parent / "excused.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    registry.ingest(root, [str(path)])
    cell = next(
        c
        for c in plan_status(store, frozen).as_json()["cells"]
        if (c["task_id"], c["arm"]) == ("p-04", "candidate")
    )
    assert cell == {**cell, "valid": 4, "missing": 1, "invalid": {"timeout": 1}}
    result = _compare(store, frozen)
    assert any("1 timeouts excused" in w for w in result.comparisons[0].warnings)


# --- compare under a plan --------------------------------------------------------------------


def test_compare_under_the_plan_reproduces_its_verdict_and_decision(root):
    store, frozen = _frozen(root)
    result = _compare(store, frozen)
    (item,) = result.comparisons
    assert result.plan_id == frozen.plan_id and not result.exploratory and not result.post_hoc
    assert result.scope["tasks"] == PLAN["splits"]["reporting"]
    assert result.scope["plan"] == frozen.plan_id and result.planned_tasks == 10
    assert [t.task_id for t in item.tasks] == PLAN["splits"]["reporting"]
    assert item.verdict.code == "ahead" and item.look == 1 and item.looks_allowed == 1
    assert "repeated_look" not in item.verdict.flags
    assert item.decision == "adopt" and "release gate threshold 0.5" in (item.decision_text or "")
    assert item.baseline_inputs["agent_system_digest"] == ["blake3:" + "a" * 64]
    assert item.candidate_inputs["grader_version"] == ["grader-1.0"]
    assert "task_id" not in item.candidate_inputs


def test_rerunning_the_same_comparison_is_the_same_look(root):
    store, frozen = _frozen(root)
    first, created = registry.record_comparison(store, _compare(store, frozen))
    again, created_again = registry.record_comparison(store, _compare(store, frozen))
    assert created and not created_again and first.digest == again.digest
    assert first.subject == "agent_system=aaaaaaaa vs agent_system=bbbbbbbb (look 1)"


def test_the_fourth_look_at_a_pair_is_numbered_and_flagged(root):
    store, frozen = _frozen(root)
    looks = []
    for seed in range(4):
        result = _compare(store, frozen, seed=seed)
        registry.record_comparison(store, result)
        looks.append(result.comparisons[0])
    assert [c.look for c in looks] == [1, 2, 3, 4]
    fourth = looks[-1]
    assert "repeated_look" in fourth.verdict.flags and fourth.decision == "unproven"
    assert "look 4: treat as unproven unless the plan allowed 4 looks" in fourth.verdict.notes[-1]
    assert looks[0].verdict.code == fourth.verdict.code == "ahead"
    # without a plan the same pair is another question: its looks are counted apart
    bare = registry.compare(
        store,
        registry.parse_selector(PLAN["arms"]["baseline"]),
        [registry.parse_selector(PLAN["arms"]["candidates"][0])],
        resamples=500,
    )
    assert bare.plan_id is None and bare.comparisons[0].look == 1
    assert bare.comparisons[0].decision is None


def test_a_plan_that_allows_looks_does_not_flag_them(root):
    store = registry.open_store(root, create=True)
    allowing = {**PLAN, "name": None, "stop_rule": {"max_looks": 2, "text": "two looks"}}
    frozen, _ = freeze_plan(store, validate_plan(allowing))
    registry.ingest(root, [str(HERE / "attempts.jsonl")])
    records = [
        {**json.loads(line), "plan_id": frozen.plan_id}
        for line in (HERE / "attempts.jsonl").read_text().splitlines()
    ]
    path = root.parent / "allowing.jsonl"
    path.write_text(
        "".join(
            json.dumps({k: v for k, v in r.items() if k != "terminal_identity"}) + "\n"
            for r in records
        )
    )
    registry.ingest(root, [str(path)])
    for seed, flagged in ((0, False), (1, False), (2, True)):
        result = _compare(store, frozen, seed=seed)
        registry.record_comparison(store, result)
        assert ("repeated_look" in result.comparisons[0].verdict.flags) is flagged


def test_a_post_hoc_task_subset_is_flagged(root):
    store, frozen = _frozen(root)
    favourable = ("p-03", "p-05", "p-07")
    result = _compare(store, frozen, scope=registry.Scope(tasks=favourable))
    (item,) = result.comparisons
    assert result.post_hoc and not result.exploratory
    assert "post_hoc" in item.verdict.flags and item.decision == "unproven"
    assert any(
        "post-hoc scope: 3 of the plan's 10 reporting tasks" in n for n in item.verdict.notes
    )


@pytest.mark.parametrize(
    ("kwargs", "what"),
    [
        ({"baseline": "agent_system=cccccccc"}, "arms"),
        ({"candidates": ["agent_system=aaaaaaaa", "agent_system=bbbbbbbb"]}, "arms"),
        ({"scope": registry.Scope(tasks=("p-01", "p-03"))}, "tasks"),
        ({"scope": registry.Scope(experiment="exp-plan-baseline")}, "experiment"),
        ({"timeouts": "excused"}, "timeout policy"),
        ({"vary": "grader_version"}, "held-fixed input grader_version varied"),
    ],
)
def test_an_override_is_refused_unless_exploratory(root, kwargs, what):
    store, frozen = _frozen(root)
    with pytest.raises(PlanError, match=f"overrides the plan's {what}") as caught:
        _compare(store, frozen, **copy.deepcopy(kwargs))
    assert "\n" not in str(caught.value) and "--exploratory" in str(caught.value)


def test_an_exploratory_override_is_recorded_as_such(root):
    store, frozen = _frozen(root)
    result = _compare(store, frozen, timeouts="excused", exploratory=True)
    (item,) = result.comparisons
    assert result.exploratory and result.overrides == ["timeout policy (excused)"]
    assert "exploratory" in item.verdict.flags and item.decision == "unproven"


def test_a_plan_the_verdict_table_cannot_apply_is_refused(root):
    store = registry.open_store(root, create=True)
    strict, _ = freeze_plan(store, validate_plan({**PLAN, "name": "strict", "alpha": 0.01}))
    with pytest.raises(PlanError, match="alpha 0.01; the verdict table"):
        _compare(store, strict)
    passk = {**PLAN, "name": "pass", "primary_metric": {"name": "pass_hat_k", "k": 3}}
    frozen, _ = freeze_plan(store, validate_plan(passk))
    with pytest.raises(PlanError, match="primary metric pass_hat_k"):
        _compare(store, frozen)


def test_compare_under_the_plan_skips_attempts_outside_it(root):
    store, frozen = _frozen(root, "incomplete.jsonl")
    (item,) = _compare(store, frozen).comparisons
    assert any("fall outside it" in w for w in item.warnings)
    assert "p-12" in {d.task_id for d in item.dropped}
    assert all(d.differing_inputs == [] for d in item.dropped)


def test_stored_comparison_layers_without_plan_fields_still_load():
    document = {
        "schema": "registry.comparison/1",
        "baseline": "model=a",
        "scope": {},
        "vary": "agent_system_digest",
        "snapshot": {"evidence_digest": "blake3:" + "0" * 64, "attempts": 0, "last_commit_seq": 1},
        "generator": {"name": "registry.compare", "version": "2"},
        "comparisons": [],
    }
    loaded = registry.LAYER_MODELS["comparison"].model_validate(document)
    assert loaded.plan_id is None and loaded.exploratory is False  # type: ignore[attr-defined]


# --- sizing ----------------------------------------------------------------------------------


def test_size_reproduces_the_planning_figures():
    assert size_figures(rates=(0.60, 0.65))["attempts_per_arm"] == 1471
    assert size_figures(rates=(0.60, 0.70))["attempts_per_arm"] == 356
    pairs = size_figures(discordant=0.7)
    assert pairs["discordant_pairs"] == 49 and pairs["discordant"]["exact_stable_n"] == 54
    assert round(pairs["discordant"]["crude"], 2) == 49.06
    facts = size_figures(rate=0.6, runs=5)["binomial"]
    assert round(facts["minority"], 5) == 0.31744 and round(facts["all_pass"], 5) == 0.07776
    assert round(size_figures(rate=0.9, runs=5)["binomial"]["any_failure"], 5) == 0.40951
    with pytest.raises(PlanError, match="give --rates"):
        size_figures()
    with pytest.raises(PlanError, match="p1 and p2 must differ"):
        size_figures(rates=(0.6, 0.6))


def test_mdd_what_if_matches_the_noise_floor_of_the_same_system(root):
    store, _ = _frozen(root)
    selector = registry.parse_selector("agent_system=aaaaaaaa")
    floor = registry.noise_floor(store, selector, simulations=10, attempts=(1, 2, 5, 10))
    rates = system_rates(store, selector)
    assert rates == floor.rates
    figures = size_figures(measured=rates, attempts=[1, 2, 5, 10])
    by_k = {str(c["attempts"]): c["mdd"] for c in figures["mdd"]}
    assert by_k == floor.mdd_by_attempts
    assert {c["tasks"] for c in figures["mdd"]} == {12}


def test_what_if_over_tasks_and_attempts():
    rates = [0.2, 0.5, 0.7, 0.9]
    grid = {(c.tasks, c.attempts): c for c in planning.mdd_what_if(rates, [38, 76], [5, 10])}
    # chance alone: the same cost detects the same difference
    assert grid[(38, 10)].attempts_per_arm == grid[(76, 5)].attempts_per_arm == 380
    assert grid[(38, 10)].mdd == pytest.approx(grid[(76, 5)].mdd)
    # real per-task effects vary: more tasks detect smaller differences at the same cost
    spread = {
        (c.tasks, c.attempts): c.mdd
        for c in planning.mdd_what_if(rates, [38, 76], [5, 10], task_sd=0.1)
    }
    assert spread[(76, 5)] < spread[(38, 10)]


@pytest.mark.parametrize("budget", [{}, {"tokens": 1000}, {"cost_usd": 0.01, "time_seconds": 10}])
def test_the_sql_form_of_the_plan_rule_agrees_with_outside_reasons(root, budget):
    from registry.analysis.plans import outside_clause, outside_reasons
    from registry.evidence.query import connect, fetch

    store, frozen = _frozen(root, "incomplete.jsonl")
    spec = frozen.plan.model_copy(update={"budget": frozen.plan.budget.model_copy(update=budget)})
    clause, params = outside_clause(spec)
    rows = {r["attempt_id"]: r for r in registry.load_evidence(store, registry.Scope())}
    con = connect(store)
    try:
        flags = fetch(con, f"SELECT attempt_id, {clause} FROM attempts", params).rows
    finally:
        con.close()
    assert len(flags) == len(rows)
    assert any(flag for _, flag in flags)
    for attempt_id, flag in flags:
        assert flag == bool(outside_reasons(spec, rows[attempt_id])), attempt_id
