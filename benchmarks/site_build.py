"""Time `registry site` on a large registry.

    python benchmarks/site_build.py [--attempts 100000] [--tasks 500]

Builds a registry of realistic attempt records (like `ingest_throughput.py`): a baseline
agent system run in four weekly experiments and a candidate in the last two, each experiment
its own ingest (so generations differ), plus one stored comparison. Then times, in one run,
writing the whole site (index, every task, system, trend and comparison page) into a fresh
directory, and writing it again on unchanged evidence (nothing is rewritten).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from registry import (
    cohort_key_of,
    compare,
    ingest,
    open_store,
    parse_selector,
    record_comparison,
    terminal_identity_of,
)
from registry.render.site import build_site

INVALID = ["harness_failure", "environment_failure"]
EXPERIMENTS = [("base", week) for week in range(4)] + [("cand", week) for week in (2, 3)]
"""(system, week) of each experiment; the candidate runs in the last two weeks."""


def make_records(count: int, tasks: int, seed: int = 1) -> dict[str, list[dict[str, Any]]]:
    """Return `count` valid records over `tasks` tasks, grouped by experiment id."""
    rng = random.Random(seed)
    difficulty = [rng.random() for _ in range(tasks)]
    inputs = {
        "case_digest": "blake3:" + "c" * 64,
        "prompt_digest": "blake3:" + "1" * 64,
        "source_digest": "git:8f2e7c1",
        "wiki_digest": "none",
        "tool_policy_digest": "blake3:" + "2" * 64,
        "budget": {"turns": 50, "time_seconds": 1800, "cost_usd": 2.5},
        "harness_package": "swebench==4.0.3",
        "grader_version": "grader-1.0",
        "agent_system_digest": "blake3:" + "a" * 64,
        "environment_digest": "blake3:" + "e" * 64,
    }
    out: dict[str, list[dict[str, Any]]] = {}
    for i in range(count):
        t = i % tasks
        slot = i // tasks
        system, week = EXPERIMENTS[slot % len(EXPERIMENTS)]
        experiment = f"exp-{system}-w{week}"
        p = min(1.0, difficulty[t] + (0.08 if system == "cand" else 0.0))
        if rng.random() < 0.04:
            outcome = rng.choice(INVALID)
        else:
            outcome = "resolved" if rng.random() < p else rng.choice(["model_failure", "timeout"])
        day = 2 + 7 * week
        record: dict[str, Any] = {
            "experiment_id": experiment,
            "task_id": f"repo__project-{t:05d}",
            "repeat_index": slot // len(EXPERIMENTS),
            "inputs": {
                **inputs,
                "case_digest": f"blake3:{t:064x}",
                "agent_system_digest": "blake3:" + ("a" if system == "base" else "b") * 64,
            },
            "terminal_class": outcome,
            "envelope": {
                "agent": "coder",
                "agent_version": "2.3.0" if system == "base" else "2.4.0",
                "provider": "anthropic",
                "model": "m-1",
                "harness_version": "h-0.9",
            },
            "runtime_seconds": round(rng.uniform(30, 1800), 3),
            "started_at": f"2026-11-{day:02d}T09:00:00Z",
            "finished_at": f"2026-11-{day:02d}T09:30:00Z",
            "cost_usd": None if rng.random() < 0.1 else round(rng.uniform(0.01, 2), 4),
            "input_tokens": rng.randint(1000, 400000),
            "output_tokens": rng.randint(100, 30000),
            "cached_input_tokens": None,
            "labels": {"temperature": "0.7"},
        }
        cohort = cohort_key_of(record["task_id"], record["inputs"])
        record["terminal_identity"] = terminal_identity_of(record, cohort)
        out.setdefault(experiment, []).append(record)
    return out


def run(attempts: int, tasks: int, keep: Path | None = None) -> dict[str, Any]:
    """Build the registry, then time the site twice; return the measurements."""
    work = Path(tempfile.mkdtemp(prefix="registry-site-bench-"))
    try:
        root = work / "registry"
        for experiment, records in sorted(make_records(attempts, tasks).items()):
            source = work / f"{experiment}.jsonl"
            with open(source, "w") as handle:
                for record in records:
                    handle.write(json.dumps(record) + "\n")
            ingest(root, [str(source)])
        store = open_store(root)
        comparison = compare(
            store, parse_selector("agent_version=2.3.0"), [parse_selector("agent_version=2.4.0")]
        )
        record_comparison(store, comparison)
        site = keep or work / "site"
        start = time.perf_counter()
        first = build_site(store, site)
        first_s = time.perf_counter() - start
        start = time.perf_counter()
        again = build_site(store, site)
        again_s = time.perf_counter() - start
        return {
            "attempts": attempts,
            "tasks": tasks,
            "files": first.files,
            "first_s": first_s,
            "again_s": again_s,
            "rewritten": again.written,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    """Parse arguments, run, print."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--attempts", type=int, default=100_000)
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--keep", type=Path, default=None, help="Write the site here and keep it.")
    args = parser.parse_args()
    m = run(args.attempts, args.tasks, args.keep)
    print(f"registry: {m['attempts']} attempts, {m['tasks']} tasks, 2 systems, 6 experiments")
    print(f"site build     : {m['first_s']:.2f} s ({m['files']} files)")
    print(f"site unchanged : {m['again_s']:.2f} s ({m['rewritten']} files rewritten)")


if __name__ == "__main__":
    main()
