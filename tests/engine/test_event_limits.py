"""Event lines over the length limit on both readers of a host's events file: the
follower (tui/core/stream.py) and the poll (playbooks/library/fleetperf_tail.py). Each keeps
only the head of such a line, for the parser to drop and count, and reads on past it."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from test_modules import NO_PID, tail

from tui.core.events import DROPPED, MAX_LINE_BYTES, parse_line
from tui.core.stream import Follower, Reach

STEP = json.dumps({"t": 1.0, "kind": "step", "rank": 0, "step": 1, "samples": 8})
HUGE = json.dumps({"t": 1.0, "kind": "step", "rank": 0, "pad": "x" * (3 << 20)})  # 3 MiB


def test_a_follower_hands_on_only_the_head_of_a_huge_line_and_reads_past_it(
    tmp_path: Path,
) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text(HUGE + "\n" + STEP + "\n")
    got: list[str] = []
    done = threading.Event()

    def on_line(line: str) -> None:
        got.append(line)
        if line == STEP:
            done.set()

    follower = Follower(Reach().argv(str(events)), on_line)
    try:
        assert done.wait(30), [len(line) for line in got]
        assert follower.drain(events.stat().st_size, 5)
    finally:
        follower.close()
    assert [len(line) for line in got] == [MAX_LINE_BYTES + 1, len(STEP)]
    DROPPED.take("limits")
    assert [parse_line("limits", "h", line) is None for line in got] == [True, False]
    assert dict(DROPPED.take("limits")) == {"longer than 64 KiB": 1}


def test_a_poll_passes_a_line_longer_than_it_reads_and_ends_after_the_exit(
    tmp_path: Path,
) -> None:
    """A line over max_bytes (1 MiB) never moved the offset: the poll handed back nothing,
    and after the workload's exit the play polled again at once, without end."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "workload.pid").write_text(NO_PID)
    (run_dir / "events.jsonl").write_text(HUGE + "\n" + STEP + "\n")
    (run_dir / "exit_code").write_text("0")
    got, polls = [], 0
    t0 = time.monotonic()
    while True:
        res, _ = tail(run_dir, wait=5)
        polls += 1
        got += res["lines"]
        if res["finished"] or polls == 5:
            break
    assert res["finished"] and polls <= 2, (polls, [len(line) for line in got])
    assert [len(line) for line in got] == [MAX_LINE_BYTES + 1, len(STEP)]
    assert got[1] == STEP and HUGE.startswith(got[0])
    assert res["offset"] == (run_dir / "events.jsonl").stat().st_size
    assert time.monotonic() - t0 < 30
