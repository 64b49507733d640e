#!/usr/bin/python
"""Cancel a fleetperf Slurm job if it has not ended, and wait until Slurm let it go."""

DOCUMENTATION = r"""
module: fleetperf_slurm_cancel
short_description: scancel the Slurm job of a fleetperf run and wait for its end
description:
  - On the login host. Nothing to do when O(run_dir) names no job (never submitted) or the
    job has ended. Otherwise writes O(reason) to C(cancel_reason), runs C(scancel) and
    waits up to O(grace) seconds until Slurm says the job ended (its tasks are killed on
    every node; Slurm sends SIGTERM, then SIGKILL after the site's KillWait).
  - Then M(fleetperf_slurm_collect) snapshots the nodes' files (playbooks/tasks/slurm_stop.yml).
options:
  run_dir: {description: The run's directory (shared)., type: path, required: true}
  reason:
    description: Why the job is cancelled (kept in C(cancel_reason)).
    type: str
    default: stopped by fleetperf
  grace: {description: Longest wait for the job's end (seconds)., type: float, default: 120}
extends_documentation_fragment: action_common_attributes
attributes:
  check_mode: {support: none}
  diff_mode: {support: none}
  platform: {platforms: posix}
requirements:
  - The Slurm client commands (C(scontrol), C(sacct), C(scancel)) on the login host.
seealso:
  - module: fleetperf_slurm_submit
  - module: fleetperf_slurm_collect
author:
  - The fleetperf project
"""

EXAMPLES = r"""
- name: Cancel the Slurm job
  fleetperf_slurm_cancel:
    run_dir: /shared/fleetperf/runs/distilbert-20250101-120000-ab12
  register: cancelled
"""

RETURN = r"""
job_id:
  description: The run's Slurm job id; null when none was submitted.
  returned: always
  type: str
  sample: "4711"
state:
  description: The job's state once the cancel took effect (V(UNKNOWN) when Slurm no
    longer knows it).
  returned: when the job was cancelled
  type: str
  sample: CANCELLED
"""

import os
import time

from ansible.module_utils import fleetperf_host as files
from ansible.module_utils import fleetperf_slurm as slurm
from ansible.module_utils.basic import AnsibleModule

ENDING = slurm.PENDING + slurm.RUNNING  # COMPLETING included: its tasks may still live


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "run_dir": {"type": "path", "required": True},
            "reason": {"type": "str", "default": "stopped by fleetperf"},
            "grace": {"type": "float", "default": 120},
        },
        supports_check_mode=False,
    )
    run_dir = module.params["run_dir"]
    job = slurm.job_id(run_dir)
    result = {"changed": False, "job_id": job}
    info = slurm.job_info(job) if job else None
    if info and info.get("JobState") in ENDING:
        files.replace(os.path.join(run_dir, slurm.CANCEL_REASON), module.params["reason"])
        complaint = slurm.cancel(job)
        deadline = time.monotonic() + module.params["grace"]
        while (info := slurm.job_info(job)) and info.get("JobState") in ENDING:
            if time.monotonic() >= deadline:
                module.fail_json(
                    msg=f"slurm job {job} still {info.get('JobState')} {module.params['grace']:g} s"
                    f" after scancel{': ' + complaint if complaint else ''}",
                    **result,
                )
            time.sleep(0.5)
        result.update(changed=True, state=(info or {}).get("JobState", "UNKNOWN"))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
