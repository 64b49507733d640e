"""The base cases (cases/base-*, docs/cases/base.md): real runs on this CPU, the reference
checks the issue asks for (the GEMM rate against the same torch.mm loop run directly, the
all_reduce bus bandwidth against a plain torch.distributed loop started by hand), and bad
input refused in one line naming the file and the field."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import testhosts
import yaml
from conftest import REPO, Fleetperf
from llm_cases import events, resolved_config, run_workload

sys.path.insert(0, str(REPO / "cases"))

import harness  # noqa: E402
from harness import case as case_yaml  # noqa: E402
from harness import peak_cache, peakmeter  # noqa: E402
from harness.gemm import Gemm, timed  # noqa: E402

from tui.catalog import catalog  # noqa: E402
from tui.localfleet.inventory import fleet_inventory  # noqa: E402

CASES = REPO / "cases"
BASE = ("base-computation", "base-memory-bandwidth", "base-memory-capacity", "base-interconnect")
ONE_THREAD = {"OMP_NUM_THREADS": "1"}  # as the CPU configs' env sets it

pytestmark = pytest.mark.xdist_group(__name__)  # one worker: the peak cache measured once


@pytest.fixture(scope="module")
def peak_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """One measured-peak cache for every run here (each run reads it, the first fills it)."""
    return {**ONE_THREAD, "FLEETPERF_PEAK_CACHE": str(tmp_path_factory.mktemp("peak") / "p.json")}


def run_case(
    tmp_path: Path, case: str, ref: str, env: dict[str, str], nproc: int = 1, **sets: object
) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    """The case's run.py as the controller launches it on config ``ref``; (process, events).
    No data directory: a base case requires none."""
    config = resolved_config(case, ref, tmp_path / "run", **sets)
    proc = run_workload(case, config, tmp_path / "data", nproc=nproc, extra_env=env, timeout=120)
    return proc, events(config.parent)


def result_of(proc: subprocess.CompletedProcess[str], evs: list[dict]) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    (result,) = [e for e in evs if e["kind"] == "result"]
    assert result["status"] == "passed"
    return result


def test_every_base_config_loads_and_resolves() -> None:
    for name in BASE:
        case = catalog.load_case(name, CASES)
        assert case.kind == "base" and case.target is None
        refs = catalog.config_refs(case)
        assert {r.split("/")[0] for r in refs} == {"cpu", "nvidia", "iluvatar", "kunlunxin"}
        for ref in refs:
            spec = catalog.resolve(case, catalog.load_config(case, ref))
            assert spec.hp["datasheet_source"], ref  # every figure, or its absence, explained
            if not spec.hp["datasheet"]:
                assert spec.hp["datasheet_source"].startswith(("none", "not a vendor")), ref


def test_a_precision_the_chip_lacks_is_refused_naming_file_and_field(tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    shutil.copytree(CASES / "base-computation", cases / "base-computation")
    configs = cases / "base-computation" / "configs"
    (configs / "cpu" / "CPUx1x1-int8.yaml").write_text("overrides: {precision: int8}\n")
    (configs / "nvidia" / "A100x1x8-fp8.yaml").write_text("overrides: {precision: fp8}\n")
    case = catalog.load_case("base-computation", cases)
    with pytest.raises(catalog.CatalogError) as err:
        catalog.load_config(case, "cpu/CPUx1x1-int8")
    assert str(err.value).endswith(
        "base-computation/configs/cpu/CPUx1x1-int8.yaml: overrides.precision: precision "
        "'int8' is not available on vendor 'cpu'; its GEMMs take fp32, bf16, fp64"
    )
    with pytest.raises(catalog.CatalogError) as err:
        catalog.load_config(case, "nvidia/A100x1x8-fp8")
    assert "A100x1x8-fp8.yaml: overrides.precision: precision 'fp8' is not available on " in (
        str(err.value)
    )
    assert "FP8 needs an NVIDIA Ada, Hopper or later GPU" in str(err.value)


def test_gemm_types_are_the_base_case_s_alone() -> None:
    """fp64, int8, fp8 mean nothing to a model case: refused there, taken by the case that
    lists them under choices.precision."""
    model = catalog.load_case("distilbert-pytorch", CASES)
    with pytest.raises(ValueError, match=r"expected one of fp32, tf32, amp, fp16, bf16 \(got"):
        model.check("precision", "fp64")
    base = case_yaml.load_case_file(CASES / "base-computation")
    assert [base.check("precision", p) for p in ("fp64", "int8", "fp8", "tf32")] == [
        "fp64",
        "int8",
        "fp8",
        "tf32",
    ]
    assert harness.vendors.precision_problem("nvidia", "fp8", "H100") is None
    assert harness.vendors.precision_problem("cpu", "fp64") is None


def test_the_measured_peak_times_its_matmuls_with_the_base_case_s_gemm(monkeypatch) -> None:
    """One GEMM timer: peakmeter builds harness.gemm's Gemm and times it with its timed()."""
    built: list[tuple[str, int]] = []

    class Counting(Gemm):
        def __init__(self, device, precision, side):
            built.append((precision, side))
            super().__init__(device, precision, side)

    monkeypatch.setattr(peakmeter, "Gemm", Counting)
    monkeypatch.setattr(peakmeter, "MAX_SIDE", {"cpu": 256, "cuda": 256})
    device = harness.open_device("cpu", "fp32")
    entry = peakmeter.measure(device, "fp32")
    assert built == [("fp32", 256)] and entry["matmul_n"] == 256
    assert peakmeter.timed is timed


@pytest.mark.slow
@pytest.mark.parametrize(
    ("ref", "precision"),
    [("cpu/CPUx1x1", "fp32"), ("cpu/CPUx1x1-fp64", "fp64"), ("cpu/CPUx1x1-bf16", "bf16")],
)
def test_base_computation_runs_on_cpu(tmp_path, peak_env, ref, precision) -> None:
    proc, evs = run_case(tmp_path, "base-computation", ref, peak_env)
    result = result_of(proc, evs)
    metrics = result["metrics"]
    assert metrics["gemm_tflops"] > 0 and metrics["gemm_tflops_min"] == metrics["gemm_tflops"]
    assert metrics["gemm_tflops_datasheet"] is None and metrics["gemm_tflops_ratio"] is None
    assert any(n.startswith("datasheet value unknown, ratio null: none") for n in result["notes"])
    (device,) = result["per_device"]
    assert device == {"rank": 0, "node": 0, "value": metrics["gemm_tflops"], "ratio": None}
    assert f"at {precision} after 3 warm-up" in " ".join(result["notes"])
    # At a model's math the rate fills the measured-peak cache mfu_measured divides by.
    (cached,) = [n for n in result["notes"] if n.startswith("measured-peak cache")]
    if precision == "fp64":
        assert cached.endswith("fp64 is not a model math, nothing cached")
    elif "loaded" not in cached:  # a host busy with other work keeps its old entry
        entries = peak_cache.read_entries(Path(peak_env["FLEETPERF_PEAK_CACHE"]))
        (entry,) = [e for e in entries.values() if e["math"] == precision]
        assert entry["source"] == "base-computation" and entry["mem_bw_bytes_per_s"] > 0
        assert entry["matmul_flops"] == pytest.approx(metrics["gemm_tflops"] * 1e12)


DIRECT_MM = r"""
import sys, time, torch
torch.set_num_threads(1)
dtype, n, warmup, iters = torch.float32, int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
best = 0.0
for _ in range(3):
    for _ in range(warmup):
        torch.mm(a, b)
    t0 = time.perf_counter()
    for _ in range(iters):
        torch.mm(a, b)
    best = max(best, 2 * n**3 * iters / (time.perf_counter() - t0) / 1e12)
print(best)
"""


@pytest.mark.slow
def test_gemm_tflops_match_the_same_torch_mm_loop_run_directly(tmp_path, peak_env) -> None:
    """The reference check: the case's rate and a bare torch.mm loop of the same size, one
    thread each, within the noise of a shared 2-core host: run in turn (direct, case, direct,
    case, ...) so that both see the same load, the best of three each compared."""
    hp = catalog.resolve(*_spec("base-computation", "cpu/CPUx1x1")).hp
    args = [str(hp[k]) for k in ("matrix_size", "warmup", "iterations")]
    directs, cases = [], []
    for i in range(3):
        out = subprocess.run(
            [sys.executable, "-c", DIRECT_MM, *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        directs.append(float(out.stdout))
        run = run_case(tmp_path / str(i), "base-computation", "cpu/CPUx1x1", peak_env)
        cases.append(result_of(*run)["metrics"]["gemm_tflops"])
    case, direct = max(cases), max(directs)
    assert 0.67 < case / direct < 1.5, (case, direct)


def _spec(case: str, ref: str) -> tuple[catalog.CaseFile, catalog.VendorConfig]:
    spec = catalog.load_case(case, CASES)
    return spec, catalog.load_config(spec, ref)


@pytest.mark.slow
def test_base_memory_bandwidth_runs_on_cpu(tmp_path, peak_env) -> None:
    result = result_of(*run_case(tmp_path, "base-memory-bandwidth", "cpu/CPUx1x1", peak_env))
    assert result["metrics"]["mem_bw_gbps"] > 0.1  # GB/s: any host copies faster
    assert "20 copies of 64 MiB after 2 warm-up ones" in result["notes"]


@pytest.mark.slow
def test_base_memory_capacity_holds_what_max_gib_allows(tmp_path, peak_env) -> None:
    result = result_of(*run_case(tmp_path, "base-memory-capacity", "cpu/CPUx1x1", peak_env))
    assert result["metrics"]["mem_capacity_gib"] == 0.25
    assert "capped at max_gib 0.25 GiB: the device may hold more" in result["notes"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("max_gib", "says"),
    [
        (4096, "hp.max_gib: 4096 GiB is more than this host's available memory ("),
        (0, "hp.max_gib: 0 (up to the whole memory) is refused on a CPU"),
    ],
)
def test_a_capacity_bound_beyond_memory_is_refused(tmp_path, peak_env, max_gib, says) -> None:
    proc, evs = run_case(tmp_path, "base-memory-capacity", "cpu/CPUx1x1", peak_env, max_gib=max_gib)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()  # one line, no traceback
    assert line.startswith(f"error: {tmp_path / 'run' / 'config.json'}: {says}")
    assert not [e for e in evs if e["kind"] == "result"]


@pytest.mark.slow
def test_h2d_on_a_host_without_a_device_is_refused(tmp_path, peak_env) -> None:
    """Before, a null row that passed (issue 41 point 10); tests/cases/test_base_rows.py."""
    proc, evs = run_case(tmp_path, "base-interconnect", "cpu/CPUx1x2", peak_env, test="h2d")
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"error: {tmp_path / 'run' / 'config.json'}: hp.test: h2d copies")
    assert not [e for e in evs if e["kind"] == "result"]


@pytest.mark.slow
def test_a_collective_on_one_process_is_refused(tmp_path, peak_env) -> None:
    proc, _ = run_case(tmp_path, "base-interconnect", "cpu/CPUx1x2", peak_env)  # 1 process
    assert proc.returncode == 2
    assert "config.json: hp.test: allreduce needs 2 processes or more" in proc.stderr


@pytest.mark.slow
def test_p2p_between_two_processes_over_gloo(tmp_path, peak_env) -> None:
    proc, evs = run_case(tmp_path, "base-interconnect", "cpu/CPUx1x2-p2p", peak_env, nproc=2)
    result = result_of(proc, evs)
    assert result["world_size"] == 2
    sender, receiver = result["per_device"]
    assert sender["value"] > 0 and receiver["value"] > 0  # each side's own clock
    assert result["metrics"]["bus_gbps_min"] == min(sender["value"], receiver["value"])


PLAIN_ALL_REDUCE = r"""
import os, sys, time, torch, torch.distributed as dist
torch.set_num_threads(1)
dist.init_process_group("gloo")
n, warmup, iters = dist.get_world_size(), int(sys.argv[1]), int(sys.argv[2])
tensor = torch.zeros(int(sys.argv[3]), 1024, 1024)
best = 0.0
for _ in range(2):
    for _ in range(warmup):
        dist.all_reduce(tensor)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(tensor)
    seconds = time.perf_counter() - t0
    best = max(best, tensor.numel() * 4 * iters / seconds / 1e9 * 2 * (n - 1) / n)
if dist.get_rank() == 0:
    print(best)
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_all_reduce_busbw_matches_a_plain_torch_distributed_loop(tmp_path, peak_env) -> None:
    """The reference check: busbw of 2 local processes against the same tensor all-reduced
    the same number of times by a bare torch.distributed loop under torchrun, within the
    noise of a shared 2-core host (best of 2 runs each)."""
    results = [
        result_of(*run_case(tmp_path / str(i), "base-interconnect", "cpu/CPUx1x2", peak_env, 2))
        for i in range(2)
    ]
    assert any("busbw = algbw x 2(n-1)/n, n = 2" in n for n in results[0]["notes"])
    case = max(r["metrics"]["bus_gbps"] for r in results)
    hp = catalog.resolve(*_spec("base-interconnect", "cpu/CPUx1x2")).hp
    args = [str(hp[k]) for k in ("warmup", "iterations", "melements")]
    script = tmp_path / "plain_all_reduce.py"
    script.write_text(PLAIN_ALL_REDUCE)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    plain = subprocess.run(
        [*torchrun, "--nproc_per_node", "2", str(script), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    by_hand = float(plain.stdout.strip().splitlines()[-1])
    # FlagPerf's doubled figure would be 2x, algbw 0.5x: both outside
    assert 0.67 < case / by_hand < 1.5, (case, by_hand)


@pytest.mark.slow
def test_fleetperf_batch_runs_a_base_case(tmp_path: Path) -> None:
    """`fleetperf --batch --case base-computation --config cpu/CPUx1x1`: no prepare step,
    the FlagPerf-style table with the measured, datasheet and ratio columns."""
    fp = Fleetperf(cases_dir=CASES, data_root=tmp_path / "data", results=tmp_path / "results")
    started = time.monotonic()
    proc = fp.batch("base-computation", "cpu/CPUx1x1", timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "| precision | gemm_tflops | gemm_tflops_datasheet | gemm_tflops_ratio |" in proc.stdout
    (record,) = fp.records()
    assert record["status"] == "passed"
    assert record["metrics"]["gemm_tflops"] > 0
    assert time.monotonic() - started < 120
    # kind: base: no model ran, so no model figure, no peak, no note about either
    assert all(record["metrics"][k] is None for k in case_yaml.MODEL_METRICS)
    assert record["peak"] is None
    notes = "\n".join(record["notes"])
    assert not re.search(r"mfu|p_\*|p_whole|tokens|warm-up:|inference|energy", notes), notes
    assert "| p_" not in proc.stdout and "MFU" not in proc.stdout


def test_batch_refuses_a_collective_on_one_process_before_launch(tmp_path: Path) -> None:
    """What the workload refuses at start (case.yaml needs_two_processes), refused before
    launch naming the config file and the field."""
    cases = tmp_path / "cases"  # no cpu config has one process: h2d is not offered on cpu
    shutil.copytree(CASES / "base-interconnect", cases / "base-interconnect")
    (cases / "base-interconnect" / "configs" / "cpu" / "CPUx1x1.yaml").write_text(
        "overrides: {melements: 4, datasheet_source: none}\n"
    )
    fp = Fleetperf(cases_dir=cases, data_root=tmp_path / "data", results=tmp_path / "results")
    proc = fp.batch("base-interconnect", "cpu/CPUx1x1", "test=p2p", timeout=60)
    assert proc.returncode == 2
    assert (
        "base-interconnect/configs/cpu/CPUx1x1.yaml: test: p2p needs 2 processes or"
        " more (a config CHIPx1x2 or CHIPx2x1); this run has 1"
    ) in proc.stderr
    assert "Traceback" not in proc.stderr and fp.records() == []  # nothing launched


def test_batch_refuses_a_precision_the_cpu_lacks_before_launch(tmp_path: Path) -> None:
    fp = Fleetperf(cases_dir=CASES, data_root=tmp_path / "data", results=tmp_path / "results")
    proc = fp.batch("base-computation", "cpu/CPUx1x1", "precision=int8", timeout=60)
    assert proc.returncode == 2
    assert "precision 'int8' is not available on vendor 'cpu'" in proc.stderr
    assert "Traceback" not in proc.stderr and fp.records() == []  # nothing launched


@pytest.mark.slow
@pytest.mark.skipif(testhosts.available() is not None, reason=str(testhosts.available()))
def test_all_reduce_across_two_fleet_hosts(tmp_path: Path) -> None:
    """The inter-server row: cpu/CPUx2x1 on two hosts as `fleetperf fleet up 2` makes them,
    one process each over gloo."""
    fp = Fleetperf(cases_dir=CASES, data_root=tmp_path / "data", results=tmp_path / "r")
    with testhosts.TestNetwork(tmp_path / "net") as net:
        net.add_host("node1")
        net.add_host("node2")
        inventory = tmp_path / "inventory.yml"
        inventory.write_text(yaml.safe_dump(fleet_inventory(net)))  # `fleet up 2`'s own
        out = fp.batch("base-interconnect", "cpu/CPUx2x1", args=("-i", str(inventory)))
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    (rec,) = fp.records()
    assert rec["status"] == "passed" and rec["hosts"] == ["node1", "node2"]
    assert rec["metrics"]["bus_gbps"] > 0
    assert "| CPU两机单卡（2x1） | test=allreduce,melements=4 |" in out.stdout
