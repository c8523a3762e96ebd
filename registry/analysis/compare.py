"""`registry compare`: did this change do anything? Paired task by task (docs/statistics.md §4).

Arms are chosen by selectors (see `registry.evidence.selection`). Tasks pair only over cohorts that
agree on every cohort input except the varied one (the agent system by default); a task whose
arms disagree on another input is refused, naming the inputs. Counts come first: per-task
rates side by side, then d̄, SE, MDD, a seeded paired bootstrap, the sign test, McNemar on
binary task outcomes, each arm's invalid rate, and a verdict from the decision table.

Which attempts count and how they form samples is `registry.evidence.rule`'s rule: an arm whose
attempts come from more than one observed system (a mid-experiment model swap, legacy
evidence beside observed evidence, runs that record no model) is refused with the systems
named, never pooled; a regraded generation is another cohort and never pairs with its original.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from registry.analysis import stats
from registry.analysis.plans import FrozenPlan, PlanError, outside_clause
from registry.analysis.report import rate_of
from registry.evidence.query import fetch
from registry.evidence.rule import (
    ENVELOPE_KEYS,
    TASK_INPUTS,
    is_resolved,
    is_valid,
    observed_identity,
    system_key,
    system_label,
)
from registry.evidence.selection import (
    Scope,
    Selector,
    SelectorError,
    cohort_inputs,
    configuration,
    counted_attempts,
    observed_system,
    selector_clause,
    snapshot_where,
)
from registry.storage.canonical import canonical_json
from registry.storage.digest import digest_json, short
from registry.storage.layers import LayerVersion, layer_document, store_layer
from registry.storage.ledger import entries_as_of, read_ledger
from registry.storage.store import Store
from registry_schemas import (
    CONFIGURATION_INPUTS,
    ArmCounts,
    ArmSummary,
    CandidateComparison,
    Comparison,
    ComparisonSnapshot,
    DroppedTask,
    ExactTest,
    Generator,
    PairedTask,
    Verdict,
)

GENERATOR = Generator(name="registry.compare", version="2")
COMPARISON_LAYER = "comparison"
ALPHA = 0.05
VARIABLE_INPUTS = CONFIGURATION_INPUTS
TIMEOUT_POLICIES = ("model_failure", "excused")
Rows = list[dict[str, Any]]


def compare(
    store: Store,
    baseline: Selector,
    candidates: Sequence[Selector],
    scope: Scope | None = None,
    vary: str = "agent_system_digest",
    seed: int = stats.DEFAULT_BOOTSTRAP_SEED,
    resamples: int = stats.DEFAULT_RESAMPLES,
    *,
    as_of: str | int | None = None,
    include_retracted: bool = False,
    plan: FrozenPlan | None = None,
    exploratory: bool = False,
    timeouts: str | None = None,
) -> Comparison:
    """Compare a baseline with each candidate, Holm-adjusting p-values across candidates.

    Under a frozen `plan` the comparison reads only the attempts claiming it, on the plan's
    reporting split, minus those outside it (held-fixed inputs, budget), applies its timeout
    policy and decision rule, and records the plan. A call whose arms, tasks (beyond the
    reporting split), experiment, varied input or timeout policy differ from the plan is
    refused unless `exploratory` (then the layer lists the overrides); a task scope narrower
    than the reporting split is marked post-hoc. `timeouts` (`model_failure` or `excused`)
    overrides the plan's policy; `excused` drops timeouts from both arms.

    Every comparison carries per candidate its look number (`with_look_numbers`): a second or later
    look at the same pair is flagged unless the plan's stop rule allowed that many.

    Raises:
        SelectorError: an arm selects nothing or more than one observed system, arms overlap,
            or `vary` is not an input.
        PlanError: the call overrides the plan without `exploratory`, or the plan's metric or
            alpha is not the one the verdict table decides on.
    """
    if vary not in VARIABLE_INPUTS:
        raise SelectorError(
            f"--vary '{vary}' is not a cohort input that may vary; "
            f"choose one of {', '.join(VARIABLE_INPUTS)}"
        )
    if not candidates:
        raise SelectorError("give at least one --candidate selector")
    scope = scope or Scope()
    applied = _apply_plan(plan, baseline, candidates, scope, vary, timeouts, exploratory)
    scope = applied.scope
    loaded = _load_arms(
        store, scope, baseline, candidates, plan, applied.timeouts, as_of, include_retracted
    )
    base_rows = _select(loaded.arms[0], baseline, "baseline")
    partial = []
    arm_rows = []
    for candidate, cand_all, overlap in zip(
        candidates, loaded.arms[1:], loaded.overlaps, strict=True
    ):
        cand_rows = _select(cand_all, candidate, "candidate")
        if overlap and candidate.text != baseline.text:
            raise SelectorError(
                f"selectors '{baseline.text}' and '{candidate.text}' both select "
                f"{overlap} attempts; make the arms disjoint"
            )
        arm_rows.append(cand_rows)
        pair = _compare_pair(baseline, base_rows, candidate, cand_rows, vary, seed, resamples)
        pair["warnings"] = loaded.warnings + pair["warnings"]
        partial.append(pair)
    comparisons = [
        c.model_copy(
            update={
                "baseline_inputs": _arm_inputs(base_rows),
                "candidate_inputs": _arm_inputs(cand_rows),
            }
        )
        for c, cand_rows in zip(_with_holm(partial), arm_rows, strict=True)
    ]
    result = Comparison(
        baseline=baseline.text,
        scope=scope.describe(),
        vary=vary,
        snapshot=ComparisonSnapshot(**loaded.snapshot),
        generator=GENERATOR,
        comparisons=comparisons,
        plan_id=None if plan is None else plan.plan_id,
        exploratory=bool(applied.overrides),
        overrides=applied.overrides,
        post_hoc=applied.post_hoc,
        planned_tasks=None if plan is None else len(plan.plan.reporting_tasks()),
    )
    return with_look_numbers(store, result, plan, as_of=as_of)


def record_comparison(store: Store, comparison: Comparison) -> tuple[LayerVersion, bool]:
    """Store a comparison as a derived layer; return it and whether it is new.

    The layer's subject names the pair and the look, e.g. `model=a vs model=b (look 2)`, so
    `registry reports` shows look numbers. Recording the same document again (the same
    comparison of the same evidence, with the same look numbers) adds nothing; a comparison
    that differs in anything is another look.
    """
    document = comparison.model_dump(mode="json", by_alias=True)
    looks = ", ".join(
        c.candidate.selector + ("" if c.look is None else f" (look {c.look})")
        for c in comparison.comparisons
    )
    return store_layer(store, COMPARISON_LAYER, f"{comparison.baseline} vs {looks}", document)


@dataclass(frozen=True)
class _Applied:
    scope: Scope
    timeouts: str
    overrides: list[str]
    post_hoc: bool


def _apply_plan(
    plan: FrozenPlan | None,
    baseline: Selector,
    candidates: Sequence[Selector],
    scope: Scope,
    vary: str,
    timeouts: str | None,
    exploratory: bool,
) -> _Applied:
    """Return the scope, timeout policy, overrides and post-hoc flag of a (planned) call."""
    if timeouts is not None and timeouts not in TIMEOUT_POLICIES:
        raise SelectorError(f"--timeouts {timeouts!r}: choose one of {', '.join(TIMEOUT_POLICIES)}")
    if plan is None:
        if exploratory:
            raise PlanError("--exploratory needs --plan: without a plan nothing is overridden")
        return _Applied(scope, timeouts or "model_failure", [], False)
    spec = plan.plan
    name = short(plan.plan_id)
    if spec.primary_metric.name != "resolved_rate":
        raise PlanError(
            f"plan {name}: primary metric {spec.primary_metric.name} (k = "
            f"{spec.primary_metric.k}); registry compare decides on the per-task resolved rate"
        )
    if spec.alpha != ALPHA:
        raise PlanError(
            f"plan {name}: alpha {spec.alpha:g}; the verdict table of registry compare decides "
            f"at alpha = {ALPHA:g} (Holm-adjusted sign test), so this plan cannot be applied"
        )
    if scope.plan is not None and scope.plan != plan.plan_id:
        raise PlanError(f"plan {name}: the scope names another plan ({scope.plan})")
    overrides = []
    if baseline.text != spec.arms.baseline or [c.text for c in candidates] != list(
        spec.arms.candidates
    ):
        overrides.append("arms")
    reporting = spec.reporting_tasks()
    tasks = tuple(scope.tasks) or tuple(reporting)
    beyond = sorted(set(tasks) - set(reporting))
    if beyond:
        overrides.append(f"tasks ({len(beyond)} outside the reporting split, e.g. {beyond[0]})")
    post_hoc = not beyond and set(tasks) < set(reporting)
    if scope.experiment is not None:
        overrides.append("experiment")
    if vary in spec.held_fixed:
        overrides.append(f"held-fixed input {vary} varied")
    policy = spec.timeout_policy.timeouts
    if timeouts is not None and timeouts != policy:
        overrides.append(f"timeout policy ({timeouts})")
    if overrides and not exploratory:
        raise PlanError(
            f"compare --plan {name}: the call overrides the plan's {'; '.join(overrides)}; "
            "drop the override, or pass --exploratory to record an exploratory comparison"
        )
    applied = Scope(tasks=tasks, plan=plan.plan_id, experiment=scope.experiment)
    return _Applied(applied, timeouts or policy, overrides, post_hoc)


@dataclass(frozen=True)
class _Arms:
    arms: list[Rows]
    """Per arm (baseline first): attempts grouped into cells carrying a count `n`."""
    overlaps: list[int]
    """Per candidate: attempts the baseline selects too."""
    snapshot: dict[str, Any]
    warnings: list[str]


_CELLS = """
SELECT task_id, cohort_key, system, run, experiment_id, terminal_class, count(*) AS n,
       min(started_at) AS first_started_at, max(started_at) AS last_started_at
FROM attempts{where} GROUP BY ALL ORDER BY ALL
"""


def _load_arms(
    store: Store,
    scope: Scope,
    baseline: Selector,
    candidates: Sequence[Selector],
    plan: FrozenPlan | None,
    timeouts: str,
    as_of: str | int | None,
    include_retracted: bool,
) -> _Arms:
    """Group each arm's counted attempts in DuckDB into cells, dropping what the plan excludes.

    A cell is one task, cohort, system, run, experiment and outcome with its count `n`;
    attempts outside the plan and excused timeouts are left out.

    Only the cells reach Python, so the cost follows tasks × cohorts, not attempts.
    """
    outside, outside_params = ("false", []) if plan is None else outside_clause(plan.plan)
    keep = f" AND NOT {outside}" + (
        " AND terminal_class <> 'timeout'" if timeouts == "excused" else ""
    )
    selectors = [None, baseline, *candidates]
    with counted_attempts(
        store, scope, selectors, as_of=as_of, include_retracted=include_retracted
    ) as (con, clauses):
        (all_where, all_params), *arm_clauses = clauses
        warnings = _held_out(con, all_where, all_params, outside, outside_params, timeouts)
        arms = []
        for where, params in arm_clauses:
            rows = fetch(con, _CELLS.format(where=where + keep), [*params, *outside_params])
            arms.append([dict(zip(rows.columns, r, strict=True)) for r in rows.rows])
        inputs = cohort_inputs(con, [c["cohort_key"] for arm in arms for c in arm])
        parsed = {k: {**v, "budget": orjson.loads(v["budget"])} for k, v in inputs.items()}
        for arm in arms:
            for cell in arm:
                cell["inputs"] = parsed[cell["cohort_key"]]
        base_terms, base_params = selector_clause(baseline)
        overlaps = []
        for where, params in arm_clauses[1:]:
            both = " AND ".join(["true", *base_terms])
            overlap = fetch(
                con,
                f"SELECT count(*) FROM attempts{where + keep} AND {both}",
                [*params, *outside_params, *base_params],
            )
            overlaps.append(int(overlap.rows[0][0]))
        union_terms, union_params = [], []
        for selector in (baseline, *candidates):
            terms, params = selector_clause(selector)
            union_terms.append("(" + " AND ".join(["true", *terms]) + ")")
            union_params += params
        snapshot = snapshot_where(
            con,
            f"{all_where}{keep} AND ({' OR '.join(union_terms)})",
            [*all_params, *outside_params, *union_params],
        )
    return _Arms(arms, overlaps, snapshot, warnings)


def _held_out(
    con: Any,
    where: str,
    params: list[Any],
    outside: str,
    outside_params: list[Any],
    timeouts: str,
) -> list[str]:
    """Say how many attempts in scope the plan and the timeout policy leave out."""
    row = fetch(
        con,
        f"SELECT count(*) FILTER ({outside}), count(*) FILTER (NOT {outside}"
        f" AND terminal_class = 'timeout') FROM attempts{where}",
        [*outside_params, *outside_params, *params],
    ).rows[0]
    warnings = []
    if row[0]:
        warnings.append(
            f"{row[0]} attempts claim the plan but fall outside it (held-fixed "
            "inputs, budget) and are not counted; see registry plan status"
        )
    if timeouts == "excused" and row[1]:
        warnings.append(f"{row[1]} timeouts excused by the timeout policy and not counted")
    return warnings


def _arm_inputs(rows: Rows) -> dict[str, list[Any]]:
    """Return an arm's suite-configuration cohort inputs: input -> its distinct values."""
    values: dict[str, dict[bytes, Any]] = defaultdict(dict)
    for row in rows:
        for key, value in row["inputs"].items():
            if key not in TASK_INPUTS:
                values[key][canonical_json(value)] = value
    return {key: [seen[v] for v in sorted(seen)] for key, seen in sorted(values.items())}


def look_key(baseline: str, candidate: str, plan_id: str | None) -> tuple[str, str, str | None]:
    """Return what makes two comparisons looks at the same question."""
    return (baseline, candidate, plan_id)


def with_look_numbers(
    store: Store,
    comparison: Comparison,
    plan: FrozenPlan | None = None,
    *,
    as_of: str | int | None = None,
) -> Comparison:
    """Number each candidate's look and flag the looks the plan did not allow.

    A look number is how many comparisons of this candidate against this baseline (under
    this plan, or without one) the ledger holds, plus this one.
    A stored comparison that is this one byte for byte but for its look numbers is the same
    look (re-running a comparison on unchanged evidence records nothing new). A look beyond
    the first is flagged `repeated_look` unless the plan's stop rule allows it; a post-hoc
    scope and an exploratory call are flagged too, and under a plan each candidate gets the
    decision of the plan's rule.
    """
    entries = entries_as_of(read_ledger(store), as_of)
    prior: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    for entry in entries:
        layer = entry.commit.layer
        if layer is None or layer.kind != COMPARISON_LAYER or layer.digest in seen:
            continue
        seen.add(layer.digest)
        version = LayerVersion(
            layer.kind, layer.subject, layer.digest, layer.path, entry.seq, entry.commit.created_at
        )
        document = layer_document(store, version)
        if document.get("baseline") == comparison.baseline and (
            document.get("plan_id") == comparison.plan_id
        ):
            prior.append((layer.digest, document))
    for digest, document in prior:
        looks = {c["candidate"]["selector"]: c.get("look") for c in document["comparisons"]}
        if all(isinstance(looks.get(c.candidate.selector), int) for c in comparison.comparisons):
            again = _looked(comparison, looks, plan)
            if digest_json(again.model_dump(mode="json", by_alias=True)) == digest:
                return again
    counts = Counter(
        c["candidate"]["selector"] for _, document in prior for c in document["comparisons"]
    )
    looks = {c.candidate.selector: counts[c.candidate.selector] + 1 for c in comparison.comparisons}
    return _looked(comparison, looks, plan)


def _looked(comparison: Comparison, looks: dict[str, Any], plan: FrozenPlan | None) -> Comparison:
    allowed = None if plan is None else plan.plan.stop_rule.max_looks
    out = []
    for item in comparison.comparisons:
        look = int(looks[item.candidate.selector])
        flags, notes = list(item.verdict.flags), list(item.verdict.notes)
        unproven = []
        if look > 1 and (allowed is None or look > allowed):
            flags.append("repeated_look")
            allowance = "no plan" if allowed is None else f"the plan allows {allowed}"
            notes.append(
                f"look {look}: treat as unproven unless the plan allowed {look} looks ({allowance})"
            )
            unproven.append(f"look {look}")
        if comparison.post_hoc:
            flags.append("post_hoc")
            notes.append(
                f"post-hoc scope: {len(comparison.scope['tasks'])} of the plan's "
                f"{comparison.planned_tasks} reporting tasks; treat as unproven"
            )
            unproven.append("post-hoc scope")
        if comparison.exploratory:
            flags.append("exploratory")
            notes.append(
                f"exploratory: overrides the plan's {'; '.join(comparison.overrides)}; "
                "not the plan's answer"
            )
            unproven.append("exploratory")
        verdict = item.verdict.model_copy(update={"flags": flags, "notes": notes})
        decision, why = (None, None) if plan is None else _decide(plan, item, unproven)
        out.append(
            item.model_copy(
                update={
                    "verdict": verdict,
                    "look": look,
                    "looks_allowed": allowed,
                    "decision": decision,
                    "decision_text": why,
                }
            )
        )
    return comparison.model_copy(update={"comparisons": out})


def _decide(plan: FrozenPlan, item: CandidateComparison, unproven: list[str]) -> tuple[str, str]:
    """Apply the plan's decision rule and threshold to a candidate's verdict."""
    rule, bar = plan.plan.decision_rule, plan.plan.threshold
    code = item.verdict.code
    if unproven:
        return "unproven", f"unproven: {', '.join(unproven)} (verdict {code})"
    if code in rule.reject_if:
        return "reject", f"reject: verdict {code} is one the plan rejects on"
    if code not in rule.adopt_if:
        return "unproven", f"unproven: verdict {code} neither adopts nor rejects under the plan"
    rates = [t.rate_candidate for t in item.tasks]
    rate = sum(rates) / len(rates) if rates else None
    if rate is None or rate < bar.value:
        shown = "undefined" if rate is None else f"{rate:.3f}"
        return (
            "unproven",
            f"unproven: verdict {code}, but the candidate's task-mean resolved rate {shown} is "
            f"below the {bar.category} threshold {bar.value:g}",
        )
    return (
        "adopt",
        f"adopt: verdict {code}, candidate task-mean resolved rate {rate:.3f} clears the "
        f"{bar.category} threshold {bar.value:g}",
    )


def _select(chosen: Rows, selector: Selector, role: str) -> Rows:
    if not chosen:
        raise SelectorError(f"{role} selector '{selector.text}' selects no attempts in scope")
    systems: Counter[tuple[Any, ...]] = Counter()
    for cell in chosen:
        systems[system_key(cell)] += cell["n"]
    if len(systems) > 1:
        named = {system_key(r): system_label(observed_identity(r), r["run"]) for r in chosen}
        shown = "; ".join(
            f"{named[key]} ({n} attempts)"
            for key, n in sorted(systems.items(), key=lambda kv: (-kv[1], named[kv[0]]))
        )
        raise SelectorError(
            f"{role} arm '{selector.text}' spans {len(systems)} observed systems, which never "
            f"pool: {shown}; narrow the selector (e.g. model=…, provider=…, experiment=…)"
        )
    return chosen


def _counts(rows: Rows) -> ArmCounts:
    attempts = sum(r["n"] for r in rows)
    valid = sum(r["n"] for r in rows if is_valid(r))
    return ArmCounts(
        attempts=attempts,
        valid=valid,
        invalid=attempts - valid,
        resolved=sum(r["n"] for r in rows if is_resolved(r)),
    )


def _units(rows: Rows, vary: str) -> dict[str, dict[str, Rows]]:
    """Group rows by task, then by cohort (every cohort input except the varied one)."""
    units: dict[str, dict[str, Rows]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        units[row["task_id"]][configuration(row, exclude=[vary], keep_task=True)].append(row)
    return units


def _differing(a: Rows, b: Rows, vary: str) -> list[str]:
    keys = {k for r in a + b for k in r["inputs"]} - {vary}
    return sorted(k for k in keys if {_value(r, k) for r in a} != {_value(r, k) for r in b})


def _value(row: dict[str, Any], key: str) -> str:
    return repr(row["inputs"].get(key))


def _pair_tasks(
    a_rows: Rows, b_rows: Rows, vary: str
) -> tuple[list[PairedTask], list[DroppedTask], Rows, Rows]:
    """Pair each task over the one cohort both arms share; return pairs, drops, compared rows.

    A task on which the arms share several cohorts (e.g. an original and a regraded
    generation in both arms) is ambiguous and dropped: pooling them would count it twice.
    """
    units_a, units_b = _units(a_rows, vary), _units(b_rows, vary)
    paired, dropped, compared_a, compared_b = [], [], [], []
    for task in sorted(set(units_a) | set(units_b)):
        if task not in units_a or task not in units_b:
            missing = "candidate" if task not in units_b else "baseline"
            dropped.append(DroppedTask(task_id=task, reason=f"no attempts in the {missing} arm"))
            continue
        shared = sorted(set(units_a[task]) & set(units_b[task]))
        if len(shared) != 1:
            every_a = [r for rows in units_a[task].values() for r in rows]
            every_b = [r for rows in units_b[task].values() for r in rows]
            dropped.append(_unpairable(task, shared, every_a, every_b, vary))
            continue
        a, b = units_a[task][shared[0]], units_b[task][shared[0]]
        compared_a += a
        compared_b += b
        ca, cb = _counts(a), _counts(b)
        if ca.valid == 0 or cb.valid == 0:
            arm = "baseline" if ca.valid == 0 else "candidate"
            dropped.append(DroppedTask(task_id=task, reason=f"no valid attempts in the {arm} arm"))
            continue
        ra, rb = ca.resolved / ca.valid, cb.resolved / cb.valid
        paired.append(
            PairedTask(
                task_id=task,
                baseline=ca,
                candidate=cb,
                rate_baseline=ra,
                rate_candidate=rb,
                difference=rb - ra,
            )
        )
    return paired, dropped, compared_a, compared_b


def _unpairable(task: str, shared: list[str], a: Rows, b: Rows, vary: str) -> DroppedTask:
    if not shared:
        return DroppedTask(
            task_id=task,
            reason="pairing refused: the cohorts differ in more than the varied input",
            differing_inputs=_differing(a, b, vary),
        )
    differing = sorted(
        {k for r in a for k in r["inputs"] if k != vary and len({_value(x, k) for x in a}) > 1}
    )
    return DroppedTask(
        task_id=task,
        reason=f"ambiguous: the arms share {len(shared)} cohorts on this task; narrow the arms "
        "(e.g. experiment=…) so each task has one",
        differing_inputs=differing,
    )


def _arm_summary(selector: Selector, rows: Rows) -> ArmSummary:
    counts = _counts(rows)
    systems: Counter[tuple[str | None, ...]] = Counter()
    for cell in rows:
        systems[observed_system(cell)] += cell["n"]
    return ArmSummary(
        selector=selector.text,
        counts=counts,
        invalid_rate=rate_of(stats.wilson_interval(counts.invalid, counts.attempts)),
        systems=[
            {**dict(zip(ENVELOPE_KEYS, key, strict=True)), "attempts": n}
            for key, n in sorted(systems.items(), key=lambda kv: (-kv[1], repr(kv[0])))
        ],
        experiments=sorted({r["experiment_id"] for r in rows}),
    )


def _compare_pair(
    baseline: Selector,
    a_all: Rows,
    candidate: Selector,
    b_all: Rows,
    vary: str,
    seed: int,
    resamples: int,
) -> dict[str, Any]:
    paired, dropped, a_rows, b_rows = _pair_tasks(a_all, b_all, vary)
    diffs = [t.difference for t in paired]
    summary = stats.paired_difference_summary(diffs)
    interval = stats.paired_bootstrap_ci(diffs, n_resamples=resamples, seed=seed)
    sign = stats.sign_test(diffs)
    gained, lost = stats.count_discordant(
        [t.rate_baseline for t in paired], [t.rate_candidate for t in paired]
    )
    base_summary, cand_summary = _arm_summary(baseline, a_rows), _arm_summary(candidate, b_rows)
    independence = _independence_p(base_summary.counts, cand_summary.counts)
    excluded = {
        "baseline": _counts(a_all).attempts - _counts(a_rows).attempts,
        "candidate": _counts(b_all).attempts - _counts(b_rows).attempts,
    }
    warnings = _warnings(base_summary, cand_summary, independence, dropped)
    if (apart := _apart(a_rows, b_rows)) is not None:
        warnings.append(apart)
    if excluded["baseline"] or excluded["candidate"]:
        warnings.append(
            f"{excluded['baseline']} baseline and {excluded['candidate']} candidate attempts are "
            "outside the paired cohorts (tasks in one arm only, other cohorts, ambiguous tasks) "
            "and are not counted"
        )
    return {
        "candidate": cand_summary,
        "baseline": base_summary,
        "excluded_attempts": excluded,
        "tasks": paired,
        "dropped": dropped,
        "attempts_per_task": _attempts_per_task(paired),
        "mean_difference": summary.mean,
        "sd": summary.sd,
        "se": summary.se,
        "mdd": summary.mdd,
        "bootstrap": {
            "low": interval[0] if interval else None,
            "high": interval[1] if interval else None,
            "seed": seed,
            "resamples": resamples,
            "method": "percentile",
        },
        "_sign": sign,
        "_mcnemar": (gained, lost, len(paired) - gained - lost),
        "invalid_independence_p": independence,
        "warnings": warnings,
    }


def _apart(a_rows: Rows, b_rows: Rows) -> str | None:
    """Return a warning when the arms ran at times that do not overlap."""
    a = [t for r in a_rows for t in (r["first_started_at"], r["last_started_at"]) if t]
    b = [t for r in b_rows for t in (r["first_started_at"], r["last_started_at"]) if t]
    if not a or not b or (max(a) >= min(b) and max(b) >= min(a)):
        return None

    def span(times: list[Any]) -> str:
        return f"{min(times):%Y-%m-%d %H:%M}–{max(times):%Y-%m-%d %H:%M} UTC"

    return (
        f"the arms ran at times that do not overlap (baseline {span(a)}, candidate {span(b)}): "
        "whatever changed in between (provider-side model updates, infrastructure) is "
        "confounded with the change compared"
    )


def _attempts_per_task(paired: list[PairedTask]) -> int | None:
    if not paired:
        return None
    a = statistics.median_low([t.baseline.valid for t in paired])
    b = statistics.median_low([t.candidate.valid for t in paired])
    return int(min(a, b))


def _independence_p(a: ArmCounts, b: ArmCounts) -> float | None:
    if a.attempts == 0 or b.attempts == 0 or a.invalid + b.invalid == 0:
        return None
    table = [[a.invalid, a.valid], [b.invalid, b.valid]]
    return stats.fisher_exact_p(table)


def _warnings(
    a: ArmSummary, b: ArmSummary, independence: float | None, dropped: list[DroppedTask]
) -> list[str]:
    warnings = []
    if independence is not None and independence < ALPHA:
        warnings.append(
            f"invalid attempts are not independent of the arm: baseline "
            f"{a.counts.invalid}/{a.counts.attempts}, candidate {b.counts.invalid}/"
            f"{b.counts.attempts} (Fisher exact p = {independence:.3g}); excluding them is only "
            "safe when errors are independent of the arm, so this comparison may be biased"
        )
    no_valid = [d.task_id for d in dropped if d.reason.startswith("no valid attempts")]
    if no_valid:
        warnings.append(
            f"{len(no_valid)} task(s) dropped for lack of valid attempts in one arm; "
            "if that arm's failures cluster on hard tasks, its rate is overstated"
        )
    if any(d.differing_inputs for d in dropped):
        warnings.append("some tasks were not paired because their cohorts differ; see dropped")
    return warnings


def _with_holm(partial: list[dict[str, Any]]) -> list[CandidateComparison]:
    sign_adj, _ = stats.holm([p["_sign"].p for p in partial])
    mcn_p = [stats.mcnemar_exact(g, lo) for g, lo, _ in (p["_mcnemar"] for p in partial)]
    mcn_adj, _ = stats.holm(mcn_p)
    out = []
    for i, p in enumerate(partial):
        sign = p.pop("_sign")
        gained, lost, ties = p.pop("_mcnemar")
        sign_test = ExactTest(
            positive=sign.positive,
            negative=sign.negative,
            ties=sign.ties,
            p=sign.p,
            p_holm=sign_adj[i],
        )
        mcnemar = ExactTest(
            positive=gained, negative=lost, ties=ties, p=mcn_p[i], p_holm=mcn_adj[i]
        )
        verdict = decide(
            p["tasks"],
            p["mean_difference"],
            p["mdd"],
            sign_test,
            p["attempts_per_task"],
            (p["bootstrap"]["low"], p["bootstrap"]["high"]),
        )
        out.append(CandidateComparison(**p, sign_test=sign_test, mcnemar=mcnemar, verdict=verdict))
    return out


def decide(
    tasks: list[PairedTask],
    mean: float | None,
    mdd: float | None,
    sign: ExactTest,
    k: int | None,
    bootstrap: tuple[float | None, float | None] = (None, None),
) -> Verdict:
    """Apply the decision table of the comparison (never a bare point estimate).

    A detected difference (|d̄| ≥ MDD and Holm-adjusted sign test p < α) is reported as ahead
    or behind whatever the saturation; saturation only explains a null result. K = 1 is
    flagged: a single run per task cannot separate noise from effect.
    """
    n = len(tasks)
    saturated = sum(t.rate_baseline == t.rate_candidate in (0.0, 1.0) for t in tasks)
    is_saturated = k is not None and k >= 2 and n > 0 and saturated > n / 2
    flags = (["single_run"] if k == 1 else []) + (["saturated"] if is_saturated else [])
    notes = []
    if k == 1:
        notes.append("single-run comparison: cannot separate noise from effect")
    if mean is None or mdd is None:
        return Verdict(
            code="too_few_tasks",
            text=f"too few paired tasks to compare ({n})",
            flags=flags,
            notes=notes,
        )
    if all(t.difference == tasks[0].difference for t in tasks):
        notes.append(
            f"every paired task moved by the same {100 * tasks[0].difference:+.1f} points "
            "(SE = 0, so MDD = 0): the verdict rests on the sign test alone"
        )
    detected = mean != 0 and abs(mean) >= mdd
    if detected and sign.p_holm < ALPHA:
        ahead = mean > 0
        wins, losses = (sign.positive, sign.negative) if ahead else (sign.negative, sign.positive)
        text = (
            f"candidate {'ahead' if ahead else 'behind'} by {100 * abs(mean):.1f} points, "
            f"same direction on {wins} of {wins + losses} tasks"
        )
        if is_saturated:
            text += f" ({saturated} of {n} tasks at 0/K or K/K in both arms)"
        return Verdict(code="ahead" if ahead else "behind", text=text, flags=flags, notes=notes)
    if detected:
        return Verdict(
            code="heavy_tasks",
            text=(
                f"led by a few heavy tasks (|d| {100 * abs(mean):.1f} points ≥ MDD, sign test "
                f"p = {sign.p_holm:.3g}); not a suite-wide effect"
            ),
            flags=flags,
            notes=notes,
        )
    low, high = bootstrap
    if low is not None and high is not None and (low > 0 or high < 0):
        notes.append(
            f"the bootstrap interval [{100 * low:+.1f}, {100 * high:+.1f}] excludes zero, but "
            f"|d| {100 * abs(mean):.1f} < MDD {100 * mdd:.1f} (the difference this design "
            "detects with 80% power): a real effect may be there, below what this design detects"
        )
    if is_saturated:
        return Verdict(
            code="saturated",
            text=(
                f"suite saturated ({saturated} of {n} tasks at 0/K or K/K in both arms); "
                "widen difficulty before comparing"
            ),
            flags=flags,
            notes=notes,
        )
    return Verdict(
        code="no_detectable_difference",
        text=(
            f"no detectable difference at {n} tasks, {k} attempts (|d| {100 * abs(mean):.1f} "
            f"points < MDD {100 * mdd:.1f})"
        ),
        flags=flags,
        notes=notes,
    )
