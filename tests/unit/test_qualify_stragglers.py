"""fleetperf qualify's stragglers (tui/qualify/stragglers.py, output.py): the all-host
all_reduce's per-rank own times read from a RunRecord (untrusted: bad entries skipped
with a note), judged against the other ranks, and shown as FLAGGED lines, JSON and md."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from conftest import REPO, Fleetperf, local_host, write_inventory

from tui.core.events import CaseResult, parse
from tui.core.text import printable
from tui.engine.handles import RunPlan
from tui.engine.session import Session
from tui.qualify import output
from tui.qualify.judge import Rule
from tui.qualify.run import Qualification, QualifyArgs
from tui.qualify.stragglers import judge_ranks, rank_times
from tui.results.record import RunRecord

HOSTS = ["node1", "node2", "node3", "node4"]
RULES = {"rank_own_s": Rule("rank_own_s", higher_is_better=False, floor_pct=30)}
QUIET = [0.0100, 0.0102, 0.0098, 0.0101, 0.0099]


def _record(times: object, hosts: list[str] = HOSTS) -> RunRecord:
    return RunRecord(
        run_id="r1",
        case="base-interconnect",
        vendor="cpu",
        config="CPUx4x1",
        hosts=hosts,
        nnodes=len(hosts),
        status="passed",
        started="2026-11-29T00:00:00Z",
        metrics={"bus_gbps": 1.0},
        rank_times=times,
    )


def _ranks(slow: dict[int, list[float]] | None = None) -> list[dict]:
    return [
        {"rank": r, "node": r, "host": f"box{r}", "s": (slow or {}).get(r, QUIET)} for r in range(4)
    ]


def _result(record: RunRecord) -> output.Result:
    ranks = judge_ranks(record, RULES)
    return output.Result(
        "cpu",
        HOSTS,
        3,
        [],
        {},
        {},
        allreduce=record,
        stragglers=ranks.stragglers,
        ranks_judged=ranks.judged,
    )


def test_a_slow_rank_is_named_by_rank_and_inventory_host() -> None:
    result = _result(_record(_ranks({2: [0.019, 0.0192, 0.0188, 0.0191, 0.019]})))
    (line,) = output.flag_lines(result)
    # node 2's host in the inventory, not the name the workload saw
    assert line.startswith(
        "FLAGGED straggler rank 2 (node3): all_reduce own time 1.90× peers"
        " (0.0188–0.0192 s, 5 samples); "
    ), line
    data = json.loads(output.render(result, "json"))
    assert data["flagged"] == [line] and data["ranks_judged"] == 4
    ((straggler),) = data["stragglers"]
    assert straggler["rank"] == 2 and straggler["host"] == "node3" and straggler["n"] == 5
    md = output.render(result, "md")
    assert "### all_reduce stragglers (each rank's own time)" in md
    assert "| 2 | node3 | 0.019 s | 1.90× | 0.0188–0.0192 (5) |" in md


def test_ranks_alike_give_no_straggler() -> None:
    result = _result(_record(_ranks()))
    assert output.flag_lines(result) == [] and result.ranks_judged == 4
    assert "no straggler among its 4 ranks" in output.render(result, "md")
    assert json.loads(output.render(result, "json"))["stragglers"] == []


@pytest.mark.parametrize(
    ("entries", "said"),
    [
        ("not a list", "rank_times: not a list, skipped"),
        ([["a"], *_ranks()[1:]], "rank_times entry 0: not an object, skipped"),
        ([{"rank": "0", "s": QUIET}, *_ranks()[1:]], "entry 0: rank not a whole number >= 0"),
        ([{"rank": True, "s": QUIET}, *_ranks()[1:]], "entry 0: rank not a whole number >= 0"),
        ([{"rank": 0, "s": "fast"}, *_ranks()[1:]], "rank_times entry 0: s not a list, skipped"),
        ([{"rank": 0, "s": ["x", None, -1]}, *_ranks()[1:]], "entry 0: no time in seconds"),
        ([*_ranks(), {"rank": 3, "s": QUIET}], "entry 4: rank 3 given twice, skipped"),
        (
            [
                {"rank": 0, "node": 0, "s": [*QUIET, "slow", -0.5]},
                *_ranks()[1:],
            ],
            "rank 0: 2 value(s) skipped (not seconds, or past 50)",
        ),
        ([{"rank": 0, "node": 0, "s": QUIET * 11}, *_ranks()[1:]], "rank 0: 5 value(s) skipped"),
    ],
)
def test_malformed_entries_are_skipped_with_a_note(entries: object, said: str) -> None:
    record = _record(None).model_copy(update={"rank_times": entries})  # as a store may hold
    ranks = judge_ranks(record, RULES)
    assert any(said in note for note in ranks.notes), ranks.notes
    assert ranks.stragglers == []
    output.render(_result(record), "md")  # no crash on any of it


def test_a_host_the_workload_names_is_one_line_and_the_run_without_times_is_said() -> None:
    odd = [
        {"rank": r, "node": 9, "host": "a\nFLAGGED host x\x1b[31m", "s": QUIET} for r in range(3)
    ]
    times, _ = rank_times(_record(odd))
    assert {host for host, _ in times.values()} == {"a FLAGGED host x\x1b[31m"}  # one line
    assert printable("a FLAGGED host x\x1b[31m") == "a FLAGGED host x\\u001b[31m"  # as printed
    none = judge_ranks(_record(None), RULES)
    assert none.judged == 0 and none.notes == ["not judged: the run kept no per-rank times"]
    assert judge_ranks(_record(_ranks()), {}).notes == [
        "not judged: the suite's qualify: section has no rank_own_s rule"
    ]


def test_the_qualification_judges_its_all_reduce_record(tmp_path: Path) -> None:
    """Qualification._allreduce_done on a real session of 4 local hosts: the record's
    per-rank times judged by the suite's rule; the note for a bad entry said, no traceback."""
    fp = Fleetperf(cases_dir=REPO / "cases", data_root=tmp_path / "d", results=tmp_path / "r")
    inventory = write_inventory(tmp_path / "inv.yml", {h: local_host(fp, h) for h in HOSTS})
    args = QualifyArgs(inventory, tmp_path / "r", tmp_path / "d")
    session = Session(inventory, args.results_dir, args.data_root, judge=False)
    progress = io.StringIO()
    qual = Qualification(args, session, "cpu", HOSTS, progress)
    spec = qual._allreduce_spec()
    assert spec is not None and spec.config.nnodes == 4
    times = _ranks({1: [0.05] * 5})
    times[3] = {"rank": 3, "s": "bad"}
    qual._allreduce_done([_record(times)], RunPlan("r1", spec, HOSTS))
    result = qual.judged()
    (line,) = output.flag_lines(result)
    assert line.startswith("FLAGGED straggler rank 1 (node2): all_reduce own time 5.00× peers")
    assert "all_reduce stragglers: rank_times entry 3: s not a list, skipped" in progress.getvalue()
    assert result.ranks_judged == 3


TIMES = [{"rank": 0, "node": 0, "host": "box0", "s": [0.1]}]


@pytest.mark.parametrize(
    ("given", "kept"), [(TIMES, TIMES), ("fast", None), ([1, 2], None), (None, None)]
)
def test_a_result_line_s_rank_times_reach_the_event_only_as_a_list_of_objects(
    given: object, kept: object
) -> None:
    line = {"kind": "result", "t": 1.0, "rank": 0, "status": "passed", "converged": True}
    ev = parse("r1", "node1", json.dumps({**line, "rank_times": given}))
    assert isinstance(ev, CaseResult) and ev.rank_times == kept
