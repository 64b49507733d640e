"""The app driven as a person would: pick distilbert-pytorch on cpu/CPUx1x1, set small
overrides, launch on the local inventory, watch the row move, find the result on the
Results screen and in the store. Real ansible-runner, real torch training on CPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from app_support import LOCAL_INVENTORY, REPO, run, wait_for
from textual.widgets import DataTable, Tree

from tui.app.app import AppConfig, FleetperfApp
from tui.app.screens.cases import CasesScreen
from tui.app.widgets.hosttable import HostTable
from tui.core import paths
from tui.results.store import ResultStore

PICK = ("distilbert-pytorch", "cpu/CPUx1x1")
OVERRIDES = "max_samples=64 eval_every_samples=64 log_every_steps=1 target_acc=0.4"


@pytest.mark.slow
def test_launch_watch_and_find_the_result(tmp_path: Path) -> None:
    data = tmp_path / "data"
    prep = subprocess.run(
        [sys.executable, "-m", "tui.cli", "prepare", "distilbert-pytorch", "--synthetic"]
        + ["--data-root", str(data)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert prep.returncode == 0, prep.stderr
    config = AppConfig(LOCAL_INVENTORY, tmp_path / "results", data, paths.CASES_DIR)

    async def scenario() -> None:
        app = FleetperfApp(config)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            screen = app.screen
            assert isinstance(screen, CasesScreen)
            for _ in range(60):  # arrow down the tree to the config, as a person would
                await pilot.press("down")
                node = screen.query_one(Tree).cursor_node
                if node is not None and node.data == ("config", PICK):
                    break
            await pilot.press("space")
            assert screen.marked == {PICK}
            await pilot.press("o", *OVERRIDES, "enter")
            await wait_for(pilot, lambda: app.current_mode == "runs" and app.batches, 120)
            (handle,) = app.batches[0].runs
            await wait_for(pilot, lambda: bool(app.screen.query("#host-table")))
            table = app.screen.query_one("#host-table", HostTable)
            seen: list[tuple[str, str]] = []

            def watch() -> bool:
                if "localhost" in table.rows:
                    row = (str(table.get_cell("localhost", "state")),)
                    row += (str(table.get_cell("localhost", "step")),)
                    if not seen or seen[-1] != row:
                        seen.append(row)
                return handle.done

            await wait_for(pilot, watch, timeout=900)
            assert handle.status == "passed", handle.error
            steps = [step for _, step in seen if step != "-"]
            assert steps and steps[-1] == "4"  # 64 samples at batch 16 (cpu config)
            # Live: it reached running and never went back (a direct run on this machine
            # may pass queued and preflight between two looks at the table).
            phases = [s for s, _ in seen]
            assert "running" in phases
            assert not {"queued", "preflight"} & set(phases[phases.index("running") :])
            await pilot.press("4")
            await wait_for(pilot, lambda: bool(app.screen.query("#history")))
            history = app.screen.query_one("#history", DataTable)
            await wait_for(pilot, lambda: handle.run_id in history.rows, 60)
            status = str(history.get_cell(handle.run_id, "status"))
            assert status == "passed capped"  # --set max_samples caps the run
            await pilot.press("ctrl+q")  # nothing runs: no question
        assert app.return_code == 0

    run(scenario())
    with ResultStore(config.store_path) as store:
        (record,) = store.list()
    assert record.status == "passed" and record.hosts == ["localhost"]
    assert record.case == "distilbert-pytorch" and record.config == "CPUx1x1"
    assert record.hp["max_samples"] == 64
    assert record.metrics["e2e_time"] is not None and record.metrics["acc"] is not None
