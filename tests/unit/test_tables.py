"""The tables, checked against the seeds' rows."""

from __future__ import annotations

import csv
import io
import json

from harness.metrics import METRICS
from seed_records import PEAK, inference, llama_finetune, seed001_records

from tui.results import tables
from tui.results.record import LOADED, METRIC_KEYS, CaseMetric, RunRecord
from tui.results.tables import config_label, format_fix_hp, to_csv, to_json, to_markdown


def test_config_labels() -> None:
    assert config_label("A100", 1, 8) == "A100单机8卡（1x8）"
    assert config_label("A100", 1, 1) == "A100单机单卡（1x1）"
    assert config_label("BI-V100", 2, 8) == "BI-V100两机8卡（2x8）"
    assert config_label("A100", 4, 8) == "A100四机8卡（4x8）"
    assert config_label("A100", 10, 8) == "A100十机8卡（10x8）"
    assert config_label("A100", 16, 8) == "A10016机8卡（16x8）"


def test_format_fix_hp() -> None:
    short = {"train_batch_size": "bs", "learning_rate": "lr"}
    assert format_fix_hp({}, short) == "/"
    assert format_fix_hp({"train_batch_size": 8, "learning_rate": 1e-05}, short) == "bs=8,lr=1e-05"
    assert format_fix_hp({"warmup_steps": 0, "fused": True}, short) == "warmup_steps=0,fused=true"
    assert format_fix_hp({"precision": "fp16"}, short, exclude=["precision"]) == "/"


def test_markdown_reproduces_seed_001() -> None:
    assert to_markdown(seed001_records()) == "\n".join(
        [
            "### distilbert-pytorch",
            "",
            "| 配置 | precision | fix_hp | e2e_time | p_whole | p_train | p_core | acc | mem |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
            "| A100单机8卡（1x8） | fp32 | / | 361.0 | 1764.0 | 1861.9 | 1942.6 | 0.915 | 13.9/40.0 |",  # noqa: E501 (seed rows verbatim)
            "| A100单机8卡（1x8） | fp32 | bs=96 | 334.7 | 2019.1 | 2135.8 | 2181.0 | 0.908 | 33.4/40.0 |",  # noqa: E501 (seed rows verbatim)
            "| A100单机单卡（1x1） | fp32 | bs=96,lr=0.00015 | 720.8 | 283.7 | 286.1 | 287.9 | 0.912 | 32.7/40.0 |",  # noqa: E501 (seed rows verbatim)
            "| A100两机8卡（2x8） | fp32 | bs=96 | 58.9 | 3531.1 | 3892.3 | 4058.3 | 0.911 | 32.9/40.0 |",  # noqa: E501 (seed rows verbatim)
            "",
            "Units: e2e_time: seconds; p_whole: samples/s; p_train: samples/s; p_core: samples/s;"
            " acc: fraction of 1; mem: GiB used/total.",
            "",
        ]
    )


def test_markdown_llama_finetune_seed_003() -> None:
    records = [
        llama_finetune(
            "l1",
            {},
            {
                "tokens_per_s_per_device": 2788.2,
                "loss": 1.64,
                "acc": 0.38,
                "mem_used_gib": 37.3,
                "mem_total_gib": 40.0,
            },
        ),
        llama_finetune(
            "l2",
            {"precision": "fp16", "local_batchsize": 4},
            {
                "tokens_per_s_per_device": 4017,
                "loss": 1.77,
                "acc": 0.43,
                "mem_used_gib": 32.0,
                "mem_total_gib": 40.0,
                "mfu": 0.361,
            },
        ),
    ]
    lines = to_markdown(records).splitlines()
    assert lines[2] == "| 配置 | fix_hp | tokens/p/s | loss | mem | acc(MMLU) | MFU |"
    # No precision column here, so a precision override shows in fix_hp, as in seed 003.
    assert lines[4] == "| A100单机单卡（1x1） | / | 2788 | 1.64 | 37.3/40.0 | 0.380 | / |"
    assert lines[5] == (
        "| A100单机单卡（1x1） | 数据精度=fp16,local_batchsize=4 | 4017 | 1.77 | 32.0/40.0 | 0.430 "
        "| 36.1% |"
    )


def test_markdown_inference_seed_002() -> None:
    lines = to_markdown([inference("i1")]).splitlines()
    assert lines[0] == "### aquila_33b-inference"
    assert lines[2] == (
        "| 配置 | precision | e2e_time | p_val_whole | p_val_core | p_infer_whole | p_infer_core "
        "| MFU | loss | mem |"
    )
    assert lines[4] == (
        "| A100单机8卡（1x8） | fp16 | 2479.9 | / | / | 8711.0 | 8724.0 | 23.8% | 3.0075 | 12.3/40.0 |"  # noqa: E501
    )


def test_markdown_one_table_per_case() -> None:
    text = to_markdown([seed001_records()[0], inference("i1"), seed001_records()[2]])
    assert text.count("### ") == 2
    distil, infer = text.split("\n### ")
    assert distil.count("| A100") == 2
    assert infer.startswith("aquila_33b-inference")
    assert to_markdown([]) == ""


def test_markdown_marks_failed_runs() -> None:
    ok, bad = seed001_records()[2], seed001_records()[3]
    failed = bad.model_validate(
        {
            **bad.model_dump(),
            "status": "failed",
            "error": "CUDA out of memory | rank 3",
            "metrics": {"e2e_time": 40.2, "mem_used_gib": 39.9, "mem_total_gib": 40.0},
        }
    )
    lines = to_markdown([ok, failed]).splitlines()
    assert lines[2].endswith("| mem | status |")
    assert lines[4].endswith("| 32.7/40.0 | passed |")
    assert lines[5] == (
        "| A100两机8卡（2x8） | fp32 | bs=96 | 40.2 | / | / | / | / | 39.9/40.0 "
        "| failed: CUDA out of memory \\| rank 3 |"
    )
    # All passed: no status column (the seeds have none).
    assert "status" not in to_markdown([ok])


def test_csv_parses_back() -> None:
    records = seed001_records() + [inference("i1")]
    rows = list(csv.DictReader(io.StringIO(to_csv(records))))
    units = {m.name: m.unit for m in METRICS.values()}
    assert list(rows[0]) == [
        "run_id",
        "case",
        "vendor",
        "config",
        "status",
        "smoke",
        "started",
        "precision",
        "fix_hp",
        *(f"{k} ({units[k]})" if units[k] else k for k in METRIC_KEYS),
    ]
    assert [row["run_id"] for row in rows] == ["r1", "r2", "r3", "r4", "i1"]
    assert json.loads(rows[2]["fix_hp"]) == {"train_batch_size": 96, "learning_rate": 0.00015}
    assert float(rows[2]["p_core (samples/s)"]) == 287.9
    assert rows[2]["loss"] == ""  # unknown -> empty cell
    assert float(rows[4]["mfu (fraction)"]) == 0.238


def test_a_run_on_a_loaded_host_is_flagged() -> None:
    quiet, busy = seed001_records()[:2]
    busy = busy.model_copy(update={"load_per_cpu": 1.5})
    lines = to_markdown([quiet.model_copy(update={"load_per_cpu": 0.1}), busy]).splitlines()
    assert lines[2].endswith("| mem | status |")
    assert lines[4].endswith("| 13.9/40.0 | passed |")
    assert lines[5].endswith("| passed (loaded host: load 1.5 per CPU at start) |")


def test_a_run_on_synthetic_data_is_flagged() -> None:
    real, synthetic = seed001_records()[:2]
    synthetic = synthetic.model_copy(update={"synthetic_data": True})
    lines = to_markdown([real.model_copy(update={"synthetic_data": False}), synthetic])
    rows = lines.splitlines()
    assert rows[4].endswith("| 13.9/40.0 | passed |")
    assert rows[5].endswith("| passed (synthetic data: fleetperf prepare --synthetic) |")


def test_ids_legend_and_csv_end() -> None:
    records = seed001_records()
    lines = to_markdown(records, ids=True).splitlines()
    assert lines[2].startswith("| run | date | 配置 |")
    assert lines[4].startswith("| r1 | 2026-11-21 | A100单机8卡（1x8） |")
    assert lines[-1].startswith("Units: e2e_time: seconds;")
    text = to_csv(records)
    assert not text.endswith("\n") and len(text.splitlines()) == 5


def test_seed_styles_of_loss_and_tokens() -> None:
    assert (tables._loss(3.0), tables._loss(3.0075), tables._loss(1.64)) == (
        "3.0",
        "3.0075",
        "1.64",
    )
    assert (tables._tokens(2788.4), tables._tokens(100.0), tables._tokens(99.5)) == (
        "2788",
        "100",
        "99.5",
    )


def test_a_long_error_is_cut_at_80_characters() -> None:
    bad = seed001_records()[3]
    for length, shown in ((80, "x" * 80), (81, "x" * 79 + "…")):
        failed = bad.model_validate({**bad.model_dump(), "status": "failed", "error": "x" * length})
        assert f"| failed: {shown} |" in to_markdown([failed])


def test_json_keeps_text_as_written_and_is_indented() -> None:
    record = llama_finetune("l-1", {"mmlu_subjects": ["高中数学"]}, {"loss": 1.5})
    text = to_json([record])
    assert '"高中数学"' in text and "\\u" not in text
    assert text.startswith('[\n  {\n    "run_id": "l-1",')
    assert format_fix_hp({"subjects": {"名": 1}}, {}) == 'subjects={"名":1}'


def test_short_id_is_the_run_ids_tail() -> None:
    assert tables.short_id("20261121-193000-emitter-3fa2") == "3fa2"


def test_render_defaults_to_no_ids() -> None:
    records = seed001_records()
    assert tables.render(records, "md") == to_markdown(records)
    assert "| run |" not in tables.render(records, "md")
    assert tables.render(records, "json") == to_json(records)


def test_the_busy_threshold_is_inclusive_and_a_half_known_memory_is_unknown() -> None:
    quiet, busy = seed001_records()[:2]
    at = busy.model_copy(update={"load_per_cpu": LOADED})
    assert "(loaded host: load 0.5 per CPU at start)" in to_markdown([quiet, at])
    half = busy.model_copy(update={"metrics": {**busy.metrics, "mem_total_gib": None}})
    assert to_markdown([half]).splitlines()[4].endswith(" | / |")


def test_csv_keeps_precision_and_text_as_written() -> None:
    record = llama_finetune("l-1", {"mmlu_subjects": ["高中数学"]}, {"loss": 1.5})
    (row,) = csv.DictReader(io.StringIO(to_csv([record])))
    assert row["precision"] == "fp32" and "高中数学" in row["fix_hp"]


def test_a_tf32_run_shows_the_seeds_label_beside_the_math_that_ran() -> None:
    """The seed's A100 "fp32" rows ran TF32: a tf32 run is "fp32 (TF32)"; strict fp32 stays
    "fp32"; an fp32 run whose matmuls ran in TF32 (its peak's math) says so too. CSV and
    JSON keep the precision as recorded."""
    r3 = seed001_records()[2]
    peak = {"chip": "A100", "math": "tf32", "datasheet_flops": 156e12}
    tf32 = r3.model_copy(update={"precision": "tf32", "fix_hp": {**r3.fix_hp, "precision": "tf32"}})
    switched = r3.model_validate({**r3.model_dump(), "run_id": "r5", "peak": peak})
    strict = r3.model_validate({**r3.model_dump(), "run_id": "r6", "peak": {"math": "fp32"}})
    rows = to_markdown([tf32, switched, strict]).splitlines()[4:7]
    assert rows[0].startswith("| A100单机单卡（1x1） | fp32 (TF32) | bs=96,lr=0.00015 | 720.8 |")
    assert rows[1].startswith("| A100单机单卡（1x1） | fp32 (TF32) | bs=96,lr=0.00015 |")
    assert rows[2].startswith("| A100单机单卡（1x1） | fp32 | bs=96,lr=0.00015 |")
    assert tables.precision_label(inference("i1")) == "fp16"
    (row,) = csv.DictReader(io.StringIO(to_csv([tf32])))
    assert row["precision"] == "tf32"


def test_peak_text_says_what_each_mfu_divides() -> None:
    r3 = seed001_records()[2]
    metrics = {**r3.metrics, "mfu": 41.8 / 156, "mfu_measured": 41.8 / 120}
    record = r3.model_validate({**r3.model_dump(), "peak": PEAK, "metrics": metrics})
    assert tables.peak_text(record).splitlines() == [
        "peak (what MFU divides; per device):",
        "  chip                       A100",
        "  math                       tf32",
        "  model FLOP/s per device    41.8 TFLOP/s",
        "  datasheet peak             156 TFLOP/s  (mfu = model FLOP/s per device / this = 26.8%)",
        "  measured peak              120 TFLOP/s  (mfu_measured = model FLOP/s per device / this"
        " = 34.8%)",
        "  measured memory bandwidth  1500 GB/s",
    ]
    cpu = r3.model_validate({**r3.model_dump(), "peak": {"math": "fp32"}})
    assert "chip                       no datasheet entry" in tables.peak_text(cpu)
    assert "datasheet peak             /  (mfu = model FLOP/s per device / this = /)" in (
        tables.peak_text(cpu)
    )
    assert tables.peak_text(r3).startswith("peak: not reported")


def test_a_base_case_s_table_is_its_own_metrics() -> None:
    """kind: base: the report's columns alone, no model rate nor MFU; no peak, and its
    details say why."""
    own = [
        CaseMetric(name="mem_bw_gbps", unit="GB/s", higher_is_better=True, fmt=".4g", meaning="m"),
        CaseMetric(
            name="mem_bw_gbps_ratio", unit="fraction", higher_is_better=True, fmt="pct", meaning="r"
        ),
    ]
    record = RunRecord(
        run_id="20261121-193000-base-memory-bandwidth-3fa2c01d9e4b7a65",
        case="base-memory-bandwidth",
        vendor="cpu",
        config="CPUx1x1",
        status="passed",
        started="2026-11-21T10:00:00Z",
        case_metrics=own,
        metrics={"mem_bw_gbps": 12.5, "mem_bw_gbps_ratio": None},
        columns=["mem_bw_gbps", "mem_bw_gbps_ratio"],
    )
    assert to_markdown([record]).splitlines()[2:5] == [
        "| 配置 | mem_bw_gbps | mem_bw_gbps_ratio |",
        "| --- | --- | --- |",
        "| CPU单机单卡（1x1） | 12.5 | / |",
    ]
    assert tables.peak_text(record).startswith("peak: not reported (a base case runs no model")
