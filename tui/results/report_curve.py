"""The HTML report's serving curve (issue 43): for each shown run with a sweep's points, a
table (tui/results/curve.py) and an inline SVG of system tokens/s against tokens/s per user,
each point labelled with its load and p90 TTFT. Points without a per-user figure are in the
table only."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from tui.core.text import html_text as _e
from tui.results.curve import DEFINITION, HEADER, CurvePoint, cells, curve
from tui.results.htmltable import html_table
from tui.results.record import RunRecord

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 640, 260, 70, 30, 24, 40  # px


def sections(records: Sequence[RunRecord]) -> Iterator[str]:
    """The curve of each record that has points."""
    for run in records:
        if not run.points:
            continue
        points, skipped = curve(run)
        yield f"<h3>Serving curve of run {_e(run.run_id)} ({_e(run.vendor)}/{_e(run.config)})</h3>"
        yield html_table(HEADER, [cells(p) for p in points])
        note = DEFINITION + (f"; {skipped} malformed point(s) left out" if skipped else "")
        yield f'<p class="note">{_e(note)}</p>'
        drawn = [p for p in points if p.user_tokens_per_s is not None and p.system_tokens_per_s]
        if len(drawn) >= 2:
            yield chart(drawn)


def chart(points: list[CurvePoint]) -> str:
    """System tokens/s (y) against tokens/s per user (x), the points joined in load order."""
    xs = [p.user_tokens_per_s or 0.0 for p in points]
    ys = [p.system_tokens_per_s or 0.0 for p in points]

    def sx(v: float) -> float:
        return PAD_L + v / (max(xs) * 1.1 or 1) * (W - PAD_L - PAD_R)

    def sy(v: float) -> float:
        return H - PAD_B - v / (max(ys) * 1.1 or 1) * (H - PAD_T - PAD_B)

    body = [
        f'<line class="axis" x1="{PAD_L}" y1="{PAD_T}" x2="{PAD_L}" y2="{H - PAD_B}"/>',
        f'<line class="axis" x1="{PAD_L}" y1="{H - PAD_B}" x2="{W - PAD_R}" y2="{H - PAD_B}"/>',
        f'<text x="{PAD_L}" y="14">system output tokens/s</text>',
        f'<text x="{W - PAD_R}" y="{H - 6}" text-anchor="end">tokens/s per user '
        "(1000 / p90 TPOT)</text>",
        f'<text x="{PAD_L - 4}" y="{sy(max(ys)) + 4:.1f}" text-anchor="end">{max(ys):.4g}</text>',
        f'<text x="{PAD_L - 4}" y="{H - PAD_B + 4}" text-anchor="end">0</text>',
        f'<text x="{sx(max(xs)):.1f}" y="{H - PAD_B + 14}" text-anchor="middle">'
        f"{max(xs):.4g}</text>",
    ]
    path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(xs, ys, strict=True))
    body.append(f'<polyline class="line" points="{path}"/>')
    for p, x, y in zip(points, xs, ys, strict=True):
        ttft = "/" if p.ttft_p90_ms is None else f"{p.ttft_p90_ms:.0f} ms"
        body.append(f'<circle class="pt" cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3"/>')
        left = sx(x) > W / 2  # the label on the side with room for it
        at = f'x="{sx(x) - 5:.1f}" text-anchor="end"' if left else f'x="{sx(x) + 5:.1f}"'
        body.append(f'<text {at} y="{sy(y) - 5:.1f}">{_e(p.label)}, TTFT p90 {ttft}</text>')
    label = "serving curve: system tokens/s against tokens/s per user"
    return (
        f'<svg class="chart chart-curve" role="img" aria-label="{label}" width="{W}"'
        f' height="{H}" viewBox="0 0 {W} {H}" xmlns="http://www.w3.org/2000/svg">'
        f"<title>{label}</title>{''.join(body)}</svg>"
    )
