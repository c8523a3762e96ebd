"""The HTML report renders in a real headless Chromium, plot included."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from PIL import Image

import registry
from registry.render import report as render
from tests.conftest import CHROMIUM_FLAGS, QUICKSTART, chromium

FLAGS = CHROMIUM_FLAGS
PLOT_BLUE = (0x1F, 0x5F, 0xBF)
MARGIN = 24  # body margin in the page's CSS


def _close(pixel: tuple[int, ...], color: tuple[int, int, int], tol: int = 40) -> bool:
    return all(abs(a - b) <= tol for a, b in zip(pixel[:3], color, strict=True))


@pytest.mark.timeout(120)
def test_html_report_plot_renders_in_chromium(tmp_path: Path):
    browser = chromium()
    root = tmp_path / "reg"
    registry.ingest(root, [str(QUICKSTART)])
    report = registry.build_report(registry.open_store(root), "astropy__astropy-12907")
    page = tmp_path / "report.html"
    page.write_text(registry.render_html(report), encoding="utf-8")
    shot = tmp_path / "report.png"
    command = [
        browser,
        *FLAGS,
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1280,900",
        f"--screenshot={shot}",
        page.as_uri(),
    ]
    subprocess.run(command, capture_output=True, timeout=90, check=False)
    assert shot.is_file() and shot.stat().st_size > 0, "Chromium wrote no screenshot"

    image = Image.open(shot).convert("RGB")
    left = MARGIN + render._LABEL_W
    right = left + render._PLOT_W
    width, height = image.size
    pixels = image.load()
    blue_columns = {
        x
        for x in range(left - 2, min(right + 3, width))
        for y in range(height)
        if _close(pixels[x, y], PLOT_BLUE)
    }
    # Intervals are drawn as bars across the plot area: many distinct columns are blue.
    assert len(blue_columns) > 100, f"plot not visible: {len(blue_columns)} blue columns"
    outside = [
        x
        for x in range(0, left - 10)
        for y in range(0, height, 4)
        if _close(pixels[x, y], PLOT_BLUE, tol=10)
    ]
    assert not outside, "interval colour found outside the plot area"
    # The legacy (unobserved provider) system is drawn in grey inside the plot area.
    grey = sum(
        _close(pixels[x, y], (0x8A, 0x8A, 0x8A), tol=12)
        for x in range(left, right)
        for y in range(height)
    )
    assert grey > 20
    # And the page is not blank around it: text rendered in the label column.
    dark = sum(pixels[x, y][0] < 80 for x in range(MARGIN, left - 10) for y in range(0, height, 2))
    assert dark > 200
