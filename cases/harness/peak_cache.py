"""The measured-peak cache: one JSON file per data root, standard library only.

``harness.peakmeter`` measures a host's achievable dense matmul rate and memory bandwidth once
per host, device and math mode and keeps them here; ``fleetperf peak`` (the controller, no
torch) prints the file. Location: ``$FLEETPERF_PEAK_CACHE`` if set, else ``peaks.json`` in
the data root (a workload's ``--data-dir`` is ``<data root>/<case>``).

File layout: ``{"version": 1, "entries": {key: entry}}``, key ``host|device|math``, entry::

    {"host", "device", "math", "matmul_flops", "matmul_n", "mem_bw_bytes_per_s",
     "measured_at" (unix s), "seconds" (the measurement's duration), "torch",
     "load_per_cpu" (the host's load while measured)}
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

ENV_VAR = "FLEETPERF_PEAK_CACHE"
FILE_NAME = "peaks.json"
VERSION = 1


def cache_path(data_root: str | os.PathLike[str]) -> Path:
    """The cache file for ``data_root`` (the environment variable wins)."""
    override = os.environ.get(ENV_VAR)
    return Path(override) if override else Path(data_root) / FILE_NAME


def entry_key(host: str, device: str, math: str) -> str:
    return f"{host}|{device}|{math}"


def read_entries(path: Path) -> dict[str, dict[str, Any]]:
    """The cached entries; {} for a missing file. ValueError naming the file if malformed."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a readable peak cache ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("entries"), dict):
        raise ValueError(f"{path}: not a peak cache (no 'entries' object)")
    return data["entries"]


def write_entry(path: Path, entry: dict[str, Any]) -> None:
    """Add or replace one entry; the file is replaced atomically (readers never see half)."""
    try:
        entries = read_entries(path)
    except ValueError:
        entries = {}  # a corrupt cache is rebuilt, not fatal
    entries[entry_key(entry["host"], entry["device"], entry["math"])] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"version": VERSION, "entries": entries}, indent=1) + "\n")
    os.replace(tmp, path)


def format_entries(entries: dict[str, dict[str, Any]]) -> str:
    """A plain-text table of the cache, one line per entry."""
    header = f"{'host':<20} {'device':<40} {'math':<5} {'matmul TFLOP/s':>14} {'mem GB/s':>9}"
    lines = [header]
    for entry in sorted(entries.values(), key=lambda e: (e["host"], e["device"], e["math"])):
        flops, bw = entry.get("matmul_flops"), entry.get("mem_bw_bytes_per_s")
        lines.append(
            f"{entry['host']:<20} {entry['device']:<40} {entry['math']:<5} "
            f"{flops / 1e12 if flops else float('nan'):>14.3f} "
            f"{bw / 1e9 if bw else float('nan'):>9.1f}"
        )
    return "\n".join(lines)
