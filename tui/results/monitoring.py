"""The energy and monitoring tables (FlagPerf's 能耗监控结果 and 其他重要监控结果) from a
run's ``sys`` samples (docs/monitoring.md).

``Monitor`` folds the samples as they arrive (the engine feeds it every SysSample of a run)
into running figures, constant memory per host and device however long the run: count,
mean, population standard deviation (Welford) and maximum. ``Monitor.summary()`` is the
record's ``monitoring`` object (tui/results/monitoring_tables.py: its two tables as cells,
for the text tables and the HTML report). The summary also
says whether the run is ``busy`` (other processes used more than BUSY_FRACTION of a host's
CPUs over the run's window) and whether a device was throttled (``throttle``): the
covariates that make a verdict inconclusive or explain it (docs/monitoring.md).
Controller code: no torch, no textual.
"""

from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from tui.core.events import SysSample

UNKNOWN = "—"  # a figure that applies to the row but that the hardware did not give
# Other processes' CPU over a run's window, as a fraction of the host's CPUs, from which the
# run is busy: its numbers measure that other work too.
BUSY_FRACTION = 0.1
_MAX_CPUS = 1 << 20  # a window's host_cpus past this is no host's: the window is not kept
# The throttle reasons a device's samples name (harness.nvml.THROTTLE_BITS), as said.
THROTTLE_REASONS = {"thermal": "thermal", "power_cap": "power cap", "hw_slowdown": "HW slowdown"}
# The per-device keys of a sys sample: dev{d}_{name} (docs/workload-contract.md).
_DEVICE_KEY = re.compile(
    r"dev(\d{1,6})_(power_w|power_limit_w|temp_c|mem_used_gib|mem_total_gib|util"
    r"|sm_clock_mhz|mem_clock_mhz|throttle_(?:thermal|power_cap|hw_slowdown))"
)
_DEVICE_STATS = (
    "power_w",
    "temp_c",
    "mem_percent",
    "mem_used_gib",
    "util",
    "sm_clock_mhz",
    "mem_clock_mhz",
)
# Why a vendor's devices are not read at all, where a tool exists.
_UNREAD = {"kunlunxin": " (xpu_smi: no query syntax or Python binding documented)"}
# What each of a device's figures is, for the notes that say which ones it lacks.
_DEVICE_WORDS = {
    "power_w": "power",
    "power_limit_w": "TDP (NVML gave no default power limit)",
    "temp_c": "temperature",
    "mem_percent": "memory use",
    "util": "utilisation",
}


@dataclass
class Stats:
    """Running count, mean, population variance (Welford) and maximum of one figure."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0
    top: float = -math.inf

    def add(self, x: float) -> None:
        x = float(x)
        self.n += 1
        delta = x - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (x - self.mean)
        self.top = max(self.top, x)

    def summary(self) -> dict[str, float] | None:
        """{"avg", "max", "std"}; None without a reading, or where the readings were too
        large to summarise (past a float's range: JSON has no infinity)."""
        if not self.n:
            return None
        out = {"avg": self.mean, "max": self.top, "std": math.sqrt(max(self.m2, 0.0) / self.n)}
        return out if all(math.isfinite(v) for v in out.values()) else None


@dataclass
class _Device:
    power_w: Stats = field(default_factory=Stats)
    temp_c: Stats = field(default_factory=Stats)
    mem_percent: Stats = field(default_factory=Stats)
    mem_used_gib: Stats = field(default_factory=Stats)
    util: Stats = field(default_factory=Stats)
    sm_clock_mhz: Stats = field(default_factory=Stats)
    mem_clock_mhz: Stats = field(default_factory=Stats)
    power_limit_w: float | None = None  # the newest reading: a board's TDP does not move
    mem_total_gib: float | None = None
    throttle_samples: int = 0  # samples that carried the throttle reasons
    throttled: dict[str, int] = field(default_factory=dict)  # reason -> samples active


@dataclass
class _Window:
    """The newest of a host's window figures (each sample's covers the run so far)."""

    t: float
    cpu_s: float
    seconds: float
    cpus: int
    top: tuple[dict[str, Any], ...]
    fleetperf_cpu_s: float | None  # fleetperf's own machinery, not in cpu_s (older: None)


@dataclass
class _Host:
    samples: int = 0
    first_t: float = math.inf
    last_t: float = -math.inf
    cpu_percent: Stats = field(default_factory=Stats)
    host_mem_percent: Stats = field(default_factory=Stats)
    cpu_power_w: Stats = field(default_factory=Stats)
    cpu_freq_mhz: Stats = field(default_factory=Stats)
    host_mem_total_gib: float | None = None
    window: _Window | None = None
    devices: dict[int, _Device] = field(default_factory=dict)


class Monitor:
    """One run's sys samples, summarised as they come (from several threads)."""

    def __init__(self, vendor: str, nproc_per_node: int) -> None:
        self.vendor = vendor
        self.nproc_per_node = nproc_per_node  # devices dev0..dev{n-1}; higher ones ignored
        self._hosts: dict[str, _Host] = {}
        self._lock = threading.Lock()

    def add(self, ev: SysSample) -> None:
        with self._lock:
            host = self._hosts.setdefault(ev.host, _Host())
            host.samples += 1
            host.first_t, host.last_t = min(host.first_t, ev.t), max(host.last_t, ev.t)
            v = ev.values
            if "cpu_percent" in v:
                host.cpu_percent.add(v["cpu_percent"])
            if "cpu_power_w" in v:
                host.cpu_power_w.add(v["cpu_power_w"])
            if "cpu_freq_mhz" in v:
                host.cpu_freq_mhz.add(v["cpu_freq_mhz"])
            _add_window(host, ev)
            if (total := v.get("host_mem_total_gib")) is not None:
                host.host_mem_total_gib = total
            if (pct := _percent(v.get("host_mem_used_gib"), total)) is not None:
                host.host_mem_percent.add(pct)
            per_device: dict[int, dict[str, float]] = {}
            for key, value in v.items():
                if (m := _DEVICE_KEY.fullmatch(key)) and int(m[1]) < self.nproc_per_node:
                    per_device.setdefault(int(m[1]), {})[m[2]] = value
            for d, got in per_device.items():
                _add_device(host.devices.setdefault(d, _Device()), got)

    def summary(self) -> dict[str, Any] | None:
        """The record's ``monitoring`` object (docs/record.md), None without a sample."""
        with self._lock:
            if not self._hosts:
                return None
            hosts, notes = [], []
            for name, host in self._hosts.items():
                hosts.append(self._host_summary(name, host))
                notes += self._host_notes(name, host)
            if any(h["cpu_power_w"] is not None for h in hosts):
                notes.append(
                    "system power is the CPU packages' RAPL figure averaged between samples,"
                    " not the whole system (FlagPerf reads the host's IPMI); DRAM, devices"
                    " and fans are not in it"
                )
            if any(h["devices"] for h in hosts):
                notes.append("device power is NVML's board power read at each sample")
            notes.append("system TDP: not read (no source gives it; FlagPerf shows '/')")
            out: dict[str, Any] = {"hosts": hosts, "notes": notes}
            if all(h["others"] is not None for h in hosts):  # else: not known, not quiet
                out["busy"] = busy_reason(hosts)
            out["throttle"] = throttle_reason(hosts)
            return out

    def _host_summary(self, name: str, host: _Host) -> dict[str, Any]:
        devices = [
            _device_summary(d, host.devices.get(d, _Device()))
            for d in (range(self.nproc_per_node) if host.devices else ())
        ]
        return {
            "host": name,
            "samples": host.samples,
            "seconds": host.last_t - host.first_t,
            "cpu_percent": host.cpu_percent.summary(),
            "host_mem_percent": host.host_mem_percent.summary(),
            "host_mem_total_gib": host.host_mem_total_gib,
            "cpu_power_w": host.cpu_power_w.summary(),
            "cpu_freq_mhz": host.cpu_freq_mhz.summary(),
            "others": _window_summary(host.window),
            "devices": devices,
        }

    def _host_notes(self, name: str, host: _Host) -> list[str]:
        psutil = "psutil not importable there"
        rapl = "RAPL not readable there: most VMs, or root only"
        lacking = [
            ("CPU use", host.cpu_percent, psutil),
            ("host memory use", host.host_mem_percent, psutil),
            ("CPU power", host.cpu_power_w, rapl),
        ]
        notes = [
            f"host {name}: no {what}: {_why(stats, reason)}"
            for what, stats, reason in lacking
            if stats.summary() is None
        ]
        if host.cpu_freq_mhz.summary() is None:
            notes.append(
                f"host {name}: no CPU frequency: /sys/devices/system/cpu/cpu*/cpufreq not"
                " readable there (most VMs and containers)"
            )
        if host.window is None:
            notes.append(
                f"host {name}: other processes' CPU use not measured: its samples carry no"
                " window (an older harness): busy or quiet is not known"
            )
        if not host.devices:  # harness/sysmon.py reads NVML (nvidia) and ixsmi (iluvatar)
            why = _UNREAD.get(self.vendor, "")
            notes.append(
                f"host {name}: no device readings: only NVML (nvidia) and ixsmi (iluvatar)"
                f" are read, and this vendor {self.vendor} host gave none{why}"
            )
            return notes
        for d in range(self.nproc_per_node):
            device = host.devices.get(d, _Device())
            lacks = [
                words
                for key, words in _DEVICE_WORDS.items()
                if (device.power_limit_w if key == "power_limit_w" else _stat(device, key)) is None
            ]
            if lacks:
                notes.append(f"host {name} device {d}: no {', '.join(lacks)}")
            if not device.throttle_samples:
                notes.append(
                    f"host {name} device {d}: no throttle reasons: the driver or tool gave"
                    " none (throttled or not is not known)"
                )
        return notes


def _add_window(host: _Host, ev: SysSample) -> None:
    v = ev.values
    cpu_s, seconds, cpus = v.get("others_cpu_s"), v.get("window_s"), v.get("host_cpus")
    if cpu_s is None or seconds is None or cpus is None or cpu_s < 0 or seconds < 0:
        return
    if 1 <= cpus <= _MAX_CPUS and (host.window is None or ev.t >= host.window.t):
        own = v.get("fleetperf_cpu_s")
        own = own if own is not None and own >= 0 else None
        host.window = _Window(ev.t, cpu_s, seconds, int(cpus), ev.others, own)


def _window_summary(window: _Window | None) -> dict[str, Any] | None:
    if window is None:
        return None
    cores = window.cpu_s / window.seconds if window.seconds > 0 else 0.0
    return {
        "cpu_s": window.cpu_s,
        "seconds": window.seconds,
        "host_cpus": window.cpus,
        "cores": cores,
        "fraction": cores / window.cpus,
        "top": [dict(p) for p in window.top],
        "fleetperf_cpu_s": window.fleetperf_cpu_s,
    }


def busy_reason(hosts: list[dict[str, Any]]) -> str | None:
    """'busy: host h: other processes used 0.62 of 2 CPUs (31 %) over 12.0 s: stress (pid 9)
    7.4 s, ...' for each host whose others passed BUSY_FRACTION; None when none did."""
    parts = []
    for host in hosts:
        others = host["others"]
        if others is None or others["fraction"] <= BUSY_FRACTION:
            continue
        top = ", ".join(f"{p['name']} (pid {p['pid']}) {p['cpu_s']:.1f} s" for p in others["top"])
        parts.append(
            f"host {host['host']}: other processes used {others['cores']:.2f} of"
            f" {others['host_cpus']} CPUs ({others['fraction'] * 100:.0f} %) over"
            f" {others['seconds']:.1f} s" + (f": {top}" if top else "")
        )
    return "busy: " + "; ".join(parts) if parts else None


def throttle_reason(hosts: list[dict[str, Any]]) -> str | None:
    """'throttle: host h device 0: thermal in 3 of 24 samples' for each device whose
    hardware held its clocks down in any sample; None when none did (or none said)."""
    parts = []
    for host in hosts:
        for dev in host["devices"]:
            seen = dev["throttle"]
            if seen is None:
                continue
            active = [
                f"{words} in {seen[key]} of {seen['samples']} samples"
                for key, words in THROTTLE_REASONS.items()
                if seen[key]
            ]
            if active:
                parts.append(f"host {host['host']} device {dev['device']}: {', '.join(active)}")
    return "throttle: " + "; ".join(parts) if parts else None


def _add_device(device: _Device, got: dict[str, float]) -> None:
    for key in ("power_w", "temp_c", "mem_used_gib", "util", "sm_clock_mhz", "mem_clock_mhz"):
        if key in got:
            getattr(device, key).add(got[key])
    reasons = {key: got.get(f"throttle_{key}") for key in THROTTLE_REASONS}
    if all(r is not None for r in reasons.values()):
        device.throttle_samples += 1
        for key, active in reasons.items():
            device.throttled[key] = device.throttled.get(key, 0) + (1 if active else 0)
    if "power_limit_w" in got:
        device.power_limit_w = got["power_limit_w"]
    if (total := got.get("mem_total_gib")) is not None:
        device.mem_total_gib = total
    if (pct := _percent(got.get("mem_used_gib"), total)) is not None:
        device.mem_percent.add(pct)


def _stat(device: _Device, key: str) -> dict[str, float] | None:
    stats: Stats = getattr(device, key)
    return stats.summary()


def _device_summary(d: int, device: _Device) -> dict[str, Any]:
    return {
        "device": d,
        **{key: _stat(device, key) for key in _DEVICE_STATS},
        "power_limit_w": device.power_limit_w,
        "mem_total_gib": device.mem_total_gib,
        "throttle": (
            {
                "samples": device.throttle_samples,
                **{k: device.throttled[k] for k in THROTTLE_REASONS},
            }
            if device.throttle_samples
            else None
        ),
    }


def _percent(used: float | None, total: float | None) -> float | None:
    return None if used is None or total is None or total <= 0 else used / total * 100


def _why(stats: Stats, reason: str) -> str:
    if stats.n:
        return "its readings are too large to summarise"
    return f"the samples carry none ({reason})"
