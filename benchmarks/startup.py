"""Start-up of the `registry` command next to a fresh Python importing DuckDB.

    python benchmarks/startup.py [--rounds 10]

Times, in fresh processes, interleaved round by round (reference, then each command):

* `python -c "import duckdb"`: the floor every command that reads the registry pays;
* `registry --help` and `registry --version` (the installed console script).

Prints the minimum and median wall-clock and CPU seconds (user + system, of the child) of
each, and each command's ratio to the reference. The machines are shared and noisy, so the
figures to compare across runs are the ratios; on a loaded machine the CPU seconds are the
steadier ones.

The timed processes run as an installed package does: with compiled bytecode. pip compiles
a package's modules when it installs them (DuckDB's, typer's and pydantic's are compiled),
but the registry is installed editable and an interpreter told not to write bytecode
(`PYTHONDONTWRITEBYTECODE`, set on the development machine) would compile its sources on
every run. So every timed process gets a private bytecode cache (`PYTHONPYCACHEPREFIX`, in
a temporary directory) that the untimed warm-up run fills; `--no-bytecode-cache` times the
sources compiled on every run instead.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REFERENCE = "python -c 'import duckdb'"


@dataclass
class Timing:
    """Wall-clock and CPU seconds of each run of one command."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def best(self) -> float:
        """The fastest wall-clock run."""
        return min(self.wall)

    def median(self) -> float:
        """The median wall-clock run."""
        return statistics.median(self.wall)

    def cpu_median(self) -> float:
        """The median CPU seconds."""
        return statistics.median(self.cpu)


def registry_command() -> list[str]:
    """Return the argv prefix that runs the installed `registry` console script.

    The script next to this interpreter is preferred over one found on PATH, which may be a
    version manager's shim (a shell script that would be timed too).
    """
    beside = Path(sys.executable).with_name("registry")
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("registry")
    if found is not None:
        return [found]
    return [sys.executable, "-c", "import sys; from registry_cli.main import main; main()"]


@contextlib.contextmanager
def child_env(bytecode: bool = True) -> Iterator[dict[str, str] | None]:
    """Yield the environment of the timed processes (None: this process's own).

    With `bytecode`, Python may write and reuse compiled bytecode, in a private temporary
    directory removed afterwards (see the module's documentation).
    """
    if not bytecode:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="registry-bench-pycache-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        yield {**env, "PYTHONPYCACHEPREFIX": cache}


def run_once(argv: Sequence[str], env: Mapping[str, str] | None = None) -> tuple[float, float]:
    """Run one fresh process to completion; return its wall-clock and CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        message = result.stderr.decode(errors="replace").strip()
        raise RuntimeError(f"{' '.join(argv)} exited {result.returncode}: {message}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def interleave(
    commands: Mapping[str, Sequence[str]],
    rounds: int,
    warmup: bool = True,
    env: Mapping[str, str] | None = None,
) -> dict[str, Timing]:
    """Run every command once per round, in order (A B A B ...), after an untimed warm-up."""
    for argv in commands.values() if warmup else ():  # page and bytecode caches, first runs
        run_once(argv, env)
    timings = {name: Timing() for name in commands}
    for _ in range(rounds):
        for name, argv in commands.items():
            wall, cpu = run_once(argv, env)
            timings[name].wall.append(wall)
            timings[name].cpu.append(cpu)
    return timings


def describe(timings: Mapping[str, Timing], reference: str) -> list[str]:
    """Return one line per command: min and median wall, median CPU, ratios to `reference`."""
    ref = timings[reference]
    width = max(len(name) for name in timings)
    lines = [
        f"{'':<{width}}  wall min  wall median  CPU median  ratio (median wall / min wall / CPU)"
    ]
    for name, t in timings.items():
        ratio = (
            "reference"
            if name == reference
            else f"{t.median() / ref.median():.2f}x / {t.best() / ref.best():.2f}x / "
            f"{t.cpu_median() / ref.cpu_median():.2f}x"
        )
        lines.append(
            f"{name:<{width}}  {t.best():7.3f}s  {t.median():10.3f}s  {t.cpu_median():9.3f}s  "
            f"{ratio}"
        )
    return lines


def run(rounds: int, warmup: bool = True, bytecode: bool = True) -> dict[str, Timing]:
    """Time `registry --help`, `registry --version` and the reference; return the timings."""
    registry = registry_command()
    commands = {
        REFERENCE: [sys.executable, "-c", "import duckdb"],
        "registry --help": [*registry, "--help"],
        "registry --version": [*registry, "--version"],
    }
    with child_env(bytecode) as env:
        return interleave(commands, rounds, warmup, env)


def bytecode_note(bytecode: bool) -> str:
    """How the timed processes got their bytecode, for the header line."""
    return "bytecode cached" if bytecode else "sources compiled on every run"


def main() -> None:
    """Parse arguments, run, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--no-bytecode-cache", action="store_true")
    args = parser.parse_args()
    bytecode = not args.no_bytecode_cache
    timings = run(args.rounds, bytecode=bytecode)
    print(
        f"start-up, {args.rounds} interleaved rounds, {' '.join(registry_command())}, "
        f"{bytecode_note(bytecode)}"
    )
    for line in describe(timings, REFERENCE):
        print(line)


if __name__ == "__main__":
    main()
