"""``fleetperf serve`` in headless Chromium: the browser shows the app's Cases screen.

Chromium (Debian package ``chromium``) is driven over the DevTools protocol: load the page,
wait until the app has drawn, take a screenshot (kept in the test's tmp dir), and find the
footer's key colour in it, which only the running app paints."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
import urllib.request
import zlib
from pathlib import Path

import aiohttp
import pytest
from app_support import REPO

CHROMIUM = shutil.which("chromium")
FOOTER_KEY = (0xFF, 0xA6, 0x2B)  # textual-dark's accent: the footer's key letters


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_http(url: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                return resp.read().decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and rows of an 8-bit RGB(A) non-interlaced PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and color in (2, 6), (depth, color)
    bpp = 3 if color == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytes(width * bpp)
    for y in range(height):
        kind, line = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line))
        prev = bytes(line)
    return width, bpp, rows


def _count_colour(png: bytes, rgb: tuple[int, int, int], tolerance: int = 12) -> int:
    width, bpp, rows = _png_pixels(png)
    return sum(
        1
        for row in rows
        for x in range(width)
        if all(abs(row[x * bpp + k] - rgb[k]) <= tolerance for k in range(3))
    )


async def _screenshot(devtools: str, url: str, timeout: float) -> tuple[bytes, bool]:
    """Open ``url``; once the page's intro dialog is gone and the app drew, a screenshot."""
    async with aiohttp.ClientSession() as http, http.ws_connect(devtools, max_msg_size=0) as ws:
        ids = iter(range(1, 10_000))

        async def call(method: str, **params: object) -> dict:
            msg_id = next(ids)
            await ws.send_json({"id": msg_id, "method": method, "params": params})
            async for msg in ws:
                reply = json.loads(msg.data)
                if reply.get("id") == msg_id:
                    return reply.get("result", {})
            raise AssertionError("devtools closed")

        await call("Page.enable")
        await call("Page.navigate", url=url)
        check = "getComputedStyle(document.querySelector('.intro-dialog')).display"
        deadline, drawn = time.monotonic() + timeout, False
        while time.monotonic() < deadline and not drawn:
            await asyncio.sleep(1)
            res = await call("Runtime.evaluate", expression=check)
            drawn = res.get("result", {}).get("value") == "none"
        await asyncio.sleep(5)  # let the app finish its first frames
        shot = await call("Page.captureScreenshot", format="png")
        return base64.b64decode(shot["data"]), drawn


@pytest.mark.skipif(CHROMIUM is None, reason="needs the Debian package chromium")
@pytest.mark.slow
def test_serve_shows_the_cases_screen_in_a_browser(tmp_path: Path) -> None:
    port, debug_port = _free_port(), _free_port()
    env = {
        **os.environ,
        "FLEETPERF_SERVE_PORT": str(port),
        "FLEETPERF_RESULTS": str(tmp_path / "results"),
        "FLEETPERF_DATA": str(tmp_path / "data"),
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "serve"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    browser = None
    try:
        page = _wait_http(f"http://localhost:{port}/", 60)
        assert "fleetperf" in page
        browser = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
            + ["--window-size=1280,800", f"--remote-debugging-port={debug_port}"]
            + [f"--user-data-dir={tmp_path / 'chromium'}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        targets = json.loads(_wait_http(f"http://127.0.0.1:{debug_port}/json", 60))
        devtools = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
        png, drawn = asyncio.run(_screenshot(devtools, f"http://localhost:{port}/", 120))
        (tmp_path / "serve.png").write_bytes(png)
        assert drawn, "the app never replaced the intro dialog"
        assert _count_colour(png, FOOTER_KEY) > 100, "no footer keys in the screenshot"
    finally:
        for proc in (browser, server):
            if proc is not None:
                os.killpg(proc.pid, 15)
                proc.wait(timeout=30)
