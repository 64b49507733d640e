"""Helpers for the Llama cases' tests: their prepare scripts, modules and workload launches."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from conftest import REPO

from tui.catalog import catalog
from tui.catalog.catalog import RunSpec

CASES = REPO / "cases"
LORA = "llama2_7b_finetune-pytorch"
ZERO3 = "llama2_7b-deepspeed"


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(CASES), **extra}


def prepare(case: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """The case's prepare.py as `fleetperf prepare` starts it."""
    return subprocess.run(
        [sys.executable, str(CASES / case / "prepare.py"), *args],
        env=env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def case_module(case: str, name: str) -> ModuleType:
    """A module of a case, imported under a name of its own (cases reuse module names)."""
    for path in (str(CASES), str(CASES / case)):
        if path not in sys.path:
            sys.path.insert(0, path)
    unique = f"case_{case.replace('-', '_')}_{name}"
    if unique in sys.modules:
        return sys.modules[unique]
    spec = importlib.util.spec_from_file_location(unique, CASES / case / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[unique] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def resolved_config(case: str, ref: str, run_dir: Path, **sets: object) -> Path:
    """RUN_DIR/config.json for ``case`` on config ``ref`` (as the controller resolves it)."""
    spec = _resolve(case, ref, sets)
    run_dir.mkdir(parents=True, exist_ok=True)
    config = {
        "run_id": "test",
        "case": case,
        "vendor": spec.config.vendor,
        "chip": spec.config.chip,
        "nnodes": spec.config.nnodes,
        "nproc_per_node": spec.config.nproc_per_node,
        "precision": spec.precision,
        "hp": spec.hp,
        "fix_hp": spec.fix_hp,
    }
    path = run_dir / "config.json"
    path.write_text(json.dumps(config))
    return path


def _resolve(case: str, ref: str, sets: dict[str, object]) -> RunSpec:
    spec = catalog.load_case(case, CASES)
    return catalog.resolve(spec, catalog.load_config(spec, ref), dict(sets))


def run_workload(
    case: str,
    config: Path,
    data_dir: Path,
    nproc: int = 1,
    timeout: float = 300,
    extra_env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """The workload as the controller starts it: directly, or under torchrun."""
    launcher = (
        ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)]
        if nproc > 1
        else []
    )
    args = ["--config", str(config), "--data-dir", str(data_dir), "--run-dir", str(config.parent)]
    return subprocess.run(
        [sys.executable, *launcher, str(CASES / case / "run.py"), *args],
        env=env(**(extra_env or {})),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def events(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
