"""A case's own declaration, ``case.yaml``, as the workload reads it: the hyperparameters
config.json must hold (each key of ``defaults``, of its default's type, one of its
``choices`` where the case lists them), the data paths (``requires``), the target, and the
case's own metrics. The controller's catalog
(tui/catalog/catalog.py) checks the same file, bounds included, before launch; here the workload
checks what it was handed once, and nothing falls back to a default.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import InputError
from harness.metrics import Metric, registry


class Hyper(dict[str, Any]):
    """The resolved hyperparameters; ``hp.train_batch_size`` reads ``hp["train_batch_size"]``."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f"hp has no {key!r} (case.yaml's defaults)") from None


@dataclass(frozen=True)
class CaseFile:
    name: str
    kind: str  # training | inference
    defaults: dict[str, Any]
    requires: tuple[str, ...]
    target: tuple[str, float] | None  # (metric, value)
    metrics: tuple[Metric, ...]
    dir: Path
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)  # hp key -> allowed

    @property
    def registry(self) -> dict[str, Metric]:
        """The metric registry with the case's own metrics."""
        return registry(self.metrics)

    def check_hp(self, hp: Any, where: str | os.PathLike[str]) -> Hyper:
        """``hp`` from config.json against the defaults: every key present, none unknown, each
        of its default's type (an int where a float is declared becomes a float) and one of
        its ``choices`` where case.yaml lists them."""
        if not isinstance(hp, dict):
            raise InputError(f"{where}: 'hp' is not an object")
        missing = [k for k in self.defaults if k not in hp]
        if missing:
            raise InputError(f"{where}: hp lacks {', '.join(missing)} (case.yaml's defaults)")
        unknown = [k for k in hp if k not in self.defaults]
        if unknown:
            raise InputError(f"{where}: hp.{unknown[0]}: not in {self.name}'s case.yaml defaults")
        out = Hyper()
        for key, default in self.defaults.items():
            out[key] = _typed(where, key, default, hp[key])
            allowed = self.choices.get(key)
            if allowed is not None and out[key] not in allowed:
                expected = f"expected one of {', '.join(allowed)}"
                raise InputError(f"{where}: hp.{key}: {expected} (got {out[key]!r})")
        return out

    def target_value(self, hp: Hyper) -> float | None:
        """The target: hp ``target_<metric>`` where the case has it, else case.yaml's."""
        if self.target is None:
            return None
        metric, value = self.target
        return float(hp.get(f"target_{metric}", value))


def _typed(where: str | os.PathLike[str], key: str, default: Any, value: Any) -> Any:
    kind = type(default)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    expected = f"expected {kind.__name__} like {default!r}"
    raise InputError(f"{where}: hp.{key}: {expected} (got {value!r})")


# ``1e-4`` is a float, as in YAML 1.2 and the catalog's reading of the same file
FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")


def load_case_file(case_dir: Path) -> CaseFile:
    """``case_dir/case.yaml``; InputError naming the file and field where it is malformed."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_implicit_resolver("tag:yaml.org,2002:float", FLOAT, list("-+0123456789"))
    path = case_dir / "case.yaml"
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=Loader)  # noqa: S506
    except (OSError, yaml.YAMLError) as e:
        raise InputError(f"cannot read {path}: {' '.join(str(e).split())}") from None
    if not isinstance(data, dict) or not isinstance(data.get("defaults"), dict):
        raise InputError(f"{path}: no 'defaults' mapping")
    target = data.get("target")
    try:
        metrics = tuple(Metric(**m) for m in data.get("metrics") or [])
        choices = _choices(path, data.get("choices") or {}, data["defaults"])
        return CaseFile(
            name=str(data["name"]),
            kind=str(data.get("kind", "training")),
            defaults=data["defaults"],
            requires=tuple(str(r) for r in data.get("requires") or ()),
            target=(str(target["metric"]), float(target["value"])) if target else None,
            metrics=metrics,
            dir=case_dir,
            choices=choices,
        )
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(f"{path}: malformed: {e}") from None


def _choices(path: Path, choices: Any, defaults: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """case.yaml's ``choices``: string hyperparameters, each a list holding its default."""
    if not isinstance(choices, dict):
        raise InputError(f"{path}: choices: expected a mapping of hp key -> list of strings")
    out = {}
    for key, allowed in choices.items():
        if not isinstance(allowed, list) or not all(isinstance(a, str) for a in allowed):
            raise InputError(f"{path}: choices.{key}: expected a list of strings")
        if key not in defaults:
            raise InputError(f"{path}: choices.{key}: no such key in defaults")
        if defaults[key] not in allowed:
            raise InputError(f"{path}: choices.{key}: its default {defaults[key]!r} is not listed")
        out[str(key)] = tuple(allowed)
    return out
