"""A real docker engine for tests: its own data root, exec root and socket under a temp dir.

No registry is reachable, so base images come from `docker import` of a local root
filesystem (see scripts/make-base-image). The engine runs with --bridge=none and
--iptables=false: it touches neither this machine's network nor its firewall; containers
get a loopback-only network, or the host's with network_mode="host".
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from conftest import REPO


def missing() -> str | None:
    """Why no engine can be started here, or None."""
    for tool in ("dockerd", "docker"):
        if not shutil.which(tool):
            return f"{tool} missing (Debian docker.io; scripts/bootstrap installs it)"
    if os.geteuid() != 0:
        return "dockerd needs root"
    return None


def own_etc_docker(argv: list[str]) -> list[str]:
    """Run ``argv`` in a private mount namespace with a tmpfs over /etc/docker: dockerd
    writes /etc/docker/key.json on start, and a test must leave the machine's /etc alone.
    (unshare and sh exec in turn, so the process started is dockerd itself.)"""
    script = 'mount -t tmpfs fleetperf-test /etc/docker && exec "$@"'
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *argv]


class Dockerd:
    """A real docker engine with its own data root, exec root and socket."""

    def __init__(self, root: Path, wrap: Callable[[list[str]], list[str]] | None = None) -> None:
        """``wrap`` puts the engine elsewhere, e.g. a test host's namespaces
        (``host.exec_argv``): its containers on the host network get that host's network.
        By default it runs beside this machine's network with its own /etc/docker."""
        self.root = root
        self.socket = root / "docker.sock"
        self.wrap = wrap or own_etc_docker
        self.proc: subprocess.Popen | None = None

    @property
    def host(self) -> str:
        return f"unix://{self.socket}"

    def start(self, config_file: Path | None = None) -> None:
        argv = [
            "dockerd",
            "--data-root",
            str(self.root / "data"),
            "--exec-root",
            str(self.root / "exec"),
            "--host",
            self.host,
            "--pidfile",
            str(self.root / "docker.pid"),
            "--bridge=none",
            "--iptables=false",
            "--ip-masq=false",
        ]
        if config_file:
            argv += ["--config-file", str(config_file)]
        self.root.mkdir(parents=True, exist_ok=True)
        self.log = (self.root / "dockerd.log").open("a")
        self.proc = subprocess.Popen(self.wrap(argv), stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(150):
            if self.docker("version", check=False).returncode == 0:
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(
            f"dockerd did not start: {(self.root / 'dockerd.log').read_text()[-2000:]}"
        )

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def remove_containers(self) -> list[str]:
        """Remove every container of the engine (a failed test's); returns their ids."""
        left = self.docker("ps", "-aq", check=False).stdout.split()
        if left:
            self.docker("rm", "-f", *left, check=False)
        return left

    def remove_data(self) -> None:
        """Delete the data root (images, layers) once the engine has stopped, with the
        mounts the engine left under its roots (its netns, the data root's bind mount)."""
        assert self.proc is None, "stop the engine first"
        for mount in sorted(self.mounts(), key=len, reverse=True):  # innermost first
            subprocess.run(["umount", "--lazy", mount], check=True, timeout=30)
        if (self.root / "data").exists():  # absent if it never started
            shutil.rmtree(self.root / "data")
        shutil.rmtree(self.root / "exec", ignore_errors=True)

    def mounts(self) -> list[str]:
        """Mount points under the engine's root, from /proc/self/mountinfo."""
        root = str(self.root.resolve()) + "/"
        with open("/proc/self/mountinfo") as f:
            points = [line.split()[4] for line in f]
        return [p for p in points if p.startswith(root)]

    def docker(
        self, *args: str, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["docker", *args],
            env={**os.environ, "DOCKER_HOST": self.host},
            capture_output=True,
            text=True,
            check=check,
            timeout=timeout,
        )

    def import_base(self, tag: str) -> None:
        """The base image of scripts/make-base-image (a local root filesystem), as ``tag``."""
        made = subprocess.run(
            [sys.executable, str(REPO / "scripts" / "make-base-image"), "--tag", tag],
            env={**os.environ, "DOCKER_HOST": self.host},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert made.returncode == 0, made.stderr
