"""The pair schedule of a fleet's interconnect measurements: rounds of disjoint pairs, so
that every pair is measured once and no host is in two measurements at the same time."""

from __future__ import annotations

from collections.abc import Sequence


def pair_rounds(hosts: Sequence[str]) -> list[list[tuple[str, str]]]:
    """The circle method (a round-robin tournament): for N hosts, N-1 rounds of N/2
    disjoint pairs when N is even, N rounds of (N-1)/2 pairs (one host resting in each)
    when N is odd. Every unordered pair appears exactly once; each pair is (a, b) with
    a < b. The hosts are sorted first, so the same set of hosts gives the same schedule."""
    ordered = sorted(hosts)
    if len(set(ordered)) != len(ordered):
        twice = sorted({h for h in ordered if ordered.count(h) > 1})
        raise ValueError(f"host listed twice: {', '.join(twice)}")
    if len(ordered) < 2:
        return []
    # An odd fleet gets a placeholder: whoever is paired with it rests that round.
    circle: list[str | None] = [*ordered, None] if len(ordered) % 2 else list(ordered)
    n = len(circle)
    rounds = []
    for _ in range(n - 1):
        pairs = []
        for i in range(n // 2):
            a, b = circle[i], circle[n - 1 - i]
            if a is not None and b is not None:
                pairs.append((min(a, b), max(a, b)))
        rounds.append(sorted(pairs))
        # Keep the first seat, turn the others one place.
        circle = [circle[0], circle[-1], *circle[1:-1]]
    return rounds
