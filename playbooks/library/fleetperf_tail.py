#!/usr/bin/python
"""Hand back the events a workload wrote since the last poll, holding until there are some."""

DOCUMENTATION = r"""
module: fleetperf_tail
short_description: Return the new lines of a fleetperf run's events.jsonl
description:
  - Reads C(events.jsonl) in O(run_dir) from the offset kept in C(events.offset) beside
    it, returns only complete new lines, and stores the new offset, so each poll hands
    back only what is new.
  - Holds up to O(wait) seconds while nothing happens (long poll) and returns as soon as
    new lines exist, the workload ended, or it times out or stalls. Returns with lines
    come at least O(min_gap) seconds apart, so a chatty workload costs a few module
    starts per second at most; lines written meanwhile come back together.
  - While it holds it only looks at two files ten times a second (about 0.02 % of a core),
    at normal priority (at the lowest (SCHED_IDLE or nice 19) a saturated host kept it from
    noticing its lines for seconds). It returns early when Ansible is gone (stdout closed).
  - C(finished) is true once the workload has ended and every line written before has been
    returned; then C(stderr_tail) holds the end of C(stderr.log) and
    C(stop_reason) why M(fleetperf_stop) signalled it, if it did.
  - Touches C(heartbeat) in O(run_dir) while it holds (the host lease's proof of life).
    Adds its own CPU time to C(poll_cpu_s) there (what polling cost the host).
  - Reads only regular files of the run dir, never through a link (the workload writes
    that directory; a container has it mounted), so a link, FIFO or device in place of
    C(events.jsonl), C(stderr.log), C(stop_reason) or C(exit_code) reads as absent (an
    C(exit_code) that is no regular file as code -1). What it writes (C(events.offset),
    C(heartbeat), C(poll_cpu_s)) replaces the name atomically, and C(exit_code) is created
    only where nothing is; no file is ever written through a link.
  - With O(lines=false) (a host whose file the controller follows itself, tui/core/stream.py)
    it returns no lines and holds until the workload ended, a stall, a time-out or
    O(wait); C(events_bytes), the file's size, tells the follower how much to wait for.
  - A process workload has ended once its C(exit_code) exists. A container's has ended once
    the engine at O(docker_host) says the run's container (labels C(fleetperf.run_id),
    C(fleetperf.run_dir), C(fleetperf.host) = O(host)) is no longer running, whatever the
    run dir (the container's to write) holds; the engine is asked at most twice a second
    while the poll holds, its start time is the one O(timeout_s) counts from, and where the
    supervisor wrote no C(exit_code) the engine's exit code is written.
  - With O(lease), once a process workload (no container) has ended, it releases the host
    lease there if this run holds it, as M(fleetperf_stop) would for an ended workload,
    which then has nothing left to do. A container's lease is released by the stop that
    removes it.
options:
  run_dir: {description: The host's run directory., type: path, required: true}
  lines:
    description: Return the new lines (false, the controller follows the file itself).
    type: bool
    default: true
  wait:
    description: Longest hold in seconds when nothing happens.
    type: float
    default: 1.0
  min_gap:
    description: Least seconds between two returns that carry lines.
    type: float
    default: 0.0
  max_bytes: {description: Most bytes returned per poll., type: int, default: 1048576}
  timeout_s:
    description: Seconds after the launch at which C(timed_out) turns true.
    type: float
    required: true
  stall_s:
    description: Seconds without a new event at which C(stalled) turns true.
    type: float
    required: true
  lease: {description: The host lease file to release once the workload ended., type: path}
  executor:
    description: How the workload was launched (M(fleetperf_launch)'s O(executor)).
    type: str
    default: process
    choices: [process, docker]
  docker_host:
    description: The engine for C(docker) (V("") is the local one).
    type: str
    default: ""
  host:
    description: The inventory host (the container's C(fleetperf.host) label).
    type: str
    default: ""
extends_documentation_fragment: action_common_attributes
attributes:
  check_mode:
    support: full
    details: In check mode it neither stores the offset nor writes C(exit_code) or
      C(poll_cpu_s).
  diff_mode: {support: none}
  platform: {platforms: posix}
seealso:
  - module: fleetperf_launch
  - module: fleetperf_stop
author:
  - The fleetperf project
"""

EXAMPLES = r"""
- name: Poll events until the workload ends, times out or stalls
  fleetperf_tail:
    run_dir: /var/lib/fleetperf/runs/distilbert-20250101-120000-ab12
    wait: 30
    min_gap: 0.5
    timeout_s: 3600
    stall_s: 600
  register: poll
  until: poll.finished or poll.timed_out or poll.stalled
  retries: 100000000
  delay: 0
"""

RETURN = r"""
lines:
  description: The complete new lines of C(events.jsonl), at most O(max_bytes) of them
    (none with O(lines=false)); a line over 64 KiB comes back cut.
  returned: always
  type: list
  elements: str
  sample: ['{"event": "step", "step": 10, "loss": 2.31}']
offset:
  description: The offset in C(events.jsonl) just past the last line returned.
  returned: always
  type: int
  sample: 20480
exit_code:
  description: The workload's exit code (V(-1) when C(exit_code) is unreadable); not
    C(rc), which Ansible would fail on.
  returned: always (null while the workload runs)
  type: int
  sample: 0
finished:
  description: The workload ended and every line written before has been returned.
  returned: always
  type: bool
  sample: false
events_bytes:
  description: The size of C(events.jsonl), for a controller that follows it itself.
  returned: always
  type: int
  sample: 20480
timed_out:
  description: The workload still runs O(timeout_s) after its launch.
  returned: always
  type: bool
  sample: false
stalled:
  description: The workload still runs and wrote no event for O(stall_s).
  returned: always
  type: bool
  sample: false
stderr_tail:
  description: The last 2000 bytes of C(stderr.log).
  returned: always (null while the workload runs)
  type: str
  sample: "RuntimeError: CUDA out of memory"
stop_reason:
  description: Why M(fleetperf_stop) signalled the workload, if it did.
  returned: always (null unless it was stopped)
  type: str
  sample: host node-1 failed
released:
  description: The run's lease at O(lease) was released (its process workload ended).
  returned: always
  type: bool
  sample: false
cpu_s:
  description: The CPU time this poll took on the host (also added to C(poll_cpu_s)).
  returned: always
  type: float
  sample: 0.061
"""

import os
import resource
import select
import time
from collections.abc import Callable

from ansible.module_utils import fleetperf_docker
from ansible.module_utils import fleetperf_host as files
from ansible.module_utils.basic import AnsibleModule

TICK_S = 0.1  # how often a hold looks at the files: the latency floor of a poll
ENGINE_S = 0.5  # how often a hold asks the docker engine whether the container ended
HEARTBEAT_S = 5.0
STDERR_TAIL_BYTES = 2000
MAX_LINE_BYTES = 64 * 1024  # tui/core/events.py's limit: a longer event line goes back cut


def read_new(path: str, offset: int, max_bytes: int) -> tuple[list[str], int]:
    """Complete lines after offset, and the offset just past the last one. A line longer
    than MAX_LINE_BYTES goes back cut to MAX_LINE_BYTES + 1 bytes (the controller drops and
    counts it); one longer than max_bytes too, so the offset passes every complete line."""
    chunk = files.read_bytes(path, offset, max_bytes) or b""
    end = chunk.rfind(b"\n")
    if end < 0:  # no whole line within max_bytes: a longer one, or one being written
        newline = newline_after(path, offset) if len(chunk) == max_bytes else -1
        if newline < 0:
            return [], offset
        head = files.read_bytes(path, offset, min(newline - offset, MAX_LINE_BYTES + 1)) or b""
        return [head.decode("utf-8", "replace")], newline + 1
    lines = [
        raw[: MAX_LINE_BYTES + 1].decode("utf-8", "replace") for raw in chunk[:end].split(b"\n")
    ]
    return [line for line in lines if line.strip()], offset + end + 1


def newline_after(path: str, offset: int) -> int:
    """The position of the first newline at or after offset; -1 if none (a torn tail: a
    workload killed mid-write)."""
    while chunk := files.read_bytes(path, offset, 65536):
        if (at := chunk.find(b"\n")) >= 0:
            return offset + at
        offset += len(chunk)
    return -1


def complete_line_after(path: str, offset: int) -> bool:
    """Whether a whole line (one ending in a newline) lies after offset."""
    return newline_after(path, offset) >= 0


def mtime(path: str, default: float) -> float:
    st = files.regular_stat(path)
    return default if st is None else st.st_mtime


def size(path: str) -> int:
    st = files.regular_stat(path)
    return 0 if st is None else st.st_size


def ansible_gone() -> bool:
    """True when the reader of our stdout (Ansible) has gone away: nobody wants the result."""
    poller = select.poll()
    poller.register(1, 0)  # POLLERR/POLLHUP are always reported
    return bool(poller.poll(0))


class Run:
    """The files of one run directory that a poll looks at."""

    def __init__(self, run_dir: str, started: float | None = None) -> None:
        self.dir = run_dir
        self.events = os.path.join(run_dir, "events.jsonl")
        self.offset_file = os.path.join(run_dir, "events.offset")
        self.exit_file = os.path.join(run_dir, "exit_code")
        self.heartbeat = os.path.join(run_dir, "heartbeat")
        if started is None:  # a process run: when the launch wrote its record
            record = files.regular_stat(os.path.join(run_dir, files.PID_FILE))
            started = record.st_mtime if record else None
        self.started = time.time() if started is None else started

    def exited(self) -> bool:
        return os.path.lexists(self.exit_file)

    def offset(self) -> int:
        try:
            return int(files.read_text(self.offset_file) or 0)
        except ValueError:
            return 0

    def save_offset(self, offset: int) -> None:
        files.replace(self.offset_file, str(offset))

    def account(self, cpu_s: float) -> None:
        """Add this poll's CPU time to the run's total (benchmarks/observer_effect.py)."""
        path = os.path.join(self.dir, "poll_cpu_s")
        try:
            total = float(files.read_text(path) or 0) + cpu_s
        except ValueError:
            total = cpu_s
        files.replace(path, f"{total:.6f}")

    def beat(self) -> None:
        files.replace(self.heartbeat, "")  # a new file: its mtime is the beat

    def deadline(self, params: dict) -> float:
        """Monotonic time at which this poll must return though nothing new came."""
        now_wall, now = time.time(), time.monotonic()
        last_event = max(self.started, mtime(self.events, self.started))
        due = min(self.started + params["timeout_s"], last_event + params["stall_s"])
        return min(now + params["wait"], now + max(0.0, due - now_wall) + TICK_S)


class Container:
    """A docker run's container as its engine sees it. The container writes its run dir,
    so exit_code there proves nothing: it has ended when the engine says so."""

    def __init__(self, target: dict[str, str]) -> None:
        self.target = target
        self.state = fleetperf_docker.state(target)
        self.asked = time.monotonic()

    def exited(self) -> bool:
        """Whether the container has stopped (or is gone), asking at most every ENGINE_S."""
        if time.monotonic() - self.asked >= ENGINE_S:
            self.state, self.asked = fleetperf_docker.state(self.target), time.monotonic()
        return fleetperf_docker.ended(self.state) is not None

    def record_exit(self, run: Run) -> None:
        """Write exit_code for a container that ended without its supervisor writing it
        (killed, out of memory)."""
        code = fleetperf_docker.ended(self.state)
        if code is not None and not os.path.lexists(run.exit_file):
            files.create(run.exit_file, str(code))  # unless the supervisor wrote it meanwhile


def hold(
    run: Run, offset: int, params: dict, exited_now: Callable[[], bool]
) -> tuple[list[str], int, bool]:
    """Wait for new lines (if wanted), the exit (``exited_now``), or the deadline; return
    lines, new offset, exited."""
    deadline = run.deadline(params)
    # The last return that carried lines wrote the offset file: space the next from it.
    ready_at = mtime(run.offset_file, 0.0) + params["min_gap"]
    next_beat, seen = 0.0, offset
    while True:
        now = time.monotonic()
        exited = exited_now()  # first: lines written before it are on disk
        if exited or now >= deadline or ansible_gone():
            break
        # A complete new line is what counts: a line still being written is no reason to go.
        if params["lines"] and (end := size(run.events)) > seen and time.time() >= ready_at:
            if read_new(run.events, offset, params["max_bytes"])[0]:
                break
            seen = end
        if now >= next_beat:
            run.beat()
            next_beat = now + HEARTBEAT_S
        time.sleep(TICK_S)
    if not params["lines"]:
        return [], offset, exited
    lines, new_offset = read_new(run.events, offset, params["max_bytes"])
    return lines, new_offset, exited


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "run_dir": {"type": "path", "required": True},
            "lines": {"type": "bool", "default": True},
            "wait": {"type": "float", "default": 1.0},
            "min_gap": {"type": "float", "default": 0.0},
            "max_bytes": {"type": "int", "default": 1048576},
            "timeout_s": {"type": "float", "required": True},
            "stall_s": {"type": "float", "required": True},
            "lease": {"type": "path"},
            "executor": {"type": "str", "default": "process", "choices": ["process", "docker"]},
            "docker_host": {"type": "str", "default": ""},
            "host": {"type": "str", "default": ""},
        },
        required_if=[("executor", "docker", ("host",))],
        supports_check_mode=True,
    )
    p = module.params
    if p["executor"] == "docker":
        try:
            container = Container(
                fleetperf_docker.target(p["run_dir"], p["docker_host"], p["host"])
            )
            run = Run(p["run_dir"], fleetperf_docker.started_at(container.state))
            offset = run.offset()
            lines, new_offset, exited = hold(run, offset, p, container.exited)
            if exited and not module.check_mode:
                container.record_exit(run)
        except Exception as exc:  # noqa: BLE001 - an engine error: this host's one-line failure
            module.fail_json(msg=f"host {p['host']}: docker: {str(exc).splitlines()[0]}")
    else:
        container, run = None, Run(p["run_dir"])
        offset = run.offset()
        lines, new_offset, exited = hold(run, offset, p, run.exited)
    if new_offset != offset and not module.check_mode:
        run.save_offset(new_offset)

    exit_code = stderr_tail = stop_reason = None
    if exited:
        try:
            exit_code = int((files.read_text(run.exit_file) or "").strip() or -1)
        except ValueError:
            exit_code = -1
        stderr_tail = files.read_text(os.path.join(run.dir, "stderr.log"), STDERR_TAIL_BYTES)
        stop_reason = files.read_text(os.path.join(run.dir, "stop_reason"))
    now = time.time()
    # Polled: every whole line written before the exit handed back; followed: the exit.
    finished = exited and (
        not module.params["lines"] or not complete_line_after(run.events, new_offset)
    )
    events_bytes = size(run.events)
    lease = module.params["lease"]
    released = bool(
        finished
        and lease
        and not module.check_mode
        and container is None  # a container's lease goes when the stop has removed it
        and files.release(lease, os.path.basename(os.path.normpath(run.dir)))
    )
    last_event = max(run.started, mtime(run.events, run.started))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = usage.ru_utime + usage.ru_stime  # this poll's own CPU time, start-up included
    if not module.check_mode:
        run.account(cpu_s)
    module.exit_json(
        changed=False,
        lines=lines,
        offset=new_offset,
        exit_code=exit_code,  # not "rc": Ansible fails any result whose rc is non-zero
        finished=finished,
        events_bytes=events_bytes,
        timed_out=not exited and now - run.started > module.params["timeout_s"],
        stalled=not exited and now - last_event > module.params["stall_s"],
        stderr_tail=stderr_tail,
        stop_reason=stop_reason,
        released=released,
        cpu_s=cpu_s,
    )


if __name__ == "__main__":
    main()
