"""An inference engine's own interpreter: hp ``engine_python`` of the cases whose engine
(vLLM) lives in an environment apart from the workload's (docs/cases/serving.md, "The
engine's environment"): llm-serving's server, the generate cases' offline engine."""

from __future__ import annotations

import os
from pathlib import Path

from harness.errors import InputError

REPO = Path(__file__).resolve().parents[2]


def engine_python(value: str, config: Path) -> Path:
    """hp engine_python as a path (absolute, or under the repository); InputError, naming
    ``config`` and the field, when no interpreter is there."""
    path = Path(value) if Path(value).is_absolute() else REPO / value
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise InputError(
            f"{config}: hp.engine_python: {path} is no interpreter on this host "
            "(scripts/bootstrap makes .venv-vllm; or --set engine_python=PATH)"
        )
    return path
