"""What the tests of the cases served by vLLM share (llm-serving, generate-*): the engine's
interpreter (.venv-vllm, which scripts/bootstrap makes), the mark that skips a test without
it, and a runner with a case's synthetic data prepared."""

from __future__ import annotations

import pytest
from conftest import REPO, Fleetperf

ENGINE = REPO / ".venv-vllm" / "bin" / "python"
needs_vllm = pytest.mark.skipif(
    not ENGINE.exists(), reason=f"no {ENGINE.relative_to(REPO)} (scripts/bootstrap makes it)"
)
# Slow, one worker for them all (two vLLM engines at once do not fit 2 cores), the engine.
SERVING = [pytest.mark.slow, pytest.mark.xdist_group("llm_serving"), needs_vllm]


def prepared(tmp_path_factory: pytest.TempPathFactory, name: str, case: str) -> Fleetperf:
    """A runner over the repository's cases with ``case``'s synthetic data prepared."""
    tmp = tmp_path_factory.mktemp(name)
    runner = Fleetperf(cases_dir=REPO / "cases", data_root=tmp / "data", results=tmp / "results")
    out = runner.run("prepare", case, "--synthetic")
    assert out.returncode == 0, out.stderr
    return runner
