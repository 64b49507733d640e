"""Every vendor image holds what the cases it may run import (tui/catalog/caseimports.py, derived
from the code; images/<vendor>/requirements.txt plus tui.catalog.images.BASE_PACKAGES), no image
build needed; and the controller refuses, at plan time, a docker host whose image lacks one."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from conftest import REPO, Fleetperf
from hostmodules import preflight

from tui.catalog import caseimports, catalog, images
from tui.core.errors import CatalogError
from tui.engine.session import Session
from tui.executors import direct

VENDORS = sorted(p.parent.name for p in (REPO / "images").glob("*/Dockerfile"))
CASES = [catalog.load_case(name) for name in catalog.case_names()]
# (case, vendor): the case has configs for the vendor, so its hosts may run it.
RUNS = [(c, v) for c in CASES for v in VENDORS if (c.dir / "configs" / v).is_dir()]


@pytest.mark.parametrize(("case", "vendor"), RUNS, ids=[f"{c.name}-{v}" for c, v in RUNS])
def test_each_vendor_image_holds_what_its_cases_import(case, vendor):
    assert images.lacks(vendor, case.dir, case.entrypoint) is None


def test_every_vendor_with_an_image_declares_its_base():
    assert sorted(images.BASE_PACKAGES) == VENDORS
    for vendor in VENDORS:  # a base package pinned again would replace the vendor's build
        lines = (REPO / "images" / vendor / "requirements.txt").read_text().splitlines()
        pinned = {caseimports.normalize(ln.split("==")[0]) for ln in lines if "==" in ln}
        assert not pinned & set(images.BASE_PACKAGES[vendor]), vendor


def test_import_names_map_to_the_distributions_that_provide_them():
    """The table's names (and the identity for the rest) are what the installed packages'
    metadata says; a case importing a name installed nowhere here fails until it is mapped."""
    installed = metadata.packages_distributions()
    modules = {
        m for c in CASES for m in caseimports.workload_imports(c.dir, c.entrypoint, images.HARNESS)
    }
    assert {"torch", "transformers", "peft", "deepspeed", "yaml", "pynvml"} <= modules
    for module in sorted(modules):
        assert module in installed, f"{module}: not installed here; map it in DISTRIBUTIONS"
        dists = {caseimports.normalize(d) for d in installed[module]}
        assert caseimports.distribution(module) in dists, module


def test_the_imports_follow_the_workload_not_prepare(tmp_path):
    harness = tmp_path / "cases" / "harness"
    (harness / "sub").mkdir(parents=True)
    (harness / "__init__.py").write_text("from harness.core import x\nimport json\n")
    (harness / "core.py").write_text("from . import sub\nx = 1\n")
    (harness / "sub" / "__init__.py").write_text("def f():\n    import pkg_late.deep\n")
    (harness / "unused.py").write_text("import pkg_unused\n")
    case = tmp_path / "cases" / "demo"
    case.mkdir()
    (case / "run.py").write_text(
        "import os, helper\n"
        "from typing import TYPE_CHECKING\n"
        "import harness\n"
        "if TYPE_CHECKING:\n    import pkg_typing\nelse:\n    import pkg_else\n"
        "try:\n    import pkg_guarded\nexcept ImportError:\n    pass\n"
    )
    (case / "helper.py").write_text("from pkg_a.b import c\nimport helper\n")
    (case / "prepare.py").write_text("import pkg_prepare\n")
    assert caseimports.workload_imports(case, "run.py", harness) == {
        "pkg_a": ["demo/helper.py"],
        "pkg_else": ["demo/run.py"],
        "pkg_guarded": ["demo/run.py"],
        "pkg_late": ["harness/sub/__init__.py"],
    }


def test_the_scan_is_kept_until_a_file_it_read_or_a_directory_beside_them_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    harness = tmp_path / "harness"
    harness.mkdir()
    (harness / "__init__.py").write_text("import pkg_h\n")
    case = tmp_path / "cases" / "demo"
    case.mkdir(parents=True)
    (case / "run.py").write_text("import harness, pkg_a, helper\n")
    assert caseimports.workload_imports(case, "run.py", harness) == {
        "helper": ["demo/run.py"],
        "pkg_a": ["demo/run.py"],
        "pkg_h": ["harness/__init__.py"],
    }
    (kept,) = (tmp_path / "cache" / "fleetperf").glob("imports-*.json")
    assert kept.stat().st_mode & 0o777 == 0o600
    # The kept answer is what the next scan returns (marked here to tell it from a new one).
    entry = json.loads(kept.read_text())
    entry["imports"]["pkg_marker"] = ["demo/run.py"]
    kept.write_text(json.dumps(entry))
    assert "pkg_marker" in caseimports.workload_imports(case, "run.py", harness)
    # A case module added beside run.py: helper is the case's own now, scanned anew.
    (case / "helper.py").write_text("import pkg_b\n")
    assert caseimports.workload_imports(case, "run.py", harness) == {
        "pkg_a": ["demo/run.py"],
        "pkg_b": ["demo/helper.py"],
        "pkg_h": ["harness/__init__.py"],
    }
    # An edit of a file read (its size changes) is scanned anew; a damaged entry too.
    (harness / "__init__.py").write_text("import pkg_h2\n")
    assert "pkg_h2" in caseimports.workload_imports(case, "run.py", harness)
    kept.write_text('{"paths": ')
    assert "pkg_h2" in caseimports.workload_imports(case, "run.py", harness)


def test_optional_imports_are_not_required():
    imports = {"pynvml": ["harness/nvml.py"], "torch": ["run.py"]}
    assert caseimports.required.__doc__ and "pynvml" in caseimports.OPTIONAL
    assert caseimports.lacking(imports, {"torch"}) == {"nvidia-ml-py": ["pynvml"]}
    case = next(c for c in CASES if c.name == "distilbert-pytorch")
    assert "pynvml" in caseimports.workload_imports(case.dir, case.entrypoint, images.HARNESS)
    assert "pynvml" not in caseimports.required(case.dir, case.entrypoint, images.HARNESS)


# --- the controller refuses before anything starts --------------------------------------


def docker_inventory(tmp: Path) -> Path:
    path = tmp / "inventory.yml"
    path.write_text(
        "all:\n  children:\n    cpu:\n      hosts:\n        box1:\n"
        "          ansible_connection: local\n          fleetperf_executor: docker\n"
    )
    return path


@pytest.fixture
def old_images(tmp_path, monkeypatch):
    """images/ with the cpu requirements as they were before peft and deepspeed."""
    shutil.copytree(images.IMAGES, tmp_path / "images")
    req = tmp_path / "images" / "cpu" / "requirements.txt"
    keep = [ln for ln in req.read_text().splitlines() if not ln.startswith(("peft", "deepspeed"))]
    req.write_text("\n".join(keep) + "\n")
    monkeypatch.setattr(images, "IMAGES", tmp_path / "images")


def test_a_docker_host_whose_image_lacks_an_import_is_refused_at_plan(tmp_path, old_images):
    s = Session(docker_inventory(tmp_path), tmp_path / "results", tmp_path / "data")
    try:
        with pytest.raises(CatalogError) as err:
            s.plan([("llama2_7b_finetune-pytorch", "cpu/CPUx1x1")])
        assert s.plan([("distilbert-pytorch", "cpu/CPUx1x1")])  # holds what this one imports
    finally:
        s.close()
    assert str(err.value) == (
        "llama2_7b_finetune-pytorch cpu/CPUx1x1: images/cpu/requirements.txt lacks peft "
        "(import peft in llama2_7b_finetune-pytorch/run.py), which the case imports and the "
        "cpu base image does not bring: pin each there (name==version), rebuild the image"
    )
    assert not (tmp_path / "results" / "runs").exists()


def test_a_process_host_is_not_judged_by_the_image(tmp_path, old_images):
    """A process host runs the host's Python: its own check is in the preflight."""
    s = Session(REPO / "inventory" / "local.yml", tmp_path / "results", tmp_path / "data")
    try:
        assert s.plan([("llama2_7b_finetune-pytorch", "cpu/CPUx1x1")])
    finally:
        s.close()


# --- a process host: the preflight asks the workload's Python ----------------------------


def test_preflight_refuses_a_python_that_cannot_import_the_case(tmp_path):
    case = next(c for c in CASES if c.name == "llama2_7b_finetune-pytorch")
    imports = {
        m: caseimports.distribution(m)
        for m in caseimports.required(case.dir, case.entrypoint, images.HARNESS)
    }
    ok, _ = preflight(tmp_path, run_id="ok", python=sys.executable, imports=imports)
    assert not ok.get("failed"), ok  # this venv has peft, deepspeed, ...
    # A venv of the system Python: the standard library, no torch, no peft.
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    res, _ = preflight(
        tmp_path, run_id="bare", python=str(bare / "bin" / "python"), imports=imports
    )
    assert res["failed"]
    assert res["msg"] == (
        f"host h1: {bare}/bin/python cannot import peft, psutil, torch, transformers, yaml, "
        "which case imports: install peft, psutil, pyyaml, torch, transformers for it "
        "(fleetperf_python)"
    )
    assert not (tmp_path / "runs" / "bare").exists()  # refused before the run dir
    gone, _ = preflight(tmp_path, run_id="gone", python=str(tmp_path / "nope"), imports=imports)
    assert gone["failed"] and gone["msg"].startswith(f"host h1: workload python {tmp_path}/nope: ")


def test_the_controllers_own_python_is_asked_in_process_and_refuses_the_same(monkeypatch):
    """The direct executor's preflight (the controller's own interpreter): modules found
    here start no interpreter; one missing is asked of the interpreter, as from a host."""
    steps = direct.hostside("fleetperf_preflight_step")
    assert steps.unimportable(sys.executable, ["yaml", "jinja2"]) == ([], None)
    asked = steps.unimportable(sys.executable, ["yaml", "fleetperf_no_such_module"])
    assert asked == (["fleetperf_no_such_module"], None)
    monkeypatch.setattr(steps.subprocess, "run", None)  # any interpreter start fails now
    assert steps.unimportable(sys.executable, ["yaml", "jinja2"]) == ([], None)


def test_the_controller_passes_the_derived_imports_to_the_plays(tmp_path):
    s = Session(REPO / "inventory" / "local.yml", tmp_path / "results", tmp_path / "data")
    try:
        (plan,) = s.plan([("llama2_7b-deepspeed", "cpu/CPUx1x2")])
        extra = s._launch(plan).extravars()
    finally:
        s.close()
    assert extra["fleetperf_imports"] == {
        "deepspeed": "deepspeed",
        "numpy": "numpy",
        "psutil": "psutil",
        "torch": "torch",
        "transformers": "transformers",
        "yaml": "pyyaml",
    }


@pytest.mark.slow  # a real preflight play
def test_a_process_host_whose_python_lacks_an_import_is_refused_by_the_play(tmp_path):
    """Through the real run.yml: nothing is launched, exit 2, the host and modules named."""
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    host = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "fleetperf_executor": "process",
        "fleetperf_repo_dir": str(REPO),
        "fleetperf_python": str(bare / "bin" / "python"),
        "fleetperf_data_root": str(tmp_path / "data"),
        "fleetperf_run_root": str(tmp_path / "hosts" / "box1"),
    }
    inv = tmp_path / "hosts.yml"
    inv.write_text(yaml.safe_dump({"all": {"children": {"cpu": {"hosts": {"box1": host}}}}}))
    fp = Fleetperf(REPO / "cases", tmp_path / "data", tmp_path / "results")
    out = fp.batch("distilbert-pytorch", "cpu/CPUx1x1", args=("-i", str(inv)))
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    assert (
        f"host box1: {bare}/bin/python cannot import numpy, psutil, torch, transformers, yaml, "
        "which distilbert-pytorch imports: install numpy, psutil, pyyaml, torch, transformers "
        "for it (fleetperf_python)"
    ) in out.stdout + out.stderr
    assert not list((tmp_path / "hosts" / "box1").glob("distilbert*"))  # no run dir
