"""Two segment layouts side by side: one file per cohort (today) or one file per ingest.

    python benchmarks/segment_layout.py [--tasks 500] [--attempts 5] [--ingests 20] [--rounds 5]

Builds the segment rows of `--ingests` ingests of a suite (`--tasks` tasks, `--attempts`
attempts per task per ingest; a task is a cohort) through the registry's own row builder,
then writes them both ways with the registry's writer settings:

* per cohort: one Parquet file per cohort per ingest, as `registry ingest` writes them;
* per ingest: one Parquet file per ingest, sorted by cohort, one row group per cohort.

and times, each as the median of `--rounds` runs in this process (DuckDB connections fresh
each time): writing one ingest's files, a whole-registry count and per-task resolved rates
over every file, and reading one task's rows (per cohort: that task's files, which the ledger
names; per ingest: every file, filtered on `task_id`, which row-group statistics prune).
It prints files, bytes and seconds per layout and the ratios.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from registry.ingest import _check_chunk
from registry.storage.tables import _SMALL_OPTIONS, WRITE_OPTIONS, ZSTD_MIN_ROWS, write_segment

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))
from ingest_throughput import make_records  # noqa: E402


def ingest_tables(tasks: int, attempts: int, ingests: int) -> list[pa.Table]:
    """The segment rows of each ingest (every attempt of the suite, once per ingest)."""
    out = []
    for number in range(ingests):
        records = make_records(tasks * attempts, tasks, seed=number + 1)
        items = [(f"line {i}", json.dumps(r).encode()) for i, r in enumerate(records)]
        tables = [
            _check_chunk("bench", "jsonl", {}, items[i : i + 1024]).table
            for i in range(0, len(items), 1024)
        ]
        table = pa.concat_tables(tables)
        out.append(table.take(pc.sort_indices(table, [("cohort_key", "ascending")])))
    return out


def write_per_cohort(table: pa.Table, folder: Path) -> list[Path]:
    paths = []
    keys = table.column("cohort_key").to_pylist()
    start = 0
    for end in range(1, len(keys) + 1):
        if end == len(keys) or keys[end] != keys[start]:
            path = folder / f"cohort={keys[start][7:]}" / f"{folder.name}-{start}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            write_segment(table.slice(start, end - start).combine_chunks(), path)
            paths.append(path)
            start = end
    return paths


def write_per_ingest(table: pa.Table, folder: Path, rows_per_cohort: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ingest.parquet"
    # the registry's rule for small segments: Snappy below ZSTD_MIN_ROWS rows (per row group)
    options = WRITE_OPTIONS if rows_per_cohort >= ZSTD_MIN_ROWS else _SMALL_OPTIONS
    pq.write_table(table, path, row_group_size=rows_per_cohort, **options)
    return [path]


def timed(fn: Any, rounds: int) -> float:
    runs = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


COUNT = "SELECT count(*) FROM read_parquet(?)"
RATES = (
    "SELECT task_id, avg(CASE WHEN terminal_class = 'resolved' THEN 1.0 ELSE 0.0 END) "
    "FROM read_parquet(?) GROUP BY task_id ORDER BY task_id"
)
ONE_TASK = "SELECT * FROM read_parquet(?) WHERE task_id = ?"


def query(sql: str, files: list[str], *params: Any) -> None:
    con = duckdb.connect()
    con.execute(sql, [files, *params]).fetchall()
    con.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--attempts", type=int, default=5)
    parser.add_argument("--ingests", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="segment-layout-"))
    try:
        tables = ingest_tables(options.tasks, options.attempts, options.ingests)
        task = tables[0].column("task_id")[0].as_py()
        layouts: dict[str, dict[str, Any]] = {}
        for name in ("per cohort", "per ingest"):
            files: list[Path] = []
            for number, table in enumerate(tables):
                folder = work / name.replace(" ", "-") / f"i{number}"
                if name == "per cohort":
                    files += write_per_cohort(table, folder)
                else:
                    files += write_per_ingest(table, folder, options.attempts)

            def write_one(name: str = name, scratch: Path = work / "scratch") -> None:
                shutil.rmtree(scratch, ignore_errors=True)
                if name == "per cohort":
                    write_per_cohort(tables[0], scratch)
                else:
                    write_per_ingest(tables[0], scratch, options.attempts)

            everything = [str(f) for f in files]
            mine = everything  # per ingest: every file, pruned by row-group statistics
            if name == "per cohort":  # the task's own files, as the ledger names them
                key = tables[0].column("cohort_key")[0].as_py()[7:]
                mine = [f for f in everything if f"cohort={key}" in f]
            layouts[name] = {
                "files": len(files),
                "bytes": sum(f.stat().st_size for f in files),
                "write one ingest": timed(write_one, options.rounds),
                "count(*)": timed(lambda e=everything: query(COUNT, e), options.rounds),
                "per-task rates": timed(lambda e=everything: query(RATES, e), options.rounds),
                "one task's rows": timed(lambda m=mine: query(ONE_TASK, m, task), options.rounds),
            }
        rows = options.tasks * options.attempts
        print(
            f"{options.ingests} ingests of {options.tasks} tasks x {options.attempts} attempts "
            f"({rows} rows each, {rows * options.ingests} in all); medians of {options.rounds}"
        )
        cohort, ingest = layouts["per cohort"], layouts["per ingest"]
        print(f"{'':18} {'per cohort':>12} {'per ingest':>12} {'ratio':>7}")
        for figure in ("files", "bytes"):
            print(f"{figure:18} {cohort[figure]:>12,} {ingest[figure]:>12,}")
        for figure in ("write one ingest", "count(*)", "per-task rates", "one task's rows"):
            a, b = cohort[figure], ingest[figure]
            print(f"{figure:18} {a:11.4f}s {b:11.4f}s {a / b:6.2f}x")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
