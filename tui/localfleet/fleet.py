"""A local fleet: SSH hosts on this machine, for trying fleetperf and for its tests.

A ``Fleet`` makes a bridge in this machine's network namespace and, per host, a network
namespace joined to the bridge by a veth pair, with an sshd listening on the host's own
address. The sshd runs in a mount namespace of its own in which overlays cover the
directories a host's software writes (``OVERLAID``): what happens on a host (users,
groups, packages, /etc files) lands in the host's overlay under its ``root`` and goes
away with it, and never reaches this machine. Everything else (the repository, the
venv, /tmp with each host's ``root``) is shared with this machine.

Hosts reach each other (multi-node runs) and the controller reaches them with
``ssh root@ADDRESS`` using a key made for the fleet; host keys are pinned in a
known_hosts file, so host key checking stays on. ``host.bin_dir`` comes first on PATH in
the host's SSH sessions: put stand-in hardware commands there with ``host.add_command``.
``host.exec_argv(argv)`` runs a command on this machine inside a host's namespaces.

The fleet's state is kept in ``fleet.json`` in its directory, so that ``fleetperf fleet
down`` in another process finds what ``fleetperf fleet up`` made. Nothing is mounted in
this machine's mount namespace: the overlays live only in the hosts' namespaces and are
gone when the last process in them ends, which ``close()`` sees to.

``fleetperf fleet degrade HOST`` slows one host down on purpose and ``fleet restore HOST``
undoes it (test tools: tui/localfleet/degrade.py).

Needs root, ``ip`` (iproute2), ``unshare``/``nsenter`` (util-linux), overlayfs and
``sshd`` (openssh-server); ``available()`` says why not.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import ipaddress
import itertools
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tui.core.paths import REPO_ROOT
from tui.localfleet import degrade

SSHD = "/usr/sbin/sshd"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# What provisioning and the software it installs write: packages (/usr, /var/lib/dpkg),
# users and groups, configuration (/etc), homes, add-on software.
OVERLAID = ("/etc", "/home", "/opt", "/root", "/srv", "/usr", "/var")
SUBNETS = ipaddress.IPv4Network("10.231.0.0/16")
LOCK = Path("/run/lock/fleetperf-localfleet.lock")  # one subnet chooser at a time
STATE = "fleet.json"
_serial = itertools.count()

# Runs in the host's new mount namespace: an overlay over each directory, then sshd.
# Paths arrive as arguments ($1: the overlay directory), never inside the script.
_MOUNT_AND_EXEC = """
set -e
overlay=$1; shift
for d in $FLEETPERF_OVERLAID; do
  mkdir -p "$overlay/upper$d" "$overlay/work$d"
  mount -t overlay overlay -o "lowerdir=$d,upperdir=$overlay/upper$d,workdir=$overlay/work$d" "$d"
done
exec "$@"
"""


def available() -> str | None:
    """None when local hosts can be made here, else the reason they cannot."""
    if os.geteuid() != 0:
        return "local hosts need root (network namespaces, mounts)"
    for tool in ("ip", "unshare", "nsenter", "mount", SSHD, "ssh", "ssh-keygen"):
        if not shutil.which(tool):
            return f"local hosts need {tool} (scripts/bootstrap installs it)"
    if "\toverlay\n" not in Path("/proc/filesystems").read_text():
        return "local hosts need overlayfs in the kernel"
    return None


def _run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def _overlaid(path: Path) -> str | None:
    """The overlaid directory that ``path`` lies in (hosts could not share it), or None."""
    for d in OVERLAID:
        if path == Path(d) or path.is_relative_to(d):
            return d
    return None


@dataclass
class Host:
    """One SSH host: network and mount namespaces, an address on the bridge, an sshd."""

    name: str
    netns: str
    address: str
    root: Path  # this host's directory: its paths, overlays, sshd files
    sshd_pid: int
    fleet: Fleet = field(repr=False)

    @property
    def bin_dir(self) -> Path:
        """First on PATH in this host's SSH sessions: stand-in hardware commands."""
        return self.root / "bin"

    def add_command(self, name: str, script: str) -> Path:
        """Put an executable stand-in for ``name`` on this host's PATH."""
        path = self.bin_dir / name
        path.write_text(script)
        path.chmod(0o755)
        return path

    def changed(self, path: str) -> Path:
        """Where the host keeps what it wrote at ``path`` under an overlaid directory
        (on this machine, ``path`` itself is untouched)."""
        return self.root / "overlay" / "upper" / Path(path).relative_to("/")

    def exec_argv(self, argv: list[str]) -> list[str]:
        """``argv`` run on this machine inside the host's network and mount namespaces
        (a daemon the host would run, such as dockerd, writes into the host's overlay)."""
        return ["nsenter", f"--target={self.sshd_pid}", "--mount", "--net", "--", *argv]

    def ssh(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a command on the host over SSH (argv, quoted for the remote shell)."""
        remote = " ".join(shlex.quote(a) for a in argv)
        return subprocess.run(
            ["ssh", *self.fleet.ssh_options(), f"root@{self.address}", remote],
            capture_output=True,
            text=True,
            check=check,
            timeout=60,
        )

    def inventory_vars(self) -> dict[str, str]:
        """Connection variables for an Ansible inventory."""
        return {
            "ansible_host": self.address,
            "ansible_user": "root",
            "ansible_ssh_private_key_file": str(self.fleet.client_key),
            "ansible_ssh_common_args": " ".join(self.fleet.ssh_options(with_key=False)),
            "ansible_python_interpreter": "/usr/bin/python3",
            "ansible_control_path_dir": str(self.fleet.control_path_dir),
        }


class Fleet:
    """A bridge with SSH hosts on it; a context manager that removes everything."""

    def __init__(self, workdir: Path, prefix: str = "fp") -> None:
        self.workdir = Path(workdir).resolve()
        # Unique per process and fleet, and short: interface names have 15 characters at
        # most (the tag, then "br" or "v<n>").
        self.tag = f"{prefix}{_base36(os.getpid())}-{next(_serial)}"
        self.bridge = f"{self.tag}br"
        self.hosts: dict[str, Host] = {}
        self.subnet: ipaddress.IPv4Network | None = None
        self.client_key = self.workdir / "client_key"
        # Ansible's SSH connection sharing, per fleet: addresses repeat across fleets,
        # and a master connection left from an earlier one must never be reused. In /tmp
        # under a short name: a socket path holds 107 bytes at most, and a deep workdir
        # (pytest's, under xdist) plus ssh's own suffix would pass that.
        digest = hashlib.sha256(str(self.workdir.resolve()).encode()).hexdigest()[:12]
        self.control_path_dir = Path(tempfile.gettempdir()) / f"fleetperf-cp-{digest}"
        self.known_hosts = self.workdir / "known_hosts"
        self._bridge_up = False

    # -- lifecycle -------------------------------------------------------------
    def __enter__(self) -> Fleet:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        reason = available()
        if reason:
            raise RuntimeError(reason)
        inside = _overlaid(self.workdir)
        if inside or any(c in str(self.workdir) for c in ",:"):
            raise RuntimeError(
                f"fleet directory {self.workdir}: must not lie under {inside} (hosts overlay it)"
                if inside
                else f"fleet directory {self.workdir}: no ',' or ':' in its path (overlay options)"
            )
        self.workdir.mkdir(parents=True, exist_ok=True)
        LOCK.parent.mkdir(parents=True, exist_ok=True)
        with LOCK.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # xdist workers: never two on one subnet
            self.subnet = self._free_subnet()
            _run("ip", "link", "add", self.bridge, "type", "bridge")
            self._bridge_up = True
            self._save()
            gateway = f"{self.subnet[1]}/{self.subnet.prefixlen}"
            _run("ip", "addr", "add", gateway, "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.client_key))
        self.known_hosts.write_text("")
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory

    @staticmethod
    def _free_subnet() -> ipaddress.IPv4Network:
        """A /24 in SUBNETS that no interface on this machine uses."""
        used = _run("ip", "-4", "-o", "addr", "show")
        for net in list(SUBNETS.subnets(new_prefix=24))[1:]:
            if f" {net[1]}/" not in used:
                return net
        raise RuntimeError(f"no free /24 in {SUBNETS} for local hosts")

    def close(self) -> None:
        """Stop every process in the hosts' namespaces (sshd, the sessions it forked, which
        outlive it, and what they started), which ends the mount namespaces and their
        overlays; then remove the network namespaces, veths, bridge and overlay files."""
        for host in self.hosts.values():
            _kill_netns(host.netns)
            degrade.restore(host)  # its emptied cgroup and qdiscs (fleet degrade)
            subprocess.run(["ip", "netns", "del", host.netns], capture_output=True)
            # Gone with its namespace, unless something still holds it.
            subprocess.run(["ip", "link", "del", self.veth(host)], capture_output=True)
            shutil.rmtree(host.root / "overlay", ignore_errors=True)
        self.hosts.clear()
        if self._bridge_up:
            subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
            self._bridge_up = False
        (self.workdir / STATE).unlink(missing_ok=True)
        shutil.rmtree(self.control_path_dir, ignore_errors=True)

    # -- hosts -----------------------------------------------------------------
    def veth(self, host: Host) -> str:
        """The host's link on the bridge, on this machine's side: its traffic counters."""
        return f"{self.tag}v{int(ipaddress.IPv4Address(host.address)) & 0xFF}"

    def add_host(self, name: str) -> Host:
        """Make a host: namespaces, veth on the bridge, address, overlays, sshd; wait for SSH."""
        assert self.subnet is not None, "start() the fleet first"
        index = len(self.hosts) + 2  # .1 is the bridge
        if index > 254:
            raise RuntimeError(f"a fleet holds 253 hosts at most ({name} would be one more)")
        address = str(self.subnet[index])
        netns = f"{self.tag}-{name}"
        root = self.workdir / "hosts" / name
        (root / "bin").mkdir(parents=True, exist_ok=True)
        veth = f"{self.tag}v{index}"

        _run("ip", "netns", "add", netns)
        # Known (and so removed by close()) from here on; the pid comes once sshd runs.
        host = Host(name, netns, address, root, 0, self)
        self.hosts[name] = host
        self._save()
        _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns)
        _run("ip", "link", "set", veth, "master", self.bridge, "up")
        _run("ip", "-n", netns, "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", "eth0")
        _run("ip", "-n", netns, "link", "set", "eth0", "up")
        _run("ip", "-n", netns, "link", "set", "lo", "up")

        config = self._sshd_config(host)
        pid_file = root / "sshd.pid"
        pid_file.unlink(missing_ok=True)
        env = {"PATH": SYSTEM_PATH, "FLEETPERF_OVERLAID": " ".join(_existing(OVERLAID))}
        # Not `ip netns exec`: it remounts /sys, hiding the cgroup mounts dockerd needs.
        enter = ["nsenter", f"--net=/run/netns/{netns}"]
        mounts = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c"]
        mounts += [_MOUNT_AND_EXEC, "sh", str(root / "overlay")]
        sshd = [SSHD, "-f", str(config), "-E", str(root / "sshd.log")]
        subprocess.run(enter + mounts + sshd, env=env, check=True, capture_output=True)
        for _ in range(100):
            if pid_file.exists() and pid_file.read_text().strip():
                break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"local host {name}: sshd did not start (see {root / 'sshd.log'})")
        host.sshd_pid = int(pid_file.read_text())
        self._save()
        public = Path(f"{root / 'ssh_host_ed25519_key'}.pub").read_text().split()
        with self.known_hosts.open("a") as f:
            f.write(f"{address} {public[0]} {public[1]}\n")
        for _ in range(50):
            if host.ssh("true", check=False).returncode == 0:
                return host
            time.sleep(0.1)
        raise RuntimeError(f"local host {name}: no SSH at {address} (see {root / 'sshd.log'})")

    def _sshd_config(self, host: Host) -> Path:
        root = host.root
        host_key = root / "ssh_host_ed25519_key"
        host_key.unlink(missing_ok=True)
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key))
        authorized = root / "authorized_keys"
        authorized.write_text(Path(f"{self.client_key}.pub").read_text())
        config = root / "sshd_config"
        config.write_text(
            f"ListenAddress {host.address}\n"
            f"HostKey {host_key}\n"
            f"AuthorizedKeysFile {authorized}\n"
            f"PidFile {root / 'sshd.pid'}\n"
            "PermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "UsePAM no\n"
            "StrictModes no\n"
            "MaxStartups 100\n"
            "MaxSessions 100\n"
            f"SetEnv PATH={host.bin_dir}:{SYSTEM_PATH}\n"
            "Subsystem sftp internal-sftp\n"
        )
        return config

    def ssh_options(self, with_key: bool = True) -> list[str]:
        opts = [
            "-o",
            f"UserKnownHostsFile={self.known_hosts}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=10",
        ]
        return (["-i", str(self.client_key)] if with_key else []) + opts

    def inventory(
        self,
        groups: dict[str, list[Host]],
        host_vars: dict[str, dict] | None = None,
    ) -> dict:
        """An Ansible YAML inventory (as a dict): the groups, connection and host vars."""
        host_vars = host_vars or {}
        children = {}
        for group, members in groups.items():
            children[group] = {
                "hosts": {
                    h.name: {**h.inventory_vars(), **host_vars.get(h.name, {})} for h in members
                }
            }
        return {"all": {"children": children}}

    # -- state, for ``fleet down`` in another process ----------------------------
    def _save(self) -> None:
        state = {
            "tag": self.tag,
            "subnet": str(self.subnet),
            "hosts": {h.name: [h.netns, h.address, h.sshd_pid] for h in self.hosts.values()},
        }
        (self.workdir / STATE).write_text(json.dumps(state, indent=1) + "\n")

    @classmethod
    def load(cls, workdir: Path) -> Fleet:
        """The fleet that another process brought up in ``workdir``."""
        state = json.loads((Path(workdir) / STATE).read_text())
        fleet = cls(workdir)
        fleet.tag, fleet.bridge = state["tag"], f"{state['tag']}br"
        fleet.subnet = ipaddress.IPv4Network(state["subnet"])
        fleet._bridge_up = True
        for name, (netns, address, pid) in state["hosts"].items():
            root = fleet.workdir / "hosts" / name
            fleet.hosts[name] = Host(name, netns, address, root, pid, fleet)
        return fleet


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, d = divmod(n, 36)
        out = digits[d] + out
        if not n:
            return out


def _existing(dirs: tuple[str, ...]) -> list[str]:
    return [d for d in dirs if Path(d).is_dir() and not Path(d).is_symlink()]


def _kill_netns(netns: str) -> None:
    """SIGKILL every process in a network namespace until none is left."""
    for _ in range(50):
        pids = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True)
        if not pids.stdout.split():
            return
        for pid in pids.stdout.split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        time.sleep(0.05)


# -- fleetperf fleet up N / fleet down ------------------------------------------------

DEFAULT_DIR = Path(tempfile.gettempdir()) / "fleetperf-fleet"
INVENTORY = "inventory.yml"


def fleet_inventory(fleet: Fleet) -> dict:
    """Group cpu, executor process, this repository and interpreter, a run root per host;
    data comes from the controller's data root, as in inventory/local.yml."""
    hosts = list(fleet.hosts.values())
    host_vars = {
        h.name: {
            "fleetperf_executor": "process",
            "fleetperf_addr": h.address,
            "fleetperf_repo_dir": str(REPO_ROOT),
            "fleetperf_python": sys.executable,
            "fleetperf_data_root": (
                "{{ fleetperf_controller_data_root | default('" + str(REPO_ROOT / "data") + "') }}"
            ),
            "fleetperf_run_root": str(h.root / "runs"),
        }
        for h in hosts
    }
    return fleet.inventory({"cpu": hosts}, host_vars)


# -- a local Slurm cluster (fleetperf fleet up N --slurm) ------------------------------
SLURM_DAEMONS = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd")
LOGIN = "login"  # the host that runs slurmctld and that jobs are submitted from
# Under an overlaid directory: the same path on every host, each host's own file. Slurm's
# clients find munge's socket through slurm.conf (AuthInfo), which all hosts share.
HOST_SLURM_DIR = "/var/lib/fleetperf-slurm"
MUNGE_SOCKET = f"{HOST_SLURM_DIR}/munge.socket"


def slurm_available() -> str | None:
    """None when a local Slurm cluster can be made here, else the reason it cannot."""
    for daemon in SLURM_DAEMONS:
        if not Path(daemon).is_file():
            return f"a local Slurm cluster needs {daemon} (scripts/bootstrap installs it)"
    return None


def slurm_conf(fleet: Fleet, login: Host, nodes: list[Host]) -> str:
    """slurm.conf of the fleet's cluster: daemons run as root, files in the fleet's
    directory (per node: %n), no cgroups (the hosts share this machine's), no accounting
    database; a node that stops answering is down after 10 s and its job ends NODE_FAIL."""
    state = fleet.workdir / "slurm"
    hosts = fleet.workdir / "hosts"
    # slurmctld checks that it runs on SlurmctldHost: the hosts share this machine's name.
    lines = [
        "ClusterName=fleetperf",
        f"SlurmctldHost={os.uname().nodename.split('.')[0]}({login.address})",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={MUNGE_SOCKET}",
        f"StateSaveLocation={state / 'state'}",
        f"SlurmctldPidFile={state / 'slurmctld.pid'}",
        f"SlurmctldLogFile={state / 'slurmctld.log'}",
        f"SlurmdSpoolDir={hosts}/%n/slurmd",
        f"SlurmdPidFile={hosts}/%n/slurmd.pid",
        f"SlurmdLogFile={hosts}/%n/slurmd.log",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "MpiDefault=none",
        "SwitchType=switch/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "JobAcctGatherType=jobacct_gather/none",
        "ReturnToService=2",
        "SlurmdTimeout=10",
        "MessageTimeout=5",
        "KillWait=5",
        "MinJobAge=3600",
        "JobRequeue=0",
        "InactiveLimit=0",
        "SchedulerType=sched/backfill",
        f"NodeName=DEFAULT CPUs={os.cpu_count() or 1} State=UNKNOWN",
        *(f"NodeName={n.name} NodeAddr={n.address}" for n in nodes),
        f"PartitionName=debug Nodes={','.join(n.name for n in nodes)} Default=YES"
        " MaxTime=INFINITE State=UP",
    ]
    return "\n".join(lines) + "\n"


def _in_host(host: Host, *argv: str) -> None:
    """Run argv on this machine in the host's namespaces (its overlays, its network)."""
    done = subprocess.run(
        host.exec_argv(list(argv)), env={"PATH": SYSTEM_PATH}, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"local host {host.name}: {argv[0]}: {done.stderr.strip()}")


def start_slurm(fleet: Fleet, login: Host, nodes: list[Host]) -> None:
    """munged on every host, slurmctld on ``login``, slurmd on ``nodes``; waits until
    every node is idle. Their configuration and key live in the fleet's directory and in
    the hosts' overlays (/etc/slurm, HOST_SLURM_DIR), never in this machine's /etc; the
    daemons run in the hosts' namespaces, so closing the fleet ends them."""
    state = fleet.workdir / "slurm"
    (state / "state").mkdir(parents=True, exist_ok=True)
    key = state / "munge.key"
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(1024))
    conf = state / "slurm.conf"
    conf.write_text(slurm_conf(fleet, login, nodes))
    for host in (login, *nodes):
        _in_host(host, "mkdir", "-p", "-m", "0700", HOST_SLURM_DIR, "/etc/slurm")
        _in_host(host, "cp", str(conf), "/etc/slurm/slurm.conf")  # into the host's overlay
        (host.root / "slurmd").mkdir(exist_ok=True)
        _in_host(
            host,
            "/usr/sbin/munged",
            "--force",
            f"--key-file={key}",
            f"--socket={MUNGE_SOCKET}",
            f"--pid-file={host.root / 'munged.pid'}",
            f"--log-file={host.root / 'munged.log'}",
            f"--seed-file={host.root / 'munged.seed'}",
        )
    _in_host(login, "/usr/sbin/slurmctld", "-f", "/etc/slurm/slurm.conf")
    for node in nodes:
        _in_host(node, "/usr/sbin/slurmd", "-f", "/etc/slurm/slurm.conf", "-N", node.name)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        seen = login.ssh("sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout.split()
        if len(seen) == 2 * len(nodes) and all(s == "idle" for s in seen[1::2]):
            return
        time.sleep(0.5)
    raise RuntimeError(f"local Slurm cluster: nodes not idle after 60 s (see {state})")


def slurm_inventory(fleet: Fleet, login: Host) -> dict:
    """Group cpu with one host, the login node, that submits to the fleet's cluster;
    the run root on the shared filesystem (this machine's /tmp, seen by every host)."""
    host_vars = {
        LOGIN: {
            "fleetperf_executor": "slurm",
            "fleetperf_repo_dir": str(REPO_ROOT),
            "fleetperf_python": sys.executable,
            "fleetperf_data_root": (
                "{{ fleetperf_controller_data_root | default('" + str(REPO_ROOT / "data") + "') }}"
            ),
            "fleetperf_run_root": str(fleet.workdir / "runs"),
            "fleetperf_slurm_partition": "debug",
            "fleetperf_slurm_time_limit": "00:30:00",
        }
    }
    return fleet.inventory({"cpu": [login]}, host_vars)


def up(count: int, workdir: Path, slurm: bool = False) -> Path:
    """Bring up ``count`` hosts (node1..nodeN) in ``workdir``; returns the inventory path.
    With ``slurm``, a login host too, and a Slurm cluster of them all."""
    if (workdir / STATE).exists():
        raise RuntimeError(f"a fleet is up in {workdir} (fleetperf fleet down --dir {workdir})")
    fleet = Fleet(workdir, prefix="fl")
    try:
        fleet.start()
        login = fleet.add_host(LOGIN) if slurm else None
        nodes = [fleet.add_host(f"node{i}") for i in range(1, count + 1)]
        if login:
            start_slurm(fleet, login, nodes)
    except BaseException:
        fleet.close()
        raise
    inventory = fleet.workdir / INVENTORY
    found = slurm_inventory(fleet, login) if login else fleet_inventory(fleet)
    inventory.write_text(yaml.safe_dump(found, sort_keys=False))
    return inventory


def down(workdir: Path) -> int:
    """Tear down the fleet in ``workdir``; returns how many hosts it had."""
    if not (workdir / STATE).exists():
        raise RuntimeError(f"no fleet is up in {workdir}")
    fleet = Fleet.load(workdir)
    count = len(fleet.hosts)
    fleet.close()
    for name in (INVENTORY, "client_key", "client_key.pub", "known_hosts"):
        (workdir / name).unlink(missing_ok=True)
    shutil.rmtree(workdir / "hosts", ignore_errors=True)
    shutil.rmtree(workdir / "slurm", ignore_errors=True)
    shutil.rmtree(workdir / "runs", ignore_errors=True)
    return count


def main(action: str, workdir: Path, count: int = 0, slurm: bool = False) -> int:
    """``fleetperf fleet up N [--slurm] [--dir DIR]`` and ``fleetperf fleet down [--dir DIR]``
    (their arguments: tui/cli.py)."""
    reason = available()
    if reason:
        print(f"fleetperf fleet: error: {reason}", file=sys.stderr)
        return 2
    try:
        if action == "up":
            if not 1 <= count <= 253:
                print("fleetperf fleet: error: N: 1 to 253 hosts", file=sys.stderr)
                return 2
            if slurm and (reason := slurm_available()):
                print(f"fleetperf fleet: error: {reason}", file=sys.stderr)
                return 2
            print(up(count, workdir, slurm))
        else:
            print(f"fleetperf fleet: {down(workdir)} host(s) down in {workdir}")
    except RuntimeError as exc:
        print(f"fleetperf fleet: error: {exc}", file=sys.stderr)
        return 2
    return 0


def degrade_main(
    action: str, workdir: Path, name: str, cpu: str | None = None, link_rate: str | None = None
) -> int:
    """Test tools: ``fleetperf fleet degrade HOST [--cpu FRACTION] [--link-rate RATE]`` and
    ``fleetperf fleet restore HOST`` (their arguments: tui/cli.py)."""
    try:
        if action == "degrade" and cpu is None and link_rate is None:
            raise degrade.DegradeError(f"degrade {name}: give --cpu FRACTION, --link-rate RATE")
        fraction = None if cpu is None else degrade.parse_fraction(cpu)
        bits = None if link_rate is None else degrade.parse_rate(link_rate)
        host = _host(workdir, name)
        if action == "restore":
            degrade.restore(host)
            print(f"fleetperf fleet: {name}: restored (no CPU quota, no link rate)")
            return 0
        if fraction is not None:
            group, quota, cpus = degrade.limit_cpu(host, fraction)
            print(
                f"fleetperf fleet: {name}: CPU quota {fraction:g} of {cpus} CPU(s)"
                f" ({quota}/{degrade.PERIOD_US} us, cgroup {group})"
            )
        if bits is not None:
            degrade.limit_link(host, bits)
            print(f"fleetperf fleet: {name}: link rate {bits} bit/s both ways (tc tbf)")
    except (degrade.DegradeError, RuntimeError, OSError) as exc:  # OSError: a cgroup file
        print(f"fleetperf fleet: error: {exc}", file=sys.stderr)
        return 2
    return 0


def _host(workdir: Path, name: str) -> Host:
    """The host ``name`` of the fleet up in ``workdir``; DegradeError naming the others."""
    reason = available()
    if reason:
        raise degrade.DegradeError(reason)
    if not (workdir / STATE).exists():
        raise degrade.DegradeError(f"no fleet is up in {workdir}")
    fleet = Fleet.load(workdir)
    if name not in fleet.hosts:
        raise degrade.DegradeError(
            f"no host {name!r} in the fleet in {workdir} (its hosts: {', '.join(fleet.hosts)})"
        )
    return fleet.hosts[name]
