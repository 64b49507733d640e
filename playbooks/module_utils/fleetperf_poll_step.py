"""A running workload's poll: new event lines, its files at the end, held until something
happens (a line, the end, a heartbeat) so that a poll costs the controller one task run.
playbooks/library's fleetperf_tail wraps it for run.yml; the controller's direct executor
(tui/executors/direct.py) calls the same function in its own process for a run on its own
machine, without Ansible. No Ansible here: a refusal is ``Refused``
(fleetperf_refused.py), whose text is the module's one-line failure."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from . import fleetperf_docker
from . import fleetperf_host as files
from .fleetperf_refused import Refused

# The modules' defaults, which the direct executor passes as they are.
MAX_POLL_BYTES = 1048576  # fleetperf_tail's max_bytes
# The largest archive of a run's files the last poll returns itself (fleetperf_tail's
# files): the host then needs no snapshot, fetch and removal (three tasks, a worker fork
# and a remote operation each, on the controller).
MAX_INLINE_FILES = 262144
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
    run: Run,
    offset: int,
    params: dict,
    exited_now: Callable[[], bool],
    gone: Callable[[], bool],
    sleep: Callable[[float], object] = time.sleep,
) -> tuple[list[str], int, bool]:
    """Wait for new lines (if wanted), the exit (``exited_now``), the deadline, or
    ``gone``; return lines, new offset, exited."""
    deadline = run.deadline(params)
    # The last return that carried lines wrote the offset file: space the next from it.
    ready_at = mtime(run.offset_file, 0.0) + params["min_gap"]
    next_beat, seen = 0.0, offset
    while True:
        now = time.monotonic()
        exited = exited_now()  # first: lines written before it are on disk
        if exited or now >= deadline or gone():
            break
        # A complete new line is what counts: a line still being written is no reason to go.
        if params["lines"] and (end := size(run.events)) > seen and time.time() >= ready_at:
            if read_new(run.events, offset, params["max_bytes"])[0]:
                break
            seen = end
        if now >= next_beat:
            run.beat()
            next_beat = now + HEARTBEAT_S
        sleep(TICK_S)  # the controller's direct executor wakes it as the workload ends
    if not params["lines"]:
        return [], offset, exited
    lines, new_offset = read_new(run.events, offset, params["max_bytes"])
    return lines, new_offset, exited


def poll(
    p: dict,
    check_mode: bool,
    gone: Callable[[], bool],
    cpu_s: Callable[[], float],
    sleep: Callable[[float], object] = time.sleep,
) -> dict:
    """One poll of a run (the tail module's options as ``p``): hold until new lines, the
    workload's end, a stall, a time-out or ``gone`` (nobody waits for the answer); the
    module's result, Refused for an engine error. ``cpu_s``: what this poll has cost the
    host so far (added to the run's poll_cpu_s)."""
    if p["executor"] == "docker":
        try:
            container = Container(
                fleetperf_docker.target(p["run_dir"], p["docker_host"], p["host"])
            )
            run = Run(p["run_dir"], fleetperf_docker.started_at(container.state))
            offset = run.offset()
            lines, new_offset, exited = hold(run, offset, p, container.exited, gone, sleep)
            if exited and not check_mode:
                container.record_exit(run)
        except Exception as exc:  # noqa: BLE001 - an engine error: this host's one-line failure
            raise Refused(f"host {p['host']}: docker: {str(exc).splitlines()[0]}") from exc
    else:
        container, run = None, Run(p["run_dir"])
        offset = run.offset()
        lines, new_offset, exited = hold(run, offset, p, run.exited, gone, sleep)
    if new_offset != offset and not check_mode:
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
    finished = exited and (not p["lines"] or not complete_line_after(run.events, new_offset))
    lease = p["lease"]
    released = bool(
        finished
        and lease
        and not check_mode
        and container is None  # a container's lease goes when the stop has removed it
        and files.release(lease, os.path.basename(os.path.normpath(run.dir)))
    )
    last_event = max(run.started, mtime(run.events, run.started))
    # Ended by itself, lease released: its files no longer change; small ones come back now.
    archive = None
    if released and p.get("files"):
        archive = files.small_archive(run.dir, p["files"], p.get("limits") or {}, MAX_INLINE_FILES)
    spent = cpu_s()
    if not check_mode:
        run.account(spent)
    return {
        "changed": False,
        "lines": lines,
        "offset": new_offset,
        "exit_code": exit_code,  # not "rc": Ansible fails any result whose rc is non-zero
        "finished": finished,
        "events_bytes": size(run.events),
        "timed_out": not exited and now - run.started > p["timeout_s"],
        "stalled": not exited and now - last_event > p["stall_s"],
        "stderr_tail": stderr_tail,
        "stop_reason": stop_reason,
        "released": released,
        # Ended well, lease released, its files back (or none asked): nothing left to do.
        "done": finished and exit_code == 0 and released and bool(archive or not p.get("files")),
        "cpu_s": spent,
        **({"files_tar": archive} if archive else {}),
    }


def ended_badly(res: dict, p: dict) -> str | None:
    """Why a poll's run ended badly (timed out, stalled, stopped, a non-zero exit), as the
    one line that fails the host (rank ``p["rank"]``); None while it runs or once it ended
    well."""
    if res["timed_out"]:
        why = f"timed out after {p['timeout_s']:g} s"
    elif res["stalled"]:
        why = f"no event for {p['stall_s']:g} s (stalled)"
    elif not res["finished"] or res["exit_code"] == 0:
        return None
    elif res["stop_reason"]:
        why = f"stopped ({res['stop_reason']})"
    else:
        tail = (res["stderr_tail"] or "").strip().splitlines()[-5:]
        why = f"workload exited with code {res['exit_code']}; stderr: {' | '.join(tail)}"
    return f"host {p['host']} rank {p['rank']}: {why}"
