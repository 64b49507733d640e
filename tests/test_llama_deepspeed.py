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
    from tui import catalog

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


def test_table_is_the_seed_004_table() -> None:
    """Seed 004's columns (配置, fix_hp, tokens/p/s, loss, mem, MFU: no precision column) and
    its R300 row's fix_hp as the seed writes it; a precision other than the seed's fp16 shows
    in fix_hp under the seed's name for it."""
    from tui import catalog
    from tui.record import RunRecord
    from tui.tables import to_markdown

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


def test_synthetic_data_is_the_real_layout(data_root: Path) -> None:
    from transformers import LlamaConfig

    data = data_root / ZERO3
    shape = LlamaConfig.from_pretrained(data / "llama2_7b_hf")
    tokens = np.load(data / "openwebtext_llama2_100M.npy")
    assert tokens.ndim == 1 and len(tokens) > 50_000
    assert int(tokens.max()) < shape.vocab_size and tokens[0] == 1  # BOS first


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


def test_prepare_from_stages_a_good_directory(data_root: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = prepare(ZERO3, "--from", str(data_root / ZERO3), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    name = "openwebtext_llama2_100M.npy"
    assert (out / name).read_bytes() == (data_root / ZERO3 / name).read_bytes()
    assert not (out / "fc_autotune_fp16.log").exists()  # optional: none in the source


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
    (rec,) = json.loads(out.stdout[out.stdout.index("\n[") :])
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
