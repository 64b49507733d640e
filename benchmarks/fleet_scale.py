"""Scale of the engine over a local fleet: N SSH hosts on this machine streaming the
torch-free emitter case (tests/fixtures/cases/emitter) to one controller, through
tui.engine.session.

For each N it brings up N hosts (tui/localfleet/hosts.py) and runs ``emitter`` on all of them in
one batch, either as N one-host runs at once (``--mode runs``: config CPUx1x1, which
start together: one play of run.yml over all N hosts) or as one N-node run (``--mode
nodes``: config CPUxNx1, torchrun on every host), and measures, from the typed events the
engine hands its subscribers:

- latency: ``received - t`` of every MetricSample (the workload stamps ``t`` when it
  writes the line, the controller ``received`` when the host's follower, tui/core/stream.py,
  hands it over; one clock, since the hosts are on this machine);
- launch: seconds from ``Session.start`` until every host is in phase running, and until
  the controller holds a step from every host;
- bytes per step: bytes on each host's link (both ways) between its first and its last
  step, over the steps it streamed in that time (the link also carries the other lines,
  the end-watching polls, ssh keep-alives and, in ``nodes`` mode, torchrun's traffic);
- host CPU: what watching costs the hosts: the end-watching polls (``fleetperf_tail``
  adds up its own CPU, start-up included) and the followers' remote ``tail -F`` (read
  from /proc once a second), per host and as a share of one core;
- controller CPU: user+system seconds of this process and all it started (ansible-playbook,
  its forks, ssh, and the ssh connection masters, which outlive the run) per host, and as
  a share of one core per host over the run; the benchmark's own sampling threads (link
  counters, follower and controller samplers) are left out;
- controller memory, processes and connections, sampled every 2 s: the proportional set
  size (PSS: shared pages split between the processes sharing them, so forks' shared pages
  count once) of this process and every process it started (ssh masters included), how
  many processes that is, and the controller's established TCP connections to the hosts'
  sshd; the peak of each, per host.

    python benchmarks/fleet_scale.py --hosts 1 8 32 --steps 100 --interval 0.2 --mode runs

Needs root (tui/localfleet/hosts.py). Prints one line of figures per N.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import resource
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import yaml

from tui.core.events import Event, HostState, MetricSample
from tui.engine import session
from tui.localfleet import hosts as localfleet
from tui.localfleet.inventory import fleet_inventory

REPO = Path(__file__).resolve().parents[1]
EMITTER = REPO / "tests" / "fixtures" / "cases" / "emitter"


class LinkCounters(threading.Thread):
    """Samples each host's link (rx+tx bytes, both ways) every 50 ms."""

    def __init__(self, links: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.stats = {
            host: Path("/sys/class/net") / link / "statistics" for host, link in links.items()
        }
        self.samples: list[tuple[float, dict[str, int]]] = []
        self.stopping = threading.Event()

    def read(self) -> dict[str, int]:
        return {
            host: sum(int((stats / f"{d}_bytes").read_text()) for d in ("rx", "tx"))
            for host, stats in self.stats.items()
        }

    def run(self) -> None:
        while not self.stopping.is_set():
            self.samples.append((time.time(), self.read()))
            time.sleep(0.05)
        self.cpu_s = time.thread_time()

    def at(self, host: str, t: float) -> int:
        """The host's counter at the last sample taken at or before ``t``."""
        before = [c[host] for s, c in self.samples if s <= t]
        return before[-1] if before else self.samples[0][1][host]


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def ssh_masters_cpu(control_path_dir: Path) -> float:
    """CPU seconds of the ssh connection masters of this fleet (daemons: no one waits
    for them, so RUSAGE_CHILDREN never sees them)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if str(control_path_dir) not in (proc / "cmdline").read_text(errors="replace"):
                continue
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


class FollowerCpu(threading.Thread):
    """Once a second, the CPU seconds of every remote ``tail -F`` that follows a file under
    ``root`` (the followers' host side; each ends with its run, so the last reading counts)."""

    def __init__(self, root: Path) -> None:
        super().__init__(daemon=True)
        self.root = str(root).encode()
        self.seen: dict[int, float] = {}
        self.stopping = threading.Event()

    def run(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        while not self.stopping.wait(1.0):
            for proc in Path("/proc").iterdir():
                try:
                    argv = (proc / "cmdline").read_bytes().split(b"\0")
                    if argv[0] != b"tail" or not any(a.startswith(self.root) for a in argv):
                        continue
                    fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                except (OSError, IndexError):
                    continue
                self.seen[int(proc.name)] = (int(fields[11]) + int(fields[12])) / tick

        self.cpu_s = time.thread_time()

    def total(self) -> float:
        return sum(self.seen.values())


def _stat(pid: str) -> tuple[int, str]:
    """A process's parent pid and its command line (empty where it is gone)."""
    proc = Path("/proc") / pid
    fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1]), (proc / "cmdline").read_text(errors="replace")


class ControllerTree(threading.Thread):
    """Every 2 s: this process and everything it started (by parent, or, for the ssh
    connection masters that daemonize, by the fleet's control path in their command line):
    their summed PSS, their count, and the established TCP connections to port 22 of the
    fleet's subnet seen from here (the controller's side). Keeps the peak of each."""

    def __init__(self, control_path_dir: Path, subnet: str) -> None:
        super().__init__(daemon=True)
        self.marker = str(control_path_dir)
        self.net = ipaddress.IPv4Network(subnet)
        self.peak = {"pss_mib": 0.0, "processes": 0, "tcp": 0}
        self.stopping = threading.Event()

    def tree(self) -> list[str]:
        parents: dict[str, int] = {}
        cmdlines: dict[str, str] = {}
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                try:
                    parents[proc.name], cmdlines[proc.name] = _stat(proc.name)
                except OSError:
                    continue
        mine = {str(os.getpid())}
        changed = True
        while changed:
            more = {p for p, parent in parents.items() if str(parent) in mine} - mine
            changed = bool(more)
            mine |= more
        mine |= {p for p, cmd in cmdlines.items() if self.marker in cmd}
        return sorted(mine)

    @staticmethod
    def pss_kib(pid: str) -> int:
        try:
            for line in (Path("/proc") / pid / "smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    return int(line.split()[1])
        except OSError:
            pass
        return 0

    def tcp(self) -> int:
        count = 0
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            _, _, remote, state = line.split()[:4]
            address, port = remote.split(":")
            ip = ipaddress.IPv4Address(int(address, 16).to_bytes(4, "little"))
            count += state == "01" and int(port, 16) == 22 and ip in self.net
        return count

    def run(self) -> None:
        while not self.stopping.wait(2.0):
            pids = self.tree()
            sample = {
                "pss_mib": sum(self.pss_kib(p) for p in pids) / 1024,
                "processes": len(pids),
                "tcp": self.tcp(),
            }
            for key, value in sample.items():
                self.peak[key] = max(self.peak[key], value)
        self.cpu_s = time.thread_time()


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(
    n: int, steps: int, interval: float, mode: str, work: Path, timeline: Path | None = None
) -> dict:
    cases = work / "cases"
    shutil.copytree(EMITTER, cases / "emitter")
    (cases / "emitter" / "configs" / "cpu" / f"CPUx{n}x1.yaml").write_text("overrides: {}\n")
    sets = {"steps": steps, "interval_s": interval}
    data = work / "data"
    (data / "emitter").mkdir(parents=True)
    (data / "emitter" / "marker").write_text("staged\n")

    with localfleet.Fleet(work / "fleet", prefix="sc") as fleet:
        for i in range(1, n + 1):
            fleet.add_host(f"node{i}")
        inventory = work / "fleet.yml"
        inventory.write_text(yaml.safe_dump(fleet_inventory(fleet)))
        engine = session.Session(inventory, work / "results", data, cases_dir=cases)
        if mode == "nodes":
            plans = engine.plan([("emitter", f"cpu/CPUx{n}x1")], sets)
        else:
            plans = engine.plan([("emitter", "cpu/CPUx1x1")], sets, repeat=n)
        assert len({h for p in plans for h in p.hosts}) == n, "every host streams"
        samples: list[MetricSample] = []
        running: dict[str, float] = {}
        phases: list[tuple[float, str, str]] = []  # (received, host, phase)

        def on_event(ev: Event) -> None:
            if isinstance(ev, MetricSample):
                samples.append(ev)
            elif isinstance(ev, HostState):
                phases.append((time.time(), ev.host, ev.phase))
                if ev.phase == "running":
                    running.setdefault(ev.host, time.time())

        counter = LinkCounters({h.name: fleet.veth(h) for h in fleet.hosts.values()})
        counter.start()
        followers = FollowerCpu(work / "fleet")
        followers.start()
        tree = ControllerTree(fleet.control_path_dir, str(fleet.subnet))
        tree.start()
        cpu0 = cpu_seconds()
        started = time.time()
        batch = engine.start(plans)
        batch.subscribe(on_event)
        records = batch.wait()
        wall = time.time() - started
        counter.stopping.set()
        followers.stopping.set()
        tree.stopping.set()
        counter.join()
        followers.join()
        tree.join()
        sampling = counter.cpu_s + followers.cpu_s + tree.cpu_s  # the benchmark's own
        cpu = cpu_seconds() - cpu0 + ssh_masters_cpu(fleet.control_path_dir) - sampling
        # What the polls cost the hosts (fleetperf_tail adds up its own CPU time there).
        host_poll_cpu = sum(
            float(f.read_text())
            for h in fleet.hosts.values()
            for f in h.root.glob("runs/*/poll_cpu_s")
        )
        engine.close()

    for record in records:
        if record.status != "passed":
            raise SystemExit(f"{n} hosts: run {record.run_id} {record.status}: {record.error}")
    received: dict[str, list[float]] = {}
    for s in samples:
        received.setdefault(s.host, []).append(s.received)
    t_all = max(min(r) for r in received.values())  # the last host's first step
    # Per host, while it streams: the steps after its first one, and the bytes on its link.
    steps_streamed = moved = 0
    for host, stamps in received.items():
        steps_streamed += len(stamps) - 1
        moved += counter.at(host, max(stamps)) - counter.at(host, min(stamps))
    latency = [s.received - s.t for s in samples]
    if timeline:  # every line's and phase's time from the batch's start, for a late line's cause
        timeline.write_text(
            json.dumps(
                {
                    "started": started,  # the epoch the other times count from
                    "lines": [
                        [s.host, round(s.t - started, 3), round(s.received - s.t, 3)]
                        for s in samples
                    ],
                    "phases": [[round(t - started, 3), h, p] for t, h, p in phases],
                }
            )
        )
    host_cpu = host_poll_cpu + followers.total()
    return {
        "hosts": n,
        "mode": mode,
        "samples": len(samples),
        "latency_median_s": round(statistics.median(latency), 3),
        "latency_p99_s": round(quantile(latency, 0.99), 3),
        "latency_max_s": round(max(latency), 3),
        "launch_running_s": round(max(running.values()) - started, 2),
        "launch_first_step_s": round(t_all - started, 2),
        "bytes_per_step": round(moved / steps_streamed) if steps_streamed else None,
        "wall_s": round(wall, 1),
        "controller_cpu_s_per_host": round(cpu / n, 2),
        "controller_core_share_per_host": round(cpu / n / wall, 3),
        "host_cpu_s_per_host": round(host_cpu / n, 2),
        "host_polls_cpu_s_per_host": round(host_poll_cpu / n, 2),
        "host_core_share_per_host": round(host_cpu / n / wall, 4),
        "followers_seen": len(followers.seen),
        "controller_pss_mib_per_host": round(tree.peak["pss_mib"] / n, 1),
        "controller_processes_per_host": round(tree.peak["processes"] / n, 2),
        "controller_tcp_per_host": round(tree.peak["tcp"] / n, 2),
        "sampling_cpu_s": round(sampling, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--interval", type=float, default=0.2, help="seconds between step lines")
    ap.add_argument("--mode", choices=("runs", "nodes"), default="runs")
    ap.add_argument(
        "--timeline",
        type=Path,
        help="write each line's (host, written at, latency) and each host phase, from the"
        " batch's start, to TIMELINE-N.json",
    )
    args = ap.parse_args()
    reason = localfleet.available()
    if reason:
        raise SystemExit(f"fleet_scale: {reason}")
    print(f"# load average before: {os.getloadavg()}")
    for n in args.hosts:
        prefix = f"fleetperf-scale-{n}-"
        with tempfile.TemporaryDirectory(prefix=prefix, ignore_cleanup_errors=True) as tmp:
            timeline = args.timeline and args.timeline.with_name(f"{args.timeline.stem}-{n}.json")
            figures = measure(n, args.steps, args.interval, args.mode, Path(tmp), timeline)
            print(json.dumps(figures), flush=True)
    print(f"# load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
