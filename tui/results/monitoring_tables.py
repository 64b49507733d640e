"""A run's ``monitoring`` summary (tui/results/monitoring.py) as FlagPerf's two tables
(能耗监控结果 energy, 其他重要监控结果 monitoring) in cells, for the text tables
(tui/results/tables.py) and the HTML report; what was not measured, in one line.
Controller code: no torch, no textual.
"""

from __future__ import annotations

from typing import Any

from tui.results.monitoring import UNKNOWN

ENERGY_HEADER = [
    "host",
    "item",
    "average power (W)",
    "max power (W)",
    "power std (W)",
    "TDP (W)",
]
MONITORING_HEADER = [
    "host",
    "item",
    "average CPU use (%)",
    "average memory use (%)",
    "average temperature (°C)",
]


def _fig(value: float | None) -> str:
    return UNKNOWN if value is None else f"{value:.1f}"


def _avg(stats: dict[str, float] | None) -> str:
    return _fig(stats["avg"] if stats else None)


def _power_cells(stats: dict[str, float] | None) -> list[str]:
    return [_fig(stats[k]) if stats else UNKNOWN for k in ("avg", "max", "std")]


def energy_table(monitoring: dict[str, Any]) -> list[list[str]]:
    """FlagPerf's energy table, one row per host (its CPU packages' power: "system") and
    one per device; ``UNKNOWN`` where the hardware did not say. Cells, for ENERGY_HEADER."""
    rows = []
    for host in monitoring["hosts"]:
        name = host["host"]
        rows.append([name, "system (CPU packages)", *_power_cells(host["cpu_power_w"]), UNKNOWN])
        for dev in host["devices"]:
            power = _power_cells(dev["power_w"])
            rows.append([name, f"device {dev['device']}", *power, _fig(dev["power_limit_w"])])
    return rows


def monitoring_table(monitoring: dict[str, Any]) -> list[list[str]]:
    """FlagPerf's other monitoring table, one row per host (CPU and host memory use) and one
    per device (device memory use, temperature); a cell that does not apply to the row is
    empty, one the hardware did not give is ``UNKNOWN``. Cells, for MONITORING_HEADER."""
    rows = []
    for host in monitoring["hosts"]:
        name = host["host"]
        rows.append([name, "system", _avg(host["cpu_percent"]), _avg(host["host_mem_percent"]), ""])
        for dev in host["devices"]:
            mem, temp = _avg(dev["mem_percent"]), _avg(dev["temp_c"])
            rows.append([name, f"device {dev['device']}", "", mem, temp])
    return rows


# A device's figures as the one line of what was not measured names them.
_DEVICE_SHORT = {
    "power_w": "power",
    "power_limit_w": "TDP",
    "temp_c": "temperature",
    "mem_percent": "memory use",
    "util": "utilisation",
}
_HOST_SHORT = {"cpu_percent": "CPU use", "host_mem_percent": "host memory use"}
_HOST_SHORT["cpu_power_w"] = "CPU power"


def unmeasured(monitoring: dict[str, Any]) -> list[str]:
    """What the tables lack, each once: 'CPU power', 'device readings (h2)' (the hosts
    named where not every host lacks it), and the system TDP, which no source gives."""
    lacking: dict[str, list[str]] = {}
    for host in monitoring["hosts"]:
        missing = [words for key, words in _HOST_SHORT.items() if host[key] is None]
        missing += [] if host["devices"] else ["device readings"]
        for dev in host["devices"]:
            missing += [
                f"device {dev['device']} {words}"
                for key, words in _DEVICE_SHORT.items()
                if dev[key] is None
            ]
        for what in missing:
            lacking.setdefault(what, []).append(host["host"])
    every = len(monitoring["hosts"])
    named = [w if len(h) == every else f"{w} ({', '.join(h)})" for w, h in lacking.items()]
    return [*named, "system TDP"]


def measured(header: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """A table cut to what was measured: the rows and the figure columns (after host and
    item) with at least one figure; no rows where nothing was."""

    def figure(cell: str) -> bool:
        return cell not in (UNKNOWN, "")

    rows = [row for row in rows if any(figure(c) for c in row[2:])]
    keep = [i for i in range(len(header)) if i < 2 or any(figure(row[i]) for row in rows)]
    return [header[i] for i in keep], [[row[i] for i in keep] for row in rows]


def sampled(monitoring: dict[str, Any]) -> str:
    """What the tables were computed from: '2 host(s); h1: 12 samples over 110 s'."""
    spans = [
        f"{h['host']}: {h['samples']} sample(s) over {h['seconds']:.0f} s"
        for h in monitoring["hosts"]
    ]
    return f"{len(spans)} host(s); " + "; ".join(spans)
