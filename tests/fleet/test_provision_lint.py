"""Static checks of the Ansible code: ansible-lint over the repository (production profile),
--syntax-check of every playbook with every example inventory, the vendor variables
the inventories resolve to, and the benchmark Dockerfiles."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO

from tui.catalog import images

BIN = Path(sys.executable).parent
EXAMPLES = sorted((REPO / "inventory" / "examples").glob("*.yml"))
VENDORS = ("nvidia", "iluvatar", "kunlunxin", "cpu")
PCI_IDS = {"nvidia": "10de", "iluvatar": "1e3e", "kunlunxin": "1d22"}


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PATH"] = f"{BIN}:{e.get('PATH', '')}"
    e["ANSIBLE_NOCOLOR"] = "1"
    e.pop("ANSIBLE_CONFIG", None)  # the repository's ansible.cfg
    return e


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=REPO, env=env(), capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # the whole repository through ansible-lint: over a minute
def test_ansible_lint_production_profile():
    """The whole repository, as `ansible-lint` at its root sees it (.ansible-lint): the run,
    stop and Slurm plays as well as provisioning (issue 28 point 6)."""
    done = run(str(BIN / "ansible-lint"), "--profile", "production", "--nocolor")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-8000:]
    assert "Profile 'production' was required, and it passed" in output
    assert re.search(r"in (\d+) files processed", output)[1] != "0"


@pytest.mark.parametrize("playbook", ["provision.yml", "playbooks/provision.yml"])
@pytest.mark.parametrize(
    "inventory",
    # fleet.yml has every vendor group: the fast run checks the plays against it alone
    [
        pytest.param(p, id=p.stem, marks=[] if p.stem == "fleet" else [pytest.mark.slow])
        for p in EXAMPLES
    ],
)
def test_syntax_check(playbook, inventory):
    done = run(str(BIN / "ansible-playbook"), "-i", str(inventory), playbook, "--syntax-check")
    assert done.returncode == 0, done.stdout + done.stderr


def inventory_vars(inventory: Path) -> dict[str, dict]:
    """Every host's variables as the playbooks see them (inventory + playbooks/group_vars)."""
    done = run(
        str(BIN / "ansible-inventory"),
        "-i",
        str(inventory),
        "--playbook-dir",
        "playbooks",
        "--list",
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["_meta"]["hostvars"]


@pytest.mark.slow  # ansible-inventory on every example (test_vendor_settings: fleet.yml)
def test_example_inventories_resolve_vendor_settings():
    seen = set()
    for inventory in EXAMPLES:
        for host, hv in inventory_vars(inventory).items():
            vendor = hv["fleetperf_vendor"]
            seen.add(vendor)
            assert vendor in VENDORS, host
            # The image tag is no setting: the role tags it with the hash the engine expects.
            assert "fleetperf_image" not in hv, host
            assert isinstance(hv["fleetperf_container_devices"], list), host
            assert "fleetperf_visible_devices_var" in hv and hv["fleetperf_base_image"], host
            assert hv["fleetperf_data_root"] and hv["fleetperf_run_root"], host
            assert hv["fleetperf_nccl_env"]["NCCL_IB_HCA"], host
    assert seen == set(VENDORS)


def test_vendor_settings():
    fleet = inventory_vars(REPO / "inventory" / "examples" / "fleet.yml")
    nv = fleet["a100-node01"]
    assert nv["fleetperf_drivers_nvidia_branch"] == "550"
    assert nv["fleetperf_docker_runtime"] == "nvidia"
    assert nv["fleetperf_visible_devices_var"] == "CUDA_VISIBLE_DEVICES"
    assert nv["fleetperf_chip"] == "A100"
    assert fleet["h100-node01"]["fleetperf_chip"] == "H100"  # host vars beat group_vars
    klx = fleet["r300-node01"]
    assert klx["fleetperf_visible_devices_var"] == "XPU_VISIBLE_DEVICES"
    assert klx["fleetperf_drivers_kunlunxin_installer_checksum"].startswith("sha256:")
    ilu = fleet["biv100-node01"]
    assert "/dev/iluvatar*" in ilu["fleetperf_container_devices"]  # never privileged
    assert ilu["fleetperf_docker_runtime"] == ""
    cpu = fleet["cpu-node01"]
    assert cpu["fleetperf_executor"] == "process"  # group_vars/all.yml: the default kind


def test_facts_role_knows_the_pci_vendor_ids():
    defaults = yaml.safe_load(
        (REPO / "playbooks" / "roles" / "fleetperf_facts" / "defaults" / "main.yml").read_text()
    )
    assert defaults["fleetperf_facts_pci_vendor_ids"] == PCI_IDS


@pytest.mark.parametrize("vendor", VENDORS)
def test_dockerfile(vendor):
    context = REPO / "images" / vendor
    dockerfile = (context / "Dockerfile").read_text()
    assert re.search(r"^ARG BASE_IMAGE=\S+$", dockerfile, re.M)
    assert re.search(r"^FROM \$\{BASE_IMAGE\}$", dockerfile, re.M)
    built_from = images.context_files(vendor)  # images/<vendor> + the harness
    for src in re.findall(r"^COPY (\S+) ", dockerfile, re.M):
        assert any(n == src or n.startswith(src) for n in built_from), f"images/{vendor}: {src}"
    if vendor in ("cpu", "nvidia"):
        assert "ARG TORCH_VERSION=2.13.0" in dockerfile
    else:  # the vendor's own torch build, from the base image
        assert "pip install torch" not in dockerfile.replace('"', "")
