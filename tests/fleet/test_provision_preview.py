"""The provisioning preview as README offers it (issue 29 point 7): ``fleetperf provision
--check`` against a host as ``fleetperf fleet up 1`` makes it.

- The play targets only the vendor groups the inventory has: no "Could not match supplied
  host pattern" warning for an inventory of cpu hosts (ansible-playbook --list-hosts, no
  SSH).
- ``fleetperf provision`` refuses a missing inventory, one without vendor groups and an
  unknown --limit host in one line, exit 2, before ansible starts.
- Slow: the check run on a real SSH test host says per role what would change, writes
  nothing on the controller (no build/images/<host> in the checkout, no build context
  left in TMPDIR) and nothing on the host.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import testhosts
import yaml
from conftest import REPO

from tui.catalog import images
from tui.engine.provision import what_changed
from tui.localfleet.inventory import fleet_inventory

BIN = Path(sys.executable).parent


def env(**extra: str) -> dict[str, str]:
    e = dict(os.environ)
    e["PATH"] = f"{BIN}:{e.get('PATH', '')}"
    e["ANSIBLE_NOCOLOR"] = "1"
    e.pop("ANSIBLE_CONFIG", None)  # the repository's ansible.cfg
    return {**e, **extra}


def fleetperf(*argv: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "fleetperf"), *argv],
        cwd=REPO,
        env=env(**extra_env),
        capture_output=True,
        text=True,
        timeout=1200,
    )


def write_inventory(path: Path, groups: dict[str, list[str]]) -> Path:
    children = {
        g: {"hosts": {h: {"ansible_connection": "local"} for h in hosts}}
        for g, hosts in groups.items()
    }
    path.write_text(yaml.safe_dump({"all": {"children": children}}))
    return path


def list_hosts(inventory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(inventory), "provision.yml", "--list-hosts"],
        cwd=REPO,
        env=env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_no_pattern_warning_for_absent_vendor_groups(tmp_path):
    done = list_hosts(write_inventory(tmp_path / "hosts.yml", {"cpu": ["box1"]}))
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "Could not match supplied host pattern" not in output
    assert re.search(r"hosts \(1\):\s+box1", output), output


def test_every_vendor_group_is_still_played(tmp_path):
    groups = {"nvidia": ["g1"], "kunlunxin": ["k1"], "cpu": ["c1"], "login": ["l1"]}
    done = list_hosts(write_inventory(tmp_path / "hosts.yml", groups))
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "Could not match" not in output, output
    listed = set(re.search(r"hosts \(\d+\):\n((?:\s+\S+\n?)+)", output)[1].split())
    assert listed == {"g1", "k1", "c1"}  # not the login host: no vendor group


def test_refusals_name_what_is_wrong(tmp_path):
    missing = fleetperf("provision", "-i", str(tmp_path / "none.yml"), "--check")
    assert missing.returncode == 2 and missing.stdout == ""
    assert (
        missing.stderr
        == f"fleetperf provision: error: inventory {tmp_path}/none.yml: no such file\n"
    )

    login_only = write_inventory(tmp_path / "login.yml", {"login": ["l1"]})
    none = fleetperf("provision", "-i", str(login_only), "--check")
    assert none.returncode == 2 and none.stdout == ""
    assert "no host in a vendor group (nvidia, iluvatar, kunlunxin, cpu)" in none.stderr

    cpu = write_inventory(tmp_path / "cpu.yml", {"cpu": ["c1", "c2"]})
    typo = fleetperf("provision", "-i", str(cpu), "--check", "--limit", "c1,c3")
    assert typo.returncode == 2 and typo.stdout == ""
    assert typo.stderr.splitlines() == [
        f"fleetperf provision: error: --limit 'c1,c3': c3 is not a host of a vendor group"
        f" (hosts of {cpu}: c1, c2)"
    ]


def test_an_unreachable_host_is_named_and_fails_the_run(tmp_path):
    """A real ansible-runner run; nothing listens on port 1, so SSH is refused at once."""
    inventory = tmp_path / "hosts.yml"
    host = {"ansible_host": "127.0.0.1", "ansible_port": 1, "ansible_user": "nobody"}
    inventory.write_text(yaml.safe_dump({"all": {"children": {"cpu": {"hosts": {"h1": host}}}}}))
    done = fleetperf("provision", "-i", str(inventory), "--check")
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(r"^h1: unreachable: .*port 1: Connection refused$", done.stdout, re.M), (
        done.stdout
    )
    assert done.stderr == "fleetperf provision: failed on h1\n"


def test_what_changed_in_words():
    """The result shapes the roles give (file, copy, a loop, a Report task, apt)."""
    made = {"before": {"path": "/srv/d", "state": "absent"}, "after": {"path": "/srv/d"}}
    made["after"]["state"] = "directory"
    loop = {"results": [{"changed": True, "diff": made}, {"changed": False, "path": "/srv/e"}]}
    assert what_changed("h1", loop) == "/srv/d (new directory)"
    mode = {
        "before": {"path": "/srv/d", "mode": "0700"},
        "after": {"path": "/srv/d", "mode": "0755"},
    }
    assert what_changed("h1", {"diff": mode}) == "/srv/d (mode 0700 -> 0755)"
    copy = [{"before": "", "after_header": "/etc/x.json", "after": "{}\n"}]
    assert what_changed("h1", {"diff": copy}) == "/etc/x.json (new file)"
    edit = [{"before": "{}", "before_header": "/etc/x.json", "after_header": "/etc/x.json"}]
    assert what_changed("h1", {"diff": edit}) == "/etc/x.json"
    assert what_changed("h1", {"msg": "h1: docker build -t t:1 /d"}) == "docker build -t t:1 /d"
    apt = {"invocation": {"module_args": {"name": ["docker.io", "jq"]}}}
    assert what_changed("h1", apt) == "docker.io, jq"
    assert what_changed("h1", {"changed": True}) == ""


@pytest.mark.slow  # a real check run over SSH: minutes on 2 cores
@pytest.mark.skipif(testhosts.available() is not None, reason=str(testhosts.available()))
def test_check_preview_on_a_fleet_up_host(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    with testhosts.TestNetwork(tmp_path / "net") as net:
        host = net.add_host("preview1")
        inventory = fleet_inventory(net)  # as fleetperf fleet up 1 writes it
        hv = inventory["all"]["children"]["cpu"]["hosts"]["preview1"]
        hv["fleetperf_data_root"] = str(host.root / "data")  # not the repository's data/
        hv["fleetperf_common_apt_cache_valid_time"] = 10 * 365 * 86400  # no route out
        path = tmp_path / "inventory.yml"
        path.write_text(yaml.safe_dump(inventory))
        before = images.expected_image("cpu")
        done = fleetperf("provision", "-i", str(path), "--check", TMPDIR=str(tmpdir))
        made_on_host = [
            p for p in ("/etc/passwd", "/etc/docker", "/etc/ansible") if host.changed(p).exists()
        ]
    out = done.stdout
    assert done.returncode == 0, out + done.stderr[-4000:]
    assert "Could not match" not in out + done.stderr
    head = re.search(r"^preview1: (\d+) change\(s\) to make, in (\d+) role\(s\)$", out, re.M)
    assert head, out
    roles = re.findall(r"^  (fleetperf_\w+): (\d+) change\(s\)$", out, re.M)
    changes = re.findall(r"^    (.+)$", out, re.M)
    assert int(head[1]) == len(changes) == sum(int(n) for _, n in roles), out
    assert int(head[2]) == len(roles)
    assert {r for r, _ in roles} >= {"fleetperf_common", "fleetperf_docker", "fleetperf_images"}
    assert "Create the service user: fleetperf" in changes
    assert "Write daemon.json: /etc/docker/daemon.json (new file)" in changes
    runs = host.root / "runs"
    assert any(
        c.startswith("Create the data and run directories: ") and f"{runs} (new directory)" in c
        for c in changes
    ), out
    # The tag run.yml insists on (the harness may change meanwhile in a shared checkout).
    context = "/var/lib/fleetperf/images/cpu"
    builds = {
        f"Report the image build: docker build -t {tag} {context} (image missing)"
        for tag in (before, images.expected_image("cpu"))
    }
    assert builds & set(changes), out
    # Nothing written on the controller: no context in the checkout, none left in TMPDIR.
    assert not (REPO / "build" / "images" / "preview1").exists()
    assert list(tmpdir.glob("fleetperf-images-*")) == []
    # Nor on the host (its overlay holds what a run writes under /etc).
    assert made_on_host == [] and not runs.exists()
