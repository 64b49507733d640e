"""The modules of playbooks/library document themselves as ansible-core's do: DOCUMENTATION
(every option as its argument_spec has it), EXAMPLES (tasks that call the module with its
options) and RETURN (every key its code returns), and ansible-doc renders each of them.

The doc side is what ansible-doc reads; the code side is read from the module's source
(the AnsibleModule call, the keys of its exit_json/fail_json), never by running it."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

LIBRARY = Path(__file__).resolve().parents[2] / "playbooks" / "library"
MODULE_UTILS = LIBRARY.parent / "module_utils"
MODULES = sorted(p.stem for p in LIBRARY.glob("fleetperf_*.py"))
BLOCKS = ("DOCUMENTATION", "EXAMPLES", "RETURN")
# Results every module has (ansible's common return values), documented by ansible itself.
COMMON = {"changed", "failed"}
OPTION_KEYS = {"description", "type", "required", "default", "choices", "elements", "suboptions"}


@cache
def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def source(name: str) -> Path:
    return LIBRARY / f"{name}.py"


def module_level(path: Path, name: str) -> ast.expr:
    """The value a module-level assignment gives ``name`` in ``path``."""
    for node in tree(path).body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return node.value
    raise LookupError(f"{path}: no module-level {name}")


def blocks(name: str) -> dict[str, Any]:
    """The three doc blocks, each parsed as plain YAML."""
    return {b: yaml.safe_load(ast.literal_eval(module_level(source(name), b))) for b in BLOCKS}


def literal(path: Path, node: ast.expr) -> Any:
    """A literal from the source, where ``fleetperf_x.NAME`` reads NAME from module_utils."""
    if isinstance(node, ast.Dict):
        return {
            literal(path, k): literal(path, v) for k, v in zip(node.keys, node.values, strict=True)
        }
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        utils = MODULE_UTILS / f"{node.value.id}.py"
        return literal(utils, module_level(utils, node.attr))
    return ast.literal_eval(node)


def ansible_module_call(name: str) -> dict[str, ast.expr]:
    calls = [
        n
        for n in ast.walk(tree(source(name)))
        if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "AnsibleModule"
    ]
    assert len(calls) == 1, f"{name}: one AnsibleModule(...) expected"
    return {k.arg: k.value for k in calls[0].keywords if k.arg}


def argument_spec(name: str) -> dict[str, Any]:
    return literal(source(name), ansible_module_call(name)["argument_spec"])


def from_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """Per option, what its documentation must say."""
    return {
        name: {
            "type": s.get("type", "str"),
            "required": s.get("required", False),
            "default": s.get("default"),
            "choices": s.get("choices"),
            "elements": s.get("elements"),
            "no_log": s.get("no_log", False),
            "suboptions": from_spec(s["options"]) if "options" in s else None,
        }
        for name, s in spec.items()
    }


def from_doc(options: dict[str, Any]) -> dict[str, Any]:
    """Per option, what its documentation says. A no_log option says so in its
    description (ansible's doc format has no key for it): "C(no_log)"."""
    said = {}
    for name, o in options.items():
        text = o["description"]
        text = " ".join(text) if isinstance(text, list) else text
        assert text.strip() and "type" in o, f"option {name}: description and type are required"
        # An unknown key is a slip of YAML flow syntax: "{description: a, b}" makes "b" a key.
        assert set(o) <= OPTION_KEYS, f"option {name}: unknown {set(o) - OPTION_KEYS}"
        said[name] = {
            "type": o["type"],
            "required": o.get("required", False),
            "default": o.get("default"),
            "choices": o.get("choices"),
            "elements": o.get("elements"),
            "no_log": "C(no_log)" in text,
            "suboptions": from_doc(o["suboptions"]) if "suboptions" in o else None,
        }
    return said


def dict_keys(path: Path, func: ast.AST, name: str) -> set[str]:
    """Keys of the dict that ``name`` holds inside ``func``: a dict literal or what a
    function (this file's, or module_utils') returns, plus its update()s, less its pop()s."""
    keys: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            keys |= value_keys(path, node.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            on = node.func.value
            if isinstance(on, ast.Name) and on.id == name and node.func.attr == "update":
                keys |= {k.arg for k in node.keywords if k.arg}
    popped = {
        n.args[0].value
        for n in ast.walk(func)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "pop"
        and getattr(n.func.value, "id", None) == name
        and n.args
        and isinstance(n.args[0], ast.Constant)
    }
    return keys - popped


def value_keys(path: Path, node: ast.expr) -> set[str]:
    if isinstance(node, ast.Dict):  # its keys, and those of each dict spread into it (**)
        spread = {
            k
            for key, v in zip(node.keys, node.values, strict=True)
            if key is None
            for k in value_keys(path, v)
        }
        return {k.value for k in node.keys if isinstance(k, ast.Constant)} | spread
    if isinstance(node, ast.IfExp):
        return value_keys(path, node.body) | value_keys(path, node.orelse)
    if not isinstance(node, ast.Call):
        return set()
    if isinstance(node.func, ast.Name):
        where, fname = path, node.func.id
    elif isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
        where, fname = MODULE_UTILS / f"{node.func.value.id}.py", node.func.attr
        if not where.exists():
            return set()
    else:
        return set()
    funcs = [f for f in tree(where).body if isinstance(f, ast.FunctionDef) and f.name == fname]
    return {
        key
        for f in funcs
        for r in ast.walk(f)
        if isinstance(r, ast.Return) and r.value is not None
        for key in value_keys(where, r.value)
    }


def returned(name: str) -> set[str]:
    """The result keys the module's code hands back, as far as the source shows them:
    exit_json's and fail_json's keywords (fail_json's msg is ansible's own) and the keys
    of the dicts spread into them."""
    path = source(name)
    keys: set[str] = set()
    for func in (f for f in tree(path).body if isinstance(f, ast.FunctionDef)):
        for call in ast.walk(func):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
                continue
            if call.func.attr not in ("exit_json", "fail_json"):
                continue
            for kw in call.keywords:
                if kw.arg is None and isinstance(kw.value, ast.Name):
                    keys |= dict_keys(path, func, kw.value.id)
                elif kw.arg and (kw.arg != "msg" or call.func.attr == "exit_json"):
                    keys.add(kw.arg)
    return keys - COMMON


def ansible_doc(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_DEPRECATION_WARNINGS": "1"}
    return subprocess.run(
        [str(Path(sys.executable).parent / "ansible-doc"), "-M", str(LIBRARY), *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def docs() -> dict[str, Any]:
    """ansible-doc --json of every module, in one run."""
    done = ansible_doc("--json", *MODULES)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_library_has_the_modules_the_plays_use():
    assert {"fleetperf_preflight", "fleetperf_launch", "fleetperf_tail", "fleetperf_stop"} <= set(
        MODULES
    )


@pytest.mark.parametrize("name", MODULES)
def test_the_doc_blocks_are_yaml_of_the_expected_shape(name: str):
    doc, examples, ret = (blocks(name)[b] for b in BLOCKS)
    assert doc["module"] == name
    assert doc["short_description"] and doc["description"] and doc["author"]
    assert isinstance(examples, list) and examples, "EXAMPLES: a list of tasks"
    assert isinstance(ret, dict) and ret, "RETURN: a mapping of result keys"
    for key, entry in ret.items():
        missing = {"description", "returned", "type"} - set(entry)
        assert not missing, f"RETURN {key}: no {', '.join(sorted(missing))}"


@pytest.mark.parametrize("name", MODULES)
def test_documentation_options_are_the_argument_spec(name: str, docs: dict[str, Any]):
    doc = docs[name]["doc"]
    assert from_doc(doc["options"]) == from_spec(argument_spec(name))
    # ansible-doc's reading of the block is the block: nothing lost to YAML flow syntax.
    assert doc["options"] == blocks(name)["DOCUMENTATION"]["options"]


@pytest.mark.parametrize("name", MODULES)
def test_check_mode_support_is_the_modules(name: str, docs: dict[str, Any]):
    call = ansible_module_call(name)
    supports = "supports_check_mode" in call and ast.literal_eval(call["supports_check_mode"])
    attributes = docs[name]["doc"]["attributes"]
    assert attributes["check_mode"]["support"] == ("full" if supports else "none")


@pytest.mark.parametrize("name", MODULES)
def test_return_lists_every_key_the_module_returns(name: str, docs: dict[str, Any]):
    assert set(docs[name]["return"]) - COMMON == returned(name)


@pytest.mark.parametrize("name", MODULES)
def test_examples_call_the_module_with_its_options(name: str):
    options = argument_spec(name)
    required = {o for o, s in options.items() if s.get("required")}
    tasks = blocks(name)["EXAMPLES"]
    assert all(t.get("name") for t in tasks), "an example without a name"
    calls = [t for t in tasks if name in t]
    assert calls, f"no example calls {name}"
    for task in calls:
        args = task[name]
        assert set(args) <= set(options), f"{task['name']}: unknown {set(args) - set(options)}"
        assert required <= set(args), f"{task['name']}: without {required - set(args)}"


def test_ansible_doc_renders_every_module():
    done = ansible_doc(*MODULES)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
    for name in MODULES:
        assert f"> MODULE {name} " in done.stdout
        assert "EXAMPLES:" in done.stdout.split(f"> MODULE {name} ")[1]
        assert "RETURN VALUES:" in done.stdout.split(f"> MODULE {name} ")[1]


def test_the_static_reading_finds_what_a_module_returns():
    """The reader of the code side, on modules whose results are known."""
    assert returned("fleetperf_stop") == {"msg", "signal", "removed", "released"}
    assert returned("fleetperf_launch") == {"pid", "msg", "container", "image", "image_id"}
    assert from_spec(argument_spec("fleetperf_launch"))["env"]["no_log"] is True
    assert "mounts_ro" in from_spec(argument_spec("fleetperf_launch"))["container"]["suboptions"]
