"""cases/llama2_7b-deepspeed: prepare and preprocessing, the DeepSpeed config, ZeRO-3 on two
processes over gloo, and the case through ``fleetperf --batch``.

DeepSpeed compiles its CPU shared-memory op on first use (minutes on 2 cores); the workload
caches the build in DATA_ROOT/.torch_extensions, which these tests point at pytest's cache
directory so that only the first session pays for it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, Fleetperf
from llm_cases import ZERO3, case_module, events, prepare, resolved_config, run_workload


# Building it takes seconds (a synthetic model and data set): the tests that use it are slow.
@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    root = tmp_path_factory.mktemp("zero3")
    cache = getattr(request.config, "cache", None)
    if cache is not None:
        (root / ".torch_extensions").symlink_to(cache.mkdir("torch_extensions"))
    proc = prepare(ZERO3, "--synthetic", "--out", str(root / ZERO3))
    assert proc.returncode == 0, proc.stderr
    return root


@pytest.fixture(scope="module")
def ds_config():
    return case_module(ZERO3, "ds_config")


def _hp(ref: str) -> tuple[dict, int, str]:
    from tui.catalog import catalog

    case = catalog.load_case(ZERO3)
    spec = catalog.resolve(case, catalog.load_config(case, ref))
    return spec.hp, spec.world_size, spec.precision


@pytest.mark.parametrize(
    ("ref", "micro", "precision_key"),
    [
        ("kunlunxin/R300x1x8", 12, "fp16"),
        ("nvidia/A100x1x8", 1, "fp16"),
        ("nvidia/H100x1x8", 1, "fp16"),
        ("cpu/CPUx1x2", 2, "bf16"),
    ],
)
def test_ds_config_follows_the_resolved_hp(ds_config, ref: str, micro: int, precision_key: str):
    hp, world, precision = _hp(ref)
    built = ds_config.build({**hp, "gradient_accumulation_steps": 3}, precision, world)
    assert built["train_micro_batch_size_per_gpu"] == micro
    assert built["train_batch_size"] == micro * 3 * world  # GBS = LBS x GAS x DP
    assert built["zero_optimization"]["stage"] == 3
    assert built[precision_key]["enabled"] is True
    assert ({"fp16", "bf16"} - {precision_key}).pop() not in built
    assert built["optimizer"]["params"]["lr"] == hp["learning_rate"]
    assert "fp16" not in ds_config.build(hp, "fp32", world)  # fp32: no half section


# FlagPerf's training/benchmarks/llama2_7b/deepspeed/ds_config.json at 43625f67, as json.load
# reads it (hand-copied: FlagPerf is not a dependency), with the two keys DeepSpeed fills in:
# its fp16 defaults of 0.10.1 (the seed's stack) under "enabled".
FLAGPERF_DS_CONFIG = {
    "gradient_accumulation_steps": 1,
    "train_micro_batch_size_per_gpu": 1,
    "prescale_gradients": False,
    "zero_allow_untested_optimizer": True,
    "optimizer": {
        "type": "AdamW",
        "params": {"lr": 1e-5, "weight_decay": 0.1, "betas": [0.9, 0.95], "eps": 1e-5},
    },
    "zero_optimization": {
        "stage": 3,
        "stage3_max_live_parameters": 1e9,
        "stage3_max_reuse_distance": 1e9,
        "stage3_prefetch_bucket_size": 1e7,
        "sub_group_size": 1e9,
        "contiguous_gradients": True,
        "allgather_bucket_size": 1e8,
        "reduce_bucket_size": 1e7,
        "overlap_comm": True,
        "reduce_scatter": True,
    },
    "steps_per_print": 50,
    "gradient_clipping": 1.0,
    "wall_clock_breakdown": False,
    "fp16": {
        "enabled": True,
        "loss_scale": 0,
        "initial_scale_power": 16,
        "loss_scale_window": 1000,
        "hysteresis": 2,
        "consecutive_hysteresis": False,
        "min_loss_scale": 1,
    },
    "activation_checkpointing": {
        "partition_activations": True,
        "contiguous_memory_optimization": False,
    },
}


def test_r300_ds_config_is_flagperfs_json(ds_config) -> None:
    """The R300 row's DeepSpeed config is FlagPerf's json key for key (issue 27 point 5):
    steps_per_print 50 (where FlagPerf reads its rate), the fp16 scaler as DeepSpeed 0.10.1
    ran it, zero_allow_untested_optimizer, its inert activation_checkpointing. Differences,
    each in docs/cases/llama2.md: the micro batch is the loader's 12 (FlagPerf's json says 1),
    with the global batch DeepSpeed derives from it, and torch_adam."""
    hp, world, precision = _hp("kunlunxin/R300x1x8")
    built = ds_config.build(hp, precision, world)
    assert built.pop("train_batch_size") == 12 * 8
    assert built["optimizer"]["params"].pop("torch_adam") is True
    assert built == {**FLAGPERF_DS_CONFIG, "train_micro_batch_size_per_gpu": 12}


def test_fp16_section_is_deepspeed_0_10_1s_defaults(ds_config) -> None:
    """Written out, the fp16 values are the ones FlagPerf's {"enabled": true} took at the
    seed's DeepSpeed 0.10.1; this venv's DeepSpeed keeps the same defaults."""
    from deepspeed.runtime import constants as c

    installed = {
        "loss_scale": c.FP16_LOSS_SCALE_DEFAULT,
        "initial_scale_power": c.FP16_INITIAL_SCALE_POWER_DEFAULT,
        "loss_scale_window": c.FP16_LOSS_SCALE_WINDOW_DEFAULT,
        "hysteresis": c.FP16_HYSTERESIS_DEFAULT,
        "consecutive_hysteresis": c.FP16_CONSECUTIVE_HYSTERESIS_DEFAULT,
        "min_loss_scale": c.FP16_MIN_LOSS_SCALE_DEFAULT,
    }
    assert installed == ds_config.FP16_AS_0_10_1


def test_loss_flagperf_is_the_last_printed_window() -> None:
    """run_pretraining.py: ave_loss += loss each step, printed / 10 and reset at every 0-based
    step index divisible by 10; the figure is the last print (here index 20: losses 11..20),
    not the steps after it, and a new epoch restarts the sum."""
    figures = case_module(ZERO3, "flagperf_figures").FlagPerfFigures()
    for i in range(25):
        figures.step_loss(i, float(i))
    assert figures.loss == pytest.approx(sum(range(11, 21)) / 10)
    figures.step_loss(0, 7.0)  # epoch 2, index 0: printed alone, over 10
    assert figures.loss == pytest.approx(0.7)


def test_tokens_per_s_flagperf_reads_deepspeeds_timer_at_print_steps() -> None:
    """FlagPerf reads DeepSpeed's RunningAvgSamplesPerSec where the timer logs it (every
    steps_per_print global steps, from step 3). Its timer counted micro batch 1 (its json)
    where the loader gave 12: Tokens/p/s = seqlength x batchsize x that / nproc x nnodes is
    the per-device rate on one host, nnodes^2 times it on more; its MFU puts 7e9 x 6 FLOPs
    on each token over theoryflops."""
    from deepspeed.runtime.config import DeepSpeedConfig
    from deepspeed.utils.timer import ThroughputTimer

    config = DeepSpeedConfig({"train_batch_size": 96, "train_micro_batch_size_per_gpu": 96})
    timer = ThroughputTimer(config.timers_config, batch_size=96, steps_per_output=5)
    figures = case_module(ZERO3, "flagperf_figures").FlagPerfFigures()
    logged = None
    for step in range(1, 8):
        timer.start()
        timer.stop(global_step=True)
        figures.read_timer(timer, 5)
        if step == 5:
            logged = timer.avg_samples_per_sec()
    assert logged is not None and figures.samples_per_s == logged  # step 5's, not step 7's
    figures.samples_per_s = 240.0  # 8 ranks x 12 sequences x 2.5 steps/s
    out = figures.metrics(seq=512, batch=12, nproc=8, nnodes=1, theory_flops=128e12)
    assert out["tokens_per_s_flagperf"] == pytest.approx(240 * 512 / 8)  # 15360 a device
    assert out["mfu_flagperf"] == pytest.approx(15360 * 42e9 / 128e12)
    figures.samples_per_s = 480.0  # 16 ranks on 2 hosts, the same 15360 a device
    two_hosts = figures.metrics(seq=512, batch=12, nproc=8, nnodes=2, theory_flops=0.0)
    assert two_hosts["tokens_per_s_flagperf"] == pytest.approx(4 * 15360)
    assert two_hosts["mfu_flagperf"] is None  # no theoryflops, no MFU


def test_r300_references_judge_the_seeds_figures() -> None:
    """The seed's loss is FlagPerf's printed loss (loss_flagperf), not the harness's; its mem
    is the device's, now read as the device reports it: a figure far below 29 GiB flags too."""
    from tui.catalog import catalog
    from tui.results.record import RunRecord
    from tui.results.references import verdict_for

    case = catalog.load_case(ZERO3, REPO / "cases")
    spec = catalog.resolve(case, catalog.load_config(case, "kunlunxin/R300x1x8"))

    def verdict(**metrics: float):
        record = RunRecord(
            run_id="20261126-000000-llama2_7b-deepspeed-0001",
            case=ZERO3,
            vendor="kunlunxin",
            config="R300x1x8",
            status="passed",
            started="2026-11-26T00:00:00Z",
            hp=spec.hp,
            fix_hp=spec.seed_fix_hp,
            metrics=metrics,
            case_metrics=case.metrics,
            environment={"accelerator": "Kunlunxin R300"},
            synthetic_data=False,
        )
        return verdict_for(record, spec, [])

    good = verdict(loss=9.0, loss_flagperf=5.3, mem_used_gib=29.5)
    assert {c.metric for c in good.checks} == {"loss_flagperf", "mem_used_gib"}
    assert not good.flagged
    low = verdict(loss=5.3, loss_flagperf=5.3, mem_used_gib=12.0)
    assert [c.metric for c in low.flagged] == ["mem_used_gib"]


def test_table_is_the_seed_004_table() -> None:
    """Seed 004's columns (配置, fix_hp, tokens/p/s, loss, mem, MFU: no precision column) and
    its R300 row's fix_hp as the seed writes it; a precision other than the seed's fp16 shows
    in fix_hp under the seed's name for it."""
    from tui.catalog import catalog
    from tui.results.record import RunRecord
    from tui.results.tables import to_markdown

    case = catalog.load_case(ZERO3, REPO / "cases")
    rows = []
    for i, ref in enumerate(("kunlunxin/R300x1x8", "cpu/CPUx1x2")):
        spec = catalog.resolve(case, catalog.load_config(case, ref))
        rows.append(
            RunRecord(
                run_id=f"r{i}",
                case=ZERO3,
                vendor=spec.config.vendor,
                config=spec.config.name,
                hosts=["h"],
                status="passed",
                started=f"2026-11-24T0{i}:00:00Z",
                finished=f"2026-11-24T0{i}:30:00Z",
                precision=spec.precision,
                fix_hp=spec.seed_fix_hp,
                metrics={"loss": 5.27, "mem_used_gib": 29.0, "mem_total_gib": 32.0},
                columns=case.report,
                short_names=case.short_names,
            )
        )
    lines = to_markdown(rows).splitlines()
    assert lines[2] == "| 配置 | fix_hp | tokens/p/s | loss | mem | MFU |"
    assert lines[4] == "| R300单机8卡（1x8） | MPE=512,LBS=12 | / | 5.27 | 29.0/32.0 | / |"
    assert lines[5].startswith("| CPU单机2卡（1x2） | 数据精度=bf16,MPE=128,LBS=2,")


@pytest.mark.slow
def test_preprocess_tokenizes_raw_text_in_name_order(data_root: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    from transformers import AutoTokenizer

    tokenizer_dir = data_root / ZERO3 / "llama2_7b_hf"
    texts = {"b.txt": "The old bridge opened a park.", "a.txt": "A local team visited a school."}
    raw = tmp_path / "raw"
    raw.mkdir()
    for name, text in texts.items():
        (raw / name).write_text(text)
    out = tmp_path / "tokens.npy"
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "cases" / ZERO3 / "preprocess.py"),
            "--tokenizer",
            str(tokenizer_dir),
            "--text-dir",
            str(raw),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    expected = [i for n in sorted(texts) for i in tok(texts[n])["input_ids"] + [tok.eos_token_id]]
    tokens = np.load(out)
    assert tokens.dtype == np.uint16 and tokens.tolist() == expected


@pytest.mark.slow
def test_synthetic_data_is_the_real_layout(data_root: Path) -> None:
    from transformers import LlamaConfig

    data = data_root / ZERO3
    shape = LlamaConfig.from_pretrained(data / "llama2_7b_hf")
    tokens = np.load(data / "openwebtext_llama2_100M.npy")
    assert tokens.ndim == 1 and len(tokens) > 50_000
    assert int(tokens.max()) < shape.vocab_size and tokens[0] == 1  # BOS first


@pytest.mark.slow
@pytest.mark.parametrize(
    ("breakage", "named"),
    [
        ("rm llama2_7b_hf/config.json", "llama2_7b_hf/config.json"),
        ("float openwebtext_llama2_100M.npy", "openwebtext_llama2_100M.npy"),
        ("vocab openwebtext_llama2_100M.npy", "openwebtext_llama2_100M.npy: token id 100000"),
    ],
)
def test_prepare_from_names_the_first_bad_file(
    data_root: Path, tmp_path: Path, breakage: str, named: str
) -> None:
    src = tmp_path / "src"
    shutil.copytree(data_root / ZERO3, src)
    action, rel = breakage.split()
    if action == "rm":
        (src / rel).unlink()
    else:
        bad = np.zeros(10, np.float32) if action == "float" else np.array([1, 100000], np.int32)
        np.save(src / rel, bad)
    proc = prepare(ZERO3, "--from", str(src), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and str(src / named) in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_prepare_from_stages_a_good_directory(data_root: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = prepare(ZERO3, "--from", str(data_root / ZERO3), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    name = "openwebtext_llama2_100M.npy"
    assert (out / name).read_bytes() == (data_root / ZERO3 / name).read_bytes()
    assert not (out / "fc_autotune_fp16.log").exists()  # optional: none in the source


@pytest.mark.slow
def test_prepare_from_stages_the_fc_autotune_table(data_root: Path, tmp_path: Path) -> None:
    """Kunlunxin's FC tiling table (the R300 row's XPU_FC_AUTOTUNE_FILE) comes with the data
    where the source has one: a container sees the case's data directory, not the source."""
    src = tmp_path / "src"
    shutil.copytree(data_root / ZERO3, src)
    (src / "fc_autotune_fp16.log").write_text("m=4096 n=4096 k=4096 tile=7\n")
    proc = prepare(ZERO3, "--from", str(src), "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    staged = tmp_path / "out" / "fc_autotune_fp16.log"
    assert staged.read_text() == "m=4096 n=4096 k=4096 tile=7\n"


@pytest.mark.slow  # prepares the case from scratch
def test_prepare_needs_no_other_case(tmp_path: Path) -> None:
    """The tiny Llama comes from harness.tiny: the case's prepare runs with the harness and
    its own folder only, and writes the data manifest itself."""
    import subprocess
    import sys

    cases = tmp_path / "cases"
    for part in ("harness", ZERO3):
        shutil.copytree(
            REPO / "cases" / part, cases / part, ignore=shutil.ignore_patterns("__pycache__")
        )
    out = tmp_path / "data"
    proc = subprocess.run(
        [
            sys.executable,
            str(cases / ZERO3 / "prepare.py"),
            "--synthetic",
            "--docs",
            "40",
            "--out",
            str(out),
        ],
        env={**os.environ, "PYTHONPATH": str(cases)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "fleetperf-data.json").read_text())["synthetic"] is True
    assert np.load(out / "openwebtext_llama2_100M.npy")[0] == 1  # BOS first


def test_model_flops_count_attention(ds_config) -> None:
    from transformers import LlamaConfig

    run = case_module(ZERO3, "run")
    c = LlamaConfig(
        vocab_size=32000,
        hidden_size=4096,
        intermediate_size=11008,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=32,
    )
    flops = run.model_flops(c, 4096)  # Llama-2-7B: 46.1e9 per token at 4096 (harness.flops)
    assert flops.per_token == pytest.approx(46.1e9, rel=2e-3)
    assert flops.per_token - 6 * 6.607e9 == pytest.approx(12 * 32 * 4096 * 4096, rel=1e-2)


@pytest.mark.slow
def test_missing_tokens_are_named_before_any_launch(data_root: Path, tmp_path: Path) -> None:
    partial = tmp_path / "partial"
    shutil.copytree(data_root / ZERO3 / "llama2_7b_hf", partial / "llama2_7b_hf")
    config = resolved_config(ZERO3, "cpu/CPUx1x2", tmp_path / "run")
    proc = run_workload(ZERO3, config, partial, timeout=300)
    assert proc.returncode == 2
    assert str(partial / "openwebtext_llama2_100M.npy") in proc.stderr
    (error,) = events(config.parent)
    assert error["kind"] == "error"


@pytest.mark.slow
def test_zero3_over_two_processes_through_fleetperf_batch(
    data_root: Path, tmp_path: Path, ds_config
) -> None:
    fp = Fleetperf(cases_dir=REPO / "cases", data_root=data_root, results=tmp_path / "res")
    out = fp.batch(ZERO3, "cpu/CPUx1x2", "max_tokens=16384", args=("--format", "json"), timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (rec,) = json.loads(out.stdout)
    assert rec["status"] == "passed" and rec["config"] == "CPUx1x2"
    m = rec["metrics"]
    for key in ("tokens_per_s_per_device", "loss", "mem_used_gib", "p_core"):
        assert isinstance(m[key], float) and m[key] > 0, key
    assert m["mfu"] is None  # no datasheet peak for a CPU

    host_run = fp.results / "hosts" / "localhost" / rec["run_id"]  # the workload's RUN_DIR
    received = events(host_run)
    result = received[-1]
    assert result["kind"] == "result" and result["world_size"] == 2
    # each rank holds its own part of the parameters, none the whole model
    shards, whole = result["zero3"]["shards"], result["zero3"]["elements"]
    assert len(shards) == 2 and all(0 < s < whole for s in shards) and sum(shards) >= whole
    # the DeepSpeed config the run used is the one built from its resolved hp
    hp = json.loads((host_run / "config.json").read_text())["hp"]
    built = json.loads(json.dumps(ds_config.build(hp, "bf16", 2)))
    assert json.loads((host_run / "ds_config.json").read_text()) == built
    steps = [e for e in received if e["kind"] == "step"]
    assert steps[-1]["loss"] < steps[0]["loss"]
    assert steps[-1]["tokens"] == steps[-1]["samples"] * hp["max_seq_length"] >= 16384
    # tokens/p/s: all ranks' tokens / time / 2 devices (FlagPerf divided by nproc, times nnodes)
    assert m["tokens_per_s_per_device"] == pytest.approx(m["p_train"] * hp["max_seq_length"] / 2)
    assert m["loss"] == pytest.approx(steps[-1]["loss"])
    # FlagPerf's figures beside them: its printed loss (rank 0, steps 21..30 of 32), its
    # Tokens/p/s from DeepSpeed's timer (one host: the per-device rate over another window),
    # no MFU without theoryflops
    assert 0 < m["loss_flagperf"] < steps[0]["loss"]
    assert m["tokens_per_s_flagperf"] == pytest.approx(m["tokens_per_s_per_device"], rel=0.35)
    assert m["mfu_flagperf"] is None
