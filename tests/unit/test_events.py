"""Workload lines and ansible-runner events -> typed events."""

from __future__ import annotations

import dataclasses
import json
import threading
import typing
from pathlib import Path

import pytest
from seed_records import PEAK

from tui.core.events import (
    DROPPED,
    MAX_LINE_BYTES,
    CaseResult,
    EvalSample,
    Event,
    HostState,
    MetricSample,
    SysSample,
    WorkloadError,
    WorkloadStarted,
    parse_line,
)
from tui.executors.ansiblerun import step_of
from tui.executors.steps import blame, step_events


def from_runner(run_id: str, raw: dict, received: float | None = None) -> list[Event]:
    """An ansible-runner event as the play hands it on: its step's events."""
    step = step_of(raw)
    return step_events(run_id, step, received) if step else []


def line(**rec: object) -> str:
    return json.dumps({"t": 100.0, "rank": 0, **rec})


def test_step_line() -> None:
    ev = parse_line(
        "r1",
        "h1",
        line(
            kind="step",
            step=5,
            samples=80,
            tokens=640,
            loss=0.5,
            lr=1e-3,
            throughput=12.5,
            mem_used_gib=1.5,
            mem_total_gib=8.0,
        ),
        100.4,
    )
    assert isinstance(ev, MetricSample)
    assert (ev.host, ev.step, ev.samples, ev.tokens, ev.loss) == ("h1", 5, 80, 640, 0.5)
    assert abs(ev.latency - 0.4) < 1e-9


def test_other_kinds_and_bad_lines() -> None:
    assert isinstance(
        parse_line("r1", "h", line(kind="eval", name="acc", value=0.9, samples=10)), EvalSample
    )
    result = parse_line(
        "r1",
        "h",
        line(
            kind="result",
            status="passed",
            converged=True,
            metrics={"p_core": 3, "mfu": None},
            notes=["n"],
        ),
    )
    assert isinstance(result, CaseResult)
    assert result.metrics == {"p_core": 3.0, "mfu": None} and result.notes == ["n"]
    assert result.converged is True
    err = parse_line("r1", "h", line(kind="error", message=" boom \n", traceback="tb"))
    assert isinstance(err, WorkloadError) and err.message == "boom"
    assert parse_line("r1", "h", "{not json") is None
    assert parse_line("r1", "h", "[1, 2]") is None
    assert parse_line("r1", "h", line(kind="mystery")) is None


def test_poll_results_carry_lines() -> None:
    lines = [line(kind="step", step=1, samples=8), line(kind="step", step=2, samples=16)]
    for kind in ("runner_retry", "runner_on_ok"):
        raw = {
            "event": kind,
            "event_data": {
                "host": "n1",
                "task": "Renamed by anyone",
                "task_action": "fleetperf_tail",
                "res": {"lines": lines},
            },
        }
        evs = from_runner("r1", raw, 101.0)
        assert [e.step for e in evs if isinstance(e, MetricSample)] == [1, 2]
        assert all(e.host == "n1" and e.run_id == "r1" for e in evs)
    other = {
        "event": "runner_on_ok",
        "event_data": {
            "host": "n1",
            "task": "Poll events",  # the old task name: names mean nothing, actions do
            "task_action": "ansible.builtin.debug",
            "res": {"lines": lines},
        },
    }
    assert from_runner("r1", other) == []


def test_failures_and_unreachable() -> None:
    failed = {
        "event": "runner_on_failed",
        "event_data": {
            "host": "n1",
            "play": "Preflight",
            "task": "Fail on missing data",
            "res": {
                "msg": "All items completed",
                "results": [{"failed": False}, {"failed": True, "msg": "host n1: missing /d/x"}],
            },
        },
    }
    (ev,) = from_runner("r1", failed)
    assert ev == HostState("r1", "n1", "failed", "host n1: missing /d/x")
    unreachable = {
        "event": "runner_on_unreachable",
        "event_data": {"host": "n2", "play": "Preflight", "res": {"msg": "ssh: connect refused\n"}},
    }
    (ev,) = from_runner("r1", unreachable)
    assert ev.phase == "unreachable" and ev.message == "ssh: connect refused"
    ignored = {
        "event": "runner_on_failed",
        "event_data": {"host": "n1", "ignore_errors": True, "res": {}},
    }
    assert from_runner("r1", ignored) == []


def test_launch_and_last_poll_are_host_phases() -> None:
    launched = {
        "event": "runner_on_ok",
        "event_data": {"host": "n1", "task_action": "fleetperf_launch", "res": {"pid": 7}},
    }
    assert from_runner("r1", launched) == [HostState("r1", "n1", "running")]
    last = {
        "event": "runner_on_ok",
        "event_data": {
            "host": "n1",
            "resolved_action": "fleetperf.local.fleetperf_tail",  # a collection's FQCN
            "res": {"lines": [], "finished": True, "exit_code": 0},
        },
    }
    assert from_runner("r1", last) == [HostState("r1", "n1", "finished")]
    # A last poll that fails the host (the workload ended badly): its lines, then why.
    lines = [line(kind="step", step=9, samples=8)]
    res = {"lines": lines, "finished": True, "exit_code": 1, "msg": "host n1 rank 0: code 1"}
    crashed = {
        **last,
        "event": "runner_on_failed",
        "event_data": {**last["event_data"], "res": res},
    }
    step, failed = from_runner("r1", crashed)
    assert isinstance(step, MetricSample) and step.step == 9
    assert failed == HostState("r1", "n1", "failed", "host n1 rank 0: code 1")


def test_result_keeps_the_environment() -> None:
    env = {"hostname": "n1", "cpu": "EPYC", "packages": {"torch": "2.13"}}
    ev = parse_line(
        "r1", "h", line(kind="result", status="passed", converged=True, metrics={}, environment=env)
    )
    assert isinstance(ev, CaseResult) and ev.environment == env
    bad = parse_line(
        "r1", "h", line(kind="result", status="passed", converged=True, environment=[1])
    )
    assert isinstance(bad, CaseResult) and bad.environment == {}


def test_result_keeps_what_mfu_divides() -> None:
    """The contract's peak object reaches the record: known fields, numbers finite and not
    negative, text short; a wrong value is null, and a peak without its math is none."""

    def peak_of(peak: object) -> object:
        ev = parse_line("r1", "h", line(kind="result", status="passed", converged=True, peak=peak))
        assert isinstance(ev, CaseResult)
        return ev.peak

    assert peak_of(PEAK) == PEAK
    odd = {**PEAK, "datasheet_flops": "156", "measured_flops": -1, "chip": 7, "extra": 1}
    assert peak_of(odd) == {
        **PEAK,
        "datasheet_flops": None,
        "measured_flops": None,
        "chip": None,
    }
    assert peak_of({**PEAK, "chip": "x" * 201})["chip"] is None
    assert (
        peak_of({**PEAK, "model_flops_per_s_per_device": True})["model_flops_per_s_per_device"]
        is None
    )
    for bad in (None, [1], "tf32", {**PEAK, "math": None}, {**PEAK, "math": ""}):
        assert peak_of(bad) is None
    # A non-finite number anywhere breaks the line (as in metrics): the result is dropped.
    text = line(kind="result", status="passed", converged=True, peak=PEAK)
    broken = text.replace('"measured_flops": 120000000000000.0', '"measured_flops": 1e999')
    assert broken != text and parse_line("r1", "h", broken) is None


def test_events_are_immutable_values() -> None:
    """The engine hands one event to every subscriber, on other threads: none may change it."""
    for cls in typing.get_args(Event):
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls
        assert "__slots__" in vars(cls), cls  # no per-event dict: replays keep thousands
        first = dataclasses.fields(cls)[0]
        assert first.name == "run_id", cls


@pytest.mark.parametrize(
    "rec",
    [
        {"kind": "step", "t": 1.0, "step": 1, "samples": 8},  # no rank
        {"kind": "step", "rank": 0, "step": 1, "samples": 8},  # no time
        {"kind": "step", "t": 1.0, "rank": 0, "samples": 8},  # no step
        {"kind": "step", "t": 1.0, "rank": 0, "step": 1},  # no samples
        {"kind": "step", "t": 1.0, "rank": "zero", "step": 1, "samples": 8},
        {"kind": "step", "t": 1.0, "rank": 0, "step": None, "samples": 8},
        {"kind": "eval", "t": 1.0, "rank": 0, "value": 0.5},  # no name
        {"kind": "start", "t": 1.0, "rank": 0},  # no world size
        {"kind": "result", "t": 1.0, "rank": 0, "converged": True},  # no status
        {"kind": "result", "t": 1.0, "rank": 0, "status": "passed"},  # converged unsaid
        {"kind": "result", "t": 1.0, "rank": 0, "status": "passed", "converged": "yes"},
        {"kind": "step", "t": True, "rank": 0, "step": 1, "samples": 8},  # a bool is no time
        {"kind": "step", "t": 1.0, "rank": -1, "step": 1, "samples": 8},
        {"kind": "start", "t": 1.0, "rank": 0, "world_size": 0},
    ],
)
def test_a_line_that_breaks_the_contract_is_dropped_not_guessed(rec: dict) -> None:
    assert parse_line("r1", "h", json.dumps(rec)) is None


RESULT = {"t": 1.0, "kind": "result", "rank": 0, "status": "passed", "converged": True}
STEP = {"t": 1.0, "kind": "step", "rank": 0, "step": 1, "samples": 8}


def _with(rec: dict, key: str, raw: str) -> str:
    """``rec`` as a JSON line with ``key`` set to the raw JSON text ``raw``."""
    return json.dumps({**rec, key: None}).replace(f'"{key}": null', f'"{key}": {raw}')


MALFORMED = {
    "deep nesting": _with(RESULT, "environment", "[" * 30_000 + "]" * 30_000),
    "a 400-digit time": _with(STEP, "t", "9" * 400),
    "a 400-digit count": _with(STEP, "samples", "9" * 400),
    "metrics as a list": _with(RESULT, "metrics", "[1, 2]"),
    "1e999 as a value": _with({**STEP, "kind": "eval", "name": "acc"}, "value", "1e999"),
    "1e999 as a loss": _with(STEP, "loss", "1e999"),
    "NaN": _with(STEP, "loss", "NaN"),
    "oversize": json.dumps({**STEP, "pad": "x" * MAX_LINE_BYTES}),
    "oversize in bytes": json.dumps(
        {**STEP, "pad": "\u00e9" * (MAX_LINE_BYTES // 2)}, ensure_ascii=False
    ),
}


@pytest.mark.parametrize("bad", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_line_is_dropped_and_counted(bad: str) -> None:
    """Lines that raised RecursionError, OverflowError or AttributeError out of the
    follower's thread, or came through as events (inf, huge counts, huge lines)."""
    DROPPED.take("bad")
    assert parse_line("bad", "h", bad) is None
    assert DROPPED.take("bad").total() == 1
    assert DROPPED.take("bad").total() == 0  # taken once


def test_a_deeply_nested_line_on_a_thread_neither_raises_nor_crashes() -> None:
    """A follower parses on a thread of its own (a smaller stack than the main one)."""
    out: list[object] = []
    thread = threading.Thread(
        target=lambda: out.append(parse_line("bad", "h", MALFORMED["deep nesting"]))
    )
    thread.start()
    thread.join()
    assert out == [None]
    DROPPED.take("bad")


def test_fields_come_through_as_written() -> None:
    step = parse_line(
        "r1", "h", json.dumps({"kind": "step", "t": 7.5, "rank": 3, "step": 2, "samples": 16})
    )
    assert isinstance(step, MetricSample)
    assert (step.rank, step.t, step.step, step.samples, step.tokens) == (3, 7.5, 2, 16, None)
    start = parse_line("r1", "h", line(kind="start", world_size=4))
    assert start == WorkloadStarted("r1", "h", 0, 100.0, 4)
    ev = parse_line("r1", "h", line(kind="eval", name="acc", value=0.75, samples=12))
    assert ev == EvalSample("r1", "h", 0, 100.0, "acc", 0.75, 12)
    # An optional field of the wrong type is absent, never converted.
    ev = parse_line("r1", "h", line(kind="eval", name="acc", value=0.75, samples="12"))
    assert ev == EvalSample("r1", "h", 0, 100.0, "acc", 0.75, None)
    sys_ev = parse_line(
        "r1",
        "h",
        line(kind="sys", cpu_percent=50, power_w=None, busy=True, note="x", host_mem_used_gib=1.5),
    )
    assert isinstance(sys_ev, SysSample)
    assert sys_ev.values == {"cpu_percent": 50.0, "host_mem_used_gib": 1.5}
    failed = parse_line(
        "r1",
        "h",
        line(kind="result", status="failed", converged=False, message=" target\n not  reached "),
    )
    assert isinstance(failed, CaseResult)
    assert (failed.status, failed.converged, failed.message) == (
        "failed",
        False,
        "target not reached",
    )
    assert parse_line("r1", "h", line(kind="error")) == WorkloadError("r1", "h", 0, 100.0, "", "")


def _failed(res: dict, **data: object) -> HostState:
    (ev,) = from_runner("r1", {"event": "runner_on_failed", "event_data": {"res": res, **data}})
    assert isinstance(ev, HostState)
    return ev


def test_a_failure_says_why_from_whatever_the_module_left() -> None:
    assert _failed({"stderr": "no space"}, host="n1").message == "no space"
    assert _failed({"module_stderr": "Traceback: boom"}, host="n1").message == "Traceback: boom"
    assert _failed({"msg": "m", "stderr": "s"}, host="n1").message == "m"
    assert _failed({}, host="n1").message == "failed"
    loop = {"msg": "All items completed", "results": [{"failed": True}]}
    assert _failed(loop, host="n1").message == "All items completed"
    two = {"results": [{"failed": True, "msg": "first"}, {"failed": True, "msg": "second"}]}
    assert _failed(two, host="n1").message == "first"
    # ansible-runner names a delegated or unnamed host by its address only
    assert _failed({"msg": "x"}, remote_addr="10.0.0.7").host == "10.0.0.7"


@pytest.mark.parametrize("why", ["timed_out", "stalled"])
def test_a_tail_that_timed_out_or_stalled_is_not_finished(why: str) -> None:
    res = {"lines": [], "finished": True, "exit_code": 0, why: True}
    ev = {
        "event": "runner_on_ok",
        "event_data": {"host": "n1", "task_action": "fleetperf_tail", "res": res},
    }
    assert from_runner("r1", ev) == []


def test_blame_puts_a_workload_killed_by_a_signal_before_its_peers_consequences() -> None:
    """Issue 18 §13: node2's rank was SIGKILLed; node1's collective lost it first."""
    peer_error = WorkloadError("r1", "node1", 0, 5.0, "Connection closed by peer [10.0.0.2]:1")
    peer_exit = HostState(
        "r1", "node1", "failed", "host node1 rank 0: workload exited with code 1; stderr: "
        "RuntimeError: Connection closed by peer [10.0.0.2]:1",
    )  # fmt: skip
    killed = HostState(
        "r1", "node2", "failed", "host node2 rank 1: workload exited with code 1; stderr: "
        "exitcode  : -9 (pid: 7) | traceback : Signal 9 (SIGKILL) received by PID 7",
    )  # fmt: skip
    assert blame([peer_error, peer_exit, killed])[0] == killed.message
    # A host stopped by the play because another failed is a consequence too, though the
    # stop's own signal shows; an unreachable host is a failure of its own.
    stopped = HostState("r1", "node1", "failed", "host node1 rank 0: stopped (host node2 failed)")
    lost = HostState("r1", "node2", "unreachable", "host node2: unreachable: ssh: timed out")
    assert blame([stopped, lost]) == [lost.message, stopped.message]
    stopped_killed = HostState(
        "r1", "node1", "failed", "host node1 rank 0: stopped (host node2 failed) code -9"
    )
    assert blame([stopped_killed, lost])[0] == lost.message
    # One host's own failure: the workload's words before its exit's, whichever came first.
    exit_1 = HostState("r1", "h", "failed", "host h rank 0: workload exited with code 1")
    said = WorkloadError("r1", "h", 0, 5.0, "planned failure at step 3")
    assert blame([exit_1, said]) == ["host h rank 0: planned failure at step 3", exit_1.message]
    # Otherwise the first observed wins.
    first = HostState("r1", "a", "failed", "host a rank 0: timed out after 60 s")
    assert blame([first, exit_1])[0] == first.message


def test_every_kind_the_harness_writes_is_read(tmp_path: Path) -> None:
    """The kinds are defined once, by the writer (harness.events.KINDS): a record of each,
    as the writer emits it, becomes an event here; the writer refuses any other kind."""
    from harness.events import KINDS, EventWriter

    least = {
        "start": {"world_size": 1},
        "step": {"step": 1, "samples": 8},
        "eval": {"name": "acc", "value": 0.5},
        "sys": {"cpu_percent": 5.0},
        "result": {"status": "passed", "converged": True},
        "error": {"message": "boom"},
    }
    assert set(least) == set(KINDS)
    with EventWriter(tmp_path / "events.jsonl") as writer:
        for kind in KINDS:
            writer.emit(kind, **least[kind])
        with pytest.raises(ValueError, match="unknown event kind 'mystery'"):
            writer.emit("mystery")
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    assert len(lines) == len(KINDS)
    assert all(parse_line("r1", "h", text) is not None for text in lines)
