"""Where fleetperf keeps things by default: one place for the cli, the engine and the app."""

from __future__ import annotations

import os
from pathlib import Path

from tui.catalog import REPO_ROOT

DEFAULT_INVENTORY = REPO_ROOT / "inventory" / "local.yml"  # this machine, vendor cpu
STORE_FILE = "fleetperf.sqlite"  # the results store, in the results directory


def default_results_dir() -> Path:
    return Path(os.environ.get("FLEETPERF_RESULTS", REPO_ROOT / "results"))


def default_data_root() -> Path:
    return Path(os.environ.get("FLEETPERF_DATA", REPO_ROOT / "data"))


def store_path(results_dir: Path) -> Path:
    return results_dir / STORE_FILE
