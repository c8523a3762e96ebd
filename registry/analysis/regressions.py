"""Regressions: per task, did a tracked system's newest sample move beyond its intervals?

A *track* is one system followed over time: by default each distinct `agent_system_digest`,
or each `--track` selector. For every task, the track's samples (task × cohort × observed
system, as `registry.evidence.rule` forms them) are ordered by `(generation, lineage_depth,
last_commit_seq, cohort_key, system)` and the newest is compared with the one before it. With
`since`, the newest sample built from attempts committed at or before that commit is compared
with the newest built from attempts committed after it.

A comparison is `down` when the newer Wilson 95% interval lies entirely below the older one
and the Fisher exact p-value, Holm-adjusted across every comparison of the report, is below
alpha; `up` symmetrically; otherwise `steady`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from registry.analysis.stats import fisher_exact_p, holm, wilson_interval
from registry.errors import RegistryError
from registry.evidence.rule import (
    ENVELOPE_KEYS,
    is_resolved,
    is_valid,
    observed_identity,
    sample_key,
    snapshot_of,
    system_label,
)
from registry.evidence.selection import Scope, Selector, SelectorError, read_evidence
from registry.render.report import inert_lines, md_escape, percent
from registry.storage.digest import short
from registry.storage.ledger import AsOfError, entries_as_of, read_ledger
from registry.storage.store import Store
from registry_schemas import (
    Change,
    NotExamined,
    Rate,
    RegressionCounts,
    RegressionReport,
    SampleCounts,
    TaskRegression,
)

DEFAULT_TRACK_INPUT = "agent_system_digest"
_NO_EVIDENCE = {"evidence_digest": None, "attempts": 0, "last_commit_seq": None}


@dataclass(frozen=True)
class _Pair:
    task_id: str
    track: str
    before: SampleCounts
    after: SampleCounts


def find_regressions(
    store: Store,
    *,
    track: Sequence[Selector] = (),
    since: str | int | None = None,
    as_of: str | int | None = None,
    alpha: float = 0.05,
    include_retracted: bool = False,
    tasks: Sequence[str] = (),
) -> RegressionReport:
    """Compare, per task and tracked system, the newest sample with the one before it.

    Raises:
        AsOfError: `as_of` or `since` names no commit of the ledger.
        SelectorError: a `--track` selector matches no attempt.
        RegistryError: alpha is not in (0, 1).
    """
    if not 0 < alpha < 1:
        raise RegistryError(f"--alpha {alpha}: expected a number between 0 and 1 (e.g. 0.05)")
    entries = entries_as_of(read_ledger(store), as_of)
    since_seq = None if since is None else _since_seq(entries, since)
    rows = read_evidence(
        store, Scope(tasks=tuple(tasks)), as_of=as_of, include_retracted=include_retracted
    ).rows
    pairs: list[_Pair] = []
    skipped: list[NotExamined] = []
    tracks = _tracks(rows, track)
    for name, members in tracks:
        by_task: dict[str, list[dict[str, Any]]] = {}
        for row in members:
            by_task.setdefault(row["task_id"], []).append(row)
        for task_id in sorted(by_task):
            found = _pair_of(task_id, name, by_task[task_id], since_seq)
            if isinstance(found, _Pair):
                pairs.append(found)
            else:
                skipped.append(found)
    examined = _compared(pairs, alpha)
    return RegressionReport(
        tracks=[name for name, _ in tracks],
        mode="generations" if since_seq is None else "since",
        since=None if since is None else str(since),
        since_commit_seq=since_seq,
        as_of=None if as_of is None else str(as_of),
        tasks=list(tasks),
        include_retracted=include_retracted,
        alpha=alpha,
        adjustment=adjustment_text(len(examined), len(tracks)),
        comparisons=len(examined),
        snapshot=snapshot_of(rows) if rows else _NO_EVIDENCE,
        counts=_counts_of(examined, skipped),
        examined=examined,
        not_examined=skipped,
    )


def _since_seq(entries: Sequence[Any], since: str | int) -> int:
    text = str(since).strip()
    head = entries[-1].seq if entries else 0
    if text.isdigit():
        if int(text) > head:
            raise AsOfError(
                f"--since {text}: the ledger holds commits 1..{head}; give one of those or a date"
            )
        return int(text)
    try:
        earlier = entries_as_of(list(entries), text)
    except AsOfError as exc:
        raise AsOfError(str(exc).replace("--as-of", "--since")) from None
    return earlier[-1].seq if earlier else 0


def _tracks(
    rows: list[dict[str, Any]], selectors: Sequence[Selector]
) -> list[tuple[str, list[dict[str, Any]]]]:
    if selectors:
        out = []
        for selector in selectors:
            members = [r for r in rows if selector.matches(r)]
            if not members and rows:
                raise SelectorError(f"--track '{selector.text}' matches no attempt")
            out.append((selector.text, members))
        return out
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(str(row["inputs"][DEFAULT_TRACK_INPUT]), []).append(row)
    return [(f"{DEFAULT_TRACK_INPUT} {key}", groups[key]) for key in sorted(groups)]


def _samples(rows: list[dict[str, Any]]) -> list[SampleCounts]:
    """Return the samples formed by `rows` under the evidence rule, oldest first."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(sample_key(row), []).append(row)
    samples = [_sample(members) for members in groups.values()]
    return sorted(samples, key=_order)


def _order(s: SampleCounts) -> tuple[Any, ...]:
    system = tuple("" if v is None else v for v in (*s.system.values(), s.run))
    return (s.generation, s.lineage_depth, s.last_commit_seq, s.cohort_key, system)


def _sample(members: list[dict[str, Any]]) -> SampleCounts:
    first = members[0]
    valid = [r for r in members if is_valid(r)]
    resolved = sum(1 for r in valid if is_resolved(r))
    interval = wilson_interval(resolved, len(valid))
    system = observed_identity(first)
    return SampleCounts(
        cohort_key=first["cohort_key"],
        system=system,
        run=first["run"],
        system_label=system_label(system, first["run"]),
        generation=min(r["generation"] for r in members),
        lineage_depth=max(r["lineage_depth"] for r in members),
        first_commit_seq=min(r["commit_seq"] for r in members),
        last_commit_seq=max(r["commit_seq"] for r in members),
        attempts=len(members),
        valid=len(valid),
        resolved=resolved,
        resolved_rate=Rate(estimate=None, low=None, high=None)
        if interval is None
        else Rate(estimate=interval.estimate, low=interval.low, high=interval.high),
        inputs=dict(first["inputs"]),
    )


def _pair_of(
    task_id: str, track: str, rows: list[dict[str, Any]], since_seq: int | None
) -> _Pair | NotExamined:
    if since_seq is None:
        samples = _samples(rows)
        if len(samples) < 2:
            reason = f"{len(samples)} sample in this track; a comparison needs two"
            return NotExamined(task_id=task_id, track=track, samples=len(samples), reason=reason)
        before, after = samples[-2], samples[-1]
        count = len(samples)
    else:
        older = _samples([r for r in rows if r["commit_seq"] <= since_seq])
        newer = _samples([r for r in rows if r["commit_seq"] > since_seq])
        count = len(older) + len(newer)
        for side, found in (("at or before", older), ("after", newer)):
            if not found:
                reason = f"no sample committed {side} commit {since_seq}"
                return NotExamined(task_id=task_id, track=track, samples=count, reason=reason)
        before, after = older[-1], newer[-1]
    for role, sample in (("older", before), ("newer", after)):
        if sample.valid == 0:
            reason = (
                f"the {role} sample (cohort {sample.cohort_key}, generation "
                f"{sample.generation}) has no valid attempt"
            )
            return NotExamined(task_id=task_id, track=track, samples=count, reason=reason)
    return _Pair(task_id, track, before, after)


def changes_between(before: SampleCounts, after: SampleCounts) -> list[Change]:
    """Return the cohort inputs and observed-system fields that differ between two samples."""
    changes = [
        Change(kind="input", field=key, before=before.inputs.get(key), after=after.inputs.get(key))
        for key in sorted({*before.inputs, *after.inputs})
        if before.inputs.get(key) != after.inputs.get(key)
    ]
    old = {**before.system, "run": before.run}
    new = {**after.system, "run": after.run}
    changes += [
        Change(kind="system", field=key, before=old.get(key), after=new.get(key))
        for key in (*ENVELOPE_KEYS, "run")
        if old.get(key) != new.get(key)
    ]
    return changes


def _direction(
    before: SampleCounts, after: SampleCounts, p_holm: float, alpha: float
) -> Literal["down", "up", "steady"]:
    old, new = before.resolved_rate, after.resolved_rate
    assert old.low is not None and old.high is not None  # both samples have valid attempts
    assert new.low is not None and new.high is not None
    if p_holm < alpha and new.high < old.low:
        return "down"
    if p_holm < alpha and new.low > old.high:
        return "up"
    return "steady"


def _compared(pairs: list[_Pair], alpha: float) -> list[TaskRegression]:
    tables = [
        [
            [p.before.resolved, p.before.valid - p.before.resolved],
            [p.after.resolved, p.after.valid - p.after.resolved],
        ]
        for p in pairs
    ]
    pvals = [fisher_exact_p(t) for t in tables]
    adjusted, _ = holm(pvals, alpha) if pvals else ([], [])
    out = []
    for pair, p, p_holm in zip(pairs, pvals, adjusted, strict=True):
        old, new = pair.before.resolved_rate.estimate, pair.after.resolved_rate.estimate
        assert old is not None and new is not None
        out.append(
            TaskRegression(
                task_id=pair.task_id,
                track=pair.track,
                before=pair.before,
                after=pair.after,
                changes=changes_between(pair.before, pair.after),
                difference=new - old,
                p=p,
                p_holm=p_holm,
                direction=_direction(pair.before, pair.after, p_holm, alpha),
            )
        )
    return out


def adjustment_text(comparisons: int, tracks: int) -> str:
    """Return the sentence saying how p-values were adjusted."""
    noun = "task" if comparisons == 1 else "tasks"
    where = "" if tracks <= 1 else f" (task × track, {tracks} tracks)"
    return f"Holm-adjusted across {comparisons} {noun}{where}"


def _counts_of(examined: list[TaskRegression], skipped: list[NotExamined]) -> RegressionCounts:
    directions = [e.direction for e in examined]
    return RegressionCounts(
        down=directions.count("down"),
        up=directions.count("up"),
        steady=directions.count("steady"),
        not_examined=len(skipped),
    )


# --- rendering -----------------------------------------------------------------------------

_DIGEST = re.compile(r"blake3:[0-9a-f]{64}")


def _shown(text: str) -> str:
    """Return text with full digests abbreviated, as human output shows them."""
    return _DIGEST.sub(lambda m: short(m.group()), text)


def _value(value: Any) -> str:
    if isinstance(value, dict | list):
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    return "unknown" if value is None else _shown(str(value))


def _changed(e: TaskRegression) -> str:
    parts = [f"{c.field} {_value(c.before)} → {_value(c.after)}" for c in e.changes]
    return "; ".join(parts) or "nothing (same cohort and system, later commits)"


def _rate(s: SampleCounts) -> str:
    r = s.resolved_rate
    if r.estimate is None or r.low is None or r.high is None:
        return "n/a"
    return f"{percent(r.estimate)} [{100 * r.low:.1f}, {100 * r.high:.1f}]"


def _counts(e: TaskRegression) -> str:
    return f"{e.before.resolved}/{e.before.valid} → {e.after.resolved}/{e.after.valid}"


def _sample_text(s: SampleCounts) -> str:
    return f"cohort {short(s.cohort_key)} generation {s.generation}, {s.system_label}"


def _mode_text(report: RegressionReport) -> str:
    if report.mode == "since":
        return (
            f"newest sample committed at or before commit {report.since_commit_seq} "
            f"(--since {report.since}) against the newest committed after it"
        )
    return "newest sample against the one before it (ordered by generation)"


def _rule_text(report: RegressionReport) -> str:
    return (
        f"{report.adjustment}; down/up = the newer Wilson 95% interval lies entirely below/above "
        f"the older one and Holm p < {report.alpha:g}"
    )


def _tally(report: RegressionReport) -> str:
    c = report.counts
    return (
        f"{report.comparisons} compared: {c.down} down, {c.up} up, {c.steady} steady; "
        f"{c.not_examined} not examined"
    )


def _tracks_text(report: RegressionReport) -> str:
    return ", ".join(_shown(t) for t in report.tracks) or "none (no evidence)"


def render_regressions_table(report: RegressionReport) -> str:
    """Return a regression report as plain text, counts first."""
    lines = [
        f"Regressions per task: {_mode_text(report)}",
        f"tracks: {_tracks_text(report)}",
        _tally(report),
        _rule_text(report),
    ]
    several = len(report.tracks) > 1
    rows = [
        (
            e.task_id,
            e.direction.upper(),
            _counts(e),
            _rate(e.before),
            _rate(e.after),
            f"{e.p:.2g}",
            f"{e.p_holm:.2g}",
        )
        for e in report.examined
    ]
    head = ("task", "direction", "resolved", "older", "newer", "p", "Holm p")
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    if rows:
        lines += ["", "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip()]
    for e, row in zip(report.examined, rows, strict=True):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if several:
            lines.append(f"    track   {_shown(e.track)}")
        lines += [
            f"    older   {_sample_text(e.before)}",
            f"    newer   {_sample_text(e.after)}",
            f"    changed {_changed(e)}",
        ]
    if report.not_examined:
        lines += ["", "not examined:"]
        lines += [
            f"  {n.task_id}" + (f" ({_shown(n.track)})" if several else "") + f": {n.reason}"
            for n in report.not_examined
        ]
    return inert_lines(lines)


def render_regressions_markdown(report: RegressionReport) -> str:
    """Return a regression report as GitHub-flavoured Markdown, counts first."""
    several = len(report.tracks) > 1
    lines = [
        "## Regressions",
        "",
        md_escape(f"Per task: {_mode_text(report)}. Tracks: {_tracks_text(report)}."),
        "",
        f"**{md_escape(_tally(report))}.** {md_escape(_rule_text(report))}.",
        "",
        "| Task | Direction | Resolved | Older | Newer | p | Holm p |"
        + (" Track |" if several else "")
        + " Samples (older → newer) | Changed |",
        "|---|---|---|---|---|---|---|" + ("---|" if several else "") + "---|---|",
    ]
    for e in report.examined:
        direction = e.direction if e.direction == "steady" else f"**{e.direction}**"
        cells = [
            md_escape(e.task_id),
            direction,
            _counts(e),  # figures of our own: no evidence text to escape
            _rate(e.before),
            _rate(e.after),
            f"{e.p:.2g}",
            f"{e.p_holm:.2g}",
            *([md_escape(_shown(e.track))] if several else []),
            md_escape(f"{_sample_text(e.before)} → {_sample_text(e.after)}"),
            md_escape(_changed(e)),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if report.not_examined:
        lines += ["", "### Not examined", ""]
        lines += [
            f"- {md_escape(n.task_id)}"
            + (f" ({md_escape(_shown(n.track))})" if several else "")
            + f": {md_escape(n.reason)}"
            for n in report.not_examined
        ]
    return "\n".join(lines) + "\n"


__all__ = [
    "DEFAULT_TRACK_INPUT",
    "adjustment_text",
    "changes_between",
    "find_regressions",
    "render_regressions_markdown",
    "render_regressions_table",
]
