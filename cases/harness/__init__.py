"""fleetperf's in-workload library: what every case uses to time, measure and report.

Importing it imports no torch (the controller imports ``harness.metrics``,
``harness.vendors``, ``harness.staging``, ``harness.peak_cache``, ``harness.events``,
``harness.case``, ``harness.yamlfile`` and ``harness.fields``, which import nothing beyond
the standard library, PyYAML and each other);
the parts that need torch import it when called. psutil and nvidia-ml-py are used where
present. docs/harness.md is the guide.

A case's ``run.py`` uses ``run_case`` and ``Run`` (the SDK); its ``prepare.py``
``prepare_main``. The modules below them:

- ``runner``      Run (config, hp, device, process group, seeds, instruments, step logging,
                  eval cadence, convergence, accounting, energy, result), run_case()
- ``case``        case.yaml's one reader, the workload's and the catalog's: its fields, the
                  shared hyperparameters' bounds, ``bounds``, ``choices``, ``overridable``;
                  config.json's hp checked once
- ``yamlfile``    how every YAML file and typed value is read: ``1e-4`` a float, numbers
                  finite as written, libyaml for files; read_mapping, did_you_mean
- ``fields``      Fields: a mapping read field by field, each checked, errors naming the field
- ``layout``      Layout: data x tensor x pipeline parallel ranks, which rank counts a batch
- ``order``       epoch_sampler(): FlagPerf's training order over epochs, or a reshuffle
- ``staging``     prepare_main(), find_dir, link_or_copy, the data manifest (DATA_MANIFEST)
- ``tiny``        synthetic-data builders: WordPiece vocabulary, tiny Llama, a tiny Llama
                  folder with a word-level tokenizer, Llama config check
- ``generate``    FlagPerf's generate tasks, the workload of generate-ttft and
                  generate-throughput (``generate_vllm.py``: its vLLM side, a script)
- ``engine``      engine_python(): an inference engine's own interpreter (hp engine_python)
- ``jsonl``       json_lines(): a JSON-lines file's values, errors naming file and line
- ``errors``      InputError: bad input, one line naming the file, exit 2
- ``workload``    load_config, require_paths, guarded(): error events and exit codes

- ``device``      open_device(): per vendor and precision, device, autocast, scaler, sync,
                  backend, name, the math the matmuls ran at; Device
- ``vendors``     PRECISIONS (every precision a config may name), PRECISIONS_BY_VENDOR,
                  precision_problem() (standard library only)
- ``perf``        PerfTracker (nested p_whole / p_train / p_core windows), PerfTotals,
                  merge_totals, throughput_metrics, token_rates
- ``energy``      EnergyMeter over run.perf's counted window: NVML's energy counter or RAPL
                  package domains, summed over the ranks; null with a note where none
- ``result``      build_result(), ModelFlops: the ``result`` event payload
- ``flops``       PaLM FLOPs-per-token formulas, non_embedding_params, params_of
- ``peak``        datasheet PEAK_FLOPS per chip and math mode, chip_from_device_name
- ``peakmeter``   measured matmul rate and memory bandwidth, cached (``peak_cache``)
- ``metrics``     the metric registry (standard library only)
- ``memory``      MemoryMonitor: peak device memory (on CPU: RSS + workers' USS)
- ``sysmon``      SysSampler, SysMonitor: host CPU, memory, power; devices' power, heat, memory,
                  clocks, throttle reasons; the run's window of other processes' CPU
- ``procwindow``  ProcWindow, run_root: other processes' CPU over the run's window (/proc);
                  cpu_freq_mhz
- ``nvml``        nvidia-ml-py readings where the driver has them
- ``smi``         smi_readings: clocks, temperature, throttle reasons from ixsmi
- ``dist``        DistEnv, process group, barrier, all_reduce, reduce_totals, reduce_memory
- ``environment`` the result's environment object
- ``events``      EventWriter (events.jsonl, the contract's rank rules), the event KINDS
"""

import importlib
from typing import Any


# ruff: noqa: F401 (the SDK's names are imported in _sdk for __getattr__, which returns them)
def _sdk() -> dict[str, Any]:
    """What cases, prepare steps, tests and benchmarks reach as ``harness.NAME``; the rest is
    imported from its module. Imported on first use (``__getattr__``): the controller's
    ``import harness.case`` then loads that module and its few imports, not the SDK
    (issue 32). Import statements, not names: tui/catalog/caseimports.py follows them."""
    from harness.device import Device, open_device
    from harness.dist import (
        DistEnv,
        all_reduce,
        barrier,
        init_distributed,
        reduce_totals,
        shutdown_distributed,
        sum_counted,
    )
    from harness.errors import InputError
    from harness.events import EventWriter
    from harness.flops import (
        inference_flops_per_token,
        lora_training_flops_per_token,
        non_embedding_params,
        params_of,
        training_flops_per_token,
    )
    from harness.memory import MemoryMonitor, host_total_gib
    from harness.metrics import METRICS, Metric, registry
    from harness.peak import datasheet_peak, peak_flops
    from harness.perf import PerfTotals, PerfTracker, process_age_s, throughput_metrics, token_rates
    from harness.result import ModelFlops, build_result
    from harness.runner import Run, run_case
    from harness.staging import find_dir, link_or_copy, prepare_main
    from harness.sysmon import SysSampler
    from harness.vendors import PRECISIONS_BY_VENDOR, precision_problem
    from harness.workload import guarded, load_config, require_paths

    return locals()


__all__ = [
    "METRICS",
    "PRECISIONS_BY_VENDOR",
    "Device",
    "DistEnv",
    "EventWriter",
    "InputError",
    "MemoryMonitor",
    "Metric",
    "ModelFlops",
    "PerfTotals",
    "PerfTracker",
    "Run",
    "SysSampler",
    "all_reduce",
    "barrier",
    "build_result",
    "datasheet_peak",
    "find_dir",
    "guarded",
    "host_total_gib",
    "inference_flops_per_token",
    "init_distributed",
    "link_or_copy",
    "load_config",
    "lora_training_flops_per_token",
    "non_embedding_params",
    "open_device",
    "params_of",
    "peak_flops",
    "precision_problem",
    "prepare_main",
    "process_age_s",
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


def __getattr__(name: str) -> Any:
    """``harness.NAME`` of ``__all__``: the SDK, imported once; ``harness.MODULE``: that
    module, as a package whose ``__init__`` imported it would have it."""
    if name in __all__:
        globals().update(_sdk())
        return globals()[name]
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
