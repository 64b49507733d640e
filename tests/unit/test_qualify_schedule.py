"""The pair schedule of fleet qualification (issue 42): every pair once, no host twice in a
round, N-1 rounds for even N, up to 1,000 hosts; and what a qualification costs at 4, 32 and
1,000 hosts (the figures docs/qualify.md's "Cost" section gives)."""

from __future__ import annotations

import random
import time
from itertools import combinations

import pytest

from tui.qualify.judge import Rule, Sample, judge, judge_links
from tui.qualify.schedule import pair_rounds

# suites/base.yaml for one 8-device chip (nvidia/H100): 11 runs, one judged metric each.
HOST_METRICS = 11
REPEAT = 3


def hosts(n: int) -> list[str]:
    return [f"node{i:04d}" for i in range(n)]


def check(rounds: list[list[tuple[str, str]]], names: list[str]) -> None:
    """Every unordered pair exactly once, no host twice in a round, the fewest rounds."""
    n = len(names)
    pairs = [p for r in rounds for p in r]
    assert sorted(pairs) == list(combinations(sorted(names), 2))
    for r in rounds:
        busy = [h for p in r for h in p]
        assert len(busy) == len(set(busy))
    assert len(rounds) == (0 if n < 2 else n - 1 if n % 2 == 0 else n)
    assert all(len(r) == n // 2 for r in rounds)


@pytest.mark.parametrize("n", [*range(0, 41), 99, 100, 257])
def test_every_pair_once_no_host_twice_in_a_round(n: int) -> None:
    names = hosts(n)
    check(pair_rounds(names), names)


def test_a_thousand_hosts() -> None:
    names = hosts(1000)
    rounds = pair_rounds(names)
    check(rounds, names)
    assert (len(rounds), len(rounds[0])) == (999, 500)


def test_the_same_hosts_in_any_order_give_the_same_schedule() -> None:
    names = hosts(9)
    shuffled = list(names)
    random.Random(1).shuffle(shuffled)
    assert pair_rounds(shuffled) == pair_rounds(names)
    assert pair_rounds(["b", "a"]) == [[("a", "b")]]


def test_a_host_listed_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="host listed twice: b"):
        pair_rounds(["a", "b", "c", "b"])


def test_any_k_rounds_give_every_host_k_partners() -> None:
    # What a partial pair phase (docs/qualify.md, Cost) relies on: the first k rounds of an
    # even fleet give each host k distinct partners.
    rounds = pair_rounds(hosts(32))
    for k in (1, 2, 3, 8):
        partners: dict[str, set[str]] = {}
        for a, b in (p for r in rounds[:k] for p in r):
            partners.setdefault(a, set()).add(b)
            partners.setdefault(b, set()).add(a)
        assert {len(s) for s in partners.values()} == {k}


def cost(n: int) -> dict[str, int]:
    """A qualification of ``n`` hosts: rounds of the pair phase, pairs in all, pair runs per
    host, and the controller's judging: judge() calls and the samples they read."""
    rounds = pair_rounds(hosts(n))
    pairs = sum(len(r) for r in rounds)
    return {
        "rounds": len(rounds),
        "pairs": pairs,
        "pairs_per_host": 2 * pairs // n,
        "host_runs": n * HOST_METRICS * REPEAT,
        # One judge() over every host metric, one judge_links() a link metric, one
        # stragglers() for the all-host all_reduce.
        "judge_calls": 3,
        "host_samples": n * HOST_METRICS * REPEAT,
        "pair_samples": pairs * REPEAT,
    }


def test_the_cost_docs_qualify_md_gives() -> None:
    assert cost(4) == {
        "rounds": 3,
        "pairs": 6,
        "pairs_per_host": 3,
        "host_runs": 132,
        "judge_calls": 3,
        "host_samples": 132,
        "pair_samples": 18,
    }
    assert cost(32) == {
        "rounds": 31,
        "pairs": 496,
        "pairs_per_host": 31,
        "host_runs": 1056,
        "judge_calls": 3,
        "host_samples": 1056,
        "pair_samples": 1488,
    }
    assert cost(1000) == {
        "rounds": 999,
        "pairs": 499500,
        "pairs_per_host": 999,
        "host_runs": 33000,
        "judge_calls": 3,
        "host_samples": 33000,
        "pair_samples": 1498500,
    }


@pytest.mark.slow
def test_judging_a_thousand_hosts() -> None:
    # The controller's side of a 1,000-host qualification, 8 devices a host: every host
    # metric and every link judged, one sick device and one sick NIC found among them.
    rng = random.Random(0)
    names = hosts(1000)
    rules = {f"m{i}": Rule(f"m{i}", True, 25) for i in range(HOST_METRICS)}
    samples = [
        Sample(
            h,
            str(d),
            m,
            (0.5 if (h, d, m) == ("node0421", 3, "m0") else 1) * rng.uniform(0.97, 1.03),
        )
        for h in names
        for d in range(8)
        for m in rules
        for _ in range(REPEAT)
    ]
    start = time.perf_counter()
    verdicts = judge(samples, rules, REPEAT)
    judged_s = time.perf_counter() - start
    assert len(verdicts) == 1000 * 8 * HOST_METRICS
    assert [(v.host, v.device, v.metric) for v in verdicts if v.verdict != "ok"] == [
        ("node0421", "3", "m0")
    ]

    pairs = {
        p: [(0.3 if "node0777" in p else 1) * rng.uniform(0.97, 1.03) for _ in range(REPEAT)]
        for r in pair_rounds(names)
        for p in r
    }
    start = time.perf_counter()
    report = judge_links(pairs, Rule("bus_gbps", True, 30), REPEAT)
    links_s = time.perf_counter() - start
    assert (report.hosts, report.pairs) == (["node0777"], [])
    # Seconds, not hours, on the 2-core development machine under load (docs/benchmarks.md).
    assert judged_s < 60 and links_s < 180, (judged_s, links_s)
