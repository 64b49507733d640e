#!/usr/bin/python
"""Start a benchmark workload detached from Ansible, with its output kept in the run dir."""

DOCUMENTATION = r"""
module: fleetperf_launch
short_description: Start a fleetperf workload in the background
description:
  - Starts O(argv) in a new session through a small supervisor process that writes
    C(stdout.log), C(stderr.log), C(workload.pid) and, when the workload ends, C(exit_code)
    into O(run_dir). Beside the pid, C(workload.id) records the supervisor's boot id and
    start time; M(fleetperf_stop) and M(fleetperf_preflight) take the pid for the workload's
    only while both match. The module returns at once; M(fleetperf_tail) follows the run.
  - A run dir that already holds C(workload.pid) is left alone (idempotent).
options:
  run_dir:
    description: The host's run directory (must exist).
    type: path
    required: true
  argv:
    description: The workload command, run without a shell.
    type: list
    elements: str
    required: true
  chdir:
    description: Working directory of the workload.
    type: path
    required: true
  env:
    description: Extra environment variables (tokens such as C(HF_TOKEN)); never logged
      (C(no_log)).
    type: dict
    default: {}
  bind_addr:
    description: For a multi-node run, the address (or name) the other nodes reach this
      host on. C(GLOO_SOCKET_IFNAME) and C(NCCL_SOCKET_IFNAME) are set to the interface
      that holds it, or else the one holding the address this SSH session came in on
      (C(SSH_CONNECTION)), unless O(env) sets them; without them gloo binds the address
      the hostname resolves to, often loopback, and its peers are refused. Where no
      interface holds either (an address behind NAT), the variables stay unset.
    type: str
    default: ""
  executor:
    description: C(process) on the host (module_utils/fleetperf_process.py), or C(docker)
      in the vendor's image (module_utils/fleetperf_docker.py; then only O(env) reaches the
      workload, and O(container), O(run_id) and O(host) are required).
    type: str
    default: process
    choices: [process, docker]
  docker_host:
    description: The engine for C(docker) (V("") is the local one).
    type: str
    default: ""
  run_id:
    description: The run (a container label); the name of O(run_dir).
    type: str
    default: ""
  host:
    description: The inventory host (a container label).
    type: str
    default: ""
  container:
    description: The image, mounts and device access of O(executor=docker)
      (module_utils/fleetperf_docker.py).
    type: dict
    suboptions:
      image:
        description: The image to run, the id that M(fleetperf_preflight) checked.
        type: str
        required: true
      case:
        description: The case (a container label).
        type: str
        required: true
      mounts_ro:
        description: Host paths mounted read-only at the same path (data, the case's code).
        type: list
        elements: path
        default: []
      host_network:
        description: Use the host's network (multi-node runs).
        type: bool
        default: false
      network:
        description: The network of a single-node container (V("") is the engine's default).
        type: str
        default: ""
      gpus:
        description: C(docker --gpus) (V(all), a count, or device ids V(0,1)).
        type: str
        default: ""
      devices:
        description: Device paths or globs passed through (read, write, mknod).
        type: list
        elements: str
        default: []
      cap_add:
        description: Capabilities added to the container.
        type: list
        elements: str
        default: []
      ulimits:
        description: Limits by name (soft and hard), V(-1) for unlimited.
        type: dict
        default: {}
      shm_size:
        description: Size of C(/dev/shm) (V("") is the engine's default).
        type: str
        default: ""
extends_documentation_fragment: action_common_attributes
attributes:
  check_mode: {support: full}
  diff_mode: {support: none}
  platform: {platforms: posix}
requirements:
  - The Docker SDK for Python (C(docker)) on the host, for O(executor=docker).
seealso:
  - module: fleetperf_tail
  - module: fleetperf_stop
author:
  - The fleetperf project
"""

EXAMPLES = r"""
- name: Start the workload on the host
  fleetperf_launch:
    run_dir: /var/lib/fleetperf/runs/distilbert-20250101-120000-ab12
    argv:
      - /usr/bin/python3
      - cases/distilbert/run.py
      - --config
      - /var/lib/fleetperf/runs/distilbert-20250101-120000-ab12/config.json
    chdir: /opt/fleetperf
    env: {PYTHONUNBUFFERED: "1"}

- name: Start it in the vendor's image instead
  fleetperf_launch:
    run_dir: /var/lib/fleetperf/runs/distilbert-20250101-120000-ab12
    argv: [python, cases/distilbert/run.py]
    chdir: /opt/fleetperf
    executor: docker
    run_id: distilbert-20250101-120000-ab12
    host: "{{ inventory_hostname }}"
    container:
      image: sha256:9b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c
      case: distilbert
      mounts_ro: [/var/lib/fleetperf/data/distilbert]
      gpus: all
"""

RETURN = r"""
pid:
  description: The supervisor's pid, also its process group (O(executor=process)).
  returned: when the workload runs as a process
  type: int
  sample: 48213
msg:
  description: V(already started) when O(run_dir) already held C(workload.pid).
  returned: when the run dir was launched before
  type: str
  sample: already started
container:
  description: The id of the run's container.
  returned: when O(executor=docker)
  type: str
  sample: 0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0
image:
  description: The image the container runs, as given in O(container.image).
  returned: when O(executor=docker)
  type: str
  sample: sha256:9b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c
image_id:
  description: The id of that image, as the engine resolved it.
  returned: when O(executor=docker)
  type: str
  sample: sha256:9b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c
"""

import ipaddress
import os
import socket

from ansible.module_utils import fleetperf_docker, fleetperf_process
from ansible.module_utils import fleetperf_host as files
from ansible.module_utils.basic import AnsibleModule

# The interface gloo and NCCL open their sockets on (bootstrap, and TCP transport).
SOCKET_IFNAMES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")


def _addresses(addr: str) -> list:
    """``addr`` as IP addresses: itself, or what the name resolves to here."""
    try:
        return [ipaddress.ip_address(addr)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(addr, None)
    except OSError:
        return []
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


def socket_ifname(module: AnsibleModule) -> str | None:
    """The interface holding O(bind_addr), else the address this SSH session reached the
    host on; None when no interface holds either."""
    wanted = [module.params["bind_addr"], *os.environ.get("SSH_CONNECTION", "").split()[2:3]]
    ip_bin = module.get_bin_path("ip")  # iproute2
    rc, out, _ = module.run_command([ip_bin, "-o", "addr", "show"]) if ip_bin else (1, "", "")
    owners = {}
    for line in out.splitlines() if rc == 0 else []:
        words = line.split()  # 2: eth0    inet 10.0.0.2/24 brd ... scope global eth0
        if len(words) > 3 and words[2] in ("inet", "inet6"):
            ip = ipaddress.ip_address(words[3].split("/")[0])
            owners.setdefault(ip, words[1].split("@")[0])
    for addr in wanted:
        for ip in _addresses(addr):
            if ip in owners:
                return owners[ip]
    return None


def workload_env(module: AnsibleModule) -> dict[str, str]:
    """O(env), with the socket interfaces of a multi-node run where it does not set them."""
    env = {str(k): str(v) for k, v in module.params["env"].items()}
    if module.params["bind_addr"] and not set(SOCKET_IFNAMES) <= set(env):
        ifname = socket_ifname(module)
        if ifname:
            env = {**dict.fromkeys(SOCKET_IFNAMES, ifname), **env}
        else:
            module.warn(
                f"no interface holds {module.params['bind_addr']}: gloo and NCCL bind"
                " their defaults (set GLOO_SOCKET_IFNAME in fleetperf_workload_env)"
            )
    return env


def launch_container(module: AnsibleModule, run_dir: str) -> None:
    """The supervisor and its workload in the vendor's image; only ``env`` goes in."""
    p = module.params
    why = fleetperf_docker.require_sdk()
    if why:
        module.fail_json(msg=f"host {p['host']}: {why}")
    env = workload_env(module)
    command = fleetperf_process.supervised("python", run_dir, p["argv"])
    target = fleetperf_docker.target(run_dir, p["docker_host"], p["host"])
    if target["run_id"] != p["run_id"]:  # tail and stop find the container by its run dir
        module.fail_json(msg=f"host {p['host']}: {run_dir} is not run {p['run_id']}'s directory")
    try:
        started = fleetperf_docker.launch(run_dir, target, p["container"], command, env)
    except Exception as exc:  # noqa: BLE001 - an engine error is this host's one-line failure
        module.fail_json(msg=f"host {p['host']}: docker: {str(exc).splitlines()[0]}")
    module.exit_json(changed=started.pop("started"), **started)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "run_dir": {"type": "path", "required": True},
            "argv": {"type": "list", "elements": "str", "required": True},
            "chdir": {"type": "path", "required": True},
            "env": {"type": "dict", "default": {}, "no_log": True},  # tokens (HF_TOKEN)
            "bind_addr": {"type": "str", "default": ""},
            "executor": {"type": "str", "default": "process", "choices": ["process", "docker"]},
            "docker_host": {"type": "str", "default": ""},
            "run_id": {"type": "str", "default": ""},
            "host": {"type": "str", "default": ""},
            "container": {"type": "dict", "options": fleetperf_docker.CONTAINER_OPTIONS},
        },
        required_if=[("executor", "docker", ("container", "run_id", "host"))],
        supports_check_mode=True,
    )
    run_dir = module.params["run_dir"]
    pid_file = os.path.join(run_dir, files.PID_FILE)
    if not os.path.isdir(run_dir):
        module.fail_json(msg=f"run directory {run_dir} does not exist")
    if os.path.lexists(pid_file):
        try:
            pid = int(files.read_text(pid_file) or "")
        except ValueError:
            module.fail_json(msg=f"{pid_file}: not a pid")
        module.exit_json(changed=False, pid=pid, msg="already started")
    if module.check_mode:
        module.exit_json(changed=True)
    if module.params["executor"] == "docker":
        launch_container(module, run_dir)
    p = module.params
    pid = fleetperf_process.launch(run_dir, p["argv"], p["chdir"], workload_env(module))
    module.exit_json(changed=True, pid=pid)


if __name__ == "__main__":
    main()
