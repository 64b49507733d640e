"""The all-host all_reduce's stragglers (docs/qualify.md, "Stragglers"): each rank's own
seconds per iteration, from the run's record, judged against the other ranks' by
judge.stragglers. The record's ``rank_times`` is what a workload wrote: each entry is
checked (a rank, finite seconds, bounded counts) and a bad one skipped with a note."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from tui.qualify.judge import Rule, Straggler, stragglers
from tui.results.record import RunRecord

RULE = "rank_own_s"  # the rule's key in the link suite's qualify: section
MAX_RANKS = 8192  # entries read from one record; the rest are skipped with a note
MAX_SAMPLES = 50  # seconds read per rank (the workload keeps at most as many)
MAX_HOST = 64  # characters of a host name the workload gave


@dataclass(frozen=True)
class Ranks:
    """What one all_reduce's ranks gave: the stragglers, how many ranks were judged, and a
    note per entry or value skipped (or why none was judged)."""

    stragglers: list[Straggler] = field(default_factory=list)
    judged: int = 0
    notes: list[str] = field(default_factory=list)


def judge_ranks(record: RunRecord, rules: dict[str, Rule]) -> Ranks:
    """The stragglers of ``record``'s all_reduce under the suite's rule ``RULE``."""
    rule = rules.get(RULE)
    if rule is None:
        return Ranks(notes=[f"not judged: the suite's qualify: section has no {RULE} rule"])
    times, notes = rank_times(record)
    if not times:
        return Ranks(notes=[*notes, "not judged: the run kept no per-rank times"])
    found = stragglers(times, dataclasses.replace(rule, metric="all_reduce own time"))
    return Ranks(found, len(times), notes)


def rank_times(record: RunRecord) -> tuple[dict[int, tuple[str, list[float]]], list[str]]:
    """rank -> (its inventory host, its seconds) from the record, and a note per entry or
    value skipped. A rank's host is the inventory's host of its node (the record's hosts are
    in node order) where the record has one per node, else the name the workload saw."""
    entries = record.rank_times or []
    if not isinstance(entries, list):
        return {}, ["rank_times: not a list, skipped"]
    notes = [f"rank_times: {len(entries) - MAX_RANKS} entries past {MAX_RANKS} skipped"] * (
        len(entries) > MAX_RANKS
    )
    nodes = record.hosts if record.nnodes == len(record.hosts) else []
    times: dict[int, tuple[str, list[float]]] = {}
    for i, entry in enumerate(entries[:MAX_RANKS]):
        got = _entry(entry, nodes)
        if isinstance(got, str):
            notes.append(f"rank_times entry {i}: {got}, skipped")
            continue
        rank, host, seconds, dropped = got
        if rank in times:
            notes.append(f"rank_times entry {i}: rank {rank} given twice, skipped")
            continue
        if dropped:
            notes.append(
                f"rank {rank}: {dropped} value(s) skipped (not seconds, or past {MAX_SAMPLES})"
            )
        times[rank] = (host, seconds)
    return times, notes


def _entry(entry: Any, nodes: list[str]) -> tuple[int, str, list[float], int] | str:
    """(rank, host, seconds, values dropped) of one entry, or why it is unusable."""
    if not isinstance(entry, dict):
        return "not an object"
    rank, node, host, values = (entry.get(k) for k in ("rank", "node", "host", "s"))
    if not _count(rank):
        return "rank not a whole number >= 0"
    if not isinstance(values, list):
        return "s not a list"
    seconds = [float(v) for v in values[:MAX_SAMPLES] if _seconds(v)]
    if not seconds:
        return "no time in seconds"
    if _count(node) and node < len(nodes):
        host = nodes[node]
    elif isinstance(host, str) and host.strip():
        host = " ".join(host.split())[:MAX_HOST]  # the workload's word: one line, bounded
    else:
        host = "unknown host"
    return rank, host, seconds, len(values) - len(seconds)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31


def _seconds(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )
