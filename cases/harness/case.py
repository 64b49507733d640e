"""``case.yaml``, a case's declaration, read here for both sides: the one schema.

The workload reads it to check the config.json it was handed once (every key of
``defaults``, each value as the schema takes it), and nothing falls back to a default. The
controller's catalog (tui/catalog/catalog.py) reads it with the same reader before any
launch and adds only what the controller knows: vendor configs, report columns, published
references. Here: the fields and their types, the hyperparameters cases share (type and
bounds), a case's own ``bounds`` and ``choices``, the keys that may be overridden. The file
is read by harness.yamlfile (``1e-4`` is a float), field by field by harness.fields. Every
error is an InputError naming the file and the field. Standard library and PyYAML only: the
controller imports it and never torch.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from harness.errors import InputError
from harness.fields import (
    Bounds,
    Fields,
    bounded,
    listed,
    mapping,
    number,
    of_type,
    one_of,
    optional,
    positive_int,
    text,
    text_mapping,
    texts,
)
from harness.metrics import Metric, registry
from harness.vendors import GEMM_ONLY, PRECISIONS
from harness.yamlfile import did_you_mean, read_mapping

# base: a benchmark of the device itself (cases/base-*), no model: no target, no model rates
KINDS = ("training", "inference", "base")
# The standard metrics of a model's run (harness.metrics): a base case's table names none.
MODEL_METRICS = (
    "p_whole",
    "p_train",
    "p_core",
    "tokens_per_s_per_device",
    "warmup_samples",
    "mfu",
    "mfu_measured",
    "energy_j_per_sample",
    "energy_j_per_token",
    "acc",
    "loss",
    "p_val_whole",
    "p_val_core",
    "p_infer_whole",
    "p_infer_core",
    "p_infer_real_whole",
    "p_infer_real_core",
)
METRIC_NAME = re.compile(r"[a-z][a-z0-9_]*")  # fullmatch


@dataclass(frozen=True)
class Shared:
    """A hyperparameter cases share: its type and limits in every case that declares it."""

    kind: type
    bounds: Bounds = Bounds()
    choices: tuple[str, ...] | None = None
    # beyond ``choices``: accepted only by a case that lists them under its own ``choices``
    opt_in: tuple[str, ...] = ()


SHARED: dict[str, Shared] = {
    # fp64, int8, fp8: the base computation case's GEMM types, meaningless to a model
    "precision": Shared(str, choices=PRECISIONS, opt_in=GEMM_ONLY),
    "train_batch_size": Shared(int, Bounds(min=1)),
    "eval_batch_size": Shared(int, Bounds(min=1)),
    "learning_rate": Shared(float, Bounds(min=0, above=True)),
    "weight_decay": Shared(float, Bounds(min=0)),
    "max_seq_length": Shared(int, Bounds(min=1)),
    # 0: no sample budget / no evaluation by samples (a case that counts epochs instead)
    "max_samples": Shared(int, Bounds(min=0)),
    "eval_every_samples": Shared(int, Bounds(min=0)),
    "target_acc": Shared(float, Bounds(min=0, max=1, above=True)),
    "log_every_steps": Shared(int, Bounds(min=1)),
    "warmup_steps": Shared(int, Bounds(min=0)),
    "num_workers": Shared(int, Bounds(min=0)),
}


class Target(NamedTuple):
    metric: str
    value: float


@dataclass(frozen=True)
class Measured:
    """How long a case's smoke and full runs took on one config here (README's table)."""

    config: str
    smoke_s: float
    full_s: float
    cores: int  # the host's CPUs
    load: float  # its highest 1-minute load average while they ran


@dataclass(frozen=True)
class Smoke:
    """``smoke:``: the overrides of ``--smoke`` (a short run of the whole pipeline, no
    target, not judged; docs/record.md) and how long it took here."""

    hp: dict[str, Any]
    measured: Measured | None


class Hyper(dict[str, Any]):
    """The resolved hyperparameters; ``hp.train_batch_size`` reads ``hp["train_batch_size"]``."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f"hp has no {key!r} (case.yaml's defaults)") from None


@dataclass(frozen=True)
class CaseFile:
    """A case as ``cases/<case>/case.yaml`` declares it (docs/new-case.md)."""

    name: str
    model: str
    dataset: str
    task: str
    kind: str  # one of KINDS
    entrypoint: str
    prepare: str | None
    requires: list[str]  # paths under the case's data directory that must exist
    target: Target | None
    timeout_s: int
    stall_s: int  # seconds without an event before the run is stopped
    report: list[str]  # the table's columns (tui/catalog/metrics.py column_key)
    metrics: list[Metric]  # the case's own, beside the registry's (harness.metrics)
    short_names: dict[str, str]  # how the fix_hp column names a key
    defaults: dict[str, Any]
    overridable: list[str]  # the keys a vendor config, --set or smoke.hp may change
    # Harness run settings (sample budget, logging, workers): kept in the record's hp, left
    # out of the table's fix_hp, which shows the seed's hyperparameters (bs, lr, ...).
    settings: list[str]
    # Hyperparameters the seed's fix_hp column names on every row, overridden or not (seed
    # 000 prints "bs=8, lr=1e-05" on each), before the overrides.
    fix_hp_shows: list[str]
    bounds: dict[str, Bounds]  # the case's own limits, beside SHARED's
    choices: dict[str, tuple[str, ...]]  # the values a string key may take
    smoke: Smoke | None
    # hp values that need 2 processes or more (base-interconnect's p2p and allreduce): the
    # catalog refuses them on a one-process config before launch, the workload at start
    needs_two_processes: dict[str, tuple[str, ...]]
    dir: Path
    # Numeric keys that may take a list of values, each a point of one run (llm-serving's
    # loads: ``--set concurrency=1,2,4``); every other key takes one value.
    sweep: list[str] = dataclasses.field(default_factory=list)

    @property
    def registry(self) -> dict[str, Metric]:
        """The metric registry with the case's own metrics."""
        return registry(self.metrics)

    def check(self, key: str, value: Any) -> Any:
        """``value`` for ``key`` of ``defaults``: of its default's type (an int where a float
        is declared becomes a float), within SHARED's and the case's bounds, one of the
        allowed values; for a key of ``sweep`` also a list of such values, each checked.
        ValueError saying what is wrong."""
        if not isinstance(value, list) or key not in self.sweep:
            return self._check_one(key, value)  # a list: not of the default's type
        if not value:
            raise ValueError("an empty list: expected one value or more")
        out = []
        for i, one in enumerate(value):
            try:
                out.append(self._check_one(key, one))
            except ValueError as exc:
                raise ValueError(f"value {i + 1} of the list: {exc}") from None
        return out

    def _check_one(self, key: str, value: Any) -> Any:
        default = self.defaults[key]
        typed = of_type(value, type(default), f"{type(default).__name__} like {default!r}")
        shared = SHARED.get(key, Shared(object))
        of_type(typed, shared.kind)
        for bounds in (shared.bounds, self.bounds.get(key, Bounds())):
            problem = bounds.problem(typed)
            if problem:
                raise ValueError(f"{problem} (got {value!r})")
        own = self.choices.get(key)
        # the shared values and those beyond them that this case opts into (a GEMM's fp64)
        common = shared.choices and (
            *shared.choices,
            *(v for v in shared.opt_in if v in (own or ())),
        )
        for allowed in (common, own):
            if allowed is not None and typed not in allowed:
                raise ValueError(f"expected one of {', '.join(allowed)} (got {value!r})")
        return typed

    def check_overrides(self, overrides: dict[str, Any], where: str, prefix: str = "") -> None:
        """Overrides from a vendor config, ``--set`` or ``smoke.hp``: each key one the case
        lets be overridden, each value as ``check`` takes it."""
        for key, value in overrides.items():
            field = f"{prefix}.{key}" if prefix else key
            if key not in self.defaults:
                near = did_you_mean(key, self.defaults)
                raise InputError(
                    f"{where}: {field}: case {self.name} has no such hyperparameter{near}"
                )
            if key not in self.overridable:
                raise InputError(
                    f"{where}: {field}: case {self.name} does not allow overriding it"
                    f" (allowed: {', '.join(self.overridable)})"
                )
            try:
                self.check(key, value)
            except ValueError as exc:
                raise InputError(f"{where}: {field}: {exc}") from None

    def check_hp(self, hp: Any, where: str | os.PathLike[str]) -> Hyper:
        """``hp`` from config.json: every key of the defaults present, none unknown, each
        value as ``check`` takes it."""
        if not isinstance(hp, dict):
            raise InputError(f"{where}: 'hp' is not an object")
        missing = [k for k in self.defaults if k not in hp]
        if missing:
            raise InputError(f"{where}: hp lacks {', '.join(missing)} (case.yaml's defaults)")
        unknown = [k for k in hp if k not in self.defaults]
        if unknown:
            raise InputError(f"{where}: hp.{unknown[0]}: not in {self.name}'s case.yaml defaults")
        out = Hyper()
        for key in self.defaults:
            try:
                out[key] = self.check(key, hp[key])
            except ValueError as exc:
                raise InputError(f"{where}: hp.{key}: {exc}") from None
        return out

    def process_problem(self, hp: dict[str, Any], processes: int) -> str | None:
        """'test: p2p needs 2 processes or more ...' where an hp value listed under
        ``needs_two_processes`` meets a run of one process; None where nothing is wrong."""
        if processes >= 2:
            return None
        for key, values in self.needs_two_processes.items():
            if hp[key] in values:
                return (
                    f"{key}: {hp[key]} needs 2 processes or more (a config CHIPx1x2 or "
                    f"CHIPx2x1); this run has {processes}"
                )
        return None

    def target_value(self, hp: Hyper) -> float | None:
        """The target: hp ``target_<metric>`` where the case has it, else case.yaml's."""
        if self.target is None:
            return None
        return float(hp.get(f"target_{self.target.metric}", self.target.value))


def load_case_file(case_dir: Path) -> CaseFile:
    """``case_dir/case.yaml``; InputError naming the file and the field where it is wrong."""
    path = case_dir / "case.yaml"
    return case_file(read_mapping(path, str(path)), case_dir, str(path))


def case_file(data: dict[str, Any], case_dir: Path, where: str) -> CaseFile:
    """case.yaml's mapping -> CaseFile; InputError ``where: field: problem``."""
    top = Fields(data, where)
    defaults = top.take("defaults", mapping)
    metrics = [
        _metric(Fields(raw, where, f"metrics.{i}"))
        for i, raw in enumerate(top.take("metrics", listed, []))
    ]
    try:
        registry(metrics)
    except ValueError as exc:  # a case may not redefine a standard metric
        raise top.error("metrics", str(exc)) from None
    case = CaseFile(
        name=top.take("name", text),
        model=top.take("model", text),
        dataset=top.take("dataset", text),
        task=top.take("task", text),
        kind=top.take("kind", lambda v: one_of(v, KINDS)),
        entrypoint=top.take("entrypoint", text),
        prepare=top.take("prepare", optional(text), None),
        requires=top.take("requires", texts, []),
        target=top.take("target", optional(lambda v: _target(Fields(v, where, "target"))), None),
        timeout_s=top.take("timeout_s", positive_int, 3600),
        stall_s=top.take("stall_s", positive_int, 900),
        report=top.take("report", texts),
        metrics=metrics,
        short_names=top.take("short_names", text_mapping, {}),
        defaults=defaults,
        overridable=top.take("overridable", texts, []),
        settings=top.take("settings", texts, []),
        fix_hp_shows=top.take("fix_hp_shows", texts, []),
        bounds={
            key: _bounds(top, key, raw, defaults)
            for key, raw in top.take("bounds", mapping, {}).items()
        },
        choices={
            key: _choices(top, key, raw, defaults)
            for key, raw in top.take("choices", mapping, {}).items()
        },
        smoke=top.take("smoke", optional(lambda v: _smoke(Fields(v, where, "smoke"))), None),
        needs_two_processes={
            key: _choices(top, key, raw, defaults, "needs_two_processes", default_in=False)
            for key, raw in top.take("needs_two_processes", mapping, {}).items()
        },
        dir=case_dir,
        sweep=top.take("sweep", texts, []),
    )
    top.done()
    if case.kind == "base" and case.target is not None:
        raise top.error("target", "a base case has none (kind: base runs no model)")
    for field in ("overridable", "settings", "fix_hp_shows", "sweep"):
        unknown = [k for k in getattr(case, field) if k not in defaults]
        if unknown:
            raise top.error(field, f"{unknown[0]!r} has no default")
    for key in case.sweep:  # a sweep's points are loads: numbers the operator may set
        if key not in case.overridable or not isinstance(defaults[key], int | float):
            raise top.error("sweep", f"{key!r} is not a numeric key that overridable lists")
    for key, value in defaults.items():
        try:
            case.check(key, value)
        except ValueError as exc:
            raise top.error(f"defaults.{key}", str(exc)) from None
    if case.smoke is not None:  # checked as --set would be: --smoke never fails later
        case.check_overrides(case.smoke.hp, where, "smoke.hp")
    return case


def _choices(
    top: Fields,
    key: str,
    allowed: Any,
    defaults: dict[str, Any],
    section: str = "choices",
    default_in: bool = True,
) -> tuple[str, ...]:
    """A string hyperparameter's values under ``section``; with ``default_in`` (its allowed
    values) its default among them."""
    field = f"{section}.{key}"
    if not isinstance(allowed, list) or not all(isinstance(a, str) for a in allowed):
        raise top.error(field, "expected a list of strings")
    if key not in defaults:
        raise top.error(field, "no such key in defaults")
    if default_in and defaults[key] not in allowed:
        raise top.error(field, f"its default {defaults[key]!r} is not listed")
    return tuple(allowed)


def _bounds(top: Fields, key: str, limits: Any, defaults: dict[str, Any]) -> Bounds:
    """A numeric hyperparameter's own limits."""
    field = f"bounds.{key}"
    if key not in defaults:
        raise top.error(field, "no such key in defaults")
    if not isinstance(defaults[key], int | float) or isinstance(defaults[key], bool):
        raise top.error(field, f"its default {defaults[key]!r} is not a number")
    fields = Fields(limits, top.where, field)
    bounds = Bounds(
        min=fields.take("min", optional(number), None),
        max=fields.take("max", optional(number), None),
    )
    fields.done()
    return bounds


def metric_problem(metric: Metric) -> str | None:
    """What is wrong with a case's own metric ("field: problem"), None when nothing: the
    rule for case.yaml's ``metrics:`` and for a record that carries them."""
    if not METRIC_NAME.fullmatch(metric.name):
        return f"name: expected lower case, digits and _, a letter first (got {metric.name!r})"
    if metric.fmt != "pct":
        try:
            format(1.5, metric.fmt)
        except ValueError:
            return f"fmt: not a format spec for a number, nor pct (got {metric.fmt!r})"
    return None


def _metric(fields: Fields) -> Metric:
    metric = Metric(
        name=fields.take("name", text),
        unit=fields.take("unit", text),
        higher_is_better=fields.take("higher_is_better", optional(lambda v: of_type(v, bool))),
        fmt=fields.take("fmt", text, ".1f"),
        meaning=fields.take("meaning", text),
    )
    fields.done()
    problem = metric_problem(metric)
    if problem:
        key, _, why = problem.partition(": ")
        raise fields.error(key, why)
    return metric


def _target(fields: Fields) -> Target:
    target = Target(fields.take("metric", text), fields.take("value", number))
    fields.done()
    return target


def _smoke(fields: Fields) -> Smoke:
    smoke = Smoke(
        hp=fields.take("hp", mapping),
        measured=fields.take(
            "measured",
            optional(lambda v: _measured(Fields(v, fields.where, "smoke.measured"))),
            None,
        ),
    )
    fields.done()
    return smoke


def _measured(fields: Fields) -> Measured:
    positive = bounded(float, Bounds(min=0, above=True))
    measured = Measured(
        config=fields.take("config", text),
        smoke_s=fields.take("smoke_s", positive),
        full_s=fields.take("full_s", positive),
        cores=fields.take("cores", positive_int),
        load=fields.take("load", bounded(float, Bounds(min=0))),
    )
    fields.done()
    return measured
