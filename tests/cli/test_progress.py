from __future__ import annotations

from registry_cli.main import PROGRESS_MIN_BYTES, _progress_factory


def test_progress_only_on_a_terminal_and_for_large_inputs():
    assert _progress_factory(False)(PROGRESS_MIN_BYTES * 4) is None
    assert _progress_factory(True)(PROGRESS_MIN_BYTES - 1) is None
    tick = _progress_factory(True)(PROGRESS_MIN_BYTES)
    assert callable(tick)
    tick(PROGRESS_MIN_BYTES)  # reaching the total stops the bar without error
