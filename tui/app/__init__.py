"""The terminal app (Textual). Only this package imports textual; it is loaded lazily by
``fleetperf`` (no arguments) and ``fleetperf serve``."""

from __future__ import annotations

from pathlib import Path


def main(
    read_only: bool = False,
    inventory: Path | None = None,
    results_dir: Path | None = None,
    data_root: Path | None = None,
    store: str | None = None,
) -> int:
    """Run the app in this terminal on the inventory, results, data root and store given
    (the defaults where None); ``read_only``: as served in a browser (no provisioning, no
    chosen export path)."""
    from tui.app.app import AppConfig, FleetperfApp
    from tui.core.paths import DEFAULT_INVENTORY, default_data_root, default_results_dir

    config = AppConfig(
        inventory=(inventory or DEFAULT_INVENTORY).resolve(),
        results_dir=(results_dir or default_results_dir()).resolve(),
        data_root=(data_root or default_data_root()).resolve(),
        read_only=read_only,
        store=store,
    )
    return FleetperfApp(config).run() or 0


def serve(host: str, port: int, allow_write: bool, *where: Path) -> int:
    """Publish the app over HTTP (textual-serve) behind a token: tui/app/serve.py; ``where``:
    inventory, results directory and data root."""
    from tui.app.serve import serve as serve_app

    return serve_app(host, port, allow_write, *where)
