#!/usr/bin/python
"""Hand back the events a workload wrote since the last poll."""

DOCUMENTATION = r"""
module: fleetperf_tail
short_description: Return the new lines of a fleetperf run's events.jsonl
description:
  - Reads C(events.jsonl) in O(run_dir) from the offset kept in C(events.offset) beside
    it, returns only complete new lines, and stores the new offset, so each poll hands
    back only what is new. Waits up to O(wait) seconds for a first new line (long poll).
  - C(finished) is true once the workload's C(exit_code) exists and every line written
    before it has been returned.
options:
  run_dir: {description: The host's run directory., type: path, required: true}
  wait:
    description: Seconds to wait for new lines before returning none.
    type: float
    default: 1.0
  max_bytes: {description: Most bytes returned per poll., type: int, default: 1048576}
  timeout_s:
    description: Seconds after the launch at which C(timed_out) turns true.
    type: float
    required: true
  stall_s:
    description: Seconds without a new event at which C(stalled) turns true.
    type: float
    required: true
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule


def read_new(path: str, offset: int, max_bytes: int) -> tuple[list[str], int]:
    """Complete lines after offset, and the offset just past the last one."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            chunk = f.read(max_bytes)
    except FileNotFoundError:
        return [], offset
    end = chunk.rfind(b"\n")
    if end < 0:
        return [], offset
    lines = chunk[: end + 1].decode("utf-8", "replace").splitlines()
    return [line for line in lines if line.strip()], offset + end + 1


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "run_dir": {"type": "path", "required": True},
            "wait": {"type": "float", "default": 1.0},
            "max_bytes": {"type": "int", "default": 1048576},
            "timeout_s": {"type": "float", "required": True},
            "stall_s": {"type": "float", "required": True},
        },
        supports_check_mode=True,
    )
    run_dir = module.params["run_dir"]
    events = os.path.join(run_dir, "events.jsonl")
    offset_file = os.path.join(run_dir, "events.offset")
    exit_file = os.path.join(run_dir, "exit_code")
    try:
        with open(offset_file) as f:
            offset = int(f.read() or 0)
    except FileNotFoundError:
        offset = 0

    deadline = time.monotonic() + module.params["wait"]
    while True:
        # Look at exit_code first: lines written before the exit are then all on disk.
        exited = os.path.exists(exit_file)
        lines, new_offset = read_new(events, offset, module.params["max_bytes"])
        if lines or exited or time.monotonic() >= deadline:
            break
        time.sleep(0.05)

    if new_offset != offset and not module.check_mode:
        tmp = offset_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(new_offset))
        os.replace(tmp, offset_file)

    exit_code = None
    if exited:
        with open(exit_file) as f:
            exit_code = int(f.read().strip() or -1)
    more = os.path.exists(events) and os.path.getsize(events) > new_offset + 1
    now = time.time()
    started = os.path.getmtime(os.path.join(run_dir, "workload.pid"))
    last_event = os.path.getmtime(events) if os.path.exists(events) else started
    module.exit_json(
        changed=False,
        lines=lines,
        offset=new_offset,
        exit_code=exit_code,  # not "rc": Ansible fails any result whose rc is non-zero
        finished=exited and not more,
        timed_out=not exited and now - started > module.params["timeout_s"],
        stalled=not exited and now - max(started, last_event) > module.params["stall_s"],
    )


if __name__ == "__main__":
    main()
