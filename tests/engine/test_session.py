"""The engine (tui/engine/session.py) driven directly, as the terminal app drives it: host choice,
runs at once on free hosts, events, cancel, records. Real ansible-runner, local hosts."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO, Fleetperf, local_host, write_inventory

from tui.catalog import catalog
from tui.core.errors import CatalogError, InventoryError
from tui.core.events import Event, HostState, MetricSample, RunFinished, RunStarted
from tui.engine.handles import REPLAY_SAMPLES, RunHandleLike, RunPlan, Subscribers
from tui.engine.session import Session
from tui.executors.ansiblerun import PLAY_FILE


def session(fp: Fleetperf, inventory: Path) -> Session:
    return Session(inventory, fp.results, fp.data_root, cases_dir=fp.cases_dir)


def test_hosts_chosen_by_vendor_chip_and_devices(tmp_path: Path) -> None:
    inv = write_inventory(
        tmp_path / "inv.yml",
        {
            "h100": {"fleetperf_chip": "H100", "fleetperf_devices": 8},
            "a100-small": {"fleetperf_chip": "A100", "fleetperf_devices": 1},
            "a100-big": {"fleetperf_chip": "A100", "fleetperf_devices": 8},
        },
        group="nvidia",
    )
    s = Session(inv, tmp_path / "results", tmp_path / "data")
    try:
        (eight,) = s.plan([("distilbert-pytorch", "nvidia/A100x1x8")])
        assert eight.hosts == ["a100-big"]  # not the H100, not the one-device A100
        one = s.plan([("distilbert-pytorch", "nvidia/A100x1x1")], repeat=2)
        assert [p.hosts for p in one] == [["a100-small"], ["a100-big"]]  # spread out
        with pytest.raises(InventoryError, match="has 1 host.s. with chip A100 and 8. devices"):
            s.plan([("distilbert-pytorch", "nvidia/A100x2x8")])
    finally:
        s.close()
    # The chip a group's vars give (playbooks/group_vars/nvidia.yml: A100) counts too.
    plain = write_inventory(tmp_path / "plain.yml", {"gpu1": {}}, group="nvidia")
    s = Session(plain, tmp_path / "results", tmp_path / "data")
    try:
        assert s.plan([("distilbert-pytorch", "nvidia/A100x1x1")])[0].hosts == ["gpu1"]
    finally:
        s.close()
    assert not (tmp_path / "results" / "runs").exists()  # planning launches nothing


@pytest.mark.slow
def test_independent_runs_share_no_host_and_run_at_once(emitter: Fleetperf, tmp_path: Path) -> None:
    inv = write_inventory(
        tmp_path / "inv.yml",
        {"node1": local_host(emitter, "node1"), "node2": local_host(emitter, "node2")},
    )
    s = session(emitter, inv)
    try:
        sets = catalog.parse_sets(["steps=6", "interval_s=0.5"])
        plans = s.plan([("emitter", "cpu/CPUx1x1")], sets, repeat=3)
        assert [p.hosts for p in plans] == [["node1"], ["node2"], ["node1"]]
        batch = s.start(plans)
        seen: list[Event] = []
        lock = threading.Lock()

        def keep(ev: Event) -> None:
            with lock:
                seen.append(ev)

        batch.subscribe(keep)  # after start: the events so far are replayed
        third: list[Event] = []
        batch.runs[2].subscribe(third.append)
        records = batch.wait(timeout=600)
    finally:
        s.close()
    assert batch.done and [r.status for r in batch.runs] == ["passed"] * 3
    assert all(isinstance(r, RunHandleLike) for r in batch.runs)  # as a followed run is
    assert [r.run_id for r in records] == [p.run_id for p in plans]
    started = {ev.run_id: ev.t for ev in seen if isinstance(ev, RunStarted)}
    finished = {ev.run_id: ev.t for ev in seen if isinstance(ev, RunFinished)}
    first, second, last = (p.run_id for p in plans)
    # The first two overlap (different hosts); the third waited for node1.
    assert started[second] < finished[first] and started[first] < finished[second]
    assert started[last] >= finished[first]
    # Every event names its run; a run's own stream has only its events, in order.
    assert {ev.run_id for ev in seen} == {first, second, last}
    assert isinstance(third[0], RunStarted) and isinstance(third[-1], RunFinished)
    assert {ev.run_id for ev in third} == {last}
    phases = [ev.phase for ev in third if isinstance(ev, HostState)]
    assert phases == ["preflight", "running", "finished"]
    assert [ev.step for ev in third if isinstance(ev, MetricSample)] == list(range(1, 7))


@pytest.mark.slow
def test_runs_that_start_together_share_one_play_and_end_on_their_own(
    emitter: Fleetperf, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four runs, one play of run.yml (issue 23): a refused host refuses its run only, a
    failing run stops no other, a cancelled run stops only its host, each keeps its own
    record; the one that passes is not held back by the others' ends. The play forced (its
    local hosts would each go direct, tui/executors/direct.py)."""
    monkeypatch.setenv("FLEETPERF_DIRECT", "0")
    hosts = {f"node{i}": local_host(emitter, f"node{i}") for i in range(1, 5)}
    hosts["node4"]["fleetperf_min_free_gib"] = 10**9  # refused in preflight
    s = session(emitter, write_inventory(tmp_path / "inv.yml", hosts))
    try:
        fast = catalog.parse_sets(["interval_s=0.2"])

        def on(host: str, **sets: int) -> RunPlan:
            (plan,) = s.plan([("emitter", "cpu/CPUx1x1")], {**fast, **sets})
            return dataclasses.replace(plan, hosts=[host])

        plans = [
            on("node1", steps=40, fail_at_step=3),
            on("node2", steps=40, hang_at_step=2),
            on("node3", steps=40),
            on("node4", steps=40),
        ]
        batch = s.start(plans)
        failing, cancelled, passing, refused = batch.runs
        deadline = time.monotonic() + 300
        while not any(isinstance(ev, MetricSample) for ev in _events(cancelled)):
            assert time.monotonic() < deadline and not cancelled.done
            time.sleep(0.2)
        cancelled.cancel()
        assert cancelled.wait(timeout=120) is not None
        assert not passing.done  # still streaming: the cancel stopped node2 only
        records = batch.wait(timeout=300)
    finally:
        s.close()
    assert [r.status for r in batch.runs] == ["failed", "aborted", "passed", "bad_input"]
    assert "node4" in (refused.error or "") and refused.record is None
    assert failing.record and "step 3" in (failing.record.error or "")
    assert [r.run_id for r in records] == [r.run_id for r in (failing, cancelled, passing)]
    # One ansible-playbook: its artifacts in the first run's dir, the others name them.
    first = emitter.results / "runs" / failing.run_id
    assert (first / "ansible-run").is_dir()
    for run in (cancelled, passing):
        named = (emitter.results / "runs" / run.run_id / PLAY_FILE).read_text().strip()
        assert named == str(first / "ansible-run")
    assert not (emitter.results / "runs" / refused.run_id).exists()
    # The failing run ended long before the one that ran its 40 steps.
    ended = {ev.run_id: ev.t for ev in _events(batch) if isinstance(ev, RunFinished)}
    assert ended[failing.run_id] < ended[passing.run_id] - 3
    steps = [ev.step for ev in _events(passing) if isinstance(ev, MetricSample)]
    assert steps == list(range(1, 41))


@pytest.mark.slow
def test_cancel_stops_the_run_and_skips_the_queue(emitter: Fleetperf) -> None:
    s = session(emitter, REPO / "inventory" / "local.yml")
    try:
        plans = s.plan([("emitter", "cpu/CPUx1x1")], {"hang_at_step": 2}, repeat=2)
        batch = s.start(plans)
        running, queued = batch.runs
        deadline = time.monotonic() + 300
        while running.status != "running" or not any(
            isinstance(ev, MetricSample) for ev in _events(running)
        ):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        batch.cancel()
        records = batch.wait(timeout=300)
    finally:
        s.close()
    assert running.status == "aborted" and running.record is not None
    assert running.record.status == "aborted"
    assert queued.status == "aborted" and queued.record is None
    assert records == [running.record]
    stored = Session(REPO / "inventory" / "local.yml", emitter.results, emitter.data_root)
    try:
        assert [r.status for r in stored.store.list()] == ["aborted"]
    finally:
        stored.close()


def _events(run) -> list[Event]:  # noqa: ANN001 - a RunHandle
    got: list[Event] = []
    run.subscribe(got.append)()  # subscribe replays what happened so far; then unsubscribe
    return got


def test_a_precision_the_vendor_cannot_run_is_refused_before_launch(tmp_path: Path) -> None:
    s = Session(REPO / "inventory" / "local.yml", tmp_path / "results", tmp_path / "data")
    try:
        with pytest.raises(CatalogError) as err:
            s.plan([("distilbert-pytorch", "cpu/CPUx1x1")], {"precision": "fp16"})
    finally:
        s.close()
    assert str(err.value) == (
        "distilbert-pytorch cpu/CPUx1x1: precision 'fp16' is not available on vendor 'cpu';"
        " it has fp32, bf16"
    )
    assert not (tmp_path / "results" / "runs").exists()


def test_a_late_subscriber_gets_every_state_and_the_newest_samples_in_order() -> None:
    subscribers = Subscribers()
    emitted: list[Event] = [RunStarted("r", "c", "cpu/CPUx1x1", ["h"], 0.0)]
    for step in range(REPLAY_SAMPLES + 100):
        if step == 50:  # a state among the samples that will be dropped from the replay
            emitted.append(HostState("r", "h", "running"))
        emitted.append(
            MetricSample("r", "h", 0, step, step, step, step, None, 1.0, None, 1.0, None, None)
        )
    emitted.append(RunFinished("r", "passed", None, 1.0))
    for ev in emitted:
        subscribers.emit(ev)
    replay: list[Event] = []
    subscribers.subscribe(replay.append)
    samples = [ev for ev in emitted if isinstance(ev, MetricSample)]
    others = [ev for ev in emitted if not isinstance(ev, MetricSample)]
    assert replay == others[:2] + samples[-REPLAY_SAMPLES:] + others[2:]


# Lines that broke the old parser (RecursionError, OverflowError, AttributeError) or came
# through (1e999, a line of 70 KiB), each written by the workload before its result.
BAD_LINES = [
    '{"t": 1, "kind": "step", "rank": 0, "step": 1, "samples": '
    + "[" * 30_000
    + "]" * 30_000
    + "}",
    '{"t": 1' + "0" * 400 + ', "kind": "step", "rank": 0, "step": 1, "samples": 8}',
    '{"t": 1, "kind": "result", "rank": 0, "status": "passed", "converged": true, "metrics": [1]}',
    '{"t": 1, "kind": "eval", "rank": 0, "name": "acc", "value": 1e999}',
    '{"t": 1, "kind": "step", "rank": 0, "step": 1, "samples": 8, "pad": "' + "x" * 70_000 + '"}',
]


@pytest.mark.slow
@pytest.mark.parametrize("reach", ["followed", "polled"])
def test_bad_lines_before_a_good_result_leave_a_passed_run_that_notes_them(
    emitter: Fleetperf, tmp_path: Path, reach: str
) -> None:
    """Followed: the follower's thread and the recovery read past every bad line. Polled
    (a connection only a play can render is polled): the poll's lines likewise. And
    result.json replaces whatever was there, never rewriting it in place."""
    script = emitter.cases_dir / "emitter" / "emitter.py"
    bad = "".join(f"    out.write({line!r} + '\\n')\n" for line in BAD_LINES)
    script.write_text(
        script.read_text().replace(
            '    write(\n        "result",', bad + '    write(\n        "result",', 1
        )
    )
    host = local_host(emitter, "node1")
    if reach == "polled":
        host["ansible_connection"] = "{{ 'local' }}"
    inv = write_inventory(tmp_path / "inv.yml", {"node1": host})
    s = session(emitter, inv)
    kept: list[Path] = []

    def before_the_end(ev: Event) -> None:
        # A result.json already there (and a second name for its file): replaced, not rewritten.
        if isinstance(ev, MetricSample) and not kept:
            run_dir = emitter.results / "runs" / ev.run_id
            (run_dir / "result.json").write_text("old\n")
            os.link(run_dir / "result.json", run_dir / "old-result.json")
            kept.append(run_dir)

    try:
        (plan,) = s.plan([("emitter", "cpu/CPUx1x1")], catalog.parse_sets(["steps=3"]))
        batch = s.start([plan])
        batch.runs[0].subscribe(before_the_end)
        (record,) = batch.wait(timeout=300)
    finally:
        s.close()
    assert record.status == "passed", record.error
    assert record.metrics["acc"] == 1.0
    assert record.notes[-1] == (
        "5 event line(s) broke the workload contract (docs/workload-contract.md) and were"
        " dropped: 1 a non-finite number; 1 an integer out of range; 1 longer than 64 KiB;"
        " 1 not JSON (or nested too deep); 1 result: metrics not an object"
    )
    (run_dir,) = kept
    assert (run_dir / "old-result.json").read_text() == "old\n"
    assert json.loads((run_dir / "result.json").read_text()) == record.to_json_dict()
    assert not list(run_dir.glob(".result.json*"))  # no temporary file left
