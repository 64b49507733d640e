"""When the tracker takes a host as handed back (tui/executors/tracker.py): run.yml ends a
host that ended well with nothing left to do at its last poll (a meta task, no hand-back
task after it), so that poll's ``done`` ends the host's part; any other poll does not."""

from __future__ import annotations

from pathlib import Path

from tui.catalog import catalog
from tui.core.events import LAUNCH_ACTION, TAIL_ACTION, Event
from tui.executors.base import Launch, new_run_id
from tui.executors.steps import Step
from tui.executors.tracker import HAND_BACK, prepare


def _tracker(tmp_path: Path, hosts: list[str]):
    case = catalog.load_case("distilbert-pytorch")
    launch = Launch(
        spec=catalog.resolve(case, catalog.load_config(case, "cpu/CPUx1x1")),
        run_id=new_run_id(case.name),
        hosts=hosts,
        inventory=tmp_path / "inv.yml",
        results_dir=tmp_path / "results",
        data_root=tmp_path / "data",
    )
    events: list[Event] = []
    return prepare(launch, events.append)


def _last_poll(host: str, **res: object) -> Step:
    base = {"lines": [], "finished": True, "exit_code": 0, "released": True}
    return Step(host, TAIL_ACTION, "ok", {**base, **res})


def test_a_done_poll_hands_the_host_back(tmp_path: Path) -> None:
    tracker = _tracker(tmp_path, ["n1", "n2"])
    for host in ("n1", "n2"):
        tracker.step(Step(host, LAUNCH_ACTION, "ok"))
    tracker.step(_last_poll("n1", done=True))
    assert tracker.handed_back == {"n1"} and not tracker.ended.is_set()
    # Ended well but its files too large for the poll: the play goes on with it.
    tracker.step(_last_poll("n2", done=False))
    assert tracker.handed_back == {"n1"} and not tracker.ended.is_set()
    tracker.step(Step("n2", "debug", "ok", task=HAND_BACK))
    assert tracker.ended.is_set() and not tracker.play_failed
    tracker.log.close()


def test_a_failed_last_poll_fails_the_run_without_handing_back(tmp_path: Path) -> None:
    tracker = _tracker(tmp_path, ["n1"])
    tracker.step(Step("n1", LAUNCH_ACTION, "ok"))
    tracker.step(Step("n1", TAIL_ACTION, "failed", {"exit_code": 1, "msg": "host n1 rank 0: x"}))
    assert tracker.play_failed and not tracker.handed_back  # its rescue and cleanup follow
    assert tracker.phases["n1"] == "failed" and tracker.failures[-1].message == "host n1 rank 0: x"
    tracker.log.close()
