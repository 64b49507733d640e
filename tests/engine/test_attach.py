"""Attach (issue 32): a run another controller runs, followed from its run directory's
events.jsonl (tui/engine/attach.py, Session.follow), read-only, to the end the store says."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import Fleetperf
from seed_records import PEAK, running_record

from tui.core import liveness
from tui.core.errors import UsageError
from tui.core.events import (
    CaseResult,
    Dropped,
    EvalSample,
    Event,
    MetricSample,
    RunFinished,
    RunStarted,
    SysSample,
    WorkloadError,
    WorkloadStarted,
    as_dict,
    parse,
)
from tui.core.paths import DEFAULT_INVENTORY
from tui.engine.attach import RunLog, logged_event
from tui.engine.following import FollowedRun
from tui.engine.handles import RunHandleLike
from tui.engine.session import Session
from tui.results.record import RunRecord
from tui.results.store import ResultStore

RUN = "20261126-120000-emitter-0001"
LINES = [  # workload lines as the contract has them, one of each kind
    {"kind": "start", "t": 1.0, "rank": 0, "world_size": 2, "pid": 7},
    {"kind": "step", "t": 2.0, "rank": 0, "step": 3, "samples": 24, "tokens": 192,
     "loss": 0.25, "lr": 0.1, "throughput": 40.0, "mem_used_gib": 0.5, "mem_total_gib": 2.0},
    {"kind": "eval", "t": 3.0, "rank": 0, "name": "acc", "value": 0.9, "samples": 24},
    {"kind": "sys", "t": 4.0, "rank": 1, "cpu_util": 12.5, "gpu0_power_w": 250.0},
    {"kind": "error", "t": 5.0, "rank": 1, "message": "[red]boom\x1b[2J", "traceback": "tb"},
    {"kind": "result", "t": 6.0, "rank": 0, "status": "passed", "converged": True,
     "metrics": {"p_whole": 80.0, "mfu": None}, "notes": ["a note"], "message": "",
     "environment": {"torch": "2.13.0", "gpus": [{"name": "cpu"}]}, "peak": PEAK},
]  # fmt: skip


def test_a_logged_event_reads_back_as_the_event_it_was() -> None:
    """What the tracker logs (as_dict) comes back as the same typed event, through the one
    parser: every kind, a sample's receive time, a result's environment and peak."""
    kinds = set()
    for line in LINES:
        ev = parse(RUN, "node-a", json.dumps(line), received=9.5)
        assert not isinstance(ev, Dropped)
        kinds.add(type(ev))
        assert logged_event(RUN, json.dumps(as_dict(ev))) == ev
    assert kinds == {
        WorkloadStarted,
        MetricSample,
        EvalSample,
        SysSample,
        WorkloadError,
        CaseResult,
    }


@pytest.mark.parametrize(
    "line",
    [
        "not json",
        "[1, 2]",
        '{"type": "HostState", "run_id": "r", "host": "a", "phase": "running", "message": ""}',
        '{"type": "RunFinished", "run_id": "r", "status": "passed", "error": null, "t": 1}',
        '{"type": "MetricSample", "host": 7, "rank": 0, "t": 1, "step": 1, "samples": 8}',
        '{"type": "MetricSample", "host": "a", "rank": 0, "t": 1, "step": -1, "samples": 8}',
        '{"type": "MetricSample", "host": "a", "rank": 0, "t": NaN, "step": 1, "samples": 8}',
    ],
)
def test_a_line_that_is_no_logged_workload_event_is_dropped(line: str) -> None:
    assert isinstance(logged_event(RUN, line), Dropped)


def test_a_sys_samples_readings_never_override_its_header() -> None:
    line = {"type": "SysSample", "host": "a", "rank": 0, "t": 1, "values": {"t": 5, "kind": "x"}}
    assert logged_event(RUN, json.dumps(line)) == SysSample(RUN, "a", 0, 1.0, {})


def test_the_log_hands_on_complete_lines_only_and_never_follows_a_link(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    log = RunLog(path)
    try:
        assert list(log.lines()) == []  # not there yet
        path.write_text('{"a": 1}\n{"b": ')
        assert list(log.lines()) == ['{"a": 1}']
        assert list(log.lines()) == []  # the half line waits for its end
        with path.open("a") as f:
            f.write('2}\n\n{"c": 3}\n')
        assert list(log.lines()) == ['{"b": 2}', '{"c": 3}']
        assert log.offset == path.stat().st_size
    finally:
        log.close()
    secret = tmp_path / "secret"
    secret.write_text('{"a": 1}\n')
    (tmp_path / "link.jsonl").symlink_to(secret)
    linked = RunLog(tmp_path / "link.jsonl")
    assert list(linked.lines()) == []


def _descendants(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        for child in (task / "children").read_text().split():
            out += [int(child), *_descendants(int(child))]
    return out


def _listed(s: Session, proc: subprocess.Popen[str]) -> RunRecord:
    """The batch's run, once the store has it as running."""
    deadline = time.monotonic() + 60
    while not (elsewhere := s.running_elsewhere()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the batch never showed as running"
        time.sleep(0.05)
    (running,) = elsewhere
    return running


@pytest.mark.slow  # a real run whose controller is killed, then cleaned up
def test_a_followed_run_whose_controller_dies_ends_interrupted(emitter: Fleetperf) -> None:
    """The follower proves the controller gone, marks the run interrupted as a controller
    does at start-up, and ends with that record; the run is no longer offered."""
    proc = emitter.popen(
        *("--batch", "--case", "emitter", "--config", "cpu/CPUx1x1"),
        *("--set", "steps=10", "--set", "interval_s=0.2", "--set", "hang_at_step=4"),
    )
    s = Session(DEFAULT_INVENTORY, emitter.results, emitter.data_root)
    try:
        handle = s.follow(_listed(s, proc).run_id, poll_s=0.1)
        seen: list[Event] = []
        handle.subscribe(seen.append)
        deadline = time.monotonic() + 60
        while not any(isinstance(ev, MetricSample) and ev.step == 3 for ev in seen):
            assert time.monotonic() < deadline and proc.poll() is None, "no step 3"
            time.sleep(0.05)
        # SIGKILL: the controller and what runs under it; the workload (its own session,
        # under the controller on the direct path) hangs on, which the cleanup below stops.
        (host_dir,) = emitter.host_dirs()
        workload = os.getsid(int((host_dir / "workload.pid").read_text()))
        for pid in [*reversed(_descendants(proc.pid)), proc.pid]:
            if os.getsid(pid) != workload:
                os.kill(pid, signal.SIGKILL)
        proc.communicate(timeout=60)
        record = handle.wait(timeout=30)
        assert record is not None and record.status == "interrupted", record
        assert seen[-1] == RunFinished(handle.run_id, "interrupted", record.error, seen[-1].t)  # type: ignore[union-attr]
        assert s.running_elsewhere() == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        s.close()
        cleaned = emitter.run("cleanup")  # stops the workload
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr


def test_follow_a_batch_from_another_process_to_its_end(emitter: Fleetperf) -> None:
    """A real ``--batch`` in another process: listed as running elsewhere, followed from
    its start; every event its controller logged arrives, in order, then its end with the
    stored record; cancelling from here is refused, naming its controller."""
    proc = emitter.popen(
        *("--batch", "--case", "emitter", "--config", "cpu/CPUx1x1"),
        *("--set", "steps=6", "--set", "interval_s=0.3"),
    )
    s = Session(DEFAULT_INVENTORY, emitter.results, emitter.data_root)
    try:
        running = _listed(s, proc)
        handle = s.follow(running.run_id, poll_s=0.1)
        assert isinstance(handle, FollowedRun) and isinstance(handle, RunHandleLike)
        assert handle.owner == f"{liveness.this_controller().host} pid {proc.pid}"
        seen: list[Event] = []
        lock = threading.Lock()

        def keep(ev: Event) -> None:
            with lock:
                seen.append(ev)

        handle.subscribe(keep)
        with pytest.raises(UsageError, match=f"controller .* pid {proc.pid}: read-only"):
            handle.cancel()
        record = handle.wait(timeout=120)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, out + err
        stored = s.store.get(running.run_id)
    finally:
        if proc.poll() is None:
            proc.kill()
        s.close()
    assert record is not None and record == stored and record.status == "passed"
    assert isinstance(seen[0], RunStarted) and seen[0].config == "cpu/CPUx1x1"
    assert seen[-1] == RunFinished(running.run_id, "passed", None, seen[-1].t)  # type: ignore[union-attr]
    run_dir = emitter.results / "runs" / running.run_id
    logged = (run_dir / "events.jsonl").read_text().splitlines()
    assert [json.dumps(as_dict(ev)) for ev in seen[1:-1]] == logged  # all of them, in order
    steps = [ev for ev in seen if isinstance(ev, MetricSample)]
    assert [ev.step for ev in steps] == [1, 2, 3, 4, 5, 6]
    assert steps[-1].loss == record.metrics["loss"]


def test_follow_refuses_this_controllers_own_run(tmp_path: Path) -> None:
    results = tmp_path / "results"
    with ResultStore(results / "fleetperf.sqlite") as store:
        store.add(running_record(RUN, liveness.this_controller().text(), results / "runs" / RUN))
    s = Session(DEFAULT_INVENTORY, results, tmp_path / "data")
    try:
        assert s.running_elsewhere() == []
        with pytest.raises(UsageError, match="this controller runs it"):
            s.follow(RUN)
    finally:
        s.close()


def test_nothing_listed_and_no_store_made_where_there_is_none(tmp_path: Path) -> None:
    s = Session(DEFAULT_INVENTORY, tmp_path / "results", tmp_path / "data")
    assert s.running_elsewhere() == []
    assert not (tmp_path / "results").exists()
