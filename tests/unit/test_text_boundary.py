"""Issue 26 points 1 and 9 (text): no string from a workload or a host loses a run or
steers a terminal or a browser (tui/core/text.py), and no number makes a NaN chart coordinate.

The chain is the engine's own: event lines handed to the run's tracker as ansible-runner
hands them (tracker.Tracker, parse), the outcome (tracker.conclude), the record, result.json
and the SQLite store (Session._conclude), the batch printer writing to strict UTF-8
streams, and report.html from the store (tui/results/report.py). Only ansible-playbook is left out.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import re
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURE_CASES, write_inventory
from harness.metrics import Metric
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tui.batch import ProgressPrinter
from tui.catalog import catalog
from tui.core.events import LAUNCH_ACTION, TAIL_ACTION, RunStarted
from tui.core.text import MAX_TEXT, printable
from tui.engine.handles import Batch, RunPlan
from tui.engine.runrecord import running_record
from tui.engine.session import Session
from tui.executors import tracker as runs
from tui.executors.ansiblerun import step_of
from tui.executors.base import Outcome, new_run_id
from tui.executors.steps import Step
from tui.results import report, tables
from tui.results.record import RunRecord
from tui.results.store import ResultStore

# What must never reach a page or a terminal raw: a lone surrogate, C0 but newline and
# tab, DEL, C1, and the bidi controls.
UNSAFE = re.compile(
    "[\ud800-\udfff\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
HOST = "node1"
# The emitter case's metrics (the standard registry); values as extreme as JSON allows.
METRIC_NAMES = ("p_whole", "p_train", "p_core", "acc", "e2e_time", "mfu")
EXTREME = st.sampled_from([1e308, -1e308, 5e-324, -5e-324, 0.0, 1.0, 1.0 + 2**-52, 2.0**63])

# -- strategies -----------------------------------------------------------------------

_HOSTILE_CHARS = [
    "\ud800",
    "\udfff",
    "\udc00\ud800",  # a pair in the wrong order
    "\ud83d\ude00",
    "\x00",
    "\x1b[2J",
    "\x1b]0;pwned\x07",
    "\x9b31m",
    "\x7f",
    "\r",
    "\u202e",
    "\u202a",
    "\u2066",
    "\u2069",
    "\u200e",
    "\u200f",
    "\u061c",
    "<script>&\"'",
]
# Any code point, surrogates included (hypothesis leaves them out unless asked).
_ANY_CHAR = st.characters(exclude_categories=())
hostile = st.lists(
    st.one_of(st.sampled_from(_HOSTILE_CHARS), st.text(_ANY_CHAR, max_size=6)), max_size=6
).map("".join)


class Huge(str):
    """A 1 MiB string that hypothesis shows by its length (its repr would take seconds)."""

    def __repr__(self) -> str:
        return f"<{len(self)} characters>"


huge = st.builds(lambda piece: Huge((piece or "\ud800") * (2**20 // max(len(piece), 1))), hostile)


def json_values(big: int) -> st.SearchStrategy[Any]:
    """Any JSON value; integers up to ``big`` (the contract's 2**63 drops a line past it)."""
    return st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-big, big)
        # no subnormals: a library built with -ffast-math, loaded earlier in the same xdist
        # worker, flushes them to zero, and hypothesis then refuses to draw floats at all
        | st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=False)
        | hostile,
        lambda kids: st.lists(kids, max_size=3) | st.dictionaries(hostile, kids, max_size=3),
        max_leaves=12,
    )


kept_json, any_json = json_values(2**63 - 1), json_values(2**70)


def _line(rec: dict[str, Any]) -> str:
    return json.dumps(rec, ensure_ascii=True)  # "\ud800" as JSON writes it


@st.composite
def workload(draw: st.DrawFn) -> tuple[list[str], dict[str, float]]:
    """A workload's events.jsonl: hostile lines of every kind, and one passed result with
    hostile text everywhere it may hold text; the result's known metrics."""
    metrics = draw(st.dictionaries(st.sampled_from(METRIC_NAMES), EXTREME, min_size=1))
    result = {
        draw(hostile): draw(kept_json),  # first: a key of the contract's below wins
        "t": 1,
        "kind": "result",
        "rank": 0,
        "status": "passed",
        "converged": True,
        "message": draw(hostile),
        "notes": draw(st.lists(hostile, max_size=4)),
        "metrics": {**draw(st.dictionaries(hostile, kept_json, max_size=3)), **metrics},
        "environment": {"accelerator": draw(hostile), "hostname": draw(hostile)}
        | draw(st.dictionaries(hostile, kept_json, max_size=3)),
        "peak": {"chip": draw(hostile), "math": draw(hostile), "datasheet_flops": 1e308},
    }
    others = draw(
        st.lists(
            st.one_of(
                st.builds(
                    lambda m, tb: _line(
                        {"t": 1, "kind": "error", "rank": 0, "message": m, "traceback": tb}
                    ),
                    hostile | huge,
                    hostile,
                ),
                st.builds(
                    lambda n: _line({"t": 1, "kind": "eval", "rank": 0, "name": n, "value": 0.5}),
                    hostile,
                ),
                st.builds(
                    lambda k, v: _line({"t": 1, "kind": "sys", "rank": 0, k: v}), hostile, EXTREME
                ),
                st.builds(
                    lambda k, v: _line(
                        {"t": 1, "kind": "step", "rank": 0, "step": 1, "samples": 8, k: v}
                    ),
                    hostile,
                    any_json,
                ),
                any_json.map(_line),
                hostile | huge,
            ),
            max_size=6,
        )
    )
    at = draw(st.integers(0, len(others)))
    return [*others[:at], _line(result), *others[at:]], metrics


# -- the chain ------------------------------------------------------------------------


def _strict() -> io.TextIOWrapper:
    """A stream that encodes as a UTF-8 terminal's stdout does: a surrogate raises."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")


def _runner_event(kind: str, action: str, res: dict[str, Any], host: str = HOST) -> Step:
    """What ansible-runner sends for a task's result, as the play hands it to the tracker."""
    step = step_of(
        {"event": kind, "event_data": {"host": host, "resolved_action": action, "res": res}}
    )
    assert step is not None
    return step


pytestmark = pytest.mark.xdist_group(__name__)  # one worker: module fixtures built once


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> RunPlan:
    """The emitter case on one host, planned once (ansible-inventory takes seconds)."""
    tmp = tmp_path_factory.mktemp("plan")
    inv = write_inventory(tmp / "inv.yml", {HOST: {}})
    s = Session(inv, tmp / "results", tmp / "data", cases_dir=FIXTURE_CASES)
    try:
        (planned,) = s.plan([("emitter", "cpu/CPUx1x1")])
    finally:
        s.close()
    return planned


@contextmanager
def _session() -> Iterator[tuple[Session, Path]]:
    """A session with its own results directory and store, for one run."""
    with tempfile.TemporaryDirectory() as tmp:
        inv = write_inventory(Path(tmp) / "inv.yml", {HOST: {}})
        s = Session(inv, Path(tmp) / "results", Path(tmp) / "data")
        try:
            yield s, Path(tmp) / "results"
        finally:
            s.close()


@dataclasses.dataclass
class Ran:
    status: str
    error: str | None
    record: RunRecord
    out: str  # what the batch printer wrote, stdout and stderr
    result_json: dict[str, Any]


def run_chain(s: Session, plan: RunPlan, lines: list[str], host_message: str | None = None) -> Ran:
    """One run of ``plan`` whose host hands back ``lines``; a host failure saying
    ``host_message`` after them, if given (then ansible-playbook fails: rc 1)."""
    plan = dataclasses.replace(plan, run_id=new_run_id("emitter"))
    batch = Batch(s._execute, [plan])  # not started: the run is driven here, as its play would
    (run,) = batch.runs
    out, err = _strict(), _strict()
    batch.subscribe(ProgressPrinter(out, err))
    launch = s._launch(plan)
    record = running_record(launch, batch.batch_id)
    s.store.add(record)
    run._emit(RunStarted(run.run_id, "emitter", "cpu/CPUx1x1", [HOST], time.time()))
    tracker = runs.prepare(launch, run._emit)
    tracker.step(_runner_event("runner_on_ok", LAUNCH_ACTION, {}))
    tail = {"lines": lines, "finished": True, "exit_code": 0, "events_bytes": 0}
    tracker.step(_runner_event("runner_on_ok", TAIL_ACTION, tail))
    if host_message is not None:
        tracker.step(_runner_event("runner_on_unreachable", "ping", {"msg": host_message}))

    def outcome() -> Outcome:
        rc = 0 if host_message is None else 1
        return runs.conclude(launch, tracker, cancelled=False, rc=rc, runner_status="done")

    s._conclude(run, launch, record, outcome, lambda: None, lambda _run: None)
    out.flush(), err.flush()
    printed = (out.buffer.getvalue() + err.buffer.getvalue()).decode("utf-8")
    result = launch.run_dir / "result.json"
    assert run.record is not None, run.error  # a run that launched is always recorded
    return Ran(run.status, run.error, run.record, printed, json.loads(result.read_bytes()))


def _page(s: Session, results: Path) -> str:
    page = report.render(s.store.list(), results)
    page.encode("utf-8")  # what write_report does: raises on a surrogate
    return page


def _check(
    plan: RunPlan, lines: list[str], metrics: dict[str, float], host_message: str | None
) -> None:
    with _session() as (s, results):
        ran = run_chain(s, plan, lines, host_message)
        if host_message is None:
            assert (ran.status, ran.error) == ("passed", None)
        else:  # the host's words are the run's error, cleaned, whole or cut to its cap
            assert ran.status == "failed" and ran.error
            assert "internal error" not in ran.error and len(ran.error) < MAX_TEXT + 200
        stored = s.store.get(ran.record.run_id)
        for rec in (ran.record.metrics, stored.metrics, ran.result_json["metrics"]):
            assert {k: rec[k] for k in metrics} == metrics
        assert ran.result_json["status"] == stored.status == ran.status
        # What the operator reads: the printer's lines and the tables batch mode prints.
        shown = ran.out + printable(tables.render([stored], "md"))
        shown += printable(tables.render([stored], "json"))
        assert not UNSAFE.search(shown)
        assert not UNSAFE.search(_page(s, results))


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workload(), st.none() | hostile | huge)
def test_hostile_text_through_the_whole_chain_long(
    plan: RunPlan, drawn: tuple[list[str], dict[str, float]], host_message: str | None
) -> None:
    _check(plan, *drawn, host_message)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workload(), st.none() | hostile | huge)
def test_hostile_text_through_the_whole_chain(
    plan: RunPlan, drawn: tuple[list[str], dict[str, float]], host_message: str | None
) -> None:
    """A passed run stays passed with its metrics (a failed host: failed, with its words),
    whatever text its lines and its host hold; nothing raises; nothing unsafe is shown."""
    _check(plan, *drawn, host_message)


# -- the reproduction -----------------------------------------------------------

RESULT = '{"t":1,"kind":"result","rank":0,"status":"passed","converged":true%s}'


def test_a_lone_surrogate_in_a_note_keeps_the_run_passed(plan: RunPlan) -> None:
    # Before: write_result_json raised UnicodeEncodeError, the run was lost.
    with _session() as (s, results):
        ran = run_chain(s, plan, [RESULT % ',"notes":["\\ud800"],"metrics":{"p_core":2.5}'])
        assert (ran.status, ran.error) == ("passed", None)
        assert (
            ran.result_json["notes"] == ["\ufffd"] and ran.result_json["metrics"]["p_core"] == 2.5
        )
        assert s.store.get(ran.record.run_id).notes == ["\ufffd"]
        assert ran.record.run_id in _page(s, results)


def test_a_lone_surrogate_in_an_error_is_shown_and_the_run_passes(plan: RunPlan) -> None:
    # Before: the batch printer raised on it in the follower's thread, then again in
    # recover(): the run was recorded "failed: internal error: UnicodeEncodeError".
    error = '{"t":1,"kind":"error","rank":0,"message":"disk \\ud800 \\u001b[2J \\u202egnp.exe"}'
    with _session() as (s, _):
        ran = run_chain(s, plan, [error, RESULT % ""])
        assert (ran.status, ran.error) == ("passed", None)
    assert f"{HOST:<12} rank 0 error: disk \ufffd \\u001b[2J \\u202egnp.exe" in ran.out


def test_a_host_message_is_capped_and_cleaned(plan: RunPlan) -> None:
    with _session() as (s, _):
        ran = run_chain(s, plan, [RESULT % ""], host_message="\ud800" + "x" * 2**20 + "\u202eend")
    assert ran.status == "failed"
    assert ran.error.startswith(f"host {HOST}: unreachable: \ufffd") and ran.error.endswith("end")
    assert "characters cut" in ran.error and len(ran.error) < MAX_TEXT + 200
    assert "\\u202eend" in ran.out and "\u202e" not in ran.out


# -- charts -----------------------------------------------------------------------------

_GEOMETRY = ("x", "y", "x1", "y1", "x2", "y2", "cx", "cy", "r", "width", "height")


def _coordinates(page: str) -> list[float]:
    """Every number of every shape in the page's SVG charts (each parsed as XML)."""
    numbers = []
    for svg in re.findall(r"<svg .*?</svg>", page, re.S):
        for el in ET.fromstring(svg).iter():
            numbers += [float(el.attrib[a]) for a in _GEOMETRY if a in el.attrib]
            for pair in el.attrib.get("points", "").split():
                numbers += [float(v) for v in pair.split(",")]
    return numbers


METRIC = Metric("p_core", "samples/s", True, ".1f", "throughput")
SERIES = [
    [1e308, -1e308],
    [1e308, 1e308, 1e308],
    [-1e308, 1e308, 0.0, 5e-324],
    [1e20, 1e20],  # one value past 1's resolution
    [1.0, 1.0 + 2**-52],  # a range of one ulp
    [5e-324, 1e-323],
    [0.0, 0.0],
]


def _runs(values: list[float]) -> list[RunRecord]:
    return [
        RunRecord(
            run_id=f"r{i}",
            case="c",
            vendor="v",
            config="CPUx1x1",
            status="passed",
            started=f"2026-01-01T00:00:{i:02d}Z",
            metrics={"p_core": v},
        )
        for i, v in enumerate(values)
    ]


@pytest.mark.parametrize("values", SERIES, ids=str)
def test_extreme_values_give_finite_coordinates(values: list[float]) -> None:
    runs = _runs(values)
    bands = report.rolling_bands(METRIC, runs)
    charts = [
        report.history_chart(METRIC, runs, bands, [True] * len(runs)),
        report.throughput_chart(METRIC, [(f"v/{i}", v) for i, v in enumerate(values)], {}),
        report.loss_chart([(i * 2**62, v) for i, v in enumerate(values)]),
    ]
    numbers = _coordinates("".join(charts))
    assert numbers and all(math.isfinite(n) for n in numbers)
    # A log axis over 600 decades keeps a readable number of ticks.
    assert len(re.findall('class="grid"', charts[1])) <= 12


def test_a_users_yaml_and_sets_are_cleaned(tmp_path: Path) -> None:
    # Before: --set env_digest="\ud800" (YAML's escape) reached the record's hp, and the
    # store could not write it: the run failed with an internal error before its launch.
    sets = catalog.parse_sets(['env_digest="\\ud800 \\x1b[2J"'])
    assert sets == {"env_digest": "\ufffd \x1b[2J"}  # encodable; escaped only where shown
    case = catalog.load_case("emitter", FIXTURE_CASES)
    spec = catalog.resolve(case, catalog.load_config(case, "cpu/CPUx1x1"), sets)
    record = _runs([1.0])[0].model_copy(update={"hp": spec.hp, "fix_hp": spec.fix_hp})
    with ResultStore(tmp_path / "store.sqlite") as store:
        store.add(record)
        assert store.get(record.run_id).hp["env_digest"] == "\ufffd \x1b[2J"


def test_a_yaml_value_inside_itself_is_still_refused_in_one_line() -> None:
    # The cleaning stops at a depth, so an alias inside itself ends as the reader's error.
    case = catalog.load_case("emitter", FIXTURE_CASES)
    with pytest.raises(catalog.CatalogError, match="--set: env_digest: expected str"):
        sets = catalog.parse_sets(["env_digest=&a [*a]"])
        catalog.resolve(case, catalog.load_config(case, "cpu/CPUx1x1"), sets)
