#!/usr/bin/python
"""Check that a docker host has the benchmark image the controller expects."""

DOCUMENTATION = r"""
module: fleetperf_image
short_description: Refuse a host whose fleetperf image is missing or stale
description:
  - Looks up O(image) (a tag made from a hash of the image's build context, see
    tui/images.py) on the host's docker engine. Fails with one line naming O(host), the
    tag, what the engine has instead (an older build of the same repository is stale) and
    O(build_command).
options:
  host: {description: The inventory name, for messages., type: str, required: true}
  docker_host:
    description: Engine URL ("" = DOCKER_HOST or the local socket).
    type: str
    default: ""
  image: {description: The expected tag., type: str, required: true}
  build_command:
    description: The command that builds the image, for the message.
    type: str
    required: true
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.fleetperf_docker import client, image_id, require_sdk


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "host": {"type": "str", "required": True},
            "docker_host": {"type": "str", "default": ""},
            "image": {"type": "str", "required": True},
            "build_command": {"type": "str", "required": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    host, image = p["host"], p["image"]
    why = require_sdk()
    if why:
        module.fail_json(msg=f"host {host}: {why}")
    try:
        found = image_id(p["docker_host"], image)
        if found:
            module.exit_json(changed=False, image=image, image_id=found)
        repository = image.rsplit(":", 1)[0]
        with client(p["docker_host"]) as c:
            others = sorted(t for i in c.images.list(repository) for t in i.tags)
    except Exception as exc:  # noqa: BLE001 - any engine error is this host's one-line failure
        module.fail_json(msg=f"host {host}: docker engine: {str(exc).splitlines()[0]}")
    state = f"stale (the engine has {', '.join(others)})" if others else "missing"
    module.fail_json(
        msg=f"host {host}: image {image} {state}; build it with: {p['build_command']}",
        image=image,
    )


if __name__ == "__main__":
    main()
