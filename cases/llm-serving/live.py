"""llm-serving's live figures: the step records the workload emits while a load runs."""

from __future__ import annotations

import time

import harness
import loadgen
import serving_metrics


class Live:
    """The step records while the load runs, every 5 s and at each point's end: requests
    answered and output tokens, cumulative over the run's points, and the interval's
    requests/s (``throughput``) and TTFT p99 (``ttft_p99_ms``) of the requests it answered.
    The dashboard's tokens/s is the interval's too (the difference of ``tokens``)."""

    def __init__(self, run: harness.Run) -> None:
        self.run, self.steps, self.samples, self.tokens = run, 0, 0, 0
        self.seen, self.t = 0, time.perf_counter()

    def start_point(self) -> None:
        self.seen, self.t = 0, time.perf_counter()

    def progress(self, done: list[loadgen.Outcome]) -> None:
        self.run.memory.sample()  # the workload and its descendants: the server's processes
        now = time.perf_counter()
        new = [o for o in done[self.seen :] if o.ok]
        ok = [o for o in done if o.ok]
        self.steps += 1
        self.run.events.emit(
            "step",
            step=self.steps,
            samples=self.samples + len(ok),
            tokens=self.tokens + sum(o.output_len for o in ok),
            throughput=len(new) / (now - self.t) if now > self.t else None,
            ttft_p99_ms=serving_metrics.percentile([o.ttft * 1000 for o in new], 99)
            if new
            else None,
        )
        self.seen, self.t = len(done), now

    def end_point(self, outcomes: list[loadgen.Outcome]) -> None:
        self.progress(outcomes)  # the point's last record and memory reading, the server up
        ok = [o for o in outcomes if o.ok]
        self.samples += len(ok)
        self.tokens += sum(o.output_len for o in ok)
