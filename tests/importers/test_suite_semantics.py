"""Imported suites mean what the harness meant: one configuration per system, same headline.

docs/importers/README.md says what each cohort input identifies; these tests hold every
importer to it on its fixture, and check that the registry's pooled resolved rate over an
imported suite (sum of resolved / sum of valid attempts, over the `attempts` view) equals the
number the harness itself reported, after the documented mapping.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

import registry
from tests.conftest import FIXTURES

IMPORTERS = FIXTURES / "importers"
TASK_INPUTS = {"case_digest", "source_digest"}
VALID = {"resolved", "model_failure", "safety_failure", "timeout"}
SUITES = {
    "inspect-arith": ("inspect", IMPORTERS / "inspect" / "arith", 2),
    "inspect-eval-set": ("inspect", IMPORTERS / "inspect" / "eval-set", 1),
    "harbor": ("harbor", IMPORTERS / "harbor", 2),
    "terminal-bench": ("terminal-bench", IMPORTERS / "terminal-bench" / "runs", 2),
    "swebench": ("swebench", IMPORTERS / "swebench" / "run", 2),
}


def _attempts(root: Path, fmt: str, path: Path) -> list[dict[str, Any]]:
    registry.ingest(root, [str(path)], fmt)
    result = registry.run_query(
        registry.open_store(root),
        "SELECT experiment_id, task_id, inputs, envelope, terminal_class, labels FROM attempts",
    )
    return [dict(zip(result.columns, row, strict=True)) for row in result.rows]


def _system(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row["envelope"][k] for k in sorted(row["envelope"]))


def _configuration(row: dict[str, Any]) -> str:
    inputs = {k: v for k, v in row["inputs"].items() if k not in TASK_INPUTS}
    return json.dumps(inputs, sort_keys=True)


def _rate(rows: list[dict[str, Any]]) -> float:
    valid = [r for r in rows if r["terminal_class"] in VALID]
    return sum(r["terminal_class"] == "resolved" for r in valid) / len(valid)


@pytest.mark.parametrize("suite", list(SUITES))
def test_each_imported_suite_is_one_configuration_per_system(tmp_path, suite):
    fmt, path, systems = SUITES[suite]
    rows = _attempts(tmp_path / "reg", fmt, path)
    configurations: dict[tuple[Any, ...], set[str]] = defaultdict(set)
    tasks: dict[tuple[Any, ...], set[str]] = defaultdict(set)
    for row in rows:
        configurations[_system(row)].add(_configuration(row))
        tasks[_system(row)].add(row["task_id"])
    assert len(configurations) == systems
    for system, found in configurations.items():
        assert len(found) == 1, (system, len(found), len(tasks[system]))
        assert len(tasks[system]) > 1  # a suite, not one task


def test_prompt_digest_is_the_same_for_every_task_and_the_instruction_is_the_case(tmp_path):
    for fmt, path in (
        ("inspect", IMPORTERS / "inspect" / "arith"),
        ("harbor", IMPORTERS / "harbor"),
    ):
        rows = _attempts(tmp_path / fmt, fmt, path)
        by_system: dict[tuple[Any, ...], set[str]] = defaultdict(set)
        cases: dict[str, set[str]] = defaultdict(set)
        for row in rows:
            by_system[_system(row)].add(row["inputs"]["prompt_digest"])
            cases[row["task_id"]].add(row["inputs"]["case_digest"])
        assert all(len(prompts) == 1 for prompts in by_system.values()), fmt
        assert len({digest for found in cases.values() for digest in found}) == len(cases), fmt


# --- the harness's own headline number ------------------------------------------------------


def test_inspect_accuracy_is_the_pooled_rate(tmp_path):
    """inspect_ai's `accuracy` is the mean over scored samples of each sample's mean score over
    its epochs (the default reducer), computed before any invalidation: with every epoch of a
    scored sample scored, that is C / scored attempts (scored samples x epochs).

    The registry holds an invalidated attempt out (`invalid_case`); errored samples, samples
    without a score and the attempts `retry_on_error` discarded are infrastructure-invalid, as
    inspect_ai leaves them unscored. So: pooled rate = (accuracy x scored attempts - resolved
    invalidated) / (scored attempts - invalidated).
    """
    api = pytest.importorskip("inspect_ai.log")
    checked = 0
    for folder in ("arith", "eval-set"):
        rows = _attempts(tmp_path / folder, "inspect", IMPORTERS / "inspect" / folder)
        for file in sorted((IMPORTERS / "inspect" / folder).glob("*.eval")):
            log = api.read_eval_log(str(file))
            if log.status != "success":
                continue  # an eval-set's failed first try; its retry is the final log
            score = log.results.scores[0]
            accuracy = score.metrics["accuracy"].value
            scored = score.scored_samples * log.eval.config.epochs
            invalidated = [s for s in log.samples if s.invalidation is not None]
            resolved_invalidated = sum(s.scores[score.scorer].value == "C" for s in invalidated)
            expected = (accuracy * scored - resolved_invalidated) / (scored - len(invalidated))
            model = str(log.eval.model).partition("/")[2]
            mine = [r for r in rows if r["envelope"]["model"] == model]
            assert math.isclose(_rate(mine), expected, rel_tol=1e-12), (file.name, model)
            checked += 1
    assert checked == 3


def test_harbor_mean_reward_is_the_pooled_rate(tmp_path):
    """Harbor's job result lists, per reward value, the trials that earned it; its mean reward
    is their mean. Harbor also grades trials that ended in an infrastructure exception; the
    registry holds those out (invalid), so the mean is taken over the trials it counts valid.
    """
    rows = _attempts(tmp_path / "reg", "harbor", IMPORTERS / "harbor")
    by_trial = {r["labels"]["harbor.trial_name"]: r for r in rows}
    for job in ("tb2-terminus-gpt5", "tb2-terminus-sonnet"):
        result = json.loads((IMPORTERS / "harbor" / job / "result.json").read_text())
        (evals,) = result["stats"]["evals"].values()
        rewards = {
            trial: float(value)
            for value, trials in evals["reward_stats"]["reward"].items()
            for trial in trials
        }
        counted = {t: v for t, v in rewards.items() if by_trial[t]["terminal_class"] in VALID}
        held_out = set(rewards) - set(counted)
        assert all(by_trial[t]["terminal_class"] not in VALID for t in held_out)
        mine = [r for r in rows if r["experiment_id"] == job]
        assert {r["labels"]["harbor.trial_name"] for r in mine if r["terminal_class"] in VALID} == (
            set(counted)
        )
        assert math.isclose(_rate(mine), math.fsum(counted.values()) / len(counted))
    gpt5 = json.loads((IMPORTERS / "harbor" / "tb2-terminus-gpt5" / "result.json").read_text())
    (evals,) = gpt5["stats"]["evals"].values()
    assert len([t for ts in evals["reward_stats"]["reward"].values() for t in ts]) == 12
    assert _rate([r for r in rows if r["experiment_id"] == "tb2-terminus-gpt5"]) == 6 / 11


@pytest.mark.parametrize(
    "runs",
    [
        IMPORTERS / "terminal-bench" / "runs",
        IMPORTERS / "terminal-bench" / "leaderboard",
        IMPORTERS / "terminal-bench" / "three-models",
    ],
)
def test_terminal_bench_accuracy_is_the_pooled_rate(tmp_path, runs):
    """terminal-bench's `accuracy` is resolved / every trial of the run-level list; it counts a
    trial with no verdict (parse error, test timeout, harness error, ...) as unresolved, where
    the registry holds it out. So: pooled rate over the listed trials = accuracy x listed /
    (listed - invalid listed).
    """
    rows = _attempts(tmp_path / "reg", "terminal-bench", runs)
    by_trial = {r["labels"]["terminal_bench.trial_name"]: r for r in rows}
    lists = [p for p in runs.rglob("*results.json") if _is_list(p)]
    assert lists
    for file in lists:
        document = json.loads(file.read_text())
        listed = [by_trial[t["trial_name"]] for t in document["results"]]
        invalid = Counter(r["terminal_class"] in VALID for r in listed)[False]
        expected = document["accuracy"] * len(listed) / (len(listed) - invalid)
        assert math.isclose(_rate(listed), expected, rel_tol=1e-12), file


def _is_list(path: Path) -> bool:
    document = json.loads(path.read_text())
    return (
        isinstance(document, dict)
        and isinstance(document.get("results"), list)
        and all(isinstance(t, dict) and "trial_name" in t for t in document["results"])
        and bool(document["results"])
    )
