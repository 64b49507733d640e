"""Clocks, temperature and throttle reasons from a vendor smi tool with nvidia-smi's query
syntax (iluvatar's ``ixsmi``), as the ``sys`` record's ``dev{d}_*`` fields want them.

Written from nvidia-smi's documented query fields, which ixsmi's documentation says it
follows; it has not run on Iluvatar hardware (docs/monitoring.md). A field the tool does
not give fails its whole query: clocks and temperature are asked apart from the reasons
(nvidia-smi's ``clocks_throttle_reasons.active``, NVML's bitmask), so one missing field
costs only its group, and anything unreadable is left out.
"""

from __future__ import annotations

from harness.device import smi_query
from harness.nvml import THROTTLE_BITS

_FIGURES = ("clocks.sm", "clocks.mem", "temperature.gpu")
_FIGURE_KEYS = ("sm_clock_mhz", "mem_clock_mhz", "temp_c")
# The active reasons as NVML's bitmask ("0x0000000000000004"), read as NVML's are.
_REASONS = "clocks_throttle_reasons.active"


def smi_readings(tool: str, devices: int) -> dict[int, dict[str, float]]:
    """Per device index 0..devices-1 (the tool's numbering), what ``tool`` says now."""
    out: dict[int, dict[str, float]] = {}
    for row in smi_query(tool, "--query-gpu=index," + ",".join(_FIGURES)):
        if (d := _index(row, devices, len(_FIGURES))) is not None:
            for key, cell in zip(_FIGURE_KEYS, row[1:], strict=True):
                try:
                    out.setdefault(d, {})[key] = float(cell)
                except ValueError:  # [N/A], [Not Supported]
                    continue
    for row in smi_query(tool, f"--query-gpu=index,{_REASONS}"):
        if (d := _index(row, devices, 1)) is None:
            continue
        try:
            mask = int(row[1], 16)
        except ValueError:
            continue
        for name, bits in THROTTLE_BITS.items():
            out.setdefault(d, {})[f"throttle_{name}"] = 1.0 if mask & bits else 0.0
    return out


def _index(row: list[str], devices: int, width: int) -> int | None:
    if len(row) != width + 1 or not row[0].isdigit() or int(row[0]) >= devices:
        return None
    return int(row[0])
