"""A run as the Results screen lists it, read straight from the store's columns: what its
list, filters and marks show, and what compare needs to pick a run's comparable earlier
runs. No RunRecord is validated for it (10,000 of them took 3.4 s; ResultStore.rows):
the screen reads a whole record only for a run it opens, marks, compares or exports.
Controller code: no torch, no textual."""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from tui.results.record import RunRecord
from tui.results.references import comparable_key
from tui.results.tables import capped

# The runs table's columns a row reads (besides its metrics), by their column names.
COLUMNS = (
    "run_id",
    "case_name",
    "vendor",
    "config",
    "status",
    "started",
    "smoke",
    "fix_hp",
    "hp",
    "environment",
    "synthetic_data",
    "monitoring",
    "load_per_cpu",
    "verdict",
)
_TEXT = ("run_id", "case_name", "vendor", "config", "status", "started")


@dataclass(frozen=True, slots=True)
class RunRow:
    """A run's columns under a RunRecord's names: comparable_key, busy, capped and compare
    read a row as they read a record (the fields they use, nothing else)."""

    run_id: str
    case: str
    vendor: str
    config: str
    status: str
    started: str
    smoke: bool
    fix_hp: dict[str, Any]
    hp: dict[str, Any]
    environment: dict[str, Any]
    synthetic_data: bool | None
    monitoring: dict[str, Any] | None
    load_per_cpu: float | None
    metrics: dict[str, float]  # the known values
    flagged: tuple[str, ...]  # the metrics its verdict flagged
    capped: bool  # cut short by a sample cap (tables.capped)
    # comparable_key, found once when read (compare picks a run's comparable runs by it).
    key: tuple[Any, ...]

    loaded = RunRecord.loaded


def run_row(row: Any, metric_values: dict[str, float], parsed: dict[Any, Any]) -> RunRow:
    """A RunRow from the runs table's ``COLUMNS`` (a mapping). ValueError, TypeError,
    AttributeError or KeyError: a row that is not what a record holds (untrusted).
    ``parsed``: JSON texts read before, by their text, and comparable keys found before (a
    series' runs repeat their hp, environment...; rows share those objects, which nothing
    changes)."""
    for name in _TEXT:
        if not isinstance(row[name], str):
            raise ValueError(f"{name}: not text")
    fix_hp, hp, environment, monitoring = (
        _json(row, name, parsed) for name in ("fix_hp", "hp", "environment", "monitoring")
    )
    # A verdict is read for its flagged checks alone: none where no check says true.
    verdict = _json(row, "verdict", {}) if "true" in str(row["verdict"]) else None
    if not all(isinstance(v, dict) for v in (fix_hp, hp, environment, monitoring or {})):
        raise ValueError("fix_hp, hp, environment or monitoring: not an object")
    flagged = tuple(c["metric"] for c in (verdict or {}).get("checks", []) if c["flagged"])
    if not all(isinstance(m, str) for m in flagged):
        raise ValueError("verdict: a check's metric is not text")
    load = row["load_per_cpu"]
    if load is not None and not isinstance(load, (int, float)):
        raise ValueError("load_per_cpu: not a number")
    synthetic = row["synthetic_data"]
    fields: dict[str, Any] = {
        "run_id": row["run_id"],
        "case": row["case_name"],
        "vendor": row["vendor"],
        "config": row["config"],
        "status": row["status"],
        "started": row["started"],
        "smoke": bool(row["smoke"]),
        "fix_hp": fix_hp,
        "hp": hp,
        "environment": environment,
        "synthetic_data": None if synthetic is None else bool(synthetic),
        "monitoring": monitoring,
        "load_per_cpu": load,
        "metrics": metric_values,
        "flagged": flagged,
    }
    view = SimpleNamespace(**fields)  # what the record's functions read, before the row
    # comparable_key reads these alone: the same texts, the same key (a series shares it).
    basis = ("key", *(row[name] for name in ("case_name", "vendor", "config", "hp")))
    basis += (row["environment"], fields["synthetic_data"])
    if basis not in parsed:
        parsed[basis] = comparable_key(view)  # type: ignore[arg-type]
    return RunRow(**fields, capped=capped(view), key=parsed[basis])  # type: ignore[arg-type]


def _json(row: Any, name: str, parsed: dict[Any, Any]) -> Any:
    text = row[name]
    if text not in parsed:
        try:
            parsed[text] = json.loads(text)
        except (json.JSONDecodeError, TypeError) as exc:
            raise ValueError(f"{name}: not JSON ({exc})") from None
    return parsed[text]
