"""Shared fixtures: a runner for the real ``fleetperf`` command and the emitter case."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURE_CASES = REPO / "tests" / "fixtures" / "cases"
# users, groups and /etc unchanged by the suite; no process left running by a test
pytest_plugins = ["machine_guard", "process_guard"]


def pytest_configure(config: pytest.Config) -> None:
    """The tests use the store each names, never the developer's team store: no
    FLEETPERF_STORE, and a settings directory of their own (docs/store.md: the settings
    file under $XDG_CONFIG_HOME); the inventory listings they cause are kept in a cache
    directory of their own, not the user's (tui/engine/inventory.py)."""
    os.environ.pop("FLEETPERF_STORE", None)
    os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="fleetperf-test-config-")
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="fleetperf-test-cache-")


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(os.environ["XDG_CONFIG_HOME"], ignore_errors=True)
    shutil.rmtree(os.environ["XDG_CACHE_HOME"], ignore_errors=True)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` for the fast subset: two workers a core. Its tests spend about half their
    time waiting (on fleetperf and ansible subprocesses, a workload's interval), so a second
    worker keeps the core busy; each torch in them gets one thread (the workers inherit this
    environment), or their threads would spin against each other. The slow tests train
    models: they get xdist's one worker a core."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS") or config.option.markexpr != "not slow":
        return None  # xdist's rule: that number, or one worker a core
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    return 2 * len(os.sched_getaffinity(0))


@dataclass
class Fleetperf:
    """Runs ``python -m tui.cli`` with its own cases, data and results directories."""

    cases_dir: Path
    data_root: Path
    results: Path

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            PYTHONPATH=str(REPO),
            FLEETPERF_CASES_DIR=str(self.cases_dir),
            FLEETPERF_DATA=str(self.data_root),
            FLEETPERF_RESULTS=str(self.results),
        )
        return env

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "tui.cli", *args]

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args),
            env=self.env(),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def batch(
        self, case: str, config: str, *sets: str, args: tuple[str, ...] = (), timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """``fleetperf --batch --case CASE --config CONFIG [--set KEY=VALUE ...] ARGS``."""
        set_args = [a for kv in sets for a in ("--set", kv)]
        return self.run(
            "--batch", "--case", case, "--config", config, *set_args, *args, timeout=timeout
        )

    def records(self) -> list[dict[str, object]]:
        """Every record in the store, through ``fleetperf results --format json --status all``."""
        out = self.run("results", "--format", "json", "--status", "all")
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(*args),
            env=self.env(),
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def host_dirs(self, host: str = "localhost") -> list[Path]:
        return sorted(p for p in (self.results / "hosts" / host).glob("*") if p.is_dir())


def write_inventory(path: Path, hosts: dict[str, dict[str, object]], group: str = "cpu") -> Path:
    """An inventory with one vendor group; host vars written as JSON (valid YAML)."""
    lines = ["all:", "  children:", f"    {group}:", "      hosts:"]
    for name, hostvars in hosts.items():
        lines.append(f"        {name}:")
        lines += [f"          {k}: {json.dumps(v)}" for k, v in hostvars.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def local_host(fp: Fleetperf, name: str) -> dict[str, object]:
    """Host vars for a host that is this machine under another name, with its own run root."""
    return {
        "ansible_connection": "local",
        "ansible_python_interpreter": "{{ ansible_playbook_python }}",
        "fleetperf_repo_dir": "{{ fleetperf_controller_root }}",
        "fleetperf_python": "{{ fleetperf_controller_python }}",
        "fleetperf_data_root": "{{ fleetperf_controller_data_root }}",
        "fleetperf_run_root": str(fp.results / "hosts" / name),
    }


@pytest.fixture
def emitter(tmp_path: Path) -> Fleetperf:
    """The torch-free emitter case, copied so a test may edit it, with its data staged."""
    cases = tmp_path / "cases"
    shutil.copytree(FIXTURE_CASES / "emitter", cases / "emitter")
    data = tmp_path / "data"
    (data / "emitter").mkdir(parents=True)
    (data / "emitter" / "marker").write_text("staged\n")
    return Fleetperf(cases_dir=cases, data_root=data, results=tmp_path / "results")
