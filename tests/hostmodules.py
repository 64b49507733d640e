"""The run modules of playbooks/library run as Ansible runs them, for tests: each its own
process, its arguments in a JSON file, its result as JSON on stdout."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

LIBRARY = Path(__file__).resolve().parents[1] / "playbooks" / "library"
MODULE_UTILS = LIBRARY.parent / "module_utils"
# A module as AnsiballZ runs it: playbooks/module_utils importable as ansible.module_utils.X.
RUNNER = (
    "import runpy, sys, ansible.module_utils as mu; mu.__path__.append(sys.argv.pop(1)); "
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def module_argv(name: str, args_file: Path | str) -> list[str]:
    module_file = str(LIBRARY / f"{name}.py")
    return [sys.executable, "-c", RUNNER, str(MODULE_UTILS), module_file, str(args_file)]


CONTROLLER = {"host": socket.gethostname(), "pid": os.getpid(), "boot_id": None}


def module(name: str, tmp: Path, **args: object) -> tuple[dict, float]:
    """Run playbooks/library/NAME.py with ARGS; its result and its wall time."""
    path = tmp / f"{name}-{time.monotonic_ns()}.json"
    path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    t0 = time.monotonic()
    done = subprocess.run(
        module_argv(name, path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return json.loads(done.stdout), time.monotonic() - t0


def preflight(tmp: Path, run_id: str = "run-1", **args: object) -> tuple[dict, float]:
    """fleetperf_preflight for host h1 and case ``case`` under ``tmp``, ARGS overriding."""
    (tmp / "data" / "case").mkdir(parents=True, exist_ok=True)
    params = {
        "host": "h1",
        "run_root": str(tmp / "runs"),
        "run_id": run_id,
        "case": "case",
        "data_dir": str(tmp / "data" / "case"),
        "requires": [],
        "config": {"hp": {"steps": 1}},
        "controller": CONTROLLER,
        "data_manifest": "fleetperf-data.json",
    }
    return module("fleetperf_preflight", tmp, **{**params, **args})
