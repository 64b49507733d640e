"""llm-serving's loads in one run (issue 43): the points of a sweep (``--set
concurrency=1,2,4`` or ``--set request_rate=1,2,4``: case.yaml's ``sweep``) and the search for
the highest load meeting the SLO (``--set find_max_load=1``). A point meets the SLO when its
goodput ratio (the timed requests answered within both ``slo_ttft_ms`` and ``slo_tpot_ms``,
over all timed requests: a failed one counts against it) is at least ``slo_goodput_ratio``.
Standard library only."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import harness

KEYS = ("concurrency", "request_rate")
# The metric naming the search's answer, per swept key (its unit is the key's: case.yaml).
ANSWER = {"concurrency": "max_concurrency_meeting_slo", "request_rate": "max_rate_meeting_slo"}
RATE_STEP = 0.05  # a rate search stops when the bracket is within 5 % of its lower end


def swept(hp: Mapping[str, Any]) -> tuple[str, list[float]]:
    """The swept key and its points: the one key given a list; else the one load (request
    rate where it is set, an open loop, else concurrency), the search's start."""
    lists = [k for k in KEYS if isinstance(hp[k], list)]
    if len(lists) > 1:
        raise harness.InputError("concurrency and request_rate both given lists: sweep one")
    if lists and hp["find_max_load"]:
        raise harness.InputError(
            f"find_max_load searches from one {lists[0]}, not a list (got {hp[lists[0]]})"
        )
    if lists:
        return lists[0], list(hp[lists[0]])
    key = "request_rate" if hp["request_rate"] > 0 else "concurrency"
    return key, [hp[key]]


def meets(metrics: Mapping[str, float | None], ratio: float) -> bool:
    value = metrics.get("goodput_ratio")
    return value is not None and value >= ratio


def find_max(
    start: float, meets_at: Callable[[float], bool], max_points: int, cap: float | None
) -> float | None:
    """The highest load meeting the SLO among those tried: ``start``, doubled until a point
    misses (or reaches ``cap``), then bisection between the highest that met and the lowest
    that missed; at most ``max_points`` tried. Integer loads (concurrency) stay integers.
    None when ``start`` itself misses."""
    whole = isinstance(start, int)
    good: float | None = None
    bad: float | None = None
    load = start
    for _ in range(max_points):
        if meets_at(load):
            good = load
        else:
            bad = load
        if good is None:
            return None
        if bad is None:
            if cap is not None and load >= cap:
                return good
            load = load * 2 if cap is None else min(load * 2, cap)
            continue
        if (bad - good <= 1) if whole else (bad - good <= RATE_STEP * good):
            return good
        load = (good + bad) // 2 if whole else round((good + bad) / 2, 3)
    return good


def reported(points: list[dict[str, Any]], key: str, ratio: float) -> tuple[int, str]:
    """Which point the record's top-level metrics are, and a note saying so: the highest
    load meeting the SLO, else the first point."""
    passing = [i for i, p in enumerate(points) if meets(p["metrics"], ratio)]
    if not passing:
        first = points[0]["hp"][key]
        return 0, (
            f"the top-level metrics are the first point's ({key} {first}): no point met the "
            f"SLO (goodput ratio >= {ratio})"
        )
    best = max(passing, key=lambda i: points[i]["hp"][key])
    return best, (
        f"the top-level metrics are {key} {points[best]['hp'][key]}'s, the highest load "
        f"meeting the SLO (goodput ratio >= {ratio})"
    )


def answer_note(key: str, first: float, answer: float | None, points: int, ratio: float) -> str:
    """What find_max_load found, for the record's notes."""
    if answer is None:
        return (
            f"find_max_load: even the lowest point, {key} {first}, misses the SLO "
            f"(goodput ratio >= {ratio}): {ANSWER[key]} is null"
        )
    return (
        f"find_max_load: from {key} {first}, doubled then bisected (at most {points} points), "
        f"the highest meeting the SLO (goodput ratio >= {ratio}): {answer}"
    )
