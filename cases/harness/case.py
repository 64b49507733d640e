"""``case.yaml``, a case's declaration, read here for both sides: the one schema.

The workload reads it to check the config.json it was handed once (every key of
``defaults``, each value as the schema takes it), and nothing falls back to a default. The
controller's catalog (tui/catalog/catalog.py) reads it with the same reader before any
launch and adds only what the controller knows: vendor configs, report columns, published
references. Here: the fields and their types, the hyperparameters cases share (type and
bounds), a case's own ``bounds`` and ``choices``, the keys that may be overridden, and how
YAML is read (``1e-4`` is a float). Every error is an InputError naming the file and the
field. Standard library and PyYAML only: the controller imports it and never torch.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from harness.errors import InputError
from harness.metrics import Metric, registry
from harness.vendors import GEMM_ONLY, PRECISIONS

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
# ``1e-4`` is a float, as in YAML 1.2 (YAML 1.1, PyYAML's, wants ``1.0e-4``)
FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")
METRIC_NAME = re.compile(r"[a-z][a-z0-9_]*")  # fullmatch


class _Loader(yaml.SafeLoader):
    """Safe YAML that also reads ``1e-4`` as a float."""


class _FileLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """The same for a file, parsed by libyaml where PyYAML has it: a tenth of the time (the
    app's first screen reads every case). Not for a value typed by a user: libyaml cannot
    take a lone surrogate (argv's undecodable bytes) and refuses the escape of one, which
    the value's cleaning (tui.core.text) replaces."""


for _loader in (_Loader, _FileLoader):
    _loader.add_implicit_resolver("tag:yaml.org,2002:float", FLOAT, list("-+0123456789"))


class NumberError(ValueError):
    """A number YAML would read as something else than written, or not at all (issue 39
    point 8); ``field``: its dotted path in the document, "" for a lone scalar."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field


def yaml_load(text: str, loader_type: type[_Loader | _FileLoader] = _Loader) -> Any:
    """YAML as every file of a case is read (case.yaml, vendor configs, ``--set`` values);
    raises yaml.YAMLError, or NumberError for a number that is not finite as written."""
    loader = loader_type(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _finite_numbers(loader, node, "", set())
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _finite_numbers(
    loader: _Loader | _FileLoader, node: yaml.Node, field: str, seen: set[int]
) -> None:
    """NumberError for a number under ``node`` that is not a finite one as written: .nan
    passes every bound (it compares false), .inf and 1e400 (inf) fail none above, 1e-400
    reads as 0, which some keys take as "no limit" (max_gib); "!!float x" and an integer past
    Python's 4300 digits raise ValueError. ``seen``: the nodes walked, each once however many
    aliases name it."""
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else "?"
            _finite_numbers(loader, value, f"{field}.{name}" if field else str(name), seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _finite_numbers(loader, item, f"{field}.{i}" if field else str(i), seen)
    elif node.tag in ("tag:yaml.org,2002:float", "tag:yaml.org,2002:int"):
        text = (
            node.value
            if len(node.value) <= 40
            else f"{node.value[:20]}... ({len(node.value)} characters)"
        )
        try:
            value = loader.construct_object(node)
        except ValueError:  # "!!float x", or an integer past Python's 4300 digits
            raise NumberError(field, f"{text} is not a number that can be read") from None
        if not isinstance(value, float):
            return
        if not math.isfinite(value):
            raise NumberError(field, f"{text} is not a finite number")
        if value == 0 and re.search("[1-9]", node.value.lower().partition("e")[0]):
            raise NumberError(field, f"{text} is too small for a float: it would read as 0")


def read_mapping(path: Path, where: str) -> dict[str, Any]:
    """A YAML file whose top level is a mapping; InputError naming ``where`` (and the line)."""
    try:
        data = yaml_load(path.read_text(encoding="utf-8"), _FileLoader)
    except OSError as exc:
        raise InputError(f"cannot read {where}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"cannot read {where}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark else ""
        raise InputError(f"{where}:{line} not valid YAML") from None
    except NumberError as exc:
        raise InputError(f"{where}: {exc.field or 'top level'}: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a mapping at the top level")
    return data


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """'; did you mean 'max_samples'?' for the nearest known name, or '' when none is near:
    a typo's refusal names what was meant."""
    near = difflib.get_close_matches(name, list(known), n=1)
    return f"; did you mean {near[0]!r}?" if near else ""


@dataclass(frozen=True)
class Bounds:
    """A numeric hyperparameter's limits, inclusive; ``above``: the minimum itself is out."""

    min: float | None = None
    max: float | None = None
    above: bool = False

    def problem(self, value: float) -> str | None:
        low = self.min is not None and (value <= self.min if self.above else value < self.min)
        if low:
            return f"must be {'above' if self.above else 'at least'} {self.min:g}"
        if self.max is not None and value > self.max:
            return f"must be at most {self.max:g}"
        return None


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
        typed = _typed(value, type(default), f"{type(default).__name__} like {default!r}")
        shared = SHARED.get(key, Shared(object))
        _typed(typed, shared.kind)
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
    top = _Fields(data, where)
    defaults = top.take("defaults", _mapping)
    metrics = [
        _metric(_Fields(raw, where, f"metrics.{i}"))
        for i, raw in enumerate(top.take("metrics", _list, []))
    ]
    try:
        registry(metrics)
    except ValueError as exc:  # a case may not redefine a standard metric
        raise top.error("metrics", str(exc)) from None
    case = CaseFile(
        name=top.take("name", _text),
        model=top.take("model", _text),
        dataset=top.take("dataset", _text),
        task=top.take("task", _text),
        kind=top.take("kind", lambda v: _one_of(v, KINDS)),
        entrypoint=top.take("entrypoint", _text),
        prepare=top.take("prepare", _optional(_text), None),
        requires=top.take("requires", _texts, []),
        target=top.take("target", _optional(lambda v: _target(_Fields(v, where, "target"))), None),
        timeout_s=top.take("timeout_s", _positive_int, 3600),
        stall_s=top.take("stall_s", _positive_int, 900),
        report=top.take("report", _texts),
        metrics=metrics,
        short_names=top.take("short_names", _text_mapping, {}),
        defaults=defaults,
        overridable=top.take("overridable", _texts, []),
        settings=top.take("settings", _texts, []),
        fix_hp_shows=top.take("fix_hp_shows", _texts, []),
        bounds={
            key: _bounds(top, key, raw, defaults)
            for key, raw in top.take("bounds", _mapping, {}).items()
        },
        choices={
            key: _choices(top, key, raw, defaults)
            for key, raw in top.take("choices", _mapping, {}).items()
        },
        smoke=top.take("smoke", _optional(lambda v: _smoke(_Fields(v, where, "smoke"))), None),
        needs_two_processes={
            key: _choices(top, key, raw, defaults, "needs_two_processes", default_in=False)
            for key, raw in top.take("needs_two_processes", _mapping, {}).items()
        },
        dir=case_dir,
        sweep=top.take("sweep", _texts, []),
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


class _Fields:
    """One mapping of case.yaml as it is read: each field taken once and checked, errors
    naming the file and the field; a field left over is unknown."""

    def __init__(self, data: Any, where: str, prefix: str = "") -> None:
        self.where, self.prefix = where, prefix
        if not isinstance(data, dict):
            raise self.error("", "expected a mapping")
        self.left = dict(data)

    def error(self, key: str, problem: str) -> InputError:
        field = ".".join(p for p in (self.prefix, key) if p)
        return InputError(f"{self.where}: {field}: {problem}")

    def take(self, key: str, check: Callable[[Any], Any], default: Any = ...) -> Any:
        """The field checked by ``check`` (ValueError: what is wrong); ``default`` where it is
        absent, refused as missing where there is none."""
        if key not in self.left:
            if default is ...:
                raise self.error(key, "missing")
            return default
        try:
            return check(self.left.pop(key))
        except ValueError as exc:
            raise self.error(key, str(exc)) from None

    def done(self) -> None:
        if self.left:
            raise self.error(str(next(iter(self.left))), "unknown field")


def _typed(value: Any, kind: type, expected: str = "") -> Any:
    """``value`` as a ``kind``: an int is a float, a bool is no number; ValueError else."""
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        if abs(value) > sys.float_info.max:  # float() would raise OverflowError
            raise ValueError(f"expected {expected or kind.__name__} (got an integer past 1.8e308)")
        return float(value)
    if isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool)):
        return value
    raise ValueError(f"expected {expected or kind.__name__} (got {value!r})")


def _text(value: Any) -> str:
    return _typed(value, str, "text")


def _texts(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("expected a list of text")
    return value


def _list(value: Any) -> list[Any]:
    return _typed(value, list, "a list")


def _mapping(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ValueError("expected a mapping with text keys")
    return value


def _text_mapping(value: Any) -> dict[str, str]:
    if not all(isinstance(v, str) for v in _mapping(value).values()):
        raise ValueError("expected a mapping of text to text")
    return value


def _bounded(kind: type, bounds: Bounds) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        typed = _typed(value, kind)
        problem = bounds.problem(typed)
        if problem:
            raise ValueError(f"{problem} (got {value!r})")
        return typed

    return check


_positive_int = _bounded(int, Bounds(min=1))
_number = _bounded(float, Bounds())


def _one_of(value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"expected one of {', '.join(allowed)} (got {value!r})")
    return value


def _optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else check(value)


def _choices(
    top: _Fields,
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


def _bounds(top: _Fields, key: str, limits: Any, defaults: dict[str, Any]) -> Bounds:
    """A numeric hyperparameter's own limits."""
    field = f"bounds.{key}"
    if key not in defaults:
        raise top.error(field, "no such key in defaults")
    if not isinstance(defaults[key], int | float) or isinstance(defaults[key], bool):
        raise top.error(field, f"its default {defaults[key]!r} is not a number")
    fields = _Fields(limits, top.where, field)
    bounds = Bounds(
        min=fields.take("min", _optional(_number), None),
        max=fields.take("max", _optional(_number), None),
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


def _metric(fields: _Fields) -> Metric:
    metric = Metric(
        name=fields.take("name", _text),
        unit=fields.take("unit", _text),
        higher_is_better=fields.take("higher_is_better", _optional(lambda v: _typed(v, bool))),
        fmt=fields.take("fmt", _text, ".1f"),
        meaning=fields.take("meaning", _text),
    )
    fields.done()
    problem = metric_problem(metric)
    if problem:
        key, _, why = problem.partition(": ")
        raise fields.error(key, why)
    return metric


def _target(fields: _Fields) -> Target:
    target = Target(fields.take("metric", _text), fields.take("value", _number))
    fields.done()
    return target


def _smoke(fields: _Fields) -> Smoke:
    smoke = Smoke(
        hp=fields.take("hp", _mapping),
        measured=fields.take(
            "measured",
            _optional(lambda v: _measured(_Fields(v, fields.where, "smoke.measured"))),
            None,
        ),
    )
    fields.done()
    return smoke


def _measured(fields: _Fields) -> Measured:
    positive = _bounded(float, Bounds(min=0, above=True))
    measured = Measured(
        config=fields.take("config", _text),
        smoke_s=fields.take("smoke_s", positive),
        full_s=fields.take("full_s", positive),
        cores=fields.take("cores", _positive_int),
        load=fields.take("load", _bounded(float, Bounds(min=0))),
    )
    fields.done()
    return measured
