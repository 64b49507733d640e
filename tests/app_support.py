"""What the terminal app's tests share: configs, a fixed inventory, a seeded store, waits."""

from __future__ import annotations

import asyncio
import io
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from conftest import FIXTURE_CASES, REPO
from rich.console import Console
from seed_records import distilbert
from textual.pilot import Pilot
from textual.widgets import Static

from tui.app.app import AppConfig, FleetperfApp
from tui.results.record import RunRecord
from tui.results.store import ResultStore

LOCAL_INVENTORY = REPO / "inventory" / "local.yml"


def fixed_inventory(tmp_path: Path, unreachable: bool = False) -> Path:
    """This machine as one cpu host that declares its device count (the same figures on
    every machine), and optionally a host nobody answers for."""
    path = tmp_path / "inventory.yml"
    lines = [
        "all:",
        "  children:",
        "    cpu:",
        "      hosts:",
        "        localhost:",
        "          ansible_connection: local",
        f"          ansible_python_interpreter: {sys.executable}",
        "          fleetperf_executor: process",
        "          fleetperf_devices: 1",
    ]
    if unreachable:
        # Port 1 on the loopback refuses at once: unreachable without waiting for a timeout.
        lines += [
            "        ghost:",
            "          ansible_host: 127.0.0.1",
            "          ansible_port: 1",
            "          ansible_ssh_common_args: -o ConnectTimeout=3",
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


def make_app(
    tmp_path: Path, cases_dir: Path = FIXTURE_CASES, inventory: Path = LOCAL_INVENTORY
) -> FleetperfApp:
    return FleetperfApp(
        AppConfig(
            inventory=inventory,
            results_dir=tmp_path / "results",
            data_root=tmp_path / "data",
            cases_dir=cases_dir,
        )
    )


def history(n_earlier: int = 4) -> list[RunRecord]:
    """distilbert on nvidia/A100x1x8: earlier passed runs with p_whole 1700..1760, one
    newer run at 1500 (outside that spread) and one run on another config."""
    records = []
    for i in range(n_earlier):
        records.append(
            distilbert(
                f"run-{i}",
                "A100x1x8",
                {},
                (360 + i, 1700.0 + 20 * i, 1780.0 + 10 * i, 1900.0, 0.915, 13.9),
                started=f"2026-11-0{i + 1}T10:00:00Z",
                finished=f"2026-11-0{i + 1}T10:20:00Z",
            )
        )
    records.append(
        distilbert(
            "run-new",
            "A100x1x8",
            {"train_batch_size": 96},
            (400, 1500.0, 1790.0, 1890.0, 0.916, 14.1),
            started="2026-11-09T10:00:00Z",
            finished="2026-11-09T10:20:00Z",
        )
    )
    records.append(
        distilbert(
            "run-x8",
            "A100x2x8",
            {},
            (200, 3400.0, 3500.0, 3600.0, 0.914, 13.9),
            started="2026-11-08T10:00:00Z",
            finished="2026-11-08T10:20:00Z",
        )
    )
    return records


def seed_store(results_dir: Path) -> list[RunRecord]:
    records = history()
    with ResultStore(results_dir / "fleetperf.sqlite") as store:
        for record in records:
            store.add(record)
    return records


async def wait_for(pilot: Pilot, check: Callable[[], bool], timeout: float = 60.0) -> None:
    """Let the app run until ``check()`` holds; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {check}")
        await pilot.pause(0.1)
        await asyncio.sleep(0)


def plain(widget: Static, width: int = 120) -> str:
    """What a Static (or Label) shows, as plain text."""
    console = Console(width=width, file=io.StringIO(), color_system=None, record=True)
    console.print(widget.content)
    return console.export_text()


def run(coro: Coroutine[Any, Any, None]) -> None:
    """Drive an async pilot test from a plain pytest test."""
    asyncio.run(coro)
