"""A one-task report on a bucket root, cold (empty cache) and warm, next to a directory root.

Starts SeaweedFS on loopback (as the tests do), ingests the same records into a directory and
into a bucket prefix, then times `registry report --task` as fresh processes, interleaved:
local, bucket with an empty cache (cold: the ledger and the task's segments are fetched),
bucket with the cache filled by the previous call (warm: only the ledger is read from the
bucket). Prints the median seconds of each and the ratios to the local report.

    python benchmarks/bucket_reads.py [--tasks 200] [--repeats 5] [--ingests 20] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.conftest import make_record  # noqa: E402
from tests.s3server import seaweed_s3  # noqa: E402

CLI = "from registry_cli.main import main; main()"


def timed(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", CLI, *args], env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ingests", type=int, default=20, help="one commit each")
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bucket-reads-"))
    try:
        records = [
            make_record(experiment_id=f"exp-{t % 10}", task_id=f"task-{t}", repeat_index=r)
            for t in range(options.tasks)
            for r in range(options.repeats)
        ]
        sources = [work / f"in-{n}.jsonl" for n in range(options.ingests)]
        for n, source in enumerate(sources):
            part = records[n :: options.ingests]
            source.write_text("".join(json.dumps(r) + "\n" for r in part))
        with seaweed_s3() as server:
            cache = work / "cache"
            env = {**os.environ, **server.env(), "REGISTRY_CACHE": str(cache)}
            bucket, local = server.url("bench"), str(work / "reg")
            for root in (local, bucket):
                for source in sources:
                    subprocess.run(
                        [sys.executable, "-c", CLI, "ingest", str(source), "--root", root],
                        env=env,
                        check=True,
                        capture_output=True,
                    )
            task = f"task-{options.tasks // 2}"
            report = ["report", "--task", task, "--format", "json", "--root"]
            figures: dict[str, list[float]] = {"local": [], "cold": [], "warm": []}
            for _ in range(options.rounds):
                figures["local"].append(timed([*report, local], env))
                shutil.rmtree(cache, ignore_errors=True)
                figures["cold"].append(timed([*report, bucket], env))
                figures["warm"].append(timed([*report, bucket], env))
        medians = {name: statistics.median(values) for name, values in figures.items()}
        print(
            f"{len(records)} attempts, {options.tasks} tasks, {options.ingests} ingest commits; "
            f"report --task {task}"
        )
        for name in ("local", "cold", "warm"):
            ratio = medians[name] / medians["local"]
            print(f"  {name:5} {medians[name]:6.2f} s  ({ratio:.2f}x the directory root)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
