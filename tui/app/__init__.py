"""The terminal app (Textual). Only this package imports textual; it is loaded lazily by
``fleetperf`` (no arguments) and ``fleetperf serve``."""

from __future__ import annotations

import os
import shlex
import sys


def main() -> int:
    """Run the app in this terminal on the default inventory, results and data."""
    from tui.app.app import AppConfig, FleetperfApp
    from tui.cli import DEFAULT_INVENTORY, default_data_root, default_results_dir

    config = AppConfig(
        inventory=DEFAULT_INVENTORY.resolve(),
        results_dir=default_results_dir().resolve(),
        data_root=default_data_root().resolve(),
    )
    return FleetperfApp(config).run() or 0


def serve() -> int:
    """Publish the app over HTTP on localhost (textual-serve); one app process per browser
    tab. The port is FLEETPERF_SERVE_PORT, 8000 by default."""
    from textual_serve.server import Server

    port = int(os.environ.get("FLEETPERF_SERVE_PORT", "8000"))
    command = shlex.join([sys.executable, "-m", "tui.app"])
    print(f"fleetperf: serving the app on http://localhost:{port}", flush=True)
    Server(command, host="localhost", port=port, title="fleetperf").serve()
    return 0
