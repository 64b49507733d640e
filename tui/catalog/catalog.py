"""Cases and vendor configs on disk -> typed, validated objects.

case.yaml is read by the harness's reader (cases/harness/case.py: the one schema, which the
workload reads too); the catalog adds what only the controller knows: the report's
columns, a smoke run's timed config, the vendor configs (their overrides, env and published
references) and the run a case and a config make. Layering of hyperparameters: case
defaults < vendor config < ``--set``. A case lists the keys that may be overridden;
anything else is refused. Every error names the file (or ``--set``) and the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from harness.case import MODEL_METRICS, CaseFile, case_file
from harness.errors import InputError
from harness.vendors import precision_problem
from harness.yamlfile import NumberError, did_you_mean, read_mapping, yaml_load
from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from tui.catalog.configenv import check_env
from tui.catalog.metrics import column_key
from tui.catalog.published import Reference, parse_references
from tui.core.errors import CatalogError
from tui.core.paths import CASES_DIR, REPO_ROOT
from tui.core.text import clean_tree

# CHIPxNNODESxNPROC, and -VARIANT for a second seed row on the same hardware (A100x1x8-bs96).
CONFIG_NAME = re.compile(  # fullmatch: "$" would let a final newline in
    r"(?P<chip>[A-Za-z0-9_.-]+?)x(?P<nnodes>\d+)x(?P<nproc>\d+)(?:-(?P<variant>[a-z0-9]+))?"
)
VENDOR = re.compile(r"[a-z0-9][a-z0-9_-]*")  # a directory under a case's configs/


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class VendorConfig(_Strict):
    """``cases/<case>/configs/<vendor>/<CHIP>x<NNODES>x<NPROC>[-<VARIANT>].yaml``."""

    vendor: str
    chip: str
    nnodes: PositiveInt
    nproc_per_node: PositiveInt
    variant: str = ""
    overrides: dict[str, Any] = Field(default_factory=dict)
    # Published figures for this hardware (tui/results/references.py, docs/references.md).
    references: list[Reference] = Field(default_factory=list)
    # Environment variables for the workload (vendor settings such as Kunlunxin's FC
    # autotune file), as written: "{data_dir}" is replaced on each host by the plays.
    env: dict[str, str] = Field(default_factory=dict)
    path: Path

    @property
    def name(self) -> str:
        tail = f"-{self.variant}" if self.variant else ""
        return f"{self.chip}x{self.nnodes}x{self.nproc_per_node}{tail}"

    @property
    def ref(self) -> str:
        return f"{self.vendor}/{self.name}"


class RunSpec(_Strict):
    """One case on one config with every hyperparameter resolved."""

    case: CaseFile
    config: VendorConfig
    hp: dict[str, Any]
    fix_hp: dict[str, Any]
    smoke: bool = False  # --smoke: case.yaml's smoke.hp applied; no target, not judged
    # What --set and --smoke gave: shown in seed_fix_hp even where they are run settings,
    # so a capped run (max_samples) never reads as a full one (issue 41 point 3).
    given: dict[str, Any] = {}

    @property
    def precision(self) -> str:
        return str(self.hp.get("precision", "fp32"))

    @property
    def seed_fix_hp(self) -> dict[str, Any]:
        """The overrides the seeds' fix_hp column shows: none of the case's harness run
        settings, and precision only where the table has no precision column (seed 003's
        fix_hp shows "数据精度=fp16"; the record has its own precision field too)."""
        in_column = "precision" in self.case.report
        hidden = {*(["precision"] if in_column else []), *self.case.settings}
        shown = {k: self.hp[k] for k in self.case.fix_hp_shows}
        configured = {**self.case.defaults, **self.config.overrides}
        given = {
            k: self.hp[k]
            for k in self.given
            if self.hp[k] != configured.get(k) and not (k == "precision" and in_column)
        }
        return {**shown, **{k: v for k, v in self.fix_hp.items() if k not in hidden}, **given}

    @property
    def world_size(self) -> int:
        return self.config.nnodes * self.config.nproc_per_node


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


@contextmanager
def _refused() -> Iterator[None]:
    """The harness reader's InputError as a CatalogError: the same one line."""
    try:
        yield
    except InputError as exc:
        raise CatalogError(str(exc)) from None


def _read(path: Path) -> dict[str, Any]:
    # Cleaned (tui/core/text.py): a double-quoted "\ud800" is a lone surrogate, which no
    # record, store or terminal could encode.
    with _refused():
        return clean_tree(read_mapping(path, _rel(path)))


def case_names(cases_dir: Path = CASES_DIR) -> list[str]:
    return sorted(p.parent.name for p in cases_dir.glob("*/case.yaml"))


def load_case(name: str, cases_dir: Path = CASES_DIR) -> CaseFile:
    path = cases_dir / name / "case.yaml"
    if not path.is_file():
        known = ", ".join(case_names(cases_dir)) or "none"
        near = did_you_mean(name, case_names(cases_dir))
        raise CatalogError(f"unknown case {name!r}{near} (known: {known})")
    where = _rel(path)
    with _refused():
        case = case_file(_read(path), path.parent.resolve(), where)
    if case.name != name:
        raise CatalogError(f"{where}: name: {case.name!r} differs from the folder {name!r}")
    metrics = case.registry
    for i, spec in enumerate(case.report):
        try:
            key = column_key(spec, metrics)
        except ValueError as exc:
            raise CatalogError(f"{where}: report.{i}: {exc}") from None
        if case.kind == "base" and key in MODEL_METRICS:
            raise CatalogError(f"{where}: report.{i}: {spec}: a base case runs no model")
    measured = case.smoke and case.smoke.measured
    if measured and measured.config not in config_refs(case):
        near = did_you_mean(measured.config, config_refs(case))
        raise CatalogError(f"{where}: smoke.measured.config: no config {measured.config!r}{near}")
    return case


def config_refs(case: CaseFile) -> list[str]:
    """``vendor/CHIPxNxP`` for every config file of a case."""
    return sorted(f"{p.parent.name}/{p.stem}" for p in (case.dir / "configs").glob("*/*.yaml"))


def load_config(case: CaseFile, ref: str) -> VendorConfig:
    vendor, _, name = ref.partition("/")
    match = CONFIG_NAME.fullmatch(name)
    if not VENDOR.fullmatch(vendor) or not match:  # a vendor of ".." named another directory
        near = did_you_mean(ref, config_refs(case))
        raise CatalogError(
            f"config {ref!r}: expected VENDOR/CHIPxNNODESxNPROC[-VARIANT], e.g. cpu/CPUx1x1{near}"
        )
    path = case.dir / "configs" / vendor / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(config_refs(case)) or "none"
        near = did_you_mean(ref, config_refs(case))
        raise CatalogError(f"case {case.name}: no config {ref!r}{near} (known: {known})")
    where = _rel(path)
    data = _read(path)
    extra = sorted(set(data) - {"overrides", "references", "env"})
    if extra:
        raise CatalogError(
            f"{where}: {extra[0]}: unknown field (only 'overrides', 'references', 'env')"
        )
    overrides = data.get("overrides") or {}
    if not isinstance(overrides, dict):
        raise CatalogError(f"{where}: overrides: expected a mapping")
    with _refused():
        case.check_overrides(overrides, where, "overrides")
    precision = str(overrides.get("precision", case.defaults.get("precision", "fp32")))
    problem = precision_problem(vendor, precision, match["chip"])
    if problem:  # the config's own rows could never run: refused naming the file
        raise CatalogError(f"{where}: overrides.precision: {problem}")
    try:
        references = parse_references(data.get("references") or [], case.registry)
    except ValueError as exc:
        raise CatalogError(f"{where}: {exc}") from None
    with _refused():
        for i, reference in enumerate(references):
            case.check_overrides(reference.hp, where, f"references.{i}.hp")
    return VendorConfig(
        vendor=vendor,
        chip=match["chip"],
        nnodes=int(match["nnodes"]),
        nproc_per_node=int(match["nproc"]),
        variant=match["variant"] or "",
        overrides=overrides,
        references=references,
        env=check_env(where, data.get("env")),
        path=path,
    )


def parse_sets(pairs: list[str]) -> dict[str, Any]:
    """``key=value`` strings from the command line; values read as YAML scalars, a float
    only where it is finite as written (.nan, 1e400 and 1e-400 refused). ``a,b,c`` stays
    text here: ``resolve`` reads it as the list [a, b, c] for a key the case sweeps."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise CatalogError(f"--set {pair!r}: expected key=value")
        out[key.strip()] = _scalar(key.strip(), raw)
    return out


def _scalar(key: str, raw: str) -> Any:
    try:
        return clean_tree(yaml_load(raw)) if raw.strip() else ""
    except yaml.YAMLError:
        raise CatalogError(f"--set {key}: value {raw!r} is not a valid scalar") from None
    except NumberError as exc:
        field = ".".join(p for p in (key, exc.field) if p)
        raise CatalogError(f"--set {field}: {exc}") from None


def _swept(case: CaseFile, sets: dict[str, Any]) -> dict[str, Any]:
    """``sets`` with a comma-separated text for a key the case sweeps (case.yaml ``sweep``)
    read as the list of its points; any other key's text is left as it is (a comma may
    belong in it: an env digest, a path)."""
    return {
        key: [_scalar(key, part) for part in value.split(",")]
        if key in case.sweep and isinstance(value, str) and "," in value
        else value
        for key, value in sets.items()
    }


def resolve(
    case: CaseFile, config: VendorConfig, sets: dict[str, Any] | None = None, smoke: bool = False
) -> RunSpec:
    """The run's hyperparameters: case defaults < vendor config < case.yaml's smoke.hp (with
    ``smoke``) < ``--set``, so an operator can still change a smoke run's budget."""
    sets = _swept(case, sets or {})
    with _refused():
        case.check_overrides(sets, "--set")
    hp = {**case.defaults, **config.overrides, **smoke_hp(case, smoke), **sets}
    problem = precision_problem(config.vendor, str(hp.get("precision", "fp32")), config.chip)
    if problem:  # refused here, not after a launch that fails inside the workload
        raise CatalogError(f"{case.name} {config.ref}: {problem}")
    problem = case.process_problem(hp, config.nnodes * config.nproc_per_node)
    if problem:  # what the workload would refuse at start (case.yaml needs_two_processes)
        raise CatalogError(f"{_rel(config.path)}: {problem}")
    fix_hp = {k: v for k, v in hp.items() if v != case.defaults[k]}
    given = {**smoke_hp(case, smoke), **sets}
    return RunSpec(case=case, config=config, hp=hp, fix_hp=fix_hp, smoke=smoke, given=given)


def smoke_hp(case: CaseFile, smoke: bool) -> dict[str, Any]:
    """case.yaml's smoke overrides when ``smoke``; CatalogError for a case that has none."""
    if not smoke:
        return {}
    if case.smoke is None:
        raise CatalogError(f"--smoke: case {case.name} declares no smoke run (case.yaml smoke:)")
    return case.smoke.hp
