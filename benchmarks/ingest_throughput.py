"""Ingest throughput, peak memory and re-ingest next to plain pyarrow doing the raw part.

    python benchmarks/ingest_throughput.py [--records 100000] [--tasks 500]

Writes a JSON Lines file of realistic attempt records, then runs, each in a fresh process
(so that each peak resident set size is its own), one after the other:

* pyarrow alone: `pyarrow.json.read_json` of the file and `pyarrow.parquet.write_table` of the
  result (no validation, no digests, one file);
* `registry.ingest` into a fresh registry (validate, canonicalise, three digests per record,
  dedup, one Parquet segment per cohort, publish, commit);
* `registry.ingest` of the same file again (every record already present: nothing is written;
  the same bytes read the same way are counted without being parsed);
* `registry.ingest` of the same records in other bytes (each line with a trailing space): every
  record read, checked and found present.

Times exclude interpreter start-up and imports. The machines are shared and noisy, so the
figures to compare across runs are the ratios; CPU seconds (all threads) are printed next to
wall-clock seconds (CPU includes ingest's worker processes). Peak RSS is the measuring
process's own (a worker process holds far less).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from registry import cohort_key_of, terminal_identity_of

CLASSES = ["resolved"] * 5 + ["model_failure", "timeout", "harness_failure", "safety_failure"]


def make_records(
    count: int, tasks: int, seed: int = 1, first: int = 0, last: int | None = None
) -> list[dict]:
    """Return valid records `first` to `last` of `count` spread over `tasks` tasks."""
    rng = random.Random(seed if first == 0 else seed * 1_000_003 + first)
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
    for i in range(first, min(count, count if last is None else last)):
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


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (ingest's worker processes)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _measure(step: str, source: str, target: str) -> dict[str, float]:
    """Run one step in this process; return wall and CPU seconds and peak RSS in bytes."""
    if step == "pyarrow":
        import pyarrow.json as pa_json
        import pyarrow.parquet as pq

        start, cpu = time.perf_counter(), _cpu()
        pq.write_table(pa_json.read_json(source), target, compression="zstd")
    else:
        import registry.storage.ledger
        import registry.storage.merkle  # noqa: F401  (imports are not part of the figure)
        from registry.ingest import ingest

        start, cpu = time.perf_counter(), _cpu()
        result = ingest(Path(target), [source])
        assert (result.new, result.present) != (0, 0)
    wall, cpu = time.perf_counter() - start, _cpu() - cpu
    return {"wall": wall, "cpu": cpu, "rss": float(_peak_rss())}


def _peak_rss() -> int:
    """Peak resident set size of this process in bytes.

    `VmHWM` of /proc (Linux): unlike `ru_maxrss`, it does not carry over the resident size of
    the parent this process was forked from.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _child(step: str, source: Path, target: Path) -> dict[str, float]:
    command = [sys.executable, __file__, "--step", step, str(source), str(target)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    figures: dict[str, float] = json.loads(out.splitlines()[-1])
    return figures


def run(records: int, tasks: int) -> dict[str, Any]:
    """Time pyarrow, a fresh ingest and a re-ingest of the same file; return the figures."""
    work = Path(tempfile.mkdtemp(prefix="registry-bench-"))
    try:
        source = work / "attempts.jsonl"
        with open(source, "w") as handle:
            for start in range(0, records, 50_000):  # keep this process small
                for record in make_records(records, tasks, first=start, last=start + 50_000):
                    handle.write(json.dumps(record) + "\n")
        size = source.stat().st_size
        raw = _child("pyarrow", source, work / "raw.parquet")
        fresh = _child("ingest", source, work / "registry")
        again = _child("ingest", source, work / "registry")
        # the same records in other bytes (every line with a trailing space): read, checked
        # and found present one by one
        other = work / "other.jsonl"
        with open(source, "rb") as lines, open(other, "wb") as out:
            for line in lines:
                out.write(line.rstrip(b"\n") + b" \n")
        checked = _child("ingest", other, work / "registry")
        return {
            "records": records,
            "bytes": size,
            "registry_s": fresh["wall"],
            "pyarrow_s": raw["wall"],
            "reingest_s": again["wall"],
            "pyarrow": raw,
            "ingest": fresh,
            "reingest": again,
            "rechecked": checked,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _line(name: str, m: dict[str, float], records: int) -> str:
    return (
        f"{name:22s}: {m['wall']:7.2f} s wall {m['cpu']:7.2f} s CPU  "
        f"{records / m['wall']:9,.0f} rec/s  peak RSS {m['rss'] / 2**20:6.0f} MiB"
    )


def main() -> None:
    """Parse arguments, run, print."""
    if len(sys.argv) == 5 and sys.argv[1] == "--step":
        print(json.dumps(_measure(*sys.argv[2:])))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--tasks", type=int, default=500)
    args = parser.parse_args()
    m = run(args.records, args.tasks)
    mb = m["bytes"] / 1e6
    n = m["records"]
    print(f"input: {n} records, {mb:.1f} MB JSONL, {args.tasks} tasks (cohorts)")
    print(_line("pyarrow raw", m["pyarrow"], n))
    print(_line("registry ingest", m["ingest"], n))
    print(_line("re-ingest", m["reingest"], n))
    print(_line("re-ingest, other bytes", m["rechecked"], n))
    print(
        f"ratio registry/pyarrow: {m['registry_s'] / m['pyarrow_s']:.1f}x wall "
        f"({m['ingest']['cpu'] / m['pyarrow']['cpu']:.1f}x CPU); goal <= 2x (0.5x throughput)"
    )
    print(
        f"ratio re-ingest/ingest: {m['reingest_s'] / m['registry_s']:.2f}x wall "
        f"({m['reingest']['cpu'] / m['ingest']['cpu']:.2f}x CPU); goal <= 0.2x"
    )
    print(
        f"ratio re-ingest of the same records in other bytes/ingest: "
        f"{m['rechecked']['wall'] / m['registry_s']:.2f}x wall "
        f"({m['rechecked']['cpu'] / m['ingest']['cpu']:.2f}x CPU)"
    )
    print(f"peak RSS of ingest: {m['ingest']['rss'] / 2**20:.0f} MiB; goal <= 1024 MiB at 1M")


if __name__ == "__main__":
    main()
