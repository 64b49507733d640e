"""Which runs of other controllers the Runs screen follows (issue 39 point 9).

Following a run costs a thread that reads the store and the run's log every 0.5 s
(tui/engine/following.py FollowedRun). A record says ``running`` until its controller ends
it, and one whose controller died on another machine (or that a hostile writer of a
shared store made up) says so forever: so only the newest few with a recent sign of life
are followed, the rest are listed. No textual here.

A run's sign of life ("heartbeat") is the newest of its start and the last write to its
events log (``<results>/runs/<run_id>/events.jsonl``, which its controller appends every
workload event to). A run whose directory is not on this machine (a database store shared
across machines) has only its start: it is followed for FRESH_S after it started.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from tui.results.record import RUN_ID, RunRecord

FOLLOW_MAX = 8  # other controllers' runs followed at once, a thread each
FRESH_S = 15 * 60  # followed only with a sign of life this recent
SKEW_S = 5 * 60  # a start this far ahead of our clock is no sign of life, but a made-up one
CROWD = 4 * FOLLOW_MAX  # more runs than this elsewhere: the store is asked less often,
CROWDED_LOOK_S = 30.0  # every this many seconds (not every 2 s)


@dataclass
class Choice:
    """One look's verdict: the runs to start following, those to stop following (no sign
    of life any more), and those listed only, newest sign of life first."""

    follow: list[RunRecord] = field(default_factory=list)
    drop: list[str] = field(default_factory=list)
    listed: list[RunRecord] = field(default_factory=list)


def heartbeat(record: RunRecord, results_dir: Path, now: float) -> float | None:
    """When the run last showed life here (seconds since the epoch); None where nothing
    says so: an id that is not one, a start that cannot be read or lies ahead of now."""
    if not RUN_ID.fullmatch(record.run_id):  # from the store: never a path of its own
        return None
    try:
        beat = datetime.fromisoformat(record.started).timestamp()
    except ValueError:
        return None
    if beat > now + SKEW_S:
        return None
    try:  # lstat: a link is no sign of life (and is never followed)
        log = os.lstat(results_dir / "runs" / record.run_id / "events.jsonl")
    except OSError:
        return beat
    return max(beat, log.st_mtime) if stat.S_ISREG(log.st_mode) else beat


def quiet(records: list[RunRecord], results_dir: Path, now: float) -> list[str]:
    """The ids of the runs without a sign of life in the last FRESH_S."""
    return [r.run_id for r in records if not _fresh(heartbeat(r, results_dir, now), now)]


def _fresh(beat: float | None, now: float) -> bool:
    return beat is not None and now - beat <= FRESH_S


def choose(records: list[RunRecord], following: set[str], results_dir: Path, now: float) -> Choice:
    """Of the runs other controllers have as running (``records``), given the run ids
    followed now: keep following those with a fresh heartbeat, follow the freshest others
    while fewer than FOLLOW_MAX are followed, list the rest."""
    beats = {r.run_id: heartbeat(r, results_dir, now) for r in records}
    newest = sorted(records, key=lambda r: (beats[r.run_id] or 0.0, r.run_id), reverse=True)
    choice = Choice(drop=[i for i in following if i in beats and not _fresh(beats[i], now)])
    kept = len(following) - len(choice.drop)
    for record in newest:
        run_id = record.run_id
        if run_id in following and run_id not in choice.drop:
            continue
        if kept < FOLLOW_MAX and _fresh(beats[run_id], now) and run_id not in following:
            choice.follow.append(record)
            kept += 1
        else:
            choice.listed.append(record)
    return choice
