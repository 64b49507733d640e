"""The extra vars the controller passes to the plays, as playbooks/vars/extra_vars.yml
declares them: the one place their names, types and meaning are written. The plays check
them with ansible.builtin.validate_argument_spec; the controller checks the dict it builds
with the same validator before ansible starts, which also refuses a name the file lacks
(the plays would ignore it)."""

from __future__ import annotations

from functools import cache
from typing import Any, Literal

import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from tui.catalog import REPO_ROOT

SPEC_FILE = REPO_ROOT / "playbooks" / "vars" / "extra_vars.yml"

Play = Literal["run", "stop"]  # run.yml and slurm.yml take "run", stop.yml "stop"


@cache
def spec(play: Play) -> dict[str, Any]:
    """The play's extra vars: name -> argument spec option."""
    return yaml.safe_load(SPEC_FILE.read_text())["fleetperf_extra_vars"][play]


def declared(play: Play, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` if they are the play's extra vars as declared; else ValueError naming the
    file and what is wrong: a var not declared, one missing, or one of another type."""
    errors = ArgumentSpecValidator(spec(play)).validate(values).error_messages
    if errors:
        raise ValueError(f"{SPEC_FILE}: {play}: {errors[0]}")
    return values
