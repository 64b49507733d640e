"""A vendor config's ``env`` (docs/new-case.md): the environment variables it may pass to
the workload, on an allow-list (issue 26), and the values they may take."""

from __future__ import annotations

import re
from typing import Any

from harness.yamlfile import did_you_mean

from tui.core.errors import CatalogError

# A config's env (docs/new-case.md): names as POSIX shells take them, upper case.
ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")  # fullmatch
# An allow-list (issue 26): the settings vendor stacks document for their libraries. A name
# outside it may steer a shell or a launcher instead: SHELLOPTS=xtrace with PS4="$(cmd)" ran
# a command in the Slurm job script's bash; HOME, BASH_ENV, ENV, IFS, SBATCH_* and SLURM_*
# steer bash, Python's site directory, sbatch and srun; PYTHON*, LD_* and PATH load code.
ENV_PREFIXES = (
    "CUDA_",  # the CUDA runtime (CUDA_DEVICE_MAX_CONNECTIONS, CUDA_LAUNCH_BLOCKING)
    "CUBLAS_",  # CUBLAS_WORKSPACE_CONFIG
    "CUDNN_",
    "TORCH_NCCL_",  # torch's NCCL process group; other TORCH_ names load code, below
    "XDNN_",  # Kunlunxin's libraries, as FlagPerf's kunlunxin configs set them
    "XCCL_",
    "XBLAS_",
    "XMLIR_",
    "OMP_",  # OpenMP, Intel's MKL and its OpenMP runtime
    "MKL_",
    "KMP_",
)
# The collectives' and Kunlunxin's runtime settings, name by name (issue 39 point 7): their
# prefixes also hold names that make the workload write or read a file anywhere its user
# can (NCCL_DEBUG_FILE, NCCL_TOPO_DUMP_FILE, XPU_MONITOR_PID_FILEPATH). NCCL's: its user
# guide's "Environment Variables" (2.15 to 2.25) less the paths, plugins and the host's
# interfaces; NCCL_MIN_P2P_NCHANNELS and NCCL_NCHANNELS_PER_PEER as FlagPerf's base
# interconnect toolkits set them, NCCL_USE_DIRECT and NCCL_FORCESYNC_DISABLE as its iluvatar
# aquila2 configs do (CoreX's collectives read NCCL names). BKCL's and XPU's: the names
# FlagPerf's kunlunxin configs set (training/kunlunxin/*, 1b5a030), less the host's
# interfaces and NICs.
NCCL_NAMES = (
    "NCCL_ALGO",
    "NCCL_ALLOC_P2P_NET_LL_BUFFERS",
    "NCCL_ASYNC_ERROR_HANDLING",
    "NCCL_BUFFSIZE",
    "NCCL_CHECKS_DISABLE",
    "NCCL_CHECK_POINTERS",
    "NCCL_COLLNET_ENABLE",
    "NCCL_COLLNET_NODE_THRESHOLD",
    "NCCL_COMM_BLOCKING",
    "NCCL_CROSS_NIC",
    "NCCL_CUMEM_ENABLE",
    "NCCL_DEBUG",
    "NCCL_DEBUG_SUBSYS",
    "NCCL_DMABUF_ENABLE",
    "NCCL_FORCESYNC_DISABLE",
    "NCCL_GRAPH_MIXING_SUPPORT",
    "NCCL_GRAPH_REGISTER",
    "NCCL_IB_ADAPTIVE_ROUTING",
    "NCCL_IB_AR_THRESHOLD",
    "NCCL_IB_CUDA_SUPPORT",
    "NCCL_IB_DISABLE",
    "NCCL_IB_GID_INDEX",
    "NCCL_IB_PCI_RELAXED_ORDERING",
    "NCCL_IB_QPS_PER_CONNECTION",
    "NCCL_IB_RETRY_CNT",
    "NCCL_IB_SL",
    "NCCL_IB_TC",
    "NCCL_IB_TIMEOUT",
    "NCCL_IGNORE_CPU_AFFINITY",
    "NCCL_LAUNCH_MODE",
    "NCCL_LL_THRESHOLD",
    "NCCL_MAX_NCHANNELS",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MIN_P2P_NCHANNELS",
    "NCCL_NCHANNELS_PER_PEER",
    "NCCL_NET",
    "NCCL_NET_GDR_LEVEL",
    "NCCL_NET_GDR_READ",
    "NCCL_NET_SHARED_BUFFERS",
    "NCCL_NET_SHARED_COMMS",
    "NCCL_NSOCKS_PERTHREAD",
    "NCCL_NTHREADS",
    "NCCL_NVB_DISABLE",
    "NCCL_NVLS_ENABLE",
    "NCCL_P2P_DIRECT_DISABLE",
    "NCCL_P2P_DISABLE",
    "NCCL_P2P_LEVEL",
    "NCCL_P2P_LL_THRESHOLD",
    "NCCL_P2P_NET_CHUNKSIZE",
    "NCCL_P2P_NVL_CHUNKSIZE",
    "NCCL_P2P_PCI_CHUNKSIZE",
    "NCCL_P2P_PXN_LEVEL",
    "NCCL_PROTO",
    "NCCL_PXN_DISABLE",
    "NCCL_SET_STACK_SIZE",
    "NCCL_SET_THREAD_NAME",
    "NCCL_SHM_DISABLE",
    "NCCL_SINGLE_RING_THRESHOLD",
    "NCCL_SOCKET_NTHREADS",
    "NCCL_TREE_THRESHOLD",
    "NCCL_USE_DIRECT",
)
BKCL_NAMES = (
    "BKCL_CCIX_BUFFER_GM",
    "BKCL_CCIX_RING",
    "BKCL_ENABLE_XDR",
    "BKCL_FLAT_RING",
    "BKCL_FORCE_ALLREDUCE_IN_MULTINODE",
    "BKCL_FORCE_L3_RDMA",
    "BKCL_FORCE_SYNC",
    "BKCL_KL3_SYSCON_FLAG",
    "BKCL_KL3_TURBO_MODE",
    "BKCL_PCIE_RING",
    "BKCL_RDMA_FORCE_TREE",
    "BKCL_RDMA_PROXY_DISABLE",
    "BKCL_RING_BUFFER_GM",
    "BKCL_RING_BUFFER_SIZE",
    "BKCL_SOCKET_FORCE_TREE",
    "BKCL_TIMEOUT",
    "BKCL_TRANS_UNSUPPORTED_DATATYPE",
    "BKCL_TREE_THRESHOLD",
    "BKCL_USE_RDMA",
    "BKCL_XLINK_C2C",
    "BKCL_XLINK_D2D",
    "BKCL_XLINK_ETH",
)
XPU_NAMES = (
    "XPU_DUMMY_EVENT",
    "XPU_FC_AUTOTUNE_FILE",  # a file it reads: only under {data_dir}, PATH_VALUES below
    "XPU_FORCE_CODE_PARAM_LOCATE_IN_L3",
    "XPU_FORCE_USERMODE_LAUNCH",
    "XPU_PADDLE_FC_TRANS_A",
    "XPU_PADDLE_L3_SIZE",
)
# Iluvatar CoreX's own, as FlagPerf's iluvatar configs set them (aquila2_*/config.py)
IX_NAMES = ("UMD_CCLINLASTCE", "ENABLE_FLASH_ATTENTION_WITH_IXDNN")
ENV_NAMES = frozenset(
    {
        *NCCL_NAMES,
        *BKCL_NAMES,
        *XPU_NAMES,
        *IX_NAMES,
        "TORCH_DISTRIBUTED_DEBUG",  # not TORCH_*: TORCH_HUB and TORCH_EXTENSIONS_DIR load
        "TORCH_SHOW_CPP_STACKTRACES",  # code, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD unpickles it
        "TORCH_CPP_LOG_LEVEL",
        "TORCH_LOGS",
        "PYTORCH_CUDA_ALLOC_CONF",
        "PYTORCH_NO_CUDA_MEMORY_CACHING",
        # Hugging Face's offline switches: no download at run time
        "HF_HUB_OFFLINE",
        "HF_DATASETS_OFFLINE",
        "TRANSFORMERS_OFFLINE",
    }
)
LISTED = ("NCCL_", "BKCL_", "XPU_")  # prefixes whose allowed names are listed one by one
ALLOWED_ENV = ", ".join(
    [f"{p}*" for p in ENV_PREFIXES]
    + ["the NCCL_, BKCL_ and XPU_ names of docs/new-case.md"]
    + sorted(n for n in ENV_NAMES if not n.startswith(LISTED))
)
# Within the allow-list, still a host's, not a config's: which devices and interfaces it
# lends, and names that carry a path: a place code or settings are loaded from, or a file
# the workload would write (or read) wherever its user may.
_PER_HOST = "fleetperf sets it per host (set it in the inventory's fleetperf_workload_env)"
_HOST_HARDWARE = "the host's own network hardware (the inventory's fleetperf_workload_env)"
_PATH = (
    "it names a path: code or settings loaded from it, or a file the workload writes"
    " wherever its user may: the host's setup (the inventory's fleetperf_workload_env),"
    " not a config's"
)
HOST_ENV: dict[str, str] = {
    "NCCL_SOCKET_IFNAME": _PER_HOST,
    "NCCL_IB_HCA": _HOST_HARDWARE,
    "BKCL_SOCKET_IFNAME": _HOST_HARDWARE,
    "BKCL_RDMA_NICS": _HOST_HARDWARE,
}
HOST_ENV_SUFFIXES: dict[str, str] = {
    "_VISIBLE_DEVICES": "the devices a host lends are the host's (the inventory's"
    " fleetperf_workload_env); nproc_per_node says how many a run uses",
}
# The words of a name that carry a path (NCCL_DEBUG_FILE, CUDA_INJECTION64_PATH,
# OMP_TOOL_LIBRARIES), and DUMP anywhere (NCCL_TOPO_DUMP_FILE, TORCH_NCCL_DUMP_ON_TIMEOUT,
# CUDA_ENABLE_COREDUMP_ON_EXCEPTION write files of their own).
PATH_WORDS = frozenset(
    {"FILE", "FILES", "FILEPATH", "FILENAME", "PATH", "PATHS", "DIR", "DIRS", "DIRECTORY"}
    | {"HOME", "PIPE", "PLUGIN", "PLUGINS", "LIBRARY", "LIBRARIES"}
)
# Names a vendor document sets to a path: allowed, the value a file under the case's data
# directory ({data_dir}/NAME, no ".."), where prepare --from stages it.
PATH_VALUES: dict[str, str] = {
    # FlagPerf's kunlunxin llama2_7b-deepspeed environment_variables.sh at 43625f6 (seed
    # 004): the FC tiling table Kunlunxin's XPU runtime reads (docs/cases/llama2.md)
    "XPU_FC_AUTOTUNE_FILE": "{data_dir}/",
}
MAX_ENV_VALUE = 4096  # far above any vendor setting; exec fails past 128 KiB (E2BIG)


def check_env(where: str, env: Any) -> dict[str, str]:
    """A config's ``env``: NAME -> string, each name on the allow-list and not a host's.
    Values are strings only: YAML would turn 1, yes or 1e3 into something else, so a number
    must be quoted and reaches the workload as written. Values are never evaluated (no
    shell reads them as code: the names that would make one do are refused)."""
    if env is None:
        return {}
    if not isinstance(env, dict):
        raise CatalogError(f"{where}: env: expected a mapping of NAME: value")
    for name, value in env.items():
        if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
            raise CatalogError(f"{where}: env.{name}: not a variable name ([A-Z_][A-Z0-9_]*)")
        reason = _host_reason(name)
        if reason:
            raise CatalogError(f"{where}: env.{name}: a config may not set it: {reason}")
        if not (name.startswith(ENV_PREFIXES) or name in ENV_NAMES):
            near = did_you_mean(name, ENV_NAMES)
            raise CatalogError(
                f"{where}: env.{name}: not a vendor setting a config may pass{near}"
                f" (allowed: {ALLOWED_ENV}; docs/new-case.md)"
            )
        if not isinstance(value, str):
            raise CatalogError(
                f'{where}: env.{name}: expected a string; quote it ("{value}")'
                if isinstance(value, int | float) and not isinstance(value, bool)
                else f"{where}: env.{name}: expected a string (got {value!r})"
            )
        if "\0" in value:
            raise CatalogError(f"{where}: env.{name}: a NUL character cannot be in the environment")
        if len(value) > MAX_ENV_VALUE:
            raise CatalogError(f"{where}: env.{name}: longer than {MAX_ENV_VALUE} characters")
        under = PATH_VALUES.get(name)
        if under and not (value.startswith(under) and ".." not in value.split("/")):
            raise CatalogError(
                f"{where}: env.{name}: expected a file under the case's data directory,"
                f" {under}NAME without '..' (got {value!r})"
            )
    return env


def _host_reason(name: str) -> str | None:
    """Why ``name``, of a vendor's family, is the host's to set, not a config's; None where
    it is not (a name of no vendor's family is simply not on the list)."""
    if name in HOST_ENV:
        return HOST_ENV[name]
    if not name.startswith((*ENV_PREFIXES, *LISTED)):
        return None
    suffix = next((s for s in HOST_ENV_SUFFIXES if name.endswith(s)), None)
    if suffix:
        return HOST_ENV_SUFFIXES[suffix]
    words = name.split("_")
    if name not in PATH_VALUES and ("DUMP" in name or PATH_WORDS.intersection(words)):
        return _PATH
    return None
