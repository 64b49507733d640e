"""``fleetperf prepare CASE --synthetic`` prints only what the operator asked for on stdout
(issue 29 point 8): no blank lines from the tokenizer trainer's progress bar, no warning
from deepspeed (imported by accelerate through save_pretrained) that no GPU was found."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO, Fleetperf


@pytest.mark.slow  # builds llama2_7b_finetune's synthetic model and tokenizer
def test_prepare_prints_one_line_on_stdout(tmp_path: Path) -> None:
    fp = Fleetperf(cases_dir=REPO / "cases", data_root=tmp_path / "data", results=tmp_path / "r")
    case = "llama2_7b_finetune-pytorch"
    out = fp.run("prepare", case, "--synthetic")
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"wrote synthetic {case} data to {fp.data_root / case}\n"
    assert "WARNING" not in out.stderr  # not moved to stderr either: nothing to say
