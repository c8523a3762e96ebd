"""`registry compare`: did this change do anything? Paired task by task (docs/statistics.md §4).

Arms are chosen by selectors (see `registry.selection`). Tasks pair only over cohorts that
agree on every cohort input except the varied one (the agent system by default); a task whose
arms disagree on another input is refused, naming the inputs. Counts come first: per-task
rates side by side, then d̄, SE, MDD, a seeded paired bootstrap, the sign test, McNemar on
binary task outcomes, each arm's invalid rate, and a verdict from the decision table.

Which attempts count and how they form samples is `registry.evidence`'s rule: an arm whose
attempts come from more than one observed system (a mid-experiment model swap, legacy
evidence beside observed evidence, runs that record no model) is refused with the systems
named, never pooled; a regraded generation is another cohort and never pairs with its original.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from registry import stats
from registry.evidence import (
    ENVELOPE_KEYS,
    is_resolved,
    is_valid,
    observed_identity,
    snapshot_of,
    system_key,
    system_label,
)
from registry.layers import LayerVersion, store_layer
from registry.report import rate_of
from registry.selection import (
    Scope,
    Selector,
    SelectorError,
    configuration,
    load_evidence,
    observed_system,
)
from registry.store import Store
from registry_schemas import (
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
VARIABLE_INPUTS = (
    "prompt_digest",
    "wiki_digest",
    "tool_policy_digest",
    "budget",
    "harness_package",
    "grader_version",
    "agent_system_digest",
    "environment_digest",
)
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
) -> Comparison:
    """Compare a baseline with each candidate, Holm-adjusting p-values across candidates.

    Raises:
        SelectorError: an arm selects nothing or more than one observed system, arms overlap,
            or `vary` is not an input.
    """
    if vary not in VARIABLE_INPUTS:
        raise SelectorError(
            f"--vary '{vary}' is not a cohort input that may vary; "
            f"choose one of {', '.join(VARIABLE_INPUTS)}"
        )
    if not candidates:
        raise SelectorError("give at least one --candidate selector")
    scope = scope or Scope()
    rows = load_evidence(store, scope, as_of=as_of, include_retracted=include_retracted)
    base_rows = _select(rows, baseline, "baseline")
    partial = []
    used = {r["attempt_id"]: r for r in base_rows}
    for candidate in candidates:
        cand_rows = _select(rows, candidate, "candidate")
        overlap = {r["attempt_id"] for r in cand_rows} & used.keys()
        if overlap and candidate.text != baseline.text:
            raise SelectorError(
                f"selectors '{baseline.text}' and '{candidate.text}' both select "
                f"{len(overlap)} attempts; make the arms disjoint"
            )
        used.update({r["attempt_id"]: r for r in cand_rows})
        partial.append(
            _compare_pair(baseline, base_rows, candidate, cand_rows, vary, seed, resamples)
        )
    comparisons = _with_holm(partial)
    covered = sorted(used)
    return Comparison(
        baseline=baseline.text,
        scope=scope.describe(),
        vary=vary,
        snapshot=ComparisonSnapshot(**snapshot_of([used[a] for a in covered])),
        generator=GENERATOR,
        comparisons=comparisons,
    )


def record_comparison(store: Store, comparison: Comparison) -> tuple[LayerVersion, bool]:
    """Store a comparison as a derived layer; return it and whether it is new."""
    document = comparison.model_dump(mode="json", by_alias=True)
    return store_layer(store, COMPARISON_LAYER, comparison.baseline, document)


def _select(rows: Rows, selector: Selector, role: str) -> Rows:
    chosen = [r for r in rows if selector.matches(r)]
    if not chosen:
        raise SelectorError(f"{role} selector '{selector.text}' selects no attempts in scope")
    systems = Counter(system_key(r) for r in chosen)
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
    valid = sum(map(is_valid, rows))
    return ArmCounts(
        attempts=len(rows),
        valid=valid,
        invalid=len(rows) - valid,
        resolved=sum(map(is_resolved, rows)),
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
    systems = Counter(observed_system(r) for r in rows)
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
    excluded = {"baseline": len(a_all) - len(a_rows), "candidate": len(b_all) - len(b_rows)}
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
    a = [r["started_at"] for r in a_rows if r["started_at"] is not None]
    b = [r["started_at"] for r in b_rows if r["started_at"] is not None]
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
