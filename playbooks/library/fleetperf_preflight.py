#!/usr/bin/python
"""Make a host ready for one run: check it, create the run dir, take the host lease."""

DOCUMENTATION = r"""
module: fleetperf_preflight
short_description: Check a fleetperf host and take its lease, in one module run
description:
  - On a V(docker) host it looks up O(image) on the engine and checks that the image
    under it carries O(image_context) in its label org.fleetperf.context. It fails with one
    line naming O(host), the tag, what the engine has instead (an older build of the same
    repository is stale; a tag re-pointed at an image built from anything else is refused)
    and O(build_command); it returns the id of the image checked, which the launch runs.
  - Fails with one line naming O(host) when O(python) cannot find a module of O(imports),
    when the case's data is missing, when the run root
    has less than O(min_free_gib) free, when O(master_port) is taken on this host, or when
    another run holds the host lease and does not let go within O(lease_wait_s).
  - Creates O(run_root)/O(run_id), writes O(config) there as C(config.json), and creates
    the empty C(events.jsonl) that it returns as C(events); the controller follows it
    (tui/core/stream.py) from before the launch, and C(tail -F) on a file that does not exist
    yet falls back to polling once a second instead of inotify.
  - The lease is O(run_root)/fleetperf.lease, a JSON file naming the run and its
    controller. It is stale, and taken over, when its run's workload no longer runs (a process
    run runs while there is no C(exit_code) and the supervisor of C(workload.pid) is still
    the process the launch recorded in C(workload.id), same boot and start time, so a pid
    reused or from before a reboot does not hold the host; a docker run, while the engine at
    O(docker_host) says a container labelled with that run and O(host) runs) and either the
    controller process is provably gone (same boot, PID and time namespaces, its pid free or
    started at another time; a controller in a container on the host proves nothing) or the
    run's C(heartbeat)
    (touched by M(fleetperf_tail) while it polls) is older than O(lease_stale_s).
    M(fleetperf_stop) releases it.
  - Every take, take-over and release happens under an exclusive C(flock) of
    O(run_root)/fleetperf.lease.lock (a file never removed), and the lease is written whole
    to a temp file and renamed into place; a lease is never seen half written, and of
    preflights racing for one host exactly one holds it.
options:
  host:
    description: The inventory name, for messages.
    type: str
    required: true
  run_root:
    description: Where run directories live on this host.
    type: path
    required: true
  run_id: {description: The run., type: str, required: true}
  case:
    description: The case, for the hint that stages its data.
    type: str
    required: true
  data_dir: {description: The case's data directory., type: path, required: true}
  requires:
    description: Paths under O(data_dir) that must exist.
    type: list
    elements: str
    default: []
  config:
    description: The resolved config, written as C(config.json).
    type: dict
    required: true
  min_free_gib: {description: Least free space in the run root (GiB)., type: float, default: 1.0}
  master_port:
    description: On the master host, the rendezvous port to check (V(0) picks a free one);
      omitted on the other hosts.
    type: int
  controller:
    description: The controller that takes the lease (host, pid, start, boot_id, pidns,
      timens, machine_id).
    type: dict
    required: true
  lease_wait_s:
    description: Seconds to wait for a lease another run holds (0 refuses at once).
    type: float
    default: 0
  lease_stale_s: {description: Heartbeat age that makes a lease stale., type: float, default: 60}
  data_manifest:
    description: The file in O(data_dir) that C(fleetperf prepare) writes (how the data was
      made). Its C(synthetic) comes back as RV(synthetic_data), null where it is absent.
    type: str
    required: true
  python:
    description: The workload's interpreter (C(fleetperf_python)) on a process host; it must
      find each module of O(imports) (C(importlib.util.find_spec), in this module's
      environment, without importing them).
    type: str
  imports:
    description: Top-level modules the workload imports (tui/catalog/caseimports.py) -> the
      distribution that provides each, for the message. Checked only with O(python).
    type: dict
    default: {}
  executor:
    description: The host's C(fleetperf_executor); this module serves V(process) and
      V(docker) hosts and refuses any other first (a Slurm login host runs slurm.yml).
    type: str
    default: process
  docker_host:
    description: The engine of a V(docker) host (V("") is the local one).
    type: str
    default: ""
  image:
    description: On a V(docker) host, the benchmark image's expected tag (a hash of its
      build context, see tui/catalog/images.py), checked before the rest; V("") (the
      run's vendor has no image) refuses the host. Not given, no image is checked.
    type: str
  image_context:
    description: On a V(docker) host, the image's whole build context hash, which its
      label org.fleetperf.context must hold (set at build).
    type: str
    default: ""
  build_command:
    description: On a V(docker) host, the command that builds the image, for the message.
    type: str
    default: ""
extends_documentation_fragment: action_common_attributes
attributes:
  check_mode: {support: none}
  diff_mode: {support: none}
  platform: {platforms: posix}
requirements:
  - On a V(docker) host, the Docker SDK for Python (C(docker)).
seealso:
  - module: fleetperf_launch
  - module: fleetperf_stop
author:
  - The fleetperf project
"""

EXAMPLES = r"""
- name: Check the host and take its lease
  fleetperf_preflight:
    host: "{{ inventory_hostname }}"
    run_root: /var/lib/fleetperf/runs
    run_id: distilbert-20250101-120000-ab12
    case: distilbert
    data_dir: /var/lib/fleetperf/data/distilbert
    requires: [train.jsonl, vocab.txt]
    config: {case: distilbert, nnodes: 1, nproc_per_node: 1, hp: {lr: 0.0001}}
    master_port: 0
    controller:
      host: ctl.example.org
      pid: 4242
      start: 81234
      boot_id: 7c1e0b6e-0d7a-4a43-9a52-3a8f1c2b9e10
      pidns: 4026531836
      timens: 4026531834
      machine_id: null
    lease_wait_s: 60
    data_manifest: fleetperf-data.json
    python: /opt/fleetperf/venv/bin/python
    imports: {torch: torch, transformers: transformers, yaml: pyyaml}
  register: ready
"""

RETURN = r"""
master_port:
  description: The rendezvous port found free (O(master_port), or the free one picked for
    V(0)); null where O(master_port) was not given.
  returned: success
  type: int
  sample: 29500
free_gib:
  description: Free space in O(run_root), in GiB.
  returned: success, and on failure for too little of it
  type: float
  sample: 412.37
run_dir:
  description: The run's directory, O(run_root)/O(run_id), now created.
  returned: success
  type: path
  sample: /var/lib/fleetperf/runs/distilbert-20250101-120000-ab12
events:
  description: The run's C(events.jsonl), created empty for the controller to follow.
  returned: success
  type: path
  sample: /var/lib/fleetperf/runs/distilbert-20250101-120000-ab12/events.jsonl
load_per_cpu:
  description: The host's 1-minute load average per CPU as the run starts.
  returned: success
  type: float
  sample: 0.04
synthetic_data:
  description: Whether C(fleetperf prepare --synthetic) made the data (O(data_manifest));
    null when the manifest does not say.
  returned: success
  type: bool
  sample: false
image_id:
  description: The id of the image under O(image), the one the launch runs.
  returned: success on a V(docker) host, and on failure when the tag names another image
  type: str
  sample: sha256:9b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c
"""

from ansible.module_utils import fleetperf_preflight_step
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fleetperf_refused import Refused


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "host": {"type": "str", "required": True},
            "run_root": {"type": "path", "required": True},
            "run_id": {"type": "str", "required": True},
            "case": {"type": "str", "required": True},
            "data_dir": {"type": "path", "required": True},
            "requires": {"type": "list", "elements": "str", "default": []},
            "config": {"type": "dict", "required": True},
            "min_free_gib": {"type": "float", "default": 1.0},
            "master_port": {"type": "int"},
            "controller": {"type": "dict", "required": True},
            "lease_wait_s": {"type": "float", "default": 0},
            "lease_stale_s": {"type": "float", "default": fleetperf_preflight_step.LEASE_STALE_S},
            "data_manifest": {"type": "str", "required": True},
            "python": {"type": "str"},
            "imports": {"type": "dict", "default": {}},
            "executor": {"type": "str", "default": "process"},
            "docker_host": {"type": "str", "default": ""},
            "image": {"type": "str"},
            "image_context": {"type": "str", "default": ""},
            "build_command": {"type": "str", "default": ""},
        },
        supports_check_mode=False,
    )
    try:
        result = fleetperf_preflight_step.preflight(module.params)
    except Refused as exc:
        module.fail_json(msg=str(exc), **exc.fields)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
