"""Renderers for comparisons, summaries and noise floors (text, Markdown, HTML)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from registry.digest import short
from registry.evidence import system_label
from registry.render import html_text, inert, inert_lines, md_escape, percent
from registry_schemas import CandidateComparison, Comparison, NoiseFloor, Summary, SystemSummary


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


def render_comparison_markdown(comparison: Comparison) -> str:
    """Return a comparison as Markdown."""
    out = [f"# Comparison against {md_escape(comparison.baseline)}", ""]
    for c in comparison.comparisons:
        out += [f"## Candidate {md_escape(c.candidate.selector)}", ""]
        out += [f"**{md_escape(c.verdict.text)}**", ""]
        block = [inert(line) for line in [*_comparison_lines(c)[:7]]]
        block += [inert(f"note {n}") for n in c.verdict.notes]
        block += [inert(f"warning {w}") for w in c.warnings]
        fence = _fence(block)
        out += [fence, *block, fence, ""]
        out += ["| task | baseline | candidate | d (points) |", "|---|---|---|---|"]
        for t in c.tasks:
            out.append(
                f"| {md_escape(t.task_id)} | {t.baseline.resolved}/{t.baseline.valid} "
                f"| {t.candidate.resolved}/{t.candidate.valid} | {_points(t.difference)} |"
            )
        for d in c.dropped:
            out.append(f"| {md_escape(d.task_id)} | dropped | {md_escape(d.reason)} | |")
        out.append("")
    return "\n".join(out)


_ROW, _LABEL_W, _PLOT_W = 22, 300, 520


def render_difference_plot(c: CandidateComparison) -> str:
    """Return an SVG of per-task differences (candidate − baseline) with the mean and MDD."""
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
        color = "#2e7d32" if t.difference > 0 else "#c62828" if t.difference < 0 else "#777"
        parts.append(f'<text x="4" y="{y + 4}">{html_text(t.task_id[:38])}</text>')
        parts.append(
            f'<line x1="{zero}" y1="{y}" x2="{x(t.difference):.1f}" y2="{y}" stroke="{color}" '
            'stroke-width="6"/>'
        )
    if c.mean_difference is not None:
        mx = x(c.mean_difference)
        parts.append(
            f'<line x1="{mx:.1f}" y1="20" x2="{mx:.1f}" y2="{height}" stroke="#1f5fbf" '
            'stroke-width="2" stroke-dasharray="4 3"/>'
        )
    width = _LABEL_W + _PLOT_W + 20
    return (
        f'<svg class="diff-plot" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}">{"".join(parts)}</svg>'
    )


def render_comparison_html(comparison: Comparison) -> str:
    """Return a self-contained HTML page with a per-task difference plot per candidate."""
    body = [f"<h1>Comparison against {html_text(comparison.baseline)}</h1>"]
    for c in comparison.comparisons:
        body.append(f"<h2>Candidate {html_text(c.candidate.selector)}</h2>")
        body.append(f'<p class="verdict">{html_text(c.verdict.text)}</p>')
        pre = "\n".join(html_text(line) for line in _comparison_lines(c)[:7])
        body.append(f"<pre>{pre}</pre>")
        body.extend(f'<p class="note">{html_text(n)}</p>' for n in c.verdict.notes)
        body.extend(f'<p class="warn">{html_text(w)}</p>' for w in c.warnings)
        body.append(
            '<p class="meta">Bars: per-task difference candidate − baseline in resolved rate '
            "(points); dashed line: mean difference; shaded band: ± minimum detectable "
            "difference.</p>"
        )
        body.append(render_difference_plot(c))
    style = (
        "body{font-family:system-ui,sans-serif;margin:24px}h1{font-size:20px}"
        "h2{font-size:16px}.verdict{font-weight:600}.warn{color:#a0522d}.meta{color:#555}"
        "svg text{font-size:12px}svg .tick{text-anchor:middle;fill:#555}"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Comparison</title>'
        f"<style>{style}</style></head><body>" + "\n".join(body) + "</body></html>\n"
    )


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
