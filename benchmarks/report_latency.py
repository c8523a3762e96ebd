"""`registry report --task` end to end next to a fresh DuckDB query over the task's Parquet.

    python benchmarks/report_latency.py [--attempts 10000] [--tasks 500] [--rounds 5]

Builds a registry of `--attempts` realistic attempts over `--tasks` tasks (one ingest), then
times, in fresh processes, interleaved round by round:

* `registry report --task T --root R`: the installed console script, end to end (read the
  ledger, check the task's segments against their digests, apply the evidence rule, build and
  render the report; the layer is already recorded by an untimed warm-up run, as on every
  CI run after the first);
* a fresh `python -c` that imports DuckDB and runs the same per-task aggregation (per cohort and
  observed system: attempts, valid, resolved, class counts, runtime mean / median / p95,
  cost and tokens; then per experiment) over that task's Parquet segments, named directly.

Prints min and median wall-clock and CPU seconds and the ratios, like `startup.py`, with
bytecode cached as an installed package has it (`--no-bytecode-cache`: compiled on every
run; see `startup.py`). When pandas is installed (statsmodels, a test dependency, pulls it
in), pyarrow imports it on the first conversion of Python values to Arrow; `--hide-pandas`
also times the report with pandas hidden, as in an installation without the test extra.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType

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

VALID = ("resolved", "model_failure", "safety_failure", "timeout")
"""The valid terminal classes (registry_schemas.VALID_CLASSES), written out for the query."""

BY_SYSTEM = f"""
SELECT cohort_key, envelope.agent, envelope.agent_version, envelope.provider, envelope.model,
       envelope.harness_version,
       count(*) AS attempts,
       count(*) FILTER (WHERE terminal_class IN {VALID}) AS valid,
       count(*) FILTER (WHERE terminal_class = 'resolved') AS resolved,
       histogram(terminal_class) AS classes,
       avg(runtime_seconds), median(runtime_seconds), quantile_cont(runtime_seconds, 0.95),
       sum(cost_usd), avg(cost_usd), count(cost_usd),
       sum(input_tokens), sum(output_tokens), sum(cached_input_tokens),
       min(started_at), max(finished_at)
FROM read_parquet($files) WHERE task_id = $task
GROUP BY ALL ORDER BY attempts DESC, cohort_key
"""
BY_EXPERIMENT = f"""
SELECT cohort_key, experiment_id, count(*) AS attempts,
       count(*) FILTER (WHERE terminal_class IN {VALID}) AS valid,
       count(*) FILTER (WHERE terminal_class = 'resolved') AS resolved
FROM read_parquet($files) WHERE task_id = $task
GROUP BY ALL ORDER BY ALL
"""
REFERENCE_CODE = f"""
import json, sys
import duckdb
params = {{"files": json.loads(sys.argv[1]), "task": sys.argv[2]}}
con = duckdb.connect()
for query in ({BY_SYSTEM!r}, {BY_EXPERIMENT!r}):
    for row in con.execute(query, params).fetchall():
        print(row)
"""
HIDE_PANDAS = """
import sys

class NoPandas:  # as if pandas were not installed
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "pandas":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NoPandas())
sys.argv[0] = "registry"
from registry_cli.main import main

main()
"""
REFERENCE = "fresh DuckDB query"


def build(root: Path, attempts: int, tasks: int) -> str:
    """Ingest `attempts` records over `tasks` tasks into a new registry; return one task id."""
    source = root.parent / "attempts.jsonl"
    with open(source, "w") as handle:
        for record in make_records(attempts, tasks):
            handle.write(json.dumps(record) + "\n")
    result = registry.ingest(root, [str(source)])
    assert result.new == attempts, result.new
    source.unlink()
    return "repo__project-00000"


def task_segments(root: Path, task: str) -> list[str]:
    """Return the Parquet segments the ledger records as holding `task`."""
    store = registry.open_store(root)
    return [
        str(store.resolve(segment.path))
        for entry in registry.read_ledger(store)
        for segment in entry.commit.segments
        if task in segment.task_ids
    ]


def run(
    attempts: int,
    tasks: int,
    rounds: int,
    hide_pandas: bool = False,
    warmup: bool = True,
    bytecode: bool = True,
) -> dict[str, startup.Timing]:
    """Build the registry, time the report and the reference query; return the timings."""
    work = Path(tempfile.mkdtemp(prefix="registry-bench-"))
    try:
        root = work / "registry"
        task = build(root, attempts, tasks)
        files = task_segments(root, task)
        args = ["report", "--task", task, "--root", str(root)]
        commands = {
            REFERENCE: [sys.executable, "-c", REFERENCE_CODE, json.dumps(files), task],
            "registry report --task": [*startup.registry_command(), *args],
        }
        if hide_pandas:
            commands["registry report --task (pandas hidden)"] = [
                sys.executable,
                "-c",
                HIDE_PANDAS,
                *args,
            ]
        with startup.child_env(bytecode) as env:
            return startup.interleave(commands, rounds, warmup, env)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    """Parse arguments, run, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=10_000)
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--hide-pandas", action="store_true")
    parser.add_argument("--no-bytecode-cache", action="store_true")
    args = parser.parse_args()
    bytecode = not args.no_bytecode_cache
    timings = run(args.attempts, args.tasks, args.rounds, args.hide_pandas, bytecode=bytecode)
    per_task = args.attempts // args.tasks
    print(
        f"report --task: {args.attempts} attempts, {args.tasks} tasks ({per_task} attempts "
        f"per task), {args.rounds} interleaved rounds, {startup.bytecode_note(bytecode)}"
    )
    for line in startup.describe(timings, REFERENCE):
        print(line)


if __name__ == "__main__":
    main()
