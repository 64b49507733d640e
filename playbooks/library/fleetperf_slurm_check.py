#!/usr/bin/python
"""Plan a Slurm run on its login host: the partition, its nodes, the shared paths."""

DOCUMENTATION = r"""
module: fleetperf_slurm_check
short_description: Check that a Slurm partition can run a fleetperf config, before sbatch
description:
  - On the login (submit) host. Fails with one line naming O(host) when O(partition) does
    not exist (C(scontrol show partition)), when it has fewer than O(nnodes) nodes that are
    up (not down, drained or failing) with O(gres) times O(devices) each (or, without
    O(gres), O(devices) CPUs) and every feature of a plain O(constraint) (C(sinfo)), or
    when the case's data, the repository or the Python environment is missing on the
    shared filesystem as this host sees it.
  - Creates O(run_root)/O(run_id) with C(config.json), which the nodes read.
options:
  host:
    description: The inventory name, for messages.
    type: str
    required: true
  partition:
    description: The partition (V("") is the cluster's default).
    type: str
    default: ""
  nnodes: {description: Nodes the config needs., type: int, required: true}
  devices: {description: Devices per node the config needs., type: int, required: true}
  gres:
    description: The devices' GRES name, for example V(gpu) (V("") counts CPUs).
    type: str
    default: ""
  constraint:
    description: Node features asked for (C(sbatch --constraint)).
    type: str
    default: ""
  run_root:
    description: Where run directories live, on the shared filesystem.
    type: path
    required: true
  run_id: {description: The run., type: str, required: true}
  case:
    description: The case, for the hint that stages its data.
    type: str
    required: true
  data_dir: {description: The case's data directory (shared)., type: path, required: true}
  requires:
    description: Paths under O(data_dir) that must exist.
    type: list
    elements: str
    default: []
  paths:
    description: "Other paths the nodes use, by name: name -> path (shared)."
    type: dict
    default: {}
  config:
    description: The resolved config, written as C(config.json).
    type: dict
    required: true
  data_manifest:
    description: The file C(fleetperf prepare) writes in O(data_dir); its C(synthetic)
      comes back as RV(synthetic_data).
    type: str
    required: true
extends_documentation_fragment: action_common_attributes
attributes:
  check_mode: {support: none}
  diff_mode: {support: none}
  platform: {platforms: posix}
requirements:
  - The Slurm client commands (C(scontrol), C(sinfo)) on the login host.
seealso:
  - module: fleetperf_slurm_submit
author:
  - The fleetperf project
"""

EXAMPLES = r"""
- name: Check the partition and the shared paths
  fleetperf_slurm_check:
    host: "{{ inventory_hostname }}"
    partition: gpu
    nnodes: 2
    devices: 8
    gres: gpu
    run_root: /shared/fleetperf/runs
    run_id: distilbert-20250101-120000-ab12
    case: distilbert
    data_dir: /shared/fleetperf/data/distilbert
    requires: [train.jsonl]
    paths: {the case: /shared/fleetperf/repo/cases/distilbert}
    config: {case: distilbert, nnodes: 2, nproc_per_node: 8}
    data_manifest: fleetperf-data.json
"""

RETURN = r"""
run_dir:
  description: The run's directory, O(run_root)/O(run_id), now created.
  returned: success
  type: path
  sample: /shared/fleetperf/runs/distilbert-20250101-120000-ab12
partition:
  description: O(partition) as given (V("") for the default one).
  returned: success
  type: str
  sample: gpu
usable_nodes:
  description: How many nodes of the partition can take one task of the config.
  returned: success
  type: int
  sample: 4
load_per_cpu:
  description: Always null; the nodes are not known before Slurm picks them.
  returned: success
  type: float
  sample: null
synthetic_data:
  description: Whether C(fleetperf prepare --synthetic) made the data; null when the
    manifest does not say.
  returned: success
  type: bool
  sample: false
"""

import json
import os
import re

from ansible.module_utils import fleetperf_host as files
from ansible.module_utils import fleetperf_slurm as slurm
from ansible.module_utils.basic import AnsibleModule

UNUSABLE = ("down", "drain", "fail", "maint", "reboot", "future", "inval", "unk", "no_resp")


def gres_count(gres: str, name: str) -> int:
    """How many of GRES ``name`` ("gpu", or "gpu:a100") sinfo's %G field lists."""
    total = 0
    for item in re.split(r",(?![^(]*\))", gres):
        parts = re.sub(r"\(.*\)", "", item).split(":")
        if parts[0] != name.split(":")[0] or not parts[-1].isdigit():
            continue
        if ":" in name and (len(parts) < 3 or parts[1] != name.split(":")[1]):
            continue
        total += int(parts[-1])
    return total


def usable_nodes(partition: str, devices: int, gres: str, constraint: str) -> tuple[int, int]:
    """(nodes in the partition, nodes that can take one task of the config)."""
    argv = ["sinfo", "-h", "-N", "-o", "%N|%T|%G|%f|%c"]
    done = slurm.run([*argv, "-p", partition] if partition else argv)
    features = (
        [f for f in re.split(r"[&,]", constraint) if f]
        if re.fullmatch(r"[\w&,]*", constraint)
        else []
    )
    seen, fits = set(), set()
    for line in done.stdout.splitlines():
        name, state, node_gres, node_features, cpus = (line.split("|") + [""] * 5)[:5]
        seen.add(name)
        if any(state.lower().startswith(u) for u in UNUSABLE) or state.endswith("*"):
            continue
        have = gres_count(node_gres, gres) if gres else int(cpus or 0)
        if have >= devices and set(features) <= set(node_features.split(",")):
            fits.add(name)
    return len(seen), len(fits)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "host": {"type": "str", "required": True},
            "partition": {"type": "str", "default": ""},
            "nnodes": {"type": "int", "required": True},
            "devices": {"type": "int", "required": True},
            "gres": {"type": "str", "default": ""},
            "constraint": {"type": "str", "default": ""},
            "run_root": {"type": "path", "required": True},
            "run_id": {"type": "str", "required": True},
            "case": {"type": "str", "required": True},
            "data_dir": {"type": "path", "required": True},
            "requires": {"type": "list", "elements": "str", "default": []},
            "paths": {"type": "dict", "default": {}},
            "config": {"type": "dict", "required": True},
            "data_manifest": {"type": "str", "required": True},
        },
        supports_check_mode=False,
    )
    p = module.params
    host, part = p["host"], p["partition"]
    where = f"host {host}: slurm"
    if part:
        done = slurm.run(["scontrol", "show", "partition", "-o", part])
        if done.returncode != 0 or not done.stdout.strip():
            why = slurm.one_line(done.stderr + done.stdout) or "not found"
            module.fail_json(msg=f"{where}: partition {part!r}: {why} (fleetperf_slurm_partition)")
    elif slurm.run(["sinfo", "--version"]).returncode != 0:
        module.fail_json(msg=f"{where}: sinfo does not run here (is this a Slurm login host?)")
    total, fits = usable_nodes(part, p["devices"], p["gres"], p["constraint"])
    if fits < p["nnodes"]:
        what = f"{p['gres']}:{p['devices']}" if p["gres"] else f"{p['devices']}+ CPUs"
        if p["constraint"]:
            what += f" and features {p['constraint']}"
        module.fail_json(
            msg=f"{where}: partition {part or '(default)'} has {fits} usable node(s) with"
            f" {what} (of {total}), the config needs {p['nnodes']}"
        )
    needed = [("data", p["data_dir"])] + [
        ("data", os.path.join(p["data_dir"], r)) for r in p["requires"]
    ]
    for name, path in needed + list(p["paths"].items()):
        if path and not os.path.exists(path):
            hint = f" ({files.staging_hint(p['case'])})" if name == "data" else ""
            module.fail_json(
                msg=f"host {host}: missing {path} ({name}, shared with the nodes){hint}"
            )
    run_dir = os.path.join(p["run_root"], p["run_id"])
    os.makedirs(os.path.join(run_dir, slurm.NODES_DIR), exist_ok=True)
    files.replace(os.path.join(run_dir, "config.json"), json.dumps(p["config"], indent=2) + "\n")
    try:
        with open(os.path.join(p["data_dir"], p["data_manifest"])) as f:
            synthetic = json.load(f).get("synthetic")
    except (OSError, ValueError, AttributeError):
        synthetic = None
    module.exit_json(
        changed=True,
        run_dir=run_dir,
        partition=part,
        usable_nodes=fits,
        load_per_cpu=None,
        synthetic_data=synthetic if isinstance(synthetic, bool) else None,
    )


if __name__ == "__main__":
    main()
