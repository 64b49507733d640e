"""The terminal app (Textual). Only this package imports textual; it is loaded lazily by
``fleetperf`` (no arguments) and ``fleetperf serve``."""

from __future__ import annotations

import io
import logging
from pathlib import Path

LOG_FILE = "app.log"  # in the results directory: the controller's internal errors


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
    from tui.core.errors import UsageError
    from tui.core.paths import DEFAULT_INVENTORY, default_data_root, default_results_dir

    config = AppConfig(
        inventory=(inventory or DEFAULT_INVENTORY).resolve(),
        results_dir=(results_dir or default_results_dir()).resolve(),
        data_root=(data_root or default_data_root()).resolve(),
        read_only=read_only,
        store=store,
    )
    try:
        log_to_file(config.results_dir)
    except OSError as exc:
        raise UsageError(f"results directory {config.results_dir}: {exc.strerror}") from None
    return FleetperfApp(config).run() or 0


def log_to_file(results_dir: Path) -> Path:
    """The controller's log records (an internal error's traceback) to ``results_dir``'s
    app.log rather than stderr, where they would be drawn over the screen."""
    from tui.core import safefile

    safefile.make_dirs(results_dir)
    path = results_dir / LOG_FILE
    stream = io.TextIOWrapper(safefile.appending(path), encoding="utf-8", line_buffering=True)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s"))
    logger = logging.getLogger("tui")
    logger.addHandler(handler)
    logger.propagate = False  # not also to logging's last resort: the terminal
    return path


def serve(host: str, port: int, allow_write: bool, *where: Path) -> int:
    """Publish the app over HTTP (textual-serve) behind a token: tui/app/serve.py; ``where``:
    inventory, results directory and data root."""
    from tui.app.serve import serve as serve_app

    return serve_app(host, port, allow_write, *where)
