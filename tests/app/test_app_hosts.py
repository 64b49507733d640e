"""The Hosts screen: inventory tree, preflight through ansible-runner, provisioning in check
mode with per-host, per-task progress, and the question before the real run."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import signal
import struct
import sys
import termios
import time
from dataclasses import replace
from pathlib import Path

import pytest
from app_support import REPO, fixed_inventory, make_app, plain, run, wait_for
from textual.widgets import DataTable, Label, Tree

from tui.app.screens.dialogs import ConfirmScreen
from tui.app.screens.hosts import HostsScreen, shown_path
from tui.catalog.images import expected_image
from tui.engine import hostcheck
from tui.engine.inventory import load_inventory


def _cell(table: DataTable, row: str, col: str) -> str:
    return str(table.get_cell(row, col))


def _right_edge(table: DataTable, col: str) -> int:
    """Where the column ends, in cells from the table's left edge."""
    widths = [c.get_render_width(table) for c in table.columns.values()]
    return sum(widths[: list(table.columns).index(col) + 1])


def test_preflight_shows_reachability_chip_devices_and_image(tmp_path: Path) -> None:
    inventory = fixed_inventory(tmp_path, unreachable=True)

    async def scenario() -> None:
        app = make_app(tmp_path, inventory=inventory)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            await pilot.press("2")
            screen = app.screen
            assert isinstance(screen, HostsScreen)
            hosts = screen.query_one("#hosts", DataTable)
            await wait_for(pilot, lambda: hosts.row_count == 2)
            tree = screen.query_one(Tree)
            assert [str(n.label) for n in tree.root.children] == ["cpu"]
            await wait_for(
                pilot, lambda: _cell(hosts, "ghost", "reachable") != "checking...", timeout=120
            )
            assert _cell(hosts, "localhost", "reachable") == "yes"
            assert _cell(hosts, "localhost", "chip") == "CPU"  # from playbooks/group_vars
            assert _cell(hosts, "localhost", "devices") == "1"  # fleetperf_devices
            assert _cell(hosts, "localhost", "image") == "not used (process executor)"
            assert _cell(hosts, "ghost", "reachable") == "no"
            reason = _cell(hosts, "ghost", "note")
            assert reason and _cell(hosts, "localhost", "note") == ""
            assert any("Unreachable: ghost" in str(n.message) for n in app._notifications)
            # Issue 41 point 7: the reason pushed chip, devices and image off the screen;
            # now it comes last, and whole under the table.
            assert _right_edge(hosts, "image") <= hosts.scrollable_content_region.width
            assert plain(screen.query_one("#host-reason", Label)).strip() == f"ghost: {reason}"

    run(scenario())


@pytest.mark.slow  # provision.yml's check mode takes minutes on a loaded 2-core machine
def test_provision_check_mode_shows_tasks_per_host_then_asks(tmp_path: Path) -> None:
    inventory = fixed_inventory(tmp_path)

    async def scenario() -> None:
        app = make_app(tmp_path, inventory=inventory)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            await pilot.press("2")
            screen = app.screen
            hosts = screen.query_one("#hosts", DataTable)
            await wait_for(pilot, lambda: hosts.row_count == 1)
            await pilot.press("down", "space")  # mark localhost in the tree
            assert screen.marked == {"localhost"}
            await pilot.press("v")
            tasks = screen.query_one("#tasks", DataTable)
            await wait_for(pilot, lambda: tasks.row_count == 1)
            assert _cell(tasks, "localhost", "mode") == "check"
            seen_tasks = set()

            def progressed() -> bool:
                seen_tasks.add(_cell(tasks, "localhost", "task"))
                return isinstance(app.screen, ConfirmScreen)

            await wait_for(pilot, progressed, timeout=300)
            assert int(_cell(tasks, "localhost", "ok")) > 0
            assert _cell(tasks, "localhost", "failed") == "0"
            assert "Read the PCI devices" in seen_tasks or len(seen_tasks) > 2
            status = plain(screen.query_one("#provision-status", Label))
            assert "check mode" in status and "change(s)" in status
            await pilot.press("n")  # not for real: this machine stays as it is
            assert isinstance(app.screen, HostsScreen)
            assert _cell(tasks, "localhost", "mode") == "check"

    run(scenario())


@pytest.mark.slow
def test_a_docker_host_is_checked_for_the_tag_the_engine_expects(tmp_path: Path) -> None:
    inventory = tmp_path / "docker.yml"
    inventory.write_text(
        "all:\n  children:\n    cpu:\n      hosts:\n        box:\n"
        "          ansible_connection: local\n"
        "          ansible_python_interpreter: '{{ ansible_playbook_python }}'\n"
        "          fleetperf_executor: docker\n"
    )
    (check,) = hostcheck.preflight(load_inventory(inventory), ["box"]).values()
    # The hash tag run.yml's preflight insists on, not group_vars' fleetperf_image.
    tag = expected_image("cpu")
    assert tag and check.image in (f"{tag} present", f"{tag} missing")


@pytest.mark.slow
def test_read_only_refuses_provisioning_with_a_notice(tmp_path: Path) -> None:
    """Served in a browser (fleetperf serve without --allow-write): provision.yml, which
    runs as root on the hosts, never starts from the page's keystrokes."""
    inventory = fixed_inventory(tmp_path)

    async def scenario() -> None:
        app = make_app(tmp_path, inventory=inventory)
        app.config = replace(app.config, read_only=True)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            await pilot.press("2")
            screen = app.screen
            hosts = screen.query_one("#hosts", DataTable)
            await wait_for(pilot, lambda: hosts.row_count == 1)
            await pilot.press("down", "space", "v")
            await pilot.pause(0.5)
            assert any("--allow-write" in str(n.message) for n in app._notifications)
            assert screen.query_one("#tasks", DataTable).row_count == 0
            assert "none yet" in plain(screen.query_one("#provision-status", Label))
            assert not [w for w in app.workers if w.group == "provision"]

    run(scenario())


@pytest.mark.slow
def test_the_hosts_screen_names_the_inventory_it_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29 point 5: the app on another inventory says which (inside the working
    directory relative to it, elsewhere whole)."""
    inventory = fixed_inventory(tmp_path)
    monkeypatch.chdir(REPO)

    async def scenario() -> None:
        app = make_app(tmp_path, inventory=inventory)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("2")
            screen = app.screen
            hosts = screen.query_one("#hosts", DataTable)
            await wait_for(pilot, lambda: hosts.row_count == 1)
            assert screen.sub_title == f"inventory {inventory}"
            await wait_for(pilot, lambda: _cell(hosts, "localhost", "reachable") != "checking...")

    run(scenario())
    assert shown_path(REPO / "inventory" / "examples" / "nvidia.yml") == (
        "inventory/examples/nvidia.yml"
    )


def test_fleetperf_i_opens_the_app_on_that_inventory(tmp_path: Path) -> None:
    """Issue 29 point 5: `fleetperf -i INVENTORY` answered "run headless with --batch";
    now the app opens (in a terminal: a pty here) and quits on ctrl+q."""
    inventory = fixed_inventory(tmp_path)
    argv = [sys.executable, "-m", "tui.cli", "-i", str(inventory), "--results", str(tmp_path)]
    pid, fd = pty.fork()
    if pid == 0:  # the child: the app in a 100x30 terminal
        os.chdir(REPO)
        os.environ.update(TERM="xterm-256color", COLUMNS="100", LINES="30")
        os.execv(sys.executable, argv)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    seen = b""
    try:
        deadline = time.monotonic() + 60
        while b"Overrides" not in seen and time.monotonic() < deadline:
            if select.select([fd], [], [], 1)[0]:
                seen += os.read(fd, 65536)
        assert b"Overrides" in seen, seen[-2000:]  # the Cases screen's field: the app is up
        assert b"--batch" not in seen
        os.write(fd, b"\x11")  # ctrl+q
        while time.monotonic() < deadline + 30:
            if select.select([fd], [], [], 1)[0]:
                try:
                    os.read(fd, 65536)
                except OSError:  # the child closed the terminal
                    break
        _, status = os.waitpid(pid, 0)
        pid = 0  # reaped: nothing to kill
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        os.close(fd)
        if pid:  # a failed check left the app running
            with contextlib.suppress(ChildProcessError, ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
