"""The result's ``environment`` object: what the numbers were measured on."""

from __future__ import annotations

import platform
import socket
from importlib import metadata
from typing import TYPE_CHECKING, Any

from harness.device import cpu_model

if TYPE_CHECKING:
    from harness.device import Device

PACKAGES = ("torch", "transformers", "peft", "deepspeed")


def os_name() -> str:
    """PRETTY_NAME from /etc/os-release, else platform's description."""
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.platform()


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    """Installed versions of ``names`` (read from package metadata: nothing is imported)."""
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def environment(device: Device) -> dict[str, Any]:
    """hostname, cpu, accelerator (the device's name as the hardware reports it: the CPU
    model on cpu runs), driver, os, kernel, python and the installed ML packages' versions."""
    return {
        "hostname": socket.gethostname(),
        "cpu": cpu_model(),
        "accelerator": device.name,
        "driver": device.driver,
        "vendor": device.vendor,
        "os": os_name(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "packages": package_versions(),
    }
