"""``fleetperf serve``: the app in a browser (textual-serve), for its operator only.

textual-serve alone answers any page and any WebSocket: keystrokes from whoever reaches
the port, or from any web page the operator opens (a WebSocket is not bound by the
same-origin policy), drive an app that runs as the operator. As Jupyter does:

- a random token per start (``secrets.token_urlsafe``), printed with the URL; the page
  wants it as ``?token=``, the WebSocket in its path (``/ws/TOKEN``: textual.js appends
  its own query to the URL the page gives it), compared in constant time;
- the WebSocket's Origin must be the page's own (``http://`` + the Host it was asked
  for): another site's page is refused (403) even with the token;
- bound to 127.0.0.1 by default; bound to loopback, only loopback Host names are served
  (a DNS-rebound name is refused);
- no cookies (a cookie for localhost would go to every port on it), no referrer, no frames;
  the access log (which would hold the token) is off.

Each tab gets its own app process (``python -m tui.app``) on the inventory, results
directory and data root given, read-only unless ``--allow-write``: no provisioning,
exports only under the results directory. The store comes with the environment
(FLEETPERF_STORE), never on a command line that ``ps`` shows.

The page fetches nothing from elsewhere (an air-gapped lab has no internet): textual-serve's
own template loads Roboto Mono from fonts.googleapis.com, ours (templates/app_index.html)
loads the same font from textual-serve's static files, served here.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import secrets
import shlex
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp_jinja2
import jinja2
from aiohttp import web
from textual_serve.server import Server, to_int

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
TEMPLATES = Path(__file__).parent / "templates"  # the page, with nothing fetched elsewhere
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _same(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode(), token.encode())


class GuardedServer(Server):
    """textual-serve's Server with the token, Origin and Host checks of the module doc."""

    def __init__(
        self, host: str, port: int, allow_write: bool, inventory: Path, results: Path, data: Path
    ) -> None:
        argv = [sys.executable, "-m", "tui.app"] + ([] if allow_write else ["--read-only"])
        argv += ["-i", str(inventory), "--results", str(results), "--data-root", str(data)]
        super().__init__(
            shlex.join(argv), host=host, port=port, title="fleetperf", templates_path=TEMPLATES
        )
        self.token = secrets.token_urlsafe(32)
        self.allow_write = allow_write
        self.loopback = is_loopback(host)

    def url(self) -> str:
        """The URL to open, token included."""
        host = socket.gethostname() if self.host in ("0.0.0.0", "::", "") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}/?token={self.token}"

    def initialize_logging(self) -> None:
        super().initialize_logging()
        # Every request line would carry the token (?token=, /ws/TOKEN).
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)

    async def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard])
        aiohttp_jinja2.setup(
            app, loader=jinja2.FileSystemLoader(self.templates_path), autoescape=True
        )
        app.add_routes(
            [
                web.get("/", self._index, name="index"),
                web.get("/ws/{token}", self.handle_websocket, name="websocket"),
                # Files the app delivers (a screenshot): single-use random keys.
                web.get("/download/{key}", self.handle_download, name="download"),
                web.static("/static", self.statics_path, name="static"),
            ]
        )
        app.on_startup.append(self.on_startup)
        app.on_response_prepare.append(_no_referrer_no_frames)
        return app

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self.loopback and request.url.host not in LOOPBACK_NAMES:
            raise web.HTTPForbidden(text=f"fleetperf serve: Host {request.host!r} refused\n")
        route = request.match_info.route.name
        if route in ("static", "download"):
            return await handler(request)
        if route == "websocket":
            origin = request.headers.get("Origin", "")
            if origin != f"http://{request.host}":
                raise web.HTTPForbidden(text=f"fleetperf serve: Origin {origin!r} refused\n")
            given = request.match_info["token"]
        else:
            given = request.query.get("token", "")
        if not _same(given, self.token):
            raise web.HTTPForbidden(
                text="fleetperf serve: open the URL with the token it printed at start\n"
            )
        return await handler(request)

    async def _index(self, request: web.Request) -> web.StreamResponse:
        """textual-serve's page, its URLs on the Host the browser asked for, the
        WebSocket's with the token."""
        base = f"http://{request.host}"
        context: dict[str, Any] = {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": f"ws://{request.host}/ws/{self.token}",
            "config": {"static": {"url": f"{base}/static/"}},
            "application": {"name": self.title},
        }
        return aiohttp_jinja2.render_template("app_index.html", request, context)

    async def on_startup(self, app: web.Application) -> None:
        mode = (
            "provisioning and export paths allowed (--allow-write)"
            if self.allow_write
            else "read-only: no provisioning, exports under the results directory"
        )
        print(f"fleetperf: serving the app ({mode}); open\n  {self.url()}", flush=True)
        if not self.loopback:
            print(
                f"fleetperf: listening on {self.host}, not loopback: whoever reaches the port"
                " and sees the token drives the app (plain HTTP, no TLS)",
                flush=True,
            )


async def _no_referrer_no_frames(request: web.Request, response: web.StreamResponse) -> None:
    response.headers["Referrer-Policy"] = "no-referrer"  # the page's URL holds the token
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Content-Security-Policy"] = "frame-ancestors 'none'"


def serve(
    host: str, port: int, allow_write: bool, inventory: Path, results: Path, data: Path
) -> int:
    GuardedServer(host, port, allow_write, inventory, results, data).serve()
    return 0
