"""Test hosts reached over SSH: the local fleet of ``tui/localfleet/fleet.py``, for tests.

Each host has its own network namespace, address and sshd, and its own overlays over
/etc, /usr, /var and the other directories software writes: what a test does on a host
(provisioning makes users, writes /etc files) stays on that host. /tmp, the repository
and the venv are shared, so give each host its own paths under ``host.root`` in its
inventory variables. ``host.bin_dir`` comes first on PATH in the host's SSH sessions:
put stand-in hardware commands there with ``host.add_command``.

    with TestNetwork(tmp_path) as net:
        a = net.add_host("gpu1")
        a.add_command("nvidia-smi", "#!/bin/sh\\necho ...\\n")
        inventory = net.inventory({"nvidia": [a]}, {"gpu1": {"fleetperf_data_root": ...}})
"""

from __future__ import annotations

from tui.localfleet.fleet import Fleet, Host, available

__all__ = ["TestHost", "TestNetwork", "available"]

TestHost = Host


class TestNetwork(Fleet):
    """A ``Fleet`` under the name the tests know it by."""

    __test__ = False  # not a pytest test class
