"""Reads that stay flat: one-task reports as the registry grows; many small ingests and pack.

    python benchmarks/flat_reads.py [--small 10000] [--large 100000] [--per-task 20]
                                    [--ingests 10000] [--rounds 3]

Two measurements, each in fresh processes, interleaved round by round (like `startup.py`):

1. `registry report --task T` on a registry of `--small` attempts and on one of `--large`
   attempts (one batch ingest each, `--per-task` attempts per task, so the task's evidence is
   the same size): the ratio large / small is what "flat" means. The library call alone
   (`build_report`, in this process, without start-up) is timed too.
2. `--ingests` one-attempt ingests (one commit and one segment each, written through the
   library in a loop, as many small CI ingests would) read before `registry pack`, after it,
   and the same records ingested as one batch: `report --task`, `registry sql` (count and
   per-task weekly rates) and `registry verify`. Ratios are to the one batch.

Prints min and median wall-clock and CPU seconds and the ratios.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import orjson

import registry

_HERE = Path(__file__).resolve().parent


def _sibling(name: str) -> ModuleType:
    """Load another script of this folder (the folder is not a package)."""
    spec = importlib.util.spec_from_file_location(name, _HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


startup = _sibling("startup")
make_records = _sibling("ingest_throughput").make_records

COUNT = "SELECT count(*) FROM attempts"
WEEKLY = (
    "SELECT task_id, date_trunc('week', started_at) AS week, count(*) AS n, "
    "sum((terminal_class = 'resolved')::INT) AS resolved FROM attempts GROUP BY ALL ORDER BY ALL"
)


def batch_registry(root: Path, records: list[dict]) -> None:
    """Ingest `records` into a new registry as one batch."""
    source = root.parent / f"{root.name}.jsonl"
    source.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    result = registry.ingest(root, [str(source)])
    assert result.new == len(records), result.new
    source.unlink()


def small_ingests(root: Path, records: list[dict]) -> None:
    """Write one ingest commit (one segment) per record through the library."""
    from registry.evidence.keys import derive_keys, record_json
    from registry.storage import ledger
    from registry.storage.tables import rows_to_table, to_row, write_segment
    from registry_schemas import AttemptRecord

    store = registry.open_store(root, create=True)
    with store.temp_area() as area:
        for i, raw in enumerate(records):
            record = record_json(AttemptRecord.model_validate_json(orjson.dumps(raw)))
            cohort, _, attempt_id = derive_keys(record)
            temp = area / "segment.parquet"
            write_segment(rows_to_table([to_row(record, attempt_id, cohort)]), temp)
            digest = registry.digest_file(temp)
            path = store.segment_path(cohort, digest)
            store.put_file(temp, path)
            temp.unlink()
            segment = {
                "path": path,
                "digest": digest,
                "rows": 1,
                "cohort_key": cohort,
                "task_ids": [record["task_id"]],
            }
            fields = {
                "kind": "ingest",
                "sources": [{"path": f"ci-{i}.jsonl", "digest": digest, "records": 1}],
                "segments": [segment],
                "attempts_read": 1,
                "attempts_new": 1,
                "attempts_present": 0,
            }
            ledger.append(store, fields)


def _cli(*args: str) -> list[str]:
    return [*startup.registry_command(), *args]


def growth(small: int, large: int, per_task: int, rounds: int, work: Path) -> list[str]:
    """Time one-task reports on a small and a large registry; return the printed lines."""
    from registry.analysis.report import build_report

    task = "repo__project-00000"
    roots = {}
    for size in (small, large):
        root = work / f"batch-{size}"
        started = time.perf_counter()
        batch_registry(root, make_records(size, max(1, size // per_task)))
        print(f"  built {size} attempts in {time.perf_counter() - started:.1f}s", flush=True)
        roots[size] = root
    lines = [f"report --task at {small} vs {large} attempts ({per_task} attempts per task)"]
    names = {size: f"report --task, {size} attempts" for size in roots}
    commands = {
        names[size]: _cli("report", "--task", task, "--root", str(root))
        for size, root in roots.items()
    }
    lines += startup.describe(startup.interleave(commands, rounds), names[small])
    library = {}
    for size, root in roots.items():
        store = registry.open_store(root)
        build_report(store, task)  # warm
        best = min(_timed(lambda s=store: build_report(s, task)) for _ in range(rounds))
        library[size] = best
    lines.append(
        f"build_report in-process (no start-up): {library[small]:.3f}s vs "
        f"{library[large]:.3f}s, ratio {library[large] / library[small]:.2f}x"
    )
    return lines


def _timed(call: object) -> float:
    started = time.perf_counter()
    call()  # type: ignore[operator]
    return time.perf_counter() - started


def small_then_pack(ingests: int, tasks: int, rounds: int, work: Path) -> list[str]:
    """Time report, sql and verify on many small ingests, before and after pack, vs a batch."""
    from registry.storage.pack import pack

    records = make_records(ingests, tasks)
    task = "repo__project-00000"
    batch, unpacked, packed = work / "batch", work / "small", work / "packed"
    started = time.perf_counter()
    batch_registry(batch, records)
    print(f"  one batch of {ingests}: {time.perf_counter() - started:.1f}s", flush=True)
    started = time.perf_counter()
    small_ingests(unpacked, records)
    print(f"  {ingests} one-attempt ingests: {time.perf_counter() - started:.1f}s", flush=True)
    shutil.copytree(unpacked, packed, symlinks=True)
    started = time.perf_counter()
    result = pack(registry.open_store(packed))
    print(
        f"  pack: {result.segments_before} -> {result.segments_after} segments in "
        f"{time.perf_counter() - started:.1f}s",
        flush=True,
    )
    layouts = {"one batch": batch, "small ingests": unpacked, "small ingests + pack": packed}
    lines = [f"{ingests} one-attempt ingests over {tasks} tasks: before pack, after, one batch"]
    for label, argv in {
        "report --task": ["report", "--task", task],
        "sql count(*)": ["sql", COUNT],
        "sql weekly rates": ["sql", WEEKLY, "--format", "json"],
        "verify": ["verify"],
    }.items():
        commands = {
            f"{label}: {name}": _cli(*argv, "--root", str(root)) for name, root in layouts.items()
        }
        timings = startup.interleave(commands, rounds)
        lines += startup.describe(timings, f"{label}: one batch")
    return lines


def main() -> None:
    """Parse arguments, run, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--per-task", type=int, default=20)
    parser.add_argument("--ingests", type=int, default=10_000)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-growth", action="store_true")
    parser.add_argument("--skip-pack", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="registry-flat-"))
    try:
        lines = []
        if not args.skip_growth:
            lines += growth(args.small, args.large, args.per_task, args.rounds, work)
        if not args.skip_pack:
            lines += small_then_pack(args.ingests, args.tasks, args.rounds, work)
        print("\n".join(lines))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
