"""The report's qualification section (``fleetperf qualify``, issue 42): the store's newest
qualification, its verdict table and each judged link metric's matrix as a heat map.

The links are judge_links' verdicts (tui/qualify/judge.py), judged again from the records
of the qualification's batches by the report's caller (tui/qualify/links.py; the judge is
a layer above this one): each pair is shaded by its ratio to its peers' median and marked
when it is flagged, as the app's Fleet view draws it and as the command names it. The
shades' edges are defined here once, for the report and the app. Host names, metrics and
reasons come from records and other controllers: every one is HTML-escaped.
Controller code: no textual.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from tui.core.text import html_text as _e
from tui.results.htmltable import html_table

# A pair's shade by its ratio to its peers' median: the first edge it reaches; below the
# last one, "bad". "none": no ratio (too few samples or peers).
HEAT_EDGES = ((0.9, "ok"), (0.7, "slow"))
FLAGGED = "!"  # after the value of a pair judge_links flagged

CSS = """
.heat td{text-align:right} .heat-ok{background:#cfc} .heat-slow{background:#fe8}
.heat-bad{background:#f99} .heat-none{color:#999} .heat-flagged{font-weight:bold}
"""


class Link(Protocol):
    """A judged pair as this module reads it (judge.LinkVerdict)."""

    pair: tuple[str, str]
    median: float | None
    ratio: float | None
    verdict: str
    reason: str


class Matrix(Protocol):
    """A link metric's pairs judged (judge.LinkReport)."""

    links: Sequence[Link]


def heat_class(ratio: float | None) -> str:
    """A pair's shade in the report's and the app's heat maps, by its ratio to its peers'
    median (judge_links'): "ok", "slow", "bad" or "none"."""
    if ratio is None or not math.isfinite(ratio):
        return "none"
    return next((name for edge, name in HEAT_EDGES if ratio >= edge), "bad")


def mark(verdict: str) -> str:
    """What follows a pair's value: ``!`` when judge_links flagged it."""
    return FLAGGED if verdict == "flagged" else ""


def heat_legend() -> str:
    """The shades and the mark in words, from HEAT_EDGES."""
    (ok, _), (slow, _) = HEAT_EDGES
    ok_pct, slow_pct = round((1 - ok) * 100), round((1 - slow) * 100)
    return (
        f"green: less than {ok_pct} % below its peers' median, yellow: {ok_pct}-{slow_pct} %"
        f" below, red: further; {FLAGGED}: flagged"
    )


def heat_map(metric: str, hosts: Sequence[str], matrix: Matrix) -> str:
    """One link metric's matrix as an HTML table: each pair's median, shaded by its ratio to
    its peers' median, ``!`` on a flagged pair; the verdict and reason on hover."""
    by_pair = {frozenset(link.pair): link for link in matrix.links}
    rows = []
    for a in hosts:
        cells = [f"<th>{_e(a)}</th>"]
        for b in hosts:
            link = by_pair.get(frozenset((a, b))) if a != b else None
            if link is None or link.median is None:
                cells.append(f'<td class="heat-none">{"·" if a == b else "-"}</td>')
                continue
            shade = f"heat-{heat_class(link.ratio)}"
            shade += " heat-flagged" if mark(link.verdict) else ""
            ratio = "-" if link.ratio is None else f"{link.ratio:.2f}×"
            why = f": {link.reason}" if link.reason else ""
            tip = f"{a} – {b}: {link.median:.4g}, {ratio} its peers' median; {link.verdict}{why}"
            cells.append(
                f'<td class="{shade}" title="{_e(tip)}">{link.median:.4g}{mark(link.verdict)}</td>'
            )
        rows.append("<tr>" + "".join(cells) + "</tr>")
    head = "<tr><th></th>" + "".join(f"<th>{_e(h)}</th>" for h in hosts) + "</tr>"
    return (
        f'<h3>Links: {_e(metric)}</h3><table class="heat">{head}{"".join(rows)}</table>'
        f'<p class="note">Each pair\'s median; {_e(heat_legend())}.</p>'
    )


def section(rows: Sequence[dict[str, Any]], links: Mapping[str, Matrix]) -> list[str]:
    """The newest qualification: its verdict table (``rows``, qualifications.latest's) and
    each link metric's heat map (``links``: label -> the pairs judge_links judged)."""
    if not rows:
        return []
    first = rows[0]
    linked = {h for matrix in links.values() for link in matrix.links for h in link.pair}
    hosts = sorted({r["host"] for r in rows} | linked)
    parts = [
        '<section id="qualification">',
        f"<h2>Qualification: group {_e(first['grp'])}, {_e(first['started'])}</h2>",
    ]
    table = []
    for r in rows:
        verdict = r["verdict"] + (
            f": {r['reason']}" if r["reason"] and r["verdict"] != "ok" else ""
        )
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}×"
        interval = "-" if r["lo"] is None else f"{r['lo']:.4g}–{r['hi']:.4g} ({r['n']})"
        median = "-" if r["median"] is None else f"{r['median']:.4g}"
        host = r["host"] + (f" #{r['device']}" if r["device"] else "")
        table.append([r["metric"], host, median, ratio, interval, verdict])
    parts.append(
        html_table(
            ["metric", "host", "value", "ratio to peers", "interval (samples)", "verdict"], table
        )
    )
    for metric, matrix in sorted(links.items()):
        parts.append(heat_map(metric, hosts, matrix))
    parts.append("</section>")
    return parts
