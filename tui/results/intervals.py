"""Distribution-free intervals of a median and whether one lies outside a band: the
statistics fleet qualification (tui/qualify/judge.py) and history verdicts
(tui/results/references.py) share. Pure, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache

# The confidence of an interval: the order-statistic interval of the median with at least
# this coverage, or the whole range where there are too few values to reach it.
CONFIDENCE = 0.95


@cache
def _order_rank(n: int) -> int:
    """The largest k (1-based) with P(X_(k) <= median <= X_(n+1-k)) >= CONFIDENCE, or 1."""
    below = 0.0  # P(Binomial(n, 1/2) <= k - 1)
    best = 1
    for k in range(1, n // 2 + 1):
        below += math.comb(n, k - 1) / 2**n
        if 1 - 2 * below < CONFIDENCE:
            break
        best = k
    return best


def interval(values: Sequence[float]) -> tuple[float, float]:
    """A distribution-free confidence interval of the median of ``values``: the order
    statistics X_(k), X_(n+1-k) covering the median with probability >= 95 %; the whole
    range (min, max) where fewer than 6 values cannot reach that. Deterministic."""
    if not values:
        raise ValueError("interval of no values")
    ordered = sorted(values)
    k = _order_rank(len(ordered))
    return ordered[k - 1], ordered[len(ordered) - k]


def side(
    iv: tuple[float, float],
    band: tuple[float, float],
    floor_pct: float,
    centre: float | None = None,
) -> int:
    """-1 when interval ``iv`` lies wholly below ``band`` by more than ``floor_pct`` percent
    of the band's centre (its midpoint, or ``centre``: the peers' median of a band that is
    not symmetric), +1 wholly above, 0 otherwise."""
    mid = (band[0] + band[1]) / 2 if centre is None else centre
    margin = abs(mid) * floor_pct / 100
    if iv[1] < band[0] - margin:
        return -1
    if iv[0] > band[1] + margin:
        return 1
    return 0


def outside(iv: tuple[float, float], band: tuple[float, float], floor_pct: float) -> bool:
    """Whether interval ``iv`` lies wholly outside ``band`` by more than ``floor_pct``
    percent of the band's centre (either side)."""
    return side(iv, band, floor_pct) != 0
