"""A serving run live (issue 43): the workload's step record carries the interval's
requests/s and TTFT p99; the dashboard's row shows tokens/s (the difference of the records'
cumulative tokens) and the TTFT p99 in its note column."""

from __future__ import annotations

import json

from tui.app.feed import RunFeed
from tui.app.screens.dashboard import _cells
from tui.core.events import MetricSample, RunStarted, parse

RUN = "20261129-120000-llm-serving-0001"


def step(n: int, t: float, ttft: object) -> str:
    """A step record as cases/llm-serving/live.py's Live writes it."""
    record = {"t": t, "kind": "step", "rank": 0, "step": n, "samples": 8 * n}
    return json.dumps({**record, "tokens": 256 * n, "throughput": 1.6, "ttft_p99_ms": ttft})


def test_a_serving_step_s_ttft_p99_and_tokens_per_s_reach_the_dashboard_row() -> None:
    feed = RunFeed()
    feed.add_run(RUN, "llm-serving", "cpu/CPUx1x1", ["localhost"], {})
    feed.push(RunStarted(RUN, "llm-serving", "cpu/CPUx1x1", ["localhost"], 0.0))
    for n, t in ((1, 5.0), (2, 10.0)):
        ev = parse(RUN, "localhost", step(n, t, 51.4))
        assert isinstance(ev, MetricSample) and ev.ttft_p99_ms == 51.4
        feed.push(ev)
    row = feed.runs[RUN].rows["localhost"]
    cells = _cells(row)
    assert cells[3:5] == ("1.6", "51")  # requests/s; 256 tokens in 5 s
    assert cells[-1] == "TTFT p99 51 ms"
    quiet = parse(RUN, "localhost", step(3, 15.0, None))  # an interval nothing answered in
    assert isinstance(quiet, MetricSample) and quiet.ttft_p99_ms is None
    feed.push(quiet)
    assert _cells(feed.runs[RUN].rows["localhost"])[-1] == ""
