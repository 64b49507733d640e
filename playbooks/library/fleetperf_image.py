#!/usr/bin/python
"""Check that a docker host has the benchmark image the controller expects."""

DOCUMENTATION = r"""
module: fleetperf_image
short_description: Refuse a host whose fleetperf image is missing, stale or another image
description:
  - Looks up O(image) (a tag made from a hash of the image's build context, see
    tui/catalog/images.py) on the host's docker engine, and checks that the image under it carries
    the whole hash, O(context), in its label org.fleetperf.context (set at build). Fails
    with one line naming O(host), the tag, what the engine has instead (an older build of
    the same repository is stale; a tag re-pointed at an image built from anything else is
    refused) and O(build_command). Returns the id of the image checked, which the launch
    then runs.
options:
  host:
    description: The inventory name, for messages.
    type: str
    required: true
  docker_host:
    description: Engine URL (V("") is C(DOCKER_HOST) or the local socket).
    type: str
    default: ""
  image:
    description: The expected tag.
    type: str
    required: true
  context:
    description: The expected build context hash (the image's org.fleetperf.context label).
    type: str
    required: true
  build_command:
    description: The command that builds the image, for the message.
    type: str
    required: true
extends_documentation_fragment: action_common_attributes
attributes:
  check_mode: {support: full}
  diff_mode: {support: none}
  platform: {platforms: posix}
requirements:
  - The Docker SDK for Python (C(docker)) on the host.
seealso:
  - module: fleetperf_launch
author:
  - The fleetperf project
"""

EXAMPLES = r"""
- name: Check the benchmark image
  fleetperf_image:
    host: "{{ inventory_hostname }}"
    image: fleetperf/nvidia:3f2a9c1b7d4e
    context: 3f2a9c1b7d4e5a6f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7
    build_command: fleetperf images build nvidia
  register: checked

- name: Run what was checked, by id
  ansible.builtin.debug:
    msg: "{{ checked.image_id }}"
"""

RETURN = r"""
image:
  description: The tag looked up, O(image).
  returned: success, and on failure once the engine answered
  type: str
  sample: fleetperf/nvidia:3f2a9c1b7d4e
image_id:
  description: The id of the image under the tag, the one the launch runs.
  returned: success, and on failure when the tag names another image
  type: str
  sample: sha256:9b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fleetperf_docker import client, require_sdk

LABEL = "org.fleetperf.context"  # tui/catalog/images.py


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "host": {"type": "str", "required": True},
            "docker_host": {"type": "str", "default": ""},
            "image": {"type": "str", "required": True},
            "context": {"type": "str", "required": True},
            "build_command": {"type": "str", "required": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    host, image = p["host"], p["image"]
    why = require_sdk()
    if why:
        module.fail_json(msg=f"host {host}: {why}")
    from docker.errors import ImageNotFound

    found = None
    try:
        with client(p["docker_host"]) as c:
            try:
                found = c.images.get(image)
            except ImageNotFound:
                repository = image.rsplit(":", 1)[0]
                others = sorted(t for i in c.images.list(repository) for t in i.tags)
    except Exception as exc:  # noqa: BLE001 - any engine error is this host's one-line failure
        module.fail_json(msg=f"host {host}: docker engine: {str(exc).splitlines()[0]}")
    build = f"build it with: {p['build_command']}"
    if found is None:
        state = f"stale (the engine has {', '.join(others)})" if others else "missing"
        module.fail_json(msg=f"host {host}: image {image} {state}; {build}", image=image)
    label = (found.labels or {}).get(LABEL)
    if label != p["context"]:
        built = f"built from context {label[:12]}" if label else f"without the {LABEL} label"
        module.fail_json(
            msg=f"host {host}: image {image} is {found.id}, {built}, not from"
            f" {p['context'][:12]}: the tag points at another image; {build}",
            image=image,
            image_id=found.id,
        )
    module.exit_json(changed=False, image=image, image_id=found.id)


if __name__ == "__main__":
    main()
