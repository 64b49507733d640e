"""A real ``harness.Run`` on an fp16 device, for tests of float16 weights without a GPU."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from conftest import REPO

sys.path.insert(0, str(REPO / "cases"))

import harness  # noqa: E402
from harness.case import load_case_file  # noqa: E402
from harness.device import STACKS, Device  # noqa: E402

CASE_YAML = """\
name: halfcase
model: linear
dataset: random
task: test
kind: training
entrypoint: run.py
report: [p_train]
defaults: {precision: fp16, seed: 1}
"""


@contextmanager
def half_run(tmp_path: Path) -> Iterator[harness.Run]:
    """A Run whose device is the CPU at precision fp16 with a GradScaler (the cpu vendor
    refuses fp16 when opened: float16 CPU math is good enough for a test, not a benchmark).
    Puts back the process-wide settings opening the device changed."""
    import torch

    case = tmp_path / "halfcase"
    case.mkdir()
    (case / "case.yaml").write_text(CASE_YAML)
    config = tmp_path / "config.json"
    hp = {"precision": "fp16", "seed": 1}
    config.write_text(json.dumps({"vendor": "cpu", "chip": "CPU", "precision": "fp32", "hp": hp}))
    args = argparse.Namespace(config=config, data_dir=tmp_path, run_dir=tmp_path)
    events = harness.EventWriter(tmp_path / "events.jsonl", 0, 0)
    matmul, cudnn = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    try:
        run = harness.Run(load_case_file(case), args, harness.DistEnv(), events)
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
        run.device = Device("cpu", "fp16", torch.device("cpu"), STACKS["cpu"], "CPU", None, scaler)
        yield run
    finally:
        torch.set_flush_denormal(False)
        torch.set_float32_matmul_precision(matmul)
        torch.backends.cudnn.allow_tf32 = cudnn
