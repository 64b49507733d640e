"""The HTML report's SVG charts (tui/results/report.py): a metric's history with its bands,
throughput per config with its references, a loss curve; their scales. No plotting library,
no script: every string HTML-escaped, every number drawn at a finite coordinate, however
extreme (values clamped to +-1e300, an empty span widened). Controller code: no torch."""

from __future__ import annotations

import math
from collections.abc import Sequence

from harness.metrics import Metric

from tui.core.text import html_text as _e
from tui.results.record import RunRecord
from tui.results.references import Reference
from tui.results.tables import format_fix_hp

MAX_CURVE = 500  # a loss curve is thinned to about this many points
W, H, PAD_L, PAD_R, PAD_T, PAD_B = 640, 220, 70, 20, 24, 34  # chart geometry (px)


def fmt_band(metric: Metric, low: float | None, high: float | None) -> str:
    """'>= 259.1', '<= 32.9', '259.1..316.7' in the metric's own format."""
    if low is not None and high is not None:
        return f"{metric.show(low)}..{metric.show(high)}"
    if low is not None:
        return f">= {metric.show(low)}"
    return f"<= {metric.show(high)}" if high is not None else "any"


# -- scales and SVG -------------------------------------------------------------------


# Values are drawn within +-_DRAWN: a span between two of them, padded, stays finite (at
# 1e308 it would overflow to inf, and inf - inf makes NaN coordinates).
_DRAWN = 1e300
_LOG_TICKS = 8  # at most about this many decades labelled on a log axis
_TINY = 1e-290  # a tick step below this loses its digits to subnormal rounding


def _drawn(v: float) -> float:
    """``v`` within what an axis can draw: clamped; NaN (an inf band's edge minus inf) at 0."""
    return 0.0 if math.isnan(v) else min(max(v, -_DRAWN), _DRAWN)


class _Scale:
    """Data -> pixels along one axis; log10 where the values span more than 20x. Every
    coordinate is finite: values are clamped to +-1e300, an empty span is widened.

    ``nice``: a linear axis ends on round ticks (1, 2 or 5 x 10^k apart) instead of a
    padding; ``within``: what the quantity can be (a fraction 0-1, a time from 0), so no
    band or widening draws an axis past it."""

    def __init__(
        self,
        lo: float,
        hi: float,
        px0: float,
        px1: float,
        log: bool = False,
        pad: float = 0.05,
        nice: bool = False,
        within: tuple[float, float] = (-math.inf, math.inf),
    ) -> None:
        lo, hi = _drawn(lo), _drawn(hi)
        self.log = log and lo > 0
        self.step = 0.0  # a nice axis's tick step
        if self.log:
            lo, hi = math.log10(lo), math.log10(hi)
        if hi <= lo:
            # 5% around one value (1 around 0): always above its float resolution
            width = abs(lo) * 0.05 or 1.0
            lo, hi = lo - width, hi + width
        if nice and not self.log:
            lo, hi = max(lo, within[0]), min(hi, within[1])
            self.step = _nice_step((hi - lo) / 5)  # 4 to 7 ticks
        if self.step:
            lo = max(math.floor(lo / self.step) * self.step, within[0])
            hi = min(math.ceil(hi / self.step) * self.step, within[1])
        else:
            pad = (hi - lo) * pad
            lo, hi = lo - pad, hi + pad
        self.lo, self.hi, self.px0, self.px1 = lo, hi, px0, px1

    def __call__(self, v: float) -> float:
        v = _drawn(v)
        if self.log:
            v = math.log10(max(v, 1e-300))
        return self.px0 + (v - self.lo) / (self.hi - self.lo) * (self.px1 - self.px0)

    def ticks(self, n: int = 4) -> list[float]:
        if self.log:
            first, last = math.ceil(self.lo), math.floor(self.hi)
            step = max(1, math.ceil((last - first) / _LOG_TICKS))
            return [10.0**e for e in range(first, last + 1, step)]
        if self.step:
            count = round((self.hi - self.lo) / self.step)
            return [self.lo + self.step * i for i in range(count + 1)]
        return [self.lo + (self.hi - self.lo) * i / n for i in range(n + 1)]

    def label(self, t: float, times: float = 1.0) -> str:
        """A tick's text (of ``t * times``: 100 for a percentage): as many decimals as the
        step needs and at least three significant digits, so neighbours never read alike."""
        biggest = max(abs(self.lo), abs(self.hi)) * times
        if self.log or not self.step or not 1e-4 <= biggest < 1e9:
            return _num(t * times)
        step = self.step * times
        decimals = max(-math.floor(math.log10(step)), 2 - math.floor(math.log10(biggest)), 0)
        return f"{t * times:.{decimals}f}"


def _nice_step(raw: float) -> float:
    """The round step (1, 2 or 5 x 10^k) at or above ``raw``; 0 for a span too small to
    divide (subnormal: the axis is padded instead)."""
    if raw < _TINY:
        return 0.0
    power = 10.0 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw * (1 - 1e-9))


def _within(metric: Metric | None, values: Sequence[float]) -> tuple[float, float]:
    """What the metric's values can be: a fraction 0-1; a quantity with a unit (time,
    rate, memory, energy) or values all at or above 0 (a loss), from 0."""
    if metric is not None and metric.unit == "fraction":
        return 0.0, 1.0
    if (metric is not None and metric.unit) or min(values, default=0.0) >= 0:
        return 0.0, math.inf
    return -math.inf, math.inf


def _num(v: float) -> str:
    return f"{v:.4g}"


def _svg(cls: str, label: str, body: list[str], height: int = H) -> str:
    return (
        f'<svg class="chart {cls}" role="img" aria-label="{_e(label)}" width="{W}"'
        f' height="{height}" viewBox="0 0 {W} {height}" xmlns="http://www.w3.org/2000/svg">'
        f"<title>{_e(label)}</title>{''.join(body)}</svg>"
    )


def _y_axis(y: _Scale, metric: Metric | None) -> list[str]:
    out = [f'<line class="axis" x1="{PAD_L}" y1="{PAD_T}" x2="{PAD_L}" y2="{H - PAD_B}"/>']
    for t in y.ticks():
        py = y(t)
        pct = metric is not None and metric.fmt == "pct"  # as the tables show it
        text = f"{y.label(t, 100)}%" if pct else y.label(t)
        out.append(
            f'<line class="grid" x1="{PAD_L}" y1="{py:.1f}" x2="{W - PAD_R}" y2="{py:.1f}"/>'
        )
        out.append(f'<text x="{PAD_L - 4}" y="{py + 4:.1f}" text-anchor="end">{_e(text)}</text>')
    return out


def history_chart(
    metric: Metric,
    runs: Sequence[RunRecord],
    bands: Sequence[tuple[float | None, float | None, float, float] | None],
    flagged: Sequence[bool],
) -> str:
    """One metric over a series' runs (x: run order): the band each run was held to,
    the bound that flags (dashed), the values, flagged points in red."""
    values = [r.metrics[metric.name] or 0.0 for r in runs]
    extent = list(values)
    for band in bands:
        if band is not None:
            extent += [band[2] - band[3], band[2] + band[3]]
    within = _within(metric, values)
    extent = [min(max(v, within[0]), within[1]) for v in extent]
    y = _Scale(min(extent), max(extent), H - PAD_B, PAD_T, nice=True, within=within)
    n = len(runs)
    x = _Scale(0, max(n - 1, 1), PAD_L + 8, W - PAD_R - 8, pad=0)
    body = _y_axis(y, metric)
    # The band: one quad per run, from the previous run's x (a step, as the band is).
    for i, band in enumerate(bands):
        if band is None:
            continue
        x0, x1 = x(i - 0.5) if i else x(i) - 3, x(i + 0.5) if i < n - 1 else x(i) + 3
        # Drawn within the axis: past what the metric can be, a band says nothing more.
        top, bottom = y(min(band[2] + band[3], y.hi)), y(max(band[2] - band[3], y.lo))
        body.append(
            f'<rect class="band" x="{x0:.1f}" y="{top:.1f}" width="{x1 - x0:.1f}"'
            f' height="{bottom - top:.1f}"/>'
        )
        edge = band[0] if band[0] is not None else band[1]
        if edge is not None and y.lo <= edge <= y.hi:  # a bound no value can cross: none
            body.append(
                f'<line class="bound" x1="{x0:.1f}" y1="{y(edge):.1f}" x2="{x1:.1f}"'
                f' y2="{y(edge):.1f}"/>'
            )
    path = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
    body.append(f'<polyline class="line" points="{path}"/>')
    for i, (run, v) in enumerate(zip(runs, values, strict=True)):
        cls = "flagged" if flagged[i] else "pt"
        tip = f"{run.run_id} {run.started} {metric.name} {metric.show(v)}"
        if bands[i] is not None:
            tip += f", band {fmt_band(metric, bands[i][0], bands[i][1])}"
        if flagged[i]:
            tip += " FLAGGED"
        r = 4.5 if flagged[i] else 3
        body.append(
            f'<circle class="{cls}" cx="{x(i):.1f}" cy="{y(v):.1f}" r="{r}"><title>{_e(tip)}'
            "</title></circle>"
        )
    first, last = _x_labels(runs[0].started, runs[-1].started)
    body.append(f'<text x="{PAD_L}" y="{H - 8}">{_e(first)}</text>')
    body.append(f'<text x="{W - PAD_R}" y="{H - 8}" text-anchor="end">{_e(last)}</text>')
    unit = f" ({metric.unit})" if metric.unit else ""
    body.append(f'<text x="{PAD_L}" y="14">{_e(metric.name + unit)}</text>')
    return _svg("chart-history", f"{metric.name} history", body)


def _x_labels(first: str, last: str) -> tuple[str, str]:
    """The first and last runs' start (UTC, ISO): the date, with the time where the two
    share it (a day of runs reads 10:02 to 11:40, not the same date twice)."""
    if first[:10] != last[:10]:
        return first[:10], last[:10]
    seconds = first[11:16] == last[11:16]  # to the minute alike: the seconds tell them apart
    end = 19 if seconds else 16
    return f"{first[:10]} {first[11:end]} UTC", f"{last[11:end]} UTC"


def throughput_chart(
    metric: Metric, bars: list[tuple[str, float | None]], refs: dict[str, list[Reference]]
) -> str:
    """Horizontal bars, one per config (the newest passed run's value), with each config's
    references as red ticks over their band; a log scale where values span over 20x."""
    labels = list(dict.fromkeys([label for label, _ in bars] + list(refs)))
    row_h = 26
    height = PAD_T + PAD_B + row_h * max(len(labels), 1)
    known = [v for _, v in bars if v is not None and v > 0]
    known += [r.value for rs in refs.values() for r in rs if r.value > 0]
    lo, hi = (min(known), max(known)) if known else (1.0, 10.0)
    log = hi / lo > 20
    # Bars from 0: a linear axis starts there, on round ticks.
    x = _Scale(
        0 if not log else lo, hi, PAD_L + 140, W - PAD_R, log=log, nice=True, within=(0, math.inf)
    )
    body = []
    for t in x.ticks():
        px = x(t)
        body.append(
            f'<line class="grid" x1="{px:.1f}" y1="{PAD_T}" x2="{px:.1f}" y2="{height - PAD_B}"/>'
        )
        body.append(
            f'<text x="{px:.1f}" y="{height - PAD_B + 14}" text-anchor="middle">{x.label(t)}</text>'
        )
    values = dict(bars)
    base = x.px0 if x.log else x(0)
    for i, label in enumerate(labels):
        top = PAD_T + i * row_h
        body.append(f'<text x="{PAD_L + 134}" y="{top + 17}" text-anchor="end">{_e(label)}</text>')
        value = values.get(label)
        if value is not None and value > 0:
            tip = _e(f"{label}: {metric.show(value)}")
            body.append(
                f'<rect class="bar" x="{base:.1f}" y="{top + 5}" width="{x(value) - base:.1f}"'
                f' height="{row_h - 10}"><title>{tip}</title></rect>'
            )
        for ref in refs.get(label, []):
            lo_b, hi_b = ref.bounds(metric)
            a, b = x(lo_b if lo_b and lo_b > 0 else ref.value), x(hi_b if hi_b else ref.value)
            body.append(
                f'<rect class="refband" x="{a:.1f}" y="{top + 2}" width="{max(b - a, 0):.1f}"'
                f' height="{row_h - 4}"/>'
            )
            tip = f"reference {metric.show(ref.value)} {ref.unit}: {ref.source}"
            if ref.hp:
                tip += f" (with {format_fix_hp(ref.hp, {})})"
            body.append(
                f'<line class="ref" x1="{x(ref.value):.1f}" y1="{top + 2}" x2="{x(ref.value):.1f}"'
                f' y2="{top + row_h - 2}"><title>{_e(tip)}</title></line>'
            )
    scale = ", log scale" if x.log else ""
    body.append(f'<text x="{PAD_L}" y="14">{_e(f"{metric.name} ({metric.unit}){scale}")}</text>')
    return _svg("chart-throughput", f"{metric.name} per config", body, height)


def loss_chart(points: list[tuple[int, float]]) -> str:
    step = max(1, len(points) // MAX_CURVE)
    points = points[::step] + ([points[-1]] if (len(points) - 1) % step else [])
    x = _Scale(points[0][0], points[-1][0], PAD_L, W - PAD_R)
    losses = [v for _, v in points]
    y = _Scale(min(losses), max(losses), H - PAD_B, PAD_T, nice=True, within=_within(None, losses))
    body = _y_axis(y, None)
    path = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in points)
    body.append(f'<polyline class="loss" points="{path}"/>')
    body.append(f'<text x="{PAD_L}" y="{H - 8}">step {points[0][0]}</text>')
    body.append(f'<text x="{W - PAD_R}" y="{H - 8}" text-anchor="end">step {points[-1][0]}</text>')
    body.append(f'<text x="{PAD_L}" y="14">loss</text>')
    return _svg("chart-loss", "loss curve", body)
