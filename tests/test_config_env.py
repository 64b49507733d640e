"""A vendor config's ``env:`` reaches the workload (issue 19 point 7): a real run of the
torch-free emitter through ansible-runner and run.yml, on a host that is this machine."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from conftest import Fleetperf, local_host, write_inventory


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def test_a_config_env_reaches_the_workload_and_the_record(
    emitter: Fleetperf, tmp_path: Path
) -> None:
    planted = tmp_path / "pwned.txt"
    template = '{{ lookup("pipe", "touch ' + str(planted) + '") }}'
    config_env = {
        "FP_SETTING": "float32",
        "FP_FILE": "{data_dir}/fc_autotune_fp16.log",  # the host's data directory
        "FP_CLASH": "from the config",  # the inventory's fleetperf_workload_env wins
        "FP_TEMPLATE": template,  # data, never rendered by Ansible
    }
    config = emitter.cases_dir / "emitter" / "configs" / "cpu" / "CPUx1x1.yaml"
    config.write_text("overrides: {}\nenv: " + json.dumps(config_env) + "\n")
    host = {
        **local_host(emitter, "box"),
        "fleetperf_workload_env": {"FP_CLASH": "from the inventory", "FP_HOST": "h"},
    }
    inventory = write_inventory(tmp_path / "inv.yml", {"box": host})
    names = ",".join([*config_env, "FP_HOST", "PYTHONUNBUFFERED"])
    out = emitter.batch(
        "emitter", "cpu/CPUx1x1", f"env_digest={names}", args=("-i", str(inventory))
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert not planted.exists(), "a config env value ran as a template"

    (record,) = emitter.records()
    seen = {
        "FP_SETTING": "float32",
        "FP_FILE": f"{emitter.data_root}/emitter/fc_autotune_fp16.log",
        "FP_CLASH": "from the inventory",
        "FP_TEMPLATE": template,
        "FP_HOST": "h",
        "PYTHONUNBUFFERED": "1",  # fleetperf's own, last
    }
    assert record["notes"] == [f"sha256 of {k}: {_digest(v)}" for k, v in seen.items()]
    # The record keeps what the config asked for, as written; not the inventory's env.
    assert record["config_env"] == config_env
    run_dir = emitter.results / "runs" / str(record["run_id"])
    assert json.loads((run_dir / "result.json").read_text())["config_env"] == config_env
    shown = emitter.run("results", str(record["run_id"]))
    block = shown.stdout.split("\nenv from the config ({data_dir}: the case's data directory):\n")[
        1
    ]
    assert "  FP_FILE={data_dir}/fc_autotune_fp16.log\n" in block
    assert "FP_HOST" not in block and "FP_CLASH=from the config\n" in block
