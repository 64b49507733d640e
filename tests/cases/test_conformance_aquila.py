"""Seed 002 (aquila_33b-inference) against FlagPerf's code, issue 40's Aquila points.

FlagPerf's branch commit db1edaa2 (its README is the seed page) runs FlagScale's
``tasks/aquila/evaluate.py``: one loop over LAMBADA, each batch's core time being
``forward_step`` (host-to-device copy and masks in ``process_batch``, the forward, and
``vocab_parallel_cross_entropy`` on logits kept split over the vocabulary by
``parallel_output=True``). The runs here are the real case on the synthetic data
(``prepare --synthetic``), traced by tests/aquila_trace.py or probed by
tests/aquila_tp_probe.py (two gloo processes).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from conftest import REPO

CASES = REPO / "cases"
CASE_DIR = CASES / "aquila_33b-inference"
TRACE = REPO / "tests" / "aquila_trace.py"
PROBE = REPO / "tests" / "aquila_tp_probe.py"
FIXTURES = REPO / "tests" / "fixtures" / "flagperf"
ENV = {"PYTHONPATH": str(CASES), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
TORCHRUN = ("-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2")
# 32 texts in 4 batches of 8, every text padded to 256 (FlagScale's framing, small)
SMALL = {"precision": "fp32", "eval_batch_size": 8, "max_seq_length": 256, "max_texts": 32}
BATCHES = 4
SEED_COMMIT = "db1edaa265ab242f7a5cd4150b83a64f780f1281"
# sha256 of the seed page (docs/cases/README.md's seed 002) with LF line ends
SEED_PAGE_SHA256 = "c9a8fe682c537ff95a294d0fea390c124217676be9a2b4ad5d5424782c2bd005"
README = "inference/benchmarks/Aquila_33b/README.md"


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], env=ENV, capture_output=True, text=True, timeout=900, check=False
    )


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("aquila") / "aquila_33b-inference"
    proc = _python(str(CASE_DIR / "prepare.py"), "--synthetic", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def traced_run(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path]:
    """One process of run.py at case.yaml's defaults over SMALL: its trace and run dir."""
    run_dir = tmp_path_factory.mktemp("traced")
    defaults = yaml.safe_load((CASE_DIR / "case.yaml").read_text())["defaults"]
    config = {"run_id": "t", "case": "aquila_33b-inference", "vendor": "cpu", "chip": "CPU"}
    config.update(nnodes=1, nproc_per_node=1, precision="fp32", hp=defaults | SMALL, fix_hp={})
    (run_dir / "config.json").write_text(json.dumps(config))
    trace = run_dir / "trace.txt"
    proc = _python(
        str(TRACE), str(trace), "--config", str(run_dir / "config.json"),
        "--run-dir", str(run_dir), "--data-dir", str(data_dir),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return trace.read_text().split(), run_dir


def _windows(trace: list[str]) -> list[list[str]]:
    """The calls inside each timed step, and the forwards and losses outside any."""
    out, current = [], None
    for what in trace:
        if what == "begin":
            current = []
        elif what == "end":
            out.append(current)
            current = None
        elif current is not None:
            current.append(what)
    return out


@pytest.mark.slow
def test_point_1_one_scored_pass_is_the_timed_work(traced_run: tuple[list[str], Path]) -> None:
    """FlagScale's run makes one pass (evaluate.py's loop), scored and timed: e2e_time covers
    it alone. Today's case made a validation pass and then infer_passes more."""
    trace, run_dir = traced_run
    assert trace.count("forward") == BATCHES, "each batch forwarded once in the whole run"
    assert len(_windows(trace)) == BATCHES
    result = json.loads((run_dir / "events.jsonl").read_text().splitlines()[-1])
    assert result["kind"] == "result" and result["status"] == "passed"
    m = result["metrics"]
    assert m.get("p_val_whole") is m.get("p_val_core") is None  # the seed's "/"
    assert m["p_infer_core"] >= m["p_infer_whole"] > 0 and 0 < m["loss"] < 10


@pytest.mark.slow
def test_point_8_core_window_is_copy_forward_and_loss(traced_run: tuple[list[str], Path]) -> None:
    """p_infer_core's window is FlagScale's forward_step: the batch's host-to-device copy,
    the forward and the vocabulary-parallel cross-entropy, in that order, every step.
    Today's held the forward alone (the copy before it, the loss after or none)."""
    for window in _windows(traced_run[0]):
        assert "forward" in window and "loss" in window, window
        forward = window.index("forward")
        assert window[:forward].count("copy") >= 2, window  # input_ids, attention_mask...
        assert window.index("loss") > forward, window


@pytest.mark.slow
def test_point_3_vocabulary_parallel_loss_equals_the_gathered_one(
    data_dir: Path, tmp_path: Path
) -> None:
    """Two gloo processes: each rank's logits are its half of the vocabulary (FlagScale's
    parallel_output=True; today's were gathered to the full vocabulary on every rank), and
    the case's vocabulary-parallel cross-entropy and greedy ids equal torch's over the
    gathered logits."""
    proc = _python(*TORCHRUN, str(PROBE), str(data_dir), str(tmp_path / "two.pt"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = torch.load(tmp_path / "two.pt")
    vocab = json.loads((data_dir / "checkpoint" / "config.json").read_text())["vocab_size"]
    assert got["logits"].shape[-1] == vocab and got["width"] == vocab // 2
    assert torch.allclose(got["nll"], got["nll_gathered"], rtol=1e-6, atol=1e-6)
    assert torch.equal(got["greedy"], got["greedy_gathered"])


def test_point_11_the_seed_commit_is_the_one_whose_readme_is_the_page() -> None:
    """The seed page equals FlagPerf's README at db1edaa2 (line ends aside); e4c7e52d's
    README differs in whitespace and its run_inference.py by a logfile.close()."""
    fixture = yaml.safe_load(
        (REPO / "tests/fixtures/flagperf/aquila_33b-inference.yaml").read_text()
    )
    assert fixture["commit"] == SEED_COMMIT
    doc = " ".join((REPO / "docs" / "cases" / "aquila.md").read_text().split())
    assert f"commit {SEED_COMMIT[:8]}" in doc and "e4c7e52d (2023-10-13" not in doc
    seeds = (REPO / "docs" / "cases" / "README.md").read_text()
    (row,) = [line for line in seeds.splitlines() if line.startswith("| 002 |")]
    assert f"`{SEED_COMMIT}`" in row


@pytest.mark.skipif(
    not os.environ.get("FLAGPERF_GIT_DIR"), reason="FLAGPERF_GIT_DIR: a FlagPerf clone's .git"
)
def test_point_11_against_a_flagperf_clone() -> None:
    """With a clone of FlagOpen/FlagPerf (FLAGPERF_GIT_DIR): the README at the cited commit
    is the seed page, byte for byte once CRLF is LF; at e4c7e52d it is not."""

    def readme(commit: str) -> bytes:
        git = ["git", "--git-dir", os.environ["FLAGPERF_GIT_DIR"], "show", f"{commit}:{README}"]
        return subprocess.run(git, capture_output=True, check=True).stdout.replace(b"\r\n", b"\n")

    assert hashlib.sha256(readme(SEED_COMMIT)).hexdigest() == SEED_PAGE_SHA256
    assert hashlib.sha256(readme("e4c7e52d")).hexdigest() != SEED_PAGE_SHA256
