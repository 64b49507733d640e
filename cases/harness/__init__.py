"""fleetperf's in-workload library: what every case uses to time, measure and report.

Depends on torch only; psutil and nvidia-ml-py are imported lazily where present.

- ``events``   EventWriter (events.jsonl, the contract's rank rules)
- ``perf``     PerfTracker (p_whole / p_train / p_core timers), PerfTotals, throughput_metrics,
               ordering_notes, device_synchronizer, process_age_s
- ``flops``    PaLM FLOPs-per-token formulas, non_embedding_params
- ``peak``     PEAK_FLOPS table per chip and precision, peak_flops(), mfu()
- ``memory``   MemoryMonitor: peak device memory (host RSS on CPU)
- ``sysmon``   SysSampler: cpu %, host memory, device utilisation and power
- ``dist``     DistEnv from torchrun's environment, process group, all_reduce, reduce_totals
- ``workload`` InputError, load_config, guarded(): error events and exit codes
"""

from harness.dist import (
    DistEnv,
    all_reduce,
    init_distributed,
    reduce_totals,
    shutdown_distributed,
)
from harness.events import EventWriter
from harness.flops import (
    inference_flops_per_token,
    lora_training_flops_per_token,
    non_embedding_params,
    training_flops_per_token,
)
from harness.memory import MemoryMonitor, host_total_gib
from harness.peak import PEAK_FLOPS, mfu, peak_flops
from harness.perf import (
    PerfTotals,
    PerfTracker,
    device_synchronizer,
    ordering_notes,
    process_age_s,
    throughput_metrics,
)
from harness.sysmon import SysSampler
from harness.workload import InputError, guarded, load_config, require_paths

__all__ = [
    "PEAK_FLOPS",
    "DistEnv",
    "EventWriter",
    "InputError",
    "MemoryMonitor",
    "PerfTotals",
    "PerfTracker",
    "SysSampler",
    "all_reduce",
    "device_synchronizer",
    "guarded",
    "host_total_gib",
    "inference_flops_per_token",
    "init_distributed",
    "load_config",
    "lora_training_flops_per_token",
    "mfu",
    "non_embedding_params",
    "ordering_notes",
    "peak_flops",
    "process_age_s",
    "reduce_totals",
    "require_paths",
    "shutdown_distributed",
    "throughput_metrics",
    "training_flops_per_token",
]
