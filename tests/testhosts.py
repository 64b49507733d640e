"""Test hosts reached over SSH: network namespaces on one bridge, each with its own sshd.

A ``TestNetwork`` makes a bridge in this machine's namespace and, per host, a network
namespace joined to the bridge by a veth pair, with an sshd listening on the host's
address. Hosts reach each other (multi-node runs) and the controller reaches them with
``ssh root@ADDRESS`` using a key made for the network; host keys are pinned in a
known_hosts file, so host key checking stays on.

Namespaces share this machine's filesystem: give each host its own paths (``host.root``)
in its inventory variables. ``host.bin_dir`` comes first on PATH in the host's SSH
sessions: put stand-in hardware commands there with ``host.add_command``.

Needs root, ``ip`` (iproute2) and ``sshd`` (openssh-server); ``available()`` says why not.

    with TestNetwork(tmp_path) as net:
        a = net.add_host("gpu1")
        a.add_command("nvidia-smi", "#!/bin/sh\\necho ...\\n")
        inventory = net.inventory({"nvidia": [a]}, {"gpu1": {"fleetperf_data_root": ...}})
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

SSHD = "/usr/sbin/sshd"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def available() -> str | None:
    """None when test hosts can be made here, else the reason they cannot."""
    if os.geteuid() != 0:
        return "test hosts need root (ip netns)"
    for tool in ("ip", SSHD, "ssh", "ssh-keygen"):
        if not shutil.which(tool):
            return f"test hosts need {tool} (scripts/bootstrap installs it)"
    return None


def _run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 in 10.231.0.0/16 that no interface on this machine uses."""
    used = _run("ip", "-4", "-o", "addr", "show")
    for third in range(1, 255):
        net = ipaddress.IPv4Network(f"10.231.{third}.0/24")
        if f" 10.231.{third}." not in used:
            return net
    raise RuntimeError("no free /24 in 10.231.0.0/16 for test hosts")


@dataclass
class TestHost:
    """One SSH host: a network namespace with an address on the bridge and an sshd."""

    __test__ = False  # not a pytest test class

    name: str
    netns: str
    address: str
    root: Path  # this host's scratch directory: give it its own paths under here
    network: TestNetwork = field(repr=False)

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

    def ssh(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a command on the host over SSH (argv, quoted for the remote shell)."""
        remote = " ".join(shlex.quote(a) for a in argv)
        return subprocess.run(
            ["ssh", *self.network.ssh_options(), f"root@{self.address}", remote],
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
            "ansible_ssh_private_key_file": str(self.network.client_key),
            "ansible_ssh_common_args": " ".join(self.network.ssh_options(with_key=False)),
            "ansible_python_interpreter": "/usr/bin/python3",
            "ansible_control_path_dir": str(self.network.control_path_dir),
        }


class TestNetwork:
    """A bridge with SSH test hosts on it; a context manager that removes everything."""

    __test__ = False  # not a pytest test class

    def __init__(self, workdir: Path, prefix: str = "fp") -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.tag = f"{prefix}{os.getpid() % 100000}"
        self.bridge = f"{self.tag}br"  # interface names: 15 characters at most
        self.hosts: dict[str, TestHost] = {}
        self._sshd_pids: list[int] = []
        self._netns: list[str] = []
        self._veths: list[str] = []
        self._up = False
        self.subnet: ipaddress.IPv4Network | None = None
        self.client_key = self.workdir / "client_key"
        # Ansible's SSH connection sharing, per network: addresses repeat across runs,
        # and a master connection left from an earlier run must never be reused.
        self.control_path_dir = self.workdir / "cp"
        self.known_hosts = self.workdir / "known_hosts"

    # -- lifecycle -------------------------------------------------------------
    def __enter__(self) -> TestNetwork:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        reason = available()
        if reason:
            raise RuntimeError(reason)
        self.subnet = _free_subnet()
        gateway = f"{self.subnet[1]}/{self.subnet.prefixlen}"
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        self._up = True
        _run("ip", "addr", "add", gateway, "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.client_key))
        self.known_hosts.write_text("")
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory

    def close(self) -> None:
        """Stop every process in the hosts' namespaces (sshd and the sessions it forked,
        which outlive it), then remove the namespaces, veths and the bridge."""
        for pid in self._sshd_pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        self._sshd_pids.clear()
        for ns in self._netns:
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
            for pid in pids.stdout.split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self._netns.clear()
        for veth in self._veths:  # gone with its namespace, unless something still holds it
            subprocess.run(["ip", "link", "del", veth], capture_output=True)
        self._veths.clear()
        if self._up:
            subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
            self._up = False

    # -- hosts -----------------------------------------------------------------
    def add_host(self, name: str) -> TestHost:
        """Make a host: namespace, veth on the bridge, address, sshd; wait for SSH."""
        assert self.subnet is not None, "start() the network first"
        index = len(self.hosts) + 2  # .1 is the bridge
        address = str(self.subnet[index])
        netns = f"{self.tag}-{name}"
        root = self.workdir / "hosts" / name
        (root / "bin").mkdir(parents=True, exist_ok=True)
        host = TestHost(name, netns, address, root, self)

        veth = f"{self.tag}v{index}"
        _run("ip", "netns", "add", netns)
        self._netns.append(netns)
        _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns)
        self._veths.append(veth)
        _run("ip", "link", "set", veth, "master", self.bridge, "up")
        _run("ip", "-n", netns, "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", "eth0")
        _run("ip", "-n", netns, "link", "set", "eth0", "up")
        _run("ip", "-n", netns, "link", "set", "lo", "up")

        host_key = root / "ssh_host_ed25519_key"
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key))
        authorized = root / "authorized_keys"
        authorized.write_text(Path(f"{self.client_key}.pub").read_text())
        config = root / "sshd_config"
        config.write_text(
            f"ListenAddress {address}\n"
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
        _run("ip", "netns", "exec", netns, SSHD, "-f", str(config), "-E", str(root / "sshd.log"))
        pid_file = root / "sshd.pid"
        for _ in range(100):
            if pid_file.exists() and pid_file.read_text().strip():
                break
            time.sleep(0.05)
        self._sshd_pids.append(int(pid_file.read_text()))
        public = Path(f"{host_key}.pub").read_text().split()
        with self.known_hosts.open("a") as f:
            f.write(f"{address} {public[0]} {public[1]}\n")
        self.hosts[name] = host
        for _ in range(50):
            if host.ssh("true", check=False).returncode == 0:
                return host
            time.sleep(0.1)
        raise RuntimeError(f"test host {name}: no SSH at {address} (see {root / 'sshd.log'})")

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
        groups: dict[str, list[TestHost]],
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
