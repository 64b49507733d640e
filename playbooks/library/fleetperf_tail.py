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
  - Fails, with its whole result and one line naming O(host) and O(rank), when the workload
    ended badly (a non-zero exit, stopped), timed out or stalled; the caller's C(until)
    ends there, and the failure is the host's.
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
    description: The inventory host (the container's C(fleetperf.host) label; in the
      failure's message).
    type: str
    default: ""
  rank:
    description: The host's node rank in its run, for the failure's message.
    type: int
    default: 0
  files:
    description: The run's files the controller keeps (as M(fleetperf_collect) takes them).
      Where the poll releases the lease (the workload ended by itself) and these files,
      each within its limit, make an archive of at most 256 KiB, the poll returns it as
      RV(files_tar), and the host needs no collect.
    type: list
    elements: str
    default: []
  limits:
    description: NAME -> C(bytes), C(keep) (V(head) or V(tail)) for O(files), as
      M(fleetperf_collect) takes them.
    type: dict
    default: {}
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
done:
  description: The workload ended well (exit code 0), the lease was released and the
    run's files came back as RV(files_tar) (or O(files) asked for none); nothing is left
    to do on the host.
  returned: always
  type: bool
  sample: false
cpu_s:
  description: The CPU time this poll took on the host (also added to C(poll_cpu_s)).
  returned: always
  type: float
  sample: 0.061
files_tar:
  description: O(files) as a PAX tar file, base64.
  returned: when the poll released the lease and the archive fit
  type: str
  sample: dGFyLi4u
"""

import resource
import select

from ansible.module_utils import fleetperf_poll_step
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fleetperf_refused import Refused


def ansible_gone() -> bool:
    """True when the reader of our stdout (Ansible) has gone away: nobody wants the result."""
    poller = select.poll()
    poller.register(1, 0)  # POLLERR/POLLHUP are always reported
    return bool(poller.poll(0))


def cpu_s() -> float:
    """This module's CPU time so far, its start-up included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "run_dir": {"type": "path", "required": True},
            "lines": {"type": "bool", "default": True},
            "wait": {"type": "float", "default": 1.0},
            "min_gap": {"type": "float", "default": 0.0},
            "max_bytes": {"type": "int", "default": fleetperf_poll_step.MAX_POLL_BYTES},
            "timeout_s": {"type": "float", "required": True},
            "stall_s": {"type": "float", "required": True},
            "lease": {"type": "path"},
            "executor": {"type": "str", "default": "process", "choices": ["process", "docker"]},
            "docker_host": {"type": "str", "default": ""},
            "host": {"type": "str", "default": ""},
            "rank": {"type": "int", "default": 0},
            "files": {"type": "list", "elements": "str", "default": []},
            "limits": {"type": "dict", "default": {}},
        },
        required_if=[("executor", "docker", ("host",))],
        supports_check_mode=True,
    )
    try:
        result = fleetperf_poll_step.poll(module.params, module.check_mode, ansible_gone, cpu_s)
    except Refused as exc:
        module.fail_json(msg=str(exc))
    except ValueError as exc:  # limits
        module.fail_json(msg=f"fleetperf_tail: {exc}")
    why = fleetperf_poll_step.ended_badly(result, module.params)
    if why:
        module.fail_json(msg=why, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
