"""A local-fleet host made slow on purpose, to prove that fleetperf names it (test tools:
``fleetperf fleet degrade HOST --cpu FRACTION | --link-rate RATE``, ``fleet restore HOST``;
docs/localfleet.md).

CPU: a cgroup v1 ``cpu`` controller group beside the host's sshd with a CFS quota
(``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``), every process of the host's network
namespace moved into it; what the sshd forks later (SSH sessions, the runs they start)
starts in it. Link: a token bucket (tc ``tbf``) on both ends of the host's veth, so its
traffic is capped both ways (this kernel has no netem). ``restore`` moves the processes
back and removes the group and both qdiscs; ``Fleet.close`` (``fleet down``) restores too.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Protocol


class Host(Protocol):
    """What degrading a local-fleet host reads of it (tui/localfleet/hosts.py's Host)."""

    name: str
    netns: str
    root: Path
    sshd_pid: int

    @property
    def veth(self) -> str:
        """The host's link on the bridge, on this machine's side."""
        ...


CPU_ROOT = Path("/sys/fs/cgroup/cpu")  # this machine's cgroup v1 cpu hierarchy
PERIOD_US = 100_000
MIN_QUOTA_US = 1_000  # the kernel refuses a smaller quota
STATE = "degraded.json"  # in the host's directory: the cgroup that restore removes
# tc's rate units (case-insensitive, as tc reads them): bit per second, or byte per second.
RATE = re.compile(r"(\d+(?:\.\d+)?)([kmgt]?)(bit|bps)", re.IGNORECASE)
SCALE = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}


class DegradeError(ValueError):
    """Bad input to degrade or restore: one line for the operator."""


def parse_fraction(text: str) -> float:
    """``--cpu``: the share of this machine's CPU time the host keeps, in (0, 1]."""
    try:
        fraction = float(text)
    except ValueError:
        fraction = math.nan
    if not (math.isfinite(fraction) and 0 < fraction <= 1):
        raise DegradeError(f"--cpu {text}: expected a fraction in (0, 1], e.g. 0.3")
    return fraction


def parse_rate(text: str) -> int:
    """``--link-rate``: a rate as tc writes it (``100mbit``, ``1gbit``, ``10mbps``), in bit/s."""
    match = RATE.fullmatch(text.strip())
    bits = 0
    if match:
        number, prefix, unit = match.groups()
        bits = round(float(number) * SCALE[prefix.lower()] * (8 if unit.lower() == "bps" else 1))
    if bits <= 0:
        raise DegradeError(
            f"--link-rate {text}: expected a rate such as 100mbit, 1gbit or 10mbps (bytes/s)"
        )
    return bits


def limit_cpu(host: Host, fraction: float) -> tuple[Path, int, int]:
    """Cap the host's processes at ``fraction`` of the CPUs its sshd may run on; returns
    the cgroup, the quota and the CPU count."""
    if not (CPU_ROOT / "cpu.cfs_quota_us").is_file():
        raise DegradeError(f"--cpu needs a cgroup v1 cpu controller at {CPU_ROOT}")
    now = _cgroup_of(host.sshd_pid)
    group = now if now.name == _name(host) else now / _name(host)  # again: a new quota
    group.mkdir(exist_ok=True)
    (host.root / STATE).write_text(json.dumps({"cgroup": str(group)}) + "\n")
    cpus = len(os.sched_getaffinity(host.sshd_pid))
    quota = max(MIN_QUOTA_US, round(fraction * cpus * PERIOD_US))
    (group / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
    (group / "cpu.cfs_quota_us").write_text(f"{quota}\n")
    for _ in range(20):  # a session forked while we move its parent: moved next round
        left = [pid for pid in _netns_pids(host.netns) if pid not in _procs(group)]
        if not left:
            return group, quota, cpus
        _move(left, group)
    raise RuntimeError(f"local host {host.name}: its processes kept escaping {group}")


def limit_link(host: Host, bits: int) -> None:
    """A token bucket of ``bits`` bit/s on both ends of the host's veth."""
    # A burst of 10 ms at the rate, and at least a few full-size packets.
    burst = max(bits // 8 // 100, 16 * 1024)
    tbf = ["root", "tbf", "rate", f"{bits}bit", "burst", str(burst), "latency", "100ms"]
    for tc, dev in _ends(host):
        _run(*tc, "qdisc", "replace", "dev", dev, *tbf)


def restore(host: Host) -> None:
    """Undo both: processes back where they came from, the cgroup and the qdiscs gone."""
    group = _group(host)
    if group is not None and group.is_dir():
        for _ in range(50):
            left = _procs(group)
            if not left:
                break
            _move(left, group.parent)
        _rmdir(group)
    (host.root / STATE).unlink(missing_ok=True)
    for tc, dev in _ends(host):
        shown = subprocess.run([*tc, "qdisc", "show", "dev", dev], capture_output=True)
        if b"tbf" in shown.stdout:
            _run(*tc, "qdisc", "del", "dev", dev, "root")


def _ends(host: Host) -> list[tuple[list[str], str]]:
    """tc and the device, for each end of the host's veth that exists: this machine's end
    (traffic to the host), the host's eth0 in its namespace (traffic from it)."""
    veth = host.veth
    ends = [(["tc"], veth)] if Path("/sys/class/net", veth).exists() else []
    if Path("/run/netns", host.netns).exists():
        ends.append((["tc", "-n", host.netns], "eth0"))
    return ends


def _name(host: Host) -> str:
    return f"fleetperf-{host.netns}"  # unique on this machine: the fleet's tag, the host


def _group(host: Host) -> Path | None:
    """The cgroup an earlier degrade made for the host, or None. The host can write its
    directory: only a group of the host's own name under CPU_ROOT is taken from there."""
    state = host.root / STATE
    if not state.is_file():
        return None
    with contextlib.suppress(ValueError, KeyError, TypeError):  # not what limit_cpu wrote
        group = Path(os.path.normpath(json.loads(state.read_text())["cgroup"]))
        if group.name == _name(host) and group.is_relative_to(CPU_ROOT):
            return group
    return None


def _cgroup_of(pid: int) -> Path:
    """The directory of the cpu cgroup that process ``pid`` is in."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):
            return CPU_ROOT / path.lstrip("/")
    raise DegradeError(f"process {pid} is in no cgroup v1 cpu group")


def _netns_pids(netns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True)
    return [int(pid) for pid in out.stdout.split()]


def _procs(group: Path) -> list[int]:
    return [int(pid) for pid in (group / "cgroup.procs").read_text().split()]


def _move(pids: list[int], group: Path) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
            (group / "cgroup.procs").write_text(f"{pid}\n")


def _rmdir(group: Path) -> None:
    """Remove an emptied cgroup; the kernel may take a moment to see its last task gone."""
    for _ in range(50):
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)
    group.rmdir()


def _run(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")
