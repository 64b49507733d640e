#!/usr/bin/python
"""Submit a fleetperf run as one Slurm batch job."""

DOCUMENTATION = r"""
module: fleetperf_slurm_submit
short_description: sbatch a fleetperf run, one task per node
description:
  - On the login host. Writes the job script and the node launcher into O(run_dir)
    (module_utils/fleetperf_slurm.py) and submits them with C(sbatch --parsable
    --nodes=O(nnodes) --ntasks-per-node=1) and the partition, account, qos, constraint,
    GRES, time limit and O(extra_options) given; the job's id goes to C(slurm_job_id)
    in O(run_dir) and comes back as C(job_id). A run dir that already names a job is left
    alone (idempotent).
  - O(env) reaches the job through sbatch's environment (C(--export=ALL)), never its
    command line.
  - O(container) C(pyxis) runs each node's task in O(image) with srun's
    C(--container-image), C(apptainer) with C(apptainer exec); O(mounts) are bound at the
    same paths.
options:
  run_dir: {description: The run's directory (shared)., type: path, required: true}
  run_id: {description: The run (the job's name)., type: str, required: true}
  nnodes: {description: Nodes., type: int, required: true}
  nproc_per_node: {description: Processes per node., type: int, required: true}
  workload:
    description: 'The workload''s argv: entrypoint, args, ending in --run-dir.'
    type: list
    elements: str
    required: true
  python:
    description: The nodes' interpreter (C(python) in a container).
    type: str
    required: true
  chdir: {description: The job's working directory., type: path, required: true}
  data_dir: {description: The case's data directory., type: path, required: true}
  env:
    description: Extra environment variables (tokens such as C(HF_TOKEN)); never logged
      (C(no_log)).
    type: dict
    default: {}
  partition: {type: str, default: "", description: C(sbatch --partition) (V("") for none).}
  account: {type: str, default: "", description: C(sbatch --account) (V("") for none).}
  qos: {type: str, default: "", description: C(sbatch --qos) (V("") for none).}
  constraint: {type: str, default: "", description: C(sbatch --constraint) (V("") for none).}
  gres:
    description: The devices' GRES name per node; the count is O(nproc_per_node).
    type: str
    default: ""
  time_limit: {type: str, default: "", description: C(sbatch --time) (V("") for none).}
  extra_options:
    type: list
    elements: str
    default: []
    description: 'More sbatch options, each one word starting with --.'
  container:
    type: str
    default: none
    choices: [none, pyxis, apptainer]
    description: How nodes run the image.
  image: {type: str, default: "", description: The image for O(container).}
  mounts: {type: list, elements: str, default: [], description: Paths bound into the container.}
extends_documentation_fragment: action_common_attributes
attributes:
  check_mode: {support: none}
  diff_mode: {support: none}
  platform: {platforms: posix}
requirements:
  - The Slurm client command C(sbatch) on the login host; C(pyxis) or C(apptainer) on the
    nodes for O(container).
seealso:
  - module: fleetperf_slurm_check
  - module: fleetperf_slurm_poll
  - module: fleetperf_slurm_cancel
author:
  - The fleetperf project
"""

EXAMPLES = r"""
- name: Submit the job
  fleetperf_slurm_submit:
    run_dir: /shared/fleetperf/runs/distilbert-20250101-120000-ab12
    run_id: distilbert-20250101-120000-ab12
    nnodes: 2
    nproc_per_node: 8
    workload:
      - /shared/fleetperf/repo/cases/distilbert/run.py
      - --config
      - /shared/fleetperf/runs/distilbert-20250101-120000-ab12/config.json
      - --data-dir
      - /shared/fleetperf/data/distilbert
      - --run-dir
    python: /shared/fleetperf/venv/bin/python
    chdir: /shared/fleetperf/repo
    data_dir: /shared/fleetperf/data/distilbert
    partition: gpu
    gres: gpu
    time_limit: "02:00:00"
    extra_options: [--exclude=node-9]
"""

RETURN = r"""
job_id:
  description: The Slurm job id (also in C(slurm_job_id) in O(run_dir)).
  returned: success
  type: str
  sample: "4711"
partition:
  description: O(partition) as given.
  returned: when the job was submitted now
  type: str
  sample: gpu
msg:
  description: V(already submitted) when O(run_dir) already named a job.
  returned: when the run dir was submitted before
  type: str
  sample: already submitted
"""

import os

from ansible.module_utils import fleetperf_host as files
from ansible.module_utils import fleetperf_slurm as slurm
from ansible.module_utils.basic import AnsibleModule


def sbatch_argv(p: dict, run_dir: str) -> list[str]:
    argv = [
        "sbatch",
        "--parsable",
        f"--job-name=fleetperf-{p['run_id']}",
        f"--nodes={p['nnodes']}",
        "--ntasks-per-node=1",
        f"--cpus-per-task={p['nproc_per_node']}" if not p["gres"] else "--exclusive",
        f"--output={os.path.join(run_dir, 'slurm-%j.out')}",
        f"--chdir={p['chdir']}",
        "--export=ALL",
        "--no-requeue",  # a failed node fails the run: fleetperf reports, never reruns
    ]
    for option in ("partition", "account", "qos", "constraint"):
        if p[option]:
            argv.append(f"--{option}={p[option]}")
    if p["gres"]:
        argv.append(f"--gres={p['gres']}:{p['nproc_per_node']}")
    if p["time_limit"]:
        argv.append(f"--time={p['time_limit']}")
    return argv + list(p["extra_options"])


def task_argv(p: dict, run_dir: str) -> list[str]:
    """What srun starts on each node: the container's options, then the launcher."""
    launcher = [
        p["python"],
        os.path.join(run_dir, slurm.LAUNCHER_FILE),
        run_dir,
        p["data_dir"],
        str(p["nproc_per_node"]),
        *p["workload"],
    ]
    mounts = sorted({run_dir, *p["mounts"]})
    if p["container"] == "pyxis":
        binds = ",".join(f"{m}:{m}" for m in mounts)
        return [f"--container-image={p['image']}", f"--container-mounts={binds}", *launcher]
    if p["container"] == "apptainer":
        return ["apptainer", "exec", "--bind", ",".join(mounts), p["image"], *launcher]
    return launcher


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "run_dir": {"type": "path", "required": True},
            "run_id": {"type": "str", "required": True},
            "nnodes": {"type": "int", "required": True},
            "nproc_per_node": {"type": "int", "required": True},
            "workload": {"type": "list", "elements": "str", "required": True},
            "python": {"type": "str", "required": True},
            "chdir": {"type": "path", "required": True},
            "data_dir": {"type": "path", "required": True},
            "env": {"type": "dict", "default": {}, "no_log": True},  # tokens (HF_TOKEN)
            "partition": {"type": "str", "default": ""},
            "account": {"type": "str", "default": ""},
            "qos": {"type": "str", "default": ""},
            "constraint": {"type": "str", "default": ""},
            "gres": {"type": "str", "default": ""},
            "time_limit": {"type": "str", "default": ""},
            "extra_options": {"type": "list", "elements": "str", "default": []},
            "container": {
                "type": "str",
                "default": "none",
                "choices": ["none", "pyxis", "apptainer"],
            },
            "image": {"type": "str", "default": ""},
            "mounts": {"type": "list", "elements": "str", "default": []},
        },
        required_if=[("container", "pyxis", ("image",)), ("container", "apptainer", ("image",))],
        supports_check_mode=False,
    )
    p = module.params
    run_dir = p["run_dir"]
    known = slurm.job_id(run_dir)
    if known:
        module.exit_json(changed=False, job_id=known, msg="already submitted")
    bad = [o for o in p["extra_options"] if not o.startswith("--") or "\n" in o]
    if bad:
        module.fail_json(
            msg=f"fleetperf_slurm_sbatch_options: {bad[0]!r}: one option a word, as --name=value"
        )
    script = os.path.join(run_dir, slurm.JOB_SCRIPT_FILE)
    files.replace(script, slurm.JOB_SCRIPT)
    os.chmod(script, 0o755)
    files.replace(os.path.join(run_dir, slurm.LAUNCHER_FILE), slurm.NODE_LAUNCHER)
    env = dict(os.environ)
    env.update({str(k): str(v) for k, v in p["env"].items()})
    env.update(PYTHONUNBUFFERED="1")
    argv = [*sbatch_argv(p, run_dir), script, *task_argv(p, run_dir)]
    done = slurm.subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    job = done.stdout.strip().split(";")[0]
    if done.returncode != 0 or not job.isdigit():
        module.fail_json(msg=f"sbatch refused the job: {slurm.one_line(done.stderr) or job}")
    files.replace(os.path.join(run_dir, slurm.JOB_ID_FILE), job)
    module.exit_json(changed=True, job_id=job, partition=p["partition"])


if __name__ == "__main__":
    main()
