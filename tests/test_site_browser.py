"""The site renders in a real headless Chromium at desktop and phone widths, without overflow.

Each page is loaded in an iframe of exactly the viewport size (a headless window cannot be
narrower than 500 px, an iframe can), so media queries and layout see a 1280 px desktop or a
390 px phone. A probe in the wrapper page (never in the site) reads the page's scroll width;
a screenshot of the same frame must not be blank.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from PIL import Image

import registry
from registry.render.site import build_site, page_name
from tests.conftest import CHROMIUM_FLAGS, QUICKSTART, chromium

FLAGS = [*CHROMIUM_FLAGS, "--allow-file-access-from-files", "--virtual-time-budget=10000"]
SIZES = ((1280, 800), (390, 844))
WRAPPER = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>probe</title>
<style>body{{margin:0;background:#fff}}iframe{{border:0;width:{w}px;height:{h}px;display:block}}
</style></head><body><iframe id="page" src="{src}"></iframe><script>
document.getElementById("page").onload = function () {{
  var d = this.contentDocument, w = this.contentWindow;
  document.title = "probe " + d.documentElement.scrollWidth + " " + w.innerWidth;
}};
</script></body></html>
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("site-browser")
    root = base / "reg"
    registry.ingest(root, [str(QUICKSTART)])
    store = registry.open_store(root)
    comparison = registry.compare(
        store,
        registry.parse_selector("experiment=exp-baseline-1102,grader_version=grader-1.0"),
        [registry.parse_selector("agent_version=2.4.0-context-policy")],
    )
    registry.record_comparison(store, comparison)
    out = base / "site"
    build_site(store, out, simulations=1000)
    return out


def _pages(site: Path) -> dict[str, str]:
    task = "astropy__astropy-12907"
    return {
        "index": "index.html",
        "task": f"tasks/{page_name(task, ['task', task])}",
        "system": f"systems/{sorted(p.name for p in (site / 'systems').iterdir())[0]}",
        "trend": f"trends/{sorted(p.name for p in (site / 'trends').iterdir())[0]}",
        "comparison": f"comparisons/{next((site / 'comparisons').iterdir()).name}",
    }


def _run(
    browser: str, profile: Path, args: list[str], url: str
) -> subprocess.CompletedProcess[str]:
    command = [browser, *FLAGS, f"--user-data-dir={profile}", *args, url]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_pages_render_without_horizontal_overflow(site: Path, tmp_path: Path, size):
    browser = chromium()
    width, height = size
    for kind, page in _pages(site).items():
        wrapper = site / f"_probe-{kind}-{width}.html"
        wrapper.write_text(WRAPPER.format(w=width, h=height, src=page), encoding="utf-8")
        try:
            window = f"--window-size={max(width, 500) + 40},{height + 40}"
            dumped = _run(browser, tmp_path / "profile", [window, "--dump-dom"], wrapper.as_uri())
            found = re.search(r"<title>probe (\d+) (\d+)</title>", dumped.stdout)
            assert found, f"{kind}: the page did not load: {dumped.stderr[-500:]}"
            scroll_width, inner_width = map(int, found.groups())
            assert inner_width == width
            assert scroll_width <= width, f"{kind} at {width}px overflows: {scroll_width}px wide"

            shot = tmp_path / f"{kind}-{width}.png"
            _run(browser, tmp_path / "profile", [window, f"--screenshot={shot}"], wrapper.as_uri())
            assert shot.is_file(), f"{kind}: Chromium wrote no screenshot"
            image = Image.open(shot).convert("L").crop((0, 0, width, height))
            dark = sum(image.histogram()[:128])
            assert dark > 0.002 * width * height, f"{kind} at {width}px looks blank ({dark} dark)"
        finally:
            wrapper.unlink(missing_ok=True)
