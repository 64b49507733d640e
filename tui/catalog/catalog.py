"""Cases and vendor configs on disk -> typed, validated objects.

Layering of hyperparameters: case defaults < vendor config < ``--set key=value``.
A case lists the keys that may be overridden; anything else is refused. Every error
names the file (or ``--set``) and the field.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import yaml
from harness.vendors import PRECISIONS, precision_problem
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, ValidationError

from tui.catalog.metrics import CaseMetric, column_key, metric_registry
from tui.catalog.published import Reference, parse_references
from tui.core.errors import CatalogError
from tui.core.paths import CASES_DIR, REPO_ROOT
from tui.core.text import clean_tree

# CHIPxNNODESxNPROC, and -VARIANT for a second seed row on the same hardware (A100x1x8-bs96).
CONFIG_NAME = re.compile(  # fullmatch: "$" would let a final newline in
    r"(?P<chip>[A-Za-z0-9_.-]+?)x(?P<nnodes>\d+)x(?P<nproc>\d+)(?:-(?P<variant>[a-z0-9]+))?"
)

VENDOR = re.compile(r"[a-z0-9][a-z0-9_-]*")  # a directory under a case's configs/
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


class _Loader(yaml.SafeLoader):
    """Safe YAML that also reads ``1e-4`` as a float, as YAML 1.2 and every user expect."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _yaml(text: str) -> Any:
    # Cleaned (tui/core/text.py): a double-quoted "\ud800" is a lone surrogate, which no record,
    # store or terminal could encode.
    return clean_tree(yaml.load(text, Loader=_Loader))  # noqa: S506 - a SafeLoader subclass


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Target(_Strict):
    metric: str
    value: float


class Bounds(_Strict):
    min: float | None = None
    max: float | None = None


class Measured(_Strict):
    """How long a case's smoke and full runs took on one config here (README's table)."""

    config: str
    smoke_s: PositiveFloat
    full_s: PositiveFloat
    cores: PositiveInt  # the host's CPUs
    load: float = Field(ge=0)  # its highest 1-minute load average while they ran


class Smoke(_Strict):
    """case.yaml ``smoke:``: the overrides of ``--smoke`` (a short run of the whole pipeline,
    no target, not judged; docs/record.md) and how long it took here."""

    hp: dict[str, Any]
    measured: Measured | None = None


class CaseSpec(_Strict):
    """A case as declared by ``cases/<case>/case.yaml``."""

    name: str
    model: str
    dataset: str
    task: str
    kind: Literal["training", "inference"]
    entrypoint: str
    prepare: str | None = None
    requires: list[str] = Field(default_factory=list)
    target: Target | None = None
    timeout_s: PositiveInt = 3600
    stall_s: PositiveInt = 900
    report: list[str]
    # Metrics of the case's own, beside the registry's (harness.metrics).
    metrics: list[CaseMetric] = Field(default_factory=list)
    short_names: dict[str, str] = Field(default_factory=dict)
    defaults: dict[str, Any]
    overridable: list[str]
    # Harness run settings (sample budget, logging, workers): kept in the record's hp, left
    # out of the table's fix_hp, which shows the seed's hyperparameters (bs, lr, ...).
    settings: list[str] = Field(default_factory=list)
    # Hyperparameters the seed's fix_hp column names on every row, overridden or not (seed
    # 000 prints "bs=8, lr=1e-05" on each), before the overrides.
    fix_hp_shows: list[str] = Field(default_factory=list)
    # Limits for case-specific numeric keys (the shared ones are in Hyperparameters).
    bounds: dict[str, Bounds] = Field(default_factory=dict)
    # Allowed values of string keys; the workload checks config.json the same way (harness.case).
    choices: dict[str, list[str]] = Field(default_factory=dict)
    smoke: Smoke | None = None
    dir: Path


class Hyperparameters(BaseModel):
    """Bounds of the hyperparameters cases share; other keys keep their default's type."""

    model_config = ConfigDict(extra="allow", strict=False)

    precision: Literal[PRECISIONS] | None = None  # type: ignore[valid-type]
    train_batch_size: PositiveInt | None = None
    eval_batch_size: PositiveInt | None = None
    learning_rate: PositiveFloat | None = None
    weight_decay: float | None = Field(default=None, ge=0)
    max_seq_length: PositiveInt | None = None
    # 0: no sample budget / no evaluation by samples (a case that counts epochs instead)
    max_samples: int | None = Field(default=None, ge=0)
    eval_every_samples: int | None = Field(default=None, ge=0)
    target_acc: float | None = Field(default=None, gt=0, le=1)
    log_every_steps: PositiveInt | None = None
    warmup_steps: int | None = Field(default=None, ge=0)
    num_workers: int | None = Field(default=None, ge=0)


class VendorConfig(_Strict):
    """``cases/<case>/configs/<vendor>/<CHIP>x<NNODES>x<NPROC>[-<VARIANT>].yaml``."""

    vendor: str
    chip: str
    nnodes: PositiveInt
    nproc_per_node: PositiveInt
    variant: str = ""
    overrides: dict[str, Any] = Field(default_factory=dict)
    # Published figures for this hardware (tui/results/references.py, docs/references.md).
    references: list[Reference] = Field(default_factory=list)
    # Environment variables for the workload (vendor settings such as Kunlunxin's FC
    # autotune file), as written: "{data_dir}" is replaced on each host by the plays.
    env: dict[str, str] = Field(default_factory=dict)
    path: Path

    @property
    def name(self) -> str:
        tail = f"-{self.variant}" if self.variant else ""
        return f"{self.chip}x{self.nnodes}x{self.nproc_per_node}{tail}"

    @property
    def ref(self) -> str:
        return f"{self.vendor}/{self.name}"


class RunSpec(_Strict):
    """One case on one config with every hyperparameter resolved."""

    case: CaseSpec
    config: VendorConfig
    hp: dict[str, Any]
    fix_hp: dict[str, Any]
    smoke: bool = False  # --smoke: case.yaml's smoke.hp applied; no target, not judged

    @property
    def precision(self) -> str:
        return str(self.hp.get("precision", "fp32"))

    @property
    def seed_fix_hp(self) -> dict[str, Any]:
        """The overrides the seeds' fix_hp column shows: none of the case's harness run
        settings, and precision only where the table has no precision column (seed 003's
        fix_hp shows "数据精度=fp16"; the record has its own precision field too)."""
        in_column = "precision" in self.case.report
        hidden = {*(["precision"] if in_column else []), *self.case.settings}
        shown = {k: self.hp[k] for k in self.case.fix_hp_shows}
        return {**shown, **{k: v for k, v in self.fix_hp.items() if k not in hidden}}

    @property
    def world_size(self) -> int:
        return self.config.nnodes * self.config.nproc_per_node


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def _load_yaml(path: Path) -> dict[str, Any]:
    try:
        data = _yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise CatalogError(f"{_rel(path)}:{where} not valid YAML") from None
    if not isinstance(data, dict):
        raise CatalogError(f"{_rel(path)}: expected a mapping at the top level")
    return data


def _first_error(where: str, exc: ValidationError, prefix: str = "") -> CatalogError:
    """The first pydantic error as one line naming the file and the field."""
    err = exc.errors()[0]
    field = ".".join(str(p) for p in (prefix, *err["loc"]) if p != "")
    value = "" if err["type"] == "missing" else f" (got {err['input']!r})"
    return CatalogError(f"{where}: {field}: {err['msg']}{value}")


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """'; did you mean 'max_samples'?' for the nearest known name, or '' when none is near:
    a typo's refusal names what was meant."""
    near = difflib.get_close_matches(name, list(known), n=1)
    return f"; did you mean {near[0]!r}?" if near else ""


def case_names(cases_dir: Path = CASES_DIR) -> list[str]:
    return sorted(p.parent.name for p in cases_dir.glob("*/case.yaml"))


def load_case(name: str, cases_dir: Path = CASES_DIR) -> CaseSpec:
    path = cases_dir / name / "case.yaml"
    if not path.is_file():
        known = ", ".join(case_names(cases_dir)) or "none"
        near = did_you_mean(name, case_names(cases_dir))
        raise CatalogError(f"unknown case {name!r}{near} (known: {known})")
    data = _load_yaml(path)
    try:
        case = CaseSpec(**data, dir=path.parent.resolve())
    except ValidationError as exc:
        raise _first_error(_rel(path), exc) from None
    if case.name != name:
        raise CatalogError(f"{_rel(path)}: name: {case.name!r} differs from the folder {name!r}")
    _check_hp(_rel(path), "defaults", case.defaults)
    _check_report(_rel(path), case)
    for field in ("overridable", "settings", "fix_hp_shows"):
        unknown = [k for k in getattr(case, field) if k not in case.defaults]
        if unknown:
            raise CatalogError(f"{_rel(path)}: {field}: {unknown[0]!r} has no default")
    for key, allowed in case.choices.items():
        default = case.defaults.get(key)
        if default not in allowed:
            where = f"{_rel(path)}: choices.{key}"
            raise CatalogError(f"{where}: its default {default!r} is not listed")
    if case.smoke is not None:  # checked as --set would be: --smoke never fails later
        _check_overrides(case, _rel(path), "smoke.hp", case.smoke.hp)
        measured = case.smoke.measured
        if measured is not None and measured.config not in config_refs(case):
            near = did_you_mean(measured.config, config_refs(case))
            where = f"{_rel(path)}: smoke.measured.config"
            raise CatalogError(f"{where}: no config {measured.config!r}{near}")
    return case


def _check_report(where: str, case: CaseSpec) -> None:
    """The case's own metrics may not redefine standard ones; its report columns must name
    a metric (standard or its own) or a table column."""
    try:
        metrics = metric_registry(case.metrics)
    except ValueError as exc:
        raise CatalogError(f"{where}: metrics: {exc}") from None
    for i, spec in enumerate(case.report):
        try:
            column_key(spec, metrics)
        except ValueError as exc:
            raise CatalogError(f"{where}: report.{i}: {exc}") from None


def config_refs(case: CaseSpec) -> list[str]:
    """``vendor/CHIPxNxP`` for every config file of a case."""
    return sorted(f"{p.parent.name}/{p.stem}" for p in (case.dir / "configs").glob("*/*.yaml"))


def load_config(case: CaseSpec, ref: str) -> VendorConfig:
    vendor, _, name = ref.partition("/")
    match = CONFIG_NAME.fullmatch(name)
    if not VENDOR.fullmatch(vendor) or not match:  # a vendor of ".." named another directory
        near = did_you_mean(ref, config_refs(case))
        raise CatalogError(
            f"config {ref!r}: expected VENDOR/CHIPxNNODESxNPROC[-VARIANT], e.g. cpu/CPUx1x1{near}"
        )
    path = case.dir / "configs" / vendor / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(config_refs(case)) or "none"
        near = did_you_mean(ref, config_refs(case))
        raise CatalogError(f"case {case.name}: no config {ref!r}{near} (known: {known})")
    data = _load_yaml(path)
    extra = sorted(set(data) - {"overrides", "references", "env"})
    if extra:
        raise CatalogError(
            f"{_rel(path)}: {extra[0]}: unknown field (only 'overrides', 'references', 'env')"
        )
    overrides = data.get("overrides") or {}
    if not isinstance(overrides, dict):
        raise CatalogError(f"{_rel(path)}: overrides: expected a mapping")
    _check_overrides(case, _rel(path), "overrides", overrides)
    precision = str(overrides.get("precision", case.defaults.get("precision", "fp32")))
    problem = precision_problem(vendor, precision, match["chip"])
    if problem:  # the config's own rows could never run: refused naming the file
        raise CatalogError(f"{_rel(path)}: overrides.precision: {problem}")
    try:
        references = parse_references(data.get("references") or [], metric_registry(case.metrics))
    except ValueError as exc:
        raise CatalogError(f"{_rel(path)}: {exc}") from None
    for i, ref in enumerate(references):
        _check_overrides(case, _rel(path), f"references.{i}.hp", ref.hp)
    return VendorConfig(
        vendor=vendor,
        chip=match["chip"],
        nnodes=int(match["nnodes"]),
        nproc_per_node=int(match["nproc"]),
        variant=match["variant"] or "",
        overrides=overrides,
        references=references,
        env=_check_env(_rel(path), data.get("env")),
        path=path,
    )


def _check_env(where: str, env: Any) -> dict[str, str]:
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


def parse_sets(pairs: list[str]) -> dict[str, Any]:
    """``key=value`` strings from the command line; values read as YAML scalars."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise CatalogError(f"--set {pair!r}: expected key=value")
        try:
            out[key.strip()] = _yaml(raw) if raw.strip() else ""
        except yaml.YAMLError:
            raise CatalogError(f"--set {key}: value {raw!r} is not a valid scalar") from None
    return out


def resolve(
    case: CaseSpec, config: VendorConfig, sets: dict[str, Any] | None = None, smoke: bool = False
) -> RunSpec:
    """The run's hyperparameters: case defaults < vendor config < case.yaml's smoke.hp (with
    ``smoke``) < ``--set``, so an operator can still change a smoke run's budget."""
    sets = sets or {}
    _check_overrides(case, "--set", "", sets)
    hp = {**case.defaults, **config.overrides, **smoke_hp(case, smoke), **sets}
    problem = precision_problem(config.vendor, str(hp.get("precision", "fp32")), config.chip)
    if problem:  # refused here, not after a launch that fails inside the workload
        raise CatalogError(f"{case.name} {config.ref}: {problem}")
    fix_hp = {k: v for k, v in hp.items() if v != case.defaults[k]}
    return RunSpec(case=case, config=config, hp=hp, fix_hp=fix_hp, smoke=smoke)


def smoke_hp(case: CaseSpec, smoke: bool) -> dict[str, Any]:
    """case.yaml's smoke overrides when ``smoke``; CatalogError for a case that has none."""
    if not smoke:
        return {}
    if case.smoke is None:
        raise CatalogError(f"--smoke: case {case.name} declares no smoke run (case.yaml smoke:)")
    return case.smoke.hp


def _check_overrides(case: CaseSpec, where: str, prefix: str, overrides: dict[str, Any]) -> None:
    for key in overrides:
        field = f"{prefix}.{key}" if prefix else key
        if key not in case.defaults:
            near = did_you_mean(key, case.defaults)
            raise CatalogError(
                f"{where}: {field}: case {case.name} has no such hyperparameter{near}"
            )
        if key not in case.overridable:
            allowed = ", ".join(case.overridable)
            raise CatalogError(
                f"{where}: {field}: case {case.name} does not allow overriding it"
                f" (allowed: {allowed})"
            )
        _check_type(where, field, case.defaults[key], overrides[key])
        _check_bounds(where, field, case.bounds.get(key), overrides[key])
        allowed = case.choices.get(key)
        if allowed is not None and overrides[key] not in allowed:
            expected = f"expected one of {', '.join(allowed)}"
            raise CatalogError(f"{where}: {field}: {expected} (got {overrides[key]!r})")
    _check_hp(where, prefix, overrides)


def _check_bounds(where: str, field: str, bounds: Bounds | None, value: Any) -> None:
    if bounds is None:
        return
    if bounds.min is not None and value < bounds.min:
        raise CatalogError(f"{where}: {field}: must be at least {bounds.min:g} (got {value!r})")
    if bounds.max is not None and value > bounds.max:
        raise CatalogError(f"{where}: {field}: must be at most {bounds.max:g} (got {value!r})")


def _check_type(where: str, field: str, default: Any, value: Any) -> None:
    kind = type(default)
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok = True
    if not ok:
        raise CatalogError(
            f"{where}: {field}: expected {kind.__name__} like {default!r} (got {value!r})"
        )


def _check_hp(where: str, prefix: str, hp: dict[str, Any]) -> None:
    try:
        Hyperparameters(**hp)
    except ValidationError as exc:
        raise _first_error(where, exc, prefix) from None
