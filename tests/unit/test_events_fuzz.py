"""A seeded fuzz of the workload-line parser (hypothesis is not installed): over 10,000
lines of mutated contract records, random JSON, random bytes and oversize lines, it never
raises, and it yields an event exactly when the line keeps docs/workload-contract.md."""

from __future__ import annotations

import json
import math
import random
from typing import Any

from harness.events import KINDS

from tui.core.events import DROPPED, MAX_LINE_BYTES, Dropped, parse, parse_line

VALID: dict[str, dict[str, Any]] = {
    "start": {"world_size": 2, "case": "c", "precision": "fp32"},
    "step": {"step": 3, "samples": 24, "tokens": 100, "loss": 0.5, "lr": 1e-3, "throughput": 9.5},
    "eval": {"name": "acc", "value": 0.9, "samples": 10},
    "sys": {"cpu_percent": 12.5, "host_mem_used_gib": 1.0, "host_mem_total_gib": 4.0},
    "result": {
        "status": "passed",
        "converged": True,
        "message": None,
        "metrics": {"p_core": 1.5, "mfu": None},
        "notes": ["n"],
        "environment": {"hostname": "h", "packages": {"torch": "2"}},
    },
    "error": {"message": "boom", "traceback": "tb"},
}
REQUIRED = {
    "start": ("world_size",),
    "step": ("step", "samples"),
    "eval": ("name", "value"),
    "result": ("status", "converged"),
}


def _finite_and_bounded(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value) < 2**63
    if isinstance(value, dict):
        return all(_finite_and_bounded(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite_and_bounded(v) for v in value)
    return True


def _count(value: Any, least: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def keeps_contract(line: str) -> bool:
    """The oracle, written from the contract's text, not from the parser."""
    if len(line.encode("utf-8", "replace")) > MAX_LINE_BYTES:
        return False
    try:
        rec = json.loads(line)
    except (ValueError, RecursionError):
        return False
    if not isinstance(rec, dict) or not _finite_and_bounded(rec):
        return False
    kind = rec.get("kind")
    if kind not in KINDS or not _count(rec.get("rank")) or not _number(rec.get("t")):
        return False
    if kind == "start":
        return _count(rec.get("world_size"), least=1)
    if kind == "step":
        return _count(rec.get("step")) and _count(rec.get("samples"))
    if kind == "eval":
        return isinstance(rec.get("name"), str) and rec["name"] != "" and _number(rec.get("value"))
    if kind == "result":
        metrics, notes = rec.get("metrics"), rec.get("notes")
        return (
            rec.get("status") in ("passed", "failed")
            and isinstance(rec.get("converged"), bool)
            and (metrics is None or isinstance(metrics, dict))
            and (
                notes is None or isinstance(notes, list) and all(isinstance(n, str) for n in notes)
            )
        )
    return True  # sys, error: nothing beyond the header is required


ODD_VALUES: list[Any] = [
    None, True, False, 0, -1, 1, 2**63, -(2**63) - 1, 10**30, 0.5, -0.0, 1e308, "", "x", "12",
    [], [1, "a"], {}, {"a": 1}, "\x1b[31mred\x1b[0m", "\u202e", "\ud800"[:0],
]  # fmt: skip
RAW_VALUES = [
    "1e999", "-1e999", "NaN", "Infinity", "-Infinity", "9" * 400, "-" + "9" * 25,
    "[" * 3000 + "]" * 3000, '{"a":' * 2000 + "1" + "}" * 2000, '"' + "y" * 70_000 + '"',
]  # fmt: skip


def _record(rng: random.Random) -> dict[str, Any]:
    kind = rng.choice(KINDS)
    rec: dict[str, Any] = {"t": 1.7e9 + rng.random(), "kind": kind, "rank": rng.randrange(4)}
    rec.update(json.loads(json.dumps(VALID[kind])))
    return rec


def _mutated(rng: random.Random) -> str:
    """A contract record with a few fields removed, retyped or replaced by raw JSON text."""
    rec = _record(rng)
    keys = [*rec, *REQUIRED.get(rec["kind"], ()), "extra"]
    raw: dict[str, str] = {}
    for _ in range(rng.randrange(4)):
        key = rng.choice(keys)
        action = rng.randrange(4)
        if action == 0:
            rec.pop(key, None)
        elif action == 1:
            rec[key] = rng.choice(ODD_VALUES)
        elif action == 2:
            rec[key] = rng.choice(KINDS) if key == "kind" else rng.randrange(-3, 10)
        else:
            raw[key] = rng.choice(RAW_VALUES)
            rec[key] = None
    line = json.dumps(rec, allow_nan=True, ensure_ascii=rng.random() < 0.5)
    for key, text in raw.items():  # raw JSON text json.dumps would not write
        line = line.replace(f"{json.dumps(key)}: null", f"{json.dumps(key)}: {text}", 1)
    return line


def _random_json(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.randrange(8 if depth < 4 else 5)
    if pick < 5:
        return rng.choice(ODD_VALUES)
    if pick == 5:
        return [_random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    keys = ["t", "kind", "rank", "metrics", "notes", "status", "converged", "value", "name"]
    return {rng.choice(keys): _random_json(rng, depth + 1) for _ in range(rng.randrange(6))}


def lines(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        choice = i % 10
        if choice < 6:
            out.append(_mutated(rng))
        elif choice < 8:
            out.append(json.dumps(_random_json(rng)))
        elif choice == 8:
            out.append(
                bytes(rng.randrange(256) for _ in range(rng.randrange(80))).decode(
                    "utf-8", "replace"
                )
            )
        else:  # oversize: a valid record padded past the limit, or a cut one
            rec = _record(rng)
            rec["pad"] = "z" * (MAX_LINE_BYTES + rng.randrange(-200, 200))
            text = json.dumps(rec)
            out.append(text if rng.random() < 0.7 else text[: rng.randrange(len(text))])
    return out


def test_the_parser_never_raises_and_yields_events_exactly_for_contract_lines() -> None:
    fuzz = lines(seed=18, n=12_000)
    kept = dropped = 0
    for line in fuzz:
        ev = parse("fuzz", "h", line, received=1.0)
        if isinstance(ev, Dropped):
            assert not ev.reason.startswith("unreadable"), (ev.reason, line[:200])
            assert not keeps_contract(line), ("dropped a contract line", ev.reason, line[:200])
            dropped += 1
        else:
            assert keeps_contract(line), ("an event from a line breaking the contract", line[:200])
            rec = json.loads(line)
            assert (ev.t, ev.rank, ev.run_id, ev.host) == (
                float(rec["t"]),
                rec["rank"],
                "fuzz",
                "h",
            )
            kept += 1
    # The mix exercises both sides, not only one.
    assert kept > 2000 and dropped > 5000, (kept, dropped)


def test_every_drop_is_counted_under_its_run() -> None:
    DROPPED.take("fuzz-count")
    fuzz = lines(seed=7, n=2000)
    dropped = sum(parse_line("fuzz-count", "h", line) is None for line in fuzz)
    assert DROPPED.take("fuzz-count").total() == dropped > 0
