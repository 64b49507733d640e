"""Workload lines and ansible-runner events -> typed events."""

from __future__ import annotations

import json

from tui.events import (
    CaseResult,
    EvalSample,
    HostState,
    MetricSample,
    WorkloadError,
    from_runner,
    parse_line,
)


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
    crashed = {
        **last,
        "event_data": {**last["event_data"], "res": {"finished": True, "exit_code": 1}},
    }
    assert from_runner("r1", crashed) == []  # the assert task after it says failed


def test_result_keeps_the_environment() -> None:
    env = {"hostname": "n1", "cpu": "EPYC", "packages": {"torch": "2.13"}}
    ev = parse_line(
        "r1", "h", line(kind="result", status="passed", converged=True, metrics={}, environment=env)
    )
    assert isinstance(ev, CaseResult) and ev.environment == env
    bad = parse_line("r1", "h", line(kind="result", status="passed", environment=[1]))
    assert isinstance(bad, CaseResult) and bad.environment == {}
