"""A serving sweep's curve (issue 43), from a record's ``points``: per load point, the
system's output tokens/s against the tokens/s each user sees, with p90 TTFT. MLPerf
Endpoints' definition: tokens/s per user = 1000 / p90 TPOT (ms); None where the point has no
positive TPOT, never a guess. A record's points came from a workload: each entry is checked
here and one that is not {"hp": {key: number}, "metrics": {...}} is left out and counted."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tui.results.record import RunRecord


@dataclass(frozen=True)
class CurvePoint:
    key: str  # the swept hyperparameter: concurrency, request_rate
    load: float
    system_tokens_per_s: float | None  # output tokens/s of the whole server
    user_tokens_per_s: float | None  # 1000 / tpot_p90_ms
    ttft_p90_ms: float | None
    goodput_ratio: float | None

    @property
    def label(self) -> str:
        return f"{self.key} {self.load:g}"


def per_user(tpot_p90_ms: Any) -> float | None:
    """Tokens/s per user, 1000 / p90 TPOT (ms); None for no number, 0, or below."""
    value = _number(tpot_p90_ms)
    return None if value is None or value <= 0 else 1000.0 / value


def curve(record: RunRecord) -> tuple[list[CurvePoint], int]:
    """The record's points in load order, and how many entries were left out malformed."""
    out, skipped = [], 0
    for entry in record.points or []:
        point = _point(entry)
        if point is None:
            skipped += 1
        else:
            out.append(point)
    return sorted(out, key=lambda p: p.load), skipped


def _point(entry: Any) -> CurvePoint | None:
    if not isinstance(entry, dict):
        return None
    hp, metrics = entry.get("hp"), entry.get("metrics")
    if not isinstance(hp, dict) or len(hp) != 1 or not isinstance(metrics, dict):
        return None
    ((key, raw),) = hp.items()
    load = _number(raw)
    if load is None or not isinstance(key, str):
        return None
    return CurvePoint(
        key=key,
        load=load,
        system_tokens_per_s=_number(metrics.get("output_tokens_per_s")),
        user_tokens_per_s=per_user(metrics.get("tpot_p90_ms")),
        ttft_p90_ms=_number(metrics.get("ttft_p90_ms")),
        goodput_ratio=_number(metrics.get("goodput_ratio")),
    )


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def cells(point: CurvePoint) -> list[str]:
    """One row of the curve's table, as the report and the app show it."""
    return [
        point.label,
        _show(point.system_tokens_per_s, ".1f"),
        _show(point.user_tokens_per_s, ".1f"),
        _show(point.ttft_p90_ms, ".1f"),
        _show(point.goodput_ratio, ".2f"),
    ]


HEADER = ["load", "system tokens/s", "tokens/s per user", "TTFT p90 (ms)", "goodput ratio"]
DEFINITION = (
    "system tokens/s: output tokens / wall time; tokens/s per user: 1000 / p90 TPOT (ms), "
    "MLPerf Endpoints' definition, '/' where TPOT is 0 or missing"
)


def _show(value: float | None, fmt: str) -> str:
    return "/" if value is None else format(value, fmt)
