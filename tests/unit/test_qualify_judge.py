"""Fleet qualification's statistics (issue 42), on synthetic samples: an outlier is found,
noise is not, busy samples make a verdict inconclusive, a throttled device is flagged with
its reason, too few samples are inconclusive, the same input gives the same verdicts; the
link matrix names a host or a path; stragglers are named by rank and host."""

from __future__ import annotations

import random
import statistics

import pytest

from tui.qualify.judge import (
    Rule,
    Sample,
    Verdict,
    _band,
    _peer_bands,
    interval,
    judge,
    judge_links,
    outside,
    stragglers,
)
from tui.qualify.schedule import pair_rounds

FLOPS = Rule("fp32", higher_is_better=True, floor_pct=5)
LATENCY = Rule("latency", higher_is_better=False, floor_pct=5)
BANDWIDTH = Rule("busbw", higher_is_better=True, floor_pct=10)
STEP = Rule("step_time", higher_is_better=False, floor_pct=5)
HOSTS = [f"node{i}" for i in range(8)]


def fleet(
    seed: int,
    rule: Rule = FLOPS,
    scale: dict[str, float] | None = None,
    noise: float = 0.03,
    repeat: int = 3,
    hosts: list[str] = HOSTS,
) -> list[Sample]:
    """``repeat`` samples per host around 100, each off by up to +-``noise``; a host in
    ``scale`` has its value multiplied."""
    rng = random.Random(seed)
    return [
        Sample(
            h, None, rule.metric, 100 * (scale or {}).get(h, 1) * rng.uniform(1 - noise, 1 + noise)
        )
        for h in hosts
        for _ in range(repeat)
    ]


def by_host(verdicts: list[Verdict]) -> dict[str, Verdict]:
    return {v.host: v for v in verdicts}


def flagged(verdicts: list[Verdict]) -> list[str]:
    return [v.host for v in verdicts if v.verdict == "flagged"]


def test_an_outlier_is_found_and_only_it() -> None:
    verdicts = judge(fleet(1, scale={"node3": 0.31}), {"fp32": FLOPS}, repeat=3)
    assert flagged(verdicts) == ["node3"]
    v = by_host(verdicts)["node3"]
    assert v.ratio == pytest.approx(0.31, abs=0.02)
    assert v.n == 3 and v.lo is not None and v.hi is not None and v.lo <= v.median <= v.hi
    assert v.reason == "69 % worse than peers"
    assert all(v.verdict == "ok" and v.reason == "" for v in verdicts if v.host != "node3")


def test_lower_is_better_flags_the_slow_host_not_the_fast_one() -> None:
    samples = fleet(2, LATENCY, scale={"node1": 1.5, "node6": 0.6})
    verdicts = by_host(judge(samples, {"latency": LATENCY}, repeat=3))
    assert verdicts["node1"].verdict == "flagged"
    # Better than its peers is not a fault; the verdict says so.
    assert verdicts["node6"].verdict == "ok"
    assert verdicts["node6"].reason.endswith("% better than peers")


@pytest.mark.parametrize("rule", [FLOPS, LATENCY])
def test_noise_is_never_flagged(rule: Rule) -> None:
    # 8 hosts, +-3 % noise, 300 fleets: the 5 % floor and the band keep every host ok.
    for seed in range(300):
        verdicts = judge(fleet(seed, rule), {rule.metric: rule}, repeat=3)
        assert flagged(verdicts) == [], seed
        assert {v.verdict for v in verdicts} == {"ok"}, seed


def test_a_one_sigma_ten_percent_rule_would_accuse_noise_this_one_does_not() -> None:
    # Megatron-LM's straggler rule (#4662): more than 1 sigma and 10 % off the mean. With
    # +-12 % noise it accuses healthy hosts; the interval against the band does not.
    accused = 0
    for seed in range(100):
        samples = fleet(seed, noise=0.12)
        values = [s.value for s in samples]
        mean, sigma = statistics.mean(values), statistics.stdev(values)
        accused += any(abs(v - mean) > max(sigma, 0.1 * mean) for v in values)
        assert flagged(judge(samples, {"fp32": FLOPS}, repeat=3)) == [], seed
    assert accused >= 90  # 98 of the 100 fleets


def test_a_busy_sample_makes_the_verdict_inconclusive_with_its_reason() -> None:
    samples = fleet(3, scale={"node5": 0.5})
    busy = "other processes used 1.6 CPUs"
    # One of node5's three samples was taken while other work ran on it.
    first = next(i for i, s in enumerate(samples) if s.host == "node5")
    samples[first] = Sample("node5", None, "fp32", samples[first].value, busy=busy)
    v = by_host(judge(samples, {"fp32": FLOPS}, repeat=3))["node5"]
    assert (v.verdict, v.reason) == ("inconclusive", f"busy: {busy}")
    assert v.ratio == pytest.approx(0.5, abs=0.03)  # the numbers are kept


def test_a_busy_host_that_measures_like_its_peers_is_ok_with_a_note() -> None:
    samples = [
        Sample(s.host, None, s.metric, s.value, busy="cron" if s.host == "node2" else None)
        for s in fleet(4)
    ]
    v = by_host(judge(samples, {"fp32": FLOPS}, repeat=3))["node2"]
    assert (v.verdict, v.reason) == ("ok", "busy: cron")


def test_busy_samples_never_enter_the_peers_band() -> None:
    # Five hosts slowed by other work would pull the peers' median to half; node7 is slow
    # while quiet, and only the quiet hosts are its peers.
    slow = {h: 0.5 for h in [*HOSTS[:5], "node7"]}
    samples = [
        Sample(s.host, None, s.metric, s.value, busy="a build" if s.host in HOSTS[:5] else None)
        for s in fleet(15, scale=slow)
    ]
    verdicts = by_host(judge(samples, {"fp32": FLOPS}, repeat=3))
    assert verdicts["node7"].verdict == "flagged"
    assert verdicts["node7"].peer_median == pytest.approx(100, rel=0.05)
    assert {verdicts[h].verdict for h in HOSTS[:5]} == {"inconclusive"}


def test_a_throttled_device_is_flagged_with_the_throttle_as_likely_cause() -> None:
    rng = random.Random(5)
    samples = []
    for host in HOSTS[:4]:
        for device in "0123":
            slow = host == "node2" and device == "1"
            for _ in range(3):
                value = 100 * (0.6 if slow else 1) * rng.uniform(0.97, 1.03)
                throttle = "HW thermal slowdown" if slow else None
                # Busy too: a throttled device is sick whatever else ran on the host.
                busy = "a training job" if slow else None
                samples.append(Sample(host, device, "fp32", value, busy=busy, throttle=throttle))
    verdicts = judge(samples, {"fp32": FLOPS}, repeat=3)
    assert len(verdicts) == 16
    bad = [v for v in verdicts if v.verdict != "ok"]
    assert [(v.host, v.device, v.verdict) for v in bad] == [("node2", "1", "flagged")]
    assert bad[0].reason.endswith("; throttled: HW thermal slowdown (likely cause)")


def test_a_throttle_reason_without_a_slow_number_is_not_an_accusation() -> None:
    samples = [
        Sample(
            s.host, None, s.metric, s.value, throttle="SW power cap" if s.host == "node0" else None
        )
        for s in fleet(6)
    ]
    v = by_host(judge(samples, {"fp32": FLOPS}, repeat=3))["node0"]
    assert (v.verdict, v.reason) == ("ok", "throttled: SW power cap")


def test_hosts_and_devices_are_judged_among_their_own_kind() -> None:
    host_level = fleet(7)
    devices = [
        Sample(h, "0", "fp32", 10.0 + i % 2 / 10) for i, h in enumerate(HOSTS) for _ in range(3)
    ]
    verdicts = judge(host_level + devices, {"fp32": FLOPS}, repeat=3)
    assert len(verdicts) == 16
    assert flagged(verdicts) == []  # devices at ~10 are not compared with hosts at ~100


def test_fewer_samples_than_repeat_is_inconclusive() -> None:
    samples = [
        s for i, s in enumerate(fleet(8, scale={"node4": 0.3})) if not (s.host == "node4" and i % 3)
    ]
    v = by_host(judge(samples, {"fp32": FLOPS}, repeat=3))["node4"]
    assert (v.verdict, v.reason, v.n) == ("inconclusive", "only 1 samples (--repeat 3)", 1)
    # With --repeat 5 every host is short.
    assert {v.reason for v in judge(fleet(8), {"fp32": FLOPS}, repeat=5)} == {
        "only 3 samples (--repeat 5)"
    }


def test_values_that_are_not_numbers_are_not_counted() -> None:
    samples = [s for s in fleet(9) if s.host != "node1"] + [
        Sample("node1", None, "fp32", v) for v in (100.0, 101.0, float("nan"), float("inf"))
    ]
    v = by_host(judge(samples, {"fp32": FLOPS}, repeat=3))["node1"]
    assert (v.verdict, v.reason) == (
        "inconclusive",
        "only 2 samples, 2 not a finite number (--repeat 3)",
    )


def test_too_few_peers_or_no_rule_is_inconclusive() -> None:
    two = judge(fleet(10, hosts=["a", "b"], scale={"b": 0.3}), {"fp32": FLOPS}, repeat=3)
    assert {(v.verdict, v.reason) for v in two} == {
        ("inconclusive", "fewer than 2 peers to compare with")
    }
    unruled = judge(fleet(10), {}, repeat=3)
    assert {(v.verdict, v.reason) for v in unruled} == {("inconclusive", "no rule for this metric")}


def test_the_same_samples_give_the_same_verdicts_in_any_order() -> None:
    samples = fleet(11, scale={"node3": 0.9, "node6": 0.3})
    first = judge(samples, {"fp32": FLOPS}, repeat=3)
    shuffled = list(samples)
    random.Random(0).shuffle(shuffled)
    assert judge(samples, {"fp32": FLOPS}, repeat=3) == first
    assert judge(shuffled, {"fp32": FLOPS}, repeat=3) == first
    assert [v.host for v in first] == sorted(HOSTS)


def test_interval_is_the_order_statistic_interval_of_the_median() -> None:
    assert interval([3.0, 1.0, 2.0]) == (1.0, 3.0)  # too few for 95 %: the whole range
    # n = 10: X(2)..X(9) covers the median with 97.9 %; X(3)..X(8) only with 89 %.
    assert interval([float(v) for v in range(10, 0, -1)]) == (2.0, 9.0)
    assert outside((80.0, 85.0), (95.0, 105.0), floor_pct=5)
    assert not outside((80.0, 96.0), (95.0, 105.0), floor_pct=5)
    assert not outside((92.0, 94.0), (95.0, 105.0), floor_pct=5)  # outside, but by < 5 %
    assert outside((111.0, 120.0), (95.0, 105.0), floor_pct=5)


def test_the_leave_one_out_band_is_the_band_of_the_others() -> None:
    # _peer_bands answers in O(1) a call; it must equal the plain computation.
    rng = random.Random(12)
    for size in (3, 4, 5, 8, 31):
        values = [round(rng.gauss(100, 10), 1) for _ in range(size)]
        bands = _peer_bands(values)
        for i, v in enumerate(values):
            assert bands(v) == _band(values[:i] + values[i + 1 :])
        assert bands(None) == _band(values)


def test_a_host_whose_every_link_is_slow_is_named_not_its_links() -> None:
    for n in (4, 6, 9):
        hosts = [f"node{i}" for i in range(n)]
        rng = random.Random(n)
        pairs = {
            p: [(30 if "node2" in p else 100) * rng.uniform(0.97, 1.03) for _ in range(3)]
            for r in pair_rounds(hosts)
            for p in r
        }
        report = judge_links(pairs, BANDWIDTH)
        assert (report.hosts, report.pairs) == (["node2"], []), n
        assert sorted(v.pair for v in report.links if v.verdict == "flagged") == sorted(
            p for p in pairs if "node2" in p
        )


def test_three_hosts_cannot_tell_a_sick_host_from_two_fast_links() -> None:
    # node0's two links slow, the third fast: as many explanations as links; nothing named.
    pairs = {
        ("node0", "node1"): [30.0] * 3,
        ("node0", "node2"): [31.0] * 3,
        ("node1", "node2"): [100.0] * 3,
    }
    report = judge_links(pairs, BANDWIDTH)
    assert (report.hosts, report.pairs) == ([], [])
    assert {v.verdict for v in report.links} == {"ok"}


def test_a_single_slow_pair_is_that_path() -> None:
    rng = random.Random(13)
    pairs = {
        p: [(40 if p == ("node1", "node5") else 100) * rng.uniform(0.97, 1.03) for _ in range(3)]
        for r in pair_rounds(HOSTS)
        for p in r
    }
    # Either order names the same pair.
    pairs[("node5", "node1")] = pairs.pop(("node1", "node5"))
    report = judge_links(pairs, BANDWIDTH)
    assert (report.hosts, report.pairs) == ([], [("node1", "node5")])
    assert len(report.links) == 28


def test_link_noise_is_never_flagged_and_missing_samples_are_inconclusive() -> None:
    for seed in range(50):
        rng = random.Random(seed)
        pairs = {
            p: [100 * rng.uniform(0.97, 1.03) for _ in range(3)]
            for r in pair_rounds(HOSTS)
            for p in r
        }
        pairs[("node0", "node1")] = []
        report = judge_links(pairs, BANDWIDTH, repeat=3)
        assert (report.hosts, report.pairs) == ([], []), seed
        assert [(v.pair, v.verdict) for v in report.links if v.verdict != "ok"] == [
            (("node0", "node1"), "inconclusive")
        ]


def test_stragglers_are_named_by_rank_and_host() -> None:
    rng = random.Random(14)
    ranks = {
        r: (f"node{r // 4}", [1.0 * rng.uniform(0.97, 1.03) for _ in range(5)]) for r in range(16)
    }
    ranks[9] = ("node2", [1.4 * rng.uniform(0.97, 1.03) for _ in range(5)])
    found = stragglers(ranks, STEP)
    assert [(s.rank, s.host) for s in found] == [(9, "node2")]
    assert found[0].ratio == pytest.approx(1.4, abs=0.05)
    # One time per rank works too; noise alone names nobody.
    assert [s.rank for s in stragglers({r: (h, t[0]) for r, (h, t) in ranks.items()}, STEP)] == [9]
    quiet = {r: (f"node{r // 4}", 1.0 * rng.uniform(0.97, 1.03)) for r in range(16)}
    assert stragglers(quiet, STEP) == []


def test_a_host_whose_links_are_a_hundred_times_slower_is_named_on_four_hosts() -> None:
    # As fleet up 4 measured with node2's veth at 64 Mbit/s: its three links at 0.0077 GB/s,
    # the others 1.65-2.24. Its own slow links must not widen the band its links are
    # judged against (they made the band reach below zero: nothing was flagged).
    fast = iter([1.65, 2.24, 1.9])
    pairs = {
        p: [0.0077] * 3 if "node2" in p else [next(fast)] * 3
        for r in pair_rounds([f"node{i}" for i in range(1, 5)])
        for p in r
    }
    report = judge_links(pairs, BANDWIDTH)
    assert (report.hosts, report.pairs) == (["node2"], [])


def test_a_slow_host_is_named_when_its_healthy_peers_spread_by_a_factor_two() -> None:
    # fleet up 4, node2's veth at 64 Mbit/s (2026-11-29, run 2 of 5): the healthy pairs of
    # the shared loopback spread 1.32-2.68 GB/s. A linear band of their three medians
    # (1.99 +- 2.45) reached below zero and nothing was flagged; rates are judged on a log
    # scale, and the floor is a share of the peers' median, not of an uneven band's middle.
    pairs = {
        ("node1", "node2"): [0.007710, 0.007703],
        ("node1", "node3"): [2.399, 2.683],
        ("node1", "node4"): [1.315, 1.392],
        ("node2", "node3"): [0.007710, 0.007710],
        ("node2", "node4"): [0.007704, 0.007700],
        ("node3", "node4"): [2.185, 1.802],
    }
    report = judge_links(pairs, BANDWIDTH, repeat=2)
    assert (report.hosts, report.pairs) == (["node2"], [])
    fast = [v for v in report.links if "node2" not in v.pair]
    assert all(v.verdict == "ok" for v in fast)  # 0.60x to 1.55x of their peers: noise
