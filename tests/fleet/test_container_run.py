"""The docker executor for real: a dockerd of the test's own, the cpu image built from
images/cpu/ on a base made from this machine's Debian packages, and distilbert-pytorch run
in a container end to end through ``fleetperf --batch``.

No registry is reachable: the base image comes from scripts/make-base-image (docker
import), and pip inside the build gets its wheels from a wheelhouse that this test
fills (pip wheel) with this machine's pip configuration (CPU torch, never CUDA) and serves on
127.0.0.1 (the build's RUN steps use the host network). Everything the engine holds lives
in its data root under the test's temp dir, deleted at the end; no container outlives a
test.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import testhosts
import yaml
from conftest import REPO, Fleetperf
from dockerd import Dockerd, missing

from tui.catalog import caseimports, catalog, images

pytestmark = [
    pytest.mark.skipif(missing() is not None, reason=str(missing())),
    pytest.mark.xdist_group("containers"),  # one worker: one engine and one image build
]

BASE = "fleetperf-local/base:bookworm"
# Short runs (2 cores, shared): an evaluation every 400 samples, and the run ends at the
# first that reaches 0.7 (800 to 1200 samples on the synthetic set).
SHORT = ("max_samples=1600", "eval_every_samples=400", "target_acc=0.7")
LABEL_RUN = "fleetperf.run_id"


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory):
    d = Dockerd(tmp_path_factory.mktemp("engine"))
    d.start()
    try:
        yield d
    finally:
        d.remove_containers()  # a failed test's; then the engine and its images
        d.stop()
        d.remove_data()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass  # pip fetches dozens of files: no line per request in the test output


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory):
    """CPU torch and the image's requirements as wheels, served over HTTP on 127.0.0.1."""
    wheels = tmp_path_factory.mktemp("wheels")
    # torch by its +cpu local version: where no CPU wheel is configured this fails at once
    # instead of fetching the CUDA build and its gigabytes. `pip wheel`: deepspeed is
    # published as source only, and the image's build has no index to build it from.
    requirements = str(images.IMAGES / "cpu" / "requirements.txt")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--prefer-binary",
            "-w",
            str(wheels),
            "torch==2.13.0+cpu",
            "-r",
            requirements,
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, f"pip wheel: {done.stderr[-2000:]}"
    handler = functools.partial(QuietHandler, directory=str(wheels))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def cpu_image(engine: Dockerd, wheelhouse: str) -> dict[str, object]:
    """The base image imported, then the cpu image built from images/cpu/ on it."""
    started = time.monotonic()
    engine.import_base(BASE)
    base_s = time.monotonic() - started
    tag, image_id = images.build(
        "cpu",
        engine.host,
        {"BASE_IMAGE": BASE, "PIP_FIND_LINKS": wheelhouse, "PIP_NO_INDEX": "1"},
        network_mode="host",
    )
    build_s = time.monotonic() - started - base_s
    print(f"\nbase image {base_s:.0f} s, cpu image build {build_s:.0f} s")
    return {"tag": tag, "id": image_id}


def containers(engine: Dockerd, run_id: str | None = None) -> list[str]:
    label = f"{LABEL_RUN}={run_id}" if run_id else LABEL_RUN
    return engine.docker("ps", "-aq", "--filter", f"label={label}").stdout.split()


def inventory(path: Path, engine: Dockerd, data: Path, hosts_root: Path) -> Path:
    """One cpu host (this machine, local connection) whose executor is docker."""
    host = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,  # has the Docker SDK
        "fleetperf_executor": "docker",
        "fleetperf_docker_host": engine.host,
        "fleetperf_base_image": BASE,  # what the image was built on: part of its tag
        "fleetperf_container_network": "none",  # the test engine has no bridge
        "fleetperf_repo_dir": str(REPO),
        "fleetperf_python": sys.executable,
        "fleetperf_data_root": str(data),
        "fleetperf_run_root": str(hosts_root / "box1"),
    }
    path.write_text(yaml.safe_dump({"all": {"children": {"cpu": {"hosts": {"box1": host}}}}}))
    return path


@pytest.fixture(scope="module")
def fleet(engine: Dockerd, cpu_image, tmp_path_factory: pytest.TempPathFactory):
    """fleetperf with the repository's cases, distilbert's data staged, and a docker host."""
    tmp = tmp_path_factory.mktemp("fleet")
    fp = Fleetperf(cases_dir=REPO / "cases", data_root=tmp / "data", results=tmp / "results")
    out = fp.run("prepare", "distilbert-pytorch", "--synthetic")
    assert out.returncode == 0, out.stderr
    inv = inventory(tmp / "hosts.yml", engine, fp.data_root, tmp / "hosts")
    return fp, inv


def test_image_tag_is_a_hash_of_what_builds_it(tmp_path, monkeypatch):
    for src in ("images", "cases/harness"):
        subprocess.run(["cp", "-r", str(REPO / src), str(tmp_path / src.replace("/", "_"))])
    monkeypatch.setattr(images, "IMAGES", tmp_path / "images")
    monkeypatch.setattr(images, "HARNESS", tmp_path / "cases_harness")
    first = images.image_tag("cpu")
    assert re.fullmatch(r"fleetperf/cpu:[0-9a-f]{12}", first)
    assert images.image_tag("nvidia") != first
    for changed in (
        "images/cpu/requirements.txt",
        "cases_harness/events.py",
        "images/cpu/Dockerfile",
    ):
        path = tmp_path / changed
        before = path.read_text()
        path.write_text(before + "\n# changed\n")
        assert images.image_tag("cpu") != first, changed
        path.write_text(before)
        assert images.image_tag("cpu") == first, changed
    (tmp_path / "cases_harness" / "__pycache__").mkdir(exist_ok=True)
    (tmp_path / "cases_harness" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert images.image_tag("cpu") == first  # bytecode does not build the image
    images.write_context("cpu", tmp_path / "ctx")  # what a build elsewhere gets: the same
    written = [p for p in (tmp_path / "ctx").rglob("*") if p.is_file()]
    assert sorted(p.relative_to(tmp_path / "ctx").as_posix() for p in written) == sorted(
        images.context_files("cpu")
    )


@pytest.mark.slow
def test_the_cpu_image_holds_torch_transformers_and_the_harness(engine, cpu_image):
    tag = str(cpu_image["tag"])
    assert tag == images.image_tag("cpu", BASE)
    probe = (
        "import json, torch, transformers, harness, harness.metrics;"
        "print(json.dumps([torch.__version__, transformers.__version__, harness.__file__,"
        " float(torch.ones(3) @ torch.ones(3))]))"
    )
    out = engine.docker("run", "--rm", tag, "python", "-c", probe, timeout=300)
    torch_v, transformers_v, harness_file, dot = json.loads(out.stdout)
    assert torch_v == "2.13.0+cpu" and dot == 3.0
    assert transformers_v == "5.23.0"
    assert harness_file == "/opt/fleetperf/lib/harness/__init__.py"
    labels = json.loads(
        engine.docker(
            "image", "inspect", "--format", "{{json .Config.Labels}}", cpu_image["tag"]
        ).stdout
    )
    assert labels[images.LABEL] == images.context_hash("cpu", BASE)
    assert labels[images.BASE_LABEL] == BASE
    # Every module a case with cpu configs imports (peft, deepspeed, ...) imports in it.
    cases = [catalog.load_case(n) for n in catalog.case_names()]
    needed = sorted(
        {
            m
            for c in cases
            if (c.dir / "configs" / "cpu").is_dir()
            for m in caseimports.required(c.dir, c.entrypoint, images.HARNESS)
        }
    )
    assert {"peft", "deepspeed"} <= set(needed)
    load = "import importlib, sys; [importlib.import_module(m) for m in sys.argv[1:]]"
    done = engine.docker(
        "run", "--rm", tag, "python", "-c", load, *needed, check=False, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.slow
def test_distilbert_runs_in_a_container(engine, fleet, cpu_image):
    fp, inv = fleet
    out = fp.batch(
        "distilbert-pytorch",
        "cpu/CPUx1x1",
        *SHORT,
        args=("-i", str(inv), "--format", "json"),
        timeout=900,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (rec,) = json.loads(out.stdout)
    assert rec["status"] == "passed", rec
    # The tag, and the id of the image that ran (docker inspect's, on the host at launch).
    assert rec["executor"] == "docker" and rec["image"] == f"{cpu_image['tag']}@{cpu_image['id']}"
    assert rec["metrics"]["p_whole"] > 0 and 0 <= rec["metrics"]["acc"] <= 1
    env = rec["environment"]
    # In a container: its hostname is the container's, its OS the base image's.
    assert re.fullmatch(r"[0-9a-f]{12}", env["hostname"]), env
    assert env["os"].startswith("Debian GNU/Linux 12") and env["packages"]["torch"] == "2.13.0+cpu"
    host_run = inv.parent / "hosts" / "box1" / rec["run_id"]  # the host's run directory
    assert (host_run / "exit_code").read_text() == "0"
    for f in host_run.rglob("*"):  # written from the container as the operator
        assert f.stat().st_uid == os.getuid(), f
    assert containers(engine, rec["run_id"]) == []
    assert containers(engine) == []


@pytest.mark.slow
def test_a_stale_image_is_refused_naming_host_tag_and_build(engine, fleet, cpu_image):
    fp, inv = fleet
    tag = str(cpu_image["tag"])
    old = "fleetperf/cpu:000000000000"
    engine.docker("tag", tag, old)
    engine.docker("rmi", tag)  # the image stays, under its old tag only
    try:
        out = fp.batch("distilbert-pytorch", "cpu/CPUx1x1", args=("-i", str(inv)), timeout=300)
    finally:
        engine.docker("tag", old, tag)
        engine.docker("rmi", old)
    assert out.returncode == 2, out.stdout[-3000:] + out.stderr[-3000:]
    text = out.stdout + out.stderr
    assert f"host box1: image {tag} stale (the engine has {old})" in text, text[-3000:]
    assert "fleetperf images build cpu" in text
    assert containers(engine) == []


@pytest.mark.slow
def test_sigterm_stops_and_removes_the_container(engine, fleet, cpu_image):
    fp, inv = fleet
    proc = fp.popen(
        "--batch", "--case", "distilbert-pytorch", "--config", "cpu/CPUx1x1", "-i", str(inv)
    )
    try:
        deadline = time.monotonic() + 120
        while not containers(engine) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        (cid,) = containers(engine)
        info = json.loads(engine.docker("inspect", cid).stdout)[0]
        host = info["HostConfig"]
        assert host["Privileged"] is False and "no-new-privileges" in host["SecurityOpt"]
        assert host["NetworkMode"] == "none"  # single node: never the host's network
        assert info["Config"]["User"] == f"{os.getuid()}:{os.getgid()}"
        labels = info["Config"]["Labels"]  # how poll and stop find it (no run dir file)
        assert labels["fleetperf.case"] == "distilbert-pytorch"
        assert labels["fleetperf.host"] == "box1"
        mounts = {m["Destination"]: m["RW"] for m in info["Mounts"]}
        assert mounts[str(fp.data_root / "distilbert-pytorch")] is False
        assert mounts[str(REPO / "cases" / "distilbert-pytorch")] is False
        host_root = str(inv.parent / "hosts" / "box1")
        assert [rw for dest, rw in mounts.items() if dest.startswith(host_root)] == [True]
        assert labels["fleetperf.run_dir"].startswith(f"{host_root}/")
        time.sleep(5)  # let it train a little
        # SIGTERM, as Ctrl-C does: a background job (CI) may have SIGINT ignored.
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert containers(engine) == []
    assert fp.records()[-1]["status"] == "aborted"


@pytest.mark.slow
@pytest.mark.skipif(testhosts.available() is not None, reason=str(testhosts.available()))
def test_two_ssh_nodes_train_one_model_in_containers(engine, cpu_image, fleet, tmp_path):
    """distilbert across two SSH test hosts, each with its own engine in its namespaces, so
    the containers' host network is the test host's: torchrun and gloo go over the bridge."""
    fp, _ = fleet
    tag = str(cpu_image["tag"])
    # A 2-node config for the case, in a copy of it (gloo on the hosts' own interface).
    cases = tmp_path / "cases"
    shutil.copytree(REPO / "cases" / "distilbert-pytorch", cases / "distilbert-pytorch")
    (cases / "distilbert-pytorch" / "configs" / "cpu" / "CPUx2x1.yaml").write_text(
        "overrides: {train_batch_size: 16, learning_rate: 0.001}\n"
    )
    two = Fleetperf(cases_dir=cases, data_root=fp.data_root, results=tmp_path / "results")
    saved = tmp_path / "image.tar"
    engine.docker("save", "--output", str(saved), tag, timeout=600)
    with testhosts.TestNetwork(tmp_path / "net") as net:
        nodes = [net.add_host("node1"), net.add_host("node2")]
        # Short roots: containerd's socket path under the exec root must fit 108 bytes.
        roots = [Path(tempfile.mkdtemp(prefix=f"fp-{h.name}-")) for h in nodes]
        engines = [Dockerd(r, wrap=h.exec_argv) for r, h in zip(roots, nodes, strict=True)]
        try:
            for e in engines:
                e.start()
                e.docker("load", "--input", str(saved), timeout=600)
            host_vars = {
                h.name: {
                    "ansible_python_interpreter": sys.executable,  # has the Docker SDK
                    "fleetperf_executor": "docker",
                    "fleetperf_docker_host": e.host,
                    "fleetperf_base_image": BASE,  # what the image was built on
                    "fleetperf_repo_dir": str(REPO),
                    "fleetperf_data_root": str(fp.data_root),
                    "fleetperf_run_root": str(h.root / "runs"),
                    "fleetperf_addr": h.address,
                    "fleetperf_workload_env": {"GLOO_SOCKET_IFNAME": "eth0"},
                }
                for h, e in zip(nodes, engines, strict=True)
            }
            inventory = tmp_path / "fleet.yml"
            inventory.write_text(yaml.safe_dump(net.inventory({"cpu": nodes}, host_vars)))
            out = two.batch(
                "distilbert-pytorch",
                "cpu/CPUx2x1",
                *SHORT,
                args=("-i", str(inventory), "--format", "json"),
                timeout=1200,
            )
            left = [e.docker("ps", "-aq").stdout.split() for e in engines]
        finally:
            for e in engines:
                e.remove_containers()
                e.stop()
                e.remove_data()
                shutil.rmtree(e.root)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (rec,) = json.loads(out.stdout)
    assert rec["status"] == "passed" and rec["hosts"] == ["node1", "node2"], rec
    assert rec["executor"] == "docker" and rec["image"] == f"{tag}@{cpu_image['id']}"
    assert left == [[], []]  # each node's container removed
    log = (two.results / "runs" / rec["run_id"] / "events.jsonl").read_text().splitlines()
    samples = [json.loads(line) for line in log]
    ranks = {(r["host"], r["rank"]) for r in samples if r["type"] == "MetricSample"}
    assert ranks == {("node1", 0), ("node2", 1)}  # one model, trained on both
    for h in nodes:  # both nodes ran their part and ended well
        (run,) = (h.root / "runs").glob(f"{rec['run_id']}")
        assert (run / "exit_code").read_text() == "0"
