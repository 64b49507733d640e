"""cases/harness: FLOPs formulas, peak table, event writer, sys sampler, guard."""

from __future__ import annotations

import json
import math
import multiprocessing
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "cases"))

import harness  # noqa: E402
from harness.events import EventWriter  # noqa: E402
from harness.perf import PerfTracker  # noqa: E402

TAIL = REPO / "playbooks" / "library" / "fleetperf_tail.py"
MODULE_UTILS = REPO / "playbooks" / "module_utils"
# Runs a module file with the repository's module_utils importable as
# ansible.module_utils.<name>, as Ansible's module packaging provides them.
RUN_MODULE = (
    "import runpy, sys, ansible.module_utils as mu; mu.__path__.append(sys.argv.pop(1)); "
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def read_events(path: Path, offset: int = 0) -> tuple[list[dict], int]:
    """The records after ``offset`` as the controller gets them: the real poll module, run
    as Ansible runs it (its own process, arguments in a JSON file), then parsed; a complete
    line that is not a JSON object (a torn line ended by a later writer) is skipped, as the
    controller's parser does."""
    run_dir = path.parent
    (run_dir / "workload.pid").touch()
    (run_dir / "events.offset").write_text(str(offset))
    module_args = {"run_dir": str(run_dir), "wait": 0, "timeout_s": 60, "stall_s": 60}
    args = run_dir / "tail-args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": module_args}))
    argv = [sys.executable, "-c", RUN_MODULE, str(MODULE_UTILS), str(TAIL), str(args)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    result = json.loads(done.stdout)
    records = []
    for line in result["lines"]:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records, result["offset"]


# ------------------------------------------------------------------------------ FLOPs
# Llama-2-7B: vocab 32000, hidden 4096, 32 layers, 32 heads, SwiGLU MLP 11008, untied lm_head.
V, D, L, H, FF = 32000, 4096, 32, 32, 11008
PER_LAYER = 4 * D * D + 3 * D * FF + 2 * D  # q k v o, gate up down, two RMSNorms
N_LLAMA = L * PER_LAYER + D + V * D  # + final norm + lm_head; the input embedding is left out
N_LORA = L * 2 * 8 * (D + D)  # r=8 on q_proj and v_proj: A (r x D) + B (D x r) each


def test_llama2_7b_parameter_convention():
    assert N_LLAMA == 6_607_343_616
    assert N_LLAMA + V * D == 6_738_415_616  # the published 6.74e9 total


@pytest.mark.parametrize(("seq_len", "expected"), [(4096, 46.1e9), (512, 40.4e9)])
def test_training_flops_per_token_llama2_7b(seq_len, expected):
    flops = harness.training_flops_per_token(N_LLAMA, L, H, D // H, seq_len)
    assert flops == pytest.approx(expected, rel=0.005)
    # the other conventions for N miss the published figure: the test pins ours
    without_lm_head = harness.training_flops_per_token(N_LLAMA - V * D, L, H, D // H, seq_len)
    with_everything = harness.training_flops_per_token(N_LLAMA + V * D, L, H, D // H, seq_len)
    assert without_lm_head != pytest.approx(expected, rel=0.01)
    assert with_everything != pytest.approx(expected, rel=0.01)


def test_lora_flops_per_token_llama2_7b():
    assert N_LORA == 4_194_304
    flops = harness.lora_training_flops_per_token(N_LLAMA, N_LORA, L, H, D // H, 512)
    assert flops == pytest.approx(27.3e9, rel=0.005)
    # by hand: frozen weights forward + input-gradient (4N), adapters in full (6 N_lora)
    assert harness.lora_training_flops_per_token(1000, 10, 2, 4, 8, 16) == (
        4 * 1000 + 6 * 10 + 12 * 2 * 4 * 8 * 16
    )
    assert harness.training_flops_per_token(1000, 2, 4, 8, 16) == 6 * 1000 + 12 * 2 * 4 * 8 * 16


def test_inference_flops_per_token():
    assert harness.inference_flops_per_token(1000, 2, 4, 8, 16) == 2 * 1000 + 4 * 2 * 4 * 8 * 16
    flops = harness.inference_flops_per_token(N_LLAMA, L, H, D // H, 4096)
    assert flops == pytest.approx(2 * N_LLAMA + 4 * L * D * 4096)


def test_non_embedding_params_of_real_llama_shape():
    transformers = pytest.importorskip("transformers")
    import torch

    config = transformers.LlamaConfig(
        vocab_size=V,
        hidden_size=D,
        intermediate_size=FF,
        num_hidden_layers=L,
        num_attention_heads=H,
        num_key_value_heads=H,
        tie_word_embeddings=False,
    )
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config)
    assert harness.non_embedding_params(model) == N_LLAMA


def test_non_embedding_params_counts_a_tied_output_projection_once():
    import torch

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok = torch.nn.Embedding(100, 8)
            self.pos = torch.nn.Embedding(16, 8)
            self.mlp = torch.nn.Linear(8, 8)
            self.head = torch.nn.Linear(8, 100, bias=False)
            self.head.weight = self.tok.weight

        def get_output_embeddings(self) -> torch.nn.Module:
            return self.head

    assert harness.non_embedding_params(Tiny()) == (8 * 8 + 8) + 100 * 8


# ------------------------------------------------------------------------ peak and MFU
def test_peak_table_dense_figures():
    assert harness.peak_flops("A100", "fp32") == 19.5e12
    assert harness.peak_flops("A100", "tf32") == 156e12
    assert harness.peak_flops("A100", "fp16") == 312e12
    assert harness.peak_flops("A100", "bf16") == 312e12
    assert harness.peak_flops("A100", "amp") == 312e12  # autocast to fp16
    assert harness.peak_flops("a800", "bf16") == 312e12
    assert harness.peak_flops("H100", "bf16") == pytest.approx(989.5e12)  # 1979 sparse / 2
    assert harness.peak_flops("h100_sxm5", "bf16") == harness.peak_flops("H800", "bf16")
    assert harness.peak_flops("BI-V100", "fp16") == 147e12


def _documented_peaks() -> dict[str, dict[str, float | None]]:
    """docs/metrics.md's datasheet table: chip -> math -> FLOP/s (None: empty cell)."""
    text = (REPO / "docs" / "metrics.md").read_text()
    block = text.split("### Datasheet dense peaks")[1].split("\n\n")[2]
    header, _, *rows = [ln.strip("|").split("|") for ln in block.strip().splitlines()]
    maths = [h.strip() for h in header[1:]]
    return {
        cells[0].strip(): {
            m: float(c) * 1e12 if c.strip() else None for m, c in zip(maths, cells[1:], strict=True)
        }
        for cells in rows
    }


def test_every_peak_is_the_documented_one_at_its_own_precision():
    """Chip by chip and precision by precision (where two chips or two precisions differ,
    a swapped entry or mapping shows), in both directions: no figure without a row."""
    documented = _documented_peaks()
    assert set(documented) == set(harness.peak.PEAK_FLOPS)
    for chip, by_math in documented.items():
        for mode, flops in by_math.items():
            assert harness.peak_flops(chip, mode) == pytest.approx(flops, rel=1e-12), (chip, mode)
        assert harness.peak_flops(chip, "amp") == harness.peak_flops(chip, "fp16"), chip
        assert set(harness.peak.PEAK_FLOPS[chip]) == {m for m, f in by_math.items() if f}, chip


@pytest.mark.parametrize(
    ("device_name", "chip"),
    [
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A800 80GB PCIe", "A800"),
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA H100 PCIe", "H100-PCIE"),
        ("NVIDIA H100 NVL", None),
        ("NVIDIA H800", "H800"),
        ("NVIDIA H800 PCIe", None),
        ("NVIDIA H200", "H200"),
        ("NVIDIA H200 NVL", None),
        ("Tesla V100-SXM2-32GB", "V100"),
        ("Tesla V100-PCIE-16GB", "V100-PCIE"),
        ("Iluvatar BI-V100", "BI-V100"),
        ("Iluvatar BIV100", "BI-V100"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA A100 40GB", "A100"),
        ("Tesla T4", "T4"),
        ("NVIDIA A16", None),
        ("Kunlunxin R300", "R300"),
        ("AMD EPYC 7B13", None),
    ],
)
def test_the_hardware_name_picks_its_own_row(device_name, chip):
    assert harness.peak.chip_from_device_name(device_name) == chip


@pytest.mark.parametrize(
    ("spelling", "chip"),
    [
        ("h100_sxm5", "H100"),
        ("H100 SXM", "H100"),
        ("h800-sxm", "H800"),
        ("H200_SXM", "H200"),
        ("v100-sxm2", "V100"),
        ("A100-SXM4", "A100"),
        ("a100 pcie", "A100"),
        ("BIV100", "BI-V100"),
        (" t4 ", "T4"),
    ],
)
def test_config_spellings_of_a_chip(spelling, chip):
    assert harness.peak.normalize_chip(spelling) == chip


def test_r300_peak_is_flagperfs_theoryflops_and_says_so():
    """Seed 004: FlagPerf's MFU divides by theoryflops 128e12 (config_R300x1x8.py @43625f67);
    Kunlunxin publishes no figure, so the result names the source (issue 27 point 5)."""
    peak, note = harness.peak.datasheet_peak("R300", "Kunlunxin R300", "fp16")
    assert peak == 128e12
    assert note is not None and "FlagPerf's theoryflops" in note and "43625f67" in note
    assert harness.peak.datasheet_peak("A100", "NVIDIA A100-SXM4-40GB", "fp16") == (312e12, None)


def test_peak_unknown_chip_or_precision_is_none():
    assert harness.peak_flops("CPU", "fp32") is None
    assert harness.peak_flops("R300", "fp32") is None  # FlagPerf names only its fp16 figure
    assert harness.peak_flops("V100", "bf16") is None  # Volta has no bf16 tensor cores
    assert harness.peak_flops("A100", "int4") is None
    assert harness.peak_flops(None, "fp32") is None


# -------------------------------------------------------------------------- event writer
def test_event_writer_lines_are_complete_and_visible_at_once(tmp_path):
    path = tmp_path / "run" / "events.jsonl"
    clock = iter([100.0, 101.5]).__next__
    w = EventWriter(path, rank=0, local_rank=0, clock=clock)
    assert w.emit("start", world_size=2, case="c", precision="fp32")
    # no close(), no flush(): another reader sees the line already
    assert path.read_bytes().endswith(b"\n")
    assert json.loads(path.read_text()) == {
        "t": 100.0,
        "kind": "start",
        "rank": 0,
        "world_size": 2,
        "case": "c",
        "precision": "fp32",
    }
    assert w.emit("step", step=1, loss=float("nan"), lr=math.inf)
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    assert json.loads(lines[1])["loss"] is None  # NaN is not JSON: null
    assert json.loads(lines[1])["lr"] is None
    w.close()


def test_event_writer_rank_rules(tmp_path):
    path = tmp_path / "events.jsonl"
    node0_rank1 = EventWriter(path, rank=1, local_rank=1)
    assert not node0_rank1.emit("step", step=1)
    assert not node0_rank1.emit("result", status="passed")
    assert node0_rank1.emit("error", message="boom", traceback="")
    node1_rank0 = EventWriter(path, rank=2, local_rank=0)
    assert node1_rank0.emit("step", step=1)
    assert not node1_rank0.emit("result", status="passed")  # global rank 0 only
    assert EventWriter(path, rank=3, local_rank=1, all_ranks=True).emit("step", step=1)
    assert EventWriter(path, rank=0, local_rank=0).emit("result", status="passed")
    records, _ = read_events(path)
    assert [(r["kind"], r["rank"]) for r in records] == [
        ("error", 1),
        ("step", 2),
        ("step", 3),
        ("result", 0),
    ]
    with pytest.raises(ValueError, match="unknown event kind"):
        node1_rank0.emit("stpe")


def test_read_events_leaves_a_partial_line_for_later(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"t":1,"kind":"start","rank":0}\n{"t":2,"kind":"st')
    records, offset = read_events(path)
    assert [r["kind"] for r in records] == ["start"]
    assert offset == len(b'{"t":1,"kind":"start","rank":0}\n')
    with open(path, "ab") as f:
        f.write(b'ep","rank":0}\n')
    records, offset2 = read_events(path, offset)
    assert [r["kind"] for r in records] == ["step"]
    assert offset2 == path.stat().st_size


def test_writer_ends_a_torn_line_before_its_own(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"t":1,"kind":"start","rank":0}\n{"t":2,"kind":"st')  # writer died
    EventWriter(path).emit("error", message="restarted", traceback="")
    records, offset = read_events(path)
    assert [r["kind"] for r in records] == ["start", "error"]
    assert offset == path.stat().st_size


def _append_many(path: str, rank: int) -> None:
    w = EventWriter(path, rank=rank, local_rank=0)
    for i in range(300):
        w.emit("step", step=i, pad="x" * 3000)


def test_concurrent_writers_never_interleave_inside_a_line(tmp_path):
    path = tmp_path / "events.jsonl"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(str(path), r)) for r in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    lines = path.read_bytes().splitlines()
    assert len(lines) == 900
    assert all(json.loads(line)["kind"] == "step" for line in lines)


# ------------------------------------------------------------------------------ timers
# (the tracker's rates: tests/unit/test_tracker.py)
def test_step_end_without_begin_is_an_error():
    with pytest.raises(RuntimeError):
        PerfTracker().step_end(1)


def test_e2e_time_counts_from_process_start():
    age = harness.process_age_s()
    if sys.platform.startswith("linux"):
        assert age is not None and 0 < age < 24 * 3600
    perf = PerfTracker()
    assert perf.e2e_time() >= (age or 0.0) - 0.05


# --------------------------------------------------------------------- memory and sys
@pytest.fixture
def cpu_device():
    import torch

    try:
        yield harness.open_device("cpu", "fp32")
    finally:
        torch.set_flush_denormal(False)  # open_device set it for the process


def test_sys_sampler_fields(cpu_device):
    sample = harness.SysSampler(cpu_device).sample()
    assert {"cpu_percent", "host_mem_used_gib", "host_mem_total_gib"} <= set(sample)
    assert 0 < sample["host_mem_used_gib"] < sample["host_mem_total_gib"]
    assert not any(k.startswith("dev") for k in sample)  # no NVML figure on a CPU


def test_sys_monitor_samples_on_its_thread_and_once_at_stop(cpu_device, tmp_path):
    from harness.sysmon import SysMonitor

    path = tmp_path / "events.jsonl"
    monitor = SysMonitor(harness.SysSampler(cpu_device), EventWriter(path), interval_s=0.05)
    time.sleep(0.3)
    monitor.stop()
    records, _ = read_events(path)
    # Samples from the thread while the caller slept, then the one stop() took.
    assert len(records) >= 3 and {r["kind"] for r in records} == {"sys"}
    monitor.stop()  # a second stop writes nothing more, and the thread has ended
    time.sleep(0.15)
    assert len(read_events(path)[0]) == len(records)


# ------------------------------------------------------------------------------ guard
def test_guarded_turns_failures_into_error_events(tmp_path):
    path = tmp_path / "events.jsonl"
    w = EventWriter(path)

    def missing() -> int:
        harness.require_paths(tmp_path, ["checkpoint"])
        return 0

    def crash() -> int:
        raise RuntimeError("kaput\nsecond line")

    assert harness.guarded(w, lambda: 0) == 0
    assert harness.guarded(w, missing) == 2
    assert harness.guarded(w, crash) == 1
    records, _ = read_events(path)
    assert [r["kind"] for r in records] == ["error", "error"]
    assert str(tmp_path / "checkpoint") in records[0]["message"]
    assert records[1]["message"] == "RuntimeError: kaput second line"  # one line
    assert "crash" in records[1]["traceback"]


def test_load_config_names_the_path(tmp_path):
    with pytest.raises(harness.InputError, match=str(tmp_path / "nope.json")):
        harness.load_config(tmp_path / "nope.json")
    (tmp_path / "c.json").write_text('{"hp": {"a": 1}}')
    assert harness.load_config(tmp_path / "c.json")["hp"] == {"a": 1}


# --------------------------------------------------------------------------- registry
def test_docs_show_the_registry():
    from harness.metrics import markdown_table

    assert markdown_table() in (REPO / "docs" / "metrics.md").read_text()
