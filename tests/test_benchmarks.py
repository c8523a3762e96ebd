"""The ingest benchmark runs (small here; the full 100,000-record run is `-m slow`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "ingest_throughput.py"


def _load():
    spec = importlib.util.spec_from_file_location("ingest_throughput", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_smoke():
    result = _load().run(records=2_000, tasks=50)
    assert result["records"] == 2_000 and result["registry_s"] > 0 and result["pyarrow_s"] > 0


@pytest.mark.slow
def test_benchmark_100k(capsys):
    result = _load().run(records=100_000, tasks=500)
    ratio = result["registry_s"] / result["pyarrow_s"]
    with capsys.disabled():
        print(
            f"\ningest 100k: registry {result['registry_s']:.2f}s, pyarrow "
            f"{result['pyarrow_s']:.2f}s, ratio {ratio:.1f}x"
        )
