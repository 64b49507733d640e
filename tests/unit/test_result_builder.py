"""build_result: metrics by registry name, both MFUs by hand, chip checks, environment."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "cases"))

import harness  # noqa: E402
from harness import peak_cache  # noqa: E402
from harness.device import STACKS, Device  # noqa: E402
from harness.peakmeter import device_label  # noqa: E402
from harness.perf import PerfTotals, mark_main_start, process_start_time  # noqa: E402

# 2 ranks: 64 counted samples of 128 padded tokens, 3.6 s of training without evaluation
TOTALS = PerfTotals(
    samples=64,
    tokens=3000,
    padded_tokens=64 * 128,
    steps=10,
    warmup_steps=2,
    warmup_samples=32,
    whole_time=5.6,
    eval_time=2.0,
    train_time=3.6,
    compute_time=2.4,
)
FLOPS = harness.ModelFlops(per_token=1.0e6, per_sequence=5.0e4, formula="test")
MODEL_FLOPS_PER_S_PER_DEVICE = (1.0e6 * 64 * 128 + 5.0e4 * 64) / 3.6 / 2


@pytest.fixture
def cpu_device():
    import torch

    try:
        yield harness.open_device("cpu", "fp32")
    finally:
        torch.set_flush_denormal(False)


def _cache(tmp_path: Path, device: Device, math: str, flops: float) -> Path:
    """A cache that already holds this host's entry, so nothing is measured."""
    path = tmp_path / "peaks.json"
    entry = {
        "host": socket.gethostname(),
        "device": device_label(device),
        "math": math,
        "matmul_flops": flops,
        "matmul_n": 1024,
        "mem_bw_bytes_per_s": 1e10,
        "measured_at": 0.0,
    }
    peak_cache.write_entry(path, entry)
    return path


def _build(device: Device, chip: str | None, cache: Path, **kw) -> dict:
    args = {
        "totals": TOTALS,
        "world_size": 2,
        "device": device,
        "chip": chip,
        "flops": FLOPS,
        "memory": (1.5, 24.0),
        "converged": True,
        "peak_cache": cache,
        "metrics": {"acc": 0.93, "loss": 0.2},
    }
    return harness.build_result(**{**args, **kw})


def test_cpu_result_by_hand(cpu_device, tmp_path):
    cache = _cache(tmp_path, cpu_device, "fp32", 5.0e10)
    main_start = process_start_time() + 0.5  # main() began half a second into the process
    mark_main_start(main_start)
    result = _build(cpu_device, "CPU", cache)
    m = result["metrics"]
    assert set(m) <= set(harness.METRICS)
    assert m["p_whole"] == pytest.approx(64 / 5.6) and m["p_core"] == pytest.approx(64 / 2.4)
    assert m["p_train"] == pytest.approx(64 / 3.6)
    assert m["tokens_per_s_per_device"] == pytest.approx(3000 / 3.6 / 2)
    assert m["warmup_samples"] == 32
    assert m["mfu"] is None  # no datasheet peak for a CPU
    assert m["mfu_measured"] == pytest.approx(MODEL_FLOPS_PER_S_PER_DEVICE / 5.0e10)
    assert (m["acc"], m["loss"], m["mem_used_gib"], m["mem_total_gib"]) == (0.93, 0.2, 1.5, 24.0)
    assert m["e2e_time"] - m["e2e_time_main"] == pytest.approx(0.5, abs=0.05)
    assert m["e2e_time_main"] >= time.time() - main_start - 0.1
    assert result["status"] == "passed" and result["converged"] and result["world_size"] == 2
    notes = "\n".join(result["notes"])
    assert f"mfu null: no datasheet peak for device {cpu_device.name!r}" in notes
    assert "the first 2 steps (32 samples) are left out" in notes
    assert "5e+04 per sequence" in notes and "test" in notes
    assert "mfu_measured: divided by 0.05 TFLOP/s, the fp32 matmul rate" in notes
    assert "mem on CPU: peak memory of the process" in notes
    assert "measured while the host was busy" not in notes  # the cached peak was quiet
    env = result["environment"]
    assert env["hostname"] == socket.gethostname() and env["accelerator"] == cpu_device.name
    assert env["python"] == ".".join(map(str, sys.version_info[:3]))
    assert {"torch", "transformers", "peft", "deepspeed"} <= set(env["packages"])
    assert result["peak"]["measured_flops"] == 5.0e10 and result["peak"]["math"] == "fp32"


def test_metrics_outside_the_registry_are_refused(cpu_device, tmp_path):
    cache = _cache(tmp_path, cpu_device, "fp32", 5.0e10)
    with pytest.raises(ValueError, match="accuracy"):
        _build(cpu_device, "CPU", cache, metrics={"accuracy": 0.9})
    extra = harness.registry([harness.Metric("f1", "fraction", True, ".3f", "F1 score")])
    assert _build(cpu_device, "CPU", cache, metrics={"f1": 0.8}, registry=extra)["metrics"]["f1"]


def test_inference_leaves_the_training_rates_out(cpu_device, tmp_path):
    cache = _cache(tmp_path, cpu_device, "fp32", 5.0e10)
    result = _build(cpu_device, "CPU", cache, training=False, metrics={"p_infer_core": 10.0})
    assert not {"p_whole", "p_train", "p_core"} & set(result["metrics"])
    # the timed window's real tokens per second per device, as for training
    assert result["metrics"]["tokens_per_s_per_device"] == pytest.approx(3000 / 3.6 / 2)
    assert result["metrics"]["p_infer_core"] == 10.0 and result["metrics"]["mfu_measured"]
    notes = "\n".join(result["notes"])  # an inference run has no training time to speak of
    assert "over the timed inference window's wall time" in notes
    assert "tokens_per_s_per_device: real (non-pad) tokens of the timed inference" in notes
    assert "training time" not in notes and "p_* count real samples" not in notes


def _gpu(name: str, precision: str = "fp32") -> Device:
    """A CUDA-type device as the device layer describes one; nothing here touches a GPU,
    since the cache already holds its measured peak."""
    import torch

    return Device("nvidia", precision, torch.device("cuda", 0), STACKS["nvidia"], name, "550.1")


def test_fp32_that_ran_tf32_is_divided_by_the_tf32_peak(tmp_path):
    import torch

    device = _gpu("NVIDIA A100-SXM4-80GB")
    cache = _cache(tmp_path, device, "tf32", 120e12)
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")  # what a library might do
        result = _build(device, "A100", cache)
    finally:
        torch.set_float32_matmul_precision(before)
    m = result["metrics"]
    assert m["mfu"] == pytest.approx(MODEL_FLOPS_PER_S_PER_DEVICE / 156e12)
    assert m["mfu_measured"] == pytest.approx(MODEL_FLOPS_PER_S_PER_DEVICE / 120e12)
    assert any("precision fp32 ran its matmuls at tf32" in n for n in result["notes"])
    assert result["environment"]["accelerator"] == "NVIDIA A100-SXM4-80GB"
    assert result["peak"]["chip"] == "A100" and result["peak"]["datasheet_flops"] == 156e12
    assert not any(n.startswith("mem on CPU") for n in result["notes"])


@pytest.mark.parametrize(
    ("name", "chip", "tf32_peak"),
    [("NVIDIA A100-SXM4-40GB", "A100", 156e12), ("NVIDIA H100 80GB HBM3", "H100", 494.7e12)],
)
def test_a_tf32_run_is_divided_by_the_tf32_datasheet_peak(tmp_path, name, chip, tf32_peak):
    """precision tf32: MFU over the chip's dense TF32 figure (A100 156, H100 SXM 494.7
    TFLOP/s), not FP32's; the record's peak says which."""
    device = _gpu(name, "tf32")
    result = _build(device, chip, _cache(tmp_path, device, "tf32", 100e12))
    assert result["metrics"]["mfu"] == pytest.approx(MODEL_FLOPS_PER_S_PER_DEVICE / tf32_peak)
    assert result["peak"]["math"] == "tf32" and result["peak"]["datasheet_flops"] == tf32_peak
    assert not any("ran its matmuls at" in n for n in result["notes"])  # asked for, got


def test_pcie_card_under_an_sxm_config_has_no_datasheet_mfu(tmp_path):
    device = _gpu("NVIDIA H100 PCIe", "bf16")
    cache = _cache(tmp_path, device, "bf16", 600e12)
    result = _build(device, "H100", cache)
    assert result["metrics"]["mfu"] is None
    assert result["metrics"]["mfu_measured"] == pytest.approx(MODEL_FLOPS_PER_S_PER_DEVICE / 6e14)
    (note,) = [n for n in result["notes"] if n.startswith("mfu null")]
    assert "'H100'" in note and "'NVIDIA H100 PCIe'" in note
    # the same card under its own config
    ok = _build(device, "H100-PCIe", cache)
    assert ok["metrics"]["mfu"] == pytest.approx(MODEL_FLOPS_PER_S_PER_DEVICE / (1513e12 / 2))


@pytest.mark.parametrize(
    ("config_chip", "name", "math", "peak", "says"),
    [
        ("A100", "NVIDIA A100-PCIE-40GB", "bf16", 312e12, None),
        ("a800", "NVIDIA A800-SXM4-80GB", "fp16", 312e12, None),
        ("V100", "Tesla V100-SXM2-32GB", "bf16", None, "no datasheet peak for V100 at bf16"),
        ("V100", "Tesla V100-PCIE-16GB", "fp16", None, "'V100' is not the hardware's"),
        ("A100", "AMD EPYC 7B13", "fp32", None, "(no datasheet entry)"),
        ("CPU", "AMD EPYC 7B13", "fp32", None, "no datasheet peak for device 'AMD EPYC 7B13'"),
        ("BI-V100", "Iluvatar BI-V100", "fp16", 147e12, None),
        (None, "Tesla T4", "fp16", 65e12, None),
    ],
)
def test_datasheet_peak(config_chip, name, math, peak, says):
    got, note = harness.datasheet_peak(config_chip, name, math)
    assert got == peak
    assert (note is None) if says is None else (says in note)


def test_model_flops_rate_edges():
    rate = harness.result._model_flops_per_s_per_device
    flops = harness.ModelFlops(per_token=2.0)
    assert flops.of(10, 3) == 20.0  # nothing per sequence unless given
    assert rate(flops, PerfTotals(padded_tokens=10, train_time=0.0), 1) is None
    assert rate(flops, PerfTotals(padded_tokens=10, train_time=0.5), 1) == 40.0
    assert rate(flops, PerfTotals(padded_tokens=10, train_time=0.5), 4) == 10.0
    assert rate(flops, PerfTotals(padded_tokens=0, train_time=0.5), 1) is None  # no work


def test_a_peak_measured_on_a_busy_host_says_so(cpu_device):
    measured = {
        "matmul_flops": 2.0e12,
        "host": "h",
        "device": "d",
        "matmul_n": 512,
        "cached": False,
        "load_per_cpu": 1.5,
    }
    notes = harness.result._notes(TOTALS, FLOPS, cpu_device, "fp32", None, measured)
    assert "mfu_measured: divided by 2 TFLOP/s" in "\n".join(notes)
    assert any("busy (load 1.5 per CPU) and is not cached" in n for n in notes)
