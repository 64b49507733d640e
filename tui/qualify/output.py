"""What ``fleetperf qualify`` prints: a table per metric (host, value, ratio to the peers'
median, interval, verdict), the link matrix, ``FLAGGED ...`` lines; CSV and JSON with the
same. Host names and reasons come from the fleet: callers print them through printable."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tui.qualify.judge import Straggler, Verdict
from tui.results.record import RunRecord


@dataclass
class Result:
    """One qualification, judged."""

    group: str
    hosts: list[str]
    repeat: int
    verdicts: list[Verdict]
    link_values: dict[str, dict[tuple[str, str], list[float]]]  # metric -> pair -> samples
    links: dict[str, Any]  # metric -> judge_links' LinkReport
    failures: list[str] = field(default_factory=list)  # FLAGGED lines of runs that failed
    allreduce: RunRecord | None = None
    stragglers: list[Straggler] = field(default_factory=list)  # the all_reduce's slow ranks
    ranks_judged: int = 0  # the all_reduce's ranks whose own times were judged
    batch_ids: list[str] = field(default_factory=list)


def flag_lines(result: Result) -> list[str]:
    """One line per flagged host, link and failed run: what cron greps for."""
    lines = list(result.failures)
    for v in result.verdicts:
        if v.verdict == "flagged":
            where = f"{v.host}" + (f" device {v.device}" if v.device is not None else "")
            lines.append(
                f"FLAGGED host {where}: {v.metric} {v.ratio:.2f}× peers"
                f" ({_num(v.lo)}–{_num(v.hi)}, {v.n} samples){_reason(v.reason)}"
            )
    for metric, report in result.links.items():
        lines += [f"FLAGGED {line} ({metric})" for line in link_flags(report)]
    for s in result.stragglers:
        lines.append(
            f"FLAGGED straggler rank {s.rank} ({s.host}): all_reduce own time {_ratio(s.ratio)}"
            f" peers ({_num(s.lo)}–{_num(s.hi)} s, {s.n} samples){_reason(s.reason)}"
        )
    return lines


def straggler_rows(result: Result) -> list[dict[str, Any]]:
    """The all_reduce's stragglers, one row per rank: JSON's ``stragglers``."""
    return [dataclasses.asdict(s) for s in result.stragglers]


def link_flags(report: Any) -> list[str]:
    """The links judge_links named: a host all of whose links are slow, or one pair."""
    lines = [f"links of host {h}: every link slow (host or its NIC)" for h in report.hosts]
    lines += [f"link {a} {b}: slower than its peers (that path)" for a, b in report.pairs]
    return lines


def _reason(reason: str) -> str:
    return f"; {reason}" if reason else ""


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}×"


def _verdict(v: Verdict) -> str:
    return v.verdict + (f": {v.reason}" if v.reason and v.verdict != "ok" else "")


def rows(result: Result) -> list[dict[str, Any]]:
    """One row per host (and device) and metric: the table's, CSV's and JSON's."""
    return [
        {
            "metric": v.metric,
            "host": v.host,
            "device": v.device,
            "n": v.n,
            "median": v.median,
            "lo": v.lo,
            "hi": v.hi,
            "peer_median": v.peer_median,
            "ratio": v.ratio,
            "verdict": v.verdict,
            "reason": v.reason,
        }
        for v in result.verdicts
    ]


def matrix(result: Result, metric: str) -> list[list[str]]:
    """The link matrix of ``metric``: the median of each pair's samples, both ways."""
    values = result.link_values.get(metric, {})
    header = ["", *result.hosts]
    table = [header]
    for a in result.hosts:
        row = [a]
        for b in result.hosts:
            got = values.get((a, b)) or values.get((b, a))
            row.append("·" if a == b else _num(_median(got)) if got else "-")
        table.append(row)
    return table


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _md_table(header: list[str], body: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join("---" for _ in header) + " |",
        *("| " + " | ".join(row) + " |" for row in body),
    ]


def _markdown(result: Result) -> str:
    lines = [
        f"## qualify: group {result.group}, {len(result.hosts)} hosts, {result.repeat} samples each"
    ]
    metrics = list(dict.fromkeys(v.metric for v in result.verdicts))
    for metric in metrics:
        lines += ["", f"### {metric}", ""]
        body = [
            [
                v.host + (f" #{v.device}" if v.device is not None else ""),
                _num(v.median),
                _ratio(v.ratio),
                f"{_num(v.lo)}–{_num(v.hi)} ({v.n})",
                _verdict(v),
            ]
            for v in result.verdicts
            if v.metric == metric
        ]
        lines += _md_table(
            ["host", "value", "ratio to peers", "interval (samples)", "verdict"], body
        )
    for metric in result.link_values:
        table = matrix(result, metric)
        lines += ["", f"### links: {metric} (median of each pair)", ""]
        lines += _md_table(table[0], table[1:])
    if result.allreduce is not None:
        value = result.allreduce.metrics.get("bus_gbps")
        lines += ["", f"all_reduce over {len(result.hosts)} hosts: bus_gbps {_num(value)}"]
        body = [
            [
                str(s.rank),
                s.host,
                f"{_num(s.median)} s",
                _ratio(s.ratio),
                f"{_num(s.lo)}–{_num(s.hi)} ({s.n})",
            ]
            for s in result.stragglers
        ]
        if body:
            lines += ["", "### all_reduce stragglers (each rank's own time)", ""]
            lines += _md_table(
                ["rank", "host", "own time", "ratio to peers", "interval (samples)"], body
            )
        elif result.ranks_judged:
            lines.append(f"no straggler among its {result.ranks_judged} ranks")
        else:
            lines.append("stragglers not judged: no per-rank times (see the progress notes)")
    return "\n".join(lines)


def _json(result: Result) -> dict[str, Any]:
    return {
        "group": result.group,
        "hosts": result.hosts,
        "repeat": result.repeat,
        "verdicts": rows(result),
        "links": {
            metric: {
                "pairs": [{"a": a, "b": b, "values": v} for (a, b), v in sorted(pairs.items())],
                "flagged": link_flags(result.links[metric]) if metric in result.links else [],
            }
            for metric, pairs in result.link_values.items()
        },
        "allreduce_bus_gbps": result.allreduce.metrics.get("bus_gbps")
        if result.allreduce
        else None,
        "stragglers": straggler_rows(result),
        "ranks_judged": result.ranks_judged,
        "flagged": flag_lines(result),
        "batch_ids": result.batch_ids,
    }


def render(result: Result, fmt: str) -> str:
    """The result as ``md``, ``csv`` (one row per host and metric, then the links) or ``json``."""
    if fmt == "json":
        return json.dumps(_json(result), indent=2, ensure_ascii=False)
    if fmt == "csv":
        buf = io.StringIO()
        fields = list(rows(result)[0]) if result.verdicts else ["metric", "host"]
        writer = csv.DictWriter(buf, fieldnames=["kind", *fields], lineterminator="\n")
        writer.writeheader()
        for row in rows(result):
            writer.writerow({"kind": "host", **row})
        for metric, pairs in result.link_values.items():
            for (a, b), values in sorted(pairs.items()):
                writer.writerow(
                    {
                        "kind": "link",
                        "metric": metric,
                        "host": f"{a} {b}",
                        "n": len(values),
                        "median": _median(values),
                    }
                )
        return buf.getvalue().rstrip("\n")
    return _markdown(result)


def history_text(host: str, entries: list[dict[str, Any]], fmt: str) -> str:
    """A host against its own past: each qualification's median per metric, oldest first,
    and the newest against the median of the ones before it."""
    if fmt == "json":
        return json.dumps({"host": host, "qualifications": entries}, indent=2)
    lines = [f"## host {host}: its qualifications, oldest first"]
    for metric in dict.fromkeys(e["metric"] for e in entries):
        mine = [e for e in entries if e["metric"] == metric]
        lines += ["", f"### {metric}", ""]
        body = [
            [
                e["started"],
                _num(e["median"]),
                f"{_num(e['lo'])}–{_num(e['hi'])}",
                _ratio(e["ratio"]),
                e["verdict"],
            ]
            for e in mine
        ]
        lines += _md_table(["qualified", "value", "interval", "ratio to peers", "verdict"], body)
        past = [e["median"] for e in mine[:-1] if e["median"] is not None]
        last = mine[-1]["median"]
        if past and last is not None and _median(past):
            change = (last / _median(past) - 1) * 100
            lines.append(f"newest against its own past ({len(past)} earlier): {change:+.1f} %")
    return "\n".join(lines)
