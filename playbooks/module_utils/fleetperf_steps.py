"""The host-side steps of a process or docker run as plain functions: the preflight (checks
and the host lease), the poll of a running workload, the stop. playbooks/library's
fleetperf_preflight, fleetperf_tail and fleetperf_stop wrap them for run.yml and stop.yml;
the controller's direct executor (tui/executors/direct.py) calls the same functions in its
own process for a run on its own machine, without Ansible. No Ansible here: a refusal is
``Refused``, whose text is the module's one-line failure."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable

from . import fleetperf_docker
from . import fleetperf_host as files

LEASE = "fleetperf.lease"
# The modules' defaults, which the direct executor passes as they are.
LEASE_STALE_S = 60.0  # fleetperf_preflight's lease_stale_s
MAX_POLL_BYTES = 1048576  # fleetperf_tail's max_bytes
# The largest archive of a run's files the last poll returns itself (fleetperf_tail's
# files): the host then needs no snapshot, fetch and removal (three tasks, a worker fork
# and a remote operation each, on the controller).
MAX_INLINE_FILES = 262144
STOP_GRACE_S = 10.0  # fleetperf_stop's grace


class Refused(Exception):
    """A step's one-line failure naming the host, with the result fields that go with it."""

    def __init__(self, msg: str, **fields: object) -> None:
        super().__init__(msg)
        self.fields = fields


# ------------------------------------------------------------------ preflight
IMAGE_LABEL = "org.fleetperf.context"  # tui/catalog/images.py LABEL: the image's build context


def image_id(host: str, p: dict) -> str:
    """The id of the image a docker host runs: the tag ``p["image"]`` on the engine at
    ``p["docker_host"]``, built from the context ``p["image_context"]`` (its label). Refused
    naming the host, the tag, what the engine has instead (an older build of the same
    repository is stale; a tag re-pointed at an image built from anything else is refused)
    and ``p["build_command"]``."""
    image = p["image"]
    if not image:
        raise Refused(
            f"host {host}: no fleetperf image exists for this run's vendor (images/); give"
            " the host fleetperf_executor: process"
        )
    why = fleetperf_docker.require_sdk()
    if why:
        raise Refused(f"host {host}: {why}")
    from docker.errors import ImageNotFound

    found, others = None, []
    try:
        with fleetperf_docker.client(p["docker_host"]) as c:
            try:
                found = c.images.get(image)
            except ImageNotFound:
                repository = image.rsplit(":", 1)[0]
                others = sorted(t for i in c.images.list(repository) for t in i.tags)
    except Exception as exc:  # noqa: BLE001 - any engine error is this host's one-line failure
        raise Refused(f"host {host}: docker engine: {str(exc).splitlines()[0]}") from exc
    build = f"build it with: {p['build_command']}"
    if found is None:
        state = f"stale (the engine has {', '.join(others)})" if others else "missing"
        raise Refused(f"host {host}: image {image} {state}; {build}")
    label = (found.labels or {}).get(IMAGE_LABEL)
    if label != p["image_context"]:
        built = f"built from context {label[:12]}" if label else f"without the {IMAGE_LABEL} label"
        raise Refused(
            f"host {host}: image {image} is {found.id}, {built}, not from"
            f" {p['image_context'][:12]}: the tag points at another image; {build}",
            image_id=found.id,
        )
    return found.id


def missing_data(data_dir: str, requires: list[str]) -> list[str]:
    paths = [os.path.join(data_dir, p) for p in requires]
    return [p for p in paths if not os.path.exists(p)]


def synthetic_data(data_dir: str, manifest: str) -> bool | None:
    """Whether `fleetperf prepare --synthetic` made the data; None: staged some other way."""
    try:
        with open(os.path.join(data_dir, manifest)) as f:
            value = json.load(f).get("synthetic")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, bool) else None


# Prints the modules of argv that the interpreter cannot find; imports none of them.
FIND = (
    "import importlib.util, sys; "
    "print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
)


def _found_here(python: str, modules: list[str]) -> bool:
    """Whether ``python`` is this process's interpreter (the direct executor's) and finds
    every module here: then nothing needs a second interpreter started (issue 33). One in
    the same bin directory, the same binary, is the same venv's."""
    here, there = os.path.abspath(sys.executable), os.path.abspath(python)
    try:
        return (
            os.path.dirname(here) == os.path.dirname(there)
            and os.path.samefile(here, there)
            and all(importlib.util.find_spec(m) is not None for m in modules)
        )
    except (OSError, ImportError, ValueError):  # no such python, a name find_spec refuses:
        return False  # python itself says


def unimportable(python: str, modules: list[str]) -> tuple[list[str], str | None]:
    """The modules ``python`` cannot find, and why it could not say (None when it could)."""
    if _found_here(python, modules):
        return [], None
    try:
        done = subprocess.run(
            [python, "-c", FIND, *modules], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], str(exc)
    if done.returncode != 0:
        return [], (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    return done.stdout.split(), None


def load_per_cpu() -> float:
    """This host's 1-minute load average per CPU: other work on it when the run starts."""
    return round(os.getloadavg()[0] / (os.cpu_count() or 1), 2)


def free_gib(path: str) -> float:
    """Free space for unprivileged writers where path is, or would be created."""
    while not os.path.exists(path):
        path = os.path.dirname(path)
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize / 2**30


def port_free(port: int) -> int | None:
    """The port if a listener could bind it here (a free one for 0), else None."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the rendezvous store does
        try:
            s.bind(("", port))
        except OSError:
            return None
        return int(s.getsockname()[1])


def container_running(run_dir: str, engine: dict | None) -> bool:
    """A docker run's container still runs (the engine says so, found by its labels);
    False on a process host, or when the engine cannot say (then the heartbeat decides)."""
    if engine is None or fleetperf_docker.require_sdk():
        return False
    try:
        target = fleetperf_docker.target(run_dir, engine["docker_host"], engine["host"])
        return fleetperf_docker.exit_code(target) is None
    except Exception:  # noqa: BLE001 - an engine error: unknown
        return False


def holder_alive(run_root: str, lease: dict, stale_s: float, engine: dict | None) -> bool:
    """Whether the run holding the lease may still use the host."""
    run_dir = os.path.join(run_root, str(lease.get("run_id")))
    if files.running(run_dir) or container_running(run_dir, engine):
        return True
    ctl = lease.get("controller") or {}
    if files.controller_gone(ctl):
        return False  # its controller was on this machine, in this namespace, and is gone
    beat = files.regular_stat(os.path.join(run_dir, "heartbeat"))
    last = beat.st_mtime if beat else float(lease.get("taken", 0))
    return time.time() - last < stale_s


def try_take(run_root: str, mine: dict, stale_s: float, engine: dict | None = None) -> dict | None:
    """Take the lease; None on success, else the live holder's lease. ``engine``: a docker
    host's docker_host and host, where a holder's container may run."""
    path = os.path.join(run_root, LEASE)
    with files.locked(path):  # what holds is what this reads: nobody else writes meanwhile
        held = files.read_lease(path)
        if held is not None and held.get("run_id") == mine["run_id"]:
            return None  # ours already (preflight run again)
        if held is not None and holder_alive(run_root, held, stale_s, engine):
            return held
        files.replace(path, json.dumps(mine))  # none, or stale: ours now
    return None


def holder_text(held: dict) -> str:
    ctl = held.get("controller") or {}
    since = time.strftime("%H:%M:%S", time.gmtime(float(held.get("taken", 0))))
    return (
        f"run {held.get('run_id', '?')} holds it (controller pid {ctl.get('pid', '?')} "
        f"on {ctl.get('host', '?')}, since {since} UTC)"
    )


def preflight(p: dict, gone: Callable[[], bool] = lambda: False) -> dict:
    """Check the host for one run and take its lease (the module's options as ``p``, its
    defaults applied); the module's result, or Refused with the one line that says why.
    ``gone``: nobody waits for the answer any more (a wait for the lease ends)."""
    host, run_root = p["host"], p["run_root"]
    if p["executor"] not in ("process", "docker"):
        raise Refused(
            f"host {host}: executor {p['executor']} is not supported here (process or"
            " docker; slurm runs through slurm.yml)"
        )
    # A docker host's image (what the case imports was checked in it at planning).
    image = image_id(host, p) if p["executor"] == "docker" and p["image"] is not None else None
    if p["executor"] == "process" and p["python"] == "":
        raise Refused(
            f"host {host}: fleetperf_python is not set: the inventory names the Python that"
            " runs the workload on a process host (e.g. the repository's .venv/bin/python)"
        )
    if p["python"] and p["imports"]:
        lacking, error = unimportable(p["python"], sorted(p["imports"]))
        if error:
            raise Refused(f"host {host}: workload python {p['python']}: {error}")
        if lacking:
            dists = sorted({str(p["imports"][m]) for m in lacking})
            raise Refused(
                f"host {host}: {p['python']} cannot import {', '.join(lacking)}, which "
                f"{p['case']} imports: install {', '.join(dists)} for it (fleetperf_python)"
            )
    missing = missing_data(p["data_dir"], p["requires"])
    if missing:
        raise Refused(f"host {host}: missing {missing[0]} ({files.staging_hint(p['case'])})")
    free = free_gib(run_root)
    if free < p["min_free_gib"]:
        raise Refused(
            f"host {host}: only {free:.2f} GiB free in {run_root}, "
            f"the run needs {p['min_free_gib']:g} GiB (fleetperf_min_free_gib)",
            free_gib=free,
        )
    os.makedirs(run_root, exist_ok=True)
    port = None
    if p["master_port"] is not None:
        port = port_free(p["master_port"])
        if port is None:
            raise Refused(f"host {host}: master port {p['master_port']} is in use")

    mine = {"run_id": p["run_id"], "controller": p["controller"], "taken": time.time()}
    deadline = time.monotonic() + p["lease_wait_s"]
    engine = {"docker_host": p["docker_host"], "host": host} if p["executor"] == "docker" else None
    while (held := try_take(run_root, mine, p["lease_stale_s"], engine)) is not None:
        if time.monotonic() >= deadline or gone():
            wait = p["lease_wait_s"]
            waited = f"waited {wait:g} s" if wait else "use --wait SECONDS"
            raise Refused(f"host {host}: busy: {holder_text(held)}; {waited}")
        time.sleep(1.0)

    run_dir = os.path.join(run_root, p["run_id"])
    os.makedirs(run_dir, exist_ok=True)
    files.replace(os.path.join(run_dir, "config.json"), json.dumps(p["config"], indent=2) + "\n")
    files.replace(os.path.join(run_dir, "heartbeat"), "")  # proof of life until the first poll
    events = os.path.join(run_dir, "events.jsonl")
    files.create(events, "")
    return {
        "changed": True,
        "master_port": port,
        "free_gib": round(free, 2),
        "run_dir": run_dir,
        "events": events,
        "load_per_cpu": load_per_cpu(),
        "synthetic_data": synthetic_data(p["data_dir"], p["data_manifest"]),
        **({"image_id": image} if image else {}),
    }


# ------------------------------------------------------------------ poll
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


# ------------------------------------------------------------------ stop
def processes() -> dict[int, tuple[int, int]]:
    """Live (not zombie) processes from /proc: pid -> (parent pid, process group)."""
    procs = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:  # gone meanwhile
            continue
        # Fields after the command (which may hold spaces): state, ppid, pgrp, ...
        state, ppid, pgrp = stat[stat.rindex(")") + 2 :].split()[:3]
        if state != "Z":
            procs[int(name)] = (int(ppid), int(pgrp))
    return procs


def workload_tree(pgid: int) -> set[int]:
    """The workload's process group and every descendant, also those in sessions of their
    own (torchrun starts each rank in a new session)."""
    procs = processes()
    tree = {pid for pid, (_, pgrp) in procs.items() if pgrp == pgid}
    grown = True
    while grown:
        children = {pid for pid, (ppid, _) in procs.items() if ppid in tree} - tree
        tree |= children
        grown = bool(children)
    return tree


def signal_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def wait_gone(pids: set[int], seconds: float) -> set[int]:
    """Wait until none of pids lives; those still alive at the deadline."""
    deadline = time.monotonic() + seconds
    while (left := pids & set(processes())) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def stop_process(tree: set[int], grace: float) -> int:
    """SIGTERM the whole tree, SIGKILL what is left after grace; the last signal sent."""
    signal_all(tree, signal.SIGTERM)
    left = wait_gone(tree, grace)
    if not left:
        return signal.SIGTERM
    signal_all(left, signal.SIGKILL)
    wait_gone(left, 5)
    return signal.SIGKILL


def stop_container(run_dir: str, target: dict, grace: float, reason: str | None) -> dict:
    """Docker executor: stop the run's container if it runs, and remove it in any case."""
    try:
        running = fleetperf_docker.exit_code(target) is None  # the engine's word, no file's
        if reason and running:
            files.replace(os.path.join(run_dir, "stop_reason"), reason)
        done = fleetperf_docker.stop(target, grace)
    except Exception as exc:  # noqa: BLE001 - an engine error is this host's one-line failure
        return {"failed": True, "msg": f"docker: {str(exc).splitlines()[0]}"}
    if done["exit_codes"]:
        files.create(os.path.join(run_dir, "exit_code"), str(done["exit_codes"][0]))
    msg = "stopped" if done["stopped"] else "finished" if done["exit_codes"] else "never started"
    return {"changed": bool(done["exit_codes"]), "msg": msg, "removed": len(done["exit_codes"])}


def stop(run_dir: str, grace: float, reason: str | None) -> dict:
    """Stop the run's process workload if anything of it still runs; the module's result."""
    exit_file = os.path.join(run_dir, "exit_code")
    if not os.path.lexists(os.path.join(run_dir, files.PID_FILE)):
        return {"changed": False, "msg": "never started"}
    if os.path.lexists(exit_file):
        return {"changed": False, "msg": "finished"}
    pgid = files.supervisor(run_dir)
    if pgid is None:  # gone; its number, if taken again, is another process's
        return {"changed": False, "msg": "gone"}
    tree = workload_tree(pgid)
    if reason:
        files.replace(os.path.join(run_dir, "stop_reason"), reason)
    sig = stop_process(tree, grace)
    files.create(exit_file, str(-sig))  # unless the supervisor wrote it
    return {"changed": True, "signal": int(sig), "msg": "stopped"}
