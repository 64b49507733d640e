"""The typed events that the batch mode and the terminal app both consume.

Three sources feed them: the engine itself (a run started or finished), ansible-runner's
event stream (host phases, task failures) and the workload's ``events.jsonl`` lines that
the poll task hands back (see docs/workload-contract.md). Every event names its run first.
Nothing here imports torch or textual.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal

HostPhase = Literal["preflight", "running", "finished", "failed", "unreachable", "stopped"]

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
    status: str
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


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def parse_line(run_id: str, host: str, line: str, received: float | None = None) -> Event | None:
    """One ``events.jsonl`` line -> a typed event; unknown kinds and lines that break the
    contract (docs/workload-contract.md: a field it requires missing or of the wrong type)
    -> None, so one bad line never stops the stream."""
    try:
        rec = json.loads(line)
        return _typed(run_id, host, rec, received) if isinstance(rec, dict) else None
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


def _typed(run_id: str, host: str, rec: dict[str, Any], received: float | None) -> Event | None:
    kind, rank, t = rec["kind"], int(rec["rank"]), float(rec["t"])
    if kind == "step":
        return MetricSample(
            run_id=run_id,
            host=host,
            rank=rank,
            t=t,
            received=time.time() if received is None else received,
            step=int(rec["step"]),
            samples=int(rec["samples"]),
            tokens=int(rec["tokens"]) if rec.get("tokens") is not None else None,
            loss=_num(rec.get("loss")),
            lr=_num(rec.get("lr")),
            throughput=_num(rec.get("throughput")),
            mem_used_gib=_num(rec.get("mem_used_gib")),
            mem_total_gib=_num(rec.get("mem_total_gib")),
        )
    if kind == "eval":
        samples = rec.get("samples")
        return EvalSample(
            run_id,
            host,
            rank,
            t,
            str(rec["name"]),
            float(rec["value"]),
            None if samples is None else int(samples),
        )
    if kind == "sys":
        values = {
            k: num for k, v in rec.items() if k not in _HEADER and (num := _num(v)) is not None
        }
        return SysSample(run_id, host, rank, t, values)
    if kind == "start":
        return WorkloadStarted(run_id, host, rank, t, int(rec["world_size"]))
    if kind == "result":
        metrics = {str(k): _num(v) for k, v in (rec.get("metrics") or {}).items()}
        env = rec.get("environment")
        return CaseResult(
            run_id,
            host,
            rank,
            t,
            str(rec["status"]),
            rec["converged"] is True,
            metrics,
            [str(n) for n in rec.get("notes") or []],
            " ".join(str(rec.get("message") or "").split()),
            env if isinstance(env, dict) else {},
        )
    if kind == "error":
        return WorkloadError(
            run_id,
            host,
            rank,
            t,
            str(rec.get("message", "")).strip(),
            str(rec.get("traceback", "")),
        )
    return None


def _failure_message(res: dict[str, Any]) -> str:
    msg = res.get("msg") or res.get("stderr") or res.get("module_stderr") or "failed"
    if isinstance(res.get("results"), list):  # a loop: the first failed item says why
        failed = [r for r in res["results"] if isinstance(r, dict) and r.get("failed")]
        if failed:
            msg = failed[0].get("msg") or msg
    return " ".join(str(msg).split())


def task_action(data: dict[str, Any]) -> str:
    """The module a task ran, without its collection prefix (``ns.coll.fleetperf_tail``)."""
    action = data.get("resolved_action") or data.get("task_action") or ""
    return str(action).rsplit(".", 1)[-1]


def from_runner(run_id: str, event: dict[str, Any], received: float | None = None) -> list[Event]:
    """An ansible-runner event -> the typed events it carries (often none)."""
    kind = event.get("event", "")
    data = event.get("event_data") or {}
    host = data.get("host") or data.get("remote_addr") or ""
    action = task_action(data)
    res = data.get("res") or {}
    if kind in ("runner_on_ok", "runner_retry") and action == TAIL_ACTION:
        events: list[Event] = [
            ev
            for line in res.get("lines") or []
            if (ev := parse_line(run_id, host, line, received))
        ]
        ended = not (res.get("timed_out") or res.get("stalled"))
        if kind == "runner_on_ok" and res.get("finished") and ended and res.get("exit_code") == 0:
            events.append(HostState(run_id, host, "finished"))
        return events
    if kind == "runner_on_ok" and action == LAUNCH_ACTION:
        return [HostState(run_id, host, "running")]
    if kind == "runner_on_unreachable":
        return [HostState(run_id, host, "unreachable", _failure_message(res))]
    if kind == "runner_on_failed" and not data.get("ignore_errors"):
        return [HostState(run_id, host, "failed", _failure_message(res))]
    return []
