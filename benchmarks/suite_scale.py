"""Suite questions at scale: `sql`, `summary` and `compare` over N attempts, as fresh processes.

    python benchmarks/suite_scale.py [--records 1000000] [--tasks 2000] [--root DIR]

Builds (or reuses, with `--root`) a registry of N attempts over T tasks from two systems
(models `m-1` and `m-2`, same suite configuration), ingested as one batch. Then, each as a fresh
process with its wall-clock seconds, CPU seconds and peak resident set size:

* `registry sql` of two queries (a count, and per-model weekly resolved rates) next to plain
  DuckDB running the same query on one Parquet file of the same rows (`read_parquet`), in the
  same run, interleaved; the ratio is the registry's cost over the raw engine;
* `registry summary` and `registry compare --baseline model=m-1 --candidate model=m-2`
  (the issue's goals: ≤ 10 s and ≤ 1 GiB at 1M attempts).

Each command is timed warm (the stored evidence file of `registry.evidence.cache` already
written by an earlier command) over `--rounds` runs, and once cold (the cache emptied first:
the first whole-registry read after an ingest writes the file). The cache is the benchmark's
own (`REGISTRY_CACHE` in its temporary folder).

The machines are shared and noisy: compare the ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROBE = (
    "import atexit, os\n"
    "def _peak():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            os.write(2, f'\\npeak-rss-kib {line.split()[1]}\\n'.encode())\n"
    "atexit.register(_peak)\n"
)
"""Prepended to every timed process: prints its own peak RSS (VmHWM) on stderr at exit.

`ru_maxrss` of a child carries over the resident size of the process it was forked from (this
one, which holds DuckDB's buffers after writing the reference file), so it is not used.
"""
CLI = PROBE + "from registry_cli.main import main; main()"
QUERIES = {
    "count": "SELECT count(*) AS n FROM {table}",
    "weekly rates": (
        "SELECT envelope.model AS model, date_trunc('week', started_at) AS week, "
        "count(*) AS n, avg(CASE WHEN terminal_class = 'resolved' THEN 1.0 ELSE 0.0 END) AS rate "
        "FROM {table} GROUP BY ALL ORDER BY ALL"
    ),
}
CLASSES = ["resolved"] * 5 + ["model_failure", "timeout", "harness_failure"]


def write_records(path: Path, count: int, tasks: int) -> None:
    from registry import cohort_key_of, terminal_identity_of

    rng = random.Random(7)
    inputs = {
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
    cohorts = {}
    with open(path, "w") as out:
        for i in range(count):
            task, model = i % tasks, "m-1" if (i // tasks) % 2 == 0 else "m-2"
            task_id = f"repo__project-{task:05d}"
            task_inputs = {**inputs, "case_digest": f"blake3:{task:064x}"}
            if task_id not in cohorts:
                cohorts[task_id] = cohort_key_of(task_id, task_inputs)
            day = 1 + (i * 28) // count
            record = {
                "experiment_id": f"exp-{model}",
                "task_id": task_id,
                "repeat_index": i // (2 * tasks),
                "inputs": task_inputs,
                "terminal_class": rng.choice(CLASSES),
                "envelope": {
                    "agent": "coder",
                    "agent_version": "2.3.0",
                    "provider": "anthropic",
                    "model": model,
                    "harness_version": "h-0.9",
                },
                "runtime_seconds": round(rng.uniform(30, 1800), 3),
                "started_at": f"2026-10-{day:02d}T09:00:00Z",
                "finished_at": f"2026-10-{day:02d}T09:30:00Z",
                "cost_usd": round(rng.uniform(0.01, 2), 4),
                "input_tokens": rng.randint(1000, 400000),
                "output_tokens": rng.randint(100, 30000),
                "cached_input_tokens": None,
                "labels": {},
            }
            record["terminal_identity"] = terminal_identity_of(record, cohorts[task_id])
            out.write(json.dumps(record) + "\n")


def measured(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int]:
    """Wall and CPU seconds (rusage of exactly that child) and peak RSS of one fresh process.

    The process is `python -c PROBE + code`: its peak RSS is the `VmHWM` it prints at exit.
    """
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"{' '.join(args[:6])} failed: {err[-2000:]}")
    peaks = [line.split()[1] for line in err.splitlines() if line.startswith("peak-rss-kib ")]
    if not peaks:
        raise SystemExit(f"{' '.join(args[:6])} printed no peak RSS")
    return wall, usage.ru_utime + usage.ru_stime, int(peaks[-1]) * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--root", type=Path, help="reuse (or build here) the registry")
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="suite-scale-"))
    root = options.root or work / "reg"
    try:
        if not (root / "REGISTRY").exists():
            source = work / "in.jsonl"
            start = time.perf_counter()
            write_records(source, options.records, options.tasks)
            print(f"wrote {options.records} records in {time.perf_counter() - start:.1f} s")
            wall, cpu, rss = measured(
                [sys.executable, "-c", CLI, "ingest", str(source), "--root", str(root)]
            )
            print(f"ingest (one batch): {wall:.1f} s wall, {cpu:.1f} s CPU, {rss / 2**20:.0f} MiB")
            source.unlink()
        one = work / "one.parquet"
        import duckdb

        import registry

        store = registry.open_store(root)
        paths = [
            str(store.resolve(s.path))
            for e in registry.read_ledger(store)
            for s in e.commit.segments
        ]
        con = duckdb.connect()
        con.execute(
            f"COPY (SELECT * FROM read_parquet({paths!r}, union_by_name = true)) "
            f"TO '{one}' (FORMAT parquet)"
        )
        count = con.execute(f"SELECT count(*) FROM '{one}'").fetchall()[0]
        print(f"{count[0]} attempts in {len(paths)} segments; reference: one Parquet file\n")
        cache = work / "cache"
        env = {**os.environ, "REGISTRY_CACHE": str(cache)}

        def cold(args: list[str]) -> tuple[float, float, int]:
            shutil.rmtree(cache, ignore_errors=True)
            return measured(args, env)

        rows = []
        for name, query in QUERIES.items():
            command = [sys.executable, "-c", CLI, "sql", query.format(table="attempts")]
            command += ["--root", str(root), "--format", "json"]
            code = PROBE + "import duckdb, sys; duckdb.sql(sys.argv[1]).fetchall()"
            reference = [sys.executable, "-c", code, query.format(table=f"read_parquet('{one}')")]
            first = cold(command)
            mine: list[tuple[float, float, int]] = []
            raw: list[tuple[float, float, int]] = []
            for _ in range(options.rounds):
                mine.append(measured(command, env))
                raw.append(measured(reference))
            rows.append((f"sql {name}", first, mine, raw))
        for name, args in (
            ("summary", ["summary", "--format", "json"]),
            (
                "compare",
                ["compare", "--baseline", "model=m-1", "--candidate", "model=m-2"]
                + ["--format", "json"],
            ),
        ):
            command = [sys.executable, "-c", CLI, *args, "--root", str(root)]
            first = cold(command)
            mine = [measured(command, env) for _ in range(options.rounds)]
            rows.append((name, first, mine, None))
        print(
            f"{'command':<18} {'cold wall s':>11} {'RSS MiB':>8} {'warm wall s':>11} {'CPU s':>7}"
            f" {'RSS MiB':>8} {'raw DuckDB s':>13} {'ratio':>6}"
        )
        for name, first, mine, raw in rows:
            wall = statistics.median(m[0] for m in mine)
            cpu = statistics.median(m[1] for m in mine)
            rss = max(m[2] for m in mine) / 2**20
            start = f"{name:<18} {first[0]:11.2f} {first[2] / 2**20:8.0f} {wall:11.2f} {cpu:7.2f}"
            if raw is None:
                print(f"{start} {rss:8.0f} {'-':>13} {'-':>6}")
                continue
            ref = statistics.median(r[0] for r in raw)
            ref_rss = max(r[2] for r in raw) / 2**20
            print(f"{start} {rss:8.0f} {ref:13.2f} {wall / ref:5.2f}x  (DuckDB {ref_rss:.0f} MiB)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
