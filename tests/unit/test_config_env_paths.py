"""A config's ``env:`` carries no path (issue 39 point 7): names that make the workload
write (or read) a file wherever its user can are refused; the collectives' and Kunlunxin's
runtime names are allowed one by one, and docs/new-case.md lists the same ones."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tui.catalog import configenv
from tui.core.errors import CatalogError

DOC = Path(__file__).resolve().parents[2] / "docs" / "new-case.md"
WHERE = "cases/c/configs/nvidia/A100x1x8.yaml"


def _refusal(name: str, value: str = "/tmp/x") -> str:
    with pytest.raises(CatalogError) as err:
        configenv.check_env(WHERE, {name: value})
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{WHERE}: env.{name}: "), message
    return message


@pytest.mark.parametrize(
    "name",
    [
        # the six: each writes (or reads) a file the value names
        "NCCL_DEBUG_FILE",
        "NCCL_TOPO_DUMP_FILE",
        "NCCL_GRAPH_DUMP_FILE",
        "NCCL_TOPO_FILE",
        "CUDA_COREDUMP_FILE",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
        # and their kin: *_FILE, *_DUMP*, *_PATH, *_DIR and the like
        "NCCL_GRAPH_FILE",
        "XPU_MONITOR_PID_FILEPATH",
        "TORCH_NCCL_DUMP_ON_TIMEOUT",
        "CUDA_ENABLE_COREDUMP_ON_EXCEPTION",
        "CUDA_COREDUMP_PIPE",
        "CUDA_CACHE_PATH",
        "XDNN_PATH",
        "XBLAS_PATH",
        "KMP_SOME_DIR",
        "OMP_TOOL_LIBRARIES",
    ],
)
def test_a_name_that_carries_a_path_is_refused(name: str) -> None:
    message = _refusal(name)
    assert f"env.{name}: a config may not set it: it names a path" in message


@pytest.mark.parametrize("name", ["NCCL_IB_HCA", "BKCL_SOCKET_IFNAME", "BKCL_RDMA_NICS"])
def test_a_hosts_network_hardware_is_the_hosts(name: str) -> None:
    assert "a config may not set it: the host's own network hardware" in _refusal(name, "x")


def test_an_unlisted_nccl_bkcl_or_xpu_name_is_refused_with_the_near_one() -> None:
    message = _refusal("NCCL_IB_TIMEOT", "22")
    assert "not a vendor setting a config may pass; did you mean 'NCCL_IB_TIMEOUT'?" in message
    assert "the NCCL_, BKCL_ and XPU_ names of docs/new-case.md" in message
    for name in ("BKCL_ANYTHING", "XPU_ANYTHING"):
        assert "not a vendor setting a config may pass" in _refusal(name, "1")


def test_every_listed_name_is_accepted_and_none_carries_a_path() -> None:
    env = {name: "1" for name in configenv.ENV_NAMES if name not in configenv.PATH_VALUES}
    assert configenv.check_env(WHERE, env) == env
    for name in env:
        words = set(name.split("_"))
        assert "DUMP" not in name and not words & configenv.PATH_WORDS, name


@pytest.mark.parametrize(
    "value",
    ["/etc/shadow", "/tmp/fc.log", "{data_dir}/../../etc/x", "{data_dir}/a/../../b", "fc.log"],
)
def test_the_autotune_file_stays_in_the_case_data_directory(value: str) -> None:
    """FlagPerf's kunlunxin llama2 row sets XPU_FC_AUTOTUNE_FILE, a file the runtime reads:
    allowed, under {data_dir} only."""
    message = _refusal("XPU_FC_AUTOTUNE_FILE", value)
    assert "expected a file under the case's data directory, {data_dir}/NAME" in message
    good = {"XPU_FC_AUTOTUNE_FILE": "{data_dir}/fc_autotune_fp16.log"}
    assert configenv.check_env(WHERE, good) == good


def test_the_docs_list_the_same_names() -> None:
    """docs/new-case.md's config env section names every listed NCCL, BKCL and XPU name,
    and no other."""
    text = DOC.read_text()
    section = text.split("- Names come from an **allow-list**", 1)[1].split("\n- ", 1)[0]
    listed = set(re.findall(r"`((?:NCCL|BKCL|XPU)_[A-Z0-9_]+)`", section))
    listed -= {"NCCL_NAMES", "BKCL_NAMES", "XPU_NAMES"}  # the code's lists, named
    code = {n for n in configenv.ENV_NAMES if n.startswith(configenv.LISTED)}
    assert listed == code
