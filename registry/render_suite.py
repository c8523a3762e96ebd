"""Renderers for comparisons, summaries and noise floors (text, Markdown, HTML)."""

from __future__ import annotations

import html

from registry.digest import short
from registry.render import md_escape, percent
from registry_schemas import CandidateComparison, Comparison, NoiseFloor, Summary, SystemSummary


def _points(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:+.1f}"


def _size(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}"


def _p(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _arm_line(role: str, arm) -> str:  # type: ignore[no-untyped-def]
    c = arm.counts
    return (
        f"{role:<10} {arm.selector}: {c.resolved}/{c.valid} resolved of valid, "
        f"invalid {c.invalid}/{c.attempts} {percent(arm.invalid_rate.estimate)}, "
        f"experiments {', '.join(arm.experiments)}"
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
    return "\n".join(lines) + "\n"


def render_comparison_markdown(comparison: Comparison) -> str:
    """Return a comparison as Markdown."""
    out = [f"# Comparison against `{comparison.baseline}`", ""]
    for c in comparison.comparisons:
        out += [f"## Candidate `{c.candidate.selector}`", "", f"**{c.verdict.text}**", ""]
        out += ["```", *_comparison_lines(c)[:7], *[f"warning {w}" for w in c.warnings], "```", ""]
        out += ["| task | baseline | candidate | d (points) |", "|---|---|---|---|"]
        for t in c.tasks:
            out.append(
                f"| {md_escape(t.task_id)} | {t.baseline.resolved}/{t.baseline.valid} "
                f"| {t.candidate.resolved}/{t.candidate.valid} | {_points(t.difference)} |"
            )
        for d in c.dropped:
            out.append(f"| {md_escape(d.task_id)} | dropped | {d.reason} | |")
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
        parts.append(f'<text x="4" y="{y + 4}">{html.escape(t.task_id[:38])}</text>')
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
    body = [f"<h1>Comparison against {html.escape(comparison.baseline)}</h1>"]
    for c in comparison.comparisons:
        body.append(f"<h2>Candidate {html.escape(c.candidate.selector)}</h2>")
        body.append(f'<p class="verdict">{html.escape(c.verdict.text)}</p>')
        body.append("<pre>" + html.escape("\n".join(_comparison_lines(c)[:7])) + "</pre>")
        body.extend(f'<p class="warn">{html.escape(w)}</p>' for w in c.warnings)
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
    sys = s.system
    return f"{sys['agent']} {sys['agent_version']} {sys['provider']}/{sys['model']}"


def render_summary_table(summary: Summary) -> str:
    """Return a suite summary as plain text, counts behind every percentage."""
    lines = [
        f"Suite summary {summary.scope} · evidence {short(summary.snapshot['evidence_digest'])}"
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
            f"flips between identical single runs {_p(s.expected_flips)}",
            f"  runtime s mean {_p(s.runtime_seconds.mean)} median {_p(s.runtime_seconds.median)}"
            f" p95 {_p(s.runtime_seconds.p95)}; cost total {_p(s.cost_usd.total)} USD "
            f"({s.cost_usd.known} known, {s.cost_usd.unavailable} unavailable)",
        ]
    return "\n".join(lines) + "\n"


def render_noise_table(floor: NoiseFloor) -> str:
    """Return a noise floor as plain text."""
    moves = ", ".join(f"≥{m}: {100 * p:.1f}%" for m, p in floor.p_move_at_least.items())
    mdd = ", ".join(f"K={k}: {_size(v)}" for k, v in floor.mdd_by_attempts.items())
    q = floor.net_change["quantiles"]
    return (
        "\n".join(
            [
                f"Noise floor of {floor.system} over {floor.tasks} tasks",
                f"expected flips between two identical single-run evaluations: "
                f"{floor.expected_flips:.3f} tasks (Σ 2p(1−p); unbiased "
                f"{_p(floor.expected_flips_unbiased)})",
                f"net change in resolved count, {floor.simulations} simulated pairs "
                f"(seed {floor.seed}): "
                f"95% within [{q['2.5']:+.0f}, {q['97.5']:+.0f}] tasks",
                f"P(|net change| moves by): {moves}",
                f"minimum detectable difference (points) by attempts per task: {mdd}",
            ]
        )
        + "\n"
    )
