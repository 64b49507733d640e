#!/usr/bin/python
"""Follow a fleetperf Slurm job: queued, running on which nodes, and how it ended."""

DOCUMENTATION = r"""
module: fleetperf_slurm_poll
short_description: Hold until a fleetperf Slurm job changes state, ends, or O(wait) passes
description:
  - On the login host. Asks Slurm about the job named in O(run_dir)/slurm_job_id every
    O(tick) seconds (C(scontrol show job), then C(sacct)) and returns as soon as its state,
    pending reason or nodes change, it ends, it times out or stalls, or after O(wait).
  - Returns C(state), C(reason) (why it is pending), C(nodes) (those Slurm chose, in node
    rank order), C(partition), C(finished) (an end state), C(exit_code) (0 only for
    COMPLETED with every node's workload at 0), C(message) (the end state as the operator
    should read it, with the failing node's stderr), and C(events_bytes), each node's
    events file's size (the controller follows those files itself).
  - C(timed_out) turns true O(timeout_s) after the job started running, C(stalled) when no
    node wrote an event for O(stall_s) while it runs; queueing counts for neither.
  - Reads the run dir's files only if they are regular files, never through a link.
options:
  run_dir: {description: The run's directory (shared)., type: path, required: true}
  wait: {description: Longest hold in seconds., type: float, default: 30}
  tick: {description: Seconds between two questions to Slurm., type: float, default: 1}
  timeout_s:
    description: Seconds of running after which C(timed_out).
    type: float
    required: true
  stall_s:
    description: Seconds without an event after which C(stalled).
    type: float
    required: true
extends_documentation_fragment: action_common_attributes
attributes:
  check_mode: {support: none}
  diff_mode: {support: none}
  platform: {platforms: posix}
requirements:
  - The Slurm client commands (C(scontrol), C(sacct)) on the login host.
seealso:
  - module: fleetperf_slurm_submit
  - module: fleetperf_slurm_cancel
author:
  - The fleetperf project
"""

EXAMPLES = r"""
- name: Follow the job
  fleetperf_slurm_poll:
    run_dir: /shared/fleetperf/runs/distilbert-20250101-120000-ab12
    wait: 30
    timeout_s: 3600
    stall_s: 600
  register: poll
  until: poll.finished or poll.timed_out or poll.stalled
  retries: 100000000
  delay: 0
"""

RETURN = r"""
job_id:
  description: The run's Slurm job id.
  returned: success
  type: str
  sample: "4711"
run_dir:
  description: O(run_dir) as given.
  returned: success
  type: path
  sample: /shared/fleetperf/runs/distilbert-20250101-120000-ab12
state:
  description: The job's state (V(UNKNOWN) once Slurm no longer knows it).
  returned: success
  type: str
  sample: RUNNING
reason:
  description: Why the job is pending (V("") when Slurm gives none).
  returned: success
  type: str
  sample: Resources
nodes:
  description: The nodes Slurm chose, in node rank order (none while pending).
  returned: success
  type: list
  elements: str
  sample: [node-1, node-2]
partition:
  description: The job's partition.
  returned: success
  type: str
  sample: gpu
finished:
  description: The job is in an end state.
  returned: success
  type: bool
  sample: false
exit_code:
  description: V(0) only for COMPLETED with every node's workload at 0, else V(1).
  returned: success (null until the job ended)
  type: int
  sample: 0
message:
  description: How the job ended, as the operator should read it, with the failing
    node's stderr (V("") while it runs, or when it passed).
  returned: success
  type: str
  sample: "slurm job 4711 on node-1, node-2: failed; node node-2 exited with code 1: ..."
events_bytes:
  description: Each node's C(events.jsonl) size, by node (the controller follows the
    files itself).
  returned: success
  type: dict
  sample: {node-1: 20480, node-2: 20311}
timed_out:
  description: The job has run O(timeout_s) and not ended.
  returned: success
  type: bool
  sample: false
stalled:
  description: The job runs and no node wrote an event for O(stall_s).
  returned: success
  type: bool
  sample: false
"""

import json
import os
import time

from ansible.module_utils import fleetperf_host as files
from ansible.module_utils import fleetperf_slurm as slurm
from ansible.module_utils.basic import AnsibleModule

STATE_FILE = "slurm_state"  # what the last poll returned, and when the job began running


def observe(job: str) -> dict:
    info = slurm.job_info(job)
    if info is None:
        return {"state": "UNKNOWN", "reason": "Slurm no longer knows the job", "nodes": []}
    state = info.get("JobState", "UNKNOWN")
    reason = info.get("Reason", "")
    return {
        "state": state,
        "reason": "" if reason in ("None", "(null)") else reason,
        "nodes": slurm.nodes_of(info.get("NodeList", "")) if state not in slurm.PENDING else [],
        "partition": info.get("Partition", ""),
        "exit": info.get("ExitCode", ""),
    }


def node_exit_codes(run_dir: str) -> dict[str, int | None]:
    codes = {}
    for node, path in slurm.node_dirs(run_dir).items():
        text = (files.read_text(os.path.join(path, "exit_code")) or "").strip()
        codes[node] = int(text) if text.lstrip("-").isdigit() else None
    return codes


def end_message(run_dir: str, job: str, seen: dict) -> tuple[int, str]:
    """The job's exit code for the play and the line that says how it ended."""
    state = seen["state"]
    codes = node_exit_codes(run_dir)
    if state == "COMPLETED" and codes and all(c == 0 for c in codes.values()):
        return 0, ""
    why = slurm.END_STATES.get(state, state)
    if state == "CANCELLED":
        ours = files.read_text(os.path.join(run_dir, slurm.CANCEL_REASON))
        why = f"cancelled by fleetperf: {ours}" if ours else why
    failing = [n for n, c in codes.items() if c not in (0, None)]
    detail = ""
    if failing:
        node = failing[0]
        tail = files.read_text(os.path.join(run_dir, slurm.NODES_DIR, node, "stderr.log"), 2000)
        lines = [ln.strip() for ln in (tail or "").splitlines() if ln.strip()][-3:]
        detail = f"; node {node} exited with code {codes[node]}: " + " | ".join(lines)
    elif state in ("FAILED", "COMPLETED"):
        out = files.read_text(os.path.join(run_dir, f"slurm-{job}.out"), 2000)
        lines = [ln.strip() for ln in (out or "").splitlines() if ln.strip()][-3:]
        detail = "; job output: " + " | ".join(lines) if lines else ""
    nodes = f" on {', '.join(seen['nodes'])}" if seen["nodes"] else ""
    return 1, f"slurm job {job}{nodes}: {why}{detail}"


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "run_dir": {"type": "path", "required": True},
            "wait": {"type": "float", "default": 30},
            "tick": {"type": "float", "default": 1},
            "timeout_s": {"type": "float", "required": True},
            "stall_s": {"type": "float", "required": True},
        },
        supports_check_mode=False,
    )
    p = module.params
    run_dir = p["run_dir"]
    job = slurm.job_id(run_dir)
    if job is None:
        module.fail_json(msg=f"{run_dir}: no Slurm job submitted")
    state_file = os.path.join(run_dir, STATE_FILE)
    try:
        last = json.loads(files.read_text(state_file) or "{}")
    except ValueError:
        last = {}
    deadline = time.monotonic() + p["wait"]
    while True:
        seen = observe(job)
        ended = seen["state"] not in slurm.PENDING + slurm.RUNNING
        if seen["state"] in slurm.RUNNING and not last.get("running_since"):
            last["running_since"] = time.time()
        since = last.get("running_since")
        events = {
            n: (files.regular_stat(os.path.join(d, "events.jsonl")) or None)
            for n, d in slurm.node_dirs(run_dir).items()
        }
        latest = max([since or 0] + [st.st_mtime for st in events.values() if st])
        timed_out = bool(since) and not ended and time.time() - since > p["timeout_s"]
        stalled = bool(since) and not ended and time.time() - latest > p["stall_s"]
        changed = any(seen[k] != last.get(k) for k in ("state", "reason", "nodes"))
        if ended or changed or timed_out or stalled or time.monotonic() >= deadline:
            break
        time.sleep(p["tick"])
    files.replace(state_file, json.dumps({**last, **seen}))
    exit_code, message = end_message(run_dir, job, seen) if ended else (None, "")
    module.exit_json(
        changed=False,
        job_id=job,
        run_dir=run_dir,
        state=seen["state"],
        reason=seen["reason"],
        nodes=seen["nodes"],
        partition=seen.get("partition", ""),
        finished=ended,
        exit_code=exit_code,
        message=message,
        events_bytes={n: st.st_size if st else 0 for n, st in events.items()},
        timed_out=timed_out,
        stalled=stalled,
    )


if __name__ == "__main__":
    main()
