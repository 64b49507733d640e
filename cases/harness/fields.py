"""A mapping read field by field, as case.yaml is: each field taken once and checked, an
error naming the file and the field, a field left over unknown; the checks (a type, a
list of text, limits, one of some values). Standard library only.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.errors import InputError


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


class Fields:
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


def of_type(value: Any, kind: type, expected: str = "") -> Any:
    """``value`` as a ``kind``: an int is a float, a bool is no number; ValueError else."""
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        if abs(value) > sys.float_info.max:  # float() would raise OverflowError
            raise ValueError(f"expected {expected or kind.__name__} (got an integer past 1.8e308)")
        return float(value)
    if isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool)):
        return value
    raise ValueError(f"expected {expected or kind.__name__} (got {value!r})")


def text(value: Any) -> str:
    return of_type(value, str, "text")


def texts(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("expected a list of text")
    return value


def listed(value: Any) -> list[Any]:
    return of_type(value, list, "a list")


def mapping(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ValueError("expected a mapping with text keys")
    return value


def text_mapping(value: Any) -> dict[str, str]:
    if not all(isinstance(v, str) for v in mapping(value).values()):
        raise ValueError("expected a mapping of text to text")
    return value


def bounded(kind: type, bounds: Bounds) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        typed = of_type(value, kind)
        problem = bounds.problem(typed)
        if problem:
            raise ValueError(f"{problem} (got {value!r})")
        return typed

    return check


positive_int = bounded(int, Bounds(min=1))
number = bounded(float, Bounds())


def one_of(value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"expected one of {', '.join(allowed)} (got {value!r})")
    return value


def optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else check(value)
