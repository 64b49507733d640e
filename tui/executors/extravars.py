"""The extra vars the controller passes to the plays, as playbooks/vars/extra_vars.yml
declares them: the one place their names, types and meaning are written. The plays check
them with ansible.builtin.validate_argument_spec; the controller checks the dict it builds
before ansible starts, which also refuses a name the file lacks (the plays would ignore
it). The controller's check is stricter than Ansible's (no conversions: it builds these
values itself) and needs no ansible.module_utils in its process (importing that replaces
sys.intern, which breaks torch's compiler where both share a process, as in the tests)."""

from __future__ import annotations

from functools import cache
from typing import Any, Literal

import yaml

from tui.core.paths import REPO_ROOT

SPEC_FILE = REPO_ROOT / "playbooks" / "vars" / "extra_vars.yml"

# run.yml and stop.yml take "plays" (host -> its run's "run" or "stop" vars), slurm.yml "run".
Play = Literal["plays", "run", "stop"]


@cache
def spec(play: Play) -> dict[str, Any]:
    """The play's extra vars: name -> argument spec option."""
    return yaml.safe_load(SPEC_FILE.read_text())["fleetperf_extra_vars"][play]


# Argument-spec type -> the Python types the controller may pass for it.
_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "path": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "list": (list, tuple),
    "dict": (dict,),
}


def _problem(options: dict[str, Any], values: dict[str, Any], where: str) -> str | None:
    for name, option in options.items():
        if name not in values and option.get("required"):
            return f"{where}{name}: missing (required)"
    for name in values:
        if name not in options:
            return f"{where}{name}: not declared"
    for name, option in options.items():
        if name not in values:
            continue
        value, kind = values[name], option.get("type", "str")
        wanted = _TYPES.get(kind)
        bad = wanted is not None and (
            not isinstance(value, wanted) or (kind in ("int", "float") and isinstance(value, bool))
        )
        if bad:
            return f"{where}{name}: a {type(value).__name__}, not a {kind}"
        elements = _TYPES.get(option.get("elements", ""))
        if kind == "list" and elements and not all(isinstance(v, elements) for v in value):
            return f"{where}{name}: elements must be {option['elements']}"
        if kind == "dict" and "options" in option:
            inner = _problem(option["options"], value, f"{where}{name}.")
            if inner:
                return inner
    return None


def declared(play: Play, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` if they are the play's extra vars as declared; else ValueError naming the
    file and what is wrong: a var not declared, one missing, or one of another type."""
    problem = _problem(spec(play), values, "")
    if problem:
        raise ValueError(f"{SPEC_FILE}: {play}: {problem}")
    return values
