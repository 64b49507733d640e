"""How fleetperf reads YAML, the case files' and a user's typed values alike: PyYAML's
safe loader with ``1e-4`` read as a float (YAML 1.2's reading), every number finite as
written, a file parsed by libyaml where PyYAML has it; errors name the file and the line,
or the field. Standard library and PyYAML only: the controller imports it.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from harness.errors import InputError

# ``1e-4`` is a float, as in YAML 1.2 (YAML 1.1, PyYAML's, wants ``1.0e-4``)
FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")


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
