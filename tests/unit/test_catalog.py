"""The catalog: layering, the overridable list, and errors that name file and field."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tui.catalog import catalog
from tui.catalog.catalog import CatalogError
from tui.core import paths


@pytest.fixture
def cases(tmp_path: Path) -> Path:
    shutil.copytree(
        paths.HARNESS_DIR / "distilbert-pytorch",
        tmp_path / "distilbert-pytorch",
        ignore=shutil.ignore_patterns("*.py", "__pycache__"),
    )
    return tmp_path


def write_config(cases: Path, name: str, text: str) -> Path:
    path = cases / "distilbert-pytorch" / "configs" / "cpu" / f"{name}.yaml"
    path.write_text(text)
    return path


def test_every_shipped_config_resolves() -> None:
    for name in catalog.case_names():
        case = catalog.load_case(name)
        refs = catalog.config_refs(case)
        assert refs, name
        for ref in refs:
            spec = catalog.resolve(case, catalog.load_config(case, ref))
            assert spec.world_size >= 1


def test_seed_rows_of_distilbert() -> None:
    case = catalog.load_case("distilbert-pytorch")
    one = catalog.resolve(case, catalog.load_config(case, "nvidia/A100x1x1"))
    # The seed's "fp32" rows ran TF32 (issue 19): they run tf32; the precision column, not
    # fix_hp, shows it, as in the seed.
    # FlagPerf's config_A100x1x1.py also accumulates 8 batches (issue 27 point 3): a run
    # setting, kept in hp and fix_hp, not in the seed's fix_hp column
    assert one.fix_hp == {
        "precision": "tf32",
        "train_batch_size": 96,
        "learning_rate": 0.00015,
        "gradient_accumulation_steps": 8,
    }
    assert one.seed_fix_hp == {"train_batch_size": 96, "learning_rate": 0.00015}
    assert (one.config.chip, one.config.nnodes, one.config.nproc_per_node) == ("A100", 1, 1)
    eight = catalog.resolve(case, catalog.load_config(case, "nvidia/A100x1x8"))
    assert eight.seed_fix_hp == {} and eight.world_size == 8
    two = catalog.resolve(case, catalog.load_config(case, "nvidia/A100x2x8"))
    assert two.seed_fix_hp == {"train_batch_size": 96} and two.world_size == 16
    for spec in (one, eight, two):
        assert spec.precision == "tf32"
    strict = catalog.resolve(
        case, catalog.load_config(case, "nvidia/A100x1x1"), {"precision": "fp32"}
    )
    assert strict.precision == "fp32" and "precision" not in strict.fix_hp


def test_tf32_is_accepted_where_the_vendor_and_chip_have_it(cases: Path) -> None:
    """One precision list (harness.vendors); tf32 on NVIDIA Ampere and later only: refused
    on the CPU and on a V100 in one line naming where it came from, before any launch."""
    from harness.case import SHARED
    from harness.vendors import PRECISIONS, PRECISIONS_BY_VENDOR

    assert SHARED["precision"].choices is PRECISIONS
    assert {p for ps in PRECISIONS_BY_VENDOR.values() for p in ps} == set(PRECISIONS)
    case = catalog.load_case("distilbert-pytorch", cases)
    a100 = catalog.load_config(case, "nvidia/A100x1x1")
    assert catalog.resolve(case, a100, {"precision": "tf32"}).precision == "tf32"
    cpu = catalog.load_config(case, "cpu/CPUx1x1")
    with pytest.raises(catalog.CatalogError) as err:
        catalog.resolve(case, cpu, catalog.parse_sets(["precision=tf32"]))
    assert str(err.value) == (
        "distilbert-pytorch cpu/CPUx1x1: precision 'tf32' is not available on vendor 'cpu';"
        " it has fp32, bf16"
    )
    volta = cases / "distilbert-pytorch" / "configs" / "nvidia" / "V100x1x1.yaml"
    volta.write_text("overrides: {precision: tf32}\n")
    with pytest.raises(catalog.CatalogError) as err:
        catalog.load_config(case, "nvidia/V100x1x1")
    assert str(err.value).endswith(
        "V100x1x1.yaml: overrides.precision: precision 'tf32' is not available on chip"
        " 'V100': TF32 needs an NVIDIA Ampere or later GPU (compute capability 8.0)"
    )
    volta.write_text("overrides: {}\n")
    v100 = catalog.load_config(case, "nvidia/V100x1x1")
    with pytest.raises(catalog.CatalogError, match="not available on chip 'V100'"):
        catalog.resolve(case, v100, {"precision": "tf32"})
    assert catalog.resolve(case, v100, {"precision": "amp"}).precision == "amp"


def test_layering_defaults_config_set(cases: Path) -> None:
    write_config(cases, "CPUx1x4", "overrides: {train_batch_size: 8, learning_rate: 1e-4}\n")
    case = catalog.load_case("distilbert-pytorch", cases)
    config = catalog.load_config(case, "cpu/CPUx1x4")
    spec = catalog.resolve(case, config, catalog.parse_sets(["train_batch_size=4"]))
    assert spec.hp["train_batch_size"] == 4  # --set wins
    assert spec.hp["learning_rate"] == pytest.approx(1e-4)  # config wins over default
    assert spec.hp["eval_batch_size"] == case.defaults["eval_batch_size"]
    assert spec.fix_hp == {"train_batch_size": 4, "learning_rate": 1e-4}


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            "overrides: {train_batch_size: -1}\n",
            "overrides.train_batch_size: must be at least 1 (got -1)",
        ),
        (
            "overrides: {seed: 7}\n",
            "overrides.seed: case distilbert-pytorch does not allow overriding it",
        ),
        (
            "overrides: {no_such_key: 1}\n",
            "overrides.no_such_key: case distilbert-pytorch has no such hyperparameter",
        ),
        ("overrides: {learning_rate: fast}\n", "overrides.learning_rate: expected float"),
        ("overrides: {train_batch_size: 2.5}\n", "overrides.train_batch_size: expected int"),
        ("overrides: {precision: fp8}\n", "overrides.precision: expected one of fp32, tf32,"),
        ("hp: {}\n", "hp: unknown field"),
        ("overrides: [1, 2]\n", "overrides: expected a mapping"),
        ("overrides: {a: [\n", "not valid YAML"),
    ],
)
def test_bad_config_names_file_and_field(cases: Path, text: str, needle: str) -> None:
    write_config(cases, "CPUx1x3", text)
    case = catalog.load_case("distilbert-pytorch", cases)
    with pytest.raises(CatalogError) as err:
        catalog.load_config(case, "cpu/CPUx1x3")
    message = str(err.value)
    assert "distilbert-pytorch/configs/cpu/CPUx1x3.yaml" in message
    assert needle in message
    assert "\n" not in message


def test_bad_sets_and_names() -> None:
    case = catalog.load_case("distilbert-pytorch")
    config = catalog.load_config(case, "cpu/CPUx1x1")
    with pytest.raises(CatalogError, match=r"^--set: train_batch_size: must be at least 1"):
        catalog.resolve(case, config, catalog.parse_sets(["train_batch_size=-1"]))
    with pytest.raises(CatalogError, match=r"^--set: seed: .*does not allow"):
        catalog.resolve(case, config, catalog.parse_sets(["seed=1"]))
    with pytest.raises(CatalogError, match="expected key=value"):
        catalog.parse_sets(["train_batch_size"])
    with pytest.raises(CatalogError, match=r"unknown case 'nope' \(known: .*distilbert-pytorch"):
        catalog.load_case("nope")
    with pytest.raises(CatalogError, match="no config 'cpu/CPUx9x9'"):
        catalog.load_config(case, "cpu/CPUx9x9")
    with pytest.raises(CatalogError, match="expected VENDOR/CHIPxNNODESxNPROC"):
        catalog.load_config(case, "A100x1x8")


@pytest.mark.parametrize("ref", ["cpu/CPUx1x1\n", "cpu\n/CPUx1x1", "../CPUx1x1", "./CPUx1x1"])
def test_a_config_ref_is_a_plain_vendor_and_name(cases: Path, ref: str) -> None:
    """A final newline passed the name's "$"; a vendor of ".." read configs/../NAME.yaml."""
    (cases / "distilbert-pytorch" / "CPUx1x1.yaml").write_text("overrides: {}\n")
    case = catalog.load_case("distilbert-pytorch", cases)
    with pytest.raises(CatalogError, match="expected VENDOR/CHIPxNNODESxNPROC"):
        catalog.load_config(case, ref)


def test_scientific_notation_is_a_float() -> None:
    assert catalog.parse_sets(["learning_rate=1e-4"]) == {"learning_rate": 1e-4}


def test_case_yaml_errors_name_the_file(cases: Path) -> None:
    path = cases / "distilbert-pytorch" / "case.yaml"
    path.write_text(path.read_text().replace("kind: training", "kind: dancing"))
    with pytest.raises(CatalogError) as err:
        catalog.load_case("distilbert-pytorch", cases)
    assert str(err.value).endswith(
        "distilbert-pytorch/case.yaml: kind: expected one of training, inference, base"
        " (got 'dancing')"
    )


def test_a_base_case_s_report_names_no_model_figure(cases: Path) -> None:
    path = cases / "distilbert-pytorch" / "case.yaml"
    text = path.read_text().replace("kind: training", "kind: base")
    path.write_text("\n".join(ln for ln in text.splitlines() if not ln.startswith("target:")))
    with pytest.raises(CatalogError) as err:
        catalog.load_case("distilbert-pytorch", cases)
    assert "distilbert-pytorch/case.yaml: report.3: p_whole: a base case runs no model" in str(
        err.value
    )


def test_the_workload_and_the_catalog_read_case_yaml_alike() -> None:
    """One reader (harness.case): what the workload reads beside run.py is the case the
    catalog resolved the run from."""
    from harness.case import load_case_file

    for name in catalog.case_names():
        case = catalog.load_case(name)
        assert load_case_file(case.dir) == case, name


def test_overridable_key_needs_a_default(cases: Path) -> None:
    path = cases / "distilbert-pytorch" / "case.yaml"
    path.write_text(path.read_text().replace("  - num_workers\n", "  - num_workers\n  - ghost\n"))
    with pytest.raises(CatalogError, match="overridable: 'ghost' has no default"):
        catalog.load_case("distilbert-pytorch", cases)


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (
            ("report: [precision,", "report: [precision, speed,"),
            "report.1: unknown report column 'speed'",
        ),
        (
            ("report: [precision,", "report: [precision, speed(MMLU),"),
            "report.1: unknown report column",
        ),
        (
            (
                "defaults:",
                "metrics: [{name: acc, unit: '', higher_is_better: true, meaning: x}]\ndefaults:",
            ),
            "metrics: metric 'acc' is standard",
        ),
        (
            ("defaults:", "metrics: [{name: bleu, unit: ''}]\ndefaults:"),
            "metrics.0.higher_is_better: missing",
        ),
        (
            (
                "defaults:",
                "metrics: [{name: bleu, unit: '', higher_is_better: true, fmt: '%d',"
                " meaning: x}]\ndefaults:",
            ),
            "metrics.0.fmt",
        ),
        (("overridable:", "settings: [ghost]\noverridable:"), "settings: 'ghost' has no default"),
        (("name:", "colour: red\nname:"), "colour: unknown field"),
        (("kind: training", "kind: training\nstall_s: 0"), "stall_s: must be at least 1 (got 0)"),
        (("train_batch_size: 32 ", "train_batch_size: 0 "), "defaults.train_batch_size: must be"),
        (("learning_rate: 5.0e-5", "learning_rate: fast"), "defaults.learning_rate: expected f"),
        (("bounds:\n", "bounds:\n  ghost: {min: 1}\n"), "bounds.ghost: no such key in defaults"),
        (("{min: 1}", "{min: 1, step: 2}"), "bounds.gradient_accumulation_steps.step: unknown"),
        (("max_epoch: {min: 1}", "max_epoch: {min: 11}"), "defaults.max_epoch: must be at least"),
        (("max_epoch: 1}", "max_epoch: 0}"), "smoke.hp.max_epoch: must be at least 1 (got 0)"),
        (("smoke_s: 20", "smoke_s: 0"), "smoke.measured.smoke_s: must be above 0 (got 0)"),
    ],
)
def test_report_metrics_and_settings_are_checked_at_load(
    cases: Path, edit: tuple[str, str], needle: str
) -> None:
    path = cases / "distilbert-pytorch" / "case.yaml"
    path.write_text(path.read_text().replace(*edit, 1))
    with pytest.raises(CatalogError) as err:
        catalog.load_case("distilbert-pytorch", cases)
    assert str(err.value).startswith("distilbert-pytorch/case.yaml: ") or "case.yaml: " in str(
        err.value
    )
    assert needle in str(err.value), str(err.value)


def test_a_case_metric_reaches_the_record_and_the_table(cases: Path) -> None:
    from tui.results.record import RunRecord
    from tui.results.tables import to_csv, to_markdown

    path = cases / "distilbert-pytorch" / "case.yaml"
    text = path.read_text().replace(
        "defaults:",
        "metrics: [{name: bleu, unit: points, higher_is_better: true, fmt: '.2f',"
        " meaning: corpus BLEU}]\ndefaults:",
        1,
    )
    path.write_text(text.replace("report: [precision,", "report: [precision, bleu,", 1))
    case = catalog.load_case("distilbert-pytorch", cases)
    record = RunRecord(
        run_id="r-1",
        case=case.name,
        vendor="cpu",
        config="CPUx1x1",
        status="passed",
        started="2026-11-22T10:00:00Z",
        metrics={"bleu": 31.256, "p_core": 5.0},
        case_metrics=case.metrics,
        columns=case.report,
    )
    assert record.metrics["bleu"] == 31.256 and record.to_json_dict()["metrics"]["bleu"] == 31.256
    table = to_markdown([record])
    assert "| 配置 | precision | bleu |" in table
    assert "| CPU单机单卡（1x1） | / | 31.26 |" in table and "bleu: points" in table
    assert "bleu (points)" in to_csv([record]).splitlines()[0]


def test_fix_hp_shows_the_seeds_hyperparameters_not_run_settings() -> None:
    case = catalog.load_case("distilbert-pytorch")
    spec = catalog.resolve(case, catalog.load_config(case, "cpu/CPUx1x1"))
    assert not {"max_samples", "log_every_steps", "precision", "seed"} & set(spec.seed_fix_hp)


def test_fix_hp_shows_what_the_command_line_set_run_settings_too() -> None:
    """Issue 41 point 3: a capped run (--set max_samples, or --smoke's) read as a full one."""
    case = catalog.load_case("distilbert-pytorch")
    config = catalog.load_config(case, "cpu/CPUx1x1")
    sets = catalog.parse_sets(["train_batch_size=8", "max_samples=640", "log_every_steps=1"])
    spec = catalog.resolve(case, config, sets)
    assert spec.seed_fix_hp["train_batch_size"] == 8
    assert spec.seed_fix_hp["max_samples"] == 640 and spec.seed_fix_hp["log_every_steps"] == 1
    assert "precision" not in spec.seed_fix_hp  # its own column
    smoke = catalog.resolve(case, config, smoke=True)
    assert smoke.seed_fix_hp["max_samples"] == smoke.hp["max_samples"] > 0
    # A value the config already has is no change: not shown.
    same = catalog.resolve(case, config, {"max_samples": spec.case.defaults["max_samples"]})
    assert "max_samples" not in same.seed_fix_hp


def test_invalid_yaml_names_the_line(cases: Path) -> None:
    write_config(cases, "CPUx1x3", "overrides:\n  seed: 1\n  lr: [1, 2\n  x: {\n")
    case = catalog.load_case("distilbert-pytorch", cases)
    with pytest.raises(CatalogError, match=r"CPUx1x3.yaml: line 4 not valid YAML$"):
        catalog.load_config(case, "cpu/CPUx1x3")


def test_run_limits_default_to_an_hour_and_a_quarter_hour_stall(cases: Path) -> None:
    """docs/workload-contract.md: a case that does not say is stopped after 3600 s, or after
    900 s without an event."""
    path = cases / "distilbert-pytorch" / "case.yaml"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(ln for ln in lines if not ln.startswith(("timeout_s", "stall_s"))))
    case = catalog.load_case("distilbert-pytorch", cases)
    assert (case.timeout_s, case.stall_s) == (3600, 900)


def test_warmup_steps_may_be_zero_not_negative(cases: Path) -> None:
    case = catalog.load_case("distilbert-pytorch", cases)
    config = catalog.load_config(case, "cpu/CPUx1x1")
    assert catalog.resolve(case, config, {"warmup_steps": 0}).hp["warmup_steps"] == 0
    with pytest.raises(CatalogError, match=r"warmup_steps: must be at least 0 \(got -1\)$"):
        catalog.resolve(case, config, {"warmup_steps": -1})


def _resolve(case_name: str, ref: str, **sets: object) -> catalog.RunSpec:
    case = catalog.load_case(case_name)
    return catalog.resolve(case, catalog.load_config(case, ref), sets)


@pytest.mark.parametrize(
    ("key", "ok", "refused", "says"),
    [
        ("target_acc", 1, 0, "target_acc: must be above 0 (got 0)"),
        ("target_acc", 0.5, 1.01, "target_acc: must be at most 1 (got 1.01)"),
        ("num_workers", 0, -1, "num_workers: must be at least 0 (got -1)"),
        ("warmup_steps", 0, -1, "warmup_steps: must be at least 0 (got -1)"),
        ("learning_rate", 1, True, "learning_rate: expected float like"),  # an int is a float
        ("train_batch_size", 1, True, "train_batch_size: expected int like"),
    ],
)
def test_shared_hyperparameter_bounds_at_their_edges(key, ok, refused, says) -> None:
    assert _resolve("distilbert-pytorch", "cpu/CPUx1x1", **{key: ok}).hp[key] == ok
    with pytest.raises(CatalogError) as err:
        _resolve("distilbert-pytorch", "cpu/CPUx1x1", **{key: refused})
    assert str(err.value).startswith(f"--set: {says}")


def test_weight_decay_may_be_zero_not_negative() -> None:
    ref = "cpu/CPUx1x1"
    assert _resolve("llama2_7b_finetune-pytorch", ref, weight_decay=0.0).hp["weight_decay"] == 0
    with pytest.raises(
        CatalogError, match=r"^--set: weight_decay: must be at least 0 \(got -0.1\)$"
    ):
        _resolve("llama2_7b_finetune-pytorch", ref, weight_decay=-0.1)


def test_a_cases_own_bounds_are_inclusive() -> None:
    ref = "cpu/CPUx1x1"
    spec = _resolve("llama2_7b_finetune-pytorch", ref, mmlu_shots=0, lr_gamma=1.0)
    assert (spec.hp["mmlu_shots"], spec.hp["lr_gamma"]) == (0, 1.0)
    assert _resolve("llama2_7b_finetune-pytorch", ref, mmlu_shots=5).hp["mmlu_shots"] == 5
    with pytest.raises(CatalogError, match=r"^--set: mmlu_shots: must be at most 5 \(got 6\)$"):
        _resolve("llama2_7b_finetune-pytorch", ref, mmlu_shots=6)
    with pytest.raises(CatalogError, match=r"^--set: lr_gamma: must be at least 0 \(got -0.5\)$"):
        _resolve("llama2_7b_finetune-pytorch", ref, lr_gamma=-0.5)


def test_a_missing_field_is_named_without_a_value(cases: Path) -> None:
    path = cases / "distilbert-pytorch" / "case.yaml"
    path.write_text("\n".join(ln for ln in path.read_text().splitlines() if ln != "kind: training"))
    with pytest.raises(CatalogError) as err:
        catalog.load_case("distilbert-pytorch", cases)
    assert str(err.value).endswith("case.yaml: kind: missing")


def test_an_unknown_config_lists_the_known_ones(cases: Path) -> None:
    case = catalog.load_case("distilbert-pytorch", cases)
    with pytest.raises(CatalogError, match=r"known: cpu/CPUx1x1, .*nvidia/A100x1x8"):
        catalog.load_config(case, "cpu/CPUx9x9")
    shutil.rmtree(cases / "distilbert-pytorch" / "configs")
    with pytest.raises(CatalogError, match=r"\(known: none\)$"):
        catalog.load_config(case, "cpu/CPUx9x9")


def test_an_unknown_config_field_is_named(cases: Path) -> None:
    write_config(cases, "CPUx1x3", "overrides: {}\nzeta: 1\nalpha: 2\n")
    case = catalog.load_case("distilbert-pytorch", cases)
    with pytest.raises(CatalogError, match=r"CPUx1x3.yaml: alpha: unknown field"):
        catalog.load_config(case, "cpu/CPUx1x3")


def test_a_set_value_that_is_not_yaml_is_named() -> None:
    with pytest.raises(CatalogError, match=r"^--set lr: value '\[1,' is not a valid scalar$"):
        catalog.parse_sets(["lr=[1,"])


def test_a_config_is_named_by_chip_nodes_and_devices() -> None:
    spec = _resolve("distilbert-pytorch", "nvidia/A100x2x8")
    assert (spec.config.name, spec.config.ref, spec.world_size) == (
        "A100x2x8",
        "nvidia/A100x2x8",
        16,
    )
    assert spec.precision == spec.hp["precision"]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("env: [A, B]\n", "env: expected a mapping of NAME: value"),
        ("env: {lower: x}\n", "env.lower: not a variable name"),
        ("env: {9LIVES: x}\n", "env.9LIVES: not a variable name"),
        ("env: {A-B: x}\n", "env.A-B: not a variable name"),
        ("env: {PYTHONPATH: /x}\n", "env.PYTHONPATH: not a vendor setting a config may pass"),
        ("env: {LD_PRELOAD: /x.so}\n", "env.LD_PRELOAD: not a vendor setting a config may"),
        ("env: {PATH: /x}\n", "env.PATH: not a vendor setting"),
        ("env: {MASTER_PORT: '1'}\n", "env.MASTER_PORT: not a vendor setting"),
        ("env: {TORCHELASTIC_RUN_ID: x}\n", "env.TORCHELASTIC_RUN_ID: not a vendor setting"),
        ("env: {SLURM_NTASKS: '2'}\n", "env.SLURM_NTASKS: not a vendor setting"),
        ("env: {GLOO_SOCKET_IFNAME: eth0}\n", "env.GLOO_SOCKET_IFNAME: not a vendor setting"),
        ("env: {NCCL_SOCKET_IFNAME: ib0}\n", "env.NCCL_SOCKET_IFNAME: a config may not set it"),
        ("env: {CUDA_VISIBLE_DEVICES: '0'}\n", "CUDA_VISIBLE_DEVICES: a config may not set it"),
        ("env: {NCCL_NET_PLUGIN: x}\n", "env.NCCL_NET_PLUGIN: a config may not set it: it names"),
        ("env: {CUDA_INJECTION64_PATH: /x}\n", "INJECTION64_PATH: a config may not set it"),
        ("env: {OMP_TOOL_LIBRARIES: /x.so}\n", "OMP_TOOL_LIBRARIES: a config may not set it"),
        ("env: {NCCL_CONF_FILE: /x}\n", "env.NCCL_CONF_FILE: a config may not set it"),
        ("env: {TORCH_HUB: /x}\n", "env.TORCH_HUB: not a vendor setting"),
        ("env: {BKCL_FORCE_SYNC: 1}\n", 'env.BKCL_FORCE_SYNC: expected a string; quote it ("1")'),
        ("env: {CUDA_A: true}\n", "env.CUDA_A: expected a string (got True)"),
        ("env: {CUDA_A: {B: c}}\n", "env.CUDA_A: expected a string (got {'B': 'c'})"),
        ("env: {CUDA_A: [b]}\n", "env.CUDA_A: expected a string (got ['b'])"),
        ("env: {CUDA_A: null}\n", "env.CUDA_A: expected a string (got None)"),
        ('env: {CUDA_A: "x\\0y"}\n', "env.CUDA_A: a NUL character cannot be in the environment"),
        ("env: {CUDA_A: " + "x" * 4097 + "}\n", "env.CUDA_A: longer than 4096 characters"),
    ],
)
def test_a_bad_env_names_file_and_field(cases: Path, text: str, needle: str) -> None:
    path = write_config(cases, "CPUx1x3", "overrides: {}\n" + text)
    case = catalog.load_case("distilbert-pytorch", cases)
    with pytest.raises(CatalogError) as err:
        catalog.load_config(case, "cpu/CPUx1x3")
    message = str(err.value)
    assert message.startswith(f"{path}: env")
    assert needle in message
    assert "\n" not in message


def test_a_config_env_is_kept_as_written(cases: Path) -> None:
    write_config(
        cases,
        "CPUx1x3",
        'env: {NCCL_PROTO: "", XMLIR_B: "{data_dir}/t {{ x }}", NCCL_DEBUG: INFO}\n',
    )
    case = catalog.load_case("distilbert-pytorch", cases)
    config = catalog.load_config(case, "cpu/CPUx1x3")
    assert config.env == {"NCCL_PROTO": "", "XMLIR_B": "{data_dir}/t {{ x }}", "NCCL_DEBUG": "INFO"}
    assert catalog.resolve(case, config).config.env == config.env
    write_config(cases, "CPUx1x4", "overrides: {}\n")  # no env: none
    assert catalog.load_config(case, "cpu/CPUx1x4").env == {}


def test_seed_004s_kunlunxin_config_carries_its_vendor_settings() -> None:
    """FlagPerf's environment_variables.sh for the R300 row (issue 19 point 7)."""
    case = catalog.load_case("llama2_7b-deepspeed")
    config = catalog.load_config(case, "kunlunxin/R300x1x8")
    assert config.env == {
        "XDNN_FC_GEMM_DTYPE": "float32",
        "BKCL_FORCE_SYNC": "1",
        "XPU_FC_AUTOTUNE_FILE": "{data_dir}/fc_autotune_fp16.log",
    }


def test_a_typo_is_answered_with_the_near_name() -> None:
    """Issue 29 point 9: `--set max_sample=800`, a misspelt case or config names what was meant."""
    case = catalog.load_case("glm-pytorch")
    config = catalog.load_config(case, "cpu/CPUx1x1")
    with pytest.raises(CatalogError) as hp:
        catalog.resolve(case, config, catalog.parse_sets(["max_sample=800"]))
    assert str(hp.value) == (
        "--set: max_sample: case glm-pytorch has no such hyperparameter;"
        " did you mean 'max_samples'?"
    )
    with pytest.raises(
        CatalogError, match=r"^unknown case 'glm-pytorc'; did you mean 'glm-pytorch'\? \(known: "
    ):
        catalog.load_case("glm-pytorc")
    with pytest.raises(
        CatalogError, match=r"no config 'cpu/CPUx1x2'; did you mean 'cpu/CPUx1x1'\?"
    ):
        catalog.load_config(case, "cpu/CPUx1x2")
    with pytest.raises(
        CatalogError, match=r"e\.g\. cpu/CPUx1x1; did you mean 'nvidia/A100x1x8'\?$"
    ):
        catalog.load_config(case, "A100x1x8")
    with pytest.raises(CatalogError) as far:  # nothing near: no guess
        catalog.resolve(case, config, catalog.parse_sets(["zzz=1"]))
    assert str(far.value) == "--set: zzz: case glm-pytorch has no such hyperparameter"
