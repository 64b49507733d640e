"""Device memory as the device reports it (issue 27 point 5): the seeds' ``mem`` column is
what FlagPerf's monitors read from the vendor's tool for the whole device, not torch's
allocator. The vendors' tools are stand-ins on PATH here (no accelerator on this machine):
they answer in the syntax fleetperf's readers were written from (nvidia-smi's query syntax
for ixsmi; the table FlagPerf's kunlunxin_monitor.py reads for xpu_smi).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
from harness import memory

MIB = 1 << 20


def _tool(folder: Path, name: str, script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = folder / name
    tool.write_text("#!/bin/sh\n" + script)
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


# Two device rows of an xpu_smi table, laid out so that awk's fields 22 and 24 (FlagPerf's
# used and total MiB) are 29696 and 32768 for the first device and 1024 and 32768 for the
# second, fields 14, 27 and 29 (utilisation, power, temperature) 87, 120 and 45.
_XPU_ROW = (
    "| {pci} a b c d e f g h i j k {util} l m n o p q r {used} MiB {total} MiB s 120 W 45 C |"
)
XPU_SMI = "\n".join(
    [
        "Runtime Version: 4.23",
        "| DevID | PCI Addr | ... |",
        _XPU_ROW.format(pci="0000:3d:00.0", util=87, used=29696, total=32768),
        _XPU_ROW.format(pci="0000:3e:00.0", util=3, used=1024, total=32768),
        "| Processes: ... |",
    ]
)


def test_xpu_smi_row_fields_are_flagperfs() -> None:
    row = XPU_SMI.splitlines()[2].split()
    assert (row[13], row[21], row[23], row[26], row[28]) == ("87", "29696", "32768", "120", "45")
    assert memory.parse_xpu_smi(XPU_SMI, 0) == (29696 * MIB, 32768 * MIB)
    assert memory.parse_xpu_smi(XPU_SMI, 1) == (1024 * MIB, 32768 * MIB)
    assert memory.parse_xpu_smi(XPU_SMI, 2) == (None, None)
    assert memory.parse_xpu_smi("no table at all", 0) == (None, None)


def test_each_vendors_tool_answers_for_the_whole_device(tmp_path, monkeypatch) -> None:
    _tool(
        tmp_path,
        "ixsmi",
        '[ "$1 $2 $3" = "--query-gpu=memory.used,memory.total -i 1" ] || exit 3\n'
        "echo '5120, 32768'\n",
        monkeypatch,
    )
    _tool(tmp_path, "xpu_smi", f"cat <<'END'\n{XPU_SMI}\nEND\n", monkeypatch)
    assert memory.device_memory_bytes("iluvatar", 1) == (5120 * MIB, 32768 * MIB)
    assert memory.device_memory_bytes("kunlunxin", 0) == (29696 * MIB, 32768 * MIB)
    assert memory.device_memory_bytes("iluvatar", 0) == (None, None)  # the tool refused
    assert memory.device_memory_bytes("cpu", 0) == (None, None)


@dataclass
class _Accelerator:  # what MemoryMonitor reads of a harness Device, for a device torch lacks
    vendor: str
    stack: SimpleNamespace
    type: str = "cuda"
    index: int = 0


def test_monitor_keeps_the_devices_peak_and_says_what_it_is(tmp_path, monkeypatch) -> None:
    """The device's used memory (every process on it, as FlagPerf's monitor reads it), not
    this process's: sampled at the tool interval, its peak kept."""
    used = tmp_path / "used"
    used.write_text("1024")
    _tool(
        tmp_path,
        "ixsmi",
        'case "$1" in --query-gpu=*) echo "$(cat ' + str(used) + '), 32768";; *) exit 3;; esac\n',
        monkeypatch,
    )
    now = [0.0]
    device = _Accelerator("iluvatar", SimpleNamespace(nvml=False, smi="ixsmi"))
    monitor = memory.MemoryMonitor(device, tool_interval_s=10, clock=lambda: now[0])
    assert "no device-wide reading" in monitor.source
    monitor.sample()
    used.write_text("30000")
    now[0] = 5.0
    monitor.sample()  # within the interval: not read
    assert monitor._device_peak == 1024 * MIB
    now[0] = 11.0
    monitor.sample()
    used.write_text("2048")
    now[0] = 22.0
    monitor.sample()
    assert monitor._device_peak == 30000 * MIB and monitor._device_total == 32768 * MIB
    assert monitor.source.startswith("mem_used_gib: the device's used memory")
