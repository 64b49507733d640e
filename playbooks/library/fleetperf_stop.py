#!/usr/bin/python
"""Stop a fleetperf workload (and everything it started) if it still runs."""

DOCUMENTATION = r"""
module: fleetperf_stop
short_description: Stop a fleetperf workload's whole process group
description:
  - Sends SIGTERM to the process group recorded in O(run_dir)/workload.pid, waits up to
    O(grace) seconds, then SIGKILL. Writes C(exit_code) (as -15 or -9) when the
    supervisor could not. Does nothing for a run that has already ended.
options:
  run_dir: {description: The host's run directory., type: path, required: true}
  grace: {description: Seconds between SIGTERM and SIGKILL., type: float, default: 10}
"""

import os
import signal
import time

from ansible.module_utils.basic import AnsibleModule


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "run_dir": {"type": "path", "required": True},
            "grace": {"type": "float", "default": 10},
        },
        supports_check_mode=True,
    )
    run_dir = module.params["run_dir"]
    pid_file = os.path.join(run_dir, "workload.pid")
    if not os.path.exists(pid_file):
        module.exit_json(changed=False, msg="never started")
    with open(pid_file) as f:
        pgid = int(f.read())
    if not group_alive(pgid):
        module.exit_json(changed=False, msg="not running")
    if module.check_mode:
        module.exit_json(changed=True)

    os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + module.params["grace"]
    sig = signal.SIGTERM
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if group_alive(pgid):
        sig = signal.SIGKILL
        os.killpg(pgid, signal.SIGKILL)
        deadline = time.monotonic() + 5  # a zombie nobody reaps still "exists"
        while group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
    exit_file = os.path.join(run_dir, "exit_code")
    if not os.path.exists(exit_file):
        with open(exit_file, "w") as f:
            f.write(str(-sig))
    module.exit_json(changed=True, signal=int(sig))


if __name__ == "__main__":
    main()
