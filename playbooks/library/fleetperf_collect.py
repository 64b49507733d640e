#!/usr/bin/python
"""Copy a run's files out of the workload's reach, for the controller to fetch."""

DOCUMENTATION = r"""
module: fleetperf_collect
short_description: Snapshot a fleetperf run's regular files for ansible.builtin.fetch
description:
  - The workload writes its run dir (a container has it mounted), so any name there may be
    a link to a host file by the time the play fetches it, and C(ansible.builtin.fetch)
    follows links. This module copies each of O(files) that is a regular file in O(run_dir)
    (opened with C(O_NOFOLLOW), checked with C(fstat)) into a new private directory beside
    the run dir, outside what a container sees, and returns it as C(dir) with the names
    copied as C(files). Links, FIFOs, devices and missing names are left out, named in
    C(skipped). The play fetches from C(dir) and removes it.
  - With O(archive), the copies go into one tar file of that name in C(dir) instead (regular
    file members only, each under its own name), so that the play fetches one file.
  - With O(limits), a file larger than its limit is copied cut to that many bytes of its
    head or tail (the controller caps what one host can make it hold), named in RV(cut) with
    its whole size; in O(archive), that size is also the member's C(FLEETPERF.size) pax
    header.
options:
  run_dir: {description: The host's run directory., type: path, required: true}
  files:
    description: Names in O(run_dir) (plain names, no C(/)).
    type: list
    elements: str
    required: true
  archive:
    description: Put the copies into one uncompressed tar file of this name (a plain name)
      in RV(dir), returned as RV(archive).
    type: str
  limits:
    description: NAME -> C({bytes, keep}), the most of that file copied and which end is
      kept (C(head) or C(tail)); a name not in it is copied whole (tui/executors/hostfiles.py
      HOST_FILE_LIMITS).
    type: dict
    default: {}
extends_documentation_fragment: action_common_attributes
attributes:
  check_mode: {support: none}
  diff_mode: {support: none}
  platform: {platforms: posix}
notes:
  - The snapshot directory is the caller's to remove (playbooks/tasks/stop_workload.yml
    does, in an C(always) section).
seealso:
  - module: ansible.builtin.fetch
  - module: fleetperf_stop
author:
  - The fleetperf project
"""

EXAMPLES = r"""
- name: Snapshot the run's regular files
  fleetperf_collect:
    run_dir: /var/lib/fleetperf/runs/distilbert-20250101-120000-ab12
    files: [events.jsonl, stdout.log, stderr.log, exit_code, config.json]
  register: collected

- name: Fetch the snapshot
  ansible.builtin.fetch:
    src: "{{ collected.dir }}/{{ item }}"
    dest: results/hosts/{{ inventory_hostname }}/
    flat: true
  loop: "{{ collected.files }}"

- name: Snapshot them as one tar file, then fetch that
  fleetperf_collect:
    run_dir: /var/lib/fleetperf/runs/distilbert-20250101-120000-ab12
    files: [events.jsonl, stdout.log, stderr.log, exit_code, config.json]
    archive: files.tar
    limits:
      events.jsonl: {bytes: 268435456, keep: head}
      stdout.log: {bytes: 67108864, keep: tail}
  register: collected
"""

RETURN = r"""
dir:
  description: The new private directory beside O(run_dir) that holds the copies.
  returned: when O(run_dir) exists
  type: path
  sample: /var/lib/fleetperf/runs/.collect-distilbert-20250101-120000-ab12-k3j9x2
archive:
  description: The tar file in RV(dir) that holds the copies (O(archive)).
  returned: when O(run_dir) exists (null without O(archive))
  type: str
  sample: files.tar
files:
  description: The names of O(files) copied into RV(dir) (or RV(archive)), in the order given.
  returned: success
  type: list
  elements: str
  sample: [events.jsonl, stdout.log, exit_code]
skipped:
  description: The names of O(files) left out (missing, or not a regular file).
  returned: success
  type: list
  elements: str
  sample: [stderr.log]
cut:
  description: The names of O(files) copied cut to their O(limits), each with its whole size.
  returned: when O(run_dir) exists
  type: dict
  sample: {stdout.log: 1073741824}
"""

import contextlib
import os
import tarfile
import tempfile
from typing import BinaryIO

from ansible.module_utils import fleetperf_host as files
from ansible.module_utils.basic import AnsibleModule


def collect(
    run_dir: str,
    names: list[str],
    archive: str | None = None,
    limits: dict[str, tuple[int, str]] | None = None,
) -> tuple[str, list[str], list[str], dict[str, int]]:
    """The snapshot directory, the names copied, the names left out, the names cut."""
    run_dir = os.path.normpath(run_dir)
    root, run_id = os.path.split(run_dir)
    dest = tempfile.mkdtemp(prefix=f".collect-{run_id}-", dir=root)  # 0700, a new name
    copied, skipped, cut = [], [], {}
    with contextlib.ExitStack() as stack:
        tar = None
        if archive:
            path = os.path.join(dest, archive)
            tar = stack.enter_context(tarfile.open(path, "x", format=tarfile.PAX_FORMAT))
        for name in names:
            fd = files.open_regular(os.path.join(run_dir, name))
            if fd is None:
                skipped.append(name)
                continue
            limit = (limits or {}).get(name)
            with os.fdopen(fd, "rb") as src:
                if tar is not None:
                    size = files.add_to_tar(tar, src, name, limit)
                else:
                    size = copy(src, os.path.join(dest, name), limit)
            copied.append(name)
            if size is not None:
                cut[name] = size
    return dest, copied, skipped, cut


def copy(src: BinaryIO, path: str, limit: tuple[int, str] | None) -> int | None:
    """``src`` into a new file at path, the part ``limit`` keeps; its whole size if cut."""
    size = os.fstat(src.fileno()).st_size
    start, kept = files.window(size, limit)
    src.seek(start)
    left = kept
    with open(path, "xb") as out:
        while left and (chunk := src.read(min(left, 1 << 20))):
            out.write(chunk)
            left -= len(chunk)
    return size if kept < size else None


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "run_dir": {"type": "path", "required": True},
            "files": {"type": "list", "elements": "str", "required": True},
            "archive": {"type": "str"},
            "limits": {"type": "dict", "default": {}},
        },
        supports_check_mode=False,
    )
    names, archive = module.params["files"], module.params["archive"]
    bad = [("files", n) for n in names if not files.plain(n)]
    bad += [("archive", archive)] if archive is not None and not files.plain(archive) else []
    if bad:
        field, name = bad[0]
        module.fail_json(msg=f"fleetperf_collect: {field}: {name!r} is not a plain file name")
    try:
        limits = files.limits(module.params["limits"])
    except ValueError as exc:
        module.fail_json(msg=f"fleetperf_collect: {exc}")
    if not os.path.isdir(module.params["run_dir"]):  # never created (a preflight failed first)
        module.exit_json(changed=False, files=[], skipped=names)
    dest, copied, skipped, cut = collect(module.params["run_dir"], names, archive, limits)
    module.exit_json(
        changed=True, dir=dest, files=copied, skipped=skipped, archive=archive, cut=cut
    )


if __name__ == "__main__":
    main()
