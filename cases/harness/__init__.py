"""fleetperf's in-workload library: what every case uses to time, measure and report.

Importing it imports no torch (the controller imports ``harness.metrics``,
``harness.vendors`` and ``harness.peak_cache``); the parts that need torch import it when
called. psutil and nvidia-ml-py are used where present. docs/harness.md is the guide.

A case's ``run.py`` uses ``run_case`` and ``Run`` (the SDK); its ``prepare.py``
``prepare_main``. The modules below them:

- ``runner``      Run (config, hp, device, process group, seeds, instruments, step logging,
                  eval cadence, convergence, accounting, result), run_case()
- ``case``        case.yaml as the workload reads it: hp checked once, requires, target
- ``layout``      Layout: data x tensor x pipeline parallel ranks, which rank counts a batch
- ``staging``     prepare_main(), link_or_copy, the data manifest
- ``tiny``        synthetic-data builders: WordPiece vocabulary, tiny Llama, Llama config check

- ``device``      open_device(): per vendor and precision, device, autocast, scaler, sync,
                  backend, name; Device
- ``vendors``     PRECISIONS_BY_VENDOR, precision_problem() (standard library only)
- ``perf``        PerfTracker (nested p_whole / p_train / p_core windows), PerfTotals,
                  merge_totals, throughput_metrics, token_rates
- ``result``      build_result(), ModelFlops: the ``result`` event payload
- ``flops``       PaLM FLOPs-per-token formulas, non_embedding_params, params_of
- ``peak``        datasheet PEAK_FLOPS per chip and math mode, chip_from_device_name
- ``peakmeter``   measured matmul rate and memory bandwidth, cached (``peak_cache``)
- ``metrics``     the metric registry (standard library only)
- ``memory``      MemoryMonitor: peak device memory (on CPU: RSS + workers' USS)
- ``sysmon``      SysSampler: cpu %, host memory, device utilisation and power
- ``dist``        DistEnv, process group, barrier, all_reduce, reduce_totals, reduce_memory
- ``environment`` the result's environment object
- ``events``      EventWriter (events.jsonl, the contract's rank rules)
- ``workload``    InputError, load_config, guarded(): error events and exit codes
"""

# Old per-case entry points (run_workload, PerfTracker, build_result, ...) stay exported
# until every case runs on ``Run``.

from harness.device import Device, open_device
from harness.dist import (
    DistEnv,
    all_reduce,
    barrier,
    init_distributed,
    reduce_memory,
    reduce_totals,
    shutdown_distributed,
    sum_counted,
)
from harness.events import EventWriter
from harness.flops import (
    inference_flops_per_token,
    lora_training_flops_per_token,
    non_embedding_params,
    params_of,
    training_flops_per_token,
)
from harness.layout import Layout
from harness.memory import MemoryMonitor, host_total_gib
from harness.metrics import METRICS, Metric, registry
from harness.peak import PEAK_FLOPS, chip_from_device_name, datasheet_peak, peak_flops
from harness.peak_cache import cache_path as peak_cache_path
from harness.perf import (
    PerfTotals,
    PerfTracker,
    merge_totals,
    process_age_s,
    throughput_metrics,
    token_rates,
)
from harness.result import ModelFlops, build_result
from harness.runner import Run, Step, run_case
from harness.staging import link_or_copy, prepare_main
from harness.sysmon import SysSampler
from harness.vendors import PRECISIONS_BY_VENDOR, precision_problem
from harness.workload import InputError, guarded, load_config, require_paths, run_workload

__all__ = [
    "METRICS",
    "PEAK_FLOPS",
    "PRECISIONS_BY_VENDOR",
    "Device",
    "DistEnv",
    "EventWriter",
    "InputError",
    "Layout",
    "MemoryMonitor",
    "Metric",
    "ModelFlops",
    "PerfTotals",
    "PerfTracker",
    "Run",
    "Step",
    "SysSampler",
    "all_reduce",
    "barrier",
    "build_result",
    "chip_from_device_name",
    "datasheet_peak",
    "guarded",
    "run_workload",
    "host_total_gib",
    "inference_flops_per_token",
    "init_distributed",
    "load_config",
    "link_or_copy",
    "lora_training_flops_per_token",
    "merge_totals",
    "non_embedding_params",
    "open_device",
    "params_of",
    "peak_cache_path",
    "peak_flops",
    "precision_problem",
    "prepare_main",
    "process_age_s",
    "reduce_memory",
    "reduce_totals",
    "registry",
    "require_paths",
    "run_case",
    "shutdown_distributed",
    "sum_counted",
    "throughput_metrics",
    "token_rates",
    "training_flops_per_token",
]
