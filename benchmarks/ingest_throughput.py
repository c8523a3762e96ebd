"""Ingest throughput next to plain pyarrow doing the raw part of the same work.

    python benchmarks/ingest_throughput.py [--records 100000] [--tasks 500]

Writes a JSON Lines file of realistic attempt records, then times, in the same run:

* `registry.ingest` into a fresh registry (validate, canonicalise, three digests per record,
  dedup, one Parquet segment per cohort, publish, commit);
* pyarrow alone: `pyarrow.json.read_json` of the same file and `pyarrow.parquet.write_table`
  of the result (no validation, no digests, one file).

The machines are shared and noisy, so the figure to compare across runs is the ratio.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow.json as pa_json
import pyarrow.parquet as pq

from registry import cohort_key_of, ingest, terminal_identity_of

CLASSES = ["resolved"] * 5 + ["model_failure", "timeout", "harness_failure", "safety_failure"]


def make_records(count: int, tasks: int, seed: int = 1) -> list[dict]:
    """Return `count` valid records spread over `tasks` tasks."""
    rng = random.Random(seed)
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
    records = []
    for i in range(count):
        task = f"repo__project-{i % tasks:05d}"
        record = {
            "experiment_id": f"exp-{i // (count // 4 or 1)}",
            "task_id": task,
            "repeat_index": i // tasks,
            "inputs": {**inputs, "case_digest": f"blake3:{i % tasks:064x}"},
            "terminal_class": rng.choice(CLASSES),
            "envelope": {
                "agent": "coder",
                "agent_version": "2.3.0",
                "provider": "anthropic",
                "model": "m-1",
                "harness_version": "h-0.9",
            },
            "runtime_seconds": round(rng.uniform(30, 1800), 3),
            "started_at": "2026-11-02T09:00:00Z",
            "finished_at": "2026-11-02T09:30:00Z",
            "cost_usd": None if rng.random() < 0.1 else round(rng.uniform(0.01, 2), 4),
            "input_tokens": rng.randint(1000, 400000),
            "output_tokens": rng.randint(100, 30000),
            "cached_input_tokens": None,
            "labels": {"temperature": "0.7"},
        }
        cohort = cohort_key_of(task, record["inputs"])
        record["terminal_identity"] = terminal_identity_of(record, cohort)
        records.append(record)
    return records


def run(records: int, tasks: int) -> dict[str, float]:
    """Time both pipelines once on the same file; return the measurements."""
    work = Path(tempfile.mkdtemp(prefix="registry-bench-"))
    try:
        source = work / "attempts.jsonl"
        with open(source, "w") as handle:
            for record in make_records(records, tasks):
                handle.write(json.dumps(record) + "\n")
        size = source.stat().st_size

        start = time.perf_counter()
        table = pa_json.read_json(source)
        pq.write_table(table, work / "raw.parquet", compression="zstd")
        raw = time.perf_counter() - start

        start = time.perf_counter()
        result = ingest(work / "registry", [str(source)])
        ours = time.perf_counter() - start
        assert result.new == records, result.new
        return {"records": records, "bytes": size, "registry_s": ours, "pyarrow_s": raw}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    """Parse arguments, run, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--tasks", type=int, default=500)
    args = parser.parse_args()
    m = run(args.records, args.tasks)
    mb = m["bytes"] / 1e6
    print(f"input: {m['records']} records, {mb:.1f} MB JSONL, {args.tasks} tasks (cohorts)")
    print(f"registry ingest : {m['registry_s']:.2f} s  {m['records'] / m['registry_s']:,.0f} rec/s")
    print(f"pyarrow raw     : {m['pyarrow_s']:.2f} s  {m['records'] / m['pyarrow_s']:,.0f} rec/s")
    print(f"ratio registry/pyarrow: {m['registry_s'] / m['pyarrow_s']:.1f}x")


if __name__ == "__main__":
    main()
