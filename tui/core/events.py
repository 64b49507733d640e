"""The typed events that the batch mode and the terminal app both consume.

Three sources feed them: the engine itself (a run started or finished), the executors'
host-side steps (host phases, failures: tui/executors/steps.py) and the workload's
``events.jsonl`` lines that the poll hands back (see docs/workload-contract.md; their
kinds are the writer's, ``harness.events.KINDS``). Every event names its run first.
Nothing here imports torch or textual.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.events import KINDS

from tui.core.text import clean, clean_tree, printable

HostPhase = Literal[
    "preflight", "queued", "running", "finished", "failed", "unreachable", "stopped"
]

# A run's status, one vocabulary for the session, its events and its record: queued and
# running while it lasts; then passed, failed, aborted (the operator), bad_input (refused
# before any launch: nothing recorded) or interrupted (its controller died: a record's).
RunStatus = Literal["queued", "running", "passed", "failed", "aborted", "bad_input", "interrupted"]

# The modules of playbooks/library that the stream is keyed on (never task or play names).
TAIL_ACTION = "fleetperf_tail"
LAUNCH_ACTION = "fleetperf_launch"
PREFLIGHT_ACTION = "fleetperf_preflight"


@dataclass(frozen=True, slots=True)
class RunStarted:
    run_id: str
    case: str
    config: str
    hosts: list[str]
    t: float


@dataclass(frozen=True, slots=True)
class RunFinished:
    run_id: str
    status: RunStatus
    error: str | None
    t: float


@dataclass(frozen=True, slots=True)
class HostState:
    run_id: str
    host: str
    phase: HostPhase
    message: str = ""


@dataclass(frozen=True, slots=True)
class MetricSample:
    """A workload ``step`` record, with the time the controller received it."""

    run_id: str
    host: str
    rank: int
    t: float
    received: float
    step: int
    samples: int
    tokens: int | None
    loss: float | None
    lr: float | None
    throughput: float | None
    mem_used_gib: float | None
    mem_total_gib: float | None
    # A serving case's TTFT p99 over the interval's answered requests (llm-serving), ms.
    ttft_p99_ms: float | None = None

    @property
    def latency(self) -> float:
        return self.received - self.t


@dataclass(frozen=True, slots=True)
class EvalSample:
    run_id: str
    host: str
    rank: int
    t: float
    name: str
    value: float
    samples: int | None


@dataclass(frozen=True, slots=True)
class SysSample:
    run_id: str
    host: str
    rank: int
    t: float
    values: dict[str, float]
    # The top users of the CPU outside the run over its window so far (harness.procwindow):
    # {"pid": int, "name": str, "cpu_s": float} each, plain values as the event log writes.
    others: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class WorkloadStarted:
    run_id: str
    host: str
    rank: int
    t: float
    world_size: int


@dataclass(frozen=True, slots=True)
class CaseResult:
    run_id: str
    host: str
    rank: int
    t: float
    status: str
    converged: bool
    metrics: dict[str, float | None]
    notes: list[str] = field(default_factory=list)
    message: str = ""
    environment: dict[str, Any] = field(default_factory=dict)
    # What MFU divides (chip, math, PEAK_NUMBERS); None where the line had none usable.
    peak: dict[str, str | float | None] | None = None
    # base-interconnect all_reduce: each rank's own seconds per iteration, as the line gave
    # them (cleaned; a list of objects); None where it gave none. Readers check each entry.
    rank_times: list[dict[str, Any]] | None = None
    # A sweep's points ({"hp", "metrics"} each: llm-serving), cleaned; None where none given.
    points: list[dict[str, Any]] | None = None


@dataclass(frozen=True, slots=True)
class WorkloadError:
    run_id: str
    host: str
    rank: int
    t: float
    message: str
    traceback: str = ""


Event = (
    RunStarted
    | RunFinished
    | HostState
    | MetricSample
    | EvalSample
    | SysSample
    | WorkloadStarted
    | CaseResult
    | WorkloadError
)


def as_dict(ev: Event) -> dict[str, Any]:
    """The event's fields by name, with its type, for logs and JSON."""
    return {"type": type(ev).__name__, **{k: getattr(ev, k) for k in ev.__slots__}}  # type: ignore[union-attr]


_HEADER = ("t", "kind", "rank")  # fields every line has, not values of a sys sample
# A contract line is a few KiB at most (a result with its environment); a longer one is
# dropped unread, so one runaway writer costs the controller neither memory nor time.
# playbooks/library/fleetperf_tail.py and tui/core/stream.py cut lines at the same length.
MAX_LINE_BYTES = 64 * 1024
_MAX_INT = 2**63 - 1  # past SQLite's integers: no count, step or rank is that large
_MAX_DEPTH = 8  # nesting kept in a result's environment (the contract's has 2 levels)
RESULT_STATUSES = ("passed", "failed")
# A result's ``peak`` object (harness.result.build_result): text ``chip`` and ``math``, and
# these numbers.
PEAK_NUMBERS = (
    "datasheet_flops",
    "measured_flops",
    "measured_mem_bw_bytes_per_s",
    "model_flops_per_s_per_device",
)
_MAX_PEAK_TEXT = 200
# A sys event's ``others``: at most this many processes (the harness names its top 3), each
# name at most this long (the kernel's comm is 15 bytes).
MAX_OTHERS = 3
_MAX_PROCESS_NAME = 64


class _Broken(Exception):
    """A line breaks the contract; the message says how (drops are counted by it)."""


@dataclass(frozen=True, slots=True)
class Dropped:
    """A line that became no event, and why."""

    reason: str


class DroppedLines:
    """How many lines of each run were dropped, by reason, for the run's record."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, Counter[str]] = {}

    def add(self, run_id: str, reason: str) -> None:
        with self._lock:
            self._counts.setdefault(run_id, Counter())[reason] += 1

    def take(self, run_id: str) -> Counter[str]:
        """The run's counts, forgotten here: a run is recorded once."""
        with self._lock:
            return self._counts.pop(run_id, Counter())


# Every reader of workload lines (followers, polls, the recovery after a run) counts here.
DROPPED = DroppedLines()


def parse_line(run_id: str, host: str, line: str, received: float | None = None) -> Event | None:
    """One ``events.jsonl`` line -> a typed event; None for a line that breaks the contract
    or an unknown kind (counted in ``DROPPED``), so one bad line never stops the stream."""
    ev = parse(run_id, host, line, received)
    if isinstance(ev, Dropped):
        DROPPED.add(run_id, ev.reason)
        return None
    return ev


def parse(run_id: str, host: str, line: str, received: float | None = None) -> Event | Dropped:
    """One line -> a typed event, or why it was dropped (docs/workload-contract.md, "Lines
    that break the contract"). Never raises: whatever a workload writes, its reader goes on.
    Every string the event keeps has passed tui/core/text.py's ``clean``."""
    try:
        if len(line) > MAX_LINE_BYTES or len(line.encode("utf-8", "replace")) > MAX_LINE_BYTES:
            raise _Broken("longer than 64 KiB")
        try:
            rec = json.loads(line, parse_int=_int, parse_float=_float, parse_constant=_constant)
        except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
            raise _Broken("not JSON (or nested too deep)") from None
        if not isinstance(rec, dict):
            raise _Broken("not a JSON object")
        return _typed(run_id, clean(host), rec, received)
    except _Broken as exc:
        return Dropped(str(exc))
    except Exception as exc:  # a bug here must not stop a run: its line is dropped, named
        return Dropped(f"unreadable ({type(exc).__name__})")


def _int(text: str) -> int:
    # Bounded before int(): Python converts a long digit string in quadratic time.
    if len(text) > 20 or abs(value := int(text)) > _MAX_INT:
        raise _Broken("an integer out of range")
    return value


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999
        raise _Broken("a non-finite number")
    return value


def _constant(text: str) -> float:  # NaN, Infinity, -Infinity: not JSON, though Python writes them
    raise _Broken("a non-finite number")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _num(value: Any) -> float | None:
    """An optional number: absent or of the wrong type -> None."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _count(value: Any) -> int | None:
    """An optional count: absent, of the wrong type or negative -> None."""
    return value if _is_int(value) and value >= 0 else None


def _need_count(rec: dict[str, Any], key: str, least: int = 0) -> int:
    value = rec.get(key)
    if not _is_int(value) or value < least:
        raise _Broken(f"{rec['kind']}: {key} missing or not an integer >= {least}")
    return value


def _need_num(rec: dict[str, Any], key: str) -> float:
    value = _num(rec.get(key))
    if value is None:
        raise _Broken(f"{rec['kind']}: {key} missing or not a number")
    return value


def _text(value: Any) -> str:
    """An optional string, cleaned: absent or of the wrong type -> empty."""
    return clean(value) if isinstance(value, str) else ""


def _shallow(value: Any, depth: int = 0) -> bool:
    if depth > _MAX_DEPTH:
        return False
    if isinstance(value, dict):
        return all(_shallow(v, depth + 1) for v in value.values())
    if isinstance(value, list):
        return all(_shallow(v, depth + 1) for v in value)
    return True


def _typed(run_id: str, host: str, rec: dict[str, Any], received: float | None) -> Event | None:
    kind = rec.get("kind")
    if not isinstance(kind, str):
        raise _Broken("kind missing or not a string")
    if kind not in KINDS:
        raise _Broken("an unknown kind")
    rank, t = _need_count(rec, "rank"), _need_num(rec, "t")
    if kind == "step":
        return MetricSample(
            run_id=run_id,
            host=host,
            rank=rank,
            t=t,
            received=time.time() if received is None else received,
            step=_need_count(rec, "step"),
            samples=_need_count(rec, "samples"),
            tokens=_count(rec.get("tokens")),
            loss=_num(rec.get("loss")),
            lr=_num(rec.get("lr")),
            throughput=_num(rec.get("throughput")),
            mem_used_gib=_num(rec.get("mem_used_gib")),
            mem_total_gib=_num(rec.get("mem_total_gib")),
            ttft_p99_ms=_num(rec.get("ttft_p99_ms")),
        )
    if kind == "eval":
        name = rec.get("name")
        if not isinstance(name, str) or not name:
            raise _Broken("eval: name missing or not a string")
        value = _need_num(rec, "value")
        return EvalSample(run_id, host, rank, t, clean(name), value, _count(rec.get("samples")))
    if kind == "sys":
        values = {
            clean(k): num
            for k, v in rec.items()
            if k not in _HEADER and (num := _num(v)) is not None
        }
        return SysSample(run_id, host, rank, t, values, _others(rec.get("others")))
    if kind == "start":
        return WorkloadStarted(run_id, host, rank, t, _need_count(rec, "world_size", least=1))
    if kind == "result":
        return _result(run_id, host, rank, t, rec)
    return WorkloadError(
        run_id, host, rank, t, _text(rec.get("message")).strip(), _text(rec.get("traceback"))
    )


def _result(run_id: str, host: str, rank: int, t: float, rec: dict[str, Any]) -> CaseResult:
    status, converged = rec.get("status"), rec.get("converged")
    if status not in RESULT_STATUSES:
        raise _Broken("result: status missing or not passed/failed")
    if not isinstance(converged, bool):
        raise _Broken("result: converged missing or not a boolean")
    metrics, notes = rec.get("metrics"), rec.get("notes")
    metrics, notes = {} if metrics is None else metrics, [] if notes is None else notes
    if not isinstance(metrics, dict):
        raise _Broken("result: metrics not an object")
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise _Broken("result: notes not a list of strings")
    env = rec.get("environment")
    return CaseResult(
        run_id,
        host,
        rank,
        t,
        status,
        converged,
        {clean(k): _num(v) for k, v in metrics.items()},
        [clean(n) for n in notes],
        " ".join(_text(rec.get("message")).split()),
        clean_tree(env) if isinstance(env, dict) and _shallow(env) else {},
        _peak(rec.get("peak")),
        _rank_times(rec.get("rank_times")),
        _rank_times(rec.get("points")),
    )


def _rank_times(value: Any) -> list[dict[str, Any]] | None:
    """A result's rank_times (or points): a list of objects, cleaned; None for anything else."""
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        return None
    return clean_tree(value) if _shallow(value) else None


def _others(value: Any) -> tuple[dict[str, Any], ...]:
    """A sys event's ``others``: the well-formed entries ({pid, name, cpu_s}: a count, short
    text, a number not negative) of a list of at most MAX_OTHERS; else none at all."""
    if not isinstance(value, list) or len(value) > MAX_OTHERS:
        return ()
    out = []
    for item in value:
        if not isinstance(item, dict):
            continue
        pid, name, cpu_s = _count(item.get("pid")), item.get("name"), _num(item.get("cpu_s"))
        if pid is None or cpu_s is None or cpu_s < 0:
            continue
        if not isinstance(name, str) or not 0 < len(name) <= _MAX_PROCESS_NAME:
            continue
        # Shown in one-line reasons: any control or bidi character made visible here.
        out.append({"pid": pid, "name": printable(clean(name)), "cpu_s": cpu_s})
    return tuple(out)


def _peak(value: Any) -> dict[str, str | float | None] | None:
    """A result's peak object: its known fields, a number where a number belongs (finite,
    not negative) and short text where text does, else null; None without the math that
    ran (then nothing in it can be read against a peak). Other keys are left out."""
    if not isinstance(value, dict):
        return None
    math = value.get("math")
    if not isinstance(math, str) or not math or len(math) > _MAX_PEAK_TEXT:
        return None
    chip = value.get("chip")
    peak: dict[str, str | float | None] = {
        "chip": clean(chip) if isinstance(chip, str) and 0 < len(chip) <= _MAX_PEAK_TEXT else None,
        "math": clean(math),
    }
    for key in PEAK_NUMBERS:
        num = _num(value.get(key))
        peak[key] = num if num is not None and num >= 0 else None
    return peak
