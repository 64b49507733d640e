"""provision.yml against SSH test hosts (network namespaces with their own sshd).

- The cpu path runs for real on one host: packages, service user, directories, daemon.json,
  local facts, an image built by a real dockerd (started by the test), data verified by
  checksum; a second run reports changed=0.
- The nvidia, iluvatar and kunlunxin paths run in check mode (--check --diff) against
  hosts whose lspci, nvidia-smi, ixsmi, xpu-smi, ibstat and ibv_devinfo are stand-ins on
  PATH; the tests read ansible-runner's events to see which tasks would change what.
- A host without the accelerator its group claims fails the facts check, named.

Each host has its own overlays over /etc, /usr, /var and the other directories a role
writes (tui/localfleet/hosts.py): the roles write their default paths (the service user,
/etc/docker/daemon.json, /etc/ansible/facts.d), the tests read them from the host's
overlay, and this machine stays as it was (tests/machine_guard.py checks). The data and
run roots lie under each host's directory, which hosts share with this machine.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import testhosts
import yaml
from conftest import REPO
from dockerd import Dockerd, missing

from tui.catalog import images
from tui.localfleet.inventory import fleet_inventory

BIN = Path(sys.executable).parent  # ansible-playbook of this environment
SERVICE_USER = "fleetperf"

pytestmark = [
    pytest.mark.slow,  # real provisioning runs: minutes on 2 cores
    pytest.mark.xdist_group("provision"),  # with --dist loadgroup: one worker, one network
    pytest.mark.skipif(testhosts.available() is not None, reason=str(testhosts.available())),
]


# --- stand-in hardware commands ------------------------------------------------------

BASE_PCI = [  # what every host has: a host bridge and a virtio NIC
    ("00:00.0", "0600", "8086", "1237"),
    ("00:03.0", "0200", "1af4", "1000"),
]


def lspci(*devices: tuple[str, str, str, str]) -> str:
    """A stand-in ``lspci -n -mm`` listing the base devices and ``devices``."""
    lines = [
        f'{slot} "{cls}" "{vendor}" "{device}" -ra1 "{vendor}" "0000"'
        for slot, cls, vendor, device in [*BASE_PCI, *devices]
    ]
    return "#!/bin/sh\ncat <<'EOF'\n" + "\n".join(lines) + "\nEOF\n"


def gpus(vendor: str, cls: str, device: str, n: int) -> list[tuple[str, str, str, str]]:
    return [(f"{0x10 + i:02x}:00.0", cls, vendor, device) for i in range(n)]


MELLANOX_HCA = ("c1:00.0", "0207", "15b3", "101b")  # ConnectX-6, InfiniBand


def nvidia_smi(version: str, n: int, persistence: str = "Enabled") -> str:
    return f"""#!/bin/sh
# stand-in nvidia-smi: {n} GPUs, driver {version}
n={n}
case "$*" in
  *--query-gpu=driver_version*) i=0; while [ $i -lt $n ]; do echo "{version}"; i=$((i+1)); done ;;
  *--query-gpu=index,driver_version,persistence_mode*)
    i=0; while [ $i -lt $n ]; do echo "$i, {version}, {persistence}"; i=$((i+1)); done ;;
  *-L*)
    i=0
    while [ $i -lt $n ]; do echo "GPU $i: NVIDIA A100-SXM4-80GB (UUID: GPU-$i)"; i=$((i+1)); done ;;
  *) echo "| NVIDIA-SMI {version}    Driver Version: {version}    CUDA Version: 12.4 |" ;;
esac
"""


def smi_banner(tool: str, version: str) -> str:
    return f"#!/bin/sh\n# stand-in {tool}\necho '| {tool.upper()}  Driver Version: {version} |'\n"


IBSTAT = """#!/bin/sh
# stand-in ibstat: one ConnectX-6 HCA, port Active
if [ "$1" = "-l" ]; then echo mlx5_0; exit 0; fi
cat <<'EOF'
CA 'mlx5_0'
	CA type: MT4123
	Number of ports: 1
	Firmware version: 20.39.1002
	Port 1:
		State: Active
		Physical state: LinkUp
		Rate: 200
		Link layer: InfiniBand
EOF
"""

IBV_DEVINFO = """#!/bin/sh
# stand-in ibv_devinfo
cat <<'EOF'
hca_id:	mlx5_0
	transport:			InfiniBand (0)
	fw_ver:				20.39.1002
	phys_port_cnt:			1
		port:	1
			state:			PORT_ACTIVE (4)
			link_layer:		InfiniBand
EOF
"""


# --- running provision.yml -------------------------------------------------------------


def ansible_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env.pop("ANSIBLE_CONFIG", None)  # the repository's ansible.cfg
    return env


def write_inventory(path: Path, inventory: dict) -> Path:
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return path


def ansible_playbook(inventory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``ansible-playbook -i INVENTORY provision.yml ARGS`` from the repository root."""
    return subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(inventory), "provision.yml", *args],
        cwd=REPO,
        env=ansible_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )


def recap(output: str) -> dict[str, dict[str, int]]:
    """PLAY RECAP counters per host."""
    hosts = {}
    for m in re.finditer(r"^(\S+)\s+:\s+((?:\w+=\d+\s*)+)$", output, re.MULTILINE):
        hosts[m.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
    return hosts


def host_paths(host: testhosts.TestHost) -> dict[str, object]:
    """The data and run roots under the host's own directory; the rest at its defaults."""
    return {
        "fleetperf_data_root": str(host.root / "data"),
        "fleetperf_run_root": str(host.root / "runs"),
        "fleetperf_manage_services": False,  # no init system here; see docs/provisioning.md
        # Test hosts have no route out: apt works from this machine's package lists.
        "fleetperf_common_apt_cache_valid_time": 10 * 365 * 86400,
    }


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    with testhosts.TestNetwork(tmp_path_factory.mktemp("provision-net")) as network:
        yield network


# --- the cpu path, for real -------------------------------------------------------------


@pytest.fixture(scope="module")
def cpu_host(net):
    return net.add_host("cpu1")


@pytest.fixture(scope="module")
def dockerd(cpu_host, tmp_path_factory):
    """A real engine in the cpu host's namespaces: it reads the host's
    /etc/docker/daemon.json and writes its /etc/docker/key.json there."""
    if missing():
        pytest.skip(missing())
    root = tmp_path_factory.mktemp("dockerd")
    engine = Dockerd(root, wrap=cpu_host.exec_argv)
    engine.start()
    # No registry is reachable: a base image from a local root filesystem.
    rootfs = root / "rootfs.tar"
    with tarfile.open(rootfs, "w") as tar:
        data = b"fleetperf test base\n"
        info = tarfile.TarInfo("etc/fleetperf-base")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    engine.docker("import", str(rootfs), "fleetperf-test/base:1")
    yield engine
    engine.stop()


def make_dataset(directory: Path) -> tuple[Path, str]:
    """A small GLUE-layout archive, as a mirror would serve it, and its sha256."""
    archive = directory / "SST-2.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, text in {
            "SST-2/train.tsv": "sentence\tlabel\na fine film\t1\na dull film\t0\n",
            "SST-2/dev.tsv": "sentence\tlabel\nquite good\t1\n",
        }.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    return archive, hashlib.sha256(archive.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def cpu_run(net, cpu_host, dockerd, tmp_path_factory):
    """Two real runs of provision.yml against the cpu host; the second after dockerd has
    been restarted on the daemon.json that the first run wrote."""
    work = tmp_path_factory.mktemp("cpu-path")
    host = cpu_host
    archive, digest = make_dataset(work)
    checkpoint = work / "config.json"
    checkpoint.write_text('{"model_type": "distilbert", "dim": 32}\n')
    host_vars = {
        **host_paths(host),
        "fleetperf_images_docker_host": dockerd.host,
        "fleetperf_images_src_dir": str(REPO / "tests" / "provision" / "image-context"),
        "fleetperf_base_image": "fleetperf-test/base:1",
        "fleetperf_image": "fleetperf/cpu:provision-test",
        "fleetperf_data_items": [
            {
                "dest": "distilbert-pytorch/SST-2.tar.gz",
                "url": f"file://{archive}",
                "checksum": f"sha256:{digest}",
                "unpack": True,
                "unpack_creates": "distilbert-pytorch/SST-2/train.tsv",
            },
            {
                "dest": "distilbert-pytorch/checkpoint/config.json",
                "src": str(checkpoint),
                "checksum": "sha256:" + hashlib.sha256(checkpoint.read_bytes()).hexdigest(),
            },
        ],
    }
    inventory = write_inventory(
        work / "hosts.yml", net.inventory({"cpu": [host]}, {"cpu1": host_vars})
    )
    started = time.monotonic()
    first = ansible_playbook(inventory, "--diff")
    second = None
    if first.returncode == 0:
        # dockerd must accept the daemon.json provision.yml wrote: restart it, it reads it.
        dockerd.stop()
        dockerd.start()
        second = ansible_playbook(inventory)
    return {
        "host": host,
        "first": first,
        "second": second,
        "inventory": inventory,
        "digest": digest,
        "work": work,
        "seconds": time.monotonic() - started,
    }


def test_cpu_path_runs(cpu_run):
    first = cpu_run["first"]
    assert first.returncode == 0, first.stdout[-6000:] + first.stderr[-2000:]
    counts = recap(first.stdout)["cpu1"]
    assert counts["failed"] == 0 and counts["unreachable"] == 0
    assert counts["changed"] > 0  # a new host: facts file, directories, daemon.json, image, data


def test_cpu_path_second_run_changes_nothing(cpu_run):
    second = cpu_run["second"]
    assert second is not None, "the first run failed"
    assert second.returncode == 0, second.stdout[-6000:] + second.stderr[-2000:]
    counts = recap(second.stdout)["cpu1"]
    assert counts["changed"] == 0, second.stdout[-6000:]
    assert counts["failed"] == 0


def test_cpu_path_leaves_the_host_provisioned(cpu_run, dockerd):
    host: testhosts.TestHost = cpu_run["host"]
    root = host.root
    facts = json.loads(host.changed("/etc/ansible/facts.d/fleetperf.fact").read_text())
    assert facts["vendor"] == "cpu" and facts["accelerator_count"] == 0
    assert facts["cpu"]["vcpus"] >= 1 and facts["numa_nodes"] >= 1
    assert facts["ib_devices"] == []

    # The service user and its docker group membership exist on the host, in its overlay.
    uid = int(host.ssh("id", "-u", SERVICE_USER).stdout)
    assert "docker" in host.ssh("id", "-nG", SERVICE_USER).stdout.split()
    assert f"\n{SERVICE_USER}:" in "\n" + host.changed("/etc/passwd").read_text()
    for d in ("data", "runs"):
        assert (root / d).is_dir() and (root / d).stat().st_uid == uid

    daemon = json.loads(host.changed("/etc/docker/daemon.json").read_text())
    assert daemon["log-driver"] == "json-file"
    assert daemon["log-opts"] == {"max-size": "100m", "max-file": "5"}
    assert daemon["default-shm-size"] == "16G"
    assert daemon["default-ulimits"]["memlock"] == {"Name": "memlock", "Hard": -1, "Soft": -1}
    assert "runtimes" not in daemon  # no vendor runtime on a cpu host

    data = root / "data" / "distilbert-pytorch"
    assert (data / "SST-2" / "train.tsv").read_text().startswith("sentence\tlabel\n")
    assert hashlib.sha256((data / "SST-2.tar.gz").read_bytes()).hexdigest() == cpu_run["digest"]
    assert (
        json.loads((data / "checkpoint" / "config.json").read_text())["model_type"] == "distilbert"
    )

    # The image was built on the host by the real engine, which now runs on our daemon.json.
    label = dockerd.docker(
        "image", "inspect", "--format", "{{json .Config.Labels}}", "fleetperf/cpu:provision-test"
    )
    assert json.loads(label.stdout) == {"org.fleetperf.test": "provision"}
    container = dockerd.docker("create", "fleetperf/cpu:provision-test", "/none").stdout.strip()
    try:
        shm = dockerd.docker("inspect", "--format", "{{.HostConfig.ShmSize}}", container).stdout
        assert int(shm) == 16 * 1024**3
    finally:
        dockerd.docker("rm", container, check=False)


def test_bad_checksum_fails_and_names_the_host(net, tmp_path):
    host = net.add_host("cpu-bad")
    archive, digest = make_dataset(tmp_path)
    wrong = "0" * 64
    host_vars = {
        **host_paths(host),
        "fleetperf_data_items": [
            {"dest": "case/SST-2.tar.gz", "url": f"file://{archive}", "checksum": f"sha256:{wrong}"}
        ],
    }
    inventory = write_inventory(
        tmp_path / "hosts.yml", net.inventory({"cpu": [host]}, {"cpu-bad": host_vars})
    )
    done = ansible_playbook(inventory, "--tags", "common,data")  # common: the service user
    assert done.returncode != 0
    assert recap(done.stdout)["cpu-bad"]["failed"] == 1
    assert "did not match" in done.stdout and wrong in done.stdout
    assert not (host.root / "data" / "case" / "SST-2.tar.gz").exists()


# --- the accelerator paths, in check mode -------------------------------------------------


def accelerator_hosts(net: testhosts.TestNetwork) -> tuple[dict, dict]:
    """Hosts with and without the accelerator their group claims, stand-ins on PATH."""
    spec = {
        # name: (group, PCI devices, {command: script})
        "nv-gpu": (
            "nvidia",
            gpus("10de", "0302", "20b2", 8) + [MELLANOX_HCA],
            {
                "nvidia-smi": nvidia_smi("550.127.05", 8),
                "ibstat": IBSTAT,
                "ibv_devinfo": IBV_DEVINFO,
            },
        ),
        "nv-nodriver": ("nvidia", gpus("10de", "0302", "20b2", 8), {}),
        "nv-olddriver": (
            "nvidia",
            gpus("10de", "0302", "20b2", 4),
            {"nvidia-smi": nvidia_smi("535.183.01", 4)},
        ),
        "nv-none": ("nvidia", [], {}),
        "ilu-card": (
            "iluvatar",
            gpus("1e3e", "0302", "0001", 4),
            {"ixsmi": smi_banner("ixsmi", "4.2.0")},
        ),
        "ilu-none": ("iluvatar", [], {}),
        "klx-card": (
            "kunlunxin",
            gpus("1d22", "1200", "3685", 8),
            {"xpu-smi": smi_banner("xpu-smi", "4.31.0")},
        ),
        "klx-none": ("kunlunxin", [MELLANOX_HCA], {"ibstat": IBSTAT}),
    }
    groups: dict[str, list] = {}
    host_vars = {}
    for name, (group, devices, commands) in spec.items():
        host = net.hosts.get(name) or net.add_host(name)
        host.add_command("lspci", lspci(*devices))
        for command, script in commands.items():
            host.add_command(command, script)
        groups.setdefault(group, []).append(host)
        host_vars[name] = host_paths(host)
    return groups, host_vars


def check_mode(inventory: Path, work: Path) -> dict:
    """``provision.yml --check --diff`` through ansible-runner; returns the results
    {host: {task name: status, msg, diff}}, the output, rc and how long it took."""
    import ansible_runner

    (work / "runner").mkdir()
    started = time.monotonic()
    runner = ansible_runner.run(
        private_data_dir=str(work / "runner"),
        project_dir=str(REPO),
        playbook="provision.yml",
        inventory=str(inventory),
        cmdline="--check --diff",
        forks=10,
        envvars={"PATH": ansible_env()["PATH"], "ANSIBLE_NOCOLOR": "1"},
        quiet=True,
        # Without one, ansible-runner sets SIGTERM and SIGINT handlers it never takes back.
        cancel_callback=lambda: False,
    )
    results: dict[str, dict[str, dict]] = {}
    status_of = {
        "runner_on_ok": "ok",
        "runner_on_failed": "failed",
        "runner_on_skipped": "skipped",
        "runner_on_unreachable": "unreachable",
    }
    for event in runner.events:
        status = status_of.get(event.get("event"))
        if not status:
            continue
        data = event["event_data"]
        res = data.get("res", {})
        if status == "ok" and res.get("changed"):
            status = "changed"
        results.setdefault(data["host"], {})[data["task"]] = {
            "status": status,
            "msg": str(res.get("msg", "")),
            # A loop's diffs are its items'.
            "diff": json.dumps(res.get("diff") or [r.get("diff") for r in res.get("results", [])]),
            "ignored": data.get("ignore_errors"),
        }
    return {
        "results": results,
        "stdout": runner.stdout.read(),
        "rc": runner.rc,
        "seconds": time.monotonic() - started,
    }


@pytest.fixture(scope="module")
def check_run(net, tmp_path_factory):
    """One ``provision.yml --check --diff`` over all accelerator hosts."""
    work = tmp_path_factory.mktemp("check-mode")
    groups, host_vars = accelerator_hosts(net)
    inventory = write_inventory(work / "hosts.yml", net.inventory(groups, host_vars))
    return check_mode(inventory, work)


def changed(check_run, host: str) -> set[str]:
    return {t for t, r in check_run["results"][host].items() if r["status"] == "changed"}


def test_check_mode_reached_every_host(check_run):
    results = check_run["results"]
    assert set(results) >= {
        "nv-gpu",
        "nv-nodriver",
        "nv-olddriver",
        "nv-none",
        "ilu-card",
        "ilu-none",
        "klx-card",
        "klx-none",
    }, check_run["stdout"][-4000:]
    # Hosts with their accelerator: no task failed.
    for host in ("nv-gpu", "nv-nodriver", "nv-olddriver", "ilu-card", "klx-card"):
        failed = {t: r["msg"] for t, r in results[host].items() if r["status"] == "failed"}
        assert not failed, f"{host}: {failed}"


@pytest.mark.parametrize(
    "host,vendor,pci_id",
    [
        ("nv-none", "nvidia", "10de"),
        ("ilu-none", "iluvatar", "1e3e"),
        ("klx-none", "kunlunxin", "1d22"),
    ],
)
def test_host_without_its_accelerator_fails_the_facts_check(check_run, host, vendor, pci_id):
    results = check_run["results"][host]
    check = results["Check that the host has the accelerator its group claims"]
    assert check["status"] == "failed"
    assert f"host {host} is in group '{vendor}'" in check["msg"]
    assert f"PCI vendor id {pci_id}" in check["msg"]
    # Nothing after the facts check ran: no driver, no docker, nothing.
    assert not any("driver" in t.lower() or "docker" in t.lower() for t in results), sorted(results)
    assert "Write the hardware local fact" not in results


def test_nvidia_host_with_driver(check_run):
    results = check_run["results"]["nv-gpu"]
    would = changed(check_run, "nv-gpu")
    # Driver 550 runs: nothing to install, nvidia-smi sees the 8 GPUs that lspci lists.
    assert results["Report the NVIDIA driver change"]["status"] == "skipped"
    assert results["Check that nvidia-smi sees every GPU on the PCI bus"]["status"] == "ok"
    assert results["Turn persistence mode on"]["status"] == "skipped"  # already Enabled
    # The toolkit is missing: it would be installed and configured through nvidia-ctk.
    assert "Report the NVIDIA container runtime change" in would
    msg = results["Report the NVIDIA container runtime change"]["msg"]
    assert (
        "install nvidia-container-toolkit" in msg
        and "nvidia-ctk runtime configure --runtime=docker --set-as-default" in msg
    )
    # daemon.json: log rotation, shm size and memlock.
    assert "Write daemon.json" in would
    diff = results["Write daemon.json"]["diff"]
    assert "memlock" in diff and "default-shm-size" in diff and "max-size" in diff
    # InfiniBand: rdma-core, modules with nvidia_peermem, memlock unlimited, NCCL settings.
    assert {
        "Install rdma-core",
        "Load the RDMA modules at boot",
        "Set memlock unlimited",
        "Write the NCCL settings file",
    } <= would
    assert "nvidia_peermem" in results["Load the RDMA modules at boot"]["diff"]
    assert "memlock unlimited" in results["Set memlock unlimited"]["diff"]
    assert "NCCL_IB_HCA=mlx5" in results["Write the NCCL settings file"]["diff"]
    assert results["Check the InfiniBand ports"]["status"] == "ok"
    # The image: the context the engine's images come from would be copied and built, with
    # the tag run.yml's preflight insists on (no engine answers on this host).
    assert "Copy the build context" in would
    tag = images.expected_image("nvidia")
    assert f"docker build -t {tag} " in results["Report the image build"]["msg"]
    # The facts: 8 NVIDIA GPUs and one HCA.
    assert '\\"accelerator_count\\": 8' in results["Write the hardware local fact"]["diff"]
    assert "mlx5_0" in results["Write the hardware local fact"]["diff"]


def test_nvidia_host_without_driver(check_run):
    results = check_run["results"]["nv-nodriver"]
    assert "Report the NVIDIA driver change" in changed(check_run, "nv-nodriver")
    assert "branch 550 wanted (running: none)" in results["Report the NVIDIA driver change"]["msg"]
    # Nothing to check before the install; no IB on this host: no IB tasks, no memlock file.
    assert results["Read the GPUs with nvidia-smi"]["status"] == "skipped"
    assert "Set memlock unlimited" not in results
    assert "Report the NVIDIA container runtime change" in changed(check_run, "nv-nodriver")


def test_nvidia_host_with_old_driver(check_run):
    results = check_run["results"]["nv-olddriver"]
    assert results["Report the NVIDIA driver change"]["status"] == "changed"
    assert "(running: 535.183.01)" in results["Report the NVIDIA driver change"]["msg"]


def test_iluvatar_host(check_run):
    results = check_run["results"]["ilu-card"]
    assert results["Report the driver change"]["status"] == "skipped"  # CoreX 4.2.0 runs
    assert results["Check the driver version"]["status"] == "ok"
    assert "Report the NVIDIA container runtime change" not in results  # plain runc
    assert '\\"iluvatar\\": 4' in results["Write the hardware local fact"]["diff"]
    assert "memlock" in results["Write daemon.json"]["diff"]
    assert "Write the NCCL settings file" in changed(check_run, "ilu-card")


def test_kunlunxin_host(check_run):
    results = check_run["results"]["klx-card"]
    assert results["Report the driver change"]["status"] == "changed"
    msg = results["Report the driver change"]["msg"]
    assert "Kunlunxin XRE 5.0.21.21 wanted (running: 4.31.0)" in msg
    assert "xre-Linux-x86_64-5.0.21.21.run" in msg
    assert results["Run the smi command"]["status"] == "skipped"


def test_check_mode_wrote_nothing(check_run, net):
    for name in ("nv-gpu", "nv-nodriver", "ilu-card", "klx-card"):
        host = net.hosts[name]
        assert not host.changed("/etc/ansible/facts.d").exists()
        assert not host.changed("/etc/docker").exists()
        assert not host.changed("/etc/passwd").exists()
        assert not (host.root / "data").exists()


# --- check mode on a fresh host, as README's first provisioning step runs it -------------


def test_check_mode_on_a_fresh_fleet_up_host(net, tmp_path):
    """``provision.yml --check --diff`` on a host as ``fleetperf fleet up 1`` makes it, its
    data root already there (staged data): every role runs clean; the diff shows the
    service user and the directories it would make; nothing is made."""
    host = net.add_host("fresh1")
    inventory = fleet_inventory(net)
    hosts = inventory["all"]["children"]["cpu"]["hosts"]
    hosts = {"fresh1": hosts["fresh1"]}  # this test's host only
    data_root = host.root / "data"
    (data_root / "case").mkdir(parents=True)
    archive, digest = make_dataset(tmp_path)
    hosts["fresh1"]["fleetperf_data_root"] = str(data_root)  # not the repository's data/
    hosts["fresh1"]["fleetperf_data_items"] = [
        {"dest": "case/SST-2.tar.gz", "url": f"file://{archive}", "checksum": f"sha256:{digest}"}
    ]
    hosts["fresh1"]["fleetperf_common_apt_cache_valid_time"] = 10 * 365 * 86400  # no route out
    inventory["all"]["children"] = {"cpu": {"hosts": hosts}}
    run = check_mode(write_inventory(tmp_path / "hosts.yml", inventory), tmp_path)
    results = run["results"]["fresh1"]
    failed = {t: r["msg"] for t, r in results.items() if r["status"] == "failed"}
    assert run["rc"] == 0 and not failed, (failed, run["stdout"][-4000:])
    # The roles ran to the end: the images and data roles too.
    assert "Look for the image" in results and "Check the data items" in results
    # What it would do: the service user, the run root made, the data root handed over.
    assert results["Create the service user"]["status"] == "changed"
    dirs = results["Create the data and run directories"]
    assert dirs["status"] == "changed"
    assert '"state": "directory"' in dirs["diff"], dirs
    assert str(host.root / "runs") in dirs["diff"]
    owner = results["Report the directories the service user would own"]
    assert owner["status"] == "changed"
    assert f"{SERVICE_USER}:{SERVICE_USER}" in owner["msg"] and str(data_root) in owner["msg"]
    # Nothing was made.
    assert not host.changed("/etc/passwd").exists() and not host.changed("/etc/group").exists()
    assert not (host.root / "runs").exists()
    assert results["Create the data directories"]["status"] == "ok"  # there, root's for now
    assert results["Download the data"]["status"] == "changed"
    assert data_root.stat().st_uid == 0 and list(data_root.rglob("*")) == [data_root / "case"]
    assert not host.changed("/etc/ansible/facts.d").exists()


def test_pull_mode_without_a_registry_fails_naming_the_host(net, tmp_path):
    """Never ``docker pull fleetperf/<vendor>:...`` from Docker Hub, where anyone may publish."""
    host = net.add_host("pull1")
    host_vars = {**host_paths(host), "fleetperf_images_mode": "pull"}
    inventory = write_inventory(
        tmp_path / "hosts.yml", net.inventory({"cpu": [host]}, {"pull1": host_vars})
    )
    done = ansible_playbook(inventory, "--check", "--tags", "images")
    assert done.returncode != 0
    assert recap(done.stdout)["pull1"]["failed"] == 1
    assert (
        "host pull1: fleetperf_images_mode pull needs fleetperf_images_registry" in done.stdout
    ), done.stdout[-3000:]
    assert "docker pull" not in done.stdout and "Pull the image" not in done.stdout
