"""What a case's workload imports from outside the standard library: one list, derived from
the code, for both executors.

The controller (tui/engine/session.py) checks it at plan time against the vendor image a docker
host runs (images/<vendor>/requirements.txt plus what the base image brings, see
``tui.catalog.images.BASE_PACKAGES``); for a process host, run.yml's preflight asks the host's
workload interpreter to find each module (playbooks/library/fleetperf_preflight.py).

The list follows the workload's own imports: from the case's entrypoint through the case's
modules (``cases/<case>/<name>.py``) and the harness modules they import (``harness``,
``harness.x``), every ``import`` statement at any depth (functions included: a late import
still runs), except under ``if TYPE_CHECKING:``. ``prepare.py`` runs on the controller, so
only what the entrypoint reaches counts. Standard library only: no torch.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
import re
import sys
import threading
from pathlib import Path

from tui.core import usercache

# Import names whose distribution has another name (the rest are their own distribution).
# tests/unit/test_case_imports.py checks each against the installed packages' metadata.
DISTRIBUTIONS = {
    "yaml": "pyyaml",
    "pynvml": "nvidia-ml-py",
}
# Imports the workload copes without, and why; not required of an image or a host.
OPTIONAL = {
    "pynvml": "harness/nvml.py: NVML readings (utilisation, power, memory) where the driver "
    "has them, null without",
}
# CPython before 3.11.8 and 3.12.1 shares ast's recursion depth between threads: two runs
# of a batch parsing at once failed with "AST constructor recursion depth mismatch".
_PARSE = threading.Lock()


def normalize(distribution: str) -> str:
    """PEP 503's form of a distribution name: ``PyYAML`` and ``pyyaml`` are one."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


def distribution(module: str) -> str:
    """The distribution (normalized) that provides top-level ``module``."""
    return normalize(DISTRIBUTIONS.get(module, module))


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(tree: ast.AST, package: str | None) -> list[str]:
    """Dotted names ``tree`` imports at run time (``from a import b`` gives ``a`` and
    ``a.b``: b may be a submodule); relative imports resolved against ``package``."""
    names: list[str] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            todo.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = (package or "").split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            names.append(base)
            names += [f"{base}.{a.name}" for a in node.names if a.name != "*"]
        todo.extend(ast.iter_child_nodes(node))
    return names


def _scan(case_dir: Path, entrypoint: str, harness: Path) -> tuple[dict[str, list[str]], set[Path]]:
    """``workload_imports``'s answer, and the files it read."""
    found: dict[str, set[str]] = {}
    seen: set[Path] = set()
    todo: list[tuple[Path, str | None]] = [(case_dir / entrypoint, None)]
    while todo:
        path, package = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        where = path.relative_to((harness if package else case_dir).parent).as_posix()
        with _PARSE:
            tree = ast.parse(path.read_bytes(), str(path))
        for name in _imported(tree, package):
            top = name.split(".")[0]
            if top == harness.name:
                # harness.a.b: the package's __init__ and each module file on the way
                parts = name.split(".")
                for i in range(1, len(parts) + 1):
                    stem = harness.parent.joinpath(*parts[:i])
                    if (stem / "__init__.py").is_file():
                        todo.append((stem / "__init__.py", ".".join(parts[:i])))
                    elif stem.with_suffix(".py").is_file():
                        todo.append((stem.with_suffix(".py"), ".".join(parts[: i - 1])))
            elif (case_dir / f"{top}.py").is_file():
                todo.append((case_dir / f"{top}.py", None))
            elif top and top not in sys.stdlib_module_names:
                found.setdefault(top, set()).add(where)
    return {m: sorted(files) for m, files in sorted(found.items())}, seen


def _stats(paths: list[str]) -> list[list[int]] | None:
    """Each path's (size, mtime_ns); None where one is gone."""
    try:
        return [[(st := os.stat(p)).st_size, st.st_mtime_ns] for p in paths]
    except OSError:
        return None


def workload_imports(case_dir: Path, entrypoint: str, harness: Path) -> dict[str, list[str]]:
    """Top-level third-party modules the workload imports -> the files that import them
    (relative to the case's or the harness's parent), standard library, the case's own
    modules and the harness (``harness``: the harness package's directory) left out.

    The answer is kept in the user's cache (tui/core/usercache.py) with the (path, size,
    mtime_ns) of the files read and of their directories (a module added beside them
    changes what an import resolves to), and used while those stay the same: parsing the
    case and the harness cost every run 0.06-0.09 CPU-s (issue 33)."""
    where = [str(case_dir.resolve()), entrypoint, str(harness.resolve()), sys.version]
    key = hashlib.sha256(json.dumps(where).encode()).hexdigest()
    kept = usercache.read("imports", key)
    with contextlib.suppress(KeyError, TypeError, ValueError):
        if _stats(kept["paths"]) == kept["stats"]:
            return {str(m): [str(f) for f in files] for m, files in kept["imports"].items()}
    imports, read = _scan(case_dir, entrypoint, harness)
    paths = sorted({str(p) for p in read} | {str(p.parent) for p in read} | {str(case_dir)})
    usercache.write("imports", key, {"paths": paths, "stats": _stats(paths), "imports": imports})
    return imports


def required(case_dir: Path, entrypoint: str, harness: Path) -> dict[str, list[str]]:
    """``workload_imports`` without the OPTIONAL modules: what a runtime must provide."""
    imports = workload_imports(case_dir, entrypoint, harness)
    return {m: files for m, files in imports.items() if m not in OPTIONAL}


def lacking(imports: dict[str, list[str]], provided: set[str]) -> dict[str, list[str]]:
    """The distributions of ``imports`` not among ``provided`` (normalized names) -> the
    modules that need them."""
    missing: dict[str, list[str]] = {}
    for module in imports:
        dist = distribution(module)
        if dist not in provided:
            missing.setdefault(dist, []).append(module)
    return missing
