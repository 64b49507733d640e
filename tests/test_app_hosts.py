"""The Hosts screen: inventory tree, preflight through ansible-runner, provisioning in check
mode with per-host, per-task progress, and the question before the real run."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from app_support import fixed_inventory, make_app, plain, run, wait_for
from textual.widgets import DataTable, Label, Tree

from tui import hostcheck
from tui.app.screens.dialogs import ConfirmScreen
from tui.app.screens.hosts import HostsScreen
from tui.images import expected_image
from tui.inventory import load_inventory


def _cell(table: DataTable, row: str, col: str) -> str:
    return str(table.get_cell(row, col))


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
            assert _cell(hosts, "ghost", "reachable").startswith("no: ")
            assert any("Unreachable: ghost" in str(n.message) for n in app._notifications)

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
