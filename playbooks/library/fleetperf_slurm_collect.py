#!/usr/bin/python
"""Snapshot a fleetperf Slurm run's node files into one tar file, for one fetch."""

DOCUMENTATION = r"""
module: fleetperf_slurm_collect
short_description: Snapshot every node's regular files of a fleetperf Slurm run as one tar file
description:
  - On the login host, after M(fleetperf_slurm_cancel). Each node writes its own directory
    O(run_dir)/nodes/NODE on the shared filesystem, so any name there may be a link by the
    time the play looks. Copies each of O(files) that is a regular file (opened with
    C(O_NOFOLLOW), checked with C(fstat)) of each node directory (a real directory whose
    name Slurm could give a node, never a link) into one uncompressed tar file O(archive)
    as member C(NODE/NAME), in a new private directory beside the run dir, returned as
    C(dir).
  - The play fetches that one file to a name the controller chose; the controller unpacks
    it and checks every node name itself (tui/core/paths.py C(host_path)), so nothing a host
    returns ever names a path on the controller.
options:
  run_dir: {description: The run's directory (shared)., type: path, required: true}
  files:
    description: Names in each node's directory (plain names, no C(/)).
    type: list
    elements: str
    required: true
  archive:
    description: The tar file's name (a plain name) in RV(dir).
    type: str
    required: true
  limits:
    description: NAME -> C({bytes, keep}), as M(fleetperf_collect) takes it; a file cut to
      its limit is named in RV(cut) and its member carries its whole size in the
      C(FLEETPERF.size) pax header.
    type: dict
    default: {}
extends_documentation_fragment: action_common_attributes
attributes:
  check_mode: {support: none}
  diff_mode: {support: none}
  platform: {platforms: posix}
notes:
  - The snapshot directory is the caller's to remove (playbooks/tasks/slurm_stop.yml does,
    in an C(always) section).
seealso:
  - module: fleetperf_slurm_cancel
  - module: fleetperf_collect
author:
  - The fleetperf project
"""

EXAMPLES = r"""
- name: Snapshot the nodes' regular files
  fleetperf_slurm_collect:
    run_dir: /shared/fleetperf/runs/distilbert-20250101-120000-ab12
    files: [events.jsonl, stdout.log, stderr.log, exit_code]
    archive: files.tar
  register: node_files

- name: Fetch the snapshot
  ansible.builtin.fetch:
    src: "{{ node_files.dir }}/files.tar"
    dest: results/hosts/{{ inventory_hostname }}/files.tar
    flat: true
  when: node_files.dir is defined
"""

RETURN = r"""
dir:
  description: The new private directory beside O(run_dir) that holds O(archive).
  returned: when O(run_dir) exists
  type: path
  sample: /shared/fleetperf/runs/.collect-distilbert-20250101-120000-ab12-k3j9x2
nodes:
  description: The nodes whose directories were snapshot.
  returned: success
  type: list
  elements: str
  sample: [node-1, node-2]
skipped:
  description: The C(NODE/NAME) of O(files) left out (missing, or not a regular file).
  returned: success
  type: list
  elements: str
  sample: [node-2/stderr.log]
cut:
  description: The C(NODE/NAME) copied cut to their O(limits), each with its whole size.
  returned: when O(run_dir) exists
  type: dict
  sample: {node-1/stdout.log: 1073741824}
"""

import os
import tarfile
import tempfile

from ansible.module_utils import fleetperf_host as files
from ansible.module_utils import fleetperf_slurm as slurm
from ansible.module_utils.basic import AnsibleModule


def snapshot(
    run_dir: str, names: list[str], archive: str, limits: dict[str, tuple[int, str]]
) -> tuple[str, list[str], list[str], dict[str, int]]:
    """The snapshot directory, the nodes in it, the NODE/NAME left out, those cut."""
    run_dir = os.path.normpath(run_dir)
    root, run_id = os.path.split(run_dir)
    dest = tempfile.mkdtemp(prefix=f".collect-{run_id}-", dir=root)  # 0700, a new name
    nodes = slurm.node_dirs(run_dir)
    skipped, cut = [], {}
    with tarfile.open(os.path.join(dest, archive), "x", format=tarfile.PAX_FORMAT) as tar:
        for node, path in nodes.items():
            for name in names:
                fd = files.open_regular(os.path.join(path, name))
                if fd is None:
                    skipped.append(f"{node}/{name}")
                    continue
                with os.fdopen(fd, "rb") as src:
                    size = files.add_to_tar(tar, src, f"{node}/{name}", limits.get(name))
                if size is not None:
                    cut[f"{node}/{name}"] = size
    return dest, list(nodes), skipped, cut


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "run_dir": {"type": "path", "required": True},
            "files": {"type": "list", "elements": "str", "required": True},
            "archive": {"type": "str", "required": True},
            "limits": {"type": "dict", "default": {}},
        },
        supports_check_mode=False,
    )
    p = module.params
    bad = [("files", n) for n in p["files"] if not files.plain(n)]
    bad += [] if files.plain(p["archive"]) else [("archive", p["archive"])]
    if bad:
        field, name = bad[0]
        module.fail_json(msg=f"fleetperf_slurm_collect: {field}: {name!r} is not a plain file name")
    try:
        limits = files.limits(p["limits"])
    except ValueError as exc:
        module.fail_json(msg=f"fleetperf_slurm_collect: {exc}")
    if not os.path.isdir(p["run_dir"]):  # never created (the planning failed first)
        module.exit_json(changed=False, nodes=[], skipped=[])
    dest, nodes, skipped, cut = snapshot(p["run_dir"], p["files"], p["archive"], limits)
    module.exit_json(changed=True, dir=dest, nodes=nodes, skipped=skipped, cut=cut)


if __name__ == "__main__":
    main()
