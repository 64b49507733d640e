"""``fleetperf serve``: who may drive the app, and the app in headless Chromium.

The server prints a URL with a token made for this start; the page and the WebSocket
want that token, and the WebSocket the page's own Origin (tui/app/serve.py). Refusals are
checked with real handshakes against a real server.

Chromium (Debian package ``chromium``) is driven over the DevTools protocol: load the page,
wait until the app has drawn, take a screenshot (kept in the test's tmp dir), and find the
footer's key colour in it, which only the running app paints."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import select
import shutil
import socket
import struct
import subprocess
import sys
import time
import urllib.error
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


def _serve(tmp_path: Path, port: int, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    """``fleetperf serve --port PORT ARGS`` in its own session, and the URL it printed."""
    env = {
        **os.environ,
        "FLEETPERF_RESULTS": str(tmp_path / "results"),
        "FLEETPERF_DATA": str(tmp_path / "data"),
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "serve", "--port", str(port), *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    assert server.stdout is not None
    printed, deadline = b"", time.monotonic() + 60
    while not (found := re.search(rb"http://\S+/\?token=[\w-]+", printed)):
        if time.monotonic() > deadline or server.poll() is not None:
            _stop(server)
            raise AssertionError(f"no URL with a token printed: {printed.decode()!r}")
        if select.select([server.stdout], [], [], 1)[0]:
            printed += os.read(server.stdout.fileno(), 4096)
    return server, found.group().decode()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's whole session, then wait until every process of it (the
    tabs' apps and what they started) is gone: SIGKILL what is left after 30 s."""
    os.killpg(proc.pid, 15)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            os.killpg(proc.pid, 0)
            time.sleep(0.2)
        os.killpg(proc.pid, 9)
    except ProcessLookupError:
        pass


async def _handshake(url: str, origin: str | None = None, host: str | None = None) -> int:
    """The HTTP status a WebSocket handshake gets (101: accepted; then the app's first
    output is awaited, so the app really started, and the socket is closed)."""
    headers = {k: v for k, v in (("Origin", origin), ("Host", host)) if v is not None}
    async with aiohttp.ClientSession() as http:
        try:
            async with http.ws_connect(url, headers=headers) as ws:
                first = await ws.receive(timeout=60)
                assert first.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT), first
                return 101
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status


@pytest.mark.slow  # fleetperf serve and its app started over a WebSocket
def test_serve_wants_the_token_and_the_pages_own_origin(tmp_path: Path) -> None:
    port = _free_port()
    server, url = _serve(tmp_path, port)
    try:
        origin = f"http://127.0.0.1:{port}"
        assert url.startswith(f"{origin}/?token=")  # loopback by default
        token = url.rsplit("=", 1)[1]
        assert len(token) >= 40
        # The page: only with the token, and its WebSocket URL carries it.
        page = _wait_http(url, 30)
        assert f'data-session-websocket-url="ws://127.0.0.1:{port}/ws/{token}"' in page
        for wrong in (f"{origin}/", f"{origin}/?token=x{token}"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(wrong, timeout=10)
            assert refused.value.code == 403
        ws = f"ws://127.0.0.1:{port}/ws"
        # Another site's page, even with the token; no token; a wrong one; a DNS-rebound
        # name; then the page's own origin with the token: the app starts.
        assert asyncio.run(_handshake(f"{ws}/{token}", "http://evil.example")) == 403
        assert asyncio.run(_handshake(f"{ws}/{token}")) == 403  # no Origin at all
        assert asyncio.run(_handshake(ws, origin)) == 403
        assert asyncio.run(_handshake(f"{ws}/x{token}", origin)) == 403
        evil = f"evil.example:{port}"
        assert asyncio.run(_handshake(f"{ws}/{token}", f"http://{evil}", evil)) == 403
        assert asyncio.run(_handshake(f"{ws}/{token}", origin)) == 101
    finally:
        _stop(server)
    assert server.stdout is not None
    assert token.encode() not in server.stdout.read()  # no access log line repeats it


def test_serve_help_prints_help_and_starts_nothing() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tui.cli", "serve", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: fleetperf serve")
    for flag in ("--host", "--port", "--allow-write"):
        assert flag in out.stdout


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
    debug_port = _free_port()
    server, url = _serve(tmp_path, _free_port())
    browser = None
    try:
        page = _wait_http(url, 60)
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
        png, drawn = asyncio.run(_screenshot(devtools, url, 120))
        (tmp_path / "serve.png").write_bytes(png)
        assert drawn, "the app never replaced the intro dialog"
        assert _count_colour(png, FOOTER_KEY) > 100, "no footer keys in the screenshot"
    finally:
        for proc in (browser, server):
            if proc is not None:
                _stop(proc)
