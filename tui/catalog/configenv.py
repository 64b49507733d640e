"""A vendor config's ``env`` (docs/new-case.md): the environment variables it may pass to
the workload, on an allow-list (issue 26), and the values they may take."""

from __future__ import annotations

import re
from typing import Any

from tui.core.errors import CatalogError

# A config's env (docs/new-case.md): names as POSIX shells take them, upper case.
ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")  # fullmatch
# An allow-list (issue 26): the settings vendor stacks document for their libraries. A name
# outside it may steer a shell or a launcher instead: SHELLOPTS=xtrace with PS4="$(cmd)" ran
# a command in the Slurm job script's bash; HOME, BASH_ENV, ENV, IFS, SBATCH_* and SLURM_*
# steer bash, Python's site directory, sbatch and srun; PYTHON*, LD_* and PATH load code.
ENV_PREFIXES = (
    "NCCL_",  # NVIDIA's collectives (Iluvatar CoreX reads the same names)
    "CUDA_",  # the CUDA runtime (CUDA_DEVICE_MAX_CONNECTIONS, CUDA_LAUNCH_BLOCKING)
    "CUBLAS_",  # CUBLAS_WORKSPACE_CONFIG
    "CUDNN_",
    "TORCH_NCCL_",  # torch's NCCL process group; other TORCH_ names load code, below
    "BKCL_",  # Kunlunxin's collectives, as FlagPerf's kunlunxin configs set them
    "XPU_",
    "XDNN_",
    "XCCL_",
    "XBLAS_",
    "XMLIR_",
    "OMP_",  # OpenMP, Intel's MKL and its OpenMP runtime
    "MKL_",
    "KMP_",
)
ENV_NAMES = frozenset(
    {
        "TORCH_DISTRIBUTED_DEBUG",  # not TORCH_*: TORCH_HUB and TORCH_EXTENSIONS_DIR load
        "TORCH_SHOW_CPP_STACKTRACES",  # code, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD unpickles it
        "TORCH_CPP_LOG_LEVEL",
        "TORCH_LOGS",
        "PYTORCH_CUDA_ALLOC_CONF",
        "PYTORCH_NO_CUDA_MEMORY_CACHING",
        # Iluvatar CoreX's own, as FlagPerf's iluvatar configs set them (aquila2_*/config.py)
        "UMD_CCLINLASTCE",
        "ENABLE_FLASH_ATTENTION_WITH_IXDNN",
        # Hugging Face's offline switches: no download at run time
        "HF_HUB_OFFLINE",
        "HF_DATASETS_OFFLINE",
        "TRANSFORMERS_OFFLINE",
    }
)
ALLOWED_ENV = ", ".join([f"{p}*" for p in ENV_PREFIXES] + sorted(ENV_NAMES))
# Within the allow-list, still a host's, not a config's: which devices and interfaces it
# lends, and names that tell a library where to load code or more settings from.
_PER_HOST = "fleetperf sets it per host (set it in the inventory's fleetperf_workload_env)"
_LOADS_CODE = (
    "it names a place code or settings are loaded from: the host's setup"
    " (the inventory's fleetperf_workload_env), not a config's"
)
HOST_ENV: dict[str, str] = {
    "NCCL_SOCKET_IFNAME": _PER_HOST,
    "NCCL_CONF_FILE": _LOADS_CODE,  # more NCCL_* settings, plugins among them
}
HOST_ENV_SUFFIXES: dict[str, str] = {
    "_VISIBLE_DEVICES": "the devices a host lends are the host's (the inventory's"
    " fleetperf_workload_env); nproc_per_node says how many a run uses",
    **dict.fromkeys(("_PATH", "_HOME", "_DIR", "_PLUGIN", "_LIBRARY", "_LIBRARIES"), _LOADS_CODE),
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
        if not (name.startswith(ENV_PREFIXES) or name in ENV_NAMES):
            raise CatalogError(
                f"{where}: env.{name}: not a vendor setting a config may pass"
                f" (allowed: {ALLOWED_ENV}; docs/new-case.md)"
            )
        reason = HOST_ENV.get(name) or next(
            (why for suffix, why in HOST_ENV_SUFFIXES.items() if name.endswith(suffix)), None
        )
        if reason:
            raise CatalogError(f"{where}: env.{name}: a config may not set it: {reason}")
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
    return env
