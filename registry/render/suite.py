"""Renderers for comparisons, summaries and noise floors (text, Markdown, HTML)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from registry.evidence.rule import system_label
from registry.render.report import html_page, html_text, inert_lines, md_escape, percent, scroll
from registry.render.text import inert
from registry.storage.digest import short

if TYPE_CHECKING:
    from registry_schemas import (
        CandidateComparison,
        Comparison,
        NoiseFloor,
        Summary,
        SystemSummary,
    )


def _points(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:+.1f}"


def _size(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}"


def _p(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def scope_text(scope: Mapping[str, Any]) -> str:
    """Return a scope (`tasks`, `plan`, `experiment`) as words: `all tasks`, `3 tasks (a, b, c)`."""
    tasks = list(scope.get("tasks") or [])
    if not tasks:
        parts = ["all tasks"]
    else:
        shown = ", ".join(str(t) for t in tasks[:3]) + (", ..." if len(tasks) > 3 else "")
        parts = [f"{len(tasks)} task{'s' if len(tasks) != 1 else ''} ({shown})"]
    parts += [f"{key} {scope[key]}" for key in ("plan", "experiment") if scope.get(key)]
    return ", ".join(parts)


def _arm_line(role: str, arm: Any) -> str:
    c = arm.counts
    systems = "; ".join(
        system_label(s) + (f" ({s['attempts']} attempts)" if "attempts" in s else "")
        for s in arm.systems
    )
    return (
        f"{role:<10} {arm.selector}: {c.resolved}/{c.valid} resolved of valid, "
        f"invalid {c.invalid}/{c.attempts} {percent(arm.invalid_rate.estimate)}, "
        f"experiments {', '.join(arm.experiments)}" + (f", systems {systems}" if systems else "")
    )


def _comparison_lines(c: CandidateComparison) -> list[str]:
    boot = c.bootstrap
    lines = [
        _arm_line("baseline", c.baseline),
        _arm_line("candidate", c.candidate),
        f"verdict    {c.verdict.text}",
        f"paired     {len(c.tasks)} tasks, K = {c.attempts_per_task} valid attempts per task"
        f" (median); {len(c.dropped)} dropped",
        f"d (B - A)  mean {_points(c.mean_difference)} points, SE {_size(c.se)}, "
        f"MDD {_size(c.mdd)}, bootstrap 95% [{_points(boot['low'])}, {_points(boot['high'])}]"
        f" (seed {boot['seed']}, {boot['resamples']} resamples)",
        f"sign test  {c.sign_test.positive} up / {c.sign_test.negative} down / "
        f"{c.sign_test.ties} ties, p = {_p(c.sign_test.p)} (Holm {_p(c.sign_test.p_holm)})",
        f"McNemar    gained {c.mcnemar.positive} / lost {c.mcnemar.negative}, "
        f"p = {_p(c.mcnemar.p)} (Holm {_p(c.mcnemar.p_holm)})",
    ]
    lines += [f"note       {n}" for n in c.verdict.notes]
    lines += [f"warning    {w}" for w in c.warnings]
    lines.append("")
    lines.append(f"  {'task':<40} {'baseline':>12} {'candidate':>12} {'d points':>9}")
    for t in c.tasks:
        a = f"{t.baseline.resolved}/{t.baseline.valid}"
        b = f"{t.candidate.resolved}/{t.candidate.valid}"
        lines.append(f"  {t.task_id[:40]:<40} {a:>12} {b:>12} {_points(t.difference):>9}")
    for d in c.dropped:
        extra = f" (differ: {', '.join(d.differing_inputs)})" if d.differing_inputs else ""
        lines.append(f"  {d.task_id[:40]:<40} dropped: {d.reason}{extra}")
    return lines


def render_comparison_table(comparison: Comparison) -> str:
    """Return a comparison as plain text."""
    snap = comparison.snapshot
    lines = [
        f"Comparison against {comparison.baseline} (pairing over cohorts that differ only in "
        f"{comparison.vary})",
        f"evidence {snap.evidence_digest} ({snap.attempts} attempts, newest commit "
        f"{snap.last_commit_seq})",
    ]
    for c in comparison.comparisons:
        lines += ["", *_comparison_lines(c)]
    return inert_lines(lines)


def _fence(lines: list[str]) -> str:
    """Return a code fence longer than any backtick run in `lines` (they cannot close it)."""
    longest, run = 0, 0
    for char in "\n".join(lines):
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def _plan_lines(comparison: Comparison) -> list[str]:
    """Return what a frozen plan says about a comparison (nothing without a plan)."""
    lines = []
    plan_id = getattr(comparison, "plan_id", None)
    if plan_id:
        planned = getattr(comparison, "planned_tasks", None)
        lines.append(
            f"plan {plan_id}" + (f" ({planned} planned tasks)" if planned is not None else "")
        )
    if getattr(comparison, "exploratory", False):
        overrides = ", ".join(getattr(comparison, "overrides", None) or []) or "unspecified"
        lines.append(f"exploratory: overrides the plan ({overrides}); never the plan's answer")
    if getattr(comparison, "post_hoc", False):
        lines.append("post hoc: the task scope is narrower than the plan's reporting split")
    return lines


def _look_lines(c: CandidateComparison) -> list[str]:
    """Return the look number and the plan's decision of one candidate, where recorded."""
    lines = []
    look = getattr(c, "look", None)
    if look is not None:
        allowed = getattr(c, "looks_allowed", None)
        lines.append(
            f"look {look}"
            + (f" of {allowed} allowed" if allowed is not None else "")
            + (" (a repeated look: the error rates assume one)" if look > 1 else "")
        )
    decision = getattr(c, "decision", None)
    if decision:
        why = getattr(c, "decision_text", None)
        lines.append(f"plan decision {decision}" + (f": {why}" if why else ""))
    return lines


def _side(counts: Any, rate: float) -> str:
    return f"{counts.resolved}/{counts.valid} ({percent(rate)})"


def _dropped_text(d: Any) -> str:
    return d.reason + (f" (differ: {', '.join(d.differing_inputs)})" if d.differing_inputs else "")


def render_comparison_markdown(comparison: Comparison) -> str:
    """Return a comparison as Markdown: counts first, every paired and dropped task."""
    snap = comparison.snapshot
    out = [f"# Comparison against {md_escape(comparison.baseline)}", ""]
    out += [
        md_escape(
            f"evidence {snap.evidence_digest} ({snap.attempts} attempts, newest commit "
            f"{snap.last_commit_seq}) · pairing over cohorts that differ only in "
            f"{comparison.vary} · {scope_text(comparison.scope)}"
        ),
        "",
    ]
    out += [f"- {md_escape(line)}" for line in _plan_lines(comparison)]
    for c in comparison.comparisons:
        out += ["", f"## Candidate {md_escape(c.candidate.selector)}", ""]
        out += [f"**{md_escape(c.verdict.text)}**", ""]
        out += [f"- {md_escape(line)}" for line in _look_lines(c)]
        block = [inert(line) for line in [*_comparison_lines(c)[:7]]]
        block += [inert(f"note {n}") for n in c.verdict.notes]
        block += [inert(f"warning {w}") for w in c.warnings]
        fence = _fence(block)
        out += ["", fence, *block, fence, ""]
        out += [
            "| task | baseline resolved/valid | candidate resolved/valid | d (points) |",
            "|---|---|---|---|",
        ]
        for t in c.tasks:
            out.append(
                f"| {md_escape(t.task_id)} | {_side(t.baseline, t.rate_baseline)} "
                f"| {_side(t.candidate, t.rate_candidate)} | {_points(t.difference)} |"
            )
        if c.dropped:
            out += ["", f"Dropped tasks ({len(c.dropped)}):", "", "| task | reason |", "|---|---|"]
            out += [
                f"| {md_escape(d.task_id)} | {md_escape(_dropped_text(d))} |" for d in c.dropped
            ]
        else:
            out += ["", "Dropped tasks: none."]
    return "\n".join(out) + "\n"


_ROW, _LABEL_W, _PLOT_W, _TEXT_W = 22, 300, 520, 230
_UP, _DOWN, _FLAT = "#2e7d32", "#c62828", "#555555"


def render_difference_plot(c: CandidateComparison) -> str:
    """Return an SVG of per-task differences (candidate − baseline) with the mean and MDD.

    A task that did not move is drawn as a mark on zero, and every row ends with both sides'
    counts and rates, so 0/5 → 0/5 and 5/5 → 5/5 never look alike.
    """
    height = 40 + _ROW * len(c.tasks)
    zero = _LABEL_W + _PLOT_W / 2

    def x(d: float) -> float:
        return zero + d * _PLOT_W / 2

    parts = [
        f'<line x1="{zero}" y1="20" x2="{zero}" y2="{height}" stroke="#999"/>',
        f'<text x="{x(-1):.0f}" y="14" class="tick">-100</text>',
        f'<text x="{zero:.0f}" y="14" class="tick">0</text>',
        f'<text x="{x(1):.0f}" y="14" class="tick">+100</text>',
    ]
    if c.mdd is not None:
        parts.append(
            f'<rect x="{x(-c.mdd):.1f}" y="20" width="{x(c.mdd) - x(-c.mdd):.1f}" '
            f'height="{height - 20}" fill="#f1e9d8"/>'
        )
    for i, t in enumerate(c.tasks):
        y = 32 + i * _ROW
        color = _UP if t.difference > 0 else _DOWN if t.difference < 0 else _FLAT
        label = html_text(t.task_id)
        shown = html_text(t.task_id if len(t.task_id) <= 38 else t.task_id[:37] + "…")
        parts.append(f'<text x="4" y="{y + 4}"><title>{label}</title>{shown}</text>')
        if t.difference == 0:
            parts.append(
                f'<path d="M{zero} {y - 6} L{zero + 5} {y} L{zero} {y + 6} L{zero - 5} {y} Z" '
                f'fill="{color}" class="zero-mark"/>'
            )
        else:
            parts.append(
                f'<line x1="{zero}" y1="{y}" x2="{x(t.difference):.1f}" y2="{y}" '
                f'stroke="{color}" stroke-width="6"/>'
            )
        sides = f"{_side(t.baseline, t.rate_baseline)} → {_side(t.candidate, t.rate_candidate)}"
        parts.append(
            f'<text x="{_LABEL_W + _PLOT_W + 10}" y="{y + 4}" class="sides">'
            f"{html_text(sides)}</text>"
        )
    if c.mean_difference is not None:
        mx = x(c.mean_difference)
        parts.append(
            f'<line x1="{mx:.1f}" y1="20" x2="{mx:.1f}" y2="{height}" stroke="#1f5fbf" '
            'stroke-width="2" stroke-dasharray="4 3"/>'
        )
    width = _LABEL_W + _PLOT_W + _TEXT_W
    return (
        f'<svg class="diff-plot" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="Per-task difference in resolved rate, candidate minus baseline">'
        f"{''.join(parts)}</svg>"
    )


def _arms_table(c: CandidateComparison) -> str:
    head = (
        '<tr><th>arm</th><th>selector</th><th class="num">resolved/valid</th>'
        '<th class="num">rate</th><th class="num">invalid/attempts</th><th>experiments</th>'
        "<th>observed systems</th></tr>"
    )
    rows = []
    for role, arm in (("baseline", c.baseline), ("candidate", c.candidate)):
        n = arm.counts
        rate = n.resolved / n.valid if n.valid else None
        systems = "; ".join(
            system_label(s) + (f" ({s['attempts']} attempts)" if "attempts" in s else "")
            for s in arm.systems
        )
        rows.append(
            f"<tr><td>{role}</td><td>{html_text(arm.selector)}</td>"
            f'<td class="num">{n.resolved}/{n.valid}</td><td class="num">{percent(rate)}</td>'
            f'<td class="num">{n.invalid}/{n.attempts} '
            f"{html_text(percent(arm.invalid_rate.estimate))}</td>"
            f"<td>{html_text(', '.join(arm.experiments))}</td><td>{html_text(systems)}</td></tr>"
        )
    return scroll(f'<table class="arms">{head}{"".join(rows)}</table>')


def _tasks_table(c: CandidateComparison) -> str:
    head = (
        '<tr><th>task</th><th class="num">baseline resolved/valid</th>'
        '<th class="num">candidate resolved/valid</th><th class="num">d (points)</th></tr>'
    )
    rows = []
    for t in c.tasks:
        zero = ' class="zero"' if t.difference == 0 else ""
        rows.append(
            f"<tr{zero}><td>{html_text(t.task_id)}</td>"
            f'<td class="num">{html_text(_side(t.baseline, t.rate_baseline))}</td>'
            f'<td class="num">{html_text(_side(t.candidate, t.rate_candidate))}</td>'
            f'<td class="num">{_points(t.difference)}</td></tr>'
        )
    return scroll(f'<table class="paired">{head}{"".join(rows)}</table>')


def _dropped_table(c: CandidateComparison) -> str:
    if not c.dropped:
        return '<p class="meta">Dropped tasks: none.</p>'
    rows = "".join(
        f"<tr><td>{html_text(d.task_id)}</td><td>{html_text(d.reason)}</td>"
        f"<td>{html_text(', '.join(d.differing_inputs))}</td></tr>"
        for d in c.dropped
    )
    head = "<tr><th>task</th><th>reason</th><th>differing inputs</th></tr>"
    return scroll(f'<table class="dropped">{head}{rows}</table>')


def comparison_body(comparison: Comparison) -> list[str]:
    """Return the HTML body parts of a comparison: counts first, then the per-task figures."""
    snap = comparison.snapshot
    body = [
        f"<h1>Comparison against {html_text(comparison.baseline)}</h1>",
        '<p class="meta">'
        + html_text(
            f"evidence {snap.evidence_digest} ({snap.attempts} attempts, newest commit "
            f"{snap.last_commit_seq}) · pairing over cohorts that differ only in "
            f"{comparison.vary} · {scope_text(comparison.scope)} · generator "
            f"{comparison.generator.name} {comparison.generator.version}"
        )
        + "</p>",
    ]
    body += [f'<p class="warn">{html_text(line)}</p>' for line in _plan_lines(comparison)]
    for c in comparison.comparisons:
        body.append(f"<h2>Candidate {html_text(c.candidate.selector)}</h2>")
        body.append(f'<p class="verdict">{html_text(c.verdict.text)}</p>')
        body += [f'<p class="warn">{html_text(line)}</p>' for line in _look_lines(c)]
        body.append(_arms_table(c))
        pre = "\n".join(html_text(line) for line in _comparison_lines(c)[3:7])
        body.append(f"<pre>{pre}</pre>")
        body.extend(f'<p class="note">{html_text(n)}</p>' for n in c.verdict.notes)
        body.extend(f'<p class="warn">{html_text(w)}</p>' for w in c.warnings)
        body.append(f"<h3>Paired tasks ({len(c.tasks)})</h3>")
        body.append(_tasks_table(c))
        body.append(
            '<p class="meta">Bars: per-task difference candidate − baseline in resolved rate '
            "(points); a diamond on zero: the task did not move (both sides' counts are at the "
            "end of the row); dashed line: mean difference; shaded band: ± minimum detectable "
            "difference.</p>"
        )
        body.append(render_difference_plot(c))
        body.append(f"<h3>Dropped tasks ({len(c.dropped)})</h3>")
        body.append(_dropped_table(c))
    return body


def render_comparison_html(comparison: Comparison) -> str:
    """Return a self-contained HTML page: counts, per-task rows and plot, dropped tasks."""
    return html_page(f"Comparison against {comparison.baseline}", comparison_body(comparison))


def _system_text(s: SystemSummary) -> str:
    return system_label(s.system, getattr(s, "run", None))


def _runtime(r: Any) -> str:
    known, unavailable = getattr(r, "known", None), getattr(r, "unavailable", 0)
    counts = f" ({known} known, {unavailable} unavailable)" if known is not None else ""
    return f"mean {_p(r.mean)} median {_p(r.median)} p95 {_p(r.p95)}{counts}"


def render_summary_table(summary: Summary) -> str:
    """Return a suite summary as plain text, counts behind every percentage."""
    chosen = f" · systems {summary.system_filter}" if summary.system_filter else ""
    lines = [
        f"Suite summary of {scope_text(summary.scope)}{chosen} · evidence "
        f"{short(summary.snapshot['evidence_digest'])}"
    ]
    for s in summary.systems:
        pooled, clustered = s.pooled_resolved_rate, s.clustered_interval
        lines += [
            "",
            f"{_system_text(s)} · configuration {short(s.configuration_digest)} "
            f"(grader {s.configuration.get('grader_version')})",
            f"  tasks {s.tasks} ({s.tasks_with_valid} with valid attempts), attempts {s.attempts},"
            f" valid {s.valid}, invalid {s.invalid}",
            f"  pooled resolved rate (attempt-weighted) {s.resolved}/{s.valid} "
            f"{percent(pooled.estimate)}, clustered 95% [{percent(clustered.low)}, "
            f"{percent(clustered.high)}] (CR1 SE {_p(s.clustered_se)}); naive Wilson "
            f"[{percent(pooled.low)}, {percent(pooled.high)}] ignores clustering",
            "  task-mean resolved rate (unweighted over tasks) "
            + percent(s.task_mean_resolved_rate),
            "  pass@k  "
            + "  ".join(
                f"{k}:{percent(v.mean)} ({v.tasks} tasks, {v.excluded} excluded)"
                for k, v in s.pass_at_k.items()
                if k in {"1", "2", "3", "5", "10"}
            ),
            "  pass^k  "
            + "  ".join(
                f"{k}:{percent(v.mean)}"
                for k, v in s.pass_hat_k.items()
                if k in {"1", "2", "3", "5", "10"}
            ),
            f"  invalid {s.invalid}/{s.attempts} {percent(s.invalid_rate.estimate)}; expected "
            f"flips between identical single runs {_p(s.expected_flips)}"
            + _why(s, "expected_flips"),
            f"  runtime s {_runtime(s.runtime_seconds)}; cost total {_p(s.cost_usd.total)} USD "
            f"({s.cost_usd.known} known, {s.cost_usd.unavailable} unavailable)",
        ]
    return inert_lines(lines)


def _why(layer: Any, field: str) -> str:
    """Return ` (reason)` when a layer says why `field` is null, else nothing."""
    reason = (getattr(layer, "undefined", None) or {}).get(field)
    return f" ({reason})" if reason and getattr(layer, field, None) is None else ""


def render_noise_table(floor: NoiseFloor) -> str:
    """Return a noise floor as plain text; an unmeasurable figure is `n/a` with its reason."""
    identity = getattr(floor, "identity", None)
    who = f" ({system_label(identity, getattr(floor, 'run', None))})" if identity else ""
    lines = [f"Noise floor of {floor.system}{who} over {floor.tasks} tasks"]
    flips = "n/a" if floor.expected_flips is None else f"{floor.expected_flips:.3f}"
    lines.append(
        f"expected flips between two identical single-run evaluations: {flips} tasks "
        f"(Σ 2p(1−p); unbiased {_p(floor.expected_flips_unbiased)})" + _why(floor, "expected_flips")
    )
    quantiles = (floor.net_change or {}).get("quantiles")
    if quantiles:
        lines.append(
            f"net change in resolved count, {floor.simulations} simulated pairs "
            f"(seed {floor.seed}): 95% within [{quantiles['2.5']:+.0f}, "
            f"{quantiles['97.5']:+.0f}] tasks"
        )
    else:
        lines.append("net change in resolved count: n/a" + _why(floor, "net_change"))
    moves = floor.p_move_at_least
    lines.append(
        "P(|net change| moves by): "
        + (", ".join(f"≥{m}: {100 * p:.1f}%" for m, p in moves.items()) if moves else "n/a")
        + ("" if moves else _why(floor, "p_move_at_least"))
    )
    mdd = floor.mdd_by_attempts
    lines.append(
        "minimum detectable difference (points) by attempts per task: "
        + (", ".join(f"K={k}: {_size(v)}" for k, v in mdd.items()) if mdd else "n/a")
        + ("" if mdd else _why(floor, "mdd_by_attempts"))
    )
    return inert_lines(lines)


def _evidence_text(layer: Summary | NoiseFloor) -> str:
    snap = layer.snapshot
    return (
        f"evidence {snap.get('evidence_digest')} ({snap.get('attempts')} attempts, newest commit "
        f"{snap.get('last_commit_seq')}) · generator {layer.generator.name} "
        f"{layer.generator.version}"
    )


def _k_cells(s: SystemSummary, field: str) -> str:
    values = getattr(s, field)
    return "; ".join(
        f"k={k}: {percent(v.mean)} ({v.tasks} tasks, {v.excluded} excluded)"
        for k, v in values.items()
    )


def summary_rows(s: SystemSummary) -> list[tuple[str, str]]:
    """Return one suite unit's figures as (figure, value) pairs, counts behind every rate."""
    pooled, clustered = s.pooled_resolved_rate, s.clustered_interval
    return [
        (
            "configuration",
            f"{s.configuration_digest} (grader {s.configuration.get('grader_version')})",
        ),
        ("tasks", f"{s.tasks} ({s.tasks_with_valid} with valid attempts)"),
        ("attempts", f"{s.attempts}: {s.valid} valid, {s.invalid} infrastructure-invalid"),
        (
            "resolved (pooled, attempt-weighted)",
            f"{s.resolved}/{s.valid} {percent(pooled.estimate)}",
        ),
        (
            "clustered 95% interval (quote this)",
            f"[{percent(clustered.low)}, {percent(clustered.high)}] (CR1 SE "
            f"{_p(s.clustered_se)}, clusters = tasks)" + _why(s, "clustered_se"),
        ),
        (
            "naive Wilson 95% (ignores clustering)",
            f"[{percent(pooled.low)}, {percent(pooled.high)}]",
        ),
        ("task-mean resolved rate", percent(s.task_mean_resolved_rate)),
        ("pass@k (mean over tasks with valid ≥ k)", _k_cells(s, "pass_at_k")),
        ("pass^k", _k_cells(s, "pass_hat_k")),
        ("invalid", f"{s.invalid}/{s.attempts} {percent(s.invalid_rate.estimate)}"),
        ("median valid attempts per task", _p(s.attempts_per_task)),
        (
            "expected flips between identical single runs (Σ 2p(1−p))",
            _p(s.expected_flips) + _why(s, "expected_flips"),
        ),
        ("runtime s", _runtime(s.runtime_seconds)),
        (
            "cost USD",
            f"total {_p(s.cost_usd.total)}, mean {_p(s.cost_usd.mean)} ({s.cost_usd.known} "
            f"known, {s.cost_usd.unavailable} unavailable)",
        ),
    ]


def _facts_html(rows: list[tuple[str, str]]) -> str:
    cells = "".join(f"<tr><th>{html_text(k)}</th><td>{html_text(v)}</td></tr>" for k, v in rows)
    return scroll(f'<table class="facts">{cells}</table>')


def _facts_markdown(rows: list[tuple[str, str]]) -> list[str]:
    return ["| figure | value |", "|---|---|"] + [
        f"| {md_escape(k)} | {md_escape(v)} |" for k, v in rows
    ]


def summary_title(summary: Summary) -> str:
    """Return the heading of a summary: its scope and system filter."""
    chosen = f" · systems {summary.system_filter}" if summary.system_filter else ""
    return f"Suite summary of {scope_text(summary.scope)}{chosen}"


def summary_body(summary: Summary) -> list[str]:
    """Return the HTML body parts of a suite summary: one figure table per suite unit."""
    body = [
        f"<h1>{html_text(summary_title(summary))}</h1>",
        f'<p class="meta">{html_text(_evidence_text(summary))}</p>',
        '<p class="meta">One row per observed system and suite configuration: attempts pool '
        "across tasks only within one. Quote the clustered interval; the naive Wilson interval "
        "treats attempts as independent and is too narrow.</p>",
    ]
    for s in summary.systems:
        body.append(f"<h2>{html_text(_system_text(s))}</h2>")
        body.append(_facts_html(summary_rows(s)))
    return body


def render_summary_html(summary: Summary) -> str:
    """Return a suite summary as a self-contained HTML page."""
    return html_page(summary_title(summary), summary_body(summary))


def render_summary_markdown(summary: Summary) -> str:
    """Return a suite summary as Markdown."""
    out = [f"# {md_escape(summary_title(summary))}", "", md_escape(_evidence_text(summary))]
    for s in summary.systems:
        out += ["", f"## {md_escape(_system_text(s))}", "", *_facts_markdown(summary_rows(s))]
    return inert_lines(out)


def noise_rows(floor: NoiseFloor) -> list[tuple[str, str]]:
    """Return a noise floor's figures as (figure, value) pairs; unmeasurable ones `n/a (why)`."""
    flips = "n/a" if floor.expected_flips is None else f"{floor.expected_flips:.3f}"
    quantiles = (floor.net_change or {}).get("quantiles")
    moves, mdd = floor.p_move_at_least, floor.mdd_by_attempts
    return [
        ("configuration", floor.configuration_digest),
        ("tasks with a valid attempt", str(floor.tasks)),
        ("median valid attempts per task", f"{floor.attempts_per_task:g}"),
        (
            "expected flips between two identical single-run evaluations (Σ 2p(1−p))",
            f"{flips} tasks" + _why(floor, "expected_flips"),
        ),
        (
            "expected flips, unbiased",
            _p(floor.expected_flips_unbiased) + _why(floor, "expected_flips_unbiased"),
        ),
        (
            "net change in resolved count, 95% of simulated pairs",
            f"[{quantiles['2.5']:+.0f}, {quantiles['97.5']:+.0f}] tasks ({floor.simulations} "
            f"simulated pairs, seed {floor.seed})"
            if quantiles
            else "n/a" + _why(floor, "net_change"),
        ),
        (
            "P(|net change| ≥ m)",
            ", ".join(f"m={m}: {100 * p:.1f}%" for m, p in moves.items())
            if moves
            else "n/a" + _why(floor, "p_move_at_least"),
        ),
        (
            "minimum detectable difference (points) by attempts per task K",
            ", ".join(f"K={k}: {_size(v)}" for k, v in mdd.items())
            if mdd
            else "n/a" + _why(floor, "mdd_by_attempts"),
        ),
    ]


def noise_title(floor: NoiseFloor) -> str:
    """Return the heading of a noise floor: its selector and observed system."""
    identity = getattr(floor, "identity", None)
    who = f" ({system_label(identity, getattr(floor, 'run', None))})" if identity else ""
    return f"Noise floor of {floor.system}{who}"


def noise_body(floor: NoiseFloor) -> list[str]:
    """Return the HTML body parts of a noise floor."""
    return [
        f"<h1>{html_text(noise_title(floor))}</h1>",
        f'<p class="meta">{html_text(_evidence_text(floor))} · {html_text(scope_text(floor.scope))}'
        "</p>",
        _facts_html(noise_rows(floor)),
    ]


def render_noise_html(floor: NoiseFloor) -> str:
    """Return a noise floor as a self-contained HTML page."""
    return html_page(noise_title(floor), noise_body(floor))


def render_noise_markdown(floor: NoiseFloor) -> str:
    """Return a noise floor as Markdown."""
    out = [f"# {md_escape(noise_title(floor))}", "", md_escape(_evidence_text(floor)), ""]
    return inert_lines([*out, *_facts_markdown(noise_rows(floor))])
