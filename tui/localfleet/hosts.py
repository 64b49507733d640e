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
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

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
    def veth(self) -> str:
        return self.fleet.veth(self)

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
