"""A vendor config's ``env:`` reaches the workload (issue 19 point 7): a real run of the
torch-free emitter through ansible-runner and run.yml, on a host that is this machine."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import REPO, Fleetperf, local_host, write_inventory

from tui.catalog import catalog
from tui.catalog.catalog import CatalogError
from tui.core import paths

JOB_SCRIPT = REPO / "playbooks" / "module_utils" / "fleetperf_slurm.py"


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


@pytest.mark.slow  # a real run through the engine
def test_a_config_env_reaches_the_workload_and_the_record(
    emitter: Fleetperf, tmp_path: Path
) -> None:
    planted = tmp_path / "pwned.txt"
    template = '{{ lookup("pipe", "touch ' + str(planted) + '") }}'
    config_env = {
        "XDNN_FC_GEMM_DTYPE": "float32",
        "XPU_FC_AUTOTUNE_FILE": "{data_dir}/fc_autotune_fp16.log",  # the host's data directory
        "NCCL_DEBUG": "from the config",  # the inventory's fleetperf_workload_env wins
        "NCCL_ALGO": template,  # data, never rendered by Ansible
    }
    config = emitter.cases_dir / "emitter" / "configs" / "cpu" / "CPUx1x1.yaml"
    config.write_text("overrides: {}\nenv: " + json.dumps(config_env) + "\n")
    host = {
        **local_host(emitter, "box"),
        "fleetperf_workload_env": {"NCCL_DEBUG": "from the inventory", "FP_HOST": "h"},
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
        "XDNN_FC_GEMM_DTYPE": "float32",
        "XPU_FC_AUTOTUNE_FILE": f"{emitter.data_root}/emitter/fc_autotune_fp16.log",
        "NCCL_DEBUG": "from the inventory",
        "NCCL_ALGO": template,
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
    assert "  XPU_FC_AUTOTUNE_FILE={data_dir}/fc_autotune_fp16.log\n" in block
    assert "FP_HOST" not in block and "NCCL_DEBUG=from the config\n" in block


def _load(tmp_path: Path, env: dict[str, str]) -> catalog.VendorConfig:
    """A copy of distilbert-pytorch (case.yaml and configs only) with a config of this env."""
    shutil.copytree(
        paths.HARNESS_DIR / "distilbert-pytorch",
        tmp_path / "distilbert-pytorch",
        ignore=shutil.ignore_patterns("*.py", "__pycache__"),
    )
    path = tmp_path / "distilbert-pytorch" / "configs" / "cpu" / "CPUx1x3.yaml"
    path.write_text(yaml.safe_dump({"overrides": {}, "env": env}, sort_keys=False))
    case = catalog.load_case("distilbert-pytorch", tmp_path)
    return catalog.load_config(case, "cpu/CPUx1x3")


@pytest.mark.parametrize(
    "env",
    [
        {"SHELLOPTS": "xtrace", "PS4": "$(touch /tmp/pwned)"},  # ran in the job script's bash
        {"PS4": "$(id)"},
        {"HOME": "/tmp/evil"},  # a .pth under ~/.local runs in a Python without a venv
        {"SBATCH_EXPORT": "NONE"},  # sbatch's options
        {"SBATCH_PARTITION": "other"},
        {"BASH_ENV": "/tmp/evil.sh"},  # sourced by a non-interactive bash
        {"ENV": "/tmp/evil.sh"},
        {"IFS": "/"},
        {"PROMPT_COMMAND": "id"},
        {"SRUN_EXPORT_ENV": "ALL"},
    ],
)
def test_a_name_off_the_allow_list_is_refused_naming_file_and_field(
    tmp_path: Path, env: dict[str, str]
) -> None:
    with pytest.raises(CatalogError) as err:
        _load(tmp_path, env)
    message = str(err.value)
    first = next(iter(env))
    config = tmp_path / "distilbert-pytorch" / "configs" / "cpu" / "CPUx1x3.yaml"
    assert message.startswith(f"{config}: env.{first}: ")
    assert "not a vendor setting a config may pass (allowed: CUDA_*, CUBLAS_*" in message
    assert "\n" not in message


def test_vendor_settings_are_accepted(tmp_path: Path) -> None:
    env = {
        "NCCL_DEBUG": "INFO",
        "NCCL_IB_DISABLE": "1",
        "BKCL_FORCE_SYNC": "1",
        "XPU_FC_AUTOTUNE_FILE": "{data_dir}/fc_autotune_fp16.log",
        "XDNN_FC_GEMM_DTYPE": "float32",
        "XCCL_ENABLE": "1",
        "XMLIR_D_XPU_L3_SIZE": "0",
        "CUDA_DEVICE_MAX_CONNECTIONS": "1",
        "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
        "CUDNN_LOGINFO_DBG": "0",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "OMP_NUM_THREADS": "4",
        "MKL_NUM_THREADS": "4",
        "KMP_AFFINITY": "granularity=fine",
        "UMD_CCLINLASTCE": "1",
        "ENABLE_FLASH_ATTENTION_WITH_IXDNN": "1",
        "HF_HUB_OFFLINE": "1",
        "NCCL_PROTO": "$(touch x) `id` ${HOME}",  # a value is data: nothing evaluates it
    }
    assert _load(tmp_path, env).env == env
    kunlunxin = catalog.load_config(catalog.load_case("llama2_7b-deepspeed"), "kunlunxin/R300x1x8")
    assert set(kunlunxin.env) == {"XDNN_FC_GEMM_DTYPE", "BKCL_FORCE_SYNC", "XPU_FC_AUTOTUNE_FILE"}


def test_the_slurm_job_script_never_evaluates_a_value(tmp_path: Path) -> None:
    """The job script is bash and gets the env through sbatch's --export=ALL: a value with
    $(...) and backticks reaches srun as written (scontrol and srun here are stand-ins)."""
    source = JOB_SCRIPT.read_text()
    script = source.split('JOB_SCRIPT = r"""', 1)[1].split('"""', 1)[0]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stubs = {
        "scontrol": "#!/bin/sh\necho node1\n",
        "srun": '#!/bin/sh\nprintf %s "$NCCL_ALGO" > "$OUT"\n',
    }
    for name, text in stubs.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(stat.S_IRWXU)
    planted = tmp_path / "planted"
    value = f"$(touch {planted}) `touch {planted}` ${{HOME}}"
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURM_JOB_NODELIST": "node1",
        "SLURM_JOB_ID": "7",
        "NCCL_ALGO": value,
        "OUT": str(tmp_path / "seen"),
    }
    done = subprocess.run(
        ["bash", "-c", script, "job", "true"], env=env, capture_output=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "seen").read_text() == value
    assert not planted.exists()
