"""Runs cases/aquila_33b-inference/run.py in this process and writes, one per line to TRACE,
what happens in order: ``begin`` and ``end`` of each timed step (harness PerfTracker),
``copy`` (a CPU tensor moved to a device), ``forward`` (the model's) and ``loss`` (the
case's cross-entropy: vocab_parallel.token_nll, or lambada.score where a tree has that):

    python tests/aquila_trace.py TRACE --config ... --data-dir ... --run-dir ...

The model and the run are the real ones; the trace only records calls. Used by
tests/cases/test_conformance_aquila.py.
"""

from __future__ import annotations

import functools
import importlib
import runpy
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

CASE = Path(__file__).resolve().parents[1] / "cases" / "aquila_33b-inference"
sys.path[:0] = [str(CASE.parent), str(CASE)]

import torch  # noqa: E402
from harness.perf import PerfTracker  # noqa: E402
from transformers import LlamaForCausalLM  # noqa: E402

TRACE = open(sys.argv[1], "a", buffering=1)  # noqa: SIM115 (written to the process's end)


def traced(owner: Any, name: str, label: str, when: Callable[..., bool] = lambda *a, **k: True):
    inner = getattr(owner, name)

    @functools.wraps(inner)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if when(*args, **kwargs):
            TRACE.write(label + "\n")
        return inner(*args, **kwargs)

    setattr(owner, name, wrapper)


def to_device(t: torch.Tensor, *args: Any, **kwargs: Any) -> bool:
    return t.device.type == "cpu" and any(
        isinstance(a, torch.device) for a in (*args, *kwargs.values())
    )


traced(PerfTracker, "step_begin", "begin")
traced(PerfTracker, "step_end", "end")
traced(LlamaForCausalLM, "forward", "forward")
traced(torch.Tensor, "to", "copy", to_device)
try:
    traced(importlib.import_module("vocab_parallel"), "token_nll", "loss")
except ImportError:  # a tree from before the vocabulary-parallel loss
    traced(importlib.import_module("lambada"), "score", "loss")
sys.argv = [str(CASE / "run.py"), *sys.argv[2:]]
runpy.run_path(str(CASE / "run.py"), run_name="__main__")
