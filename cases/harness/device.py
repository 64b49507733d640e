"""The device layer: everything that differs between vendors, decided in one place.

``open_device(vendor, precision, local_rank)`` returns a ``Device`` that a case uses for its
device, autocast, grad scaler, synchronisation, distributed backend, memory reading and the
device's name. The vendor comes from config.json; the harness never picks a device by
"cuda if available".

- ``nvidia``     torch's CUDA devices, nccl, NVML (nvidia-ml-py) for names, driver and memory.
- ``iluvatar``   Iluvatar CoreX's CUDA-compatible torch: the same ``cuda`` device type and
                 nccl; ``ixsmi`` (nvidia-smi's query syntax) for driver and process memory.
- ``kunlunxin``  Kunlunxin XPUs through ``torch_xmlir``, which registers the devices behind
                 torch's CUDA-compatible API (``cuda`` device type, nccl backed by BKCL).
                 Memory from torch's allocator only: we found no documented query syntax for
                 its ``xpu_smi`` tool.
- ``cpu``        the host's CPU, gloo; memory is host memory (``harness.memory``).

iluvatar and kunlunxin are written from their documented APIs and have not run on their
hardware (docs/harness.md).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import platform
import shutil
import subprocess
import weakref
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from harness.errors import InputError
from harness.vendors import FP8_MIN_CAPABILITY, TF32_MIN_CAPABILITY, precision_problem


@dataclass(frozen=True)
class VendorStack:
    device_type: str  # torch device type
    backend: str  # torch.distributed backend
    extension: str | None = None  # module that must be imported to reach the devices
    smi: str | None = None  # management tool with nvidia-smi's --query syntax
    nvml: bool = False  # nvidia-ml-py reads this vendor's devices


STACKS: dict[str, VendorStack] = {
    "nvidia": VendorStack("cuda", "nccl", nvml=True),
    "iluvatar": VendorStack("cuda", "nccl", smi="ixsmi"),
    "kunlunxin": VendorStack("cuda", "nccl", extension="torch_xmlir"),
    "cpu": VendorStack("cpu", "gloo"),
}


@dataclass
class Device:
    """One process's accelerator (or CPU) for one precision."""

    vendor: str
    precision: str
    torch_device: Any  # torch.device
    stack: VendorStack
    name: str  # as the hardware reports it
    driver: str | None
    scaler: Any = None  # torch.amp.GradScaler for amp/fp16, else None
    notes: list[str] = field(default_factory=list)  # settings the result should mention
    _autocast: Callable[[], AbstractContextManager[Any]] = nullcontext

    @property
    def type(self) -> str:
        return self.torch_device.type

    @property
    def backend(self) -> str:
        return self.stack.backend

    @property
    def index(self) -> int | None:
        return self.torch_device.index

    @property
    def pin_memory(self) -> bool:
        """Whether data loaders should pin host memory (for copies to an accelerator)."""
        return self.type != "cpu"

    @property
    def ddp_device_ids(self) -> list[int] | None:
        """DistributedDataParallel's ``device_ids`` for this device."""
        return None if self.type == "cpu" else [self.torch_device.index]

    def autocast(self) -> AbstractContextManager[Any]:
        """The context the forward pass runs in (a no-op for fp32 and tf32)."""
        return self._autocast()

    def cast_weights(self, model: Any) -> Any:
        """``model`` with its weights in the precision's type, for cases whose FlagPerf code
        casts the model (``model.half()``): float16 for ``fp16``, bfloat16 for ``bf16``,
        unchanged for fp32, tf32 and amp (autocast over float32 weights). A float16 model
        trains through ``optimizer()``, which keeps float32 master weights."""
        import torch

        dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(self.precision)
        return model if dtype is None else model.to(dtype)

    def optimizer(self, make: Callable[[Any], Any], params: Any) -> Any:
        """``make(params)`` (a torch optimizer), with float32 master copies in place of any
        float16 parameters (a model ``cast_weights`` made half): the optimizer and the
        gradient scaler work on the copies, whose gradients ``Run.optimize`` fills after
        backward and whose stepped values go back to the model after each step, as apex's
        and FlagPerf's FP16_Optimizer do. torch's GradScaler refuses float16 gradients."""
        import torch

        groups = list(params)
        if groups and not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        pairs: list[tuple[Any, Any]] = []
        masters = []
        for group in groups:
            own = []
            for p in group["params"]:
                if p.dtype == torch.float16:
                    master = p.detach().float().requires_grad_(p.requires_grad)
                    pairs.append((p, master))
                    p = master
                own.append(p)
            masters.append({**group, "params": own})
        optimizer = make(masters)
        if pairs:
            _MASTERS[optimizer] = pairs
            optimizer.register_step_post_hook(lambda *_: _masters_to_model(pairs))
        return optimizer

    def synchronize(self) -> None:
        """Wait for all work queued on this device (a no-op on CPU)."""
        if self.type != "cpu":
            import torch

            torch.cuda.synchronize(self.torch_device)

    def math_mode(self) -> str:
        """The math the matmuls ran at: fp32, tf32, fp16 or bf16.

        Read when asked (at the end of a run), so that a library that switched fp32 matmuls
        to TF32 or to bf16 passes ("medium" float32 matmul precision) is caught.
        """
        if self.precision in ("amp", "fp16"):
            return "fp16"
        if self.precision in ("bf16", "tf32"):
            return self.precision
        if self.type == "cuda":
            import torch

            return fp32_matmul_math(torch)
        return "fp32"


# optimizer -> (float16 model parameter, its float32 master) pairs, from Device.optimizer
_MASTERS: weakref.WeakKeyDictionary[Any, list[tuple[Any, Any]]] = weakref.WeakKeyDictionary()


def grads_to_masters(optimizer: Any) -> None:
    """Copy the float16 model's gradients (whole: after backward and any all-reduce) into
    ``optimizer``'s float32 masters and free them; a no-op for an optimizer without masters."""
    for param, master in _MASTERS.get(optimizer, ()):
        master.grad = None if param.grad is None else param.grad.float()
        param.grad = None


def _masters_to_model(pairs: list[tuple[Any, Any]]) -> None:
    import torch

    with torch.no_grad():
        for param, master in pairs:
            param.copy_(master)


def fp32_matmul_math(torch: Any) -> str:
    """The math CUDA runs float32 matmuls at under torch's current settings: fp32, tf32 or
    bf16 ("medium" precision lets them run bf16 passes)."""
    try:
        setting = torch.get_float32_matmul_precision()
    except RuntimeError:  # a library used torch >= 2.9's per-backend API: read that one
        setting = {"tf32": "high", "bf16": "medium"}.get(
            torch.backends.cuda.matmul.fp32_precision, "highest"
        )
    return {"high": "tf32", "medium": "bf16"}.get(setting, "fp32")


def open_device(vendor: str, precision: str, local_rank: int = 0) -> Device:
    """The device of ``local_rank`` for ``vendor`` at ``precision``; InputError if it cannot."""
    problem = precision_problem(vendor, precision)
    if problem:
        raise InputError(problem)
    stack = STACKS[vendor]
    import torch

    if stack.extension:
        try:
            importlib.import_module(stack.extension)
        except ImportError as e:
            raise InputError(f"vendor {vendor!r} needs {stack.extension} ({e})") from None
    notes: list[str] = []
    if stack.device_type == "cpu":
        dev = torch.device("cpu")
        # denormal floats appear as a model learns and slow CPU math several times over
        torch.set_flush_denormal(True)
        notes.append("CPU: denormals flushed to zero (torch.set_flush_denormal)")
        name, driver = cpu_model(), None
    else:
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if local_rank >= count:
            raise InputError(
                f"vendor {vendor!r}: no device for local rank {local_rank} "
                f"(torch sees {count} device(s))"
            )
        dev = torch.device(stack.device_type, local_rank)
        torch.cuda.set_device(dev)
        capability = tuple(torch.cuda.get_device_capability(dev))
        if precision == "tf32" and capability < TF32_MIN_CAPABILITY:
            raise InputError(
                f"precision 'tf32' needs an Ampere or later GPU (compute capability 8.0); "
                f"device {local_rank} has {capability[0]}.{capability[1]}"
            )
        if precision == "fp8" and capability < FP8_MIN_CAPABILITY:
            raise InputError(
                f"precision 'fp8' needs an NVIDIA Ada, Hopper or later GPU (compute capability "
                f"8.9); device {local_rank} has {capability[0]}.{capability[1]}"
            )
        name, driver = _accelerator_name_and_driver(stack, local_rank)
    autocast, scaler = _precision(torch, dev, precision)
    return Device(vendor, precision, dev, stack, name, driver, scaler, notes, autocast)


def _precision(torch: Any, dev: Any, precision: str) -> tuple[Callable[[], Any], Any]:
    """(autocast factory, GradScaler or None). Float32 math is set for every precision
    (autocast leaves some ops in float32): TF32 matmuls and convolutions for ``tf32``, strict
    FP32 otherwise, whatever the image or a library set before. One API for matmuls
    (``set_float32_matmul_precision``; torch >= 2.9 refuses to read a mix of it and
    ``allow_tf32``); cuDNN has only its flag."""
    tf32 = precision == "tf32"
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    torch.backends.cudnn.allow_tf32 = tf32
    if precision in ("amp", "fp16"):
        autocast = partial(torch.autocast, dev.type, dtype=torch.float16)
        return autocast, torch.amp.GradScaler(dev.type)
    if precision == "bf16":
        return partial(torch.autocast, dev.type, dtype=torch.bfloat16), None
    return nullcontext, None


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux)."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "cpu model"):
                return value.strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def _accelerator_name_and_driver(stack: VendorStack, index: int) -> tuple[str, str | None]:
    import torch

    name = torch.cuda.get_device_name(index)
    driver = None
    if stack.nvml:
        from harness import nvml

        name = nvml.device_name(index) or name
        driver = nvml.driver_version()
    elif stack.smi:
        rows = smi_query(stack.smi, "--query-gpu=driver_version", f"--id={index}")
        driver = rows[0][0] if rows and rows[0] else None
    return name, driver


def smi_query(tool: str, *args: str) -> list[list[str]]:
    """Rows of an nvidia-smi-style CSV query (``--format=csv,noheader,nounits`` added); [] if
    the tool is missing or fails."""
    path = shutil.which(tool)
    if path is None:
        return []
    try:
        done = subprocess.run(
            [path, *args, "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return [[c.strip() for c in line.split(",")] for line in done.stdout.splitlines() if line]


def smi_process_memory_bytes(tool: str, pid: int = 0) -> int | None:
    """Device memory of process ``pid`` (this one by default) as the smi tool reports it."""
    pid = pid or os.getpid()
    for row in smi_query(tool, "--query-compute-apps=pid,used_memory"):
        if len(row) == 2 and row[0] == str(pid) and row[1].isdigit():
            return int(row[1]) << 20  # MiB
    return None
