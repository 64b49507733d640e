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


def _session_argvs(leader: int) -> list[list[str]]:
    """The command lines of the processes in ``leader``'s session."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and os.getsid(int(proc.name)) == leader:
                found.append((proc / "cmdline").read_bytes().decode().split("\0")[:-1])
        except (OSError, ProcessLookupError):
            continue
    return found


async def _app_argv(url: str, origin: str, leader: int) -> list[str]:
    """Connect as the page does; once the app drew, its command line (python -m tui.app)."""
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(url, headers={"Origin": origin}) as ws,
    ):
        await ws.receive(timeout=60)
        (argv,) = [a for a in _session_argvs(leader) if a[1:3] == ["-m", "tui.app"]]
        return argv


@pytest.mark.slow  # fleetperf serve and its app started over a WebSocket
def test_serve_gives_the_app_its_inventory_results_and_data_root(tmp_path: Path) -> None:
    """Issue 39 point 10: the served app used the defaults whatever serve was given."""
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  children:\n    cpu:\n      hosts:\n        localhost:\n")
    mine = ["-i", str(inventory), "--results", str(tmp_path / "mine"), "--data-root", "/srv/d"]
    port = _free_port()
    server, url = _serve(tmp_path, port, *mine)
    try:
        _wait_http(url, 30)
        token = url.rsplit("=", 1)[1]
        origin = f"http://127.0.0.1:{port}"
        argv = asyncio.run(_app_argv(f"ws://127.0.0.1:{port}/ws/{token}", origin, server.pid))
    finally:
        _stop(server)
    assert argv[3:] == ["--read-only", *mine]


@pytest.mark.parametrize("before", [True, False])
def test_serve_refuses_a_store_on_its_command_line(before: bool) -> None:
    """A URL there shows in ps to every user: the served app reads FLEETPERF_STORE."""
    url = ["--store", "postgresql://team:s3cret@db.example/fleetperf"]
    argv = [*url, "serve"] if before else ["serve", *url]
    out = subprocess.run(
        [sys.executable, "-m", "tui.cli", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("fleetperf: error: serve takes no --store")
    assert out.stderr.count("\n") == 1 and "s3cret" not in out.stderr


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
    for flag in ("--host", "--port", "--allow-write", "--results", "--inventory", "--data-root"):
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


async def _requests(devtools: str, url: str, timeout: float) -> tuple[list[str], bool]:
    """Every URL the page asked for while it loaded and the app drew, and whether it drew."""
    async with aiohttp.ClientSession() as http, http.ws_connect(devtools, max_msg_size=0) as ws:
        asked: list[str] = []
        replies: dict[int, dict] = {}

        async def call(msg_id: int, method: str, **params: object) -> dict:
            await ws.send_json({"id": msg_id, "method": method, "params": params})
            async for msg in ws:
                event = json.loads(msg.data)
                if event.get("method") == "Network.requestWillBeSent":
                    asked.append(event["params"]["request"]["url"])
                if "id" in event:
                    replies[event["id"]] = event.get("result", {})
                    if event["id"] == msg_id:
                        return replies[msg_id]
            raise AssertionError("devtools closed")

        await call(1, "Network.enable")
        await call(2, "Page.navigate", url=url)
        check = "getComputedStyle(document.querySelector('.intro-dialog')).display"
        deadline, drawn, ids = time.monotonic() + timeout, False, iter(range(3, 10_000))
        while time.monotonic() < deadline and not drawn:
            await asyncio.sleep(1)
            res = await call(next(ids), "Runtime.evaluate", expression=check)
            drawn = res.get("result", {}).get("value") == "none"
        await asyncio.sleep(3)  # what the first frames ask for (fonts)
        await call(next(ids), "Runtime.evaluate", expression="1")
        return asked, drawn


@pytest.mark.skipif(CHROMIUM is None, reason="needs the Debian package chromium")
@pytest.mark.slow
def test_the_served_page_fetches_nothing_from_elsewhere(tmp_path: Path) -> None:
    """Issue 41 point 11: the page loaded its font from fonts.googleapis.com; in an
    air-gapped lab it waited or fell back. Every request the page makes goes to the server
    (the browser resolves no other name: --host-resolver-rules, as with the network off)."""
    debug_port, port = _free_port(), _free_port()
    server, url = _serve(tmp_path, port)
    browser = None
    try:
        _wait_http(url, 60)
        browser = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
            + ["--window-size=1280,800", f"--remote-debugging-port={debug_port}"]
            + ["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
            + [f"--user-data-dir={tmp_path / 'chromium'}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        targets = json.loads(_wait_http(f"http://127.0.0.1:{debug_port}/json", 60))
        devtools = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
        asked, drawn = asyncio.run(_requests(devtools, url, 120))
    finally:
        for proc in (browser, server):
            if proc is not None:
                _stop(proc)
    assert drawn, "the app never replaced the intro dialog"
    local = (f"http://127.0.0.1:{port}/", f"ws://127.0.0.1:{port}/")
    elsewhere = [u for u in asked if not u.startswith(local) and not u.startswith("data:")]
    assert elsewhere == []
    assert any(u.endswith("/static/fonts/RobotoMono-VariableFont_wght.ttf") for u in asked)
