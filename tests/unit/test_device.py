"""The device layer: vendor and precision -> device, autocast, backend, memory; refusals."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "cases"))

import harness  # noqa: E402
from half_run import half_run  # noqa: E402
from harness import memory  # noqa: E402
from harness.device import STACKS, Device, cpu_model, smi_process_memory_bytes  # noqa: E402

GIB = 1 << 30


@pytest.fixture
def float32_math():
    """Puts torch's process-wide float32 math settings back as they were."""
    import torch

    matmul, cudnn = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(matmul)
        torch.backends.cudnn.allow_tf32 = cudnn


@pytest.fixture
def open_cpu(float32_math):
    """open_device for vendor cpu; undoes its process-wide settings afterwards."""
    import torch

    try:
        yield lambda precision="fp32": harness.open_device("cpu", precision)
    finally:
        torch.set_flush_denormal(False)


def test_precision_table_and_refusal_lines():
    assert harness.precision_problem("nvidia", "tf32", "A100") is None
    assert harness.precision_problem("nvidia", "tf32", "H100") is None
    assert "TF32 needs an NVIDIA Ampere" in harness.precision_problem("nvidia", "tf32", "V100")
    assert "TF32 needs" in harness.precision_problem("nvidia", "tf32", "t4")
    assert harness.precision_problem("nvidia", "fp32", "V100") is None
    assert harness.PRECISIONS_BY_VENDOR["cpu"] == ("fp32", "bf16")
    assert "tf32" in harness.PRECISIONS_BY_VENDOR["nvidia"]
    assert "tf32" not in harness.PRECISIONS_BY_VENDOR["iluvatar"]
    assert set(harness.PRECISIONS_BY_VENDOR) == set(STACKS)
    assert harness.precision_problem("nvidia", "bf16") is None
    assert harness.precision_problem("kunlunxin", "bf16") == (
        "precision 'bf16' is not available on vendor 'kunlunxin'; it has fp32, amp, fp16"
    )
    assert "unknown vendor 'amd'" in harness.precision_problem("amd", "fp32")


def test_cpu_fp32(open_cpu):
    import torch

    device = open_cpu()
    assert (device.type, device.backend, device.index) == ("cpu", "gloo", None)
    assert device.name == cpu_model() != ""
    assert device.scaler is None and not device.pin_memory and device.ddp_device_ids is None
    with device.autocast():
        out = torch.ones(4, 4) @ torch.ones(4, 4)
    assert out.dtype == torch.float32 and device.math_mode() == "fp32"
    assert torch.ones(1).to(device.torch_device).device.type == "cpu"
    assert any("denormals" in n for n in device.notes)
    device.synchronize()  # a no-op on CPU, but callable


def test_fp32_opens_with_strict_float32_math(open_cpu):
    """Whatever set TF32 (or bf16 passes) before, fp32 means IEEE float32 matmuls."""
    import torch

    torch.set_float32_matmul_precision("high")
    torch.backends.cudnn.allow_tf32 = True
    device = open_cpu("fp32")
    assert torch.get_float32_matmul_precision() == "highest"
    assert torch.backends.cudnn.allow_tf32 is False
    assert device.math_mode() == "fp32"


@pytest.mark.parametrize(
    ("precision", "matmul", "cudnn", "math"),
    [
        ("tf32", "high", True, "tf32"),
        ("fp32", "highest", False, "fp32"),
        ("bf16", "highest", False, "bf16"),  # float32 ops outside autocast stay strict
    ],
)
def test_a_cuda_device_gets_the_precisions_float32_math(
    float32_math, precision, matmul, cudnn, math
):
    """The flags a CUDA device is opened with (set and read without a GPU: they are
    torch's process-wide settings), and the math the result divides by."""
    import torch
    from harness.device import _precision

    torch.set_float32_matmul_precision("medium" if precision == "tf32" else "high")
    _precision(torch, torch.device("cuda", 0), precision)
    assert torch.get_float32_matmul_precision() == matmul
    assert torch.backends.cudnn.allow_tf32 is cudnn
    device = Device("nvidia", precision, torch.device("cuda", 0), STACKS["nvidia"], "GPU", None)
    assert device.math_mode() == math


def test_math_mode_reads_torchs_per_backend_api_too(float32_math):
    """A library that set TF32 with torch >= 2.9's per-backend API makes the old getter
    raise; the math is still read (and opening a device sets one API again)."""
    import torch
    from harness.device import fp32_matmul_math

    if not hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        pytest.skip("torch before 2.9 has no per-backend float32 precision")
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    try:
        assert fp32_matmul_math(torch) == "tf32"
    finally:
        torch.set_float32_matmul_precision("highest")
    assert fp32_matmul_math(torch) == "fp32"


def test_cpu_bf16_autocasts_matmuls(open_cpu):
    import torch

    device = open_cpu("bf16")
    with device.autocast():
        out = torch.ones(4, 4) @ torch.ones(4, 4)
    assert out.dtype == torch.bfloat16 and device.math_mode() == "bf16"
    assert device.scaler is None


@pytest.mark.parametrize(
    ("vendor", "precision", "message"),
    [
        ("cpu", "amp", "precision 'amp' is not available on vendor 'cpu'; it has fp32, bf16"),
        ("iluvatar", "tf32", "precision 'tf32' is not available on vendor 'iluvatar'"),
        # selected by vendor: no fallback to the CPU on a host without the vendor's devices
        ("nvidia", "fp32", "vendor 'nvidia': no device for local rank 0 (torch sees 0 device"),
        ("iluvatar", "fp16", "vendor 'iluvatar': no device for local rank 0"),
        ("kunlunxin", "fp32", "vendor 'kunlunxin' needs torch_xmlir"),
    ],
)
def test_a_device_the_vendor_lacks_is_bad_input(vendor, precision, message):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this host has CUDA devices")
    with pytest.raises(harness.InputError) as info:
        harness.open_device(vendor, precision)
    assert message in str(info.value)
    assert len(str(info.value).splitlines()) == 1


def test_math_mode_reports_tf32_and_bf16_fp32_matmuls(float32_math):
    """An fp32 run whose matmuls a library switched to TF32 (or to bf16 passes) is divided by
    that math's peak. Flags only: no CUDA device is needed to read them."""
    import torch

    device = Device("nvidia", "fp32", torch.device("cuda", 0), STACKS["nvidia"], "GPU", None)
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        assert device.math_mode() == "fp32"
        torch.set_float32_matmul_precision("high")  # TF32
        assert device.math_mode() == "tf32"
        torch.set_float32_matmul_precision("medium")  # bf16 passes
        assert device.math_mode() == "bf16"
    finally:
        torch.set_float32_matmul_precision(before)
    amp = Device("nvidia", "amp", torch.device("cuda", 0), STACKS["nvidia"], "GPU", None)
    assert amp.math_mode() == "fp16"


@pytest.mark.parametrize("vendor", ["nvidia", "iluvatar", "kunlunxin"])
def test_the_timers_sync_reaches_the_device_runtime(vendor):
    """PerfTracker's timers are only right if a device's synchronize really waits: on every
    accelerator stack it calls the runtime (all three speak the cuda API). This CPU build of
    torch has no CUDA, so reaching the runtime raises; on a GPU host it returns."""
    import torch

    device = Device(vendor, "fp32", torch.device("cuda", 0), STACKS[vendor], "GPU", None)
    if torch.cuda.is_available():
        device.synchronize()
    else:
        with pytest.raises((AssertionError, RuntimeError), match="CUDA"):
            device.synchronize()


def test_cpu_memory_counts_child_processes(open_cpu):
    """Data-loader workers are child processes: their memory is the run's too."""
    # Every sample reads the children: the test process may have children of its own
    # (fixtures, or orphans the process guard reaps), and the first reading must not
    # postpone the one taken while the 512 MiB child lives.
    monitor = harness.MemoryMonitor(open_cpu(), tool_interval_s=0.0)
    used_alone, total = monitor.peak_gib()
    assert 0.01 < used_alone < total == pytest.approx(harness.host_total_gib())
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; b = b'x' * (512 << 20); print(1, flush=True); input()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "1"
        assert child.pid in memory.child_pids(os.getpid())
        assert memory.uss_bytes(child.pid) > 500 << 20
        monitor.sample()
    finally:
        child.kill()
        child.wait()
    used, _ = monitor.peak_gib()
    # this process's resident memory plus the child's 512 MiB, held while sampled
    assert used * GIB > memory.rss_bytes(os.getpid()) + (500 << 20)


def test_smi_process_memory_from_a_stand_in_tool(tmp_path, monkeypatch):
    """ixsmi takes nvidia-smi's query options; a stand-in on PATH answers like one."""
    tool = tmp_path / "ixsmi"
    tool.write_text(
        "#!/bin/sh\n"
        '[ "$1" = "--query-compute-apps=pid,used_memory" ] || exit 3\n'
        '[ "$2" = "--format=csv,noheader,nounits" ] || exit 4\n'
        "echo '111, 512'\necho '4242, 2048'\n"
    )
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert smi_process_memory_bytes("ixsmi", 4242) == 2048 << 20
    assert smi_process_memory_bytes("ixsmi", 999) is None
    assert smi_process_memory_bytes("no-such-smi", 4242) is None


@pytest.mark.parametrize(
    ("precision", "dtype"),
    [
        ("fp16", "float16"),
        ("bf16", "bfloat16"),
        ("fp32", "float32"),
        ("tf32", "float32"),
        ("amp", "float32"),
    ],
)
def test_cast_weights_casts_as_flagperfs_model_half(precision, dtype):
    """fp16 is FlagPerf's model.half(), bf16 its bfloat16 twin; amp keeps float32 weights
    under autocast, fp32 and tf32 keep them as they are."""
    import torch

    device = Device("nvidia", precision, torch.device("cuda", 0), STACKS["nvidia"], "GPU", None)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    cast = device.cast_weights(model)
    assert {p.dtype for p in cast.parameters()} == {getattr(torch, dtype)}


@pytest.fixture
def fp16_run(tmp_path):
    with half_run(tmp_path) as run:
        yield run


def test_a_half_model_trains_on_float32_masters(fp16_run):
    """FlagPerf's GLM fp16: model.half(), the optimizer steps float32 master weights with
    dynamic loss scaling and copies them back. The masters carry steps (2.5e-5) below half
    float16's spacing at 1 (4.9e-4), which a float16 weight alone would round away."""
    import torch

    model = fp16_run.device.cast_weights(torch.nn.Linear(8, 1, bias=False))
    torch.nn.init.ones_(model.weight)
    optimizer = fp16_run.device.optimizer(lambda p: torch.optim.SGD(p, lr=1e-4), model.parameters())
    master = optimizer.param_groups[0]["params"][0]
    assert model.weight.dtype == torch.float16 and master.dtype == torch.float32
    x = torch.full((4, 8), 0.125, dtype=torch.float16)  # output 1, d loss/d w = 0.25
    for _ in range(30):
        fp16_run.optimize(model(x).float().pow(2).mean(), optimizer, clip_grad=1.0)
    assert model.weight.grad is None and master.grad is None
    assert master[0, 0].item() == pytest.approx(1 - 30 * 0.25e-4, rel=1e-5)
    assert model.weight[0, 0].item() == master[0, 0].half().item() < 1
    # a plain optimizer over the float16 weights is what torch's GradScaler refuses
    plain = torch.optim.SGD(model.parameters(), lr=1e-5)
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
        fp16_run.optimize(model(x).float().pow(2).mean(), plain, clip_grad=1.0)


def test_an_overflowing_step_leaves_the_half_model_as_it_was(fp16_run):
    """A float16 gradient that overflows under the loss scale skips the step (the model keeps
    its weights) and halves the scale, as FlagPerf's DynamicLossScaler does."""
    import torch

    model = fp16_run.device.cast_weights(torch.nn.Linear(8, 1, bias=False))
    before = model.weight.detach().clone()
    optimizer = fp16_run.device.optimizer(lambda p: torch.optim.SGD(p, lr=0.1), model.parameters())
    scaler = fp16_run.device.scaler
    x = torch.full((4, 8), 100.0, dtype=torch.float16)  # 2^16 x grads ~ 1e4 overflows float16
    fp16_run.optimize(model(x).float().sum(), optimizer)
    assert torch.equal(model.weight, before)
    assert scaler.get_scale() == 2.0**15
