"""One text per event (tui/core/eventtext.py) for both views, and one run-status vocabulary."""

from __future__ import annotations

import io
import typing

import pytest
from pydantic import ValidationError

from tui.app.feed import RunFeed
from tui.batch import ProgressPrinter
from tui.core.events import (
    CaseResult,
    EvalSample,
    HostState,
    RunFinished,
    RunStarted,
    RunStatus,
    SysSample,
    WorkloadError,
    WorkloadStarted,
)
from tui.core.eventtext import event_text
from tui.results.record import STATUSES, RunRecord

RUN = "20261125-120000-emitter-ab12"
EVENTS = [
    RunStarted(RUN, "emitter", "cpu/CPUx1x1", ["h1"], 0.0),
    WorkloadStarted(RUN, "h1", 0, 1.0, 2),
    EvalSample(RUN, "h1", 0, 2.0, "acc", 0.91234, 800),
    WorkloadError(RUN, "h1", 1, 3.0, "CUDA out of memory"),
    HostState(RUN, "h1", "failed", "host h1: failed: exit 1"),
    CaseResult(RUN, "h1", 0, 4.0, "failed", False, {}, notes=["a", "b"]),
    RunFinished(RUN, "failed", "host h1 rank 1: CUDA out of memory", 5.0),
]


def test_each_event_says_one_thing() -> None:
    said = [event_text(ev) for ev in EVENTS]
    assert [s.host if s else "-" for s in said] == [None, "h1", "h1", "h1", "h1", "h1", None]
    texts = [s.text for s in said if s]
    assert texts == [
        f"started emitter cpu/CPUx1x1 on h1 (run {RUN})",
        "started: world size 2",
        "eval acc=0.9123 after 800 samples",
        "rank 1 error: CUDA out of memory",
        "FAILED: host h1: failed: exit 1",
        f"result failed, 2 note(s) in the record (fleetperf results {RUN} --format json)",
        "failed: host h1 rank 1: CUDA out of memory",
    ]
    assert event_text(SysSample(RUN, "h1", 0, 1.0, {"cpu": 1.0})) is None
    assert event_text(HostState(RUN, "h1", "stopped")).text == (
        "stopped: the workload no longer runs there"
    )


def test_batch_and_app_print_the_same_words() -> None:
    out = io.StringIO()
    printer = ProgressPrinter(out, io.StringIO())
    feed = RunFeed()
    feed.add_run(RUN, "emitter", "cpu/CPUx1x1", ["h1"], {})
    for ev in EVENTS:
        printer(ev)
        feed.push(ev)
    _, _, logs = feed.take()
    printed = out.getvalue().splitlines()
    for ev in EVENTS:
        said = event_text(ev)
        assert said is not None
        assert any(line.endswith(said.text) for line in printed), said.text
        assert any(line.endswith(said.text) for _, line in logs[RUN]), said.text
    assert printed[0] == f"== started emitter cpu/CPUx1x1 on h1 (run {RUN})"
    assert printed[1] == "h1           started: world size 2"  # hosts padded to a column


def test_one_status_vocabulary() -> None:
    every = set(typing.get_args(RunStatus))
    assert set(STATUSES) < every and {"queued", "bad_input"} <= every - set(STATUSES)
    fields = {"run_id": RUN, "case": "emitter", "vendor": "cpu", "config": "cpu/CPUx1x1"}
    assert RunRecord(**fields, status="interrupted", started="2026-11-25T12:00:00Z")
    with pytest.raises(ValidationError, match="a record's status is one of"):
        RunRecord(**fields, status="queued", started="2026-11-25T12:00:00Z")
