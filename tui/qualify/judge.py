"""Judging a fleet's samples against the fleet itself: each host (or device, link, rank)
against its peers, with verdicts that repeat and never accuse what the numbers cannot prove.

For each metric, a unit (a host, or one device of a host) is compared with the other units:
the peers' median and a robust spread (the MAD, scaled to a standard deviation) give a band;
the unit's own samples give a distribution-free confidence interval of its median (order
statistics, no resampling, so the same samples always give the same interval). A unit is
flagged only when that interval lies wholly outside the band, on the worse side, by more
than the rule's floor. Busy samples (other work on the host) turn a flag into
"inconclusive"; a throttled device keeps its flag, with the throttle named as the likely
cause. No I/O here: the caller measures, this module judges.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import median
from typing import NamedTuple

# Shared with history verdicts (tui/results/references.py), so defined a layer below.
from tui.results.intervals import interval, side
from tui.results.intervals import outside as outside  # judge.outside: issue 42's interface

# The band is the peers' median +- BAND_MADS scaled MADs (about 3 standard deviations).
BAND_MADS = 3.0
MAD_TO_SIGMA = 1.4826
# A verdict against peers needs at least this many of them: with one peer there is no
# telling which of the two is the odd one.
MIN_PEERS = 2


@dataclass(frozen=True)
class Sample:
    """One measurement of ``metric`` on ``host`` (and ``device``, None for the host as a
    whole), with its covariates: ``busy`` says why the host was busy with other work
    during the sample (None when quiet), ``throttle`` the hardware's throttle reason
    (None when none or unknown)."""

    host: str
    device: str | None
    metric: str
    value: float
    busy: str | None = None
    throttle: str | None = None


@dataclass(frozen=True)
class Rule:
    """How ``metric`` is judged: which way is better, and the floor in percent of the
    peers' median that a unit must fall beyond the peers' band before it is flagged."""

    metric: str
    higher_is_better: bool
    floor_pct: float


@dataclass(frozen=True)
class Verdict:
    """A unit's verdict on one metric. ``lo``..``hi`` is the interval of its median,
    ``ratio`` is median / peer_median; the numbers are None where they could not be had
    (too few samples or peers, no rule). ``verdict`` is "ok", "flagged" or "inconclusive";
    ``reason`` says why (shown as "inconclusive: <reason>"), "" for a plain ok."""

    host: str
    device: str | None
    metric: str
    n: int
    median: float | None
    lo: float | None
    hi: float | None
    peer_median: float | None
    ratio: float | None
    verdict: str
    reason: str
    peer_lo: float | None = None  # the peers' band
    peer_hi: float | None = None


@dataclass(frozen=True)
class LinkVerdict:
    """One pair's verdict: its samples against the other pairs."""

    pair: tuple[str, str]
    n: int
    median: float | None
    lo: float | None
    hi: float | None
    peer_median: float | None
    ratio: float | None
    verdict: str
    reason: str


@dataclass(frozen=True)
class LinkReport:
    """The pair matrix judged: ``hosts`` are hosts all of whose links are slow (the host or
    its NIC), ``pairs`` the slow pairs not explained by such a host (that path)."""

    links: list[LinkVerdict]
    hosts: list[str]
    pairs: list[tuple[str, str]]


@dataclass(frozen=True)
class Straggler:
    """A rank slower than its peers in the all-host collective."""

    rank: int
    host: str
    n: int
    median: float | None
    lo: float | None
    hi: float | None
    peer_median: float | None
    ratio: float | None
    reason: str


@dataclass(frozen=True)
class _Band:
    median: float
    lo: float
    hi: float


def _band(values: Sequence[float]) -> _Band:
    mid = median(values)
    spread = BAND_MADS * MAD_TO_SIGMA * median([abs(v - mid) for v in values])
    return _Band(mid, mid - spread, mid + spread)


def _peer_bands(reference: Sequence[float]) -> Callable[[float | None], _Band | None]:
    """The band of ``reference`` without one member (leave one out), by that member's value;
    None for a unit that is not in ``reference``. O(1) per call after an O(n log n) setup
    (a 1,000-host fleet has 499,500 pairs): removing one value moves the median, and the
    median of deviations, to one of a few neighbours in the sorted lists."""
    ordered = sorted(reference)
    whole = _band(ordered) if len(ordered) >= MIN_PEERS else None
    deviations: dict[float, list[float]] = {}

    def band(member: float | None) -> _Band | None:
        if member is None:
            return whole
        if len(ordered) - 1 < MIN_PEERS:
            return None
        mid = _median_without(ordered, member)
        if mid not in deviations:
            deviations[mid] = sorted(abs(v - mid) for v in ordered)
        spread = BAND_MADS * MAD_TO_SIGMA * _median_without(deviations[mid], abs(member - mid))
        return _Band(mid, mid - spread, mid + spread)

    return band


def _rate_bands(reference: Sequence[float]) -> Callable[[float | None], _Band | None]:
    """``_peer_bands`` on a log scale, for rates whose noise is a factor (links: a shared
    loopback's healthy pairs spread 1.35-2.54 GB/s, and a linear band of three of them
    reached below zero, so a link at 0.008 GB/s lay inside it). Linear where a value is not
    above zero."""
    if not all(v > 0 for v in reference):
        return _peer_bands(reference)
    logs = _peer_bands([math.log(v) for v in reference])

    def band(member: float | None) -> _Band | None:
        found = logs(None if member is None else math.log(member))
        if found is None:
            return None
        return _Band(math.exp(found.median), math.exp(found.lo), math.exp(found.hi))

    return band


def _median_without(ordered: list[float], value: float) -> float:
    """The median of sorted ``ordered`` with one occurrence of ``value`` taken out."""
    gone = bisect.bisect_left(ordered, value)
    n = len(ordered) - 1

    def at(j: int) -> float:
        return ordered[j] if j < gone else ordered[j + 1]

    return at(n // 2) if n % 2 else (at(n // 2 - 1) + at(n // 2)) / 2


def _worse(rule: Rule) -> int:
    return -1 if rule.higher_is_better else 1


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if math.isfinite(v)]


def _reasons(values: Sequence[str | None]) -> str:
    return "; ".join(sorted({v for v in values if v}))


def _pct(value: float, reference: float) -> str:
    return f"{abs(value / reference - 1) * 100:.0f} %"


def _unit_key(key: tuple[str, str | None]) -> tuple[str, bool, str]:
    return key[0], key[1] is not None, key[1] or ""


def judge(samples: Sequence[Sample], rules: Mapping[str, Rule], repeat: int) -> list[Verdict]:
    """Each host (and each device) against its peers, per metric: hosts are the peers of
    hosts, devices of devices. Verdicts sorted by metric, host, device; the same samples in
    any order give the same verdicts."""
    groups: dict[tuple[str, bool], dict[tuple[str, str | None], list[Sample]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for s in samples:
        groups[s.metric, s.device is None][s.host, s.device].append(s)
    verdicts = []
    for (metric, _), units in groups.items():
        rule = rules.get(metric)
        # A peer's value: the median of its quiet, unthrottled samples, where it has enough.
        members = {}
        for key, unit in units.items():
            quiet = _finite([s.value for s in unit if s.busy is None and s.throttle is None])
            if len(quiet) >= max(repeat, 1):
                members[key] = median(quiet)
        bands = _peer_bands(list(members.values()))
        for (host, device), unit in units.items():
            values = _finite([s.value for s in unit])
            judged = _judged(
                values,
                len(unit) - len(values),
                _reasons([s.busy for s in unit]),
                _reasons([s.throttle for s in unit]),
                rule,
                repeat,
                bands(members.get((host, device))),
            )
            verdicts.append(Verdict(host, device, metric, *judged))
    return sorted(verdicts, key=lambda v: (v.metric, *_unit_key((v.host, v.device))))


class _Judged(NamedTuple):
    """A verdict's numbers and words, in Verdict's order after host, device, metric."""

    n: int
    median: float | None
    lo: float | None
    hi: float | None
    peer_median: float | None
    ratio: float | None
    verdict: str
    reason: str
    peer_lo: float | None
    peer_hi: float | None


def _judged(
    values: list[float],
    dropped: int,
    busy: str,
    throttle: str,
    rule: Rule | None,
    repeat: int,
    band: _Band | None,
) -> _Judged:
    """One unit's verdict: its finite ``values`` (``dropped`` were not finite) against
    ``band``; ``busy`` and ``throttle`` are its samples' covariates, "" when none."""
    n = len(values)
    if rule is None:
        return _Judged(
            n, None, None, None, None, None, "inconclusive", "no rule for this metric", None, None
        )
    if n < repeat or not values:
        bad = f", {dropped} not a finite number" if dropped else ""
        reason = f"only {n} samples{bad} (--repeat {repeat})"
        return _Judged(n, None, None, None, None, None, "inconclusive", reason, None, None)
    lo, hi = interval(values)
    mid = median(values)
    if band is None:
        reason = f"fewer than {MIN_PEERS} peers to compare with"
        return _Judged(n, mid, lo, hi, None, None, "inconclusive", reason, None, None)
    if band.median == 0:
        reason = "the peers' median is 0: no ratio"
        return _Judged(n, mid, lo, hi, 0.0, None, "inconclusive", reason, band.lo, band.hi)

    def judged(verdict: str, reason: str) -> _Judged:
        return _Judged(
            n, mid, lo, hi, band.median, mid / band.median, verdict, reason, band.lo, band.hi
        )

    where = side((lo, hi), (band.lo, band.hi), rule.floor_pct, band.median)
    if where == _worse(rule):
        off = f"{_pct(mid, band.median)} worse than peers"
        if throttle:
            return judged("flagged", f"{off}; throttled: {throttle} (likely cause)")
        if busy:
            return judged("inconclusive", f"busy: {busy}")
        return judged("flagged", off)
    notes = [f"{_pct(mid, band.median)} better than peers"] if where else []
    notes += [f"busy: {busy}"] * bool(busy) + [f"throttled: {throttle}"] * bool(throttle)
    return judged("ok", "; ".join(notes))


def judge_links(
    pairs: Mapping[tuple[str, str], Sequence[float]], rule: Rule, repeat: int = 1
) -> LinkReport:
    """The pair matrix judged: each pair's samples against the other pairs. A host with at
    least two links, every one of them slow, is named (the host or its NIC) and its links are
    not named again; any other slow pair is that path. (a, b) and (b, a) are one pair."""
    merged: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (a, b), values in pairs.items():
        merged[min(a, b), max(a, b)].extend(values)
    finite = {pair: _finite(v) for pair, v in merged.items()}
    members = {pair: median(v) for pair, v in finite.items() if v and len(v) >= repeat}
    # The links of a host that is slow on all of them would widen the peers' band until
    # nothing falls outside it (a quarter to a half of a small fleet's pairs): the band is
    # made of the pairs that touch no such suspect.
    suspects = _slow_hosts(members, rule)
    reference = {p: m for p, m in members.items() if not suspects & set(p)}
    if len(reference) <= MIN_PEERS:
        reference = members
    bands = _rate_bands(list(reference.values()))
    links = []
    for pair in sorted(finite):
        values = finite[pair]
        dropped = len(merged[pair]) - len(values)
        band = bands(reference.get(pair)) if pair in reference else bands(None)
        judged = _judged(values, dropped, "", "", rule, repeat, band)
        links.append(LinkVerdict(pair, *judged[:8]))
    # A host is named when it has two links or more and every one of them is slow.
    links_of: Counter[str] = Counter(h for pair in finite for h in pair)
    slow_of: Counter[str] = Counter(h for v in links if v.verdict == "flagged" for h in v.pair)
    hosts = sorted(h for h, n in links_of.items() if n >= 2 and slow_of[h] == n)
    named = set(hosts)
    paths = [v.pair for v in links if v.verdict == "flagged" and not named & set(v.pair)]
    return LinkReport(links, hosts, paths)


def _slow_hosts(members: Mapping[tuple[str, str], float], rule: Rule) -> set[str]:
    """The hosts whose links, every one, lie on the worse side of the other hosts' links:
    each host's pair medians judged against the other hosts' medians of theirs."""
    of_host: dict[str, list[float]] = defaultdict(list)
    for pair, value in members.items():
        for host in pair:
            of_host[host].append(value)
    typical = {h: median(v) for h, v in of_host.items() if len(v) >= 2}
    bands = _rate_bands(list(typical.values()))
    return {
        h
        for h, mid in typical.items()
        if _judged(of_host[h], 0, "", "", rule, 2, bands(mid)).verdict == "flagged"
    }


def stragglers(
    rank_times: Mapping[int, tuple[str, float | Sequence[float]]], rule: Rule
) -> list[Straggler]:
    """The ranks of the all-host collective slower than their peers, by rank, each with its
    host. A rank's time is one number or several (one per iteration: then it has a
    confidence interval); it should exclude waiting for others, which every rank shares."""
    times = {}
    for rank, (host, value) in rank_times.items():
        values = _finite([value] if isinstance(value, int | float) else value)
        if values:
            times[rank] = (host, values)
    members = {rank: median(values) for rank, (_, values) in times.items()}
    bands = _peer_bands(list(members.values()))
    found = []
    for rank in sorted(times):
        host, values = times[rank]
        j = _judged(values, 0, "", "", rule, 1, bands(members[rank]))
        if j.verdict == "flagged":
            found.append(
                Straggler(rank, host, j.n, j.median, j.lo, j.hi, j.peer_median, j.ratio, j.reason)
            )
    return found
