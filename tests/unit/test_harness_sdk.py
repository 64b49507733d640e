"""The case SDK (harness.Run, harness.layout, harness.case): hp checked once against
case.yaml, and the accounting of samples and tokens under tensor parallelism, run for real
(a tiny column-parallel model over gloo under torchrun)."""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "cases"))

import harness  # noqa: E402
from harness import peak_cache  # noqa: E402
from harness.case import load_case_file  # noqa: E402
from harness.layout import Layout  # noqa: E402
from harness.peakmeter import device_label  # noqa: E402

BATCH, SEQ, DIM, STEPS, WARMUP = 4, 8, 64, 12, 2
STEP_S = 0.1  # each step's compute is padded to this wall time: see tp_case
CASE_YAML = f"""\
name: tpcase
model: linear
dataset: random
task: test
kind: training
entrypoint: run.py
report: [p_train]
defaults:
  precision: fp32
  train_batch_size: {BATCH}
  learning_rate: 0.01
  max_seq_length: {SEQ}
  max_samples: {BATCH * STEPS}
  log_every_steps: 4
  warmup_steps: {WARMUP}
  seed: 1
  tp: 1
"""
# A column-parallel linear layer: each of the tp ranks holds DIM/tp output columns and
# computes its share of every token; the shares are gathered. Both layouts run the same batch
# per group and spend the same wall time per step (the compute is tiny, a sleep sets the
# step's time as a perfect 1/tp speed-up would), so a group's tokens/s is the same and the
# per-device rate must halve at tp=2.
RUN_PY = f"""\
import sys, time
import harness, torch
import torch.distributed as dist


def main(run):
    tp = run.parallel(tp=run.hp.tp).tp
    torch.manual_seed(0)
    weight = torch.nn.Parameter(torch.randn({DIM}, {DIM} // tp) / {DIM})
    opt = torch.optim.SGD([weight], lr=run.hp.learning_rate)
    per_token = 6 * {DIM} * {DIM}  # a DIM x DIM matmul, forward and backward
    flops = harness.ModelFlops(per_token, 0.0, "6 x DIM^2")
    batches = [torch.randn(run.hp.train_batch_size, {SEQ}, {DIM}) for _ in range(64)]
    for x in run.train(batches):
        with run.step(len(x), x.shape[0] * x.shape[1], x.shape[0] * x.shape[1]) as step:
            t0 = time.perf_counter()
            local = x @ weight
            if tp > 1:
                parts = [torch.empty_like(local) for _ in range(tp)]
                dist.all_gather(parts, local.detach())
                parts[dist.get_rank()] = local
                local = torch.cat(parts, -1)
            step.loss = local.pow(2).mean()
            run.optimize(step.loss, opt)
            time.sleep(max(0.0, {STEP_S} - (time.perf_counter() - t0)))
    run.finish(flops)


if __name__ == "__main__":
    sys.exit(harness.run_case(__file__, main))
"""


@pytest.fixture
def tp_case(tmp_path: Path) -> Path:
    case = tmp_path / "cases" / "tpcase"
    case.mkdir(parents=True)
    (case / "case.yaml").write_text(CASE_YAML)
    (case / "run.py").write_text(RUN_PY)
    (tmp_path / "data" / "tpcase").mkdir(parents=True)
    return case


def _config(run_dir: Path, hp: dict, **fields) -> Path:
    run_dir.mkdir(parents=True)
    config = {"vendor": "cpu", "chip": "CPU", "precision": "fp32", "hp": hp, **fields}
    path = run_dir / "config.json"
    path.write_text(json.dumps({k: v for k, v in config.items() if v is not None}))
    return path


def _hp(**over) -> dict:
    import yaml

    return {**yaml.safe_load(CASE_YAML)["defaults"], **over}


def _launch(case: Path, run_dir: Path, nproc: int) -> list[dict]:
    launcher = (
        ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
        if nproc > 1
        else []
    )
    data = case.parents[1] / "data" / "tpcase"
    argv = [
        sys.executable,
        *launcher,
        str(case / "run.py"),
        "--config",
        str(run_dir / "config.json"),
    ]
    proc = subprocess.run(
        [*argv, "--data-dir", str(data), "--run-dir", str(run_dir)],
        env={**os.environ, "PYTHONPATH": str(REPO / "cases"), "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_tensor_parallel_group_counts_its_batch_once(tp_case: Path, tmp_path: Path) -> None:
    results, steps = {}, {}
    for tp in (1, 2):
        run_dir = tmp_path / f"tp{tp}"
        _config(run_dir, _hp(tp=tp))
        events = _launch(tp_case, run_dir, nproc=tp)
        results[tp] = events[-1]
        steps[tp] = [e for e in events if e["kind"] == "step"]
    per_token = 6 * DIM * DIM
    for tp, result in results.items():
        assert result["kind"] == "result" and result["status"] == "passed", result
        m, peak = result["metrics"], result["peak"]
        # the batch of every step once, not once per TP rank
        assert steps[tp][-1]["tokens"] == STEPS * BATCH * SEQ
        assert steps[tp][-1]["samples"] == STEPS * BATCH
        assert m["warmup_samples"] == WARMUP * BATCH
        # MFU x peak x devices = FLOPs per token x group tokens/s
        group_tokens_per_s = m["tokens_per_s_per_device"] * tp
        assert m["mfu_measured"] * peak["measured_flops"] * tp == pytest.approx(
            per_token * group_tokens_per_s, rel=1e-9
        )
        assert peak["model_flops_per_s_per_device"] * tp == pytest.approx(
            per_token * group_tokens_per_s, rel=1e-9
        )
    # the same group throughput (the sleep sets the step time), spread over twice the devices
    ratio = (
        results[2]["peak"]["model_flops_per_s_per_device"]
        / results[1]["peak"]["model_flops_per_s_per_device"]
    )
    assert 0.35 < ratio < 0.65, ratio
    group = [results[tp]["metrics"]["p_train"] for tp in (1, 2)]
    assert 0.7 < group[1] / group[0] < 1.4, group
    assert any("tensor parallel 2" in n for n in results[2]["notes"])


def test_layout_ranks_and_counting() -> None:
    grid = [Layout(rank, 8, tp=2, pp=2) for rank in range(8)]
    assert {g.dp for g in grid} == {2}
    assert [(g.pp_rank, g.dp_rank, g.tp_rank) for g in grid[:4]] == [
        (0, 0, 0),
        (0, 0, 1),
        (0, 1, 0),
        (0, 1, 1),
    ]
    # one counting rank per tensor/pipeline group: tensor rank 0 of the last stage
    assert [g.rank for g in grid if g.counts] == [4, 6]
    assert all(g.counts for g in (Layout(r, 4) for r in range(4)))  # pure data parallel
    with pytest.raises(ValueError, match="do not split"):
        Layout(0, 6, tp=4)


def test_sum_counted_leaves_out_non_counting_ranks_alone() -> None:
    # one process: the identity for a counting rank, zeros for a non-counting one
    assert harness.sum_counted([3, 4.5]) == [3.0, 4.5]
    assert harness.sum_counted([3, 4.5], counts=False) == [0.0, 0.0]


def _run(case: Path, config: Path, run_dir: Path) -> harness.Run:
    args = argparse.Namespace(config=config, data_dir=case.parents[1] / "data" / "tpcase")
    args.run_dir = run_dir
    events = harness.EventWriter(run_dir / "events.jsonl", 0, 0)
    return harness.Run(load_case_file(case), args, harness.DistEnv(), events)


def test_hp_is_checked_once_against_case_yaml(tp_case: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "ok"
    run = _run(tp_case, _config(run_dir, _hp(learning_rate=1)), run_dir)
    assert run.hp.learning_rate == 1.0 and isinstance(run.hp.learning_rate, float)
    assert run.hp.train_batch_size == BATCH and run.precision == "fp32"
    assert json.loads((run_dir / "events.jsonl").read_text())["kind"] == "start"
    no_seed = _hp()
    del no_seed["seed"]
    cases = {
        "missing": (no_seed, "hp lacks seed"),
        "unknown": (_hp(dropout=0.1), "hp.dropout: not in tpcase's case.yaml defaults"),
        "type": (_hp(train_batch_size="4"), "hp.train_batch_size: expected int like 4"),
        "bool": (_hp(tp=True), "hp.tp: expected int"),
        "bounds": (_hp(train_batch_size=0), "hp.train_batch_size: must be at least 1"),
    }
    for name, (hp, says) in cases.items():
        path = _config(tmp_path / name, hp)
        with pytest.raises(harness.InputError, match=says) as err:
            _run(tp_case, path, tmp_path / name)
        assert str(path) in str(err.value)


def test_choices_of_a_string_hp_come_from_case_yaml(tp_case: Path, tmp_path: Path) -> None:
    yaml_path = tp_case / "case.yaml"
    declared = CASE_YAML.replace("  tp: 1\n", "  tp: 1\n  mode: fast\n")
    yaml_path.write_text(declared + "choices: {mode: [fast, slow]}\n")
    path = _config(tmp_path / "ok", _hp(mode="slow"))
    run = _run(tp_case, path, tmp_path / "ok")
    assert run.hp.mode == "slow" and run.config_path == path
    path = _config(tmp_path / "bad", _hp(mode="medium"))
    with pytest.raises(harness.InputError) as err:
        _run(tp_case, path, tmp_path / "bad")
    assert str(err.value) == f"{path}: hp.mode: expected one of fast, slow (got 'medium')"
    # a malformed declaration names case.yaml and the field
    for choices, says in (
        ("{mode: fast}", "choices.mode: expected a list of strings"),
        ("{mode: [slow]}", "choices.mode: its default 'fast' is not listed"),
        ("{speed: [fast]}", "choices.speed: no such key in defaults"),
        ("[mode]", "choices: expected a mapping"),
    ):
        yaml_path.write_text(declared + f"choices: {choices}\n")
        with pytest.raises(harness.InputError, match=f"^{yaml_path}: {re.escape(says)}"):
            load_case_file(tp_case)


def test_accuracy_sums_a_score_in_eval_mode(tp_case: Path, tmp_path: Path) -> None:
    import torch

    run = _run(tp_case, _config(tmp_path / "r", _hp()), tmp_path / "r")
    model = torch.nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.eye(2))  # predicts the larger coordinate
    model.train()
    points = [([1.0, 0.0], 0), ([0.0, 1.0], 1), ([2.0, 1.0], 0), ([1.0, 3.0], 1), ([1.0, 0.5], 1)]
    rows = [(torch.tensor(x), y) for x, y in points]  # the last one predicted wrong
    seen = []

    def score(batch: list) -> tuple[int, int]:
        x, y = batch
        seen.append((model.training, torch.is_grad_enabled()))
        return int((model(x).argmax(-1) == y).sum()), len(y)

    assert run.accuracy(model, run.eval_loader(rows, 2), score) == pytest.approx(4 / 5)
    assert seen == [(False, False)] * 3 and model.training  # 3 batches; back to training
    with pytest.raises(harness.InputError, match="tpcase: the evaluation set has no rows"):
        run.accuracy(model, run.eval_loader([], 2), score)


def test_inference_finish_reports_token_rates(tmp_path: Path) -> None:
    """An inference case's result: p_infer_* and tokens_per_s_per_device from run.perf's
    window (the same totals), no training sample rates."""
    case = tmp_path / "cases" / "infer"
    case.mkdir(parents=True)
    hp = {"precision": "fp32", "eval_batch_size": 4, "warmup_steps": 1, "seed": 1}
    declared = {"name": "infer", "model": "none", "dataset": "none", "task": "test"}
    declared |= {"kind": "inference", "entrypoint": "run.py", "report": [], "defaults": hp}
    (case / "case.yaml").write_text(json.dumps(declared))  # JSON is YAML
    data = tmp_path / "data"
    (data / "tpcase").mkdir(parents=True)  # _run's data dir
    run = _run(case, _config(tmp_path / "r", hp), tmp_path / "r")
    peak_cache.write_entry(
        data / "peaks.json",
        {  # nothing measured
            "host": socket.gethostname(),
            "device": device_label(run.device),
            "math": "fp32",
            "matmul_flops": 1e10,
            "matmul_n": 1024,
            "mem_bw_bytes_per_s": 1e10,
            "measured_at": 0.0,
        },
    )
    for _ in range(3):  # the first is warm-up
        with run.step(4, tokens=40, padded_tokens=48):
            time.sleep(0.02)
    run.finish(harness.ModelFlops(100.0), converged=True)  # as aquila: no target, no loss
    events = [json.loads(line) for line in (tmp_path / "r" / "events.jsonl").open()]
    result = events[-1]
    assert result["kind"] == "result" and result["status"] == "passed"
    m = result["metrics"]
    assert not {"p_whole", "p_train", "p_core", "loss"} & set(m)
    # p_infer_* count the positions computed (FlagPerf's count), p_infer_real_* real tokens
    assert m["p_infer_real_whole"] == m["tokens_per_s_per_device"] > 0  # one device
    assert m["p_infer_whole"] == pytest.approx(m["p_infer_real_whole"] * 96 / 80, rel=1e-12)
    assert m["p_infer_core"] == pytest.approx(m["p_infer_real_core"] * 96 / 80, rel=1e-12)
    assert m["p_infer_real_core"] >= m["p_infer_real_whole"]
    assert m["p_infer_real_core"] <= 80 / 0.04  # 2 counted steps of 40 tokens, 0.02 s or more each
    # 100 FLOPs x 96 padded tokens over the window (80 tokens / tokens_per_s) / the peak
    assert m["mfu_measured"] == pytest.approx(100 * 96 / 80 * m["tokens_per_s_per_device"] / 1e10)


def _base_case(tmp_path: Path, **more: object) -> Path:
    """A ``kind: base`` case.yaml (a benchmark of the device itself) with fields ``more``."""
    case = tmp_path / "cases" / "devbench"
    case.mkdir(parents=True)
    declared = {"name": "devbench", "model": "none", "dataset": "none", "task": "test"}
    declared |= {"kind": "base", "entrypoint": "run.py", "report": [], **more}
    metric = {"name": "rate", "unit": "GB/s", "higher_is_better": True, "meaning": "a rate"}
    declared |= {"metrics": [metric]}
    declared.setdefault("defaults", {"precision": "fp32", "test": "h2d", "seed": 1})
    (case / "case.yaml").write_text(json.dumps(declared))  # JSON is YAML
    return case


def test_a_base_case_s_result_has_no_model_figures(tmp_path: Path, monkeypatch) -> None:
    """kind: base: the clocks, the memory and the case's own metric; no sample or token
    rate, no MFU, no peak (none measured), and no note about any of them."""
    monkeypatch.setenv(peak_cache.ENV_VAR, str(tmp_path / "peaks.json"))
    case = _base_case(tmp_path)
    (tmp_path / "data" / "tpcase").mkdir(parents=True)  # _run's data dir
    hp = load_case_file(case).defaults
    run = _run(case, _config(tmp_path / "r", hp), tmp_path / "r")
    run.finish(harness.ModelFlops(0.0), metrics={"rate": 2.5}, notes=["own"], converged=True)
    result = [json.loads(line) for line in (tmp_path / "r" / "events.jsonl").open()][-1]
    assert result["kind"] == "result" and result["status"] == "passed"
    assert result["peak"] is None and not (tmp_path / "peaks.json").exists()
    assert set(result["metrics"]) == {
        "e2e_time",
        "e2e_time_main",
        "mem_allocator_gib",
        "rate",
        "mem_used_gib",
        "mem_total_gib",
    }
    assert result["metrics"]["rate"] == 2.5
    notes = "\n".join(result["notes"])
    assert result["notes"][-1] == "own"
    assert not re.search(r"mfu|p_\*|p_whole|tokens|warm-up|inference|energy", notes), notes


def test_a_base_case_has_no_target_and_declares_what_needs_two_processes(tmp_path: Path) -> None:
    target = _base_case(tmp_path / "a", target={"metric": "rate", "value": 1})
    with pytest.raises(harness.InputError, match=r"case.yaml: target: a base case has none"):
        load_case_file(target)
    unknown = _base_case(tmp_path / "b", needs_two_processes={"tset": ["p2p"]})
    with pytest.raises(harness.InputError, match=r"needs_two_processes.tset: no such key"):
        load_case_file(unknown)
    case = load_case_file(_base_case(tmp_path / "c", needs_two_processes={"test": ["p2p"]}))
    assert case.kind == "base" and case.needs_two_processes == {"test": ("p2p",)}
    hp = {**case.defaults, "test": "p2p"}
    assert case.process_problem(hp, 2) is None
    assert case.process_problem(case.defaults, 1) is None  # h2d: one process will do
    assert case.process_problem(hp, 1) == (
        "test: p2p needs 2 processes or more (a config CHIPx1x2 or CHIPx2x1); this run has 1"
    )


@pytest.mark.parametrize("field", ["precision", "vendor"])
def test_no_fallback_for_precision_or_vendor(tp_case: Path, tmp_path: Path, field: str) -> None:
    path = _config(tmp_path / "r", _hp(), **{field: None})
    with pytest.raises(harness.InputError, match=f"no '{field}'"):
        _run(tp_case, path, tmp_path / "r")


def test_required_paths_come_from_case_yaml(tp_case: Path, tmp_path: Path) -> None:
    text = (tp_case / "case.yaml").read_text().replace("report:", "requires: [model.bin]\nreport:")
    (tp_case / "case.yaml").write_text(text)
    path = _config(tmp_path / "r", _hp())
    with pytest.raises(harness.InputError, match="missing data: .*tpcase/model.bin"):
        _run(tp_case, path, tmp_path / "r")


def test_world_that_does_not_split_is_bad_input(tp_case: Path, tmp_path: Path) -> None:
    run = _run(tp_case, _config(tmp_path / "r", _hp()), tmp_path / "r")
    with pytest.raises(harness.InputError, match="1 processes do not split"):
        run.parallel(tp=2)


def test_token_rates() -> None:
    tot = harness.PerfTotals(tokens=1000, padded_tokens=3000, whole_time=4.0, compute_time=2.0)
    assert harness.token_rates(tot) == (250.0, 500.0)
    assert harness.token_rates(tot, padded=True) == (750.0, 1500.0)
    assert harness.token_rates(harness.PerfTotals()) == (None, None)


def test_prepare_main_one_error_style_and_manifest(tmp_path: Path) -> None:
    script = tmp_path / "mycase" / "prepare.py"
    script.parent.mkdir()
    script.write_text(
        textwrap.dedent(
            """\
            '''Stage mycase.'''
            import sys
            import harness

            def synthetic(out, args):
                (out / "data.txt").write_text(str(args.seed))

            def stage(src, out):
                if not (src / "data.txt").is_file():
                    raise harness.InputError(f"missing data: {src / 'data.txt'}")
                harness.link_or_copy(src / "data.txt", out / "data.txt")

            sys.exit(harness.prepare_main(__file__, __doc__, synthetic, stage=stage,
                                          real_data="data.txt"))
            """
        )
    )

    def prepare(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(script), *args],
            env={**os.environ, "PYTHONPATH": str(REPO / "cases")},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    out = tmp_path / "out"
    ok = prepare("--out", str(out), "--synthetic", "--seed", "7")
    assert ok.returncode == 0, ok.stderr
    assert (out / "data.txt").read_text() == "7"
    manifest = json.loads((out / "fleetperf-data.json").read_text())
    assert manifest["synthetic"] is True and manifest["source"] is None
    staged = prepare("--out", str(tmp_path / "o2"), "--from", str(out))
    assert staged.returncode == 0, staged.stderr
    assert json.loads((tmp_path / "o2" / "fleetperf-data.json").read_text())["source"] == str(out)
    for args, says in (
        ((), "pass --synthetic, or --from DIR holding data.txt"),
        (("--from", str(tmp_path / "nope")), f"{tmp_path / 'nope'}: not a directory"),
        (("--from", str(tmp_path)), f"missing data: {tmp_path / 'data.txt'}"),
    ):
        bad = prepare("--out", str(tmp_path / "o3"), *args)
        assert bad.returncode == 2
        assert bad.stderr.startswith("error: ") and says in bad.stderr
        assert bad.stderr.count("\n") == 1
        assert not (tmp_path / "o3" / "fleetperf-data.json").exists()


# Two data-parallel ranks, DDP made by run.data_parallel and dropped when main() returns.
# The group must still be up after finish: destroyed there, the reducer's release joins
# gloo's threads under the GIL and a rank can hang after its result (seen on 2 cores).
DDP_RUN_PY = """\
import sys
import harness, torch
import torch.distributed as dist


def main(run):
    torch.manual_seed(0)
    ddp = run.data_parallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    batches = [torch.randn(run.hp.train_batch_size, 8) for _ in range(8)]
    for x in run.train(batches):
        with run.step(len(x)) as step:
            step.loss = ddp(x).pow(2).mean()
            run.optimize(step.loss, opt)
    run.finish(harness.ModelFlops(0.0, 0.0, "none"))
    run.config_path.with_name(f"rank{run.env.rank}").write_text(str(dist.is_initialized()))


if __name__ == "__main__":
    sys.exit(harness.run_case(__file__, main))
"""


@pytest.mark.slow
def test_the_process_group_outlives_finish(tp_case: Path, tmp_path: Path) -> None:
    (tp_case / "run.py").write_text(DDP_RUN_PY)
    run_dir = tmp_path / "ddp"
    _config(run_dir, _hp())
    events = _launch(tp_case, run_dir, nproc=2)
    assert events[-1]["kind"] == "result" and events[-1]["status"] == "passed", events[-1]
    assert [(run_dir / f"rank{r}").read_text() for r in (0, 1)] == ["True", "True"]
