"""NVML (nvidia-ml-py) access, optional: every function returns None where NVML is missing."""

from __future__ import annotations

import contextlib
from typing import Any

_handles: dict[int, Any] = {}
_failed = False

# NVML's clocks event (throttle) reason bits (nvml.h), by the name a sys record gives them:
# the reasons that mean the hardware held the clocks down, not idle or application settings.
THROTTLE_BITS = {
    "thermal": 0x20 | 0x40,  # SW thermal slowdown, HW thermal slowdown
    "power_cap": 0x04,  # SW power cap
    "hw_slowdown": 0x08 | 0x80,  # HW slowdown, HW power brake slowdown
}


def device_handle(index: int) -> Any | None:
    """The NVML handle of CUDA device ``index`` (as torch numbers it), or None."""
    global _failed
    if index in _handles:
        return _handles[index]
    if _failed:
        return None
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no nvidia-ml-py, no driver
        _failed = True
        return None
    handle = None
    try:  # torch's numbering follows CUDA_VISIBLE_DEVICES, NVML's does not: match by UUID
        import torch

        uuid = str(torch.cuda.get_device_properties(index).uuid)
        if not uuid.startswith(("GPU-", "MIG-")):
            uuid = "GPU-" + uuid
        handle = pynvml.nvmlDeviceGetHandleByUUID(uuid)
    except Exception:
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception:
            handle = None
    _handles[index] = handle
    return handle


def readings(index: int) -> dict[str, float]:
    """What NVML says of CUDA device ``index`` now, as the ``sys`` record's ``dev{d}_*``
    fields want them: board power and its default limit (the board's TDP) in W, GPU
    temperature in °C, memory used and total (every process) in GiB, utilisation in %, SM
    and memory clocks in MHz, and ``throttle_<reason>`` (1 active, 0 not) for each of
    THROTTLE_BITS. A figure the device or driver does not give is left out."""
    handle = device_handle(index)
    if handle is None:
        return {}
    import pynvml

    queries = {
        "power_w": lambda: pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
        "power_limit_w": lambda: pynvml.nvmlDeviceGetPowerManagementDefaultLimit(handle) / 1000.0,
        "temp_c": lambda: float(
            pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
        ),
        "util": lambda: float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu),
        "sm_clock_mhz": lambda: float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
        "mem_clock_mhz": lambda: float(
            pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM)
        ),
    }
    out: dict[str, float] = {}
    for key, query in queries.items():
        with contextlib.suppress(Exception):  # NVMLError_NotSupported on some boards
            out[key] = query()
    if (reasons := _event_reasons(pynvml, handle)) is not None:
        for name, bits in THROTTLE_BITS.items():
            out[f"throttle_{name}"] = 1.0 if reasons & bits else 0.0
    used, total = device_memory_bytes(index)
    if used is not None and total:
        out["mem_used_gib"] = used / 2**30
        out["mem_total_gib"] = total / 2**30
    return out


def _event_reasons(pynvml: Any, handle: Any) -> int | None:
    """The clocks event reasons bitmask (drivers from 535; older ones: throttle reasons)."""
    for name in (
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
    ):
        with contextlib.suppress(Exception):
            return int(getattr(pynvml, name)(handle))
    return None


def device_memory_bytes(index: int) -> tuple[int | None, int | None]:
    """(memory used on the device by every process, device total), bytes: NVML's
    ``nvmlDeviceGetMemoryInfo``, the figure nvidia-smi's Memory-Usage column shows."""
    handle = device_handle(index)
    if handle is None:
        return None, None
    import pynvml

    try:
        info = pynvml.nvmlDeviceGetMemoryInfo(handle)
    except Exception:
        return None, None
    return int(info.used), int(info.total)


def process_memory_bytes(index: int, pid: int) -> int | None:
    """Memory used by process ``pid`` on CUDA device ``index``, bytes.

    The figure includes the CUDA context, which torch's allocator does not see; it is None
    where NVML cannot map the pid (e.g. inside a container's pid namespace).
    """
    handle = device_handle(index)
    if handle is None:
        return None
    import pynvml

    try:
        for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
            if proc.pid == pid and proc.usedGpuMemory is not None:
                return int(proc.usedGpuMemory)
    except Exception:
        pass
    return None


def device_name(index: int) -> str | None:
    """The device's name as NVML reports it (e.g. "NVIDIA A100-SXM4-80GB")."""
    handle = device_handle(index)
    if handle is None:
        return None
    import pynvml

    try:
        name = pynvml.nvmlDeviceGetName(handle)
    except Exception:
        return None
    return name.decode() if isinstance(name, bytes) else str(name)


def driver_version() -> str | None:
    """The NVIDIA driver version, once NVML is initialised (after a device_handle call)."""
    if _failed or not _handles:
        return None
    import pynvml

    try:
        version = pynvml.nvmlSystemGetDriverVersion()
    except Exception:
        return None
    return version.decode() if isinstance(version, bytes) else str(version)
