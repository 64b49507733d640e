"""Which other controllers' runs the Runs screen follows (tui/app/elsewhere.py, issue 39
point 9): signs of life read from untrusted records and a shared results directory."""

from __future__ import annotations

import os
import time
from pathlib import Path

from test_app_attach import foreign, now_iso

from tui.app import elsewhere

RUN = "20261129-040000-emitter-00000000000000a1"


def test_a_sign_of_life_is_the_newest_of_the_start_and_the_log(tmp_path: Path) -> None:
    now = time.time()
    old = foreign(RUN, now_iso(3600))
    assert elsewhere.quiet([old], tmp_path, now) == [RUN]  # started an hour ago, no log
    log = tmp_path / "runs" / RUN / "events.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("")  # its controller wrote an event just now
    assert elsewhere.quiet([old], tmp_path, now) == []
    os.utime(log, (now - 3600, now - 3600))
    assert elsewhere.quiet([old], tmp_path, now) == [RUN]


def test_made_up_signs_of_life_count_for_nothing(tmp_path: Path) -> None:
    now = time.time()
    future = foreign(RUN, now_iso(-24 * 3600))  # a start tomorrow: always newest, if believed
    assert elsewhere.heartbeat(future, tmp_path, now) is None
    target = tmp_path / "elsewhere.jsonl"
    target.write_text("")
    log = tmp_path / "runs" / RUN / "events.jsonl"
    log.parent.mkdir(parents=True)
    log.symlink_to(target)  # a link is no log of ours
    old = foreign(RUN, now_iso(3600))
    assert elsewhere.heartbeat(old, tmp_path, now) == elsewhere.heartbeat(
        foreign(RUN, now_iso(3600)), tmp_path / "none", now
    )
    bad = foreign(RUN, now_iso()).model_copy(update={"run_id": "../../x"})
    assert elsewhere.heartbeat(bad, tmp_path, now) is None


def test_the_newest_few_are_followed_and_the_rest_listed(tmp_path: Path) -> None:
    now = time.time()
    runs = [foreign(f"{RUN[:-2]}{i:02x}", now_iso(60 + i)) for i in range(20)]
    choice = elsewhere.choose(runs, set(), tmp_path, now)
    assert [r.run_id for r in choice.follow] == [r.run_id for r in runs[: elsewhere.FOLLOW_MAX]]
    assert len(choice.listed) == 20 - elsewhere.FOLLOW_MAX and choice.drop == []
    # Two followed already: only the room left is filled; a quiet one is dropped.
    quiet = foreign(f"{RUN[:-2]}ff", now_iso(3600))
    following = {runs[5].run_id, quiet.run_id}
    choice = elsewhere.choose([*runs, quiet], following, tmp_path, now)
    assert choice.drop == [quiet.run_id]
    assert len(choice.follow) == elsewhere.FOLLOW_MAX - 1
    assert runs[5] not in choice.follow and runs[5] not in choice.listed
    assert quiet in choice.listed
