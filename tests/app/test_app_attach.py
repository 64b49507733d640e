"""Attach (issue 32): the Runs screen lists the runs other controllers run, marked with
their controller, and follows them read-only from their run directories to their end."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from app_support import make_app, plain, run, wait_for
from conftest import Fleetperf
from seed_records import running_record
from textual.widgets import Label, ListView, RichLog

from tui.app import elsewhere
from tui.app.screens.dashboard import ELSEWHERE_S, DashboardScreen
from tui.app.widgets.charts import RunProgress
from tui.app.widgets.hosttable import HostTable
from tui.core.events import MetricSample, RunFinished, as_dict, parse
from tui.core.liveness import Lease
from tui.results.record import RunRecord
from tui.results.store import ResultStore

RUN = "20261126-120000-emitter-0001"
# Another machine's controller: never provably gone from here. Its host name is text from
# the store: shown literally, never read as markup.
OWNER = Lease(host="ci[/b]-01", pid=4242).text()


def step_line(step: int) -> str:
    """A step as the controller that runs the run logs it (tui/executors/tracker.py)."""
    line = {"kind": "step", "t": 1000.0 + step, "rank": 0, "step": step, "samples": step * 8}
    line |= {"loss": 1.0 / step, "throughput": 40.0, "mem_used_gib": 0.5, "mem_total_gib": 2.0}
    ev = parse(RUN, "node-a", json.dumps(line))
    assert isinstance(ev, MetricSample)
    return json.dumps(as_dict(ev)) + "\n"


def test_another_controllers_run_is_listed_followed_and_read_only(tmp_path: Path) -> None:
    results = tmp_path / "results"
    events = results / "runs" / RUN / "events.jsonl"
    events.parent.mkdir(parents=True)
    events.write_text(step_line(1) + step_line(2))
    record = running_record(RUN, OWNER, events.parent, hp={"max_samples": 80})
    store = ResultStore(results / "fleetperf.sqlite")
    store.add(record)

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(80, 24), notifications=True) as pilot:
            await pilot.press("3")
            screen = app.screen
            assert isinstance(screen, DashboardScreen)
            await wait_for(pilot, lambda: len(screen.query(RunProgress)) == 1)
            owner = screen.query_one(".run-owner", Label)
            assert plain(owner) == "ci[/b]-01 pid 4242 (read-only)\n"
            status = screen.query_one("#run-status", Label)
            assert "ci[/b]-01 pid 4242 (read-only)" in plain(status)
            table = screen.query_one(HostTable)
            await wait_for(pilot, lambda: "node-a" in table.rows)
            await wait_for(pilot, lambda: str(table.get_cell("node-a", "step")) == "2")
            with events.open("a") as f:  # the run goes on: the screen follows
                f.write(step_line(3))
            await wait_for(pilot, lambda: str(table.get_cell("node-a", "step")) == "3")
            assert str(table.get_cell("node-a", "loss")) == "0.3333"
            assert str(table.get_cell("node-a", "mem GiB")) == "0.5/2.0"
            bar = screen.query_one(RunProgress).query_one("ProgressBar")
            await wait_for(pilot, lambda: bar.progress == 24)  # 24 of the 80 samples
            await pilot.press("x")  # refused: another controller runs it
            notices = [str(n.message) for n in app._notifications]
            assert any("ci[/b]-01 pid 4242: read-only here" in n for n in notices), notices
            assert screen.query_one(HostTable)  # no confirmation dialog was pushed
            assert store.interrupt(record, "the controller stopped while the run was running")
            await wait_for(pilot, lambda: plain(status).startswith("[interrupted]"))
            assert str(table.get_cell("node-a", "state")) == "stopped"
            log = "\n".join(s.text for s in screen.query_one(RichLog).lines)
            assert "interrupted: the controller stopped" in log

    try:
        run(scenario())
    finally:
        store.close()


@pytest.mark.slow  # a real run of about 10 s in another process
def test_attach_to_a_batch_from_its_start_to_its_end(emitter: Fleetperf, tmp_path: Path) -> None:
    """Issue 32: a ``--batch`` in another process, the app attached to it from its start to
    its end, the same numbers on screen as in the record."""
    proc = emitter.popen(
        *("--batch", "--case", "emitter", "--config", "cpu/CPUx1x1"),
        *("--set", "steps=20", "--set", "interval_s=0.2"),
    )

    async def scenario() -> None:
        app = make_app(tmp_path, cases_dir=emitter.cases_dir)
        assert app.config.results_dir == emitter.results
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("3")
            screen = app.screen
            assert isinstance(screen, DashboardScreen)
            await wait_for(pilot, lambda: len(screen.query(RunProgress)) == 1)
            status = screen.query_one("#run-status", Label)
            assert plain(status).startswith("[running] emitter cpu/CPUx1x1")
            assert f"pid {proc.pid} (read-only)" in plain(status)
            table = screen.query_one(HostTable)
            await wait_for(pilot, lambda: "localhost" in table.rows)

            def mid_run() -> bool:  # seen while it runs, not only at its end
                step = str(table.get_cell("localhost", "step"))
                return step.isdigit() and int(step) < 20

            await wait_for(pilot, mid_run)
            await wait_for(pilot, lambda: plain(status).startswith("[passed]"), timeout=120)
            (run_id,) = screen._followed
            record = app.session.store.get(run_id)
            assert record is not None and record.status == "passed"
            cells = {c: str(table.get_cell("localhost", c)) for c in ("step", "loss", "mem GiB")}
            assert cells == {
                "step": "20",
                "loss": f"{record.metrics['loss']:.4f}",  # the workload's last loss
                "mem GiB": f"{record.metrics['mem_used_gib']:.1f}"
                f"/{record.metrics['mem_total_gib']:.1f}",
            }
            assert str(table.get_cell("localhost", "state")) == "finished"
            log = " ".join(" ".join(s.text for s in screen.query_one(RichLog).lines).split())
            assert log == (
                f"started emitter cpu/CPUx1x1 on localhost (run {run_id})"
                " localhost: started: world size 1 localhost: result passed passed"
            )

    try:
        run(scenario())
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, out + err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def foreign(run_id: str, started: str, **fields: Any) -> RunRecord:
    """A run of a controller on another machine, as running in the store."""
    record = running_record(run_id, OWNER, Path("/nonexistent"), **fields)
    return record.model_copy(update={"started": started})


def now_iso(ago_s: float = 0.0) -> str:
    return datetime.fromtimestamp(time.time() - ago_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def followers(run_ids: set[str]) -> list[threading.Thread]:
    """The threads following runs (tui/engine/following.py FollowedRun names each by its run)."""
    return [t for t in threading.enumerate() if t.name in run_ids]


def test_an_attached_run_is_selected_when_it_appears(tmp_path: Path) -> None:
    """Issue 41 point 8: the detail stayed on the old (ended) run until Down."""
    results = tmp_path / "results"
    store = ResultStore(results / "fleetperf.sqlite")

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            old = "20261126-110000-emitter-0001"
            app.feed.add_run(old, "emitter", "cpu/CPUx1x1", ["node-a"], {})
            app.feed.push(RunFinished(old, "passed", None, 1000.0))
            await pilot.press("3")
            screen = app.screen
            await wait_for(pilot, lambda: screen.selected == old)
            store.add(foreign(RUN, now_iso()))
            await wait_for(pilot, lambda: len(screen.query(RunProgress)) == 2, timeout=10)
            await wait_for(pilot, lambda: screen.selected == RUN)
            assert screen.query_one("#run-list", ListView).index == 1
            assert f"run {RUN}" in plain(screen.query_one("#run-status", Label))

    try:
        run(scenario())
    finally:
        store.close()


def test_a_store_of_a_thousand_foreign_runs_is_followed_a_few_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 39 point 9: every running record was followed forever, a thread each. Now the
    newest FOLLOW_MAX with a recent sign of life are followed; the rest are listed; a run
    that goes quiet stops being followed."""
    results = tmp_path / "results"
    store = ResultStore(results / "fleetperf.sqlite")
    for i in range(1000):  # the newest 900 fresh: only the bound holds them back
        store.add(foreign(f"20261129-0400{i:04d}-emitter-{i:016x}", now_iso(1000 - i)))
    stale = "20261101-000000-emitter-00000000000000aa"  # a dead controller's, long ago
    store.add(foreign(stale, "2026-11-01T00:00:00Z"))
    ids = {r.run_id for r in store.list(status="running")}
    newest = sorted(ids - {stale})[-elsewhere.FOLLOW_MAX :]

    async def scenario() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("3")
            screen = app.screen
            count = elsewhere.FOLLOW_MAX
            await wait_for(pilot, lambda: len(screen.query(RunProgress)) == count, timeout=30)
            assert sorted(screen._followed) == newest
            assert len(followers(ids)) == count
            listed = screen.query_one("#elsewhere", Label)
            await wait_for(pilot, lambda: "993 more run(s)" in plain(listed, width=400))
            await pilot.pause(2 * ELSEWHERE_S + 0.5)  # more looks start no more followers
            assert len(followers(ids)) == count and len(screen.query(RunProgress)) == count
            # Their signs of life grow old (here: the bound shrinks to nothing): each stops
            # being followed, at once, without waiting for the next look at the store.
            monkeypatch.setattr(elsewhere, "FRESH_S", 0)
            await wait_for(pilot, lambda: not followers(ids), timeout=10)
            assert {app.feed.runs[i].status for i in newest} == {"not followed"}

    try:
        run(scenario())
    finally:
        store.close()
