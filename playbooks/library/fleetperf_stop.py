#!/usr/bin/python
"""Stop a fleetperf workload (and everything it started) if it still runs."""

DOCUMENTATION = r"""
module: fleetperf_stop
short_description: Stop a fleetperf workload's whole process group
description:
  - A workload whose C(exit_code) exists has ended; the module returns at once, without
    signalling or waiting.
  - Otherwise, if the supervisor recorded in O(run_dir)/workload.pid is still the process
    the launch started (C(workload.id), same boot id and start time, and it supervises this
    run dir), sends SIGTERM to its process group and every descendant (also those in
    sessions of their own, as torchrun's ranks), waits up to O(grace) seconds, then SIGKILL
    to what is left, and writes C(exit_code) (as -15 or -9) when the supervisor could not.
    A pid that now names another process (after a reboot, or reused) is never signalled.
    O(reason) goes to C(stop_reason), for the poll to say why the workload ended.
  - Reads the run dir's files only if they are regular files, never through a link; writes
    C(stop_reason) by atomic replace and C(exit_code) only where nothing is there.
  - With O(executor=docker), the engine at O(docker_host) is asked for the run's containers
    (labels C(fleetperf.run_id), C(fleetperf.run_dir) and C(fleetperf.host) = O(host));
    each still running is stopped (SIGTERM, SIGKILL after O(grace)), each is removed, and
    C(exit_code) is written from the engine where the supervisor did not. Nothing in the run
    dir, which the container writes (C(exit_code), a deleted file), changes that.
  - With O(lease), releases the host lease there, under its lock, if this run (the run
    dir's name) holds it; for a container only once it was removed.
  - With O(refused), the module then fails, saying that nothing launched on O(host) because
    the preflight refused those other hosts of its run (in run.yml one module run per host,
    where a release and a separate fail task cost the controller a worker fork each).
options:
  run_dir: {description: The host's run directory., type: path, required: true}
  grace: {description: Seconds between SIGTERM and SIGKILL., type: float, default: 10}
  reason: {description: Why the workload is stopped (kept in C(stop_reason))., type: str}
  lease: {description: The host lease file to release., type: path}
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
  refused:
    description: The hosts of this run the preflight refused; with any, the module fails
      once the rest is done.
    type: list
    elements: str
    default: []
extends_documentation_fragment: action_common_attributes
attributes:
  check_mode: {support: none}
  diff_mode: {support: none}
  platform: {platforms: posix}
seealso:
  - module: fleetperf_launch
  - module: fleetperf_preflight
author:
  - The fleetperf project
"""

EXAMPLES = r"""
- name: Stop the workload and release the host lease
  fleetperf_stop:
    run_dir: /var/lib/fleetperf/runs/distilbert-20250101-120000-ab12
    lease: /var/lib/fleetperf/runs/fleetperf.lease

- name: Stop and remove a run's container, then release the lease
  fleetperf_stop:
    run_dir: /var/lib/fleetperf/runs/distilbert-20250101-120000-ab12
    lease: /var/lib/fleetperf/runs/fleetperf.lease
    executor: docker
    host: node-1

- name: Stop a peer of a failed host, saying why
  fleetperf_stop:
    run_dir: /var/lib/fleetperf/runs/distilbert-20250101-120000-ab12
    reason: host node-1 failed
    grace: 30
"""

RETURN = r"""
msg:
  description: What was found, V(never started) (no container either), V(finished),
    V(gone) (the supervisor died without an exit code) or V(stopped).
  returned: unless the docker engine failed
  type: str
  sample: stopped
signal:
  description: The last signal sent to the workload's processes (V(15) or V(9)).
  returned: when a process workload was stopped
  type: int
  sample: 15
removed:
  description: How many of the run's containers were removed.
  returned: when the run has a container
  type: int
  sample: 1
released:
  description: Always true where present; the run's lease at O(lease) was released.
  returned: when O(lease) was held by this run
  type: bool
  sample: true
"""

import os

from ansible.module_utils import fleetperf_docker, fleetperf_stop_step
from ansible.module_utils import fleetperf_host as files
from ansible.module_utils.basic import AnsibleModule


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "run_dir": {"type": "path", "required": True},
            "grace": {"type": "float", "default": fleetperf_stop_step.STOP_GRACE_S},
            "reason": {"type": "str"},
            "lease": {"type": "path"},
            "executor": {"type": "str", "default": "process", "choices": ["process", "docker"]},
            "docker_host": {"type": "str", "default": ""},
            "host": {"type": "str", "default": ""},
            "refused": {"type": "list", "elements": "str", "default": []},
        },
        required_if=[("executor", "docker", ("host",))],
        supports_check_mode=False,
    )
    p = module.params
    run_dir, lease = p["run_dir"], p["lease"]
    if p["executor"] == "docker":
        target = fleetperf_docker.target(run_dir, p["docker_host"], p["host"])
        result = fleetperf_stop_step.stop_container(run_dir, target, p["grace"], p["reason"])
    else:
        result = fleetperf_stop_step.stop(run_dir, p["grace"], p["reason"])
    if result.pop("failed", False):
        module.fail_json(**result)
    if lease and files.release(lease, os.path.basename(os.path.normpath(run_dir))):
        result.update(changed=True, released=True)
    if p["refused"]:
        result["msg"] = f"host {p['host']}: not launched: {', '.join(p['refused'])} refused"
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
