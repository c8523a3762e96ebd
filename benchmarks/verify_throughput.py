"""`registry verify` throughput next to raw blake3 over the same files, in the same run.

    python benchmarks/verify_throughput.py [--attempts 50000] [--tasks 500] [--rounds 7]
                                           [--deep-rounds 1] [--profile]

Builds a registry of `--attempts` attempts (one batch ingest), then times, interleaved round
by round in this process: `registry.verify` at its default depth (re-hash every object, walk
the chain, check counts, retractions, packs, the Merkle tree fields and checkpoints), plain
blake3 reading and hashing every file verify hashes (segments, commits, layers, plans,
checkpoints) one after another, 1 MiB at a time, as a plain script would; and, for
`--deep-rounds` rounds, `registry.verify(deep=True)` (also read every row, re-derive every
attempt id and cohort key, recompute the Merkle tree from the attempt ids). Prints bytes per
second of each, the ratios to raw blake3 (medians of the rounds; the goal is default >= 0.5x),
and `--profile` prints where each depth spends its time.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import io
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import blake3

import registry

_HERE = Path(__file__).resolve().parent
_CHUNK = 1 << 20
HASHED = ("attempts", "ledger", "layers", "plans", "checkpoints")


def _sibling(name: str) -> ModuleType:
    """Load another script of this folder (the folder is not a package)."""
    spec = importlib.util.spec_from_file_location(name, _HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


flat_reads = _sibling("flat_reads")


def files_of(root: Path) -> list[Path]:
    """Every file verify hashes."""
    return sorted(p for top in HASHED for p in (root / top).rglob("*") if p.is_file())


def raw_blake3(files: list[Path]) -> None:
    """Read and hash every file, as a plain script would."""
    for path in files:
        hasher = blake3.blake3()
        with open(path, "rb") as handle:
            while chunk := handle.read(_CHUNK):
                hasher.update(chunk)
        hasher.hexdigest()


def _seconds(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def _profile(call: Callable[[], object], title: str) -> None:
    profiler = cProfile.Profile()
    profiler.runcall(call)
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(12)
    print(f"--- {title}\n{text.getvalue()}")


def run(
    attempts: int, tasks: int, rounds: int, deep_rounds: int = 1, profile: bool = False
) -> dict[str, float]:
    """Build the registry, time both depths and raw blake3; return bytes, seconds, ratios."""
    work = Path(tempfile.mkdtemp(prefix="registry-verify-"))
    try:
        root = work / "registry"
        flat_reads.batch_registry(root, flat_reads.make_records(attempts, tasks))
        store = registry.open_store(root)
        files = files_of(root)
        size = sum(p.stat().st_size for p in files)
        report = registry.verify(store)  # warm the page cache
        assert report.ok and not report.deep, report.problems
        raw_blake3(files)
        verify_s, deep_s, raw_s, deep_raw_s = [], [], [], []
        for index in range(max(rounds, deep_rounds)):
            if index < rounds:
                verify_s.append(_seconds(lambda: registry.verify(store)))
                raw_s.append(_seconds(lambda: raw_blake3(files)))
            if index < deep_rounds:
                deep = registry.verify(store, deep=True)
                assert deep.ok and deep.deep and deep.attempts == attempts, deep.problems
                deep_s.append(_seconds(lambda: registry.verify(store, deep=True)))
                deep_raw_s.append(_seconds(lambda: raw_blake3(files)))
        if profile:
            _profile(lambda: registry.verify(store), "verify (default)")
            if deep_rounds:
                _profile(lambda: registry.verify(store, deep=True), "verify --deep")
        result = {
            "attempts": attempts,
            "files": len(files),
            "bytes": size,
            "verify_s": statistics.median(verify_s),
            "raw_s": statistics.median(raw_s),
        }
        result["ratio"] = result["raw_s"] / result["verify_s"]
        if deep_s:
            result["deep_s"] = statistics.median(deep_s)
            result["deep_raw_s"] = statistics.median(deep_raw_s)
            result["deep_ratio"] = result["deep_raw_s"] / result["deep_s"]
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    """Parse arguments, run, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=50_000)
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--deep-rounds", type=int, default=1)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    r = run(args.attempts, args.tasks, args.rounds, args.deep_rounds, args.profile)
    mb = r["bytes"] / 1e6
    print(f"verify: {r['attempts']} attempts, {r['files']} files, {mb:.1f} MB")
    print(f"registry verify         {r['verify_s']:8.3f}s  {mb / r['verify_s']:9.1f} MB/s")
    print(f"raw blake3              {r['raw_s']:8.3f}s  {mb / r['raw_s']:9.1f} MB/s")
    print(f"ratio (verify throughput / raw blake3 throughput): {r['ratio']:.3f}x (goal >= 0.5x)")
    if "deep_s" in r:
        print(f"registry verify --deep  {r['deep_s']:8.3f}s  {mb / r['deep_s']:9.1f} MB/s")
        print(f"raw blake3 (same rounds) {r['deep_raw_s']:7.3f}s  {mb / r['deep_raw_s']:9.1f} MB/s")
        print(f"ratio --deep: {r['deep_ratio']:.4f}x")


if __name__ == "__main__":
    main()
