"""{{name}}: prepare --synthetic, then one run as the controller launches it.

.venv/bin/python -m pytest cases/{{name}}/test_case.py -o addopts="" -q
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

CASE = Path(__file__).resolve().parent
HARNESS = Path(__file__).resolve().parents[1]  # cases/: the harness lives beside the case


def _python(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(HARNESS)}
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def test_synthetic_run_passes(tmp_path: Path) -> None:
    data, run_dir = tmp_path / "data" / CASE.name, tmp_path / "run"
    prep = _python(str(CASE / "prepare.py"), "--out", str(data), "--synthetic")
    assert prep.returncode == 0, prep.stderr
    case = yaml.safe_load((CASE / "case.yaml").read_text())
    cpu = yaml.safe_load((CASE / "configs" / "cpu" / "CPUx1x1.yaml").read_text())
    hp = {**case["defaults"], **(cpu.get("overrides") or {})}
    run_dir.mkdir()
    config = {"vendor": "cpu", "chip": "CPU", "precision": hp["precision"], "hp": hp}
    (run_dir / "config.json").write_text(json.dumps(config))
    args = ("--config", str(run_dir / "config.json"), "--data-dir", str(data))
    proc = _python(str(CASE / "run.py"), *args, "--run-dir", str(run_dir))
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    result = events[-1]
    assert result["kind"] == "result" and result["status"] == "passed", result
    assert result["metrics"]["p_core"] >= result["metrics"]["p_train"] > 0
