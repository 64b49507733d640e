"""The engine's server as the workload runs it: started in a process group of its own, checked
healthy within a time limit, and always stopped, group and all.

``serving(...)`` is a context manager: on its way out (the load done, an exception, or the
SIGTERM the executor sends, which ``stop_on_sigterm`` turns into an exception) it sends the
group SIGTERM, waits, then SIGKILL to what is left. A workload killed outright takes the
server with it through engine_start.py's parent-death signal; vLLM's server ends its engine
process when it ends.

Once healthy, the workload (the load generator) moves off the CPUs the server binds its
worker to: vLLM's CPU backend pins its worker to cores of its own and the worker keeps its
core busy while it generates, so a client that the kernel places there reads nothing until
the generation ends (each response arrives whole; docs/cases/serving.md, "What a client
sees"). ``endpoint_or_serving`` yields an existing endpoint instead where the environment
names one (endpoint.py). Standard library only.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import endpoint
from harness import engine

START = Path(__file__).with_name("engine_start.py")
STOP_GRACE_S = 8.0  # within the executor's own 10 s between its SIGTERM and SIGKILL
MODEL_NAME = "fleetperf"  # --served-model-name: the requests' "model"


@dataclass(frozen=True)
class Server:
    url: str  # http://127.0.0.1:PORT, or an existing endpoint's base URL
    pid: int | None  # engine_start.py's, the process group's leader; None: not ours
    model: str


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_argv(python: Path, model: Path, port: int, dtype: str, max_model_len: int) -> list[str]:
    return [
        str(python),
        str(START),
        str(os.getpid()),
        "--model",
        str(model),
        "--served-model-name",
        MODEL_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        dtype,
        "--max-model-len",
        str(max_model_len),
    ]


def server_env(kv_cache_gib: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # ours is cases/
    env.update(
        VLLM_CPU_KVCACHE_SPACE=str(kv_cache_gib),
        VLLM_NO_USAGE_STATS="1",  # no network: the host may have none
        DO_NOT_TRACK="1",
        HF_HUB_OFFLINE="1",
    )
    return env


def log_tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text[-lines:])


def wait_healthy(proc: subprocess.Popen, url: str, limit_s: float, log: Path) -> float:
    """Seconds until GET /health answered 200; RuntimeError when the server ends first or
    the limit passes (with its log's last lines)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if proc.poll() is not None:
            raise RuntimeError(
                f"the vLLM server exited with {proc.returncode} before it was healthy "
                f"({log}: {log_tail(log)})"
            )
        with (
            suppress(OSError, urllib.error.URLError),
            urllib.request.urlopen(f"{url}/health", timeout=5) as answer,
        ):
            if answer.status == 200:
                return time.monotonic() - t0
        time.sleep(1.0)
    raise RuntimeError(f"the vLLM server was not healthy after {limit_s:.0f} s ({log_tail(log)})")


def group_alive(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid``, from /proc. A zombie still
    counts for ``killpg(pgid, 0)``: the leader's children, orphaned, are reaped by init or a
    subreaper in its own time."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):  # gone meanwhile
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            alive.append(int(stat.parent.name))
    return alive


def engine_cpus(pgid: int) -> set[int]:
    """The CPUs the server's processes are bound to more narrowly than this one (vLLM's CPU
    worker's), from their affinity."""
    ours = os.sched_getaffinity(0)
    bound: set[int] = set()
    for pid in group_alive(pgid):
        with suppress(OSError):  # gone meanwhile
            cpus = os.sched_getaffinity(pid)
            if cpus < ours:
                bound |= cpus
    return bound


def set_affinity(cpus: set[int]) -> None:
    """Every thread of this process onto ``cpus``."""
    for tid in os.listdir("/proc/self/task"):
        with suppress(OSError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(tid), cpus)


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group, SIGKILL to what is left after the grace."""
    for sig, wait_s in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 5.0)):
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            proc.poll()  # reaps the leader; its orphaned children are init's to reap
            if not group_alive(proc.pid):
                return
            time.sleep(0.2)


def stop_on_sigterm() -> None:
    """The executor's SIGTERM (a stop, a timeout, Ctrl-C at the controller) as SystemExit in
    the main thread, so that every ``finally`` and ``with`` runs: the server is stopped."""

    def handler(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


@contextmanager
def serving(
    python: Path,
    model: Path,
    *,
    dtype: str,
    max_model_len: int,
    kv_cache_gib: int,
    startup_timeout_s: float,
    log: Path,
    say: Callable[[str], None],
) -> Iterator[Server]:
    port = free_port()
    mine = os.sched_getaffinity(0)
    argv = server_argv(python, model, port, dtype, max_model_len)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=server_env(kv_cache_gib),
            start_new_session=True,  # its own group: stopped as one, engine process included
        )
    try:
        say(f"vLLM server pid {proc.pid} on 127.0.0.1:{port} (log {log}); waiting for /health")
        url = f"http://127.0.0.1:{port}"
        took = wait_healthy(proc, url, startup_timeout_s, log)
        say(f"vLLM server healthy after {took:.0f} s")
        worker = engine_cpus(proc.pid)
        if worker and (client := os.sched_getaffinity(0) - worker):
            set_affinity(client)
            say(f"load generator on CPUs {sorted(client)}, the engine's worker on {sorted(worker)}")
        yield Server(url, proc.pid, MODEL_NAME)
    finally:
        # A second SIGTERM must not cut the stop; the caller's handler comes back after it
        # (left ignored, every process the caller starts later would ignore SIGTERM too).
        handler = signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            set_affinity(mine)
            stop(proc)
        finally:
            signal.signal(signal.SIGTERM, handler)
        print(f"vLLM server stopped (pid {proc.pid})", file=sys.stderr, flush=True)


@contextmanager
def endpoint_or_serving(
    python: Path, model: Path, *, say: Callable[[str], None], **server: Any
) -> Iterator[Server]:
    """The existing endpoint the environment names (endpoint.py), checked, with no server
    started; else ``serving(python, model, say=say, **server)``."""
    existing = endpoint.configured()
    if existing is None:
        with serving(python, model, say=say, **server) as started:
            yield started
        return
    name = endpoint.check(existing)
    say(f"existing endpoint {existing.url}, model {name!r}: no server started")
    yield Server(existing.url, None, name)


def engine_python(value: str, config: Path) -> Path:
    """hp engine_python (harness.engine), unless the environment names an existing endpoint:
    then no engine runs here and the path is not looked for."""
    if endpoint.configured() is not None:
        return Path(value)
    return engine.engine_python(value, config)
