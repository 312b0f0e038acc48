"""The HTML report as a reader sees it: rendered by a real headless browser (Debian's `chromium`), every
plot decodes and loads, and nothing on the page is wider than the window.

The browser is installed by the `chromium` fixture when it is missing and can be (root, apt-get); the
test is skipped, with the reason, only where it cannot be.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from .cliharness import run_cli

pytestmark = pytest.mark.spark

SPARK_TIMEOUT_S = 600
BROWSER_TIMEOUT_S = 60
INSTALL_TIMEOUT_S = 900
WINDOW_HEIGHT = 4000
WIDTHS = (1280, 720)  # a desktop window, and one narrower than the plots
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_BYTES_PER_PIXEL = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}  # by colour type, at 8 bits per sample
LONG_TOPIC = "orders-eu-west-1-" + "long-topic-name-" * 6  # 113 characters
# Appended to a copy of the report (the report itself holds no script): once the page has loaded, what the
# browser laid out, written into the DOM that --dump-dom prints.
LAYOUT_PROBE = """<script>
addEventListener("load", () => {
  const width = document.documentElement.clientWidth;
  const result = {
    width, innerWidth, scrollWidth: document.documentElement.scrollWidth,
    images: [...document.images].map(img => ({
      figure: img.closest("figure") ? img.closest("figure").id : null, complete: img.complete,
      naturalWidth: img.naturalWidth, naturalHeight: img.naturalHeight,
      right: img.getBoundingClientRect().right, shownWidth: img.getBoundingClientRect().width})),
    wider: [...document.body.querySelectorAll("*")]
      .filter(e => e.getBoundingClientRect().right > width + 0.5)
      .map(e => e.tagName + (e.id ? "#" + e.id : "")),
    headings: [...document.querySelectorAll("h2")].map(h => h.textContent),
    timesShown: [...document.querySelectorAll("h2")]
      .map(h => document.body.innerText.split(h.textContent).length - 1),
    empty: [...document.querySelectorAll("p.empty")].map(p => p.textContent),
  };
  const out = document.createElement("pre");
  out.id = "layout-probe";
  out.textContent = JSON.stringify(result);
  document.body.append(out);
});
</script>"""


@pytest.fixture(scope="session")
def chromium() -> str:
    """The `chromium` command; installed with apt-get when missing (skips only where it cannot be)."""
    found = shutil.which("chromium")
    if found:
        return found
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip("chromium is not installed and cannot be here (needs root and apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "chromium"]
    done = subprocess.run(install, capture_output=True, env=env, timeout=INSTALL_TIMEOUT_S, check=False)
    if done.returncode != 0:  # package lists missing or stale
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env, timeout=INSTALL_TIMEOUT_S,
                       check=False)
        done = subprocess.run(install, capture_output=True, env=env, timeout=INSTALL_TIMEOUT_S, check=False)
    found = shutil.which("chromium")
    if not found:
        last = (done.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"apt-get install chromium failed: {last}")
    return found


def _browser(chromium: str, profile: Path, width: int, *args: str) -> subprocess.CompletedProcess[bytes]:
    argv = [chromium, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars", "--no-first-run",
            f"--user-data-dir={profile}", f"--window-size={width},{WINDOW_HEIGHT}", *args]
    done = subprocess.run(argv, capture_output=True, timeout=BROWSER_TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return done


def decode_png(data: bytes) -> tuple[int, int]:
    """(width, height) of a PNG after checking every chunk's CRC, the IEND and the inflated pixel rows.

    Raises:
        AssertionError: `data` is not a whole, decodable 8-bit PNG.
    """
    assert data.startswith(PNG_SIGNATURE)
    pos, chunks, idat = len(PNG_SIGNATURE), [], b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"bad CRC in {kind!r}"
        chunks.append(kind)
        idat += body if kind == b"IDAT" else b""
        pos += 12 + length
    assert chunks[0] == b"IHDR" and chunks[-1] == b"IEND" and pos == len(data)
    width, height, depth, colour = struct.unpack(">IIBB", data[16:26])
    assert depth == 8, depth
    assert len(zlib.decompress(idat)) == height * (1 + width * PNG_BYTES_PER_PIXEL[colour])
    return width, height


def _data_uri_pngs(page: str) -> dict[str, bytes]:
    found = re.findall(r'<figure id="([^"]+)"><img [^>]*src="data:image/png;base64,([^"]+)"', page)
    return {figure: base64.b64decode(data) for figure, data in found}


@pytest.fixture(scope="module")
def report_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of a small store: three topics (one with a 113-character name), keys in several index
    files, a consumer group on two queues."""
    from rocketstore import Message, MessageStore, StoreConfig

    folder = tmp_path_factory.mktemp("browser-report")
    store = folder / "store"
    config = StoreConfig(commitlog_file_size=1 << 20, consume_queue_file_entries=1000, index_hash_slots=64,
                         index_max_entries=100)
    with MessageStore.open(store, config) as opened:
        for n in range(300):
            topic = ("Orders", "Payments", LONG_TOPIC)[n % 3]
            body = b'{"order": %d, "note": "%s"}' % (n, b"x" * (n % 50))
            opened.put(Message(topic, body, queue_id=n % 2, tags="Created", keys=[f"order-{n}"]))
        opened.commit_offset("billing-service", "Orders", 0, 40)
        opened.commit_offset("billing-service", "Orders", 1, 10)
    page = folder / "report.html"
    geometry = ["--commitlog-file-size", str(1 << 20), "--consume-queue-file-entries", "1000",
                "--index-hash-slots", "64", "--index-max-entries", "100"]
    result = run_cli("report", store, page, *geometry, "--json", timeout=SPARK_TIMEOUT_S)
    summary = result.json()
    assert summary["messages"] == 300 and summary["index_files"] >= 3
    return page


def test_the_report_renders_in_a_browser_with_every_plot_loaded_and_nothing_too_wide(
        chromium: str, report_page: Path, tmp_path: Path):
    page = report_page.read_text(encoding="utf-8")
    pngs = _data_uri_pngs(page)
    assert set(pngs) == {f"plot-{name}" for name in ("message-rate", "message-sizes", "queue-depth",
                                                     "consumer-lag", "index-fill", "index-chains", "disk-use")}
    sizes = {figure: decode_png(png) for figure, png in pngs.items()}
    probe_page = tmp_path / "probed.html"
    probe_page.write_text(page.replace("</body>", LAYOUT_PROBE + "</body>"), encoding="utf-8")
    for width in WIDTHS:
        dom = _browser(chromium, tmp_path / "profile", width, "--virtual-time-budget=5000", "--dump-dom",
                       probe_page.as_uri()).stdout.decode("utf-8")
        probe = re.search(r'<pre id="layout-probe">(.*?)</pre>', dom, re.S)
        assert probe, f"the page did not finish loading at width {width}"
        layout = json.loads(html.unescape(probe.group(1)))
        assert layout["width"] == width
        assert layout["scrollWidth"] <= layout["width"], layout
        assert layout["wider"] == [], f"wider than the {width}-pixel page: {layout['wider']}"
        assert {img["figure"] for img in layout["images"]} == set(pngs)
        for img in layout["images"]:
            assert img["complete"] and (img["naturalWidth"], img["naturalHeight"]) == sizes[img["figure"]], img
            assert img["right"] <= width and img["shownWidth"] > 0.5 * min(width, sizes[img["figure"]][0]), img
        # each section's title is said once, as its heading (no caption repeats it)
        assert layout["timesShown"] == [1] * len(layout["headings"]), layout["headings"]
        assert "Messages stored per second, per topic" in layout["headings"]
        assert layout["empty"] == []


def test_a_screenshot_of_the_report_is_a_whole_page(chromium: str, report_page: Path, tmp_path: Path):
    shot = tmp_path / "report.png"
    _browser(chromium, tmp_path / "profile", WIDTHS[0], f"--screenshot={shot}", report_page.as_uri())
    assert decode_png(shot.read_bytes()) == (WIDTHS[0], WINDOW_HEIGHT)
    image = pytest.importorskip("PIL.Image").open(shot).convert("L")
    darkest, lightest = image.getextrema()
    assert darkest < 64 and lightest > 192  # text and plots on a light page, not a blank or error page
