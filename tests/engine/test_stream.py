"""The followers of tui/core/stream.py: how a host is reached, lines as they are written, the
end drained, and no follower left behind by a controller that dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from process_guard import live_argvs

from tui.core.stream import Follower, Reach, reach


def test_reach_local_and_ssh_hosts_from_their_inventory_vars() -> None:
    assert reach("here", {"ansible_connection": "local"}) == Reach()
    how = reach(
        "n1",
        {
            "ansible_host": "10.0.0.7",
            "ansible_port": 2222,
            "ansible_user": "bench",
            "ansible_ssh_private_key_file": "/keys/id ed",
            "ansible_ssh_common_args": "-o StrictHostKeyChecking=yes -o 'UserKnownHostsFile=/k h'",
        },
    )
    assert how is not None and how.ssh is not None
    argv = how.argv("/runs/r 1/events.jsonl")
    assert argv[argv.index("-p") + 1] == "2222" and argv[argv.index("-l") + 1] == "bench"
    assert argv[argv.index("-i") + 1] == "/keys/id ed"
    assert "UserKnownHostsFile=/k h" in argv  # the common args split as a shell would
    assert argv[-3:] == ["--", "10.0.0.7", "exec tail -c +1 -F -- '/runs/r 1/events.jsonl'"]
    # No ansible_host: the inventory name is the address, as for Ansible.
    plain = reach("n2.example", {})
    assert plain is not None and plain.argv("/e")[-2] == "n2.example"


def test_hosts_that_cannot_be_followed_are_polled() -> None:
    assert reach("c1", {"ansible_connection": "community.docker.docker"}) is None
    assert reach("n1", {"ansible_host": "{{ lookup('env', 'ADDR') }}"}) is None
    assert reach("n1", {"ansible_connection": "{{ conn }}"}) is None


def test_a_follower_hands_on_each_complete_line_as_it_is_written(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text('{"n": 0}\n')  # written before the follower started: still read
    got: list[tuple[str, float]] = []
    follower = Follower(Reach().argv(str(events)), lambda line: got.append((line, time.time())))
    try:
        with events.open("a") as f:
            for n in range(1, 6):
                time.sleep(0.2)
                f.write(f'{{"n": {n}}}\n')
                f.flush()
                written = time.time()
                assert follower.drain(events.stat().st_size, timeout=5)
                assert got[-1][0] == f'{{"n": {n}}}' and got[-1][1] - written < 0.5
            f.write('{"n": 6')  # a line still being written is not handed on
            f.flush()
            time.sleep(0.5)
            assert got[-1][0] == '{"n": 5}'
            assert not follower.drain(events.stat().st_size, timeout=0.5)
            f.write("}\n")
        assert follower.drain(events.stat().st_size, timeout=5)
        assert [line for line, _ in got] == [f'{{"n": {n}}}' for n in range(7)]
    finally:
        follower.close()


def test_a_slow_start_does_not_hold_the_thread_that_asks_for_a_follower(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """That thread reads every host's Ansible events: a fork that takes seconds on a loaded
    machine must not hold it (nor lose the lines written meanwhile)."""
    events = tmp_path / "events.jsonl"
    events.write_text('{"n": 0}\n')
    real = subprocess.Popen

    def slow_popen(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        time.sleep(2)
        return real(*args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(subprocess, "Popen", slow_popen)
    got: list[str] = []
    asked = time.monotonic()
    follower = Follower(Reach().argv(str(events)), got.append)
    try:
        assert time.monotonic() - asked < 1
        assert follower.drain(events.stat().st_size, 10)
        assert got == ['{"n": 0}']
    finally:
        follower.close()


# The controller: a follower of the file named in $EVENTS, started with the command that
# $QUIET selects: local `tail -F`, or one that never writes and so never notices that its
# reader is gone (as ssh, waiting on a host whose workload went quiet).
CONTROLLER = """
import os, sys, time
from tui.core.stream import Follower, Reach
path = os.environ["EVENTS"]
quiet = [sys.executable, "-c", "import time; time.sleep(600)", path]
Follower(quiet if os.environ["QUIET"] else Reach().argv(path), print)
print("following", flush=True)
time.sleep(600)
"""


def _followers_of(path: Path) -> list[int]:
    return [pid for pid, argv in live_argvs().items() if str(path).encode() in argv]


@pytest.mark.parametrize("quiet", ["", "quiet"])
def test_a_killed_controller_leaves_no_follower(tmp_path: Path, quiet: str) -> None:
    events = tmp_path / "events.jsonl"
    events.touch()
    repo = Path(__file__).resolve().parents[2]
    controller = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CONTROLLER)],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo), "EVENTS": str(events), "QUIET": quiet},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert controller.stdout is not None and controller.stdout.readline() == "following\n"
        deadline = time.monotonic() + 10  # the follower starts on its own thread
        while not _followers_of(events) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _followers_of(events)
        controller.send_signal(signal.SIGKILL)
        controller.wait(timeout=10)
        deadline = time.monotonic() + 5
        while _followers_of(events) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _followers_of(events) == []
    finally:
        controller.kill()
        for pid in _followers_of(events):
            os.kill(pid, signal.SIGKILL)
